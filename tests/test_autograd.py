"""Gradients of affine against autograd of the eager float64 formula; affine_out refuses to drop them."""

import pytest
import torch
from conftest import DEVICES, random_affine, random_input

from fused_input_norm import FusedInputNorm, affine, affine_out

# Half an ulp of each dtype: the op's gradients are fp32 math rounded once to the tensor's dtype.
ROUNDOFF = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-9, torch.float16: 2.0**-11}


def reference_grads(x, weight, bias, dim, cotangent, wrt):
    """Autograd of x * weight[c] + bias[c] in float64, eager: independent of the op and its formula."""
    leaves = {
        "input": x.detach().double().requires_grad_(),
        "weight": weight.detach().double().requires_grad_(),
        "bias": bias.detach().double().requires_grad_(),
    }
    shape = [1] * x.dim()
    shape[dim] = -1
    y = leaves["input"] * leaves["weight"].view(shape) + leaves["bias"].view(shape)
    y.backward(cotangent.double())
    return {name: leaves[name].grad for name in wrt}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("in_dtype", [torch.uint8, torch.float16, torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("shape,dim", [((5, 3, 7), 1), ((2, 6, 5, 3), -1), ((3,), 0), ((0, 3, 4), 1)])
def test_gradients_match_float64_autograd(device, in_dtype, out_dtype, shape, dim):
    gen = torch.Generator().manual_seed(sum(shape) + dim)
    channels = shape[dim]
    weight, bias = (t.to(device).requires_grad_() for t in random_affine(channels, gen))
    x = random_input(shape, in_dtype, device, gen)
    wrt = ["weight", "bias"]
    if in_dtype.is_floating_point:
        x.requires_grad_()
        wrt.append("input")
    y = affine(x, weight, bias, dim, out_dtype)
    cotangent = torch.randn(shape, generator=gen).to(out_dtype).to(device)
    y.backward(cotangent)
    expected = reference_grads(x, weight, bias, dim, cotangent, wrt)
    got = {"input": x.grad, "weight": weight.grad, "bias": bias.grad}
    for name in wrt:
        assert got[name] is not None, f"{name}.grad is None"
        assert (
            got[name].dtype == {"input": in_dtype}.get(name, torch.float32) and got[name].shape == expected[name].shape
        )
        # input: one fp32 product rounded to its dtype; weight/bias: fp32 sums of up to 70 terms.
        rtol = 2 * ROUNDOFF[in_dtype] if name == "input" else 1e-5
        torch.testing.assert_close(got[name].double().cpu(), expected[name].cpu(), rtol=rtol, atol=1e-6)


def test_gradients_reach_floating_pixels_through_the_module():
    norm = FusedInputNorm([0.5, 0.4, 0.3], [0.2, 0.25, 0.5], 1 / 255)
    pixels = torch.rand(4, 3 * 8, requires_grad=True)
    norm(pixels, torch.float32).sum().backward()
    expected = torch.tensor([1 / 255 / s for s in (0.2, 0.25, 0.5)], dtype=torch.float64).repeat_interleave(8)
    torch.testing.assert_close(pixels.grad.double(), expected.expand(4, -1), rtol=1e-7, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_with_gradients(device):
    """torch.library's own checks, including autograd registration and backward under AOT dispatch."""
    gen = torch.Generator().manual_seed(3)
    weight, bias = (t.to(device).requires_grad_() for t in random_affine(3, gen))
    for x in (
        random_input((4, 3, 10), torch.float32, device, gen).requires_grad_(),
        random_input((4, 3, 10), torch.uint8, device, gen),
    ):
        torch.library.opcheck(torch.ops.fused_input_norm.affine.default, (x, weight, bias, 1, torch.bfloat16))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("requires_grad", ["input", "weight", "bias"])
def test_affine_out_refuses_when_a_gradient_is_wanted(device, requires_grad):
    gen = torch.Generator().manual_seed(4)
    weight, bias = (t.to(device) for t in random_affine(3, gen))
    args = {"input": random_input((2, 3, 5), torch.float32, device, gen), "weight": weight, "bias": bias}
    args[requires_grad].requires_grad_()
    out = torch.full((2, 3, 5), 7.0, device=device)
    with pytest.raises(
        RuntimeError, match=r"affine_out: no gradients flow through an out= call.*use fused_input_norm\.affine"
    ):
        affine_out(out, args["input"], args["weight"], args["bias"], 1)
    with pytest.raises(RuntimeError, match="no gradients flow through an out= call"):
        torch.ops.fused_input_norm.affine_out(out, args["input"], args["weight"], args["bias"])  # default dim
    assert torch.equal(out, torch.full_like(out, 7.0))  # refused before any kernel ran
    with torch.no_grad():
        affine_out(out, args["input"], args["weight"], args["bias"], 1)
    expected = args["input"].detach() * args["weight"].detach().view(3, 1) + args["bias"].detach().view(3, 1)
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)
