"""torch.compile(fullgraph=True, dynamic=True) and torch.export of a model that uses FusedInputNorm."""

import pytest
import torch
from conftest import CLIP_MEAN, CLIP_STD, DEVICES
from torch import nn

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
