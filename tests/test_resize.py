"""FusedInputNorm.resize, patchify(min_pixels/max_pixels) and the resize ops against the references
themselves: PIL.Image.resize and torchvision.transforms.v2.functional.resize(antialias=True) on a CPU uint8
tensor, bit for bit (0 differing values) on the scikit-image photos; the normalization against the float64
formula; bad input; opcheck, fake kernels, torch.compile and torch.export; the GPU against the CPU.

The comparisons with Hugging Face's processors (Qwen2-VL, CLIP, SigLIP) are in test_resize_hf.py.
"""

import functools
import importlib.util

import numpy as np
import pytest
import torch
from conftest import CLIP_MEAN, CLIP_STD, HAS_CUDA, NO_CUDA_REASON, RecordOps, assert_affine_close
from hypothesis import example, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

from fused_input_norm import FusedInputNorm, resample_plan, resize_affine_out, smart_resize
from fused_input_norm.resize import pil_rule, vertical_first

skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")

PHOTOS = ["astronaut", "coffee", "chelsea", "rocket"]
RESAMPLES = ["bicubic", "bilinear"]
REFERENCES = ["pil", "torchvision"]
SENTINEL = 1234.5
IDENTITY = FusedInputNorm.identity()


@functools.cache
def _photo(name: str) -> np.ndarray:
    return np.ascontiguousarray(getattr(skimage_data, name)())


def photo(name: str) -> np.ndarray:
    """A real photo, uint8 [H, W, C] (a fresh copy: the tests may hand it to torch)."""
    return _photo(name).copy()


def to_chw(hwc: np.ndarray) -> torch.Tensor:
    """uint8 [C, H, W], contiguous."""
    return torch.from_numpy(np.ascontiguousarray(hwc)).permute(2, 0, 1).contiguous()


# ----- the references, used as they are -----


def _pillow_hwc(hwc: np.ndarray, size, resample: str) -> np.ndarray:
    image_module = pytest.importorskip("PIL.Image", reason="Pillow (the 'pil' reference) is not installed")
    filt = {
        "bicubic": image_module.Resampling.BICUBIC,
        "bilinear": image_module.Resampling.BILINEAR,
        "lanczos": image_module.Resampling.LANCZOS,
    }[resample]
    height, width = size
    # An RGB image resizes as one; any other channel count band by band as "L" images: the op treats channels
    # independently, while Pillow premultiplies an RGBA image's alpha (transformers converts to RGB first).
    bands = [hwc] if hwc.shape[2] == 3 else [hwc[..., c] for c in range(hwc.shape[2])]
    out = [np.array(image_module.fromarray(np.ascontiguousarray(b)).resize((width, height), filt)) for b in bands]
    return out[0] if hwc.shape[2] == 3 else np.stack(out, axis=-1)


def pillow_resize(hwc: np.ndarray, size, resample: str = "bicubic") -> torch.Tensor:
    """PIL.Image.resize of the installed Pillow (one call), as uint8 [C, h, w]."""
    return to_chw(_pillow_hwc(hwc, size, resample))


def pillow_two_calls(hwc: np.ndarray, size, resample: str, vertical_first_: bool) -> torch.Tensor:
    """Pillow's two passes in a chosen order, one Image.resize per axis (a call that changes one axis runs
    exactly that pass, and the uint8 image between the calls is Pillow's intermediate): any release's rule."""
    (in_h, in_w), (out_h, out_w) = hwc.shape[:2], size
    first = (out_h, in_w) if vertical_first_ else (in_h, out_w)
    return to_chw(_pillow_hwc(_pillow_hwc(hwc, first, resample), size, resample))


def _torch_resamples_lanczos() -> bool:
    """Whether torchvision is here and this torch has the uint8 lanczos kernel its LANCZOS runs on a tensor
    (torch 2.11 has no lanczos mode in interpolate: there is no torchvision LANCZOS reference to compare with)."""
    if importlib.util.find_spec("torchvision") is None:
        return False
    try:
        torch.nn.functional.interpolate(
            torch.zeros(1, 1, 4, 4, dtype=torch.uint8), (2, 2), mode="lanczos", antialias=True
        )
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    return True


TORCH_LANCZOS = _torch_resamples_lanczos()
NO_TORCH_LANCZOS = (
    f"no torchvision LANCZOS reference: torchvision missing, or torch {torch.__version__} without uint8 lanczos"
)


def torchvision_resize(chw: torch.Tensor, size, resample: str = "bicubic") -> torch.Tensor:
    """torchvision.transforms.v2.functional.resize(antialias=True) of a CPU uint8 [..., C, H, W] tensor."""
    tvF = pytest.importorskip("torchvision.transforms.v2.functional", reason="torchvision is not installed")
    from torchvision.transforms import InterpolationMode

    mode = {
        "bicubic": InterpolationMode.BICUBIC,
        "bilinear": InterpolationMode.BILINEAR,
        "lanczos": InterpolationMode.LANCZOS,
    }[resample]
    chw = chw.contiguous()
    if tuple(size) == (1, 1) and chw.shape[-3] == 3:
        # torch 2.14's uint8 kernel trips an internal assert writing a 3-channel 1x1 image (its output is both
        # channels-first and channels-last). It resamples each channel alone, as RGBA inside: resize with a
        # 4th channel and drop it.
        padded = torch.cat([chw, chw[..., :1, :, :]], dim=-3)
        return tvF.resize(padded, list(size), interpolation=mode, antialias=True)[..., :3, :, :]
    out = tvF.resize(chw, list(size), interpolation=mode, antialias=True)
    assert out.dtype == torch.uint8
    return out


def reference_resize(reference: str, hwc: np.ndarray, size, resample: str) -> torch.Tensor:
    if reference == "torchvision":
        return torchvision_resize(to_chw(hwc), size, resample)
    return pillow_resize(hwc, size, resample)


def installed_pillow_major() -> int:
    try:
        import PIL
    except ImportError:
        return 0
    return int(PIL.__version__.split(".")[0])


def differing(got: torch.Tensor, expected: torch.Tensor) -> int:
    assert got.shape == expected.shape, (tuple(got.shape), tuple(expected.shape))
    return int((got.double() != expected.double()).sum())


def assert_exact(got: torch.Tensor, expected: torch.Tensor, label: str = "") -> None:
    """got (float32, from an identity module) holds the reference's uint8 values exactly."""
    assert got.dtype == torch.float32 and got.is_contiguous(), (got.dtype, got.stride())
    assert got.shape == expected.shape, f"{label}: shape {tuple(got.shape)} != reference {tuple(expected.shape)}"
    diff = (got.double() - expected.double()).abs()
    n = int((diff != 0).sum())
    assert n == 0, f"{label}: {n} of {got.numel()} values differ from the reference, by up to {diff.max().item()}"


# ----- bit-exact on the photos -----

# Output (height, width) per case, from the photo's (H, W).
SIZE_CASES = {
    "qwen-smart-resize": lambda h, w: smart_resize(h, w),  # downscale (and mixed for chelsea/rocket)
    "224x224": lambda h, w: (224, 224),
    "upscale": lambda h, w: (h * 3 // 2 + 1, w * 5 // 4 + 3),
    "down-up": lambda h, w: (h // 2 - 1, w * 3 // 2),
    "height-only": lambda h, w: (h // 2 + 3, w),
    "width-only": lambda h, w: (h, w * 2 - 5),
    "vertical-first": lambda h, w: (h // 4, w - 7),  # Pillow 13 runs the vertical pass first
    "odd": lambda h, w: (h // 3 | 1, w // 7 | 1),
    "1xN": lambda h, w: (1, w // 2 + 1),
    "Nx1": lambda h, w: (h // 2 + 1, 1),
    "1x1": lambda h, w: (1, 1),
}


@pytest.mark.parametrize("case", list(SIZE_CASES))
@pytest.mark.parametrize("resample", RESAMPLES)
@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("name", PHOTOS)
def test_bit_exact_on_photos(name, reference, resample, case):
    hwc = photo(name)
    h, w = hwc.shape[:2]
    size = SIZE_CASES[case](h, w)
    if case == "vertical-first":
        assert vertical_first("13", h, w, *size) and not vertical_first("12.1", h, w, *size)
    expected = reference_resize(reference, hwc, size, resample)
    got = IDENTITY.resize(to_chw(hwc), torch.float32, size, resample=resample, reference=reference)
    assert_exact(got, expected, f"{name} {h}x{w} -> {size[0]}x{size[1]} {resample} {reference}")


def test_the_references_differ_so_the_parity_tests_can_tell_them_apart():
    """torch's uint8 kernel is within 1-2 levels of Pillow, not equal: each reference is matched, not both."""
    hwc = photo("coffee")
    size = smart_resize(*hwc.shape[:2])
    pil, tv = pillow_resize(hwc, size), torchvision_resize(to_chw(hwc), size)
    assert differing(pil, tv) > 0
    got_pil = IDENTITY.resize(to_chw(hwc), torch.float32, size, reference="pil")
    got_tv = IDENTITY.resize(to_chw(hwc), torch.float32, size, reference="torchvision")
    assert torch.equal(got_pil != got_tv, pil != tv)


def tall_strip() -> np.ndarray:
    """1339x10: over 100 times taller than wide, Pillow 12.2's vertical-first condition."""
    return np.ascontiguousarray(np.concatenate([photo(n)[:, 100:110] for n in ("astronaut", "coffee", "rocket")]))


@pytest.mark.parametrize("resample", RESAMPLES)
def test_pinned_pillow_rules_follow_their_pass_order(resample):
    """512x512 -> 100x500: the height shrinks by more than twice the width, so Pillow 13 runs the vertical
    pass first and 12.1/12.2 the horizontal one; a 1339x10 strip -> 300x7 is vertical-first in 12.2 and 13."""
    hwc = photo("astronaut")
    size = (100, 500)
    assert hwc.shape[:2] == (512, 512)
    assert vertical_first("13", 512, 512, *size)
    assert not vertical_first("12.2", 512, 512, *size) and not vertical_first("12.1", 512, 512, *size)
    horizontal_first = pillow_two_calls(hwc, size, resample, vertical_first_=False)
    vertical_first_ = pillow_two_calls(hwc, size, resample, vertical_first_=True)
    assert differing(horizontal_first, vertical_first_) > 0  # the order matters here
    for reference, expected in (
        ("pil-13", vertical_first_),
        ("pil-12.2", horizontal_first),
        ("pil-12.1", horizontal_first),
    ):
        got = IDENTITY.resize(to_chw(hwc), torch.float32, size, resample=resample, reference=reference)
        assert_exact(got, expected, reference)

    strip, size = tall_strip(), (300, 7)
    assert vertical_first("12.2", *strip.shape[:2], *size) and vertical_first("13", *strip.shape[:2], *size)
    horizontal_first = pillow_two_calls(strip, size, resample, vertical_first_=False)
    vertical_first_ = pillow_two_calls(strip, size, resample, vertical_first_=True)
    assert differing(horizontal_first, vertical_first_) > 0
    for reference, expected in (
        ("pil-13", vertical_first_),
        ("pil-12.2", vertical_first_),
        ("pil-12.1", horizontal_first),
    ):
        got = IDENTITY.resize(to_chw(strip), torch.float32, size, resample=resample, reference=reference)
        assert_exact(got, expected, f"strip {reference}")


@pytest.mark.skipif(installed_pillow_major() < 13, reason="needs Pillow 13 installed (its pass-order rule)")
@pytest.mark.parametrize("resample", RESAMPLES)
def test_pil_follows_installed_pillow_13_where_the_12_1_rule_differs(resample):
    hwc = photo("astronaut")
    size = (100, 500)
    expected = pillow_resize(hwc, size, resample)  # Pillow 13's Image.resize, one call
    for reference in ("pil", "pil-13"):
        assert_exact(
            IDENTITY.resize(to_chw(hwc), torch.float32, size, resample=resample, reference=reference), expected
        )
    old = IDENTITY.resize(to_chw(hwc), torch.float32, size, resample=resample, reference="pil-12.1")
    n = differing(old, expected)
    print(f"pil-12.1 vs Pillow 13 on 512x512 -> 100x500 {resample}: {n} of {old.numel()} values differ")
    assert n > 0


@settings(max_examples=40, deadline=None, derandomize=True, print_blob=True)
@given(
    top=st.integers(0, 200),
    left=st.integers(0, 300),
    in_h=st.integers(1, 160),
    in_w=st.integers(1, 160),
    out_h=st.integers(1, 240),
    out_w=st.integers(1, 240),
    resample=st.sampled_from(RESAMPLES),
)
@example(top=0, left=0, in_h=160, in_w=100, out_h=20, out_w=90, resample="bicubic")  # vertical-first in 13
@example(top=5, left=9, in_h=1, in_w=1, out_h=240, out_w=1, resample="bilinear")
def test_random_sizes_bit_exact(top, left, in_h, in_w, out_h, out_w, resample):
    hwc = np.ascontiguousarray(photo("coffee")[top : top + in_h, left : left + in_w])
    chw, size = to_chw(hwc), (out_h, out_w)
    expected = {
        "pil": pillow_resize(hwc, size, resample),
        "torchvision": torchvision_resize(chw, size, resample),
        "pil-12.1": pillow_two_calls(hwc, size, resample, vertical_first_=False),
    }
    if installed_pillow_major() >= 13:
        expected["pil-13"] = expected["pil"]
    for reference, pixels in expected.items():
        got = IDENTITY.resize(chw, torch.float32, size, resample=resample, reference=reference)
        assert_exact(got, pixels, f"{in_h}x{in_w} -> {out_h}x{out_w} {resample} {reference}")


@settings(max_examples=30, deadline=None, derandomize=True, print_blob=True)
@given(
    top=st.integers(0, 100),
    left=st.integers(0, 100),
    in_h=st.integers(1, 300),
    in_w=st.integers(1, 500),
    out_h=st.integers(1, 300),
    out_w=st.integers(1, 700),
    resample=st.sampled_from(RESAMPLES),
)
@example(top=0, left=0, in_h=300, in_w=500, out_h=67, out_w=97, resample="bicubic")  # many taps per output
@example(top=3, left=1, in_h=290, in_w=497, out_h=131, out_w=451, resample="bicubic")  # widths past 64 and odd
@example(top=0, left=0, in_h=2, in_w=500, out_h=1, out_w=1, resample="bilinear")  # one output, 500 taps
def test_random_sizes_bit_exact_channels_last(top, left, in_h, in_w, out_h, out_w, resample):
    """Interleaved (HWC) input and wider images than the test above: the SIMD passes' 16-row blocks, their
    32- and 64-byte transposes and vector tails, odd widths, Pillow's split 22-bit coefficients and tap counts
    in the hundreds, against the references themselves."""
    hwc = np.ascontiguousarray(photo("astronaut")[top : top + in_h, left : left + in_w])
    chw, size = to_chw(hwc), (out_h, out_w)
    expected = {"pil": pillow_resize(hwc, size, resample), "torchvision": torchvision_resize(chw, size, resample)}
    for reference, pixels in expected.items():
        got = IDENTITY.resize(
            torch.from_numpy(hwc), torch.float32, size, resample=resample, reference=reference, channel_dim=-1
        )
        assert_exact(got, pixels, f"HWC {in_h}x{in_w} -> {out_h}x{out_w} {resample} {reference}")


# ----- layouts, batches, views, crops, channel counts -----


@pytest.mark.parametrize("reference", REFERENCES)
def test_channels_last_image_and_batch(reference):
    size = (211, 301)
    hwc = photo("rocket")
    got = IDENTITY.resize(torch.from_numpy(hwc), torch.float32, size, reference=reference, channel_dim=-1)
    assert_exact(got, reference_resize(reference, hwc, size, "bicubic"), "HWC")
    crops = [photo(n)[:300, :400] for n in PHOTOS]
    bhwc = torch.from_numpy(np.stack(crops))
    got = IDENTITY.resize(bhwc, torch.float32, size, reference=reference, channel_dim=-1)
    assert got.shape == (4, 3, *size)
    for b, crop in enumerate(crops):
        assert_exact(got[b].contiguous(), reference_resize(reference, crop, size, "bicubic"), f"BHWC[{b}]")


@pytest.mark.parametrize("resample", RESAMPLES)
@pytest.mark.parametrize("reference", REFERENCES)
def test_batch(reference, resample):
    crops = [photo(n)[:300, :451] for n in PHOTOS]
    bchw = torch.stack([to_chw(c) for c in crops])
    size = (150, 333)
    got = IDENTITY.resize(bchw, torch.float32, size, resample=resample, reference=reference)
    assert got.shape == (4, 3, *size) and got.is_contiguous()
    if reference == "torchvision":
        assert_exact(got, torchvision_resize(bchw, size, resample), "batch")
    for b, crop in enumerate(crops):
        assert_exact(got[b].contiguous(), reference_resize(reference, crop, size, resample), f"batch[{b}]")


@pytest.mark.parametrize("reference", REFERENCES)
def test_non_contiguous_views(reference):
    big = to_chw(photo("astronaut"))
    views = {
        "crop": big[:, 37:437, 11:311],
        "step": big[:, 1::2, ::3],
        "channels-last-strides": big.permute(1, 2, 0).contiguous().permute(2, 0, 1)[:, 5:305, 7:407],
    }
    for label, view in views.items():
        assert not view.is_contiguous(), label
        hwc = np.ascontiguousarray(view.permute(1, 2, 0).numpy())
        for size in ((123, 257), (view.shape[1] * 2 + 1, view.shape[2] // 3)):
            got = IDENTITY.resize(view, torch.float32, size, reference=reference)
            assert_exact(got, reference_resize(reference, hwc, size, "bicubic"), f"{label} -> {size}")
    expanded = views["crop"][None].expand(3, -1, -1, -1)  # a batch of one image, stride 0
    got = IDENTITY.resize(expanded, torch.float32, (123, 257), reference=reference)
    expected = reference_resize(
        reference, np.ascontiguousarray(views["crop"].permute(1, 2, 0).numpy()), (123, 257), "bicubic"
    )
    for b in range(3):
        assert_exact(got[b].contiguous(), expected, f"expanded[{b}]")


@pytest.mark.parametrize("resample", RESAMPLES)
@pytest.mark.parametrize("reference", REFERENCES)
def test_crop_equals_resize_then_slice(reference, resample):
    hwc = photo("chelsea")  # 300x451
    chw = to_chw(hwc)
    for size in [(256, 320), (300, 200), (150, 451), (640, 700)]:  # both axes, width only, height only, upscale
        full = reference_resize(reference, hwc, size, resample)
        h, w = size
        for crop in [(0, 0, h, w), (17, 29, h // 2, w // 3), (h - 5, w - 7, 5, 7), (0, w - 1, h, 1), (h - 1, 0, 1, w)]:
            top, left, ch, cw = crop
            got = IDENTITY.resize(chw, torch.float32, size, resample=resample, reference=reference, crop=crop)
            assert_exact(got, full[:, top : top + ch, left : left + cw], f"{size} crop {crop}")


@pytest.mark.parametrize("reference", REFERENCES)
def test_same_size_copies_and_crops(reference):
    """Both references copy an image whose size does not change: the module too, crop included."""
    hwc = photo("coffee")
    size = hwc.shape[:2]
    chw = to_chw(hwc)
    assert_exact(
        IDENTITY.resize(chw, torch.float32, size, reference=reference),
        reference_resize(reference, hwc, size, "bicubic"),
    )
    assert torch.equal(reference_resize(reference, hwc, size, "bicubic"), chw)
    got = IDENTITY.resize(chw, torch.float32, size, reference=reference, crop=(10, 20, 100, 200))
    assert_exact(got, chw[:, 10:110, 20:220])


@pytest.mark.parametrize("resample", RESAMPLES)
@pytest.mark.parametrize("reference", REFERENCES)
def test_grayscale_one_channel(reference, resample):
    gray = np.ascontiguousarray(skimage_data.camera())[:, :, None]  # 512x512x1
    norm = FusedInputNorm.identity(channel=1)
    for size in [(224, 224), (100, 500), (600, 77), (1, 9)]:
        expected = reference_resize(reference, gray, size, resample)
        got = norm.resize(to_chw(gray), torch.float32, size, resample=resample, reference=reference)
        assert_exact(got, expected, f"gray -> {size}")
        got = norm.resize(
            torch.from_numpy(gray), torch.float32, size, resample=resample, reference=reference, channel_dim=-1
        )
        assert_exact(got, expected, f"gray HW1 -> {size}")


@pytest.mark.parametrize("resample", RESAMPLES)
@pytest.mark.parametrize("reference", REFERENCES)
def test_four_channels(reference, resample):
    rgb = photo("astronaut")
    rgba = np.ascontiguousarray(np.concatenate([rgb, skimage_data.camera()[:, :, None]], axis=-1))
    norm = FusedInputNorm.identity(channel=4)
    for size in [(224, 224), (100, 500), (701, 333)]:
        got = norm.resize(to_chw(rgba), torch.float32, size, resample=resample, reference=reference)
        assert_exact(got, reference_resize(reference, rgba, size, resample), f"4 channels -> {size}")


def test_any_thread_count_gives_the_same_exact_result():
    """The CPU kernel splits the output into bands per thread: every split gives Pillow's pixels."""
    hwc = np.random.default_rng(5).integers(0, 256, (1080, 1920, 3), dtype=np.uint8)
    size = smart_resize(1080, 1920)
    expected = {r: reference_resize(r, hwc, size, "bicubic") for r in REFERENCES}
    threads = torch.get_num_threads()
    try:
        for n in (1, 2, 3, 7):
            torch.set_num_threads(n)
            for reference in REFERENCES:
                got = IDENTITY.resize(to_chw(hwc), torch.float32, size, reference=reference)
                assert_exact(got, expected[reference], f"{n} threads {reference}")
    finally:
        torch.set_num_threads(threads)


# ----- normalization -----


def clip_formula(pixels: torch.Tensor) -> torch.Tensor:
    """(x / 255 - mean[c]) / std[c] in float64 on uint8 [..., C, H, W]."""
    mean = torch.tensor(CLIP_MEAN, dtype=torch.float64).view(-1, 1, 1)
    std = torch.tensor(CLIP_STD, dtype=torch.float64).view(-1, 1, 1)
    return (pixels.double() / 255 - mean) / std


@pytest.mark.parametrize("resample", RESAMPLES)
@pytest.mark.parametrize("reference", [*REFERENCES, "pil-12.1"])
def test_clip_normalized_equals_the_float64_formula(reference, resample):
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    hwc = photo("rocket")  # 427x640
    chw = to_chw(hwc)
    for size, crop in [(smart_resize(427, 640), None), ((224, 335), (0, 55, 224, 224)), ((700, 40), None)]:
        if reference == "pil-12.1":
            pixels = pillow_two_calls(hwc, size, resample, vertical_first_=False)
        else:
            pixels = reference_resize(reference, hwc, size, resample)
        if crop is not None:
            top, left, h, w = crop
            pixels = pixels[:, top : top + h, left : left + w]
        expected = clip_formula(pixels)
        got32 = norm.resize(chw, torch.float32, size, resample=resample, reference=reference, crop=crop)
        assert got32.dtype == torch.float32 and got32.shape == expected.shape
        err = (got32.double() - expected).abs().max().item()
        assert err <= 1e-6, f"{size} crop {crop}: max |fp32 - float64 formula| = {err}"
        for dtype in (torch.bfloat16, torch.float16):
            got = norm.resize(chw, dtype, size, resample=resample, reference=reference, crop=crop)
            assert got.dtype == dtype
            assert torch.equal(got, got32.to(dtype)), f"{dtype} is not the fp32 result rounded"


@pytest.mark.parametrize("geometry", [(14, 2, 2), (16, 2, 2)], ids=["qwen2-vl", "qwen3-vl"])
@pytest.mark.parametrize("reference", REFERENCES)
def test_patchify_resized_equals_patchify_of_the_reference_pixels(reference, geometry):
    """patchify(min_pixels/max_pixels) is the reference's resize to smart_resize, then the (separately tested)
    patch layout; an image already at its smart_resize size is only cut (both references copy it)."""
    patch, temporal, merge = geometry
    factor = patch * merge
    images = [photo(n) for n in PHOTOS] + [photo("astronaut")[: 15 * factor, : 9 * factor]]
    kwargs = {"patch_size": patch, "temporal_patch_size": temporal, "merge_size": merge}
    for bounds in [{"max_pixels": 28 * 28 * 1280}, {"min_pixels": 256 * 28 * 28, "max_pixels": 400 * 28 * 28}]:
        sizes = [smart_resize(*i.shape[:2], factor, **({"min_pixels": 56 * 56} | bounds)) for i in images]
        if "min_pixels" not in bounds:
            assert sizes[-1] == images[-1].shape[:2]  # the copy branch
        expected = [
            IDENTITY.patchify(reference_resize(reference, i, s, "bicubic"), torch.float32, **kwargs)
            for i, s in zip(images, sizes, strict=True)
        ]
        got, grid = IDENTITY.patchify(
            [to_chw(i) for i in images], torch.float32, reference=reference, **bounds, **kwargs
        )
        assert torch.equal(grid, torch.cat([g for _, g in expected]))
        assert_exact(got, torch.cat([p for p, _ in expected]), f"{bounds}")
        got_last, _ = IDENTITY.patchify(
            [torch.from_numpy(i) for i in images],
            torch.float32,
            reference=reference,
            channel_dim=-1,
            **bounds,
            **kwargs,
        )
        assert torch.equal(got_last, got)


# ----- bad input: a named error before any kernel runs, nothing written -----


def no_kernel_ran(recorder: RecordOps) -> bool:
    return not [f for f in recorder.ops() if "fused_input_norm" in str(f)]


def good_resize():
    return {
        "images": torch.randint(0, 256, (3, 40, 60), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)),
        "visual_dtype": torch.float32,
        "size": (24, 32),
    }


MODULE_RESIZE_BAD = [
    (
        "images-float32",
        {"images": torch.rand(3, 40, 60)},
        TypeError,
        r"images must be torch\.uint8.*got torch\.float32",
    ),
    (
        "images-uint16",
        {"images": torch.zeros(3, 40, 60, dtype=torch.uint16)},
        TypeError,
        r"images must be torch\.uint8",
    ),
    ("images-int8", {"images": torch.zeros(3, 40, 60, dtype=torch.int8)}, TypeError, r"images must be torch\.uint8"),
    (
        "images-numpy",
        {"images": np.zeros((3, 40, 60), np.uint8)},
        TypeError,
        r"images must be a torch\.Tensor, got ndarray",
    ),
    (
        "images-2d",
        {"images": torch.zeros(40, 60, dtype=torch.uint8)},
        ValueError,
        r"images must be \[C, H, W\] or \[B, C, H, W\] with C = 3",
    ),
    ("images-5d", {"images": torch.zeros(1, 1, 3, 4, 4, dtype=torch.uint8)}, ValueError, r"images must be \[C, H, W\]"),
    (
        "images-4-channels",
        {"images": torch.zeros(4, 40, 60, dtype=torch.uint8)},
        ValueError,
        r"with C = 3.*got shape \(4, 40, 60\)",
    ),
    ("images-1-channel", {"images": torch.zeros(1, 40, 60, dtype=torch.uint8)}, ValueError, r"with C = 3"),
    (
        "images-hwc-as-chw",
        {"images": torch.zeros(40, 60, 3, dtype=torch.uint8)},
        ValueError,
        r"with C = 3 \(channel_dim=-3\)",
    ),
    (
        "images-chw-as-hwc",
        {"images": torch.zeros(3, 40, 60, dtype=torch.uint8), "channel_dim": -1},
        ValueError,
        r"\[H, W, C\] or \[B, H, W, C\] with C = 3",
    ),
    ("images-empty", {"images": torch.zeros(3, 0, 60, dtype=torch.uint8)}, ValueError, r"images must have H, W >= 1"),
    ("channel_dim-0", {"channel_dim": 0}, ValueError, r"channel_dim must be -3 .* or -1"),
    ("size-zero", {"size": (0, 32)}, ValueError, r"size must be \(height, width\) >= 1, got \(0, 32\)"),
    ("size-negative", {"size": (24, -1)}, ValueError, r"size must be \(height, width\) >= 1"),
    ("size-int", {"size": 224}, ValueError, r"size must be a sequence of 2 ints, got 224"),
    ("size-length-1", {"size": (224,)}, ValueError, r"size must be a sequence of 2 ints"),
    ("size-length-3", {"size": (3, 24, 32)}, ValueError, r"size must be a sequence of 2 ints"),
    ("size-floats", {"size": (24.0, 32.0)}, ValueError, r"size must be a sequence of 2 ints, got \(24\.0, 32\.0\)"),
    ("size-bool", {"size": (True, 32)}, ValueError, r"size must be a sequence of 2 ints"),
    ("size-tensor", {"size": torch.tensor([24, 32])}, ValueError, r"size must be a sequence of 2 ints"),
    ("size-none", {"size": None}, ValueError, r"size must be a sequence of 2 ints, got None"),
    (
        "resample-nearest",
        {"resample": "nearest"},
        ValueError,
        r"resample must be one of 'bilinear', 'bicubic', 'lanczos', 'cv2_cubic', 'cv2_cubic_f32', 'bilinear_no_antialias', "
        r"'bilinear_no_antialias_f32', 'bilinear_no_antialias_f32_cl', 'bilinear_f32', 'bicubic_f32', got 'nearest'",
    ),
    ("resample-box", {"resample": "box"}, ValueError, r"resample must be one of .*got 'box'"),
    ("resample-upper-case", {"resample": "BICUBIC"}, ValueError, r"resample must be one of"),
    ("resample-pil-enum", {"resample": 3}, ValueError, r"resample must be one of .*got 3"),
    ("reference-pillow", {"reference": "pillow"}, ValueError, r"reference must be one of .*got 'pillow'"),
    ("reference-pil-12", {"reference": "pil-12"}, ValueError, r"reference must be one of"),
    ("reference-torch", {"reference": "torch"}, ValueError, r"reference must be one of"),
    ("reference-none", {"reference": None}, ValueError, r"reference must be one of"),
    (
        "crop-too-tall",
        {"crop": (0, 0, 25, 32)},
        ValueError,
        r"crop \(top, left, height, width\) = \(0, 0, 25, 32\) must lie inside the resized image of size \(24, 32\)",
    ),
    ("crop-past-the-right", {"crop": (0, 1, 24, 32)}, ValueError, r"crop .* must lie inside"),
    ("crop-negative-top", {"crop": (-1, 0, 10, 10)}, ValueError, r"crop .* must lie inside"),
    ("crop-empty", {"crop": (0, 0, 0, 10)}, ValueError, r"crop .* must lie inside"),
    ("crop-length-2", {"crop": (10, 10)}, ValueError, r"crop must be a sequence of 4 ints"),
    ("crop-floats", {"crop": (0.0, 0.0, 10.0, 10.0)}, ValueError, r"crop must be a sequence of 4 ints"),
    ("visual_dtype-uint8", {"visual_dtype": torch.uint8}, TypeError, r"visual_dtype must be one of"),
    ("visual_dtype-float64", {"visual_dtype": torch.float64}, TypeError, r"visual_dtype must be one of"),
]


@pytest.mark.parametrize("changes,error,match", [pytest.param(*c[1:], id=c[0]) for c in MODULE_RESIZE_BAD])
@pytest.mark.parametrize("module", ["identity", "clip"])
def test_resize_rejects_before_any_kernel(module, changes, error, match):
    norm = IDENTITY if module == "identity" else FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    kwargs = good_resize() | changes
    images = kwargs.pop("images")
    with RecordOps() as recorder, pytest.raises(error, match=r"^FusedInputNorm\.resize: .*" + match):
        norm.resize(images, **kwargs)
    assert no_kernel_ran(recorder), recorder.ops()


def test_a_good_resize_call_is_recorded():
    """The recorder the bad-input tests rely on does see the resize kernel."""
    kwargs = good_resize()
    with RecordOps() as recorder:
        IDENTITY.resize(kwargs.pop("images"), **kwargs)
    assert not no_kernel_ran(recorder)


def good_patchify():
    return {"images": to_chw(photo("chelsea")), "visual_dtype": torch.float32, "max_pixels": 28 * 28 * 256}


PATCHIFY_BAD = [
    (
        "max_pixels-below-one-merged-patch",
        {"max_pixels": 28 * 28 - 1},
        ValueError,
        r"max_pixels = 783 is below one merged patch .*= 784",
    ),
    (
        "qwen3-max_pixels-below-one-merged-patch",
        {"max_pixels": 32 * 32 - 1, "patch_size": 16},
        ValueError,
        r"max_pixels = 1023 is below one merged patch",
    ),
    (
        "min_pixels-above-max_pixels",
        {"min_pixels": 28 * 28 * 300},
        ValueError,
        r"min_pixels = 235200 exceeds max_pixels = 200704",
    ),
    ("min_pixels-zero", {"min_pixels": 0}, ValueError, r"min_pixels must be an int >= 1 or None, got 0"),
    ("max_pixels-negative", {"max_pixels": -5}, ValueError, r"max_pixels must be an int >= 1 or None"),
    ("max_pixels-float", {"max_pixels": 1e6}, ValueError, r"max_pixels must be an int >= 1 or None, got 1000000\.0"),
    ("max_pixels-bool", {"max_pixels": True}, ValueError, r"max_pixels must be an int >= 1 or None"),
    (
        "aspect-ratio-wide",
        {"images": torch.zeros(3, 2, 401, dtype=torch.uint8)},
        ValueError,
        r"images \(2x401\): absolute aspect ratio must be smaller than 200, got 200\.5",
    ),
    (
        "aspect-ratio-tall",
        {"images": torch.zeros(3, 603, 3, dtype=torch.uint8)},
        ValueError,
        r"images \(603x3\): absolute aspect ratio must be smaller than 200",
    ),
    (
        "aspect-ratio-in-a-list",
        {"images": [torch.zeros(3, 56, 56, dtype=torch.uint8), torch.zeros(3, 1, 250, dtype=torch.uint8)]},
        ValueError,
        r"images\[1\] \(1x250\): absolute aspect ratio",
    ),
    ("images-float32", {"images": torch.rand(3, 56, 56)}, TypeError, r"images must be torch\.uint8 to be resized"),
    (
        "images-float16-in-a-list",
        {"images": [torch.zeros(3, 56, 56, dtype=torch.uint8), torch.zeros(3, 56, 56, dtype=torch.float16)]},
        TypeError,
        r"images\[1\] must be torch\.uint8",
    ),
    (
        "images-clip",
        {"images": torch.zeros(2, 3, 56, 56, dtype=torch.uint8)},
        ValueError,
        r"images must be one image \[C, H, W\] to be resized",
    ),
    (
        "images-4-channels",
        {"images": torch.zeros(4, 56, 56, dtype=torch.uint8)},
        ValueError,
        r"images has 4 channels on axis -3 .*expected 3",
    ),
    (
        "images-chw-as-hwc",
        {"images": torch.zeros(3, 56, 56, dtype=torch.uint8), "channel_dim": -1},
        ValueError,
        r"images has 56 channels on axis -1",
    ),
    ("images-empty", {"images": torch.zeros(3, 0, 56, dtype=torch.uint8)}, ValueError, r"images is empty"),
    ("images-empty-list", {"images": []}, ValueError, r"images must be a tensor or a non-empty list"),
    (
        "resample-nearest",
        {"resample": "nearest"},
        ValueError,
        r"resample must be one of 'bilinear', 'bicubic', 'lanczos', 'cv2_cubic', 'cv2_cubic_f32', 'bilinear_no_antialias', "
        r"'bilinear_no_antialias_f32', 'bilinear_no_antialias_f32_cl', 'bilinear_f32', 'bicubic_f32', got 'nearest'",
    ),
    ("reference-pillow", {"reference": "pillow"}, ValueError, r"reference must be one of"),
    ("patch_size-zero", {"patch_size": 0}, ValueError, r"patch_size must be an int >= 1"),
    ("visual_dtype-uint8", {"visual_dtype": torch.uint8}, TypeError, r"visual_dtype must be one of"),
]


@pytest.mark.parametrize("changes,error,match", [pytest.param(*c[1:], id=c[0]) for c in PATCHIFY_BAD])
def test_patchify_resize_rejects_before_any_kernel(changes, error, match):
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    kwargs = good_patchify() | changes
    images = kwargs.pop("images")
    with RecordOps() as recorder, pytest.raises(error, match=r"^FusedInputNorm\.patchify: .*" + match):
        norm.patchify(images, **kwargs)
    assert no_kernel_ran(recorder), recorder.ops()


def test_aspect_ratio_of_exactly_200_is_accepted():
    got, grid = IDENTITY.patchify(torch.zeros(3, 2, 400, dtype=torch.uint8), torch.float32, max_pixels=28 * 28 * 1280)
    h, w = smart_resize(2, 400)
    assert grid.tolist() == [[1, h // 14, w // 14]] and got.shape[0] == (h // 14) * (w // 14)


# The op: a valid call (input [2, 3, 37, 53] -> 20x70, crop (3, 5, 10, 30)), and cases that change one argument.
IN_SHAPE, SIZE, CROP = (2, 3, 37, 53), [20, 70], [3, 5, 10, 30]


def good_op():
    gen = torch.Generator().manual_seed(3)
    return {
        "out": torch.full((2, 3, 10, 30), SENTINEL),
        "input": torch.randint(0, 256, IN_SHAPE, dtype=torch.uint8, generator=gen),
        "weight": torch.rand(3, generator=gen),
        "bias": torch.rand(3, generator=gen),
        "row_plan": resample_plan(37, 20, "bicubic", "pil"),
        "col_plan": resample_plan(53, 70, "bicubic", "pil"),
        "size": list(SIZE),
        "crop": list(CROP),
        "resample": "bicubic",
        "vertical_first": False,
        "patches": [],
    }


def op(**changes):
    """A case: the good call with `changes` (each a value or a function of the good arguments)."""

    def make():
        args = good_op()
        return args | {k: v(args) if callable(v) else v for k, v in changes.items()}

    return make


def _overlapping_out():
    buf = torch.full((3 + 2 * 3 * 10 * 30,), SENTINEL)
    buf[:3] = 1.0
    return buf[:-3].view(2, 3, 10, 30), buf[:3]


def _out_overlapping_weight(args):
    out, weight = _overlapping_out()
    return args | {"out": out, "weight": weight}


OP_BAD = [
    (
        "input-float32",
        op(input=lambda a: a["input"].float()),
        TypeError,
        r"input must be a torch\.uint8 image \(torch\.float32 only with the filters 'bilinear_no_antialias_f32', "
        r"'bilinear_no_antialias_f32_cl', 'bilinear_f32', 'bicubic_f32'\), got torch\.float32",
    ),
    (
        "input-3d",
        op(input=lambda a: a["input"][0]),
        ValueError,
        r"input must be 4-D \[B, C, H, W\], got shape \[3, 37, 53\]",
    ),
    ("input-empty", op(input=torch.zeros(2, 3, 0, 53, dtype=torch.uint8)), ValueError, r"input must have H, W >= 1"),
    (
        "input-side-2^24",
        op(input=torch.zeros(2, 3, 37, 1, dtype=torch.uint8).expand(2, 3, 37, 2**24)),
        ValueError,
        r"image sides must be below 2\^24",
    ),
    ("weight-length-4", op(weight=torch.rand(4)), ValueError, r"weight must have one value per channel"),
    ("weight-float64", op(weight=torch.rand(3, dtype=torch.float64)), TypeError, r"weight must be a float32 tensor"),
    ("bias-2d", op(bias=torch.rand(3, 1)), ValueError, r"bias must be 1-D"),
    (
        "resample-nearest",
        op(resample="nearest"),
        ValueError,
        r"resample must be 'bilinear', 'bicubic', 'lanczos', 'cv2_cubic', 'cv2_cubic_f32', 'bilinear_no_antialias', "
        r"'bilinear_no_antialias_f32', 'bilinear_no_antialias_f32_cl', 'bilinear_f32' or 'bicubic_f32', got 'nearest'",
    ),
    ("size-length-1", op(size=[20]), ValueError, r"size must be \(height, width\) >= 1, got \[20\]"),
    ("size-zero", op(size=[0, 70]), ValueError, r"size must be \(height, width\) >= 1, got \[0, 70\]"),
    ("row_plan-missing", op(row_plan=None), ValueError, r"row_plan is required: the axis is resampled from 37 to 20"),
    (
        "col_plan-for-an-unchanged-axis",
        op(size=[20, 53]),
        ValueError,
        r"col_plan must be None: the axis keeps its size 53",
    ),
    (
        "row_plan-int64",
        op(row_plan=lambda a: a["row_plan"].long()),
        TypeError,
        r"row_plan must be an int32 tensor from fused_input_norm\.resample_plan, got torch\.int64",
    ),
    ("col_plan-float32", op(col_plan=lambda a: a["col_plan"].float()), TypeError, r"col_plan must be an int32 tensor"),
    (
        "row_plan-too-short",
        op(row_plan=lambda a: a["row_plan"][:-1]),
        ValueError,
        r"row_plan must be the contiguous 1-D plan of resample_plan\(37, 20\) \(224 values\), got shape \[223\]",
    ),
    (
        "row_plan-2d",
        op(row_plan=lambda a: a["row_plan"].view(1, -1)),
        ValueError,
        r"row_plan must be the contiguous 1-D plan",
    ),
    (
        "row_plan-strided",
        op(row_plan=lambda a: torch.stack([a["row_plan"], a["row_plan"]], 1)[:, 0]),
        ValueError,
        r"row_plan must be the contiguous 1-D plan",
    ),
    (
        "plans-swapped",
        op(row_plan=lambda a: a["col_plan"], col_plan=lambda a: a["row_plan"]),
        ValueError,
        r"row_plan must be the contiguous 1-D plan of resample_plan\(37, 20\)",
    ),
    (
        "row_plan-bilinear-for-bicubic",
        op(row_plan=resample_plan(37, 20, "bilinear", "pil")),
        ValueError,
        r"row_plan must be the contiguous 1-D plan",
    ),
    (
        "row_plan-for-other-sizes",
        op(row_plan=resample_plan(38, 20, "bicubic", "pil")),
        ValueError,
        r"row_plan was planned for 38 -> 20, the call resamples 37 -> 20",
    ),
    (
        "col_plan-for-other-sizes",
        op(col_plan=resample_plan(5, 70, "bicubic", "pil")),
        ValueError,
        r"col_plan was planned for 5 -> 70, the call resamples 53 -> 70",
    ),
    (
        "row_plan-on-meta",
        op(row_plan=lambda a: a["row_plan"].to("meta")),
        RuntimeError,
        r"row_plan must be on input's device cpu, got meta",
    ),
    ("crop-length-3", op(crop=[3, 5, 10]), ValueError, r"crop must be \(top, left, height, width\), got \[3, 5, 10\]"),
    (
        "crop-outside",
        op(crop=[11, 5, 10, 30]),
        ValueError,
        r"crop \(top, left, height, width\) = \[11, 5, 10, 30\] must lie inside the resampled image of size \[20, 70\]",
    ),
    ("crop-negative", op(crop=[-1, 5, 10, 30]), ValueError, r"must lie inside the resampled image"),
    (
        "patches-length-2",
        op(patches=[2, 14]),
        ValueError,
        r"patches must be empty or \(temporal_patch_size, patch_size, merge_size\) >= 1 and optionally a layout, 0 "
        r"\(channels first\), 1 \(channels last\) or 2 \(strips\), got \[2, 14\]",
    ),
    ("patches-zero", op(patches=[2, 0, 2]), ValueError, r"patches must be empty or"),
    (
        "patches-layout-3",
        op(patches=[1, 5, 2, 3]),
        ValueError,
        r"0 \(channels first\), 1 \(channels last\) or 2 \(strips\), got \[1, 5, 2, 3\]",
    ),
    (
        "strips-merge-2",
        op(patches=[1, 5, 2, 2]),
        ValueError,
        r"strips \(layout 2\) are of single patches: temporal_patch_size and merge_size must be 1 and clip False, "
        r"got patches \[1, 5, 2, 2\]",
    ),
    ("strips-temporal-2", op(patches=[2, 5, 1, 2]), ValueError, r"strips \(layout 2\) are of single patches"),
    (
        "strips-clip",
        op(patches=[1, 5, 1, 2], clip=True),
        ValueError,
        r"got patches \[1, 5, 1, 2\] and clip True",
    ),
    (
        "strips-out-shape",
        op(patches=[1, 5, 1, 2], out=torch.full((3, 5, 60), SENTINEL)),
        ValueError,
        r"out must have shape \[3, 5, 120\], got \[3, 5, 60\]",
    ),
    (
        "strips-out-not-a-window",
        op(patches=[1, 5, 1, 2], out=torch.full((3, 5, 600), SENTINEL)[:, :, ::5]),
        ValueError,
        r"out must be contiguous, or for strips a window of wider strips",
    ),
    (
        "strips-out-rows-overlap",
        op(patches=[1, 5, 1, 2], out=torch.full((1600,), SENTINEL).as_strided((3, 5, 120), (500, 100, 1))),
        ValueError,
        r"a window of wider strips \(strides \(5 \* pitch, pitch, 1\), pitch >= 120\), got stride \[500, 100, 1\]",
    ),
    (
        "strips-out-uneven-pitch",
        op(patches=[1, 5, 1, 2], out=torch.full((3, 6, 130), SENTINEL)[:, :5, :120]),
        ValueError,
        r"got stride \[780, 130, 1\]",
    ),
    (
        "rows-out-strided",
        op(patches=[1, 5, 1, 1], out=torch.full((24, 150), SENTINEL)[:, :75]),
        ValueError,
        r"out must be contiguous, got stride \[150, 1\]",
    ),
    ("patches-length-5", op(patches=[1, 5, 2, 1, 0]), ValueError, r"patches must be empty or"),
    (
        "patches-crop-not-a-multiple",
        op(patches=[2, 14, 2]),
        ValueError,
        r"the cropped image 10x30 must be a multiple of patch_size \* merge_size = 28",
    ),
    (
        "out-int16",
        op(out=torch.full((2, 3, 10, 30), 77, dtype=torch.int16)),
        TypeError,
        r"out must have one of the dtypes torch\.uint8, .*got torch\.int16",
    ),
    (
        "out-float64",
        op(out=torch.full((2, 3, 10, 30), SENTINEL, dtype=torch.float64)),
        TypeError,
        r"out must have one of the dtypes",
    ),
    (
        "out-shape",
        op(out=torch.full((2, 3, 10, 31), SENTINEL)),
        ValueError,
        r"out must have shape \[2, 3, 10, 30\], got \[2, 3, 10, 31\]",
    ),
    (
        "out-non-contiguous",
        op(out=torch.full((2, 3, 30, 10), SENTINEL).transpose(2, 3)),
        ValueError,
        r"out must be contiguous",
    ),
    (
        "out-on-meta",
        op(out=torch.empty(2, 3, 10, 30, device="meta")),
        RuntimeError,
        r"out must be on input's device cpu, got meta",
    ),
    (
        "out-overlaps-weight",
        lambda: _out_overlapping_weight(good_op()),
        ValueError,
        r"out overlaps an input of the call",
    ),
    ("clip-without-patches", op(clip=True), ValueError, r"clip needs patches \(temporal_patch_size, patch_size"),
    (
        "clip-frames-not-whole-groups",
        op(patches=[3, 5, 2], crop=[0, 0, 10, 30], clip=True, out=torch.full((12, 225), SENTINEL)),
        ValueError,
        r"clip: the 2 input frames must be whole groups of temporal_patch_size 3",
    ),
    (
        "clip-out-shape",
        op(patches=[2, 5, 2], crop=[0, 0, 10, 30], clip=True, out=torch.full((24, 150), SENTINEL)),
        ValueError,
        r"out must have shape \[12, 150\], got \[24, 150\]",
    ),
]
# Cases only the real kernel can decide: plan contents, addresses (and a meta tensor already runs the fake).
NOT_METADATA = {
    "row_plan-for-other-sizes",
    "col_plan-for-other-sizes",
    "out-overlaps-weight",
    "row_plan-on-meta",
    "out-on-meta",
}


def test_the_good_op_call_is_exact():
    """The calls below each change one argument of this one, which matches Pillow's passes in the order that
    vertical_first names (one Image.resize per axis), then the affine (float64 reference)."""
    for first in (False, True):
        args = good_op() | {"vertical_first": first}
        resize_affine_out(**args)
        hwc = args["input"].permute(0, 2, 3, 1).numpy()
        top, left, h, w = CROP
        for b in range(2):
            pixels = pillow_two_calls(np.ascontiguousarray(hwc[b]), SIZE, "bicubic", vertical_first_=first)
            pixels = pixels[:, top : top + h, left : left + w]
            assert_affine_close(args["out"][b], pixels, args["weight"], args["bias"], 0)


def test_plans_for_other_sizes_have_the_same_length():
    """The "planned for other sizes" cases are only caught by the plan's header, not by its length."""
    assert resample_plan(38, 20).numel() == resample_plan(37, 20).numel()
    assert resample_plan(5, 70).numel() == resample_plan(53, 70).numel()


@pytest.mark.parametrize("make,error,match", [pytest.param(*c[1:], id=c[0]) for c in OP_BAD])
def test_resize_affine_out_rejects_and_writes_nothing(make, error, match):
    args = make()
    out = args["out"]
    before = None if out.device.type == "meta" else out.clone()
    weight_before = args["weight"].clone() if args["weight"].device.type != "meta" else None
    with pytest.raises(error, match=r"^fused_input_norm\.resize_affine_out: .*" + match):
        resize_affine_out(**args)
    if before is not None:
        assert torch.equal(out, before), "a rejected call wrote into out"
    if weight_before is not None:
        assert torch.equal(args["weight"], weight_before)


@pytest.mark.parametrize(
    "make,error,match", [pytest.param(*c[1:], id=c[0]) for c in OP_BAD if c[0] not in NOT_METADATA]
)
def test_fake_kernel_rejects_like_the_kernel(make, error, match):
    """torch.compile/export run the fake kernel: each metadata-decidable bad call must fail there with the
    eager type and message, not pass a call the real op then refuses."""
    args = make()
    with pytest.raises(error) as eager:
        resize_affine_out(**args)
    with FakeTensorMode() as mode:
        fake = {k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in args.items()}
        with pytest.raises(Exception) as faked:  # the type is compared below
            resize_affine_out(**fake)
    assert (type(faked.value), str(faked.value)) == (type(eager.value), str(eager.value))
    # Meta tensors take the fake kernel too (no FakeTensorMode).
    meta = {
        k: torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta") if isinstance(v, torch.Tensor) else v
        for k, v in args.items()
    }
    with pytest.raises(Exception) as on_meta:
        resize_affine_out(**meta)
    assert (type(on_meta.value), str(on_meta.value)) == (type(eager.value), str(eager.value))


PLAN_BAD = [
    ("in_size-zero", (0, 10), r"in_size and out_size must be in \[1, 2\^24\), got 0 and 10"),
    ("out_size-zero", (10, 0), r"in_size and out_size must be in \[1, 2\^24\), got 10 and 0"),
    ("out_size-negative", (10, -3), r"in_size and out_size must be in"),
    ("in_size-2^24", (2**24, 10), r"in_size and out_size must be in"),
    (
        "resample-nearest",
        (10, 5, "nearest"),
        r"resample must be 'bilinear', 'bicubic', 'lanczos', 'cv2_cubic', 'cv2_cubic_f32', 'bilinear_no_antialias', "
        r"'bilinear_no_antialias_f32', 'bilinear_no_antialias_f32_cl', 'bilinear_f32' or 'bicubic_f32', got 'nearest'",
    ),
    ("reference-pil-13", (10, 5, "bicubic", "pil-13"), r"reference must be 'pil' or 'torchvision', got 'pil-13'"),
    ("reference-torch", (10, 5, "bicubic", "torch"), r"reference must be 'pil' or 'torchvision'"),
]


@pytest.mark.parametrize("args,match", [pytest.param(*c[1:], id=c[0]) for c in PLAN_BAD])
def test_resample_plan_rejects(args, match):
    with pytest.raises(ValueError, match=r"^fused_input_norm\.resample_plan: .*" + match):
        resample_plan(*args)


@pytest.mark.parametrize("args,match", [pytest.param(*c[1:], id=c[0]) for c in PLAN_BAD])
def test_resample_plan_fake_rejects_like_the_kernel(args, match):
    with pytest.raises(ValueError) as eager:
        resample_plan(*args)
    with FakeTensorMode(), pytest.raises(Exception) as faked:
        resample_plan(*args)
    assert (type(faked.value), str(faked.value)) == (type(eager.value), str(eager.value))


def test_resample_plan_fake_has_the_real_length():
    pairs = [
        (i, o) for i in (1, 2, 3, 7, 37, 224, 400, 401, 1000, 4032) for o in (1, 2, 5, 20, 224, 399, 1148) if i != o
    ]
    for resample in RESAMPLES:
        for reference in REFERENCES:
            real = [resample_plan(i, o, resample, reference).shape for i, o in pairs]
            with FakeTensorMode():
                fake = [resample_plan(i, o, resample, reference).shape for i, o in pairs]
            assert fake == real


# ----- opcheck, torch.compile, torch.export -----

OPCHECK_CASES = {
    "nchw-crop-bicubic-pil": ((2, 3, 37, 53), (20, 70), (3, 5, 10, 30), "bicubic", "pil", False, ()),
    "width-only-bilinear-torchvision": ((1, 3, 31, 40), (31, 17), (0, 0, 31, 17), "bilinear", "torchvision", False, ()),
    "vertical-first-1-channel": ((1, 1, 64, 30), (9, 27), (0, 0, 9, 27), "bicubic", "pil", True, ()),
    "patches": ((1, 3, 45, 60), (28, 56), (0, 0, 28, 56), "bicubic", "pil", True, (2, 14, 2)),
}


@pytest.mark.parametrize("case", list(OPCHECK_CASES))
def test_opcheck(case):
    shape, size, crop, resample, reference, first, patches = OPCHECK_CASES[case]
    gen = torch.Generator().manual_seed(4)
    x = torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen)
    channels, (in_h, in_w) = shape[1], shape[2:]
    plans = [
        resample_plan(n_in, n_out, resample, reference) if n_in != n_out else None
        for n_in, n_out in ((in_h, size[0]), (in_w, size[1]))
    ]
    h, w = crop[2:]
    if patches:
        t, p, _ = patches
        out = torch.empty(shape[0] * (h // p) * (w // p), channels * t * p * p)
    else:
        out = torch.empty(shape[0], channels, h, w)
    args = (
        out,
        x,
        torch.rand(channels, generator=gen),
        torch.rand(channels, generator=gen),
        *plans,
        list(size),
        list(crop),
        resample,
        first,
        list(patches),
    )
    torch.library.opcheck(torch.ops.fused_input_norm.resize_affine_out.default, args)


def test_opcheck_resample_plan():
    for args in [(37, 20, "bicubic", "pil"), (20, 37, "bilinear", "torchvision")]:
        torch.library.opcheck(torch.ops.fused_input_norm.resample_plan.default, args)


class ClipTower(torch.nn.Module):
    """A CLIP-style input: native uint8 image -> 224 shortest edge -> center crop 224 -> normalized; and the
    same image as Qwen2-VL patches."""

    def __init__(self, reference: str):
        super().__init__()
        self.norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
        self.reference = reference

    def forward(self, images):
        clip = self.norm.resize(images, torch.bfloat16, (224, 335), crop=(0, 55, 224, 224), reference=self.reference)
        patches, _ = self.norm.patchify(images, torch.bfloat16, max_pixels=28 * 28 * 256, reference=self.reference)
        return clip, patches


def assert_same_outputs(got, expected, label):
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, label
        assert torch.equal(a, b), f"{label}: {int((a != b).sum())} of {a.numel()} values differ"


@pytest.mark.parametrize("reference", REFERENCES)
def test_compile_fullgraph_matches_eager(reference):
    torch._dynamo.reset()
    images = to_chw(photo("rocket"))
    model = ClipTower(reference)
    compiled = torch.compile(model, fullgraph=True)
    fresh = ClipTower(reference)  # eager, never traced
    for x in (images, images.flip(-1)):
        assert_same_outputs(compiled(x), fresh(x), "compiled")
    assert_same_outputs(model(images), fresh(images), "the compiled module, called eagerly afterwards")


@pytest.mark.parametrize("reference", REFERENCES)
def test_export_matches_eager(reference):
    images = to_chw(photo("rocket"))
    exported = torch.export.export(ClipTower(reference).eval(), (images,))
    ops = {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
    assert any("fused_input_norm.resize_affine_out" in o for o in ops), ops
    fresh = ClipTower(reference)
    for x in (images, images.flip(-1)):
        assert_same_outputs(exported.module()(x), fresh(x), "exported")


def test_module_still_right_eagerly_after_export():
    """torch.export traces the module's Python with fake tensors: nothing it creates may stay in the module
    (the plan cache), or later eager calls with the same sizes run on fake plans."""
    images = to_chw(photo("rocket"))
    model = ClipTower("pil").eval()
    torch.export.export(model, (images,))
    assert_same_outputs(model(images), ClipTower("pil")(images), "eager after export")


# ----- the GPU: bit-equal to the CPU op -----


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)
@pytest.mark.parametrize("resample", RESAMPLES)
@pytest.mark.parametrize("reference", [*REFERENCES, "pil-12.1"])
def test_cuda_bit_equal_to_cpu(reference, resample):
    cpu = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    gpu = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255).cuda()
    identity_gpu = FusedInputNorm.identity().cuda()
    kw = {"resample": resample, "reference": reference}
    for name in PHOTOS:
        hwc = photo(name)
        h, w = hwc.shape[:2]
        chw = to_chw(hwc)
        for case in ("qwen-smart-resize", "upscale", "vertical-first", "height-only", "1x1"):
            size = SIZE_CASES[case](h, w)
            got = identity_gpu.resize(chw.cuda(), torch.float32, size, **kw)
            assert_exact(got.cpu(), IDENTITY.resize(chw, torch.float32, size, **kw), f"{name} {case} identity")
            for dtype in (torch.float32, torch.bfloat16):
                assert torch.equal(gpu.resize(chw.cuda(), dtype, size, **kw).cpu(), cpu.resize(chw, dtype, size, **kw))
        crop = (5, 55, 224, 224)
        got = gpu.resize(chw.cuda(), torch.bfloat16, (256, 335), crop=crop, **kw)
        assert torch.equal(got.cpu(), cpu.resize(chw, torch.bfloat16, (256, 335), crop=crop, **kw))
        hwc_t = torch.from_numpy(hwc)
        got = gpu.resize(hwc_t.cuda()[None], torch.float16, (200, 300), channel_dim=-1, **kw)
        assert torch.equal(got.cpu(), cpu.resize(hwc_t[None], torch.float16, (200, 300), channel_dim=-1, **kw))
    images = [to_chw(photo(n)) for n in PHOTOS]
    for patch in (14, 16):
        for bounds in ({"max_pixels": 28 * 28 * 1280}, {"min_pixels": 512 * 28 * 28, "max_pixels": 600 * 28 * 28}):
            got, grid = gpu.patchify([i.cuda() for i in images], torch.bfloat16, patch_size=patch, **bounds, **kw)
            expected, expected_grid = cpu.patchify(images, torch.bfloat16, patch_size=patch, **bounds, **kw)
            assert torch.equal(grid, expected_grid) and torch.equal(got.cpu(), expected)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)
def test_cuda_resize_does_not_sync_once_planned():
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255).cuda()
    images = to_chw(photo("coffee")).cuda()
    norm.resize(images, torch.bfloat16, (224, 336), crop=(0, 56, 224, 224))
    norm.patchify(images, torch.bfloat16, max_pixels=28 * 28 * 1280)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        norm.resize(images, torch.bfloat16, (224, 336), crop=(0, 56, 224, 224))
        norm.patchify(images, torch.bfloat16, max_pixels=28 * 28 * 1280)
    finally:
        torch.cuda.set_sync_debug_mode("default")


# ---- found by review: arguments whose products overflow, and plans that are not the planner's ----


def _resize_call(out, x, plans, size, crop, patches=()):
    w = torch.ones(x.shape[1])
    b = torch.zeros(x.shape[1])
    resize_affine_out(out, x, w, b, *plans, size, crop, "bilinear", False, list(patches))


def test_crop_whose_end_overflows_int64_is_refused_and_nothing_written():
    x = torch.zeros(1, 1, 10, 10, dtype=torch.uint8)
    out = torch.full((1, 1, 1, 10), -7.0)
    plans = (resample_plan(10, 5, "bilinear"), None)
    with pytest.raises(ValueError, match="crop"):
        _resize_call(out, x, plans, [5, 10], [2**63 - 1, 0, 1, 10])
    with pytest.raises(ValueError, match="crop"):
        _resize_call(out, x, plans, [5, 10], [0, 2**63 - 1, 1, 10])
    assert (out == -7).all()


@pytest.mark.parametrize("patches", [(1, 1 << 32, 1 << 32), (6148914691236517206, 1, 1), (1 << 62, 1 << 31, 1)])
def test_patches_whose_products_overflow_are_refused(patches):
    x = torch.zeros(1, 3, 4, 4, dtype=torch.uint8)
    out = torch.full((4, 2), -7.0)
    plans = (resample_plan(4, 2, "bilinear"), resample_plan(4, 2, "bilinear"))
    with pytest.raises(ValueError, match="patches"):
        _resize_call(out, x, plans, [2, 2], [0, 0, 2, 2], patches)
    assert (out == -7).all()


def test_a_cpu_plan_with_corrupt_windows_is_refused():
    x = torch.zeros(1, 1, 10, 10, dtype=torch.uint8)
    out = torch.full((1, 1, 5, 10), -7.0)
    for index, value in ((4, 100), (5, 1000), (4, -3)):  # first window's start, its count, a negative start
        plan = resample_plan(10, 5, "bilinear")
        plan[index] = value
        with pytest.raises(ValueError, match="not a plan made by resample_plan"):
            _resize_call(out, x, (plan, None), [5, 10], [0, 0, 5, 10])
    assert (out == -7).all()


def test_identity_module_resizes_under_another_default_dtype():
    image = torch.randint(0, 256, (3, 20, 30), dtype=torch.uint8)
    expected = FusedInputNorm.identity().resize(image, torch.float32, (10, 15))
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got = FusedInputNorm.identity().resize(image, torch.float32, (10, 15))
    finally:
        torch.set_default_dtype(previous)
    assert torch.equal(got, expected)


# ----- uint8 output: the resampled bytes in the layout, for engines that normalize later -----


def resize_bytes(chw: torch.Tensor, size, resample: str, reference: str, patches=(), crop=None, weight=None, bias=None):
    """resize_affine_out into a uint8 `out` (weight 1, bias 0 unless given): planar or patch rows."""
    channels, in_h, in_w = chw.shape[-3:]
    images = chw if chw.dim() == 4 else chw[None]
    crop = (0, 0, *size) if crop is None else crop
    weight = torch.ones(channels, device=chw.device) if weight is None else weight
    bias = torch.zeros(channels, device=chw.device) if bias is None else bias
    ref = "torchvision" if reference == "torchvision" else "pil"
    plans = [
        resample_plan(n_in, n_out, resample, ref).to(chw.device) if n_in != n_out else None
        for n_in, n_out in ((in_h, size[0]), (in_w, size[1]))
    ]
    h, w = crop[2:]
    if patches:
        t, p = patches[:2]
        shape = (images.shape[0] * (h // p) * (w // p), channels * t * p * p)
    else:
        shape = (images.shape[0], channels, h, w)
    out = torch.full(shape, 77, dtype=torch.uint8, device=chw.device)
    first = vertical_first(pil_rule(reference), in_h, in_w, *size)
    resize_affine_out(out, images, weight, bias, *plans, size, crop, resample, first, patches)
    return out


@pytest.mark.parametrize(
    "case", ["qwen-smart-resize", "upscale", "down-up", "height-only", "width-only", "vertical-first", "1x1"]
)
@pytest.mark.parametrize("resample", RESAMPLES)
@pytest.mark.parametrize("reference", REFERENCES)
def test_uint8_output_is_the_reference_bytes(reference, resample, case):
    for name in PHOTOS:
        hwc = photo(name)
        size = SIZE_CASES[case](*hwc.shape[:2])
        got = resize_bytes(to_chw(hwc), size, resample, reference)
        expected = reference_resize(reference, hwc, size, resample)
        assert got.dtype == torch.uint8 and differing(got[0], expected) == 0, f"{name} {case}"


@pytest.mark.parametrize("patch", [14, 16], ids=["qwen2-vl", "qwen3-vl"])
@pytest.mark.parametrize("reference", REFERENCES)
def test_resized_patch_rows_in_each_dtype_are_the_float32_rows_rounded(reference, patch):
    """The patch rows of a resize (the CPU writes bfloat16 ones straight from the resampled band on x86) are
    the float32 rows rounded, in each output dtype, for both layouts of the input and odd sizes."""
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    for name, rows, cols in (("astronaut", 512, 512), ("coffee", 400, 600), ("rocket", 427, 333)):
        hwc = photo(name)[:rows, :cols]
        for x, channel_dim in ((to_chw(hwc), -3), (torch.from_numpy(np.ascontiguousarray(hwc)), -1)):
            kwargs = {"patch_size": patch, "reference": reference, "channel_dim": channel_dim, "max_pixels": 300_000}
            want, grid = norm.patchify(x, torch.float32, **kwargs)
            for dtype in (torch.bfloat16, torch.float16):
                got, got_grid = norm.patchify(x, dtype, **kwargs)
                assert torch.equal(got_grid, grid)
                assert torch.equal(got, want.to(dtype)), f"{name} {channel_dim} {dtype}: not the float32 rows rounded"


@pytest.mark.parametrize("geometry", [(2, 14, 2), (2, 16, 2)], ids=["qwen2-vl", "qwen3-vl"])
@pytest.mark.parametrize("reference", REFERENCES)
def test_uint8_patch_rows_are_the_reference_bytes_in_patch_layout(reference, geometry):
    """The patch rows of the reference's resized bytes (patchify's layout of the float32 identity output,
    which test_patchify checks against transformers), with a crop and a batch of two."""
    t, p, m = geometry
    for name in PHOTOS:
        hwc = photo(name)
        size = smart_resize(*hwc.shape[:2], p * m)
        expected, _ = IDENTITY.patchify(
            reference_resize(reference, hwc, size, "bicubic"),
            torch.float32,
            patch_size=p,
            temporal_patch_size=t,
            merge_size=m,
        )
        got = resize_bytes(to_chw(hwc), size, "bicubic", reference, patches=geometry)
        assert got.dtype == torch.uint8 and torch.equal(got.float(), expected), name
    chw = to_chw(photo("astronaut"))
    batch = torch.stack([chw, chw.flip(-1)])
    crop = (p * m, 2 * p * m, 8 * p * m, 6 * p * m)
    got = resize_bytes(batch, (300, 400), "bicubic", reference, patches=geometry, crop=crop)
    planar = resize_bytes(batch, (300, 400), "bicubic", reference, crop=crop)
    expected, _ = IDENTITY.patchify(list(planar), torch.float32, patch_size=p, temporal_patch_size=t, merge_size=m)
    assert torch.equal(got.float(), expected)


def channels_last_rows(rows: torch.Tensor, channels: int, patch: int) -> torch.Tensor:
    """Patch rows [n, C * T * P * P] laid out [n, T, P, P, C] (Gemma 4's and LFM2-VL's order), by torch's permute."""
    return rows.view(rows.shape[0], channels, -1, patch, patch).permute(0, 2, 3, 4, 1).reshape(rows.shape)


# (T, P, m): LFM2-VL's and Gemma 4's patches, Qwen's geometry, Gemma 4 Unified's merged 48-pixel patch (taller than
# the CPU's band of tiles), and a patch of 5
CHANNELS_LAST_GEOMETRIES = [(1, 16, 1), (2, 14, 2), (1, 48, 1), (1, 5, 3)]


@pytest.mark.parametrize("geometry", CHANNELS_LAST_GEOMETRIES, ids=lambda g: "-".join(map(str, g)))
@pytest.mark.parametrize("reference", REFERENCES)
def test_channels_last_patch_rows_are_the_reference_bytes_so_laid_out(reference, geometry):
    """patches with channels_last 1: each row [T, P, P, C], the reference's resized bytes laid out by torch (a
    crop of a batch of two, a still's T frames one image repeated)."""
    t, p, m = geometry
    factor = p * m
    chw = to_chw(photo("astronaut"))
    batch = torch.stack([chw, chw.flip(-1)])
    size = (factor * 9 + 7, factor * 7 + 3)
    crop = (3, factor, factor * 8, factor * 5)
    got = resize_bytes(batch, size, "bicubic", reference, patches=(*geometry, 1), crop=crop)
    top, left, h, w = crop
    frames = torch.stack(
        [
            reference_resize(reference, np.ascontiguousarray(image.permute(1, 2, 0)), size, "bicubic")[
                :, top : top + h, left : left + w
            ]
            for image in batch
        ]
    )
    gh, gw = h // factor, w // factor
    # image, grid row, grid col, merge row, merge col, frame, patch row, patch col, channel
    tiled = frames[:, None].expand(-1, t, -1, -1, -1).reshape(2, t, 3, gh, m, p, gw, m, p)
    expected = tiled.permute(0, 3, 6, 4, 7, 1, 5, 8, 2).reshape(got.shape)
    assert got.dtype == torch.uint8 and torch.equal(got, expected.to(torch.uint8))


@pytest.mark.parametrize("geometry", CHANNELS_LAST_GEOMETRIES, ids=lambda g: "-".join(map(str, g)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_channels_last_patch_rows_hold_the_channel_first_rows_values(geometry, dtype):
    """With a normalizing affine, in each float dtype: the channel-first rows (checked against the references
    above and in test_patchify) holding the same values, each row transposed, whole bands and a clip's frames."""
    t, p, m = geometry
    factor = p * m
    chw = to_chw(photo("coffee"))
    weight, bias = torch.tensor([0.0145, 0.0150, 0.0142]), torch.tensor([-1.79, -1.75, -1.48])
    plans = [resample_plan(n, out, "bicubic", "pil") for n, out in ((400, factor * 6), (600, factor * 8))]
    for images, clip in ((chw[None], False), (torch.stack([chw, chw.flip(-2)] * t), True)):
        groups = images.shape[0] // t if clip else images.shape[0]
        shape = (groups * 6 * m * 8 * m, 3 * t * p * p)
        args = (images, weight, bias, *plans, (factor * 6, factor * 8), (0, 0, factor * 6, factor * 8), "bicubic")
        first, last = torch.full(shape, 7.0, dtype=dtype), torch.full(shape, 7.0, dtype=dtype)
        resize_affine_out(first, *args, False, list(geometry), clip)
        resize_affine_out(last, *args, False, [*geometry, 1], clip)
        assert torch.equal(last, channels_last_rows(first, 3, p)), (clip, dtype)


@pytest.mark.parametrize("patch", [14, 16, 5])
@pytest.mark.parametrize("reference", REFERENCES)
def test_strips_are_the_reference_bytes_so_laid_out_in_their_window(reference, patch):
    """patches with layout 2: MiniCPM-V's NaViT strips, row (c, y) the row y of every patch's channel c in raster
    order (a batch of two, a crop), written into a window of wider strips (the others' values untouched), and into
    a contiguous out."""
    chw = to_chw(photo("coffee"))
    batch = torch.stack([chw, chw.flip(-1)])
    size = (patch * 9 + 5, patch * 13 + 2)
    crop = (2, patch, patch * 8, patch * 11)
    top, left, h, w = crop
    frames = torch.stack(
        [
            reference_resize(reference, np.ascontiguousarray(image.permute(1, 2, 0)), size, "bicubic")[
                :, top : top + h, left : left + w
            ]
            for image in batch
        ]
    )
    # channel, patch row, image, grid row, grid col, patch col
    expected = frames.reshape(2, 3, h // patch, patch, w // patch, patch).permute(1, 3, 0, 2, 4, 5)
    expected = expected.reshape(3, patch, -1).to(torch.uint8)
    length = expected.shape[-1]
    wider = torch.full((1, 3, patch, length + 7 * patch), 77, dtype=torch.uint8)
    window = wider[0, :, :, 3 * patch : 3 * patch + length]
    plans = [resample_plan(n, out, "bicubic", reference) for n, out in ((400, size[0]), (600, size[1]))]
    first = vertical_first(pil_rule(reference), 400, 600, *size)
    args = (batch, torch.ones(3), torch.zeros(3), *plans, size, crop, "bicubic", first, [1, patch, 1, 2])
    resize_affine_out(window, *args)
    assert torch.equal(window, expected)
    outside = torch.cat([wider[..., : 3 * patch], wider[..., 3 * patch + length :]], dim=-1)
    assert (outside == 77).all()
    contiguous = torch.empty_like(expected)
    resize_affine_out(contiguous, *args)
    assert torch.equal(contiguous, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_strips_hold_the_channel_first_rows_values(dtype):
    """With a normalizing affine, in each float dtype, two views side by side in one strips tensor (MiniCPM-V's
    source view and a slice): the channel-first rows (checked against the references above) laid out by torch."""
    chw, patch = to_chw(photo("astronaut")), 14
    weight, bias = torch.tensor([0.0145, 0.0150, 0.0142]), torch.tensor([-1.79, -1.75, -1.48])
    views = [((patch * 20, patch * 20), None), ((patch * 10, patch * 12), (0, 0, 256, 300))]
    counts = [(h // patch) * (w // patch) for (h, w), _ in views]
    strips = torch.full((1, 3, patch, sum(counts) * patch), 7.0, dtype=dtype)
    start = 0
    for ((h, w), box), n in zip(views, counts, strict=True):
        image = chw if box is None else chw[:, box[0] : box[0] + box[2], box[1] : box[1] + box[3]]
        in_h, in_w = image.shape[-2:]
        plans = [resample_plan(a, b, "bicubic", "torchvision") for a, b in ((in_h, h), (in_w, w))]
        args = (image[None], weight, bias, *plans, (h, w), (0, 0, h, w), "bicubic", False)
        rows = torch.empty(n, 3 * patch * patch, dtype=dtype)
        resize_affine_out(rows, *args, [1, patch, 1])
        resize_affine_out(strips[0, :, :, start * patch : (start + n) * patch], *args, [1, patch, 1, 2])
        expected = rows.view(n, 3, patch, patch).permute(1, 2, 0, 3).reshape(3, patch, n * patch)
        assert torch.equal(strips[0, :, :, start * patch : (start + n) * patch], expected), (dtype, n)
        start += n


def test_uint8_output_rounds_and_clamps_the_affine():
    """Other weights: the float32 result rounded half to even and clamped to [0, 255], as torch writes it."""
    chw = to_chw(photo("coffee"))
    weight, bias = torch.tensor([1.5, -1.0, 0.25]), torch.tensor([-20.0, 260.0, 0.5])
    got = resize_bytes(chw, (100, 150), "bicubic", "torchvision", weight=weight, bias=bias)
    resampled = resize_bytes(chw, (100, 150), "bicubic", "torchvision").double()
    as_float = (resampled * weight.double()[:, None, None] + bias.double()[:, None, None]).float()  # exact here
    assert torch.equal(got, as_float.round().clamp(0, 255).to(torch.uint8))
    assert 0 < int((got == 0).sum()) and 0 < int((got == 255).sum())


def _qwen_patch_rows(chw: torch.Tensor, temporal: int, patch: int, merge: int) -> torch.Tensor:
    """transformers' Qwen2-VL patch rows of one still ([C, H, W] repeated `temporal` times), written out as its
    image processor reshapes them."""
    channels, height, width = chw.shape
    gh, gw = height // patch, width // patch
    frames = chw[None].expand(temporal, -1, -1, -1)
    x = frames.reshape(1, temporal, channels, gh // merge, merge, patch, gw // merge, merge, patch)
    x = x.permute(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return x.reshape(gh * gw, channels * temporal * patch * patch)


@pytest.mark.parametrize("layout", ["chw", "hwc-view"])
def test_no_resample_is_the_crop_copied_in_one_pass(layout):
    """size == the input's size: both references copy, so the op writes the crop itself (uint8), or its affine
    (float32, against a float64 formula), planar and as patch rows, from a contiguous or channels-last image."""
    hwc = photo("chelsea")[:280, :392]  # 280x392: a multiple of 28 both ways, as Qwen's smart_resize keeps it
    chw = to_chw(hwc) if layout == "chw" else torch.from_numpy(np.ascontiguousarray(hwc)).permute(2, 0, 1)
    size = tuple(chw.shape[1:])
    crop = (28, 56, 224, 308)
    top, left, h, w = crop
    expected = chw[:, top : top + h, left : left + w]
    weight, bias = torch.tensor([1.5, -1.0, 0.25]), torch.tensor([-20.0, 260.0, 0.5])
    for patches in [(), (2, 14, 2)]:
        got = resize_bytes(chw, size, "bicubic", "pil", patches=patches, crop=crop)
        want = expected[None] if not patches else _qwen_patch_rows(expected, *patches)
        assert got.dtype == torch.uint8 and torch.equal(got, want), patches
        out = torch.full(got.shape, SENTINEL)
        first = vertical_first(pil_rule("pil"), *size, *size)
        resize_affine_out(out, chw[None], weight, bias, None, None, size, crop, "bicubic", first, patches)
        affine = expected.double() * weight.double()[:, None, None] + bias.double()[:, None, None]
        want = affine[None] if not patches else _qwen_patch_rows(affine, *patches)
        torch.testing.assert_close(out.double(), want, rtol=0, atol=1e-4)


def test_uint8_output_fake_kernel_accepts_it():
    images = to_chw(photo("coffee"))[None]
    plans = [resample_plan(n, m, "bicubic", "pil") for n, m in zip(images.shape[2:], (140, 196), strict=True)]
    args = [torch.ones(3), torch.zeros(3), *plans, (140, 196), (0, 0, 140, 196), "bicubic", False, (2, 14, 2)]
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in [images, *args]]
        resize_affine_out(mode.from_tensor(torch.empty(140, 1176, dtype=torch.uint8)), *fake)
    with pytest.raises(TypeError, match=r"out must have one of the dtypes torch\.uint8, torch\.float16"):
        resize_affine_out(torch.empty(140, 1176, dtype=torch.int16), images, *args)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)
@pytest.mark.parametrize("reference", REFERENCES)
def test_cuda_uint8_output_bit_equal_to_cpu(reference):
    for name in PHOTOS:
        chw = to_chw(photo(name))
        for case in ("qwen-smart-resize", "upscale", "vertical-first", "1x1"):
            size = SIZE_CASES[case](*chw.shape[1:])
            got = resize_bytes(chw.cuda(), size, "bicubic", reference)
            assert torch.equal(got.cpu(), resize_bytes(chw, size, "bicubic", reference)), f"{name} {case}"
        size = smart_resize(*chw.shape[1:])
        got = resize_bytes(chw.cuda(), size, "bicubic", reference, patches=(2, 14, 2))
        assert torch.equal(got.cpu(), resize_bytes(chw, size, "bicubic", reference, patches=(2, 14, 2))), name


# ----- clip mode: the frames of a clip, T consecutive ones per temporal patch (video) -----


def _qwen_video_rows(frames: torch.Tensor, weight, bias, temporal: int, patch: int, merge: int) -> torch.Tensor:
    """transformers' Qwen2VLVideoProcessor.patchify of resized [n, C, H, W] frames (n a multiple of T),
    after its float32 affine: written here from its view and permute, not from the package."""
    x = frames.to(torch.float32) * weight.view(1, -1, 1, 1) + bias.view(1, -1, 1, 1)
    n, c, h, w = x.shape
    x = x.view(1, n // temporal, temporal, c, h // patch // merge, merge, patch, w // patch // merge, merge, patch)
    return x.permute(0, 1, 4, 7, 5, 8, 3, 2, 6, 9).reshape(-1, c * temporal * patch * patch)


@pytest.mark.parametrize(
    "frames,in_size,size,patches,layout",
    [
        (4, (100, 150), (112, 168), (2, 14, 2), "hwc"),
        (6, (210, 300), (224, 308), (2, 14, 2), "chw"),
        (6, (61, 97), (64, 96), (3, 16, 2), "hwc"),
        (2, (56, 84), (56, 56), (2, 14, 2), "chw"),  # width only
        (2, (300, 90), (112, 84), (2, 14, 2), "hwc"),  # both axes shrink, the height more
    ],
)
@pytest.mark.parametrize("reference", ["torchvision", "pil"])
def test_clip_mode_is_the_frames_resized_then_patchified(frames, in_size, size, patches, layout, reference):
    """clip=True: frame t of each group of T in slot t of the patch rows, each frame resampled as the
    reference resamples it alone (torchvision's uint8 kernel; Pillow per frame), then the video layout."""
    gen = torch.Generator().manual_seed(frames)
    hwc = torch.randint(0, 256, (frames, *in_size, 3), dtype=torch.uint8, generator=gen)
    x = hwc.permute(0, 3, 1, 2) if layout == "hwc" else hwc.permute(0, 3, 1, 2).contiguous()
    weight, bias = torch.tensor([0.0146, -0.5, 2.0]), torch.tensor([-1.79, 0.25, 0.0])
    resized = torch.stack([reference_resize(reference, f.numpy(), size, "bicubic") for f in hwc])
    expected = _qwen_video_rows(resized, weight, bias, *patches)
    out = torch.full_like(expected, SENTINEL)
    plans = [
        resample_plan(n_in, n_out, "bicubic", "torchvision" if reference == "torchvision" else "pil")
        if n_in != n_out
        else None
        for n_in, n_out in zip(in_size, size, strict=True)
    ]
    first = vertical_first(pil_rule(reference), *in_size, *size)
    resize_affine_out(out, x, weight, bias, *plans, size, (0, 0, *size), "bicubic", first, patches, clip=True)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5)
    # uint8 out: the resized bytes themselves in the video layout.
    bytes_out = torch.empty(expected.shape, dtype=torch.uint8)
    resize_affine_out(
        bytes_out, x, torch.ones(3), torch.zeros(3), *plans, size, (0, 0, *size), "bicubic", first, patches, clip=True
    )
    assert torch.equal(bytes_out, _qwen_video_rows(resized, torch.ones(3), torch.zeros(3), *patches).to(torch.uint8))


def test_clip_mode_opcheck_and_fake_shape():
    gen = torch.Generator().manual_seed(8)
    x = torch.randint(0, 256, (4, 3, 45, 60), dtype=torch.uint8, generator=gen)
    out = torch.empty(2 * 2 * 4, 3 * 2 * 14 * 14)
    args = (out, x, torch.rand(3, generator=gen), torch.rand(3, generator=gen))
    args += (resample_plan(45, 28), resample_plan(60, 56), [28, 56], [0, 0, 28, 56], "bicubic", False, [2, 14, 2], True)
    torch.library.opcheck(torch.ops.fused_input_norm.resize_affine_out.default, args)
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        resize_affine_out(*fake[:-1], clip=True)  # the fake kernel accepts the clip shape
        fake[0] = mode.from_tensor(torch.empty(32, 3 * 2 * 14 * 14))
        with pytest.raises(ValueError, match=r"out must have shape \[16, 1176\]"):
            resize_affine_out(*fake[:-1], clip=True)
