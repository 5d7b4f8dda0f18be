"""resize_affine_out's `pad` (the crop placed on a canvas of a fill byte, written by the same kernel call) against an
independent reference: Pillow's resize (or torchvision's v2 resize, antialias=True), numpy's pad with the fill,
then the float64 affine rounded to float32 and then to the output dtype (the op's rounding contract, see
test_cpu_rounding.py), and transformers' Qwen2-VL patch formula for the patch rows. On the capability this
process chose and, in subprocesses, on each one forced with FUSED_INPUT_NORM_CPU_CAPABILITY; on CUDA where a GPU
is lent. The GPU's per-thread code is also checked on the host (test_resize_emulation.py)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import CLIP_MEAN, CLIP_STD, HAS_CUDA, NO_CUDA_REASON
from torch._subclasses.fake_tensor import FakeTensorMode

from fused_input_norm import resample_plan, resize_affine_out
from fused_input_norm.resize import pil_rule, vertical_first

PIL = pytest.importorskip("PIL.Image", reason="Pillow (the 'pil' reference) is not installed")
tvF = pytest.importorskip("torchvision.transforms.v2.functional", reason="torchvision is not installed")

OP_ERROR = r"^fused_input_norm\.resize_affine_out: "
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.uint8]
SENTINEL = 77

# ----- the reference, from the libraries themselves -----


def reference_resize(hwc: np.ndarray, size, resample: str, reference: str) -> np.ndarray:
    """uint8 [C, h, w]: PIL.Image.resize, each channel an "L" image, or torchvision's uint8 antialiased resize."""
    if reference == "torchvision":
        mode = getattr(tvF.InterpolationMode, resample.upper())
        chw = torch.from_numpy(np.ascontiguousarray(hwc)).permute(2, 0, 1).contiguous()
        # A 1x1 RGB output trips an internal assert of torch's uint8 kernel: resize the channels one by one.
        planes = [tvF.resize(chw[c : c + 1], list(size), interpolation=mode, antialias=True) for c in range(len(chw))]
        return torch.cat(planes).numpy()
    filt = {"bicubic": PIL.Resampling.BICUBIC, "bilinear": PIL.Resampling.BILINEAR}[resample]
    planes = [np.asarray(PIL.fromarray(np.ascontiguousarray(hwc[..., c])).resize(size[::-1], filt)) for c in range(3)]
    return np.stack(planes)


def patch_rows(frames: np.ndarray, temporal: int, patch: int, merge: int) -> np.ndarray:
    """transformers' Qwen2-VL patch rows of one temporal patch: frames [temporal, C, H, W]."""
    _, channels, height, width = frames.shape
    gh, gw = height // patch, width // patch
    x = frames.reshape(1, temporal, channels, gh // merge, merge, patch, gw // merge, merge, patch)
    return x.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8).reshape(gh * gw, channels * temporal * patch * patch)


def expected_output(case: dict, images: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """The case's output: each image resized by the reference, cropped, padded with the fill by numpy, then
    x * weight + bias in float64 (rounded to float32, then to dtype; uint8: weight 1, bias 0, the bytes)."""
    top, left, h, w = case["crop"]
    canvas_h, canvas_w, pad_top, pad_left, fill = case["pad"] or (h, w, 0, 0, 0)
    weight, bias = affine_of(dtype)
    values = []
    for hwc in images:
        pixels = reference_resize(hwc, case["size"], case["resample"], case["reference"])[
            :, top : top + h, left : left + w
        ]
        widths = ((0, 0), (pad_top, canvas_h - h - pad_top), (pad_left, canvas_w - w - pad_left))
        canvas = np.pad(pixels, widths, constant_values=fill)
        value = (
            canvas.astype(np.float64) * weight.double().numpy()[:, None, None] + bias.double().numpy()[:, None, None]
        )
        values.append(value)
    if not case["patches"]:
        outs = [v[None] for v in values]
    elif case["clip"]:  # each T consecutive images are the frames of one temporal patch
        t = case["patches"][0]
        outs = [patch_rows(np.stack(values[g : g + t]), *case["patches"]) for g in range(0, len(values), t)]
    else:  # a still: its one frame repeated T times
        outs = [patch_rows(np.stack([v] * case["patches"][0]), *case["patches"]) for v in values]
    out = torch.from_numpy(np.concatenate(outs)).float()
    return out.round().clamp(0, 255).to(torch.uint8) if dtype == torch.uint8 else out.to(dtype)


def affine_of(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """CLIP's rescale + normalize as one affine (a 0 fill becomes -mean/std); identity for uint8 output."""
    if dtype == torch.uint8:
        return torch.ones(3), torch.zeros(3)
    std = torch.tensor(CLIP_STD, dtype=torch.float64)
    weight = (1 / (255 * std)).float()
    return weight, (-torch.tensor(CLIP_MEAN, dtype=torch.float64) / std).float()


# ----- the cases -----


def case(size, crop, pad, patches=(), batch=1, in_hw=(37, 53), channels_last=False, clip=False):
    return {
        "clip": clip,
        "in_hw": in_hw,
        "size": size,
        "crop": crop,
        "pad": pad,
        "patches": patches,
        "batch": batch,
        "hwc": channels_last,
    }


# Every side padded, and none; fill 0 and 255; crop and pad together; each pass shape (both, one axis, none;
# horizontal and vertical first); 1x1, odd, wide, tall; bands of padding only; planar, patch rows and tiles.
CASES = {
    "all-sides-fill0": case((20, 31), (0, 0, 20, 31), (27, 40, 3, 5, 0)),
    "crop-and-pad-fill255": case((20, 31), (2, 3, 15, 21), (24, 32, 4, 6, 255)),
    "top-only": case((20, 31), (0, 0, 20, 31), (26, 31, 6, 0, 0)),
    "bottom-only": case((20, 31), (0, 0, 20, 31), (26, 31, 0, 0, 255)),
    "left-only": case((20, 31), (0, 0, 20, 31), (20, 40, 0, 9, 0)),
    "right-only": case((20, 31), (0, 0, 20, 31), (20, 40, 0, 0, 255)),
    "no-pad-canvas": case((20, 31), (1, 1, 19, 29), (19, 29, 0, 0, 128)),
    "no-pad-empty": case((20, 31), (1, 1, 19, 29), ()),
    "1x1-input": case((3, 5), (0, 0, 3, 5), (7, 9, 2, 3, 0), in_hw=(1, 1)),
    "1x1-output": case((1, 1), (0, 0, 1, 1), (4, 3, 3, 1, 255)),
    "upscale-odd": case((61, 79), (0, 0, 61, 79), (70, 80, 4, 0, 0)),
    "wide": case((5, 97), (0, 0, 5, 97), (10, 100, 5, 1, 0), in_hw=(9, 200)),
    "tall-channels-last": case((90, 4), (0, 0, 90, 4), (96, 10, 3, 6, 255), in_hw=(180, 7), channels_last=True),
    "height-only": case((20, 53), (0, 0, 20, 53), (33, 60, 13, 2, 0)),
    "width-only-channels-last": case((37, 21), (0, 0, 37, 21), (40, 30, 0, 9, 255), channels_last=True),
    "vertical-first": case((9, 50), (0, 0, 9, 50), (12, 52, 1, 1, 0), in_hw=(64, 52)),
    "same-size": case((37, 53), (2, 3, 30, 40), (40, 48, 5, 2, 128)),
    "batch-bands-of-padding": case((50, 75), (0, 0, 50, 75), (112, 96, 60, 10, 0), batch=2, in_hw=(100, 150)),
    "threads": case((300, 400), (0, 0, 300, 400), (448, 448, 100, 24, 0), in_hw=(600, 800)),
    "patches-qwen2": case((50, 75), (0, 0, 50, 75), (56, 84, 3, 4, 0), patches=(2, 14, 2), in_hw=(100, 150)),
    "patches-crop-fill255": case((50, 75), (5, 7, 40, 60), (56, 84, 16, 0, 255), patches=(2, 14, 2), batch=2),
    "patches-band-of-padding": case(
        (40, 50), (0, 0, 40, 50), (84, 56, 40, 6, 0), patches=(2, 14, 2), channels_last=True
    ),
    "patches-qwen3": case((50, 75), (0, 0, 50, 75), (64, 96, 7, 21, 255), patches=(2, 16, 2), in_hw=(70, 30)),
    "clip-rows": case((50, 75), (0, 0, 50, 75), (84, 84, 30, 5, 0), patches=(2, 14, 2), batch=4, clip=True),
    "tiles-14": case((30, 40), (0, 0, 30, 40), (42, 42, 12, 1, 0), patches=(1, 14, 1)),
    "tiles-16": case((30, 40), (0, 0, 30, 40), (32, 48, 1, 8, 255), patches=(1, 16, 1), channels_last=True),
    "tiles-7": case((30, 40), (0, 0, 30, 40), (35, 42, 5, 2, 0), patches=(1, 7, 1)),
    # tiles taller than a CPU band (32 rows): bands that cross rows of tiles, and a band within one
    "tiles-48-bands-cross-tiles": case((90, 130), (0, 0, 90, 130), (96, 144, 3, 7, 0), patches=(1, 48, 1), batch=2),
    "tiles-64-channels-last": case(
        (60, 128), (2, 0, 58, 128), (128, 128, 35, 0, 255), patches=(1, 64, 1), channels_last=True
    ),
}
VARIANTS = [(resample, reference) for resample in ("bicubic", "bilinear") for reference in ("pil", "torchvision")]


def case_images(name: str) -> np.ndarray:
    """The case's uint8 images [B, H, W, 3]: noise, seeded by the case, so every tap matters."""
    c = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    return rng.integers(0, 256, (c["batch"], *c["in_hw"], 3), dtype=np.uint8)


def run_op(c: dict, images: np.ndarray, dtype: torch.dtype, device: str = "cpu") -> torch.Tensor:
    """The op's output for a case, into an `out` first filled with a sentinel (every element must be written)."""
    x = torch.from_numpy(images).to(device).permute(0, 3, 1, 2)
    x = x if c["hwc"] else x.contiguous()
    (in_h, in_w), size = c["in_hw"], c["size"]
    ref = c["reference"]
    plans = [
        resample_plan(n_in, n_out, c["resample"], ref).to(device) if n_in != n_out else None
        for n_in, n_out in ((in_h, size[0]), (in_w, size[1]))
    ]
    h, w = (c["pad"][0], c["pad"][1]) if c["pad"] else c["crop"][2:]
    if c["patches"]:
        t, p, _ = c["patches"]
        shape = (len(images) // (t if c["clip"] else 1) * (h // p) * (w // p), 3 * t * p * p)
    else:
        shape = (len(images), 3, h, w)
    out = torch.full(shape, SENTINEL, dtype=dtype, device=device)
    weight, bias = affine_of(dtype)
    first = vertical_first(pil_rule(ref), in_h, in_w, *size)
    resize_affine_out(
        out,
        x,
        weight.to(device),
        bias.to(device),
        *plans,
        size,
        c["crop"],
        c["resample"],
        first,
        c["patches"],
        c["clip"],
        c["pad"],
    )
    return out.cpu()


def all_outputs(device: str = "cpu") -> dict:
    """Every case x variant x dtype: the op's outputs (a child process returns these to the parent)."""
    return {
        (name, resample, reference, str(dtype)): run_op(
            CASES[name] | {"resample": resample, "reference": reference}, case_images(name), dtype, device
        )
        for name in CASES
        for resample, reference in VARIANTS
        for dtype in DTYPES
    }


def mismatches(outputs: dict) -> dict:
    """The (case, variant, dtype) whose output differs from the reference, with how many elements differ."""
    bad = {}
    for (name, resample, reference, dtype_name), got in outputs.items():
        dtype = getattr(torch, dtype_name.removeprefix("torch."))
        c = CASES[name] | {"resample": resample, "reference": reference}
        want = expected_output(c, case_images(name), dtype)
        if got.shape != want.shape:
            bad[(name, resample, reference, dtype_name)] = f"shape {tuple(got.shape)} != {tuple(want.shape)}"
            continue
        # Bitwise: float32's rounding is the contract's, and a sentinel left unwritten shows up too.
        differ = int((got.view(torch.uint8) != want.view(torch.uint8)).sum())
        if differ:
            bad[(name, resample, reference, dtype_name)] = f"{differ} bytes differ"
    return bad


# ----- bit for bit, on this process's capability and each forced one -----


@pytest.mark.parametrize("resample,reference", VARIANTS)
@pytest.mark.parametrize("name", list(CASES))
def test_padded_resize_is_the_padded_reference(name, resample, reference):
    c = CASES[name] | {"resample": resample, "reference": reference}
    images = case_images(name)
    for dtype in DTYPES:
        got, want = run_op(c, images, dtype), expected_output(c, images, dtype)
        assert got.shape == want.shape, (tuple(got.shape), tuple(want.shape))
        differ = (got.view(torch.uint8) != want.view(torch.uint8)).sum()
        assert differ == 0, f"{dtype}: {int(differ)} bytes differ from the padded reference"


def test_a_zero_fill_is_minus_mean_over_std():
    """What transformers' pad-then-normalize gives: the padding's value in float32 is (0 - mean) / std."""
    c = CASES["all-sides-fill0"] | {"resample": "bicubic", "reference": "pil"}
    got = run_op(c, case_images("all-sides-fill0"), torch.float32)
    expected = (-torch.tensor(CLIP_MEAN, dtype=torch.float64) / torch.tensor(CLIP_STD, dtype=torch.float64)).float()
    assert torch.equal(got[0, :, 0, 0], expected) and torch.equal(got[0, :, -1, -1], expected)


_CHILD = """
import json, sys, torch
sys.path.insert(0, {tests!r})
import fused_input_norm, test_resize_pad as t
torch.save(t.all_outputs(), {path!r})
print(json.dumps(fused_input_norm.build_info()))
"""
CAPABILITY_ORDER = ["default", "avx2", "avx512"]  # test_cpu_rounding.py: a forced capability is capped down


@pytest.mark.parametrize("capability", CAPABILITY_ORDER)
def test_every_cpu_capability_pads_bit_for_bit(tmp_path, capability):
    """Each capability forced in a child process (checked to be the one that ran), every case against the
    reference: the AVX-512, AVX2 and baseline band walkers and patch cutters (NEON: scripts/check_aarch64.sh)."""
    path = tmp_path / "outputs.pt"
    env = dict(os.environ, FUSED_INPUT_NORM_CPU_CAPABILITY=capability)
    code = _CHILD.format(tests=os.path.dirname(__file__), path=str(path))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    ran = json.loads(result.stdout.strip().splitlines()[-1])["cpu_capability"]
    if ran != capability and CAPABILITY_ORDER.index(ran) < CAPABILITY_ORDER.index(capability):
        pytest.skip(f"this CPU has no {capability}: the request was capped to {ran}")
    assert ran == capability, f"forced {capability}, but {ran} ran"
    assert mismatches(torch.load(path)) == {}


@pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)
def test_cuda_pads_bit_for_bit():
    """The CUDA (or ROCm) kernel, every case: the fill comes from ResampledSource in the one strided kernel."""
    assert mismatches(all_outputs("cuda")) == {}


# ----- bad pad arguments: named, before any kernel runs, nothing written -----


def good_padded_call() -> dict:
    gen = torch.Generator().manual_seed(5)
    return {
        "out": torch.full((1, 3, 24, 32), float(SENTINEL)),
        "input": torch.randint(0, 256, (1, 3, 37, 53), dtype=torch.uint8, generator=gen),
        "weight": torch.rand(3, generator=gen),
        "bias": torch.rand(3, generator=gen),
        "row_plan": resample_plan(37, 20),
        "col_plan": resample_plan(53, 31),
        "size": [20, 31],
        "crop": [2, 3, 15, 21],
        "resample": "bicubic",
        "vertical_first": False,
        "patches": [],
        "pad": [24, 32, 4, 6, 0],
    }


BAD_PADS = [
    ("four-ints", {"pad": [24, 32, 4, 6]}, r"pad must be empty or \(canvas_height, canvas_width, top, left, fill\)"),
    ("canvas-too-short", {"pad": [14, 32, 0, 0, 0]}, r"pad's canvas 14x32 must hold the cropped image 15x21"),
    ("canvas-too-narrow", {"pad": [24, 20, 0, 0, 0]}, r"pad's canvas 24x20 must hold the cropped image 15x21"),
    ("canvas-too-large", {"pad": [1 << 24, 32, 0, 0, 0]}, r"have sides below 2\^24"),
    ("top-negative", {"pad": [24, 32, -1, 6, 0]}, r"pad's \(top, left\) = \(-1, 6\) must put the cropped image 15x21"),
    ("left-negative", {"pad": [24, 32, 4, -2, 0]}, r"pad's \(top, left\) = \(4, -2\)"),
    (
        "past-the-bottom",
        {"pad": [24, 32, 10, 6, 0]},
        r"\(10, 6\) must put the cropped image 15x21 inside the canvas 24x32",
    ),
    ("past-the-right", {"pad": [24, 32, 4, 12, 0]}, r"\(4, 12\) must put the cropped image 15x21 inside the canvas"),
    ("huge-top", {"pad": [24, 32, 1 << 62, 0, 0]}, r"must put the cropped image"),
    ("fill-256", {"pad": [24, 32, 4, 6, 256]}, r"pad's fill must be a byte in \[0, 255\], got 256"),
    ("fill-negative", {"pad": [24, 32, 4, 6, -1]}, r"pad's fill must be a byte in \[0, 255\], got -1"),
    (
        "patches-need-the-canvas-divisible",  # the crop 28x28 divides, the canvas does not
        {"out": torch.zeros(4, 1176), "crop": [0, 0, 14, 28], "pad": [28, 42, 0, 0, 0], "patches": [2, 14, 2]},
        r"the padded canvas 28x42 must be a multiple of patch_size \* merge_size = 28",
    ),
    ("out-of-the-crop-shape", {"out": torch.zeros(1, 3, 15, 21)}, r"out must have shape \[1, 3, 24, 32\]"),
]


@pytest.mark.parametrize("changes,match", [pytest.param(*c[1:], id=c[0]) for c in BAD_PADS])
def test_bad_pads_are_named_and_nothing_is_written(changes, match):
    args = good_padded_call() | changes
    before = args["out"].clone()
    with pytest.raises(ValueError, match=OP_ERROR + ".*" + match):
        resize_affine_out(**args)
    assert torch.equal(args["out"], before), "a rejected call wrote into out"
    # The fake kernel (torch.compile, export, meta) refuses it with the same type and words.
    with FakeTensorMode() as mode:
        fake = {k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in args.items()}
        with pytest.raises(ValueError) as faked:
            resize_affine_out(**fake)
    with pytest.raises(ValueError) as eager:
        resize_affine_out(**args)
    assert str(faked.value) == str(eager.value)


def test_the_good_padded_call_passes_opcheck():
    args = good_padded_call()
    resize_affine_out(**args)
    assert not (args["out"] == SENTINEL).any()
    positional = [args[k] for k in ("out", "input", "weight", "bias", "row_plan", "col_plan", "size", "crop")]
    positional += [args["resample"], args["vertical_first"], args["patches"], False, args["pad"]]
    torch.library.opcheck(torch.ops.fused_input_norm.resize_affine_out.default, tuple(positional))
