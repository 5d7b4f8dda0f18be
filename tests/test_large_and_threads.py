"""> 2^31 elements on the CPU (64-bit indexing), and concurrent calls from Python threads."""

import threading

import pytest
import torch
from conftest import CLIP_MEAN, CLIP_STD, random_affine, random_input

from fused_input_norm import FusedInputNorm, affine, affine_out

N = 715827883  # 3 * N > 2^31


@pytest.mark.slow
@pytest.mark.xdist_group("gibibytes")  # 6.4 GB each: one at a time when pytest-xdist runs workers
@pytest.mark.parametrize("shape,dim", [((3, N), 0), ((N, 3), 1)], ids=["channels-first", "channels-last"])
def test_more_than_2_pow_31_elements(shape, dim):
    """Values at the first, middle and last element of every channel: a 32-bit overflow or a channel
    that drifts by the end of the tensor shows up there."""
    x = torch.randint(0, 256, shape, dtype=torch.uint8)
    assert x.numel() > 2**31
    weight = torch.tensor([1.0, 2.0, 3.0])
    bias = torch.tensor([-1.0, 0.5, 100.0])
    y = affine(x, weight, bias, dim, torch.float16)
    along = shape[1 - dim]
    for c in range(3):
        for i in (0, 1, along // 2, along - 2, along - 1):
            index = (c, i) if dim == 0 else (i, c)
            pixel = int(x[index])
            expected = torch.tensor(pixel * weight[c].item() + bias[c].item()).half()  # exact for these constants
            assert y[index].item() == expected.item(), (index, pixel, y[index].item(), expected.item())


def test_threads_give_bit_identical_results():
    gen = torch.Generator().manual_seed(0)
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    weight, bias = random_affine(3, gen)
    inputs = [random_input((257, 3, 392), torch.uint8, "cpu", gen) for _ in range(8)]
    serial_op = [affine(x, weight, bias, 1, torch.bfloat16) for x in inputs]
    serial_module = [norm(x.view(257, -1), torch.bfloat16) for x in inputs]

    results, errors = {}, []  # every iteration's outputs, kept: a race in any of them must show
    start = threading.Barrier(8)

    def work(i):
        try:
            start.wait()
            for it in range(20):
                out = torch.empty(inputs[i].shape, dtype=torch.bfloat16)
                affine_out(out, inputs[i], weight, bias, 1)
                results[i, it] = (
                    out,
                    affine(inputs[i], weight, bias, 1, torch.bfloat16),
                    norm(inputs[i].view(257, -1), torch.bfloat16),
                )
        except Exception as e:  # surfaced below: an exception in a thread would otherwise be lost
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 8 * 20
    for (i, it), (out, y, m) in results.items():
        assert torch.equal(out, serial_op[i]), (i, it)
        assert torch.equal(y, serial_op[i]), (i, it)
        assert torch.equal(m, serial_module[i]), (i, it)
