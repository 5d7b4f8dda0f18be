"""The cv2 filters against OpenCV itself: resample="cv2_cubic" is cv2.resize(uint8 image, INTER_CUBIC) byte for
byte, resample="cv2_cubic_f32" is cv2.resize(the image as float32, INTER_CUBIC) bit for bit, on real photos and
over a fuzz of sizes (up, down, one axis, one pixel, odd, extreme ratios), 1, 3 and 4 channels, planar and
channels-last input, crops. The GPU kernels' per-thread code (run on the host) is held to the same reference in
tests/test_resize_emulation.py.

The reference is OpenCV's own implementation: on x86 the opencv-python wheels hand INTER_CUBIC to Intel IPP
first (a closed-source backend whose results differ in the last bits, and by CPU), so the reference calls are
made with cv2.ipp.setUseIPP(False), which is what every build without IPP (aarch64 wheels among them) runs."""

import importlib.util

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_resize import IDENTITY, PHOTOS, photo, to_chw

from fused_input_norm import FusedInputNorm, resample_plan, resize_affine_out

# Skipped, not failed, without OpenCV; tests/test_resize_emulation.py imports opencv() from here.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("cv2") is None, reason="opencv-python-headless is not installed"
)

FILTERS = ["cv2_cubic", "cv2_cubic_f32"]


def opencv(hwc: np.ndarray, size, resample: str) -> torch.Tensor:
    """cv2.resize(..., INTER_CUBIC) of the uint8 image (cv2_cubic) or of the image as float32 (cv2_cubic_f32),
    with OpenCV's own code (IPP off, restored after): float32 [C, h, w]."""
    cv2 = pytest.importorskip("cv2", reason="opencv-python-headless is not installed")
    image = hwc.astype(np.float32) if resample == "cv2_cubic_f32" else np.ascontiguousarray(hwc)
    previous = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(False)
    try:
        resized = cv2.resize(image, (size[1], size[0]), interpolation=cv2.INTER_CUBIC)
    finally:
        cv2.ipp.setUseIPP(previous)
    assert resized.dtype == (np.float32 if resample == "cv2_cubic_f32" else np.uint8)
    return torch.from_numpy(resized.reshape(*size, hwc.shape[2]).astype(np.float32)).permute(2, 0, 1)


def coffee_crop(top: int, left: int, height: int, width: int, channels: int) -> np.ndarray:
    """A contiguous HWC crop of the coffee photo with 1, 3 or 4 channels (the fourth a copy of the first): the
    random-size tests' input."""
    hwc = photo("coffee")[top : top + height, left : left + width]
    return np.ascontiguousarray(np.concatenate([hwc, hwc[:, :, :1]], axis=2)[:, :, :channels])


def assert_equal(got: torch.Tensor, expected: torch.Tensor, label: str) -> None:
    assert got.dtype == torch.float32 and got.shape == expected.shape, (label, got.dtype, got.shape, expected.shape)
    diff = (got.double() - expected.double()).abs()
    n = int((diff != 0).sum())
    assert n == 0, f"{label}: {n} of {got.numel()} values differ from OpenCV's, by up to {diff.max().item()}"


# Output (height, width) per case, from the photo's (H, W).
SIZE_CASES = {
    "mistral-downscale": lambda h, w: (round(h / 1.7), round(w / 1.7)),
    "224x224": lambda h, w: (224, 224),
    "upscale": lambda h, w: (h * 3 // 2 + 1, w * 5 // 4 + 3),
    "down-up": lambda h, w: (h // 2 - 1, w * 3 // 2),
    "height-only": lambda h, w: (h // 2 + 3, w),
    "width-only": lambda h, w: (h, w * 2 - 5),
    "odd": lambda h, w: (h // 3 | 1, w // 7 | 1),
    "extreme-down": lambda h, w: (h // 97 + 1, w // 61 + 1),
    "extreme-ratio": lambda h, w: (3, w * 3 + 1),
    "1xN": lambda h, w: (1, w // 2 + 1),
    "Nx1": lambda h, w: (h // 2 + 1, 1),
    "1x1": lambda h, w: (1, 1),
}


@pytest.mark.parametrize("case", list(SIZE_CASES))
@pytest.mark.parametrize("resample", FILTERS)
@pytest.mark.parametrize("name", PHOTOS)
def test_equal_to_opencv_on_photos(name, resample, case):
    hwc = photo(name)
    size = SIZE_CASES[case](*hwc.shape[:2])
    got = IDENTITY.resize(to_chw(hwc), torch.float32, size, resample=resample)
    assert_equal(got, opencv(hwc, size, resample), f"{name} {hwc.shape[:2]} -> {size} {resample}")


@settings(max_examples=60, deadline=None, derandomize=True, print_blob=True)
@given(
    top=st.integers(0, 200),
    left=st.integers(0, 300),
    in_h=st.integers(1, 120),
    in_w=st.integers(1, 160),
    out_h=st.integers(1, 200),
    out_w=st.integers(1, 240),
    channels=st.sampled_from([1, 3, 4]),
    channels_last=st.booleans(),
    resample=st.sampled_from(FILTERS),
)
@example(top=0, left=0, in_h=1, in_w=1, out_h=200, out_w=3, channels=3, channels_last=False, resample="cv2_cubic")
@example(top=0, left=0, in_h=120, in_w=160, out_h=1, out_w=239, channels=4, channels_last=True, resample="cv2_cubic")
@example(top=9, left=4, in_h=77, in_w=2, out_h=77, out_w=5, channels=1, channels_last=False, resample="cv2_cubic_f32")
@example(top=0, left=0, in_h=100, in_w=101, out_h=3, out_w=101, channels=3, channels_last=True, resample="cv2_cubic")
def test_random_sizes_equal_to_opencv(top, left, in_h, in_w, out_h, out_w, channels, channels_last, resample):
    """Sizes, channel counts (the SIMD/scalar split of OpenCV's vertical loop falls at a multiple of 4 or 8 of
    width * channels) and both layouts."""
    hwc = coffee_crop(top, left, in_h, in_w, channels)
    size = (out_h, out_w)
    module = FusedInputNorm.identity(channels)
    if channels_last:
        got = module.resize(torch.from_numpy(hwc), torch.float32, size, resample=resample, channel_dim=-1)
    else:
        got = module.resize(to_chw(hwc), torch.float32, size, resample=resample)
    assert_equal(got, opencv(hwc, size, resample), f"{hwc.shape} -> {size} {resample} channels_last={channels_last}")


@pytest.mark.parametrize("resample", FILTERS)
def test_crop_batch_and_views_equal_the_slice(resample):
    hwc = photo("chelsea")  # 300 x 451
    size, crop = (333, 500), (17, 41, 224, 301)
    full = opencv(hwc, size, resample)
    top, left, h, w = crop
    got = IDENTITY.resize(to_chw(hwc), torch.float32, size, resample=resample, crop=crop)
    assert_equal(got, full[:, top : top + h, left : left + w], f"crop {crop}")
    # A batch of a strided view (every other column of a wider image) and its copy.
    wide = np.repeat(hwc, 2, axis=1)
    view = torch.from_numpy(wide)[:, ::2].permute(2, 0, 1)
    batch = IDENTITY.resize(torch.stack([view, view.contiguous()]), torch.float32, size, resample=resample)
    assert_equal(batch[0], full, "strided view")
    assert_equal(batch[1], full, "contiguous copy")


def test_uint8_output_is_opencvs_bytes():
    """uint8 output (weight 1, bias 0): cv2_cubic's bytes themselves."""
    hwc = photo("astronaut")
    size = (301, 205)
    chw = to_chw(hwc).unsqueeze(0)
    out = torch.empty(1, 3, *size, dtype=torch.uint8)
    plans = [resample_plan(n_in, n_out, "cv2_cubic") for n_in, n_out in zip(hwc.shape[:2], size, strict=True)]
    one, zero = torch.ones(3), torch.zeros(3)
    resize_affine_out(out, chw, one, zero, *plans, size, (0, 0, *size), "cv2_cubic", False, ())
    assert torch.equal(out[0].float(), opencv(hwc, size, "cv2_cubic"))


def test_same_size_is_a_copy():
    hwc = photo("rocket")
    for resample in FILTERS:
        got = IDENTITY.resize(to_chw(hwc), torch.float32, hwc.shape[:2], resample=resample)
        assert_equal(got, opencv(hwc, hwc.shape[:2], resample), resample)


def test_the_two_filters_and_pillow_bicubic_differ():
    """So that the tests above can tell the modes apart: uint8 rounds after each pass, float32 never, and
    Pillow's bicubic (a = -0.5, antialiased) is another filter."""
    hwc = photo("coffee")
    size = (211, 317)
    u8, f32 = (IDENTITY.resize(to_chw(hwc), torch.float32, size, resample=r) for r in FILTERS)
    pil = IDENTITY.resize(to_chw(hwc), torch.float32, size, resample="bicubic")
    assert not torch.equal(u8, f32.round().clamp(0, 255))
    assert not torch.equal(u8, pil)


def test_normalized_output_is_the_affine_of_opencvs_values():
    """With a real mean/std (CLIP's, as Mistral's encoder uses): the affine of the float32 resize."""
    mean, std = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)
    module = FusedInputNorm(mean, std, 1 / 255)
    hwc = photo("astronaut")
    size = (224, 336)
    got = module.resize(to_chw(hwc), torch.float32, size, resample="cv2_cubic_f32")
    values = opencv(hwc, size, "cv2_cubic_f32")
    expected = (values / 255 - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    assert (got - expected).abs().max().item() < 1e-5


def test_bad_arguments_are_refused_by_name():
    chw = to_chw(photo("coffee")).unsqueeze(0)
    out = torch.empty(1, 3, 10, 12)
    one, zero = torch.ones(3), torch.zeros(3)
    rows, cols = resample_plan(400, 10, "cv2_cubic_f32"), resample_plan(600, 12, "cv2_cubic_f32")
    with pytest.raises(ValueError, match="col_plan is required: cv2 filters resample both axes"):
        resize_affine_out(out, chw, one, zero, rows, None, (10, 12), (0, 0, 10, 12), "cv2_cubic_f32", False, ())
    with pytest.raises(ValueError, match="vertical_first must be False"):
        resize_affine_out(out, chw, one, zero, rows, cols, (10, 12), (0, 0, 10, 12), "cv2_cubic_f32", True, ())
    with pytest.raises(ValueError, match="corrupt windows"):  # a uint8 plan for the float32 filter
        resize_affine_out(
            out, chw, one, zero, resample_plan(400, 10, "cv2_cubic"), cols, (10, 12), (0, 0, 10, 12),
            "cv2_cubic_f32", False, (),
        )  # fmt: skip
    with pytest.raises(ValueError, match="resample must be one of"):
        IDENTITY.resize(chw, torch.float32, (10, 12), resample="cv2_linear")
