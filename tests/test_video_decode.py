"""Encoded videos (a path or the bytes of an MP4 / WebM file) through FusedVideoProcessor, against transformers
5's video processors given the same file's path: transformers decodes a path with torchcodec (exact seek mode,
the frames its sampling picks), and so does the processor. The clips are encoded here, by torchcodec's own
encoder (H.264 in MP4, VP9 in WebM), from windows moving across scikit-image photos.
"""

import sys

import numpy as np
import pytest
import torch
from conftest import RecordOps, requires_cuda
from test_video import CONFIGS, FP32_ATOL, clip, expected

from fused_input_norm import FusedVideoProcessor
from fused_input_norm.videos import EncodedVideo


def _torchcodec_missing() -> str | None:
    try:
        from torchcodec.decoders import VideoDecoder  # noqa: F401
        from torchcodec.encoders import VideoEncoder  # noqa: F401
    except Exception as error:  # ImportError, or FFmpeg's libraries missing (RuntimeError / OSError)
        return f"torchcodec is not usable here (pip install torchcodec; apt-get install ffmpeg): {error}"
    return None


TORCHCODEC_MISSING = _torchcodec_missing()
pytestmark = pytest.mark.skipif(TORCHCODEC_MISSING is not None, reason=str(TORCHCODEC_MISSING))
video_utils = pytest.importorskip("transformers.video_utils", reason="transformers is not installed")


def encode(frames: np.ndarray, container: str, fps: float) -> bytes:
    """uint8 [T, H, W, 3] encoded by torchcodec (H.264 for mp4, VP9 for webm), as a file's bytes."""
    from torchcodec.encoders import VideoEncoder

    data = torch.from_numpy(frames).permute(0, 3, 1, 2).contiguous()
    return VideoEncoder(data, frame_rate=fps).to_tensor(container).numpy().tobytes()


# name -> (frames, container, fps): 9 frames at 10 fps; 6 of another photo and size; 40 at 20 fps (2 s, for
# fps sampling to pick from); a WebM.
CLIPS = {
    "astronaut-9f.mp4": (lambda: clip(9), "mp4", 10.0),
    "coffee-6f.mp4": (lambda: clip(6, 180, 320, "coffee", (4, 6)), "mp4", 25.0),
    "chelsea-40f.mp4": (lambda: clip(40, 160, 240, "chelsea", (2, 3)), "mp4", 20.0),
    "astronaut-7f.webm": (lambda: clip(7, 192, 256), "webm", 12.0),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, tuple[str, bytes]]:
    """name -> (path, the same file's bytes)."""
    folder = tmp_path_factory.mktemp("videos")
    made = {}
    for name, (frames, container, fps) in CLIPS.items():
        data = encode(frames(), container, fps)
        path = folder / name
        path.write_bytes(data)
        made[name] = (str(path), data)
    return made


@pytest.mark.parametrize("name", sorted(CLIPS))
def test_decoded_frames_equal_transformers_torchcodec_decode(files, name):
    """The frames and stream metadata equal transformers' load_video(path, backend="torchcodec"), for the same
    indices (all, and a sampled subset with a repeat), from the path and from the bytes."""
    path, data = files[name]
    total = CLIPS[name][0]().shape[0]
    for indices in (list(range(total)), [0, 2, 2, total - 1]):
        theirs, metadata = video_utils.load_video(
            path, backend="torchcodec", sample_indices_fn=lambda metadata, indices=indices, **_: indices
        )
        for source in (path, data):
            video = EncodedVideo(source, "videos", torch.device("cpu"))
            assert (video.total, video.fps) == (metadata.total_num_frames, metadata.fps)
            frames = video.frames(indices)
            assert frames.dtype == torch.uint8 and frames.shape == theirs.shape
            assert torch.equal(frames, theirs), f"{name} {indices}: frames differ from transformers' decode"
    assert video.total == total  # the encoder kept every frame


PARITY = [
    ("qwen2-vl", "astronaut-9f.mp4", {"do_sample_frames": False}),
    ("qwen2-vl", "chelsea-40f.mp4", {"do_sample_frames": True, "fps": 2.0}),
    ("qwen2-vl", "chelsea-40f.mp4", {"do_sample_frames": True, "num_frames": 6}),
    ("qwen2.5-vl", "coffee-6f.mp4", {"do_sample_frames": False}),
    ("qwen2.5-vl", "astronaut-7f.webm", {"do_sample_frames": False}),
    ("qwen3-vl", "chelsea-40f.mp4", {}),  # Qwen3-VL samples by default (fps 2)
    ("qwen3-vl", "astronaut-9f.mp4", {"do_sample_frames": False}),
    ("qwen3-vl", "astronaut-7f.webm", {"num_frames": 5, "fps": None}),
    ("qwen2-vl-defaults", "coffee-6f.mp4", {"do_sample_frames": False}),
    ("qwen3-vl-defaults", "chelsea-40f.mp4", {}),
]


@pytest.mark.parametrize("config_name, name, kwargs", PARITY, ids=[f"{c}-{n}-{k}" for c, n, k in PARITY])
def test_encoded_video_equals_transformers_from_its_path(files, config_name, name, kwargs):
    """pixel_values_videos within 1e-6 of transformers' processor given the file's path, grids equal, from our
    processor given the path and given the bytes; uint8 rows equal transformers' with rescale and normalize
    off."""
    config = CONFIGS[config_name]
    path, data = files[name]
    want = expected(config, path, **kwargs)
    ours = FusedVideoProcessor.from_preprocessor_config(config, device="cpu")
    for source in (path, data):
        got = ours(source, cap_pixels_per_frame=False, **kwargs)
        assert torch.equal(got["video_grid_thw"], want["video_grid_thw"])
        diff = (got["pixel_values_videos"] - want["pixel_values_videos"]).abs().max().item()
        assert diff <= FP32_ATOL, f"{config_name} {name} {kwargs}: max |diff| {diff}"
    want_u8 = expected(config, path, do_rescale=False, do_normalize=False, **kwargs)
    got_u8 = ours(data, torch.uint8, cap_pixels_per_frame=False, **kwargs)["pixel_values_videos"]
    assert torch.equal(got_u8, want_u8["pixel_values_videos"].round().to(torch.uint8))


def test_encoded_and_decoded_videos_in_one_call(files):
    """A path, a decoded array and bytes in one call: each clip's rows equal transformers' for that clip alone
    (transformers takes one form per call), in order, one output."""
    config = CONFIGS["qwen2-vl"]
    (path, _), (_, webm) = files["coffee-6f.mp4"], files["astronaut-7f.webm"]
    array = clip(5)
    webm_path = files["astronaut-7f.webm"][0]
    got = FusedVideoProcessor.from_preprocessor_config(config, device="cpu")([path, array, webm])
    parts = [expected(config, v) for v in (path, array, webm_path)]
    assert torch.equal(got["video_grid_thw"], torch.cat([p["video_grid_thw"] for p in parts]))
    want = torch.cat([p["pixel_values_videos"] for p in parts])
    assert (got["pixel_values_videos"] - want).abs().max().item() <= FP32_ATOL


BAD = [
    (
        "garbage-bytes",
        lambda f: [f["astronaut-9f.mp4"][1], b"not a video, just bytes"],
        ValueError,
        r"videos\[1\] could not be decoded as a video",
    ),
    (
        "truncated",
        lambda f: [f["astronaut-9f.mp4"][0], f["coffee-6f.mp4"][1][:200]],
        ValueError,
        r"videos\[1\] (could not be decoded as a video|has no video frame|: decoding frames)",
    ),
    ("empty-bytes", lambda f: b"", ValueError, r"videos is empty bytes"),
    ("url", lambda f: "https://example.com/clip.mp4", ValueError, r"videos is a URL"),
    (
        "missing-file",
        lambda f: [f["astronaut-9f.mp4"][0], "/no/such/clip.webm"],
        FileNotFoundError,
        r"videos\[1\]: no video file at '/no/such/clip.webm'",
    ),
]


@pytest.mark.parametrize("case, make, error, match", BAD, ids=[b[0] for b in BAD])
def test_bad_encoded_input_is_named_before_any_kernel(files, case, make, error, match):
    processor = FusedVideoProcessor.from_preprocessor_config(CONFIGS["qwen2-vl"], device="cpu")
    with RecordOps() as recorded, pytest.raises(error, match=r"^FusedVideoProcessor: " + match):
        processor(make(files))
    ran = [str(op) for op in recorded.ops()]
    assert not any(name.startswith("fused_input_norm") for name in ran), ran


def test_without_torchcodec_the_error_says_what_to_install(files, monkeypatch):
    monkeypatch.setitem(sys.modules, "torchcodec.decoders", None)  # import fails as where it is not installed
    processor = FusedVideoProcessor.from_preprocessor_config(CONFIGS["qwen2-vl"], device="cpu")
    with pytest.raises(ImportError, match=r"videos is an encoded video, and decoding it needs torchcodec"):
        processor(files["astronaut-9f.mp4"][0])
    # Decoded videos do not need it.
    assert processor(clip(4))["video_grid_thw"].tolist() == [[2, 14, 22]]


def test_nvdec_is_asked_for_on_a_cuda_processor():
    with pytest.raises(ValueError, match=r"decoder='nvdec' decodes on a CUDA device; the processor's device is cpu"):
        FusedVideoProcessor.from_preprocessor_config(CONFIGS["qwen2-vl"], device="cpu", decoder="nvdec")
    with pytest.raises(ValueError, match=r"decoder must be one of 'exact', 'nvdec', got 'ffmpeg'"):
        FusedVideoProcessor.from_preprocessor_config(CONFIGS["qwen2-vl"], device="cpu", decoder="ffmpeg")


@requires_cuda
@pytest.mark.parametrize("decoder", ["exact", "nvdec"])
def test_encoded_video_on_cuda(files, decoder):
    """On CUDA: "exact" decodes on the CPU (transformers' frames, so its values within 1e-6); "nvdec" decodes
    on the device, whose colour conversion is NVDEC's own: same grid, rows within a few levels."""
    config = CONFIGS["qwen2-vl"]
    path, data = files["astronaut-9f.mp4"]
    processor = FusedVideoProcessor.from_preprocessor_config(config, device="cuda", decoder=decoder)
    got = processor(data, do_sample_frames=False)
    want = expected(config, path, do_sample_frames=False)
    assert got["pixel_values_videos"].device.type == "cuda"
    assert torch.equal(got["video_grid_thw"], want["video_grid_thw"])
    diff = (got["pixel_values_videos"].cpu() - want["pixel_values_videos"]).abs()
    if decoder == "exact":
        assert diff.max().item() <= FP32_ATOL
    else:  # normalized by std ~0.27: 4 levels of 255 is ~0.06; the mean far below
        assert diff.mean().item() <= 0.02, f"NVDEC frames far from FFmpeg's: mean |diff| {diff.mean().item()}"
