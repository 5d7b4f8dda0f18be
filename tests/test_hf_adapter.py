"""FusedHFImageProcessor (what vLLM holds as its image processor) against the transformers processor it wraps,
called directly: the same BatchFeature on the calls it serves (uint8 patch rows with do_rescale and
do_normalize off, float32 within 1e-6 otherwise; per-call size kwargs resolved as transformers resolves them),
transformers' own output on the calls it does not reproduce, upstream's attributes. The same inside vLLM:
tests/test_vllm_processor.py."""

import logging

import numpy as np
import pytest
import torch

from fused_input_norm.hf_adapter import FusedHFImageProcessor, unsupported

qwen = pytest.importorskip("transformers.models.qwen2_vl.image_processing_qwen2_vl", reason="needs transformers")
Image = pytest.importorskip("PIL.Image", reason="needs Pillow")


def upstream():
    return qwen.Qwen2VLImageProcessor(min_pixels=3136, max_pixels=1003520)


def images():
    rng = np.random.default_rng(3)
    rgb = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in [(480, 640), (57, 29), (1080, 1920)]]
    return [Image.fromarray(a) for a in rgb] + [
        Image.fromarray(rgb[0][..., 0]),
        Image.fromarray(rgb[0]).convert("RGBA"),
    ]


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"do_rescale": False, "do_normalize": False},
        {"max_pixels": 200704},
        {"size": {"shortest_edge": 50176, "longest_edge": 262144}, "do_rescale": False, "do_normalize": False},
    ],
    ids=["float", "uint8", "max_pixels", "size-uint8"],
)
def test_same_batch_feature_as_transformers(kwargs):
    ours, theirs = FusedHFImageProcessor(upstream()), upstream()
    got, expected = ours(images(), return_tensors="pt", **kwargs), theirs(images(), return_tensors="pt", **kwargs)
    assert set(got) == set(expected) == {"pixel_values", "image_grid_thw"}
    assert torch.equal(got["image_grid_thw"], expected["image_grid_thw"])
    pv, ref = got["pixel_values"], expected["pixel_values"]
    assert pv.dtype == ref.dtype and pv.shape == ref.shape
    if pv.dtype == torch.uint8:
        assert torch.equal(pv, ref)
    else:
        assert pv.dtype == torch.float32 and float((pv - ref).abs().max()) <= 1e-6


def test_calls_it_does_not_reproduce_go_to_transformers(caplog):
    ours, theirs = FusedHFImageProcessor(upstream()), upstream()
    with caplog.at_level(logging.INFO):
        for kwargs in ({"resample": 0}, {"do_rescale": True, "do_normalize": False}):
            got, expected = ours(images()[:2], **kwargs), theirs(images()[:2], **kwargs)
            assert torch.equal(got["pixel_values"], expected["pixel_values"])
    said = [r.getMessage() for r in caplog.records if "serves this call" in r.getMessage()]
    assert len(said) == 2 and "nearest" in said[0] and "do_rescale and do_normalize differ" in said[1]


def test_upstream_attributes_and_refusals():
    ours = FusedHFImageProcessor(upstream())
    assert ours.merge_size == 2 and ours.reference == "torchvision"
    assert ours.get_number_of_image_patches(1080, 1920, {}) == upstream().get_number_of_image_patches(1080, 1920, {})
    clip = pytest.importorskip("transformers.models.clip.image_processing_clip").CLIPImageProcessor()
    assert "not a Qwen-VL image processor" in unsupported(clip)
    with pytest.raises(ValueError, match="cannot serve CLIPImageProcessor"):
        FusedHFImageProcessor(clip)
