"""CUDA/ROCm-only behaviour: no host syncs, graph capture, streams, allocations, > 2^31 elements.

The numeric equivalences on the GPU are the "cuda" params of test_ops.py and test_module.py.
"""

import pytest
import torch
from conftest import CLIP_MEAN, CLIP_STD, HAS_CUDA, NO_CUDA_REASON, assert_affine_close, random_affine, random_input

from fused_input_norm import FusedInputNorm, affine, affine_out

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)]


@pytest.fixture
def sync_is_error():
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_no_sync_in_construction_forward_and_affine_out(sync_is_error):
    with torch.device("cuda"):
        norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
        identity = FusedInputNorm.identity()
    x = torch.empty(64, 1176, dtype=torch.uint8, device="cuda")
    out = torch.empty(64, 3, 392, dtype=torch.bfloat16, device="cuda")
    norm(x, torch.bfloat16)
    identity(x, torch.bfloat16)
    affine_out(out, x.view(64, 3, 392), norm.weight, norm.bias, 1)
    affine(x.view(64, 3, 392), norm.weight, norm.bias, 1, torch.float16)


def test_cuda_graph_replay_is_bit_identical_to_eager():
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255).cuda()
    static_in = torch.randint(0, 256, (5120, 3, 392), dtype=torch.uint8, device="cuda")
    static_out = torch.empty(static_in.shape, dtype=torch.bfloat16, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside capture, as the graph docs require
        affine_out(static_out, static_in, norm.weight, norm.bias, 1)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        affine_out(static_out, static_in, norm.weight, norm.bias, 1)
    for seed in range(3):
        static_in.copy_(
            torch.randint(0, 256, static_in.shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))
        )
        static_out.fill_(float("nan"))
        graph.replay()
        eager = affine(static_in, norm.weight, norm.bias, 1, torch.bfloat16)
        assert torch.equal(static_out, eager)


def test_side_stream_orders_its_work():
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255).cuda()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.randint(0, 256, (70000, 3, 392), dtype=torch.uint8, device="cuda")
        x.mul_(1)  # more work queued on the side stream before the op
        y = affine(x, norm.weight, norm.bias, 1, torch.float32)
        x_copy = x.clone()
    side.synchronize()
    assert_affine_close(y, x_copy, norm.weight, norm.bias, 1)


def test_affine_allocates_only_its_output_and_affine_out_nothing():
    weight, bias = (t.cuda() for t in random_affine(3))
    x = random_input((1000, 3, 392), torch.uint8, "cuda")
    out = torch.empty(x.shape, dtype=torch.bfloat16, device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    affine_out(out, x, weight, bias, 1)
    torch.cuda.synchronize()
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == before
    y = affine(x, weight, bias, 1, torch.bfloat16)
    torch.cuda.synchronize()
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == before + 1
    assert y.untyped_storage().nbytes() >= x.numel() * 2


def test_device_mismatch_is_an_error():
    x = torch.zeros(2, 3, 4, dtype=torch.uint8, device="cuda")
    with pytest.raises(RuntimeError, match="weight must be on input's device"):
        affine(x, torch.ones(3), torch.zeros(3, device="cuda"), 1)
    out = torch.zeros(2, 3, 4)
    with pytest.raises(RuntimeError, match="out must be on input's device"):
        affine_out(out, x, torch.ones(3, device="cuda"), torch.zeros(3, device="cuda"), 1)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_gpu():
    with torch.device("cuda:1"):
        norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    x = torch.randint(0, 256, (37, 1176), dtype=torch.uint8, device="cuda:1")
    y = norm(x, torch.bfloat16)
    assert y.device == x.device
    assert_affine_close(y.view(37, 3, 392), x.view(37, 3, 392), norm.weight, norm.bias, 1)


@pytest.mark.slow
@pytest.mark.parametrize("shape,dim", [((3, 715827883), 0), ((715827883, 3), 1)])
def test_more_than_2_pow_31_elements(shape, dim):
    """64-bit indexing: > 2^31 elements, checked at the first, middle and last element of each channel."""
    x = torch.randint(0, 256, shape, dtype=torch.uint8, device="cuda")
    weight = torch.tensor([1.0, 2.0, 3.0], device="cuda")
    bias = torch.tensor([-1.0, 0.5, 100.0], device="cuda")
    y = affine(x, weight, bias, dim, torch.float16)
    assert x.numel() > 2**31
    along = shape[1 - dim]
    for c in range(3):
        for i in (0, along // 2, along - 1):
            index = (c, i) if dim == 0 else (i, c)
            expected = torch.tensor(float(x[index]) * weight[c].item() + bias[c].item()).half()
            assert y[index].item() == expected.item(), (index, y[index].item(), expected.item())
