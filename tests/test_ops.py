"""torch.ops.fused_input_norm.affine / affine_out against the float64 reference, on every backend."""

import pytest
import torch
from conftest import (
    CLIP_MEAN,
    CLIP_STD,
    DEVICES,
    INPUT_DTYPES,
    OUTPUT_DTYPES,
    assert_affine_close,
    random_affine,
    random_input,
)

import fused_input_norm
from fused_input_norm import FusedInputNorm, affine, affine_out

INNER_SIZES = [1, 7, 255, 256, 257, 2049]


def make_layout(layout, channels, inner, dtype, device, gen):
    """Returns (input, dim) for the three layouts engines feed; `inner` is the per-channel run length."""
    if layout == "patches":  # Qwen2-VL rows [P, C*K], viewed [P, C, K]
        return random_input((3, channels, inner), dtype, device, gen), 1
    if layout == "nchw":  # [B, C, H, W] with H*W = inner
        return random_input((2, channels, 1, inner), dtype, device, gen), -3
    # NHWC: channels innermost, `inner` pixels
    return random_input((2, inner, channels), dtype, device, gen), -1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("in_dtype", INPUT_DTYPES, ids=str)
@pytest.mark.parametrize("out_dtype", OUTPUT_DTYPES, ids=str)
@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("layout", ["patches", "nchw", "nhwc"])
def test_every_dtype_pair_layout_and_size(device, in_dtype, out_dtype, channels, layout):
    gen = torch.Generator().manual_seed(channels * 1000 + len(layout))
    weight, bias = random_affine(channels, gen)
    for inner in INNER_SIZES:
        x, dim = make_layout(layout, channels, inner, in_dtype, device, gen)
        y = affine(x, weight.to(device), bias.to(device), dim, out_dtype)
        assert y.dtype == out_dtype and y.device == x.device and y.is_contiguous()
        assert_affine_close(y, x, weight, bias, dim)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("patches", [1, 37, 70000])
@pytest.mark.parametrize("row", [3 * 14 * 14, 3 * 2 * 14 * 14])
@pytest.mark.parametrize("in_dtype", [torch.uint8, torch.float32], ids=str)
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32], ids=str)
def test_matches_naive_formula_past_the_old_grid_limit(device, patches, row, in_dtype, out_dtype):
    """The regression the in-tree fix was for: cuDNN's batch_norm failed past ~65535 patches."""
    gen = torch.Generator().manual_seed(patches + row)
    x = torch.randint(0, 256, (patches, row), generator=gen, dtype=torch.int32).to(in_dtype).to(device)
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255).to(device)
    y = norm(x, out_dtype)

    mean = torch.tensor(CLIP_MEAN).repeat_interleave(row // 3)
    std = torch.tensor(CLIP_STD).repeat_interleave(row // 3)
    naive = (x.cpu().float() * (1 / 255) - mean) / std  # the formula engines wrote, in float32
    # Folding the constants changes fp32 rounding by a few ulps of the operands; the output rounding
    # dominates for bf16.
    atol = {torch.float32: 2e-6, torch.bfloat16: 1e-2}[out_dtype]
    rtol = {torch.float32: 1e-6, torch.bfloat16: 2.0**-8}[out_dtype]
    torch.testing.assert_close(y.cpu().float(), naive.to(out_dtype).float(), rtol=rtol, atol=atol)
    # Exactly: x * w + b of the module's float32 constants in float64 (exact for these x), rounded once to
    # float32 and once to the output dtype, as the kernel's one FMA and one conversion do. One uint8 level
    # (1 / 255 / std ~ 0.015) more or less anywhere fails here; the tolerance above would pass it for |y| > ~1.2.
    w = norm.weight.cpu().double().repeat_interleave(row // 3)
    b = norm.bias.cpu().double().repeat_interleave(row // 3)
    exact = (x.cpu().double() * w + b).float().to(out_dtype)
    assert torch.equal(y.cpu(), exact)


@pytest.mark.parametrize("device", DEVICES)
def test_default_out_dtype(device):
    w, b = torch.ones(3, device=device), torch.zeros(3, device=device)
    assert affine(torch.zeros(2, 3, dtype=torch.uint8, device=device), w, b).dtype == torch.float32
    assert affine(torch.zeros(2, 3, dtype=torch.uint16, device=device), w, b).dtype == torch.float32
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        assert affine(torch.zeros(2, 3, dtype=dtype, device=device), w, b).dtype == dtype


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda x: x.permute(0, 2, 3, 1), id="permuted"),
        pytest.param(lambda x: x[:, :, ::2, 1::3], id="sliced-step"),
        pytest.param(lambda x: x.contiguous(memory_format=torch.channels_last), id="channels-last"),
        pytest.param(lambda x: x[1:], id="offset-unaligned"),
        pytest.param(lambda x: x.expand(2, 3, 5, 6), id="expanded"),
    ],
)
@pytest.mark.parametrize("in_dtype", [torch.uint8, torch.float32], ids=str)
def test_non_contiguous_input(device, make, in_dtype):
    gen = torch.Generator().manual_seed(7)
    base = random_input((2, 3, 5, 6), in_dtype, device, gen)
    if "expand" in make.__code__.co_names:
        base = base[:1]
    x = make(base)
    dim = 3 if x.shape[-1] == 3 and x.shape[1] != 3 else 1
    weight, bias = random_affine(3, gen)
    y = affine(x, weight.to(device), bias.to(device), dim, torch.bfloat16)
    assert y.is_contiguous() and y.shape == x.shape
    assert_affine_close(y, x, weight, bias, dim)


@pytest.mark.parametrize("device", DEVICES)
def test_many_dims_non_contiguous(device):
    """Rank 9 with no two dims mergeable: more dims than the strided kernel holds, still correct."""
    gen = torch.Generator().manual_seed(3)
    x = random_input((2,) * 9, torch.uint8, device, gen).permute(8, 7, 6, 5, 4, 3, 2, 1, 0)
    weight, bias = random_affine(2, gen)
    y = affine(x, weight.to(device), bias.to(device), 4, torch.float32)
    assert_affine_close(y, x, weight, bias, 4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,dim", [((0, 3, 4), 1), ((2, 3, 0), 1), ((0,), 0), ((5, 0, 2), 1)])
def test_empty_input(device, shape, dim):
    x = torch.empty(shape, dtype=torch.uint8, device=device)
    c = shape[dim]
    y = affine(x, torch.ones(c, device=device), torch.zeros(c, device=device), dim, torch.bfloat16)
    assert y.shape == x.shape and y.dtype == torch.bfloat16
    out = torch.empty(shape, dtype=torch.float32, device=device)
    affine_out(out, x, torch.ones(c, device=device), torch.zeros(c, device=device), dim)


@pytest.mark.parametrize("device", DEVICES)
def test_rank1_input_is_one_pixel_of_channels(device):
    x = torch.tensor([0, 128, 255], dtype=torch.uint8, device=device)
    w = torch.tensor([1.0, 2.0, 3.0], device=device)
    b = torch.tensor([-1.0, 0.5, 0.25], device=device)
    y = affine(x, w, b, 0)
    assert y.tolist() == [-1.0, 256.5, 765.25]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("in_dtype", INPUT_DTYPES, ids=str)
@pytest.mark.parametrize("out_dtype", OUTPUT_DTYPES, ids=str)
def test_affine_out_writes_every_element(device, in_dtype, out_dtype):
    gen = torch.Generator().manual_seed(11)
    x = random_input((4, 3, 33), in_dtype, device, gen)
    weight, bias = random_affine(3, gen)
    out = torch.full(x.shape, float("nan"), dtype=out_dtype, device=device)  # poison: every element must be written
    result = affine_out(out, x, weight.to(device), bias.to(device), 1)
    assert result is None
    assert_affine_close(out, x, weight, bias, 1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", OUTPUT_DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", [((4, 3, 37), 1), ((5, 7, 3), -1), ((2, 3, 8, 8), 1)])
def test_in_place(device, dtype, shape, dim):
    gen = torch.Generator().manual_seed(5)
    x = random_input(shape, dtype, device, gen)
    original = x.clone()
    weight, bias = random_affine(shape[dim], gen)
    affine_out(x, x, weight.to(device), bias.to(device), dim)
    assert_affine_close(x, original, weight, bias, dim)


@pytest.mark.parametrize("device", DEVICES)
def test_nan_and_inf_propagate_like_the_formula(device):
    x = torch.tensor([[float("nan"), float("inf"), -float("inf"), 1.0]], device=device).expand(3, 4).T.contiguous()
    w = torch.tensor([1.0, -2.0, 0.5], device=device)
    b = torch.tensor([0.0, 1.0, -1.0], device=device)
    for out_dtype in OUTPUT_DTYPES:
        y = affine(x, w, b, 1, out_dtype)
        assert_affine_close(y, x, w, b, 1)


@pytest.mark.parametrize("device", DEVICES)
def test_rounding_matches_tensor_to(device):
    """Output rounding is Tensor.to's round-to-nearest-even, including ties and overflow to fp16 Inf."""
    bits = torch.arange(0, 2**16, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)  # every bf16 value
    x = bits.float().reshape(-1, 1).to(device)
    one, zero = torch.ones(1, device=device), torch.zeros(1, device=device)
    for out_dtype in OUTPUT_DTYPES:
        y = affine(x, one, zero, 1, out_dtype)
        torch.testing.assert_close(y.cpu(), x.cpu().to(out_dtype), rtol=0, atol=0, equal_nan=True)
    # Values between fp16/bf16 neighbours, ties included: x * 1 + tiny offsets in fp32.
    fine = (torch.arange(-70000, 70000, dtype=torch.float32) / 4096).reshape(-1, 1).to(device)
    for out_dtype in (torch.float16, torch.bfloat16):
        y = affine(fine, one, zero, 1, out_dtype)
        assert torch.equal(y.cpu(), fine.cpu().to(out_dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    gen = torch.Generator().manual_seed(1)
    weight, bias = random_affine(3, gen)
    weight, bias = weight.to(device), bias.to(device)
    cases = [
        (
            torch.ops.fused_input_norm.affine.default,
            (random_input((4, 3, 10), torch.uint8, device, gen), weight, bias, 1, torch.bfloat16),
        ),
        (
            torch.ops.fused_input_norm.affine.default,
            (random_input((2, 5, 5, 3), torch.float32, device, gen), weight, bias, -1, None),
        ),
        (
            torch.ops.fused_input_norm.affine_out.default,
            (torch.empty(4, 3, 10, device=device), random_input((4, 3, 10), torch.uint8, device, gen), weight, bias, 1),
        ),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_compile_fullgraph(device, dynamic):
    torch._dynamo.reset()
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255).to(device)

    def encode(pixels):
        return norm(pixels, torch.bfloat16) * 2

    compiled = torch.compile(encode, fullgraph=True, dynamic=dynamic)
    for patches in (5, 9, 17):
        x = torch.randint(0, 256, (patches, 1176), dtype=torch.uint8, device=device)
        torch.testing.assert_close(compiled(x), encode(x), rtol=0, atol=0)


def test_build_info():
    info = fused_input_norm.build_info()
    assert "cpu" in info["backends"]
    assert info["torch"] == torch.__version__
    assert info["cpu_capability"] in ("default", "avx2", "avx512"), info
    if "cuda" in info["backends"]:
        assert info["cuda_version"] and all(a.startswith("sm_") for a in info["archs"]), info


@pytest.mark.skipif(
    torch.version.cuda is None and torch.version.hip is None,
    reason="a CPU-only torch has no GPU library: the GPU glue never runs there",
)
def test_the_gpu_glue_finds_torchs_current_stream_shim():
    """csrc/cuda_launch.h reads the current stream through aoti_torch_get_current_cuda_stream, found with
    dlopen(RTLD_NOLOAD) in the GPU library this torch loaded (never linked: a CPU-only torch has none). The
    same lookup here, with no GPU needed, on every torch CI runs (2.11 to 2.15); on a GPU, the shim's answer
    is the stream torch holds current."""
    import ctypes
    import os

    name = "libtorch_hip.so" if torch.version.hip else "libtorch_cuda.so"
    library = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)  # OSError if torch had not loaded it
    shim = library.aoti_torch_get_current_cuda_stream  # AttributeError if it were not exported
    shim.argtypes, shim.restype = [ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int32
    if torch.cuda.is_available():
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            stream = ctypes.c_void_p()
            assert shim(torch.cuda.current_device(), ctypes.byref(stream)) == 0
            assert (stream.value or 0) == side.cuda_stream
