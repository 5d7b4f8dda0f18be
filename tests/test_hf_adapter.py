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


# ----- videos -----


def _clips():
    rng = np.random.default_rng(7)
    return [
        rng.integers(0, 256, (9, 180, 320, 3), dtype=np.uint8),
        rng.integers(0, 256, (6, 240, 200, 3), dtype=np.uint8),
    ]


def _metadata():
    return [
        {"fps": 4.0, "total_num_frames": 9, "frames_indices": list(range(9))},
        {"fps": 3.0, "total_num_frames": 6, "frames_indices": list(range(6))},
    ]


@pytest.mark.parametrize("model", ["qwen2_vl", "qwen3_vl"])
@pytest.mark.parametrize(
    "kwargs",
    [
        {"do_sample_frames": False},
        {"do_sample_frames": True, "fps": 2},
        {"do_sample_frames": False, "do_rescale": False, "do_normalize": False},
        {"do_sample_frames": False, "size": {"shortest_edge": 3136, "longest_edge": 200000}},
    ],
    ids=["as-given", "sampled", "uint8", "size"],
)
def test_video_same_batch_feature_as_transformers(model, kwargs):
    """FusedHFVideoProcessor against the transformers video processor it wraps (upstream's own sampling and
    metadata, FusedVideoProcessor's rows): float32 within 1e-6, uint8 equal, grids and sampled frames equal,
    and no call handed back to transformers."""
    import copy

    from fused_input_norm.hf_adapter import FusedHFVideoProcessor

    module = pytest.importorskip(f"transformers.models.{model}.video_processing_{model}")
    cls = module.Qwen2VLVideoProcessor if model == "qwen2_vl" else module.Qwen3VLVideoProcessor
    upstream = cls(cap_pixels_per_frame=False)
    served = FusedHFVideoProcessor(copy.deepcopy(upstream))
    expected = upstream(videos=_clips(), video_metadata=_metadata(), return_metadata=True, **kwargs)
    got = served(videos=_clips(), video_metadata=_metadata(), return_metadata=True, **kwargs)
    assert not served._logged, served._logged
    assert torch.equal(got["video_grid_thw"], expected["video_grid_thw"])
    indices = [[[int(i) for i in m.frames_indices] for m in out["video_metadata"]] for out in (got, expected)]
    assert indices[0] == indices[1]
    pv, ref = got["pixel_values_videos"], expected["pixel_values_videos"]
    assert pv.dtype == ref.dtype and pv.shape == ref.shape
    if pv.dtype == torch.uint8:
        assert torch.equal(pv, ref)
    else:
        assert float((pv - ref).abs().max()) <= 1e-6


def test_video_calls_it_does_not_reproduce_go_to_transformers(caplog):
    from fused_input_norm.hf_adapter import FusedHFVideoProcessor, unsupported_video

    module = pytest.importorskip("transformers.models.qwen2_vl.video_processing_qwen2_vl")
    upstream = module.Qwen2VLVideoProcessor(cap_pixels_per_frame=False)
    served = FusedHFVideoProcessor(upstream, logging.getLogger("test_video_adapter"))
    with caplog.at_level(logging.INFO, logger="test_video_adapter"):
        got = served(videos=_clips(), do_sample_frames=False, do_rescale=True, do_normalize=False)
    expected = upstream(videos=_clips(), do_sample_frames=False, do_rescale=True, do_normalize=False)
    assert torch.equal(got["pixel_values_videos"], expected["pixel_values_videos"])
    assert "do_rescale and do_normalize differ" in caplog.text
    assert unsupported_video(qwen.Qwen2VLImageProcessor()) is not None
    assert served.merge_size == upstream.merge_size  # upstream's attributes
