"""SmolVLM2's video processor (transformers' SmolVLMVideoProcessor, torchvision backend, its only one) against
FusedVideoProcessor: its frame sampling (fps / num_frames / the skipped seconds, from the video's metadata)
against transformers' own sample_frames over many cases; then whole calls on small clips made of real photos
(the frames shifted photos), one clip and batches of clips of different lengths and sizes (padded to the most
frames), sampling on and off, per-call keys: every key, shape and dtype transformers returns, float32 within
1e-6, the resized bytes (do_rescale and do_normalize off; visual_dtype uint8) equal. Each frame goes through
Idefics3's chain of LANCZOS resizes (the longest edge, then the square tile), which reference "torchvision"
reproduces where torch has the uint8 LANCZOS kernel. The EQUALITY lines printed (pytest -s) are the table."""

import random

import numpy as np
import pytest
import torch
from family_checks import assert_same, forbid_upstream, photo
from test_resize import NO_TORCH_LANCZOS, TORCH_LANCZOS
from test_video_decode import TORCHCODEC_MISSING, encode

from fused_input_norm import FusedVideoProcessor
from fused_input_norm import config as configs
from fused_input_norm.hf_adapter import FusedHFVideoProcessor
from fused_input_norm.video import smolvlm_frame_indices

pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
# transformers' video module imports torchvision (its only backend)
smolvlm_video = pytest.importorskip("transformers.models.smolvlm.video_processing_smolvlm")
VideoMetadata = pytest.importorskip("transformers.video_utils").VideoMetadata
# transformers runs LANCZOS where torch has the uint8 kernel; elsewhere it falls back to BICUBIC, which is not
# the filter these frames are resized with.
needs_torch_lanczos = pytest.mark.skipif(not TORCH_LANCZOS, reason=NO_TORCH_LANCZOS)

# HuggingFaceTB/SmolVLM2-2.2B-Instruct's processor keys (its preprocessor_config.json, whose older
# video_sampling the class reads: fps and max_frames; its video_size yields to size), less the tile, which the
# tests make small (max_image_size 384 and size 1536 as shipped are in test_checkpoint_config_as_shipped).
SMOLVLM2 = {
    "video_processor_type": "SmolVLMVideoProcessor",
    "do_convert_rgb": True,
    "do_image_splitting": True,
    "do_normalize": True,
    "do_pad": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "resample": 1,
    "rescale_factor": 1 / 255,
    "max_image_size": {"longest_edge": 384},
    "size": {"longest_edge": 1536},
    "video_sampling": {"fps": 1, "max_frames": 64, "video_size": {"longest_edge": 384}},
}
SMALL = {**SMOLVLM2, "max_image_size": {"longest_edge": 96}, "size": {"longest_edge": 250}}


def clip(frames: int, name: str = "astronaut", height: int = 120, width: int = 180, step=(5, 7)) -> np.ndarray:
    """uint8 [T, H, W, C]: a crop of a real photo, shifted by `step` pixels a frame (every frame differs)."""
    image = photo(name)
    return np.stack(
        [
            np.ascontiguousarray(image[i * step[0] : i * step[0] + height, i * step[1] : i * step[1] + width])
            for i in range(frames)
        ]
    )


def metadata(total: int, fps: float) -> dict:
    return {"total_num_frames": total, "fps": fps, "duration": total / fps}


def check(config: dict, videos, label: str, visual_dtype=torch.float32, **kwargs) -> None:
    """FusedVideoProcessor from `config` against SmolVLMVideoProcessor(**config), on the same call."""
    reference_kwargs = dict(kwargs)
    if visual_dtype == torch.uint8:  # the bytes: what transformers returns with rescale and normalize off
        reference_kwargs |= {"do_rescale": False, "do_normalize": False}
    if "video_metadata" in kwargs:  # transformers writes frames_indices into VideoMetadata: its own copies
        reference_kwargs["video_metadata"] = [VideoMetadata(**m) for m in kwargs["video_metadata"]]
    want = smolvlm_video.SmolVLMVideoProcessor(**config)(videos, return_tensors="pt", **reference_kwargs)
    got = FusedVideoProcessor.from_preprocessor_config(config, device="cpu")(videos, visual_dtype, **kwargs)
    assert_same(got, dict(want), label)


# ----- frame sampling -----


def test_sampling_is_transformers_over_many_cases():
    """smolvlm_frame_indices against SmolVLMVideoProcessor.sample_frames: frame counts 1-3000, the video's fps
    (integer and NTSC-like), target fps and num_frames, durations from the metadata, with and without the
    skipped seconds (videos long enough, and not)."""
    upstream = smolvlm_video.SmolVLMVideoProcessor()
    rng = random.Random(37)
    skipped = 0
    for _ in range(3000):
        total = rng.choice([1, 2, 3, rng.randint(1, 60), rng.randint(60, 3000)])
        video_fps = rng.choice([1.0, 24.0, 25.0, 30000 / 1001, 60.0, rng.uniform(0.5, 120)])
        duration = rng.choice([total / video_fps, round(total / video_fps, 3)])
        num_frames, fps = rng.choice([1, 2, 8, 64, rng.randint(1, 200)]), rng.choice([1, 2, 0.5, rng.uniform(0.1, 8)])
        meta = VideoMetadata(total_num_frames=total, fps=video_fps, duration=duration)
        want = upstream.sample_frames(meta, num_frames=num_frames, fps=fps).tolist()
        assert smolvlm_frame_indices(total, video_fps, duration, num_frames, fps) == want, (
            total,
            video_fps,
            duration,
            num_frames,
            fps,
        )
        skipped += duration - 2 > num_frames * fps
    assert skipped > 100  # the skip_secs branch was exercised


# ----- whole calls against transformers -----

CALLS = {
    "one clip": lambda: [clip(5)],
    "tall clip, odd sizes": lambda: [clip(3, "coffee", 151, 97)],
    "two clips: lengths and sizes differ (padding)": lambda: [clip(4), clip(2, "chelsea", 90, 160, (3, 2))],
    "three clips, one a single frame": lambda: [clip(1, "rocket"), clip(6, height=60, width=61), clip(3, "coffee")],
}


@needs_torch_lanczos
@pytest.mark.parametrize("visual_dtype", [torch.float32, torch.uint8], ids=["float32", "uint8"])
@pytest.mark.parametrize("case", list(CALLS))
def test_calls_match_transformers(case, visual_dtype):
    videos = [torch.from_numpy(v).permute(0, 3, 1, 2).contiguous() for v in CALLS[case]()]
    check(SMALL, videos, f"smolvlm video {case} {visual_dtype}", visual_dtype)


@needs_torch_lanczos
def test_sampling_on_matches_transformers():
    """do_sample_frames per call with each clip's metadata: the config's fps 1 and max_frames, the skipped
    seconds of a long clip, a call's num_frames and fps; NumPy [T, H, W, C] clips, as videos come decoded."""
    videos = [clip(12, height=80, width=100, step=(2, 3)), clip(7, "coffee", 70, 90, (3, 1))]
    for label, meta, kwargs in [
        ("config fps 1", [metadata(12, 2.0), metadata(7, 1.0)], {}),
        ("skip the first and last second", [metadata(12, 4.0), metadata(7, 1.0)], {"num_frames": 2}),
        ("a call's fps", [metadata(12, 3.0), metadata(7, 2.5)], {"fps": 2}),
    ]:
        check(SMALL, videos, f"smolvlm video sampled: {label}", do_sample_frames=True, video_metadata=meta, **kwargs)


@needs_torch_lanczos
def test_per_call_keys_match_transformers():
    videos = [torch.from_numpy(clip(3)), torch.from_numpy(clip(2, "chelsea"))]
    for kwargs in [
        {"max_image_size": {"longest_edge": 64}},  # read by no step: the resize reads the instance's
        {"size": {"longest_edge": 70}},  # step 1 smaller than the tile: resized up again
        {"size": {"height": 50, "width": 120}},
        {"image_mean": [0.1, 0.2, 0.3], "image_std": [0.9, 0.8, 0.7]},
    ]:
        check(SMALL, videos, f"smolvlm video {'-'.join(kwargs)}", **kwargs)


@needs_torch_lanczos
def test_gray_and_frame_lists():
    """A gray clip (repeated to RGB) and a clip as a list of HWC frames."""
    gray = torch.from_numpy(clip(3)[..., :1].copy()).permute(0, 3, 1, 2).contiguous()
    # (one layout per call: transformers infers the first clip's and applies it to all of them)
    rgb = torch.from_numpy(clip(2, "rocket")).permute(0, 3, 1, 2).contiguous()
    check(SMALL, [gray, rgb], "smolvlm video gray")
    check(SMALL, [list(clip(3, "coffee"))], "smolvlm video frame list")


@needs_torch_lanczos
def test_checkpoint_config_as_shipped():
    """SmolVLM2-2.2B's own sizes: each frame up to 1536 on its longest edge, then to 384 x 384."""
    check(SMOLVLM2, [torch.from_numpy(clip(2, height=90, width=130))], "smolvlm2-2.2B video")


@needs_torch_lanczos
@pytest.mark.skipif(TORCHCODEC_MISSING is not None, reason=str(TORCHCODEC_MISSING))
def test_encoded_video_matches_transformers_from_its_path(tmp_path):
    """An MP4's path and bytes (torchcodec's decode, only the frames sampling picks, from the stream's count,
    fps and duration) against transformers given the path: sampling off, the config's fps 1 over 2 s, and one
    frame of a 5 s clip (the first and last second skipped)."""
    for frames, fps, kwargs in [
        (10, 5.0, {}),
        (40, 20.0, {"do_sample_frames": True}),
        (40, 8.0, {"do_sample_frames": True, "num_frames": 1}),
    ]:
        path = tmp_path / f"clip-{frames}-{fps}.mp4"
        path.write_bytes(encode(clip(frames, "chelsea", 96, 128, (1, 2)), "mp4", fps))
        want = smolvlm_video.SmolVLMVideoProcessor(**SMALL)(str(path), return_tensors="pt", **kwargs)
        ours = FusedVideoProcessor.from_preprocessor_config(SMALL, device="cpu")
        for source in (str(path), path.read_bytes()):
            assert_same(ours(source, **kwargs), dict(want), f"smolvlm video mp4 {frames} frames at {fps} fps {kwargs}")


# ----- FusedHFVideoProcessor: transformers' own preprocess (its sampling), the frames' work here -----


def adapter_call(adapter, upstream, videos, label: str, **kwargs) -> None:
    """The adapter against upstream on the same call (upstream's preprocess patched to fail inside the
    adapter: a call handed back fails the test); metadata as fresh VideoMetadata per call."""
    fresh = lambda: {  # noqa: E731
        k: [VideoMetadata(**m) for m in v] if k == "video_metadata" else v for k, v in kwargs.items()
    }
    want = upstream(videos, **fresh())
    got = adapter(videos, **fresh())
    if kwargs.get("return_tensors") is None:  # lists of padded videos and of masks
        for key in want:
            assert len(got[key]) == len(want[key]), (label, key)
            named = lambda values: {f"{key}[{i}]": value for i, value in enumerate(values)}  # noqa: B023, E731
            assert_same(named(got[key]), named(want[key]), f"{label} {key}")
        return
    assert_same(dict(got), dict(want), label)


@needs_torch_lanczos
def test_adapter_matches_transformers(monkeypatch):
    upstream = smolvlm_video.SmolVLMVideoProcessor(**SMALL)
    adapter = FusedHFVideoProcessor(smolvlm_video.SmolVLMVideoProcessor(**SMALL))
    forbid_upstream(monkeypatch, adapter)
    videos = [torch.from_numpy(v).permute(0, 3, 1, 2).contiguous() for v in (clip(4), clip(2, "coffee", 70, 90))]
    adapter_call(adapter, upstream, videos, "adapter smolvlm video", return_tensors="pt")
    adapter_call(adapter, upstream, videos, "adapter smolvlm video unstacked")
    adapter_call(adapter, upstream, videos, "adapter bytes", return_tensors="pt", do_rescale=False, do_normalize=False)
    meta = [metadata(4, 2.0), metadata(2, 1.0)]
    adapter_call(
        adapter, upstream, videos, "adapter sampled", return_tensors="pt", do_sample_frames=True, video_metadata=meta
    )
    for processor in (adapter, upstream):  # an attribute write: the instance's tile, which its resize reads
        processor.max_image_size = {"longest_edge": 48}
    adapter_call(adapter, upstream, videos, "adapter max_image_size written", return_tensors="pt")


# ----- the config as transformers reads it -----


def test_config_reads_as_the_class():
    """video_sampling gives fps and num_frames (over the config's own) and size where the config has none;
    the class's defaults otherwise; an image preprocessor config of SmolVLMProcessor is read as its video
    processor (AutoVideoProcessor's fallback)."""
    for config in [
        SMOLVLM2,
        {k: v for k, v in SMOLVLM2.items() if k != "size"},
        {**SMOLVLM2, "fps": 5, "num_frames": 3},
        {"video_processor_type": "SmolVLMVideoProcessor"},
        {"video_processor_type": "SmolVLMVideoProcessor", "size": {"longest_edge": 5000}},
    ]:
        upstream = smolvlm_video.SmolVLMVideoProcessor(**config)
        s = FusedVideoProcessor.from_preprocessor_config(config, device="cpu").settings
        assert (s.kind, s.fps, s.num_frames, s.do_sample_frames) == (
            "smolvlm",
            upstream.fps,
            upstream.num_frames,
            upstream.do_sample_frames,
        )
        assert s.frames.options["tile"] == upstream.max_image_size["longest_edge"]
        assert s.frames.options["do_image_splitting"] is False
        edge = upstream.size["longest_edge"] if isinstance(upstream.size, dict) else upstream.size.longest_edge
        assert s.size == {"longest_edge": min(edge, 4096)}
    image_config = {**SMOLVLM2, "image_processor_type": "SmolVLMImageProcessor", "processor_class": "SmolVLMProcessor"}
    del image_config["video_processor_type"]
    assert configs.resolve_video(image_config, "t").kind == "smolvlm"


@needs_torch_lanczos
def test_longest_edge_over_4096_is_the_videos_rule():
    """The video's size function bounds the longest edge to 4096 before sizing (the image's after)."""
    config = {**SMALL, "size": {"longest_edge": 4100}, "max_image_size": {"longest_edge": 32}}
    check(config, [torch.from_numpy(clip(1, height=41, width=97))], "smolvlm video longest_edge 4100")


# ----- refused, named -----


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({**SMALL, "do_resize": False}, "do_resize off is not implemented"),
        ({**SMALL, "do_pad": False}, "do_pad off is not implemented"),
        ({**SMALL, "video_sampling": {"fps": 1}}, "video_sampling must be a mapping with keys"),
        ({**SMALL, "resample": 0}, "resample 0 .nearest. is not implemented"),
    ],
)
def test_configs_refused(config, match):
    with pytest.raises(ValueError, match=match):
        FusedVideoProcessor.from_preprocessor_config(config, device="cpu")


def test_calls_refused():
    p = FusedVideoProcessor.from_preprocessor_config(SMALL, device="cpu")
    video = clip(3)
    with pytest.raises(ValueError, match="the video's fps and the video's duration: pass video_metadata"):
        p(video, do_sample_frames=True)
    with pytest.raises(ValueError, match="the video's duration"):
        p(video, do_sample_frames=True, video_metadata={"total_num_frames": 3, "fps": 1.0})
    p = FusedVideoProcessor.from_preprocessor_config({"video_processor_type": "SmolVLMVideoProcessor"}, device="cpu")
    with pytest.raises(ValueError, match="from fps and num_frames"):
        p(video, do_sample_frames=True, video_metadata=metadata(3, 1.0))
    with pytest.raises(TypeError, match=r"unexpected keyword argument.*patch_size"):
        p(video, patch_size=14)
