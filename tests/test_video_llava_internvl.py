"""LLaVA-OneVision's, InternVL-hf's and LLaVA-NeXT-Video's video processors (transformers'
LlavaOnevisionVideoProcessor, InternVLVideoProcessor and LlavaNextVideoVideoProcessor, torchvision backend, their
only one; Intern-S1 uses InternVL's) against
FusedVideoProcessor and FusedHFVideoProcessor: both run BaseVideoProcessor's _preprocess (every frame resized to
size, optionally center-cropped, rescaled and normalized: one [T, C, h, w] per video), reproduced here as CLIP
images, one call per clip. Clips made of real photos (each frame a shifted crop), odd sizes, several clips of
different lengths, frames as [T, H, W, C] and [T, C, H, W], gray, per-call keys, sampling by upstream (the
adapter runs upstream's preprocess, InternVL's initial_shift included): every key, shape and dtype, float32
within 1e-6, the resized bytes equal. A call handed back to transformers fails the adapter tests."""

import numpy as np
import pytest
import torch
from family_checks import assert_same, forbid_upstream, photo

from fused_input_norm import FusedVideoProcessor
from fused_input_norm import config as configs
from fused_input_norm.hf_adapter import FusedHFVideoProcessor

pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
llava_video = pytest.importorskip("transformers.models.llava_onevision.video_processing_llava_onevision")
internvl_video = pytest.importorskip("transformers.models.internvl.video_processing_internvl")
llava_next_video = pytest.importorskip("transformers.models.llava_next_video.video_processing_llava_next_video")
VideoMetadata = pytest.importorskip("transformers.video_utils").VideoMetadata

CLASSES = {
    "llava_onevision": llava_video.LlavaOnevisionVideoProcessor,
    "internvl": internvl_video.InternVLVideoProcessor,
    "llava_next_video": llava_next_video.LlavaNextVideoVideoProcessor,
}
# llava-hf/llava-onevision-qwen2-*-hf's video_preprocessor_config.json (its SigLIP mean and std) and
# OpenGVLab/InternVL3-*-hf's (ImageNet's mean and std, 448 tiles, sampling on), less their type keys.
CHECKPOINTS = {
    "llava_onevision": {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "resample": 3,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 384, "width": 384},
        "crop_size": None,
        "do_center_crop": None,
        "do_sample_frames": False,
        "fps": None,
        "num_frames": None,
    },
    "internvl": {
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.485, 0.456, 0.406],
        "image_std": [0.229, 0.224, 0.225],
        "initial_shift": True,
        "resample": 3,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 448, "width": 448},
        "do_sample_frames": False,
        "fps": None,
        "num_frames": None,
    },
    # llava-hf/LLaVA-NeXT-Video-7B-hf's: CLIP's mean and std, shortest edge 336, center crop 336
    "llava_next_video": {
        "crop_size": {"height": 336, "width": 336},
        "default_to_square": False,
        "do_center_crop": True,
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "resample": 3,
        "rescale_factor": 0.00392156862745098,
        "size": {"shortest_edge": 336},
        "do_sample_frames": False,
        "fps": None,
        "num_frames": None,
    },
}


def clip(frames: int, name: str = "astronaut", height: int = 121, width: int = 179, step=(5, 7)) -> np.ndarray:
    """uint8 [T, H, W, C]: a crop of a real photo, shifted by `step` pixels a frame (every frame differs)."""
    image = photo(name)
    return np.stack(
        [
            np.ascontiguousarray(image[i * step[0] : i * step[0] + height, i * step[1] : i * step[1] + width])
            for i in range(frames)
        ]
    )


def chw(video: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(video).permute(0, 3, 1, 2).contiguous()


# name -> (videos, per-call kwargs); one layout per call (transformers infers the first clip's for all).
def calls() -> dict:
    return {
        "one-thwc": ([clip(3)], {}),
        "odd-sizes-tchw": ([chw(clip(4, height=37, width=251)), chw(clip(2, "coffee", 301, 97))], {}),
        "same-size-clips": ([chw(clip(3)), chw(clip(3, "coffee"))], {}),
        "clips-of-two-lengths": ([chw(clip(4)), chw(clip(2, "coffee"))], {}),
        "gray": ([chw(clip(3)[..., :1].copy())], {}),
        "bytes": ([chw(clip(2)), chw(clip(3, "rocket", 90, 60))], {"do_rescale": False, "do_normalize": False}),
        "size-per-call": ([clip(2, "chelsea", 88, 130)], {"size": {"height": 64, "width": 96}, "resample": 2}),
        "shortest-edge": ([chw(clip(3, height=50, width=81))], {"size": {"shortest_edge": 40}}),
        "mean-std-per-call": ([clip(2)], {"image_mean": [0.1, 0.2, 0.3], "image_std": [0.3, 0.2, 0.1]}),
        # LlavaOnevisionProcessor passes its image do_pad on to the videos, which no step reads
        "do-pad-read-by-no-step": ([clip(2)], {"do_pad": True}),
    }


def config_of(kind: str) -> dict:
    return {**CHECKPOINTS[kind], "video_processor_type": CLASSES[kind].__name__}


def compare(got, want, label: str, return_tensors) -> None:
    if return_tensors is None:  # a list of [T, C, h, w] videos
        assert isinstance(got["pixel_values_videos"], list), label
        assert len(got["pixel_values_videos"]) == len(want["pixel_values_videos"]), label
        named = lambda values: {f"video[{i}]": value for i, value in enumerate(values)}  # noqa: E731
        assert_same(named(got["pixel_values_videos"]), named(want["pixel_values_videos"]), label)
        return
    assert_same(dict(got), dict(want), label)


# LLaVA-NeXT-Video crops 336 x 336 after its resize: per-call sizes that leave room for the crop.
CROPPED_SIZES = {
    "size-per-call": {"size": {"height": 400, "width": 350}, "resample": 2},
    "shortest-edge": {"size": {"shortest_edge": 340}},
}


def call(kind: str, name: str) -> tuple:
    videos, kwargs = calls()[name]
    return videos, CROPPED_SIZES.get(name, kwargs) if kind == "llava_next_video" else kwargs


@pytest.mark.parametrize("kind", list(CLASSES))
@pytest.mark.parametrize("name", list(calls()))
def test_adapter_matches_transformers(monkeypatch, kind, name):
    videos, kwargs = call(kind, name)
    upstream = CLASSES[kind](**CHECKPOINTS[kind])
    adapter = FusedHFVideoProcessor(CLASSES[kind](**CHECKPOINTS[kind]))
    assert isinstance(adapter, CLASSES[kind])
    forbid_upstream(monkeypatch, adapter)
    shapes = {tuple(v.shape) for v in upstream(videos, **kwargs)["pixel_values_videos"]}
    for return_tensors in (None, "pt") if len(shapes) == 1 else (None,):
        got = adapter(videos, return_tensors=return_tensors, **kwargs)
        compare(got, upstream(videos, return_tensors=return_tensors, **kwargs), f"{kind} {name}", return_tensors)


@pytest.mark.parametrize("kind", list(CLASSES))
def test_adapter_sampling_is_upstreams(monkeypatch, kind):
    """Sampling by num_frames and by fps (InternVL's initial_shift, LLaVA-OV's uniform indices): upstream's own
    sample_frames picks the frames, the adapter does the frames' work."""
    upstream = CLASSES[kind](**CHECKPOINTS[kind])
    adapter = FusedHFVideoProcessor(CLASSES[kind](**CHECKPOINTS[kind]))
    forbid_upstream(monkeypatch, adapter)
    videos = [clip(8), clip(6, "coffee")]
    meta = [{"total_num_frames": 8, "fps": 4.0, "duration": 2.0}, {"total_num_frames": 6, "fps": 3.0, "duration": 2.0}]
    for kwargs in ({"num_frames": 4}, {"fps": 2}):
        fresh = [VideoMetadata(**m) for m in meta]
        want = upstream(videos, do_sample_frames=True, video_metadata=fresh, return_tensors="pt", **kwargs)
        fresh = [VideoMetadata(**m) for m in meta]
        got = adapter(videos, do_sample_frames=True, video_metadata=fresh, return_tensors="pt", **kwargs)
        assert_same(dict(got), dict(want), f"{kind} sampled {kwargs}")


@pytest.mark.parametrize("kind", list(CLASSES))
def test_adapter_attribute_writes_are_read(monkeypatch, kind):
    upstream = CLASSES[kind](**CHECKPOINTS[kind])
    adapter = FusedHFVideoProcessor(CLASSES[kind](**CHECKPOINTS[kind]))
    forbid_upstream(monkeypatch, adapter)
    for processor in (adapter, upstream):
        processor.size = {"height": 50, "width": 70}
        if kind == "llava_next_video":  # its crop, made to fit
            processor.crop_size = {"height": 40, "width": 60}
    videos = [chw(clip(2))]
    assert_same(dict(adapter(videos, return_tensors="pt")), dict(upstream(videos, return_tensors="pt")), kind)


@pytest.mark.parametrize("kind", list(CLASSES))
@pytest.mark.parametrize("name", list(calls()))
def test_from_preprocessor_config_matches_transformers(kind, name):
    """FusedVideoProcessor from the checkpoint's config, the same call (uint8 for the bytes)."""
    videos, kwargs = call(kind, name)
    unstacked = CLASSES[kind](**CHECKPOINTS[kind])(videos, **kwargs)
    stacks = len({tuple(v.shape) for v in unstacked["pixel_values_videos"]}) == 1
    want = CLASSES[kind](**CHECKPOINTS[kind])(videos, return_tensors="pt", **kwargs) if stacks else unstacked
    ours = FusedVideoProcessor.from_preprocessor_config(config_of(kind), device="cpu")
    raw = kwargs.get("do_rescale") is False
    overrides = {k: v for k, v in kwargs.items() if k not in ("do_rescale", "do_normalize")}
    got = ours(videos, torch.uint8 if raw else torch.float32, **overrides)
    if not stacks:  # one [T, C, h, w] per video, in a list, where they do not stack
        assert isinstance(got["pixel_values_videos"], list)
    compare(got, want, f"{kind} {name} from config", "pt" if stacks else None)


@pytest.mark.parametrize("kind", list(CLASSES))
def test_config_reads_as_the_class(kind):
    """The class's defaults where the config leaves keys out; an int size as the class reads it (InternVL's
    default_to_square: a square; LLaVA-OV's: a shortest edge); the processor_class alone names the kind."""
    videos = [chw(clip(2, height=70, width=45))]
    square = {"size": 56} if kind != "llava_next_video" else {"size": 56, "crop_size": 40}  # a crop that fits
    for config in ({}, square, {"do_center_crop": True, "crop_size": {"height": 30, "width": 40}}):
        want = CLASSES[kind](**config)(videos, return_tensors="pt")
        got = FusedVideoProcessor.from_preprocessor_config({**config, "video_processor_type": CLASSES[kind].__name__})
        assert_same(got(videos), dict(want), f"{kind} config {config}")
    processor_class = {
        "llava_onevision": "LlavaOnevisionProcessor",
        "internvl": "InternVLProcessor",
        "llava_next_video": "LlavaNextVideoProcessor",
    }[kind]
    assert configs.video_kind_of({"processor_class": processor_class}) == kind


@pytest.mark.parametrize("kind", list(CLASSES))
def test_sampling_is_refused_by_name_outside_the_adapter(kind):
    ours = FusedVideoProcessor.from_preprocessor_config(config_of(kind), device="cpu")
    with pytest.raises(ValueError, match="frame sampling is not implemented"):
        ours([clip(4)], do_sample_frames=True, num_frames=2, video_metadata=[{"total_num_frames": 4, "fps": 2.0}])


@pytest.mark.parametrize("kind", ["internvl", "llava_next_video"])
def test_rgba_frames_go_to_the_generic_path_with_the_package_resizes(monkeypatch, caplog, kind):
    """RGBA frames: transformers composites them on white into float32 frames, which the family (uint8 frames)
    does not take; the generic path runs transformers' own _preprocess on them with the package's float32
    bicubic, every resize its own, every value within 1e-6 of transformers'."""
    import logging

    from family_checks import forbid_backend_resize

    alpha = np.linspace(0, 255, 121 * 179, dtype=np.float64).reshape(121, 179, 1).astype(np.uint8)
    frames = clip(3)
    rgba = [np.concatenate([frames, np.broadcast_to(alpha, (*frames.shape[:-1], 1))], axis=-1)]
    kwargs = {"return_tensors": "pt", "input_data_format": "channels_last"}
    want = CLASSES[kind](**CHECKPOINTS[kind])(rgba, **kwargs)
    ours = FusedHFVideoProcessor(CLASSES[kind](**CHECKPOINTS[kind]))
    forbid_backend_resize(monkeypatch)
    with caplog.at_level(logging.INFO):
        got = ours(rgba, **kwargs)
    assert_same(dict(got), dict(want), f"{kind} rgba frames")
    said = [r.getMessage() for r in caplog.records if "serves this call" in r.getMessage()]
    assert said and all("the generic path serves this call" in line for line in said), said
