"""Every input layout an engine feeds, against the float64 reference, on every backend: permuted (up to
10-D), step-sliced, expanded (stride 0, the channel dim too), misaligned by 1..15 bytes, channels-last
(HWC -> CHW), Qwen-VL patch views, and sizes around the 2^31 boundary of the GPU's 32/64-bit indexing."""

import itertools

import pytest
import torch
from conftest import DEVICES, INPUT_DTYPES, OUTPUT_DTYPES, assert_affine_close, random_affine, random_input

from fused_input_norm import affine, affine_out

PAIRS = list(itertools.product(INPUT_DTYPES, OUTPUT_DTYPES))
PAIR_IDS = [f"{i}->{o}".replace("torch.", "") for i, o in PAIRS]


def check(x, dim, out_dtype, gen, device):
    weight, bias = random_affine(x.shape[dim], gen)
    y = affine(x, weight.to(device), bias.to(device), dim, out_dtype)
    assert y.shape == x.shape and y.dtype == out_dtype and y.is_contiguous()
    assert_affine_close(y, x, weight, bias, dim)
    out = torch.full(x.shape, float("nan"), dtype=out_dtype, device=device)
    affine_out(out, x, weight.to(device), bias.to(device), dim)
    torch.testing.assert_close(out, y, rtol=0, atol=0)


def patch_view(frames, patch=14, temporal=2, merge=2):
    """Qwen-VL's patches of `frames` [T, C, H, W] as a zero-copy 9-D view; channel dim 5."""
    t, c, h, w = frames.shape
    x = frames.reshape(
        t // temporal, temporal, c, h // (patch * merge), merge, patch, w // (patch * merge), merge, patch
    )
    return x.permute(0, 3, 6, 4, 7, 2, 1, 5, 8)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("in_dtype", "out_dtype"), PAIRS, ids=PAIR_IDS)
def test_channels_last_to_channels_first(device, in_dtype, out_dtype):
    gen = torch.Generator().manual_seed(1)
    for channels, (h, w) in itertools.product([2, 3, 4, 5], [(16, 16), (7, 9), (1, 1), (32, 20)]):
        hwc = random_input((2, h, w, channels), in_dtype, device, gen)
        check(hwc.permute(0, 3, 1, 2), 1, out_dtype, gen, device)  # NHWC viewed NCHW
        check(hwc[0].permute(2, 0, 1), 0, out_dtype, gen, device)  # one HWC image viewed CHW
        nchw = random_input((2, channels, h, w), in_dtype, device, gen).to(memory_format=torch.channels_last)
        check(nchw, 1, out_dtype, gen, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("in_dtype", "out_dtype"), PAIRS, ids=PAIR_IDS)
def test_random_permutations_slices_and_broadcasts(device, in_dtype, out_dtype):
    gen = torch.Generator().manual_seed(2)
    for ndim in range(1, 7):
        for _ in range(4):
            shape = torch.randint(1, 6, (ndim,), generator=gen).tolist()
            base = random_input([s * 2 for s in shape], in_dtype, device, gen)
            x = base[tuple(slice(None, None, 2) if torch.rand(1, generator=gen) < 0.5 else slice(0, s) for s in shape)]
            x = x.permute(*torch.randperm(ndim, generator=gen).tolist())
            if ndim > 1:  # expand a size-1 dim (stride 0) when there is one to expand
                d = int(torch.randint(0, ndim, (1,), generator=gen))
                x = x.narrow(d, 0, 1).expand(*[-1 if k != d else 3 for k in range(ndim)])
            dim = int(torch.randint(-ndim, ndim, (1,), generator=gen))
            check(x, dim, out_dtype, gen, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("out_dtype", OUTPUT_DTYPES, ids=str)
def test_expanded_channel_dim_and_batch(device, out_dtype):
    gen = torch.Generator().manual_seed(3)
    gray = random_input((1, 24, 40), torch.uint8, device, gen)
    check(gray.expand(3, -1, -1), 0, out_dtype, gen, device)  # one plane read as three channels
    image = random_input((3, 24, 40), torch.uint8, device, gen)
    check(image.expand(5, -1, -1, -1), 1, out_dtype, gen, device)  # a batch of one image repeated
    check(image.unsqueeze(0).expand(2, -1, -1, -1).permute(0, 2, 3, 1), -1, out_dtype, gen, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("in_dtype", "out_dtype"), PAIRS, ids=PAIR_IDS)
def test_misaligned_contiguous_input_and_output(device, in_dtype, out_dtype):
    """Slices like patches[1:] are contiguous but start off a 16-byte boundary, for every offset."""
    gen = torch.Generator().manual_seed(4)
    in_size = torch.empty(0, dtype=in_dtype).element_size()
    out_size = torch.empty(0, dtype=out_dtype).element_size()
    rows = random_input((40, 3 * 37), in_dtype, device, gen)
    weight, bias = random_affine(3, gen)
    weight, bias = weight.to(device), bias.to(device)
    for offset in range(1, 16):
        if offset % in_size == 0:  # the input starts `offset` bytes into the buffer
            flat = rows.flatten()[offset // in_size :]
            n = flat.numel() // (3 * 37) * (3 * 37)
            x = flat[:n].view(-1, 3, 37)
            assert x.data_ptr() % 16 == (rows.data_ptr() + offset) % 16
            assert_affine_close(affine(x, weight, bias, 1, out_dtype), x, weight.cpu(), bias.cpu(), 1)
            for channel_dim, view in ((1, x), (-1, x.reshape(-1, 3)), (0, flat[: 3 * 37].view(3, 37))):
                assert_affine_close(
                    affine(view, weight, bias, channel_dim, out_dtype), view, weight.cpu(), bias.cpu(), channel_dim
                )
        if offset % out_size == 0:  # the output does
            x = rows.view(-1, 3, 37)
            buffer = torch.full((x.numel() + 16,), float("nan"), dtype=out_dtype, device=device)
            out = buffer[offset // out_size :][: x.numel()].view(x.shape)
            affine_out(out, x, weight, bias, 1)
            assert_affine_close(out, x, weight.cpu(), bias.cpu(), 1)
            assert buffer[: offset // out_size].isnan().all() and buffer[offset // out_size + x.numel() :].isnan().all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("in_dtype", "out_dtype"), [(torch.uint8, torch.bfloat16), (torch.float32, torch.float16)])
@pytest.mark.parametrize(("patch", "temporal", "frames"), [(14, 2, 2), (16, 2, 4), (14, 1, 3)])
def test_qwen_vl_patch_views(device, in_dtype, out_dtype, patch, temporal, frames):
    """The 9-D patch view of an image repeated in time (stride 0) or of a clip, channel dim 5."""
    gen = torch.Generator().manual_seed(patch + frames)
    h, w = 2 * patch * 3, 2 * patch * 5
    image = random_input((3, h, w), in_dtype, device, gen)
    clip = random_input((frames, 3, h, w), in_dtype, device, gen)
    for source in (image.unsqueeze(0).expand(temporal * 2, -1, -1, -1), clip[: frames // temporal * temporal]):
        x = patch_view(source, patch, temporal)
        check(x, 5, out_dtype, gen, device)
        weight, bias = random_affine(3, gen)
        rows = affine(x, weight.to(device), bias.to(device), 5, out_dtype).view(-1, 3 * temporal * patch * patch)
        assert rows.shape[0] == source.shape[0] // temporal * (h // patch) * (w // patch)


@pytest.mark.parametrize("device", DEVICES)
def test_ten_dims_and_more_than_the_layout_holds(device):
    gen = torch.Generator().manual_seed(5)
    x = random_input([2] * 10, torch.uint8, device, gen).permute(9, 0, 8, 1, 7, 2, 6, 3, 5, 4)
    check(x, 3, torch.bfloat16, gen, device)
    # Eleven dims no merge can fold: the op copies to contiguous first, and is still right.
    y = random_input([2] * 11, torch.uint8, device, gen).permute(10, 0, 9, 1, 8, 2, 7, 3, 6, 4, 5)
    check(y, -1, torch.float32, gen, device)


def test_out_overlapping_weight_or_bias_is_an_error():
    params = torch.zeros(2, 3)
    weight, bias = params[0], params[1]
    x = torch.zeros(3)
    for out in (params[0], params[1], params.flatten()[1:4]):
        before = params.clone()
        with pytest.raises(ValueError, match=r"out overlaps (weight|bias)"):
            affine_out(out, x, weight, bias, 0)
        torch.testing.assert_close(params, before, rtol=0, atol=0)


def sample_indices(numel):
    return torch.tensor(sorted({0, 1, numel // 3, numel // 2, numel - 2, numel - 1}), dtype=torch.int64)


@pytest.mark.slow
@pytest.mark.xdist_group("gibibytes")  # 4.3 GB outputs: with test_large_and_threads' in one worker
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("numel", [2**31 - 1, 2**31, 2**31 + 1])
def test_strided_sizes_around_two_to_the_31(device, numel):
    """A broadcast input (stride 0: no input memory) whose output has about 2^31 elements."""
    if numel % 3 == 0:
        shape = (numel // 3, 3)
    else:
        shape = (numel, 1)
    pixels = torch.arange(7, dtype=torch.uint8, device=device)
    x = pixels[3:4].expand(shape)  # every element reads the same byte
    weight, bias = torch.tensor([0.5] * shape[1], device=device), torch.tensor([-1.0] * shape[1], device=device)
    y = affine(x, weight, bias, 1, torch.bfloat16)
    assert y.shape == shape
    flat = y.view(-1)
    idx = sample_indices(numel).to(device)
    torch.testing.assert_close(flat[idx].float().cpu(), torch.full((idx.numel(),), 0.5), rtol=0, atol=0)


@pytest.mark.slow
@pytest.mark.xdist_group("gibibytes")  # a 2 GiB input
@pytest.mark.parametrize("device", DEVICES)
def test_input_offsets_past_two_to_the_31_with_few_elements(device):
    """Few elements, but the input spans more than 2^31 bytes: the GPU must index in 64 bits."""
    base = torch.zeros(2**31 + 64, dtype=torch.uint8, device=device)
    base[-64:] = torch.arange(64, dtype=torch.uint8, device=device)
    base[:64] = torch.arange(64, 128, dtype=torch.uint8, device=device)
    x = base.as_strided((2, 3, 8), (2**31, 8, 1))  # rows at both ends of the buffer
    weight, bias = torch.tensor([1.0, 2.0, 3.0], device=device), torch.zeros(3, device=device)
    y = affine(x, weight, bias, 1, torch.float32)
    expected = x.cpu().double() * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64).view(1, 3, 1)
    torch.testing.assert_close(y.cpu().double(), expected, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("in_dtype", INPUT_DTYPES, ids=str)
def test_short_strided_rows_of_every_width(device, in_dtype):
    """Rows of 1..63 contiguous elements with a gap between rows (a sliced image), the channel outside the
    rows: every row width, so also rows of more than 64 bytes for the 2- and 4-byte input dtypes."""
    gen = torch.Generator().manual_seed(6)
    for width in range(1, 64):
        base = random_input((3, 5, width + 3), in_dtype, device, gen)
        check(base[:, :, :width], 0, torch.float32, gen, device)
        check(base[:, 1:, 1 : width + 1].permute(1, 0, 2), 1, torch.bfloat16, gen, device)
