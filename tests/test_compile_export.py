"""torch.compile(fullgraph=True, dynamic=True) and torch.export of a model that uses FusedInputNorm."""

import pytest
import torch
from conftest import CLIP_MEAN, CLIP_STD, DEVICES
from torch import nn

import fused_input_norm
from fused_input_norm import FusedInputNorm


class TinyVisionTower(nn.Module):
    """Normalize uint8 patches, then a patch embedding: the shape of a Qwen2-VL vision tower's input."""

    def __init__(self):
        super().__init__()
        self.norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
        self.embed = nn.Linear(3 * 2 * 14 * 14, 32)

    def forward(self, pixel_values):
        return self.embed(self.norm(pixel_values, torch.float32))


def patches(n, device):
    return torch.randint(0, 256, (n, 1176), dtype=torch.uint8, generator=torch.Generator().manual_seed(n)).to(device)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_dynamic_matches_eager(device):
    torch._dynamo.reset()
    model = TinyVisionTower().to(device)
    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    with torch.no_grad():
        for n in (3, 37, 70, 129):
            torch.testing.assert_close(compiled(patches(n, device)), model(patches(n, device)), rtol=1e-5, atol=1e-5)
    explanation = torch._dynamo.explain(model)(patches(5, device))
    assert explanation.graph_break_count == 0, explanation.break_reasons


@pytest.mark.parametrize("device", DEVICES)
def test_export_runs_and_matches_eager(device):
    model = TinyVisionTower().to(device).eval()
    num_patches = torch.export.Dim("num_patches", min=2, max=200000)
    exported = torch.export.export(model, (patches(8, device),), dynamic_shapes=({0: num_patches},))
    ops = {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
    assert any("fused_input_norm.affine" in op for op in ops), ops
    with torch.no_grad():
        for n in (2, 77):
            torch.testing.assert_close(
                exported.module()(patches(n, device)), model(patches(n, device)), rtol=1e-5, atol=1e-5
            )


def _messages(error: BaseException) -> str:
    """The error's message and those of its causes (dynamo chains the original exception)."""
    texts = []
    while error is not None:
        texts.append(str(error))
        error = error.__cause__ or error.__context__
    return "\n".join(texts)


@pytest.mark.parametrize("fullgraph", [False, True])
def test_compiled_module_rejects_wrong_channels(fullgraph):
    """Without fullgraph, dynamo falls back to eager at the raise: the caller gets eager's ValueError. With
    fullgraph=True, dynamo cannot let an exception leave the graph: it raises its own Unsupported (a
    RuntimeError) carrying the ValueError's message, which docs/api.md documents."""
    torch._dynamo.reset()
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    compiled = torch.compile(norm, fullgraph=fullgraph, dynamic=True)
    x = torch.zeros(2, 4, 8, 8, dtype=torch.uint8)
    expected = (ValueError, RuntimeError) if fullgraph else ValueError
    with pytest.raises(expected) as info:
        compiled(x, torch.float32)
    messages = _messages(info.value)
    if fullgraph and _TORCH_VERSION < (2, 13) and "has 4 channels" not in messages:
        # torch 2.11's dynamo names only the exception's type when fullgraph stops it: it is still ours
        assert "ExceptionVariable(<class 'ValueError'>)" in messages, messages[:2000]
    else:
        assert "pixel_values has 4 channels on axis -3" in messages
    if not fullgraph:
        assert type(info.value) is ValueError


_TORCH_VERSION = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])
_TORCH_AT_LEAST_2_14 = _TORCH_VERSION >= (2, 14)


@pytest.mark.parametrize("fullgraph", [False, True])
@pytest.mark.parametrize("wrapper", [True, False], ids=["fused_input_norm.affine_out", "torch.ops"])
def test_compiled_affine_out_overlapping_weight_is_refused_while_tracing(fullgraph, wrapper):
    """The fake kernel refuses it as eager does (before, it traced, and the C++ check fired at run time as
    "RuntimeError: [ValueError] ..."): the wrapper without fullgraph raises eager's ValueError; otherwise
    dynamo reports the fake kernel's ValueError inside its own RuntimeError."""
    torch._dynamo.reset()
    storage = torch.zeros(16)
    out, weight, bias = storage[:6].view(2, 3), storage[4:7], torch.zeros(3)
    x = torch.zeros(2, 3, dtype=torch.uint8)
    op = fused_input_norm.affine_out if wrapper else torch.ops.fused_input_norm.affine_out

    def step(out, x, weight, bias):
        op(out, x, weight, bias, 1)
        return out

    with pytest.raises((ValueError, RuntimeError)) as info:
        torch.compile(step, fullgraph=fullgraph)(out, x, weight, bias)
    messages = _messages(info.value)
    assert "fused_input_norm.affine_out: out overlaps weight" in messages
    # torch 2.14's dynamo re-raises the fake kernel's ValueError from a graph break without fullgraph; 2.13's
    # wraps it in its TorchRuntimeError as fullgraph does (the message and the cause are the same).
    if wrapper and not fullgraph and _TORCH_AT_LEAST_2_14:
        assert type(info.value) is ValueError
    else:
        assert "fake" in messages.lower(), messages[:2000]  # refused while tracing, not by the kernel at run time
    assert bool((storage == 0).all())
