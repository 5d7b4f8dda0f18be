"""The demo runs where scripts/demo.sh puts it on a machine without a GPU: the CPU-only torch, which has no
torchvision beside it (PyPI's torchvision wheels are CUDA builds). There it takes transformers' *Pil
processors, and FusedImageProcessor reproduces their resize (reference="pil") from Pillow-decoded bytes."""

import importlib.util

import numpy as np
import pytest

pytest.importorskip("transformers")
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
skimage_data = pytest.importorskip("skimage.data")


def test_demo_without_torchvision(monkeypatch, capsys, tmp_path):
    from fused_input_norm import demo, images

    monkeypatch.setattr(demo, "has_torchvision", lambda: False)
    monkeypatch.setattr(images, "has_torchvision", lambda: False)
    monkeypatch.setattr(demo, "photos", lambda: {"chelsea": np.ascontiguousarray(skimage_data.chelsea())})
    plot = tmp_path / "demo.png"
    argv = ["--device", "cpu", "--reps", "1", "--budget-s", "0", "--models", "qwen2vl,clip", "--no-video"]
    results = demo.main([*argv, "--plot", str(plot) if HAS_MATPLOTLIB else ""])
    out = capsys.readouterr().out
    for name in ("Qwen2VLImageProcessorPil", "CLIPImageProcessorPil"):
        assert f"=== {name} (transformers' defaults; (c): FusedImageProcessor reference='pil') ===" in out
        assert f"Markdown ({name}, cpu" in out  # the class that ran, not the default one
    # On the CPU: what each path would ship, and no decoder self-comparison ((c) decodes as Pillow does).
    assert "would ship" in out and "on PCIe" not in out.split("=== ")[1]
    assert "decode: max" not in out
    for model, rows in results.items():
        for row in rows:
            # The processor's own arithmetic on the same pixels: fp32 rounding only.
            assert row.diffs["b"] < 1e-6 and row.diffs["c"] < 1e-6, (model, row)
            assert row.decoder_max is None, (model, row)
    if HAS_MATPLOTLIB:
        assert plot.stat().st_size > 10_000 and f"Plot: {plot}" in out


@pytest.mark.parametrize("torchvision", [True, False])
def test_demo_video_case(monkeypatch, capsys, torchvision):
    """The video case: a small clip (an MP4 where torchcodec decodes) through transformers' video processor and
    FusedVideoProcessor, within 1e-6; without torchvision, ours alone, saying why."""
    import torch

    from fused_input_norm import demo
    from fused_input_norm.bench.video import mp4_unavailable

    if torchvision and not demo.has_torchvision():
        pytest.skip("torchvision is not installed: transformers' video processors need it")
    monkeypatch.setattr(demo, "has_torchvision", lambda: torchvision)
    monkeypatch.setattr(demo, "VIDEO_CLIP", (5, 64, 96))
    figures = demo.run_video(torch.device("cpu"), 1, 0)
    out = capsys.readouterr().out
    assert "=== Video: 5 frames of 96x64, " in out and "pixel_values_videos (" in out
    assert ("an H.264 MP4 of" in out) == (mp4_unavailable() is None)
    assert figures["c ms"] > 0
    if torchvision:
        assert figures["max |diff|"] <= 1e-6 and "(a) / (c): " in out
    else:
        assert "(a) is missing: transformers' video processors need torchvision" in out and "a ms" not in figures
