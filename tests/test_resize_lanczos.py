"""resample="lanczos" (Lanczos-3) against the references themselves, bit for bit: PIL.Image.resize(LANCZOS) and
torchvision.transforms.v2.functional.resize(LANCZOS, antialias=True) on a CPU uint8 tensor (torch's own uint8
kernel: torchvision 0.29 hands uint8 LANCZOS to interpolate without a float round trip). The scikit-image
photos at every size case of test_resize.py, then a fuzz of sizes (1 to 2000 px, down and up, both axes or one,
1, 3 and 4 channels, planar and interleaved input, photo and noise content: the noise drives lanczos' lobes
past 0 and 255, the clamps), on the CPU capability this process chose and on each one forced in a child
process; the GPU against the same references where one is lent. FUSED_INPUT_NORM_LONG_PROBES=1 fuzzes longer.

The host emulation of the GPU kernels with lanczos is in test_resize_emulation.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import HAS_CUDA, NO_CUDA_REASON
from test_resize import (
    IDENTITY,
    NO_TORCH_LANCZOS,
    PHOTOS,
    SIZE_CASES,
    TORCH_LANCZOS,
    assert_exact,
    photo,
    reference_resize,
    to_chw,
)
from torch._subclasses.fake_tensor import FakeTensorMode

from fused_input_norm import FusedInputNorm, resample_plan

# torchvision's LANCZOS is torch's uint8 kernel: a torch without it (2.11) has no torchvision reference.
REFERENCES = ["pil", "torchvision"] if TORCH_LANCZOS else ["pil"]
REFERENCE_PARAMS = [
    "pil",
    pytest.param("torchvision", marks=pytest.mark.skipif(not TORCH_LANCZOS, reason=NO_TORCH_LANCZOS)),
]
LONG = os.environ.get("FUSED_INPUT_NORM_LONG_PROBES") == "1"
FUZZ_CASES = 400 if LONG else 36
# The default fuzz keeps each image below this many input pixels (seconds on a 2-core machine); the long one
# takes any side up to 2000.
FUZZ_MAX_PIXELS = 4_000_000 if LONG else 300_000


@pytest.mark.parametrize("case", list(SIZE_CASES))
@pytest.mark.parametrize("reference", REFERENCE_PARAMS)
@pytest.mark.parametrize("name", PHOTOS)
def test_lanczos_photos_equal_the_reference(name, reference, case):
    hwc = photo(name)
    size = SIZE_CASES[case](*hwc.shape[:2])
    got = IDENTITY.resize(to_chw(hwc), torch.float32, size, resample="lanczos", reference=reference)
    assert_exact(got, reference_resize(reference, hwc, size, "lanczos").float(), f"{name} {case} {size} {reference}")


# ----- the fuzz -----


def _side(rng: np.random.Generator, in_side: int) -> int:
    """An output side for an input side: down to 1 or up to 2000, log-uniform, sometimes a neighbour."""
    if rng.random() < 0.2:
        return int(np.clip(in_side + rng.integers(-2, 3), 1, 2000))
    return int(np.clip(round(np.exp(rng.uniform(0.0, np.log(2000)))), 1, 2000))


def fuzz_cases(count: int, max_pixels: int, seed: int = 37):
    """(image hwc, output size, channels-last input) per case, from a seeded generator."""
    rng = np.random.default_rng(seed)
    tile = photo("astronaut")
    cases = []
    for _ in range(count):
        in_h = int(np.exp(rng.uniform(0.0, np.log(2000))))
        in_w = int(np.clip(np.exp(rng.uniform(0.0, np.log(2000))), 1, max(1, max_pixels // in_h)))
        channels = int(rng.choice([1, 3, 3, 4]))
        if rng.random() < 0.5:
            reps = (in_h // tile.shape[0] + 1, in_w // tile.shape[1] + 1, 2)
            hwc = np.tile(tile, reps)[:in_h, :in_w, :channels]
        else:
            hwc = rng.integers(0, 256, (in_h, in_w, channels), dtype=np.uint8)
        axes = rng.choice(["both", "height", "width"], p=[0.6, 0.2, 0.2])
        out_h = in_h if axes == "width" else _side(rng, in_h)
        out_w = in_w if axes == "height" else _side(rng, in_w)
        if (out_h, out_w) == (in_h, in_w):
            out_w = out_w + 1
        cases.append((np.ascontiguousarray(hwc), (out_h, out_w), bool(rng.random() < 0.5)))
    return cases


def extreme_cases():
    """The widest windows and the largest upscales, on noise (every tap at its extreme, both signs of the lobes):
    2000 -> 1 (12001 taps) on one axis while the other goes 150 -> 2000, then the transpose, interleaved."""
    noise = np.random.default_rng(7).integers(0, 256, (2000, 150, 3), dtype=np.uint8)
    return [(noise, (1, 2000), False), (np.ascontiguousarray(noise.transpose(1, 0, 2)), (2000, 1), True)]


def fuzz_mismatches(count: int, max_pixels: int, device: str = "cpu") -> dict:
    """{(case, reference, in shape, size, channels last): differing values} of the cases that differ (an
    identity module's float32 output holds the resampled bytes exactly): the extremes, then the fuzz."""
    found = {}
    for index, (hwc, size, channels_last) in enumerate(extreme_cases() + fuzz_cases(count, max_pixels)):
        norm = FusedInputNorm.identity(channel=hwc.shape[2]).to(device)
        image = torch.from_numpy(hwc) if channels_last else to_chw(hwc)
        kwargs = {"channel_dim": -1} if channels_last else {}
        for reference in REFERENCES:
            got = norm.resize(image.to(device), torch.float32, size, resample="lanczos", reference=reference, **kwargs)
            expected = reference_resize(reference, hwc, size, "lanczos")
            got = got.cpu()  # [C, h, w] whatever the input's channel_dim
            assert got.shape == expected.shape, (index, reference, hwc.shape, size, tuple(got.shape))
            differ = int((got != expected.float()).sum())
            if differ:
                found[str((index, reference, hwc.shape, size, channels_last))] = differ
    return found


def test_lanczos_fuzz_equals_the_references():
    assert fuzz_mismatches(FUZZ_CASES, FUZZ_MAX_PIXELS) == {}


_CHILD = """
import json, sys
sys.path.insert(0, {tests!r})
import fused_input_norm, test_resize_lanczos as t
found = t.fuzz_mismatches({count}, {max_pixels})
print(json.dumps({{"found": found, "info": fused_input_norm.build_info()}}))
"""
CAPABILITY_ORDER = ["default", "avx2", "avx512"]  # test_cpu_rounding.py: a forced capability is capped down


@pytest.mark.parametrize("capability", CAPABILITY_ORDER)
def test_every_cpu_capability_equals_the_references(capability):
    """Each capability forced in a child process (checked to be the one that ran), the fuzz (a third of it by
    default) against both references: the baseline, AVX2 and AVX-512 passes with lanczos' wider windows."""
    env = dict(os.environ, FUSED_INPUT_NORM_CPU_CAPABILITY=capability)
    count = FUZZ_CASES if LONG else FUZZ_CASES // 3
    code = _CHILD.format(tests=os.path.dirname(__file__), count=count, max_pixels=FUZZ_MAX_PIXELS)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    ran = report["info"]["cpu_capability"]
    if ran != capability and CAPABILITY_ORDER.index(ran) < CAPABILITY_ORDER.index(capability):
        pytest.skip(f"this CPU has no {capability}: the request was capped to {ran}")
    assert ran == capability, f"forced {capability}, but {ran} ran"
    assert report["found"] == {}


@pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)
@pytest.mark.parametrize("reference", REFERENCE_PARAMS)
def test_cuda_lanczos_equals_the_references(reference):
    """The CUDA (or ROCm) kernels: the photos at every size case, then the fuzz."""
    norm = IDENTITY.to("cuda")
    for name in PHOTOS:
        hwc = photo(name)
        for case, size_of in SIZE_CASES.items():
            size = size_of(*hwc.shape[:2])
            got = norm.resize(to_chw(hwc).cuda(), torch.float32, size, resample="lanczos", reference=reference)
            assert_exact(got.cpu(), reference_resize(reference, hwc, size, "lanczos").float(), f"{name} {case}")
    assert fuzz_mismatches(FUZZ_CASES, FUZZ_MAX_PIXELS, device="cuda") == {}


# ----- the plan: the window's size, the fake kernel's length -----


@pytest.mark.parametrize("in_size,out_size,taps", [(640, 640 + 1, 7), (100, 50, 13), (1000, 334, 19), (5, 2000, 7)])
def test_lanczos_plan_taps_and_fake_length(in_size, out_size, taps):
    """Lanczos-3's window: ceil(3 * max(in / out, 1)) * 2 + 1 taps, as both references size their tables; the
    fake kernel (torch.compile's shapes) agrees with the planner on the plan's length."""
    for reference in REFERENCES:
        plan = resample_plan(in_size, out_size, "lanczos", reference)
        assert int(plan[2]) == taps
        assert plan.numel() == 4 + out_size * (2 + taps)
        with FakeTensorMode():
            fake = resample_plan(in_size, out_size, "lanczos", reference)
        assert fake.numel() == plan.numel()


def test_an_unknown_filter_names_lanczos_among_the_choices():
    with pytest.raises(
        ValueError,
        match=r"resample must be 'bilinear', 'bicubic', 'lanczos', 'cv2_cubic', 'cv2_cubic_f32', 'bilinear_no_antialias', "
        r"'bilinear_no_antialias_f32', 'bilinear_no_antialias_f32_cl', 'bilinear_f32' or 'bicubic_f32', got 'box'",
    ):
        resample_plan(10, 5, "box")
    with pytest.raises(
        ValueError,
        match=r"resample must be one of 'bilinear', 'bicubic', 'lanczos', 'cv2_cubic', 'cv2_cubic_f32', 'bilinear_no_antialias', "
        r"'bilinear_no_antialias_f32', 'bilinear_no_antialias_f32_cl', 'bilinear_f32', 'bicubic_f32', got 'box'",
    ):
        IDENTITY.resize(torch.zeros(3, 8, 8, dtype=torch.uint8), torch.float32, (4, 4), resample="box")
