"""FusedInputNorm.patchify: Qwen-VL patch rows normalized straight from the resized image.

Parity with Hugging Face's own processors (resizing off) on real photos, an index-formula reference for
geometries and dtypes the processors do not cover, and proof that no intermediate copy is made.
"""

import math

import pytest
import torch
from conftest import DEVICES, HAS_CUDA, INPUT_DTYPES, NO_CUDA_REASON, assert_affine_close, random_input
from torch.utils._python_dispatch import TorchDispatchMode

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
        reason="the video processors need torchvision (none for this torch); test_clip_matches_index_reference stands in",
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


def reference_patches(frames: torch.Tensor, patch_size: int, temporal_patch_size: int, merge_size: int):
    """[T, C, H, W] -> patch rows, gathered pixel by pixel from the processor's index formulas.

    Row r is merge block (bh, bw) of temporal group t, cell (mh, mw) in it; column k is channel c, frame
    tt of the group, pixel (ph, pw) of the patch. Frames past the end repeat the last one.
    """
    P, Tp, m = patch_size, temporal_patch_size, merge_size
    T, C, H, W = frames.shape
    gt, gh, gw = math.ceil(T / Tp), H // P, W // P
    t, bh, bw, mh, mw = torch.unravel_index(torch.arange(gt * gh * gw)[:, None], (gt, gh // m, gw // m, m, m))
    c, tt, ph, pw = torch.unravel_index(torch.arange(C * Tp * P * P)[None, :], (C, Tp, P, P))
    frame = (t * Tp + tt).clamp(max=T - 1)
    y, x = (bh * m + mh) * P + ph, (bw * m + mw) * P + pw
    return frames[frame, c, y, x]


def random_module(channel: int, seed: int) -> tuple[FusedInputNorm, torch.Tensor, torch.Tensor]:
    """A module with random constants, and its weight/bias folded independently in float64."""
    g = torch.Generator().manual_seed(seed)
    mean, std, rescale = torch.rand(channel, generator=g), torch.rand(channel, generator=g) + 0.1, 1 / 255
    norm = FusedInputNorm(mean.tolist(), std.tolist(), rescale, channel)
    return norm, rescale / std.double(), -mean.double() / std.double()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INPUT_DTYPES)
@pytest.mark.parametrize(
    "frames, channel, geometry",
    [
        (None, 3, {}),  # a still image, Qwen2-VL defaults
        (7, 4, {"patch_size": 2, "temporal_patch_size": 3, "merge_size": 3}),  # 2 whole groups + 1 padded
        (5, 1, {"patch_size": 3, "temporal_patch_size": 1, "merge_size": 1}),
    ],
)
@pytest.mark.parametrize("channel_dim", [-3, -1])
def test_matches_index_reference(device, dtype, frames, channel, geometry, channel_dim):
    P, m = geometry.get("patch_size", 14), geometry.get("merge_size", 2)
    shape = (channel, 2 * P * m, 3 * P * m)
    if frames is not None:
        shape = (frames, *shape)
    x = random_input(shape, dtype, generator=torch.Generator().manual_seed(frames or 0))
    if channel_dim == -1:
        x = x.movedim(-3, -1).contiguous()
    norm, weight, bias = random_module(channel, seed=channel)
    norm = norm.to(device)
    got, grid = norm.patchify(x.to(device), torch.float32, channel_dim=channel_dim, **geometry)
    frames_tchw = x.movedim(-1, -3) if channel_dim == -1 else x
    patches = reference_patches(
        frames_tchw if frames is not None else frames_tchw[None],
        P,
        geometry.get("temporal_patch_size", 2),
        m,
    )
    assert got.device.type == device and grid.device.type == "cpu"
    assert grid.tolist() == [[math.ceil((frames or 1) / geometry.get("temporal_patch_size", 2)), 2 * m, 3 * m]]
    rows = patches.shape[0]
    assert_affine_close(got.view(rows, channel, -1), patches.view(rows, channel, -1), weight, bias, 1)


@pytest.mark.parametrize("frames, temporal_patch_size", [(3, 2), (5, 3)])
def test_clip_matches_index_reference(frames, temporal_patch_size):
    clip = clip_of_photos(frames, 28)
    norm, weight, bias = random_module(3, seed=frames)
    got, grid = norm.patchify(clip, torch.bfloat16, channel_dim=-1, temporal_patch_size=temporal_patch_size)
    assert grid.tolist() == [[2, clip.shape[1] // 14, clip.shape[2] // 14]]
    patches = reference_patches(clip.movedim(-1, -3), 14, temporal_patch_size, 2)
    rows = patches.shape[0]
    assert_affine_close(got.view(rows, 3, -1), patches.view(rows, 3, -1), weight, bias, 1)


@pytest.mark.parametrize("visual_dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_identity_module_only_casts(visual_dtype):
    x = random_input((3, 3, 56, 84), torch.uint8, generator=torch.Generator().manual_seed(3))
    got, grid = FusedInputNorm.identity().patchify(x, visual_dtype)
    assert grid.tolist() == [[2, 4, 6]]
    assert torch.equal(got, reference_patches(x, 14, 2, 2).to(visual_dtype))


def test_channels_last_equals_channels_first():
    norm = module_for(image_processor("qwen2-vl"))
    image = photo("coffee", 28)  # [H, W, C], as decoded
    clip = clip_of_photos(3, 28)
    for hwc in (image, clip, [image, clip, photo("rocket", 28)]):
        chw = [i.movedim(-1, -3) for i in hwc] if isinstance(hwc, list) else hwc.movedim(-1, -3)
        last, grid_last = norm.patchify(hwc, torch.bfloat16, channel_dim=-1)
        first, grid_first = norm.patchify(chw, torch.bfloat16)
        assert torch.equal(last, first) and torch.equal(grid_last, grid_first)


def test_crop_of_a_larger_image_is_read_in_place():
    """A crop is a strided view (row pitch wider than the crop): patchify reads it as it is."""
    norm = module_for(image_processor("qwen2-vl"))
    decoded = torch.from_numpy(skimage_data.rocket())  # 427x640
    crop = decoded[7:427, 10:626]  # 420x616, not contiguous
    assert not crop.is_contiguous()
    got, grid = norm.patchify(crop, torch.float32, channel_dim=-1)
    expected, expected_grid = norm.patchify(crop.contiguous(), torch.float32, channel_dim=-1)
    assert torch.equal(got, expected) and grid.tolist() == expected_grid.tolist() == [[1, 30, 44]]


class DispatchedOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("identity", [False, True])
def test_one_allocation_no_intermediate_copy(identity):
    """Every dispatched op is a view, the one output allocation, or one write per image (two for the
    padded clip): nothing copies the image or the patches."""
    norm = FusedInputNorm.identity() if identity else module_for(image_processor("qwen2-vl"))
    images = [photo("chelsea", 28), photo("astronaut", 28), clip_of_photos(3, 28)]
    with DispatchedOps() as seen:
        pixel_values, grid = norm.patchify(images, torch.bfloat16, channel_dim=-1)
    write = torch.ops.aten.copy_.default if identity else torch.ops.fused_input_norm.affine_out.default
    allocations = [f for f in seen.ops if f is torch.ops.aten.empty.memory_format]
    others = [f for f in seen.ops if not f.is_view and f not in (write, torch.ops.aten.empty.memory_format)]
    assert len(allocations) == 1
    assert seen.ops.count(write) == 4
    assert others == [], f"unexpected ops: {others}"
    assert pixel_values.shape[0] == grid.prod(1).sum()


@pytest.mark.parametrize(
    "images, kwargs, error, match",
    [
        (torch.zeros(3, 56, 50, dtype=torch.uint8), {}, ValueError, r"56x50 \(HxW\).*multiples of.* = 28"),
        (torch.zeros(3, 28, 28, dtype=torch.uint8), {"patch_size": 16}, ValueError, r"28x28 .* = 32"),
        (torch.zeros(4, 28, 28, dtype=torch.uint8), {}, ValueError, r"4 channels on axis -3 .* expected 3"),
        (torch.zeros(28, 28, 4, dtype=torch.uint8), {"channel_dim": -1}, ValueError, r"4 channels on axis -1"),
        (torch.zeros(28, 28, dtype=torch.uint8), {}, ValueError, r"an image \[C, H, W\] or a clip \[T, C, H, W\]"),
        (torch.zeros(1, 2, 3, 28, 28, dtype=torch.uint8), {}, ValueError, r"image \[C, H, W\] or a clip"),
        (torch.zeros(2, 28, 28, 3, dtype=torch.uint8), {}, ValueError, r"28 channels on axis -3 .*\[T, C, H, W\]"),
        (torch.zeros(0, 3, 28, 28, dtype=torch.uint8), {}, ValueError, r"clip .* with no frames"),
        ([], {}, ValueError, r"a tensor or a non-empty list of tensors"),
        ("image.png", {}, ValueError, r"a tensor or a non-empty list of tensors"),
        ([torch.zeros(3, 28, 28, dtype=torch.uint8), "x"], {}, TypeError, r"images\[1\] must be a torch.Tensor"),
        (
            torch.zeros(3, 28, 28, dtype=torch.uint8),
            {"temporal_patch_size": 0},
            ValueError,
            r"temporal_patch_size .*>= 1, got 0",
        ),
        (torch.zeros(3, 28, 28, dtype=torch.uint8), {"merge_size": 1.5}, ValueError, r"merge_size .*int >= 1, got 1.5"),
        (torch.zeros(3, 28, 28, dtype=torch.uint8), {"channel_dim": 0}, ValueError, r"channel_dim must be -3 .* or -1"),
        (torch.zeros(3, 28, 28, dtype=torch.float64), {}, TypeError, r"one of the dtypes .*uint8.*, got torch.float64"),
        (
            [torch.zeros(3, 28, 28, dtype=torch.uint8), torch.zeros(3, 28, 28, dtype=torch.uint8, device="meta")],
            {},
            ValueError,
            r"one device, got cpu \(images\[0\]\) and meta \(images\[1\]\)",
        ),
    ],
)
def test_bad_input_raises_before_any_write(images, kwargs, error, match):
    norm = FusedInputNorm([0.5] * 3, [0.25] * 3, 1 / 255)
    with pytest.raises(error, match=match):
        norm.patchify(images, torch.bfloat16, **kwargs)


def test_bad_visual_dtype():
    norm = FusedInputNorm([0.5] * 3, [0.25] * 3, 1 / 255)
    with pytest.raises(TypeError, match=r"visual_dtype must be a floating torch.dtype, got torch.int32"):
        norm.patchify(torch.zeros(3, 28, 28, dtype=torch.uint8), torch.int32)


def test_meta_images_give_shapes_and_grid_without_data():
    with torch.device("meta"):
        norm = FusedInputNorm([0.5] * 3, [0.25] * 3, 1 / 255)
        images = [torch.empty(3, 56, 84, dtype=torch.uint8), torch.empty(3, 3, 28, 28, dtype=torch.uint8)]
    pixel_values, grid = norm.patchify(images, torch.bfloat16)
    assert pixel_values.device.type == "meta" and pixel_values.shape == (24 + 2 * 4, 1176)
    assert grid.device.type == "cpu" and grid.tolist() == [[1, 4, 6], [2, 2, 2]]


def test_compile_fullgraph_matches_eager():
    norm = module_for(image_processor("qwen2-vl"))
    image = photo("astronaut", 28).permute(2, 0, 1)

    def engine_step(x):
        return norm.patchify(x, torch.bfloat16)

    compiled = torch.compile(engine_step, fullgraph=True)
    got, grid = compiled(image)
    expected, expected_grid = engine_step(image)
    assert torch.equal(got, expected) and torch.equal(grid, expected_grid)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)
def test_cuda_no_sync_one_allocation():
    norm, weight, bias = random_module(3, seed=5)
    norm = norm.cuda()
    images = [photo("rocket", 28), clip_of_photos(3, 28)]
    on_device = [i.cuda() for i in images]
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    torch.cuda.set_sync_debug_mode("error")
    try:
        got, grid = norm.patchify(on_device, torch.bfloat16, channel_dim=-1)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == before + 1
    assert got.device.type == "cuda" and grid.device.type == "cpu"
    assert grid.tolist() == [[1, 30, 44], [2, 20, 32]]
    patches = torch.cat([reference_patches(f.movedim(-1, -3), 14, 2, 2) for f in (images[0][None], images[1])])
    assert_affine_close(got.view(-1, 3, 392), patches.view(-1, 3, 392), weight, bias, 1)
