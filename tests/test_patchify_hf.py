"""FusedInputNorm.patchify against Hugging Face's own Qwen-VL processors (resizing off) on real photos.

The behaviour that needs neither transformers nor photos (every dtype, devices, bad input, no copies,
torch.compile) is in test_patchify.py.
"""

import pytest
import torch

from fused_input_norm import FusedInputNorm

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor  # noqa: E402

PHOTOS = ["astronaut", "coffee", "chelsea", "rocket"]
# Qwen3-VL ships no image processor class of its own: its checkpoints configure Qwen2VLImageProcessor
# with the geometry and constants its video processor carries as defaults.
QWEN3 = {k: getattr(Qwen3VLVideoProcessor, k) for k in ("patch_size", "image_mean", "image_std")}
GEOMETRIES = {"qwen2-vl": {}, "qwen3-vl": QWEN3}
# The processor computes (x * rescale - mean) / std in float32, the op x * (rescale / std) - mean / std
# with one FMA: a few float32 roundings apart on values up to ~2.7 (ulp 2.4e-7).
FP32_ATOL = 5e-7


def photo(name: str, multiple: int) -> torch.Tensor:
    """A real photo, uint8 [H, W, 3], cropped to multiples of `multiple` as smart_resize would size it."""
    image = torch.from_numpy(getattr(skimage_data, name)())
    return image[: image.shape[0] // multiple * multiple, : image.shape[1] // multiple * multiple]


def image_processor(geometry: str):
    return transformers.Qwen2VLImageProcessor(do_resize=False, **GEOMETRIES[geometry])


def module_for(processor) -> FusedInputNorm:
    return FusedInputNorm.from_preprocessor_config(
        {k: getattr(processor, k) for k in ("do_rescale", "rescale_factor", "do_normalize", "image_mean", "image_std")}
    )


def geometry_of(processor) -> dict:
    return {k: getattr(processor, k) for k in ("patch_size", "temporal_patch_size", "merge_size")}


def bf16_ulps(a: torch.Tensor, b: torch.Tensor) -> int:
    """Largest distance between a and b counted in bfloat16 steps (sign-magnitude bits made monotonic)."""

    def ordered(x):
        bits = x.to(torch.bfloat16).view(torch.int16).int()
        return torch.where(bits < 0, -(bits & 0x7FFF), bits)

    return int((ordered(a) - ordered(b)).abs().max())


def assert_matches_processor(got32, got16, expected, record_property, label):
    max_diff = (got32 - expected).abs().max().item()
    ulps = bf16_ulps(got16, expected)
    record_property("max_abs_diff_fp32", max_diff)
    record_property("max_ulps_bf16", ulps)
    print(f"{label} {tuple(expected.shape)}: fp32 max |diff| {max_diff:.3g}, bf16 max {ulps} ulp")
    assert got32.dtype == torch.float32 and got16.dtype == torch.bfloat16
    assert got32.shape == expected.shape
    assert max_diff <= FP32_ATOL
    assert ulps <= 1


@pytest.mark.parametrize("geometry", list(GEOMETRIES))
@pytest.mark.parametrize("name", PHOTOS)
def test_image_matches_processor(geometry, name, record_property):
    processor = image_processor(geometry)
    factor = processor.patch_size * processor.merge_size
    image = photo(name, factor)
    expected = processor(image.numpy(), return_tensors="pt")
    norm = module_for(processor)
    chw = image.permute(2, 0, 1)
    got32, grid = norm.patchify(chw, torch.float32, **geometry_of(processor))
    got16, _ = norm.patchify(chw, torch.bfloat16, **geometry_of(processor))
    assert grid.dtype == torch.int64 and grid.device.type == "cpu"
    assert torch.equal(grid, expected["image_grid_thw"])
    assert_matches_processor(got32, got16, expected["pixel_values"], record_property, f"{geometry} {name}")


@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_list_of_sizes_matches_processor_batch(geometry, record_property):
    processor = image_processor(geometry)
    factor = processor.patch_size * processor.merge_size
    images = [photo(name, factor) for name in PHOTOS]
    assert len({tuple(i.shape) for i in images}) == len(images)  # the point: every size differs
    expected = processor([i.numpy() for i in images], return_tensors="pt")
    norm = module_for(processor)
    chw = [i.permute(2, 0, 1) for i in images]
    got32, grid = norm.patchify(chw, torch.float32, **geometry_of(processor))
    got16, _ = norm.patchify(chw, torch.bfloat16, **geometry_of(processor))
    assert torch.equal(grid, expected["image_grid_thw"])
    assert_matches_processor(got32, got16, expected["pixel_values"], record_property, f"{geometry} list")


def clip_of_photos(frames: int, multiple: int) -> torch.Tensor:
    """uint8 [frames, H, W, 3]: the photos, each cropped to one common size, in turn (distinct frames)."""
    images = [photo(name, multiple) for name in PHOTOS]
    h, w = min(i.shape[0] for i in images), min(i.shape[1] for i in images)
    stack = [images[f % len(images)][:h, :w] for f in range(frames)]
    return torch.stack([s if f < len(images) else s.flip(0) for f, s in enumerate(stack)])


@pytest.mark.parametrize(
    "processor_class, frames, temporal_patch_size",
    [
        (transformers.Qwen2VLVideoProcessor, 3, 2),  # padded by one frame: a stride-0 last group
        (Qwen3VLVideoProcessor, 3, 2),
        (transformers.Qwen2VLVideoProcessor, 4, 2),  # no padding
        (transformers.Qwen2VLVideoProcessor, 5, 3),  # last group = 2 real frames + 1 repeat
        (transformers.Qwen2VLVideoProcessor, 4, 3),  # last group = 1 real frame repeated
    ],
)
def test_clip_matches_video_processor(processor_class, frames, temporal_patch_size, record_property):
    pytest.importorskip(
        "torchvision",
        reason="the video processors need torchvision (none for this torch); test_patchify.py checks clips",
    )
    processor = processor_class(
        do_resize=False, do_sample_frames=False, cap_pixels_per_frame=False, temporal_patch_size=temporal_patch_size
    )
    clip = clip_of_photos(frames, processor.patch_size * processor.merge_size)
    expected = processor(videos=[clip.numpy()], return_tensors="pt")
    norm = module_for(processor)
    got32, grid = norm.patchify(clip, torch.float32, channel_dim=-1, **geometry_of(processor))
    got16, _ = norm.patchify(clip, torch.bfloat16, channel_dim=-1, **geometry_of(processor))
    assert torch.equal(grid, expected["video_grid_thw"])
    label = f"{processor_class.__name__} T={frames} temporal_patch_size={temporal_patch_size}"
    assert_matches_processor(got32, got16, expected["pixel_values_videos"], record_property, label)


def test_channels_last_equals_channels_first():
    norm = module_for(image_processor("qwen2-vl"))
    image = photo("coffee", 28)  # [H, W, C], as decoded
    clip = clip_of_photos(3, 28)
    for hwc in (image, clip, [image, clip, photo("rocket", 28)]):
        chw = [i.movedim(-1, -3) for i in hwc] if isinstance(hwc, list) else hwc.movedim(-1, -3)
        last, grid_last = norm.patchify(hwc, torch.bfloat16, channel_dim=-1)
        first, grid_first = norm.patchify(chw, torch.bfloat16)
        assert torch.equal(last, first) and torch.equal(grid_last, grid_first)
