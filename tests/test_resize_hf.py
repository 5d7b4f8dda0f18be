"""FusedInputNorm.patchify(min_pixels/max_pixels) and FusedInputNorm.resize(crop=) against Hugging Face's
own processors, resizing on, on real photos: Qwen2-VL (Qwen3-VL's geometry too), CLIP, SigLIP, each in both
transformers 5 backends (the *Pil classes resize with Pillow: reference="pil"; the default classes with
torchvision's uint8 kernel on CPU tensors: reference="torchvision"); and fused_input_norm.smart_resize against
transformers' own.

The bit-exactness of the resize itself (against Pillow and torchvision directly) is in test_resize.py.
"""

import itertools

import numpy as np
import pytest
import torch

from fused_input_norm import FusedInputNorm, smart_resize

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
pytest.importorskip("torchvision", reason="transformers' default image processors need torchvision")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
from transformers.image_transforms import get_resize_output_image_size  # noqa: E402
from transformers.image_utils import PILImageResampling  # noqa: E402
from transformers.models.qwen2_vl import image_processing_qwen2_vl  # noqa: E402
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor  # noqa: E402

PHOTOS = ["astronaut", "coffee", "chelsea", "rocket"]
# The processor computes (x * rescale - mean) / std (or x / (std * 255) - mean / std) in float32, the op
# x * (rescale / std) - mean / std with one FMA: a few float32 roundings apart on values up to ~2.7.
FP32_ATOL = 1e-6
# backend -> (Qwen2-VL class, CLIP class, SigLIP class, the module's reference)
BACKENDS = {
    "pil": (
        transformers.Qwen2VLImageProcessorPil,
        transformers.CLIPImageProcessorPil,
        transformers.SiglipImageProcessorPil,
        "pil",
    ),
    "torchvision": (
        transformers.Qwen2VLImageProcessor,
        transformers.CLIPImageProcessor,
        transformers.SiglipImageProcessor,
        "torchvision",
    ),
}
# Qwen3-VL ships no image processor class of its own: its checkpoints configure Qwen2VLImageProcessor with the
# geometry and constants its video processor carries as defaults (patch 16, mean = std = 0.5, merge 2).
QWEN3 = {k: getattr(Qwen3VLVideoProcessor, k) for k in ("patch_size", "image_mean", "image_std", "merge_size")}
GEOMETRIES = {"qwen2-vl": {}, "qwen3-vl": QWEN3}
RESAMPLE_NAMES = {PILImageResampling.BICUBIC: "bicubic", PILImageResampling.BILINEAR: "bilinear"}


def photo(name: str) -> np.ndarray:
    """A real photo, uint8 [H, W, 3]."""
    return np.ascontiguousarray(getattr(skimage_data, name)())


def processor_input(backend: str, hwc: np.ndarray):
    """What each backend is fed: a PIL image for the Pil classes, a uint8 [C, H, W] tensor for torchvision's."""
    if backend == "pil":
        return Image.fromarray(hwc)
    return torch.from_numpy(hwc).permute(2, 0, 1).contiguous()


def to_chw(hwc: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(hwc).permute(2, 0, 1).contiguous()


def module_for(processor) -> FusedInputNorm:
    keys = ("do_rescale", "rescale_factor", "do_normalize", "image_mean", "image_std")
    return FusedInputNorm.from_preprocessor_config({k: getattr(processor, k) for k in keys})


def max_diff(got: torch.Tensor, expected: torch.Tensor) -> float:
    assert got.dtype == torch.float32 and expected.dtype == torch.float32
    assert got.shape == expected.shape, (tuple(got.shape), tuple(expected.shape))
    return (got - expected).abs().max().item()


def assert_close_to_processor(got, expected, record_property, label):
    diff = max_diff(got, expected)
    record_property("max_abs_diff_fp32", diff)
    print(f"{label} {tuple(expected.shape)}: max |diff| {diff:.3g}")
    assert diff <= FP32_ATOL, f"{label}: max |diff| {diff}"


# ----- Qwen2-VL / Qwen3-VL: patchify with resize -----


def qwen_processor(backend: str, geometry: str, **bounds):
    return BACKENDS[backend][0](**GEOMETRIES[geometry], **bounds)


def patchify_like(processor, images, reference, channel_dim=-3):
    """The module's patchify with the processor's geometry and resize bounds."""
    norm = module_for(processor)
    assert RESAMPLE_NAMES[processor.resample] == "bicubic"
    return norm.patchify(
        images,
        torch.float32,
        patch_size=processor.patch_size,
        temporal_patch_size=processor.temporal_patch_size,
        merge_size=processor.merge_size,
        min_pixels=processor.size["shortest_edge"],
        max_pixels=processor.size["longest_edge"],
        reference=reference,
        channel_dim=channel_dim,
    )


@pytest.mark.parametrize("geometry", list(GEOMETRIES))
@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("name", PHOTOS)
def test_qwen_image_matches_processor(name, backend, geometry, record_property):
    processor = qwen_processor(backend, geometry)
    hwc = photo(name)
    expected = processor(processor_input(backend, hwc), return_tensors="pt")
    got, grid = patchify_like(processor, to_chw(hwc), BACKENDS[backend][3])
    assert grid.dtype == torch.int64 and grid.device.type == "cpu"
    assert torch.equal(grid, expected["image_grid_thw"])
    assert_close_to_processor(got, expected["pixel_values"], record_property, f"{backend} {geometry} {name}")


@pytest.mark.parametrize(
    "bounds",
    [
        {"min_pixels": 56 * 56, "max_pixels": 28 * 28 * 256},  # every photo shrinks
        {"min_pixels": 28 * 28 * 600, "max_pixels": 28 * 28 * 1280},  # every photo grows
        {"min_pixels": 28 * 28 * 4, "max_pixels": 28 * 28 * 16},  # a few patches: downscale by ~10
    ],
    ids=["max-256-patches", "min-600-patches", "max-16-patches"],
)
@pytest.mark.parametrize("geometry", list(GEOMETRIES))
@pytest.mark.parametrize("backend", list(BACKENDS))
def test_qwen_list_of_sizes_with_explicit_bounds_matches_processor(backend, geometry, bounds, record_property):
    processor = qwen_processor(backend, geometry, **bounds)
    assert processor.size["shortest_edge"] == bounds["min_pixels"]
    assert processor.size["longest_edge"] == bounds["max_pixels"]
    photos = [photo(n) for n in PHOTOS]
    assert len({p.shape for p in photos}) == len(photos)  # the point: every size differs
    expected = processor([processor_input(backend, p) for p in photos], return_tensors="pt")
    got, grid = patchify_like(processor, [to_chw(p) for p in photos], BACKENDS[backend][3])
    assert torch.equal(grid, expected["image_grid_thw"])
    assert_close_to_processor(got, expected["pixel_values"], record_property, f"{backend} {geometry} list {bounds}")
    # Channels-last input takes the same path.
    got_last, _ = patchify_like(processor, [torch.from_numpy(p) for p in photos], BACKENDS[backend][3], channel_dim=-1)
    assert torch.equal(got_last, got)


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_processor_input_types_agree(backend):
    """The tests feed each backend its native type; numpy HWC gives the processor the same result."""
    processor = qwen_processor(backend, "qwen2-vl")
    hwc = photo("chelsea")
    native = processor(processor_input(backend, hwc), return_tensors="pt")
    from_numpy = processor(hwc, return_tensors="pt")
    assert torch.equal(native["image_grid_thw"], from_numpy["image_grid_thw"])
    assert torch.equal(native["pixel_values"], from_numpy["pixel_values"])


def test_the_backends_differ_so_the_tolerance_tells_them_apart(record_property):
    """Pillow and torch's uint8 kernel differ by a level here and there: 1e-6 is far below one level
    (1 / (255 * std) ~ 0.0146), so each backend is matched by its own reference only."""
    photos = [photo(n) for n in PHOTOS]
    pil = qwen_processor("pil", "qwen2-vl")(photos, return_tensors="pt")["pixel_values"]
    tv = qwen_processor("torchvision", "qwen2-vl")(photos, return_tensors="pt")["pixel_values"]
    between = max_diff(pil, tv)
    record_property("pil_vs_torchvision_processor", between)
    print(f"Qwen2-VL Pil vs torchvision processor: max |diff| {between:.3g}")
    assert between > 0.01
    got_tv, _ = patchify_like(qwen_processor("torchvision", "qwen2-vl"), [to_chw(p) for p in photos], "torchvision")
    assert max_diff(got_tv, pil) > 0.01


# ----- CLIP: shortest edge 224, then center crop 224 -----


def clip_geometry(height: int, width: int, shortest_edge: int, crop_h: int, crop_w: int):
    """The resized size and the crop box, as transformers computes them: get_resize_output_image_size with
    default_to_square=False (short side to `shortest_edge`, long side int(shortest_edge * long / short)), then
    center_crop's top = (H - crop_h) // 2, left = (W - crop_w) // 2."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = shortest_edge, int(shortest_edge * long / short)
    size = (new_long, new_short) if width <= height else (new_short, new_long)
    return size, ((size[0] - crop_h) // 2, (size[1] - crop_w) // 2, crop_h, crop_w)


def clip_images() -> dict[str, np.ndarray]:
    """The photos, a portrait crop and a small crop (upscaled to 224)."""
    images = {n: photo(n) for n in PHOTOS}
    images["portrait"] = np.ascontiguousarray(photo("astronaut")[:, 100:401])
    images["small"] = np.ascontiguousarray(photo("coffee")[50:171, 200:361])
    return images


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_clip_matches_processor(backend, record_property):
    processor = BACKENDS[backend][1]()
    assert processor.size["shortest_edge"] == 224 and processor.do_center_crop
    resample = RESAMPLE_NAMES[processor.resample]
    assert resample == "bicubic"
    norm = module_for(processor)
    images = clip_images()
    expected = processor([processor_input(backend, i) for i in images.values()], return_tensors="pt")["pixel_values"]
    for (label, hwc), want in zip(images.items(), expected, strict=True):
        size, crop = clip_geometry(*hwc.shape[:2], 224, processor.crop_size["height"], processor.crop_size["width"])
        # The same size as transformers' own helper gives.
        assert size == tuple(
            get_resize_output_image_size(hwc, 224, default_to_square=False, input_data_format="channels_last")
        )
        got = norm.resize(
            to_chw(hwc), torch.float32, size, resample=resample, reference=BACKENDS[backend][3], crop=crop
        )
        assert_close_to_processor(got, want, record_property, f"CLIP {backend} {label} -> {size} crop {crop}")


# ----- SigLIP: a square resize, no crop -----


@pytest.mark.parametrize(
    "size,resample",
    [(224, PILImageResampling.BICUBIC), (384, PILImageResampling.BICUBIC), (224, PILImageResampling.BILINEAR)],
    ids=["224-bicubic", "384-bicubic", "224-bilinear"],
)
@pytest.mark.parametrize("backend", list(BACKENDS))
def test_siglip_matches_processor(backend, size, resample, record_property):
    default = BACKENDS[backend][2]()
    assert default.resample == PILImageResampling.BICUBIC and not getattr(default, "do_center_crop", False)
    processor = BACKENDS[backend][2](size={"height": size, "width": size}, resample=resample)
    norm = module_for(processor)
    images = clip_images()
    expected = processor([processor_input(backend, i) for i in images.values()], return_tensors="pt")["pixel_values"]
    assert expected.shape == (len(images), 3, size, size)
    for (label, hwc), want in zip(images.items(), expected, strict=True):
        got = norm.resize(
            to_chw(hwc), torch.float32, (size, size), resample=RESAMPLE_NAMES[resample], reference=BACKENDS[backend][3]
        )
        assert_close_to_processor(
            got, want, record_property, f"SigLIP {backend} {label} -> {size} {RESAMPLE_NAMES[resample]}"
        )


# ----- smart_resize -----

SIDES = [
    1,
    2,
    13,
    14,
    27,
    28,
    29,
    41,
    42,
    55,
    56,
    57,
    100,
    223,
    224,
    300,
    333,
    427,
    512,
    640,
    1000,
    1080,
    1920,
    3024,
    4032,
    8000,
]
BOUNDS = [
    {},
    {"min_pixels": 56 * 56, "max_pixels": 28 * 28 * 1280},
    {"min_pixels": 4 * 28 * 28, "max_pixels": 16384 * 28 * 28},  # checkpoints' max 12845056
    {"min_pixels": 256 * 28 * 28, "max_pixels": 400 * 28 * 28},
    {"min_pixels": 1, "max_pixels": 28 * 28},
]


@pytest.mark.parametrize("factor", [28, 32])
def test_smart_resize_equals_transformers(factor):
    theirs = image_processing_qwen2_vl.smart_resize
    checked = 0
    for height, width in itertools.product(SIDES, SIDES):
        if max(height, width) / min(height, width) > 200:
            continue
        for bounds in BOUNDS:
            assert smart_resize(height, width, factor, **bounds) == theirs(height, width, factor, **bounds), (
                height,
                width,
                factor,
                bounds,
            )
            checked += 1
    assert checked > 2000


@pytest.mark.parametrize("height,width", [(1, 201), (201, 1), (2, 401), (1000, 4), (5, 8000)])
def test_smart_resize_rejects_aspect_ratio_over_200_as_transformers(height, width):
    theirs = image_processing_qwen2_vl.smart_resize
    with pytest.raises(ValueError) as expected:
        theirs(height, width)
    with pytest.raises(ValueError) as got:
        smart_resize(height, width)
    assert str(got.value) == str(expected.value)
    assert "absolute aspect ratio must be smaller than 200" in str(got.value)


@pytest.mark.parametrize("height,width", [(1, 200), (200, 1), (2, 400), (40, 8000)])
def test_smart_resize_accepts_aspect_ratio_of_200(height, width):
    assert smart_resize(height, width) == image_processing_qwen2_vl.smart_resize(height, width)
