"""The demo runs where scripts/demo.sh puts it on a machine without a GPU: the CPU-only torch, which has no
torchvision beside it (PyPI's torchvision wheels are CUDA builds). There it takes transformers' *Pil
processors, and FusedImageProcessor reproduces their resize (reference="pil") from Pillow-decoded bytes."""

import numpy as np
import pytest

pytest.importorskip("transformers")
skimage_data = pytest.importorskip("skimage.data")


def test_demo_without_torchvision(monkeypatch, capsys):
    from fused_input_norm import demo, images

    monkeypatch.setattr(demo, "has_torchvision", lambda: False)
    monkeypatch.setattr(images, "has_torchvision", lambda: False)
    monkeypatch.setattr(demo, "photos", lambda: {"chelsea": np.ascontiguousarray(skimage_data.chelsea())})
    results = demo.main(["--device", "cpu", "--reps", "1", "--budget-s", "0", "--plot", "", "--models", "qwen2vl,clip"])
    out = capsys.readouterr().out
    for name in ("Qwen2VLImageProcessorPil", "CLIPImageProcessorPil"):
        assert f"=== {name} (transformers' defaults; (c): FusedImageProcessor reference='pil') ===" in out
    assert "PIL (no torchvision) decode: max 0 levels" in out
    for model, rows in results.items():
        for row in rows:
            # The processor's own arithmetic on the same pixels: fp32 rounding only.
            assert row.diffs["b"] < 1e-6 and row.diffs["c"] < 1e-6 and row.same_pixels_diff < 1e-6, (model, row)
