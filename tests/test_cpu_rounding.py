"""The rounding contract on the CPU: x * w + b is rounded once from its exact value to float32 (what an FMA
gives, and the GPU's fmaf), then to the output dtype to nearest even. Checked with exact rational
arithmetic (a float64 reference is itself rounded and can be the wrong one), and bit for bit across the
CPU capabilities: the baseline x86-64 path (no FMA instruction) is forced in a subprocess with
FUSED_INPUT_NORM_CPU_CAPABILITY=default, whatever CPU runs the tests."""

import json
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
import torch

import fused_input_norm
from fused_input_norm import affine

FLOAT32_MAX = Fraction(float(np.finfo(np.float32).max))


def round_to_float32(q: Fraction) -> float:
    """The float32 nearest to the exact rational q, ties to even (float() then .astype would round twice)."""
    guess = np.float32(float(q))
    candidates = {guess, np.nextafter(guess, np.float32(np.inf)), np.nextafter(guess, np.float32(-np.inf))}
    finite = [c for c in candidates if np.isfinite(c)]
    best = min(finite, key=lambda c: (abs(Fraction(float(c)) - q), int(np.float32(c).view(np.uint32)) & 1))
    # Past the largest float32 by half an ulp or more: inf (the tie rounds to the even infinity).
    half_ulp = Fraction(2) ** (127 - 24)
    if abs(q) >= FLOAT32_MAX + half_ulp:
        return float("inf") if q > 0 else float("-inf")
    return float(best)


def exact_affine(x: np.ndarray, w: float, b: float) -> np.ndarray:
    return np.array([round_to_float32(Fraction(float(v)) * Fraction(w) + Fraction(b)) for v in x], np.float32)


def double_rounding_cases():
    """[C] weights and biases for which float32(float32(x*w) + b), the multiply-then-add the baseline ISA
    would do without an FMA, differs from the exact rounding for many uint8 x, plus channels where b absorbs
    most of x*w (where a float64 reference can be wrong too)."""
    rng = np.random.default_rng(18)
    x = np.arange(256, dtype=np.float32)
    chosen_w, chosen_b = [], []
    while len(chosen_w) < 6:
        w = np.float32(rng.uniform(0.001, 0.02))
        b = np.float32(rng.uniform(-2.2, 2.2))
        two_roundings = (x * w) + b  # float32 arithmetic, two roundings
        p = x.astype(np.float64) * np.float64(w)  # exact
        one_rounding = (p + np.float64(b)).astype(np.float32)  # a filter only: double rounding is rare
        if np.count_nonzero(two_roundings != one_rounding) >= 3:
            chosen_w.append(w)
            chosen_b.append(b)
    # b huge against x*w: x*w lies below half an ulp of b in float64 for small x.
    chosen_w += [np.float32(2.0**-60), np.float32(1 / 255 / 0.26862954)]
    chosen_b += [np.float32(1.0 + 2.0**-23), np.float32(-0.48145466 / 0.26862954)]
    return np.array(chosen_w, np.float32), np.array(chosen_b, np.float32)


WEIGHT, BIAS = double_rounding_cases()


def exact_reference(x: torch.Tensor) -> torch.Tensor:
    """[C, K] float input -> [C, K] float32, exactly rounded, channel c on dim 0."""
    rows = [exact_affine(x[c].numpy(), float(WEIGHT[c]), float(BIAS[c])) for c in range(x.shape[0])]
    return torch.from_numpy(np.stack(rows))


def test_cases_are_ones_where_multiply_then_add_is_wrong():
    x = np.arange(256, dtype=np.float32)
    differ = sum(
        int(np.count_nonzero(((x * w) + b) != exact_affine(x, float(w), float(b))))
        for w, b in zip(WEIGHT, BIAS, strict=True)
    )
    assert differ >= 18, differ  # without one rounding, these would fail


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_uint8_matches_exact_rounding(out_dtype):
    x = torch.arange(256, dtype=torch.uint8).repeat(len(WEIGHT), 1)  # [C, 256]
    y = affine(x, torch.from_numpy(WEIGHT), torch.from_numpy(BIAS), dim=0, out_dtype=out_dtype)
    expected = exact_reference(x.float()).to(out_dtype)
    assert torch.equal(
        y.view(torch.int16 if out_dtype != torch.float32 else torch.int32),
        expected.view(torch.int16 if out_dtype != torch.float32 else torch.int32),
    )


def test_float32_input_matches_exact_rounding_where_float64_is_wrong():
    """Random float32 x on the same channels, plus the absorbing channel: compared with exact rationals."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(len(WEIGHT), 300, generator=gen) * 100
    y = affine(x, torch.from_numpy(WEIGHT), torch.from_numpy(BIAS), dim=0, out_dtype=torch.float32)
    assert torch.equal(y.view(torch.int32), exact_reference(x).view(torch.int32))


def capability_outputs(x_by_case: dict) -> dict:
    """Every kernel (contiguous runs and blocks, channels-last, strided patch rows) x a few dtype pairs."""
    w, b = torch.from_numpy(WEIGHT[:3].copy()), torch.from_numpy(BIAS[:3].copy())
    out = {}
    for name, (x, dim) in x_by_case.items():
        for out_dtype in (torch.float32, torch.bfloat16, torch.float16):
            out[f"{name}-{out_dtype}"] = affine(x, w, b, dim=dim, out_dtype=out_dtype)
    return out


def capability_inputs() -> dict:
    gen = torch.Generator().manual_seed(18)
    u8 = torch.randint(0, 256, (2, 3, 40, 50), generator=gen, dtype=torch.uint8)
    f32 = torch.randn(2, 3, 40, 50, generator=gen) * 50
    patches = torch.randint(0, 256, (3, 56, 56), generator=gen, dtype=torch.uint8)
    # Qwen-VL's 9-D patch view of a still image (its one frame repeated: stride 0), as patchify builds it.
    rows = (
        patches.view(1, 1, 3, 2, 2, 14, 2, 2, 14)
        .permute(0, 3, 6, 4, 7, 2, 1, 5, 8)
        .expand(-1, -1, -1, -1, -1, -1, 2, -1, -1)
    )
    return {
        "u8-nchw": (u8, 1),
        "u8-nhwc-blocks": (u8.permute(0, 2, 3, 1).contiguous(), -1),
        "u8-channels-last": (u8.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2), 1),
        "u8-patch-rows": (rows, 5),
        "u16-nchw": (u8.to(torch.int32).mul(257).to(torch.uint16), 1),
        "f32-nchw": (f32, 1),
        "f32-strided": (f32[:, :, ::3, ::2], 1),
        "f16-nhwc": (f32.to(torch.float16).permute(0, 2, 3, 1).contiguous(), -1),
        "bf16-nchw": (f32.to(torch.bfloat16), 1),
        "u8-exact-cases": (torch.arange(256, dtype=torch.uint8).repeat(3, 4, 1).transpose(0, 1).contiguous(), 1),
    }


_CHILD = """
import json, sys, torch
sys.path.insert(0, {tests!r})
import fused_input_norm, test_cpu_rounding as t
torch.save(t.capability_outputs(t.capability_inputs()), {path!r})
print(json.dumps(fused_input_norm.build_info()))
"""


def run_with_capability(capability: str, tmp_path) -> tuple[dict, dict]:
    path = str(tmp_path / f"{capability}.pt")
    env = dict(os.environ, FUSED_INPUT_NORM_CPU_CAPABILITY=capability)
    code = _CHILD.format(tests=os.path.dirname(__file__), path=path)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return torch.load(path), json.loads(result.stdout.strip().splitlines()[-1])


def test_baseline_capability_is_bit_exact_with_the_default_and_exact(tmp_path):
    here = capability_outputs(capability_inputs())
    baseline, info = run_with_capability("default", tmp_path)
    assert info["cpu_capability"] == "default"  # the baseline path really ran
    assert baseline.keys() == here.keys()
    for key, y in here.items():
        bits = torch.int32 if y.dtype == torch.float32 else torch.int16
        differ = int((baseline[key].view(bits) != y.view(bits)).sum())
        assert differ == 0, (
            f"{key}: {differ} elements differ between the baseline and {fused_input_norm.build_info()['cpu_capability']}"
        )
    # And both are the exact rounding on the cases where multiply-then-add is not.
    x, _ = capability_inputs()["u8-exact-cases"]
    expected = exact_reference(x.transpose(0, 1).reshape(3, -1).float()).view(3, 4, 256).transpose(0, 1)
    assert torch.equal(
        baseline["u8-exact-cases-torch.float32"].view(torch.int32), expected.contiguous().view(torch.int32)
    )


CAPABILITY_ORDER = ["default", "avx2", "avx512"]  # a forced capability is capped down this list


def bits_differ(a: torch.Tensor, b: torch.Tensor) -> int:
    bits = torch.int32 if a.dtype == torch.float32 else torch.int16
    return int((a.view(bits) != b.view(bits)).sum())


@pytest.mark.parametrize("capability", ["avx2", "avx512"])
def test_every_capability_the_cpu_has_is_bit_exact_with_the_baseline(tmp_path, capability):
    """Each vector capability, forced and checked to be the one that ran, against the baseline path (also
    forced and checked): two different code paths, not a path compared with itself."""
    other, info = run_with_capability(capability, tmp_path)
    ran = info["cpu_capability"]
    if ran != capability and CAPABILITY_ORDER.index(ran) < CAPABILITY_ORDER.index(capability):
        pytest.skip(f"this CPU has no {capability}: the request was capped to {ran}")
    # Anything else (a capability above the request, i.e. the request ignored) is a failure, not a skip.
    assert ran == capability, f"forced {capability}, but {ran} ran"
    baseline, base_info = run_with_capability("default", tmp_path)
    assert base_info["cpu_capability"] == "default"
    assert other.keys() == baseline.keys()
    for key, y in baseline.items():
        assert bits_differ(other[key], y) == 0, f"{key}: {capability} differs from the baseline"


_WARNED_CHILD = """
import json, torch, fused_input_norm
from fused_input_norm import FusedInputNorm
x = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)
fused_input_norm.affine(x, torch.rand(3), torch.rand(3))  # affine_cpu.cpp's kernels
FusedInputNorm(0.5, 0.5, 1 / 255).resize(x, torch.float32, (5, 6))  # resample_cpu.cpp's
print(json.dumps(fused_input_norm.build_info()))
"""


def test_unknown_capability_is_ignored_with_one_warning():
    # The capability is chosen once per process (csrc/cpu_capability.cpp): the affine's and the resize's
    # translation units both run CPU kernels, and must not each read the variable and warn.
    env = dict(os.environ, FUSED_INPUT_NORM_CPU_CAPABILITY="bogus")
    result = subprocess.run([sys.executable, "-c", _WARNED_CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("ignoring FUSED_INPUT_NORM_CPU_CAPABILITY=bogus") == 1, result.stderr[-3000:]
    chosen = json.loads(result.stdout.strip().splitlines()[-1])["cpu_capability"]
    if "FUSED_INPUT_NORM_CPU_CAPABILITY" not in os.environ:  # this process chose the CPU's best too
        assert chosen == fused_input_norm.build_info()["cpu_capability"]
