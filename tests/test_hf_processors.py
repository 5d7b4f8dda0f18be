"""Parity with Hugging Face processors on real photos: the processor's own normalized output must equal
FusedInputNorm applied to the same processor's uint8 output (do_rescale=False, do_normalize=False)."""

import json

import pytest
import torch

from fused_input_norm import FusedInputNorm

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")

PHOTOS = ["astronaut", "coffee", "chelsea", "rocket"]
PROCESSORS = {
    "Qwen2VLImageProcessor": None,  # 2-D patches: their channels are inside each row, not an axis
    "CLIPImageProcessor": -3,
    "SiglipImageProcessor": -3,
}
# What the processors compute, (x * rescale - mean) / std in float32, differs from the folded
# x * (rescale / std) + (-mean / std) by a few float32 roundings of values up to ~2.7.
TOLERANCE = {"rtol": 1e-5, "atol": 2e-6}


def processor_config(processor) -> dict:
    return {
        k: getattr(processor, k) for k in ("do_rescale", "rescale_factor", "do_normalize", "image_mean", "image_std")
    }


@pytest.mark.parametrize("name", list(PROCESSORS))
@pytest.mark.parametrize("photo", PHOTOS)
def test_matches_processor_on_real_photos(name, photo, record_property):
    processor = getattr(transformers, name)()
    image = getattr(skimage_data, photo)()
    expected = processor(image, return_tensors="pt")["pixel_values"]
    raw = processor(image, do_rescale=False, do_normalize=False, return_tensors="pt")["pixel_values"]
    assert raw.shape == expected.shape
    if getattr(processor, "backend", "torchvision") == "torchvision" and "Pil" not in type(processor).__name__:
        assert raw.dtype == torch.uint8  # what engines ship to the GPU
    norm = FusedInputNorm.from_preprocessor_config(processor_config(processor))
    got = norm(raw, torch.float32, channel_dim=PROCESSORS[name])
    max_diff = (got - expected.float()).abs().max().item()
    record_property("max_abs_diff", max_diff)
    print(f"{name} {photo} {tuple(raw.shape)} {raw.dtype}: max |diff| {max_diff:.2e}")
    torch.testing.assert_close(got, expected.float(), **TOLERANCE)


def test_config_from_json_file(tmp_path):
    path = tmp_path / "preprocessor_config.json"
    path.write_text(
        json.dumps(
            {
                "do_rescale": True,
                "rescale_factor": 0.00392156862745098,
                "do_normalize": True,
                "image_mean": [0.485, 0.456, 0.406],
                "image_std": [0.229, 0.224, 0.225],
            }
        )
    )
    for source in (path, str(path)):
        norm = FusedInputNorm.from_preprocessor_config(source)
        assert norm.channel == 3 and not norm.is_identity
        assert norm.weight.tolist() == pytest.approx([1 / 255 / s for s in (0.229, 0.224, 0.225)])
        assert norm.bias.tolist() == pytest.approx(
            [-m / s for m, s in zip((0.485, 0.456, 0.406), (0.229, 0.224, 0.225), strict=True)]
        )
