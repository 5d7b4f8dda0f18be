"""FusedInputNorm.patchify: Qwen-VL patch rows normalized straight from the resized image.

Against an independent index-formula reference: every input dtype, both channel layouts, still images and
padded clips, geometries beyond the processors' (other channel counts, patch, merge and temporal sizes);
one allocation and no intermediate copy; bad input; meta tensors; torch.compile; CUDA. Parity with Hugging
Face's processors on real photos is in test_patchify_hf.py.
"""

import math

import pytest
import torch
from conftest import (
    CLIP_MEAN,
    CLIP_STD,
    DEVICES,
    HAS_CUDA,
    INPUT_DTYPES,
    NO_CUDA_REASON,
    assert_affine_close,
    random_input,
)
from torch.utils._python_dispatch import TorchDispatchMode

from fused_input_norm import FusedInputNorm


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
        (3, 3, {}),  # a Qwen2-VL clip, padded by its last frame
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


@pytest.mark.parametrize("visual_dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_identity_module_only_casts(visual_dtype):
    x = random_input((3, 3, 56, 84), torch.uint8, generator=torch.Generator().manual_seed(3))
    got, grid = FusedInputNorm.identity().patchify(x, visual_dtype)
    assert grid.tolist() == [[2, 4, 6]]
    assert torch.equal(got, reference_patches(x, 14, 2, 2).to(visual_dtype))


def test_crop_of_a_larger_image_is_read_in_place():
    """A crop is a strided view (row pitch wider than the crop): patchify reads it as it is."""
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    decoded = random_input((427, 640, 3), torch.uint8, generator=torch.Generator().manual_seed(1))
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
    norm = FusedInputNorm.identity() if identity else FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    images = [random_input(shape, torch.uint8) for shape in ((280, 448, 3), (504, 504, 3), (3, 280, 448, 3))]
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
        (
            torch.zeros(2, 28, 28, 3, dtype=torch.uint8),
            {},
            ValueError,
            r"28 channels on axis -3 .*\[T, C, H, W\].*; channels-last \[T, H, W, C\] needs channel_dim=-1",
        ),
        (
            torch.zeros(28, 28, 3, dtype=torch.uint8),
            {},
            ValueError,
            r"28 channels on axis -3 .*expected 3; channels-last \[H, W, C\] needs channel_dim=-1",
        ),
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
        # -3.0 == -3 passed the check, then failed indexing the shape with a bare TypeError.
        (
            torch.zeros(3, 28, 28, dtype=torch.uint8),
            {"channel_dim": -3.0},
            TypeError,
            r"channel_dim must be -3 or -1, got float",
        ),
        (
            torch.zeros(3, 28, 28, dtype=torch.uint8),
            {"channel_dim": True},
            TypeError,
            r"channel_dim must be -3 or -1, got bool",
        ),
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


def test_images_on_another_device_than_the_module_name_images():
    """As forward names pixel_values, patchify names images and the module, not the op's weight argument."""
    norm = FusedInputNorm([0.5] * 3, [0.25] * 3, 1 / 255)
    images = torch.zeros(3, 28, 28, dtype=torch.uint8, device="meta")
    with pytest.raises(
        RuntimeError, match=r"FusedInputNorm.patchify: images are on meta but the module's buffers are on cpu"
    ):
        norm.patchify(images, torch.bfloat16)


@pytest.mark.parametrize("visual_dtype", [torch.int32, torch.float64], ids=str)
@pytest.mark.parametrize("identity", [False, True])
def test_bad_visual_dtype(visual_dtype, identity):
    """Named as the module's argument (not the op's `out`), and refused alike by both kinds of module, as forward does."""
    norm = FusedInputNorm.identity() if identity else FusedInputNorm([0.5] * 3, [0.25] * 3, 1 / 255)
    with pytest.raises(
        TypeError, match=rf"FusedInputNorm.patchify: visual_dtype must be one of .*, got {visual_dtype}"
    ):
        norm.patchify(torch.zeros(3, 28, 28, dtype=torch.uint8), visual_dtype)


def test_meta_images_give_shapes_and_grid_without_data():
    with torch.device("meta"):
        norm = FusedInputNorm([0.5] * 3, [0.25] * 3, 1 / 255)
        images = [torch.empty(3, 56, 84, dtype=torch.uint8), torch.empty(3, 3, 28, 28, dtype=torch.uint8)]
    pixel_values, grid = norm.patchify(images, torch.bfloat16)
    assert pixel_values.device.type == "meta" and pixel_values.shape == (24 + 2 * 4, 1176)
    assert grid.device.type == "cpu" and grid.tolist() == [[1, 4, 6], [2, 2, 2]]


def test_compile_fullgraph_matches_eager():
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    image = random_input((504, 504, 3), torch.uint8).permute(2, 0, 1)

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
    images = [random_input(shape, torch.uint8) for shape in ((420, 616, 3), (3, 280, 448, 3))]
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


@pytest.mark.parametrize("identity", [False, True])
def test_images_that_require_grad_get_gradients(identity):
    """patchify is a plain function of the image: with autograd on, each row element is x * w[c] + b[c] of
    one pixel, and a still image's pixel is in its row twice (the frame repeated T=2 times), so the image's
    gradient of the rows' sum is 2 * w[c]. affine_out cannot carry a graph; patchify then goes through the
    differentiable op, with the same values."""
    norm = FusedInputNorm.identity() if identity else FusedInputNorm([0.5] * 3, [0.25] * 3, 1 / 255)
    clip = torch.rand(3, 3, 56, 28, generator=torch.Generator().manual_seed(6)) * 255  # 3 frames: padded
    for image in (clip[0].clone(), clip.clone()):
        image.requires_grad_()
        pixel_values, grid = norm.patchify(image, torch.float32)
        with torch.no_grad():
            expected, expected_grid = norm.patchify(image, torch.float32)
        assert torch.equal(pixel_values, expected) and torch.equal(grid, expected_grid)
        pixel_values.sum().backward()
        weight = torch.ones(3) if identity else norm.weight
        # Frames of the clip: 0 and 1 once each, 2 twice (padded by itself); the still image twice.
        copies = torch.tensor([1.0, 1.0, 2.0]).view(3, 1, 1, 1) if image.dim() == 4 else 2.0
        torch.testing.assert_close(image.grad, (copies * weight.view(3, 1, 1)).expand_as(image), rtol=0, atol=0)
