"""Video intake: every form a user hands a video processor, as uint8 frames [F, C, H, W].

Decoded videos (uint8 arrays and tensors [T, H, W, C] or [T, C, H, W], lists of PIL frames or of arrays, 5-D
batches, lists of clips of different sizes) and encoded ones: a path, or the bytes, of an MP4, WebM, MKV, ...
file, which mean what transformers' video processors decode from a path: torchcodec's `VideoDecoder` in exact
seek mode on the CPU (FFmpeg's decode and its YUV -> RGB conversion), the frames picked by the caller's sampling
from the stream's own frame count and average fps. NVDEC (torchcodec on a CUDA device) is another decoder,
whose colour conversion is its own: it serves only when asked for (decoder="nvdec"), as nvJPEG does for images.
"""

import os
from collections.abc import Mapping
from typing import Any

import torch

from .images import from_numpy, is_pil

WHERE = "FusedVideoProcessor"
DECODERS = ("exact", "nvdec")


def video_name(i: int, count: int) -> str:
    """How an error names the i-th of `count` videos: as the user's argument."""
    return f"videos[{i}]" if count > 1 else "videos"


def is_encoded(item: Any) -> bool:
    """A path to a video file, or its bytes."""
    return isinstance(item, str | os.PathLike | bytes | bytearray | memoryview)


def is_array(item: Any) -> bool:
    return isinstance(item, torch.Tensor) or (type(item).__module__ == "numpy" and hasattr(item, "ndim"))


def is_frame(item: Any) -> bool:
    return is_pil(item) or (is_array(item) and item.ndim == 3)


def as_video_list(videos: Any) -> list:
    """A flat list of videos, as transformers' make_batched_videos makes one: a 5-D batch, a 4-D video, a list
    of frames (one video), a list of videos or of lists of frames (nested lists flattened), one frame."""
    if is_array(videos):
        if videos.ndim == 5:
            return list(videos)
        if videos.ndim == 4:
            return [videos]
        if videos.ndim == 3:  # one frame
            return [videos[None]]
        raise ValueError(
            f"{WHERE}: videos must be a video [T, H, W, C] / [T, C, H, W], a batch of them or a list; got an "
            f"array of shape {tuple(videos.shape)}"
        )
    if is_pil(videos):
        return [[videos]]
    if is_encoded(videos):
        return [videos]
    if not isinstance(videos, list | tuple):
        raise TypeError(
            f"{WHERE}: videos is a {type(videos).__name__}; expected a uint8 array or tensor [T, H, W, C], a list "
            f"of frames (PIL images or arrays), a path or the bytes of a video file, or a list of videos"
        )
    if not videos:
        raise ValueError(f"{WHERE}: videos holds no video")
    if all(is_frame(item) for item in videos):
        return [list(videos)]
    flat = []
    for item in videos:
        if isinstance(item, list | tuple) and item and not all(is_frame(f) for f in item):
            flat.extend(as_video_list(item))
        else:
            flat.append(item)
    return flat


def clip_frames(item: Any, name: str, convert_rgb: bool, channel: int) -> torch.Tensor:
    """One video as uint8 [F, C, H, W] (a view of an array or tensor; PIL frames stacked), C 1 or 3 with
    do_convert_rgb (else `channel`); anything else refused, naming the video."""
    if isinstance(item, list | tuple):
        item = _stack_frames(item, name)
    elif not is_array(item):
        raise TypeError(
            f"{WHERE}: {name} is a {type(item).__name__}; expected a uint8 video [T, H, W, C], a list of frames, or "
            f"a path or the bytes of a video file"
        )
    if type(item).__module__ == "numpy":
        import numpy as np

        if item.dtype != np.uint8:
            raise TypeError(f"{WHERE}: {name} must be uint8 frames, got a NumPy array of {item.dtype}")
        item = from_numpy(np.ascontiguousarray(item) if item.strides and min(item.strides) < 0 else item)
    if item.dtype != torch.uint8:
        raise TypeError(f"{WHERE}: {name} must be uint8 frames, got a tensor of {item.dtype}")
    if item.dim() != 4:
        raise ValueError(f"{WHERE}: {name} must be [T, H, W, C] or [T, C, H, W], got shape {tuple(item.shape)}")
    # transformers' infer_channel_dimension_format for a video: C (1 or 3) first if it fits, else last.
    if item.shape[1] in (1, 3):
        frames = item
    elif item.shape[3] in (1, 3):
        frames = item.permute(0, 3, 1, 2)
    else:
        raise ValueError(
            f"{WHERE}: {name} of shape {tuple(item.shape)} has no channel axis of 1 (gray) or 3 (RGB) channels, "
            f"second or last (transformers' video processors infer no other)"
        )
    count, channels, height, width = frames.shape
    if count < 1:
        raise ValueError(f"{WHERE}: {name} is an empty clip (shape {tuple(item.shape)})")
    if height < 1 or width < 1:
        raise ValueError(f"{WHERE}: {name} has empty frames (shape {tuple(item.shape)})")
    if not convert_rgb and channels != channel:
        raise ValueError(
            f"{WHERE}: {name} has {channels} channels (shape {tuple(item.shape)}), expected {channel} "
            f"(do_convert_rgb is off)"
        )
    return frames


def _stack_frames(frames: list | tuple, name: str) -> torch.Tensor:
    """A list of frames (PIL images in RGB or L, or uint8 [H, W, C] / [C, H, W] arrays and tensors, all of one
    size) as one [F, H, W, C] or [F, C, H, W] tensor (a copy: the frames are separate buffers)."""
    if not frames:
        raise ValueError(f"{WHERE}: {name} is an empty clip (a list of no frames)")
    arrays = []
    for j, frame in enumerate(frames):
        if is_pil(frame):
            if frame.mode not in ("RGB", "L"):
                raise ValueError(
                    f"{WHERE}: {name} frame {j} is a PIL image in mode {frame.mode!r}; video frames must be RGB or L"
                )
            import numpy as np

            array = np.asarray(frame)
            frame = from_numpy(array if array.ndim == 3 else array[:, :, None])
        elif is_array(frame) and frame.ndim == 3:
            if type(frame).__module__ == "numpy":
                import numpy as np

                if frame.dtype != np.uint8:
                    raise TypeError(f"{WHERE}: {name} frame {j} must be uint8, got a NumPy array of {frame.dtype}")
                frame = from_numpy(frame)
        else:
            raise TypeError(
                f"{WHERE}: {name} frame {j} is a {type(frame).__name__}"
                + (f" of shape {tuple(frame.shape)}" if is_array(frame) else "")
                + "; expected a PIL image or a uint8 [H, W, C] array"
            )
        if frame.dtype != torch.uint8:
            raise TypeError(f"{WHERE}: {name} frame {j} must be uint8, got a tensor of {frame.dtype}")
        if arrays and frame.shape != arrays[0].shape:
            raise ValueError(
                f"{WHERE}: {name}: frame {j} has shape {tuple(frame.shape)}, frame 0 {tuple(arrays[0].shape)}; the "
                f"frames of a clip must have one size"
            )
        arrays.append(frame)
    return torch.stack(arrays)


def metadata_list(metadata: Any, count: int) -> list[Mapping | None]:
    """One metadata mapping (or None) per video, as transformers' make_batched_metadata pairs them."""
    if metadata is None:
        return [None] * count
    if isinstance(metadata, Mapping):
        metadata = [metadata]
    elif isinstance(metadata, list | tuple):
        metadata = [m for item in metadata for m in (item if isinstance(item, list | tuple) else [item])]
    else:
        raise TypeError(
            f"{WHERE}: video_metadata must be a mapping (VideoMetadata or dict) or a list of them, got "
            f"{type(metadata).__name__}"
        )
    if len(metadata) != count:
        raise ValueError(f"{WHERE}: {count} videos but {len(metadata)} video_metadata entries; pass one per video")
    for i, m in enumerate(metadata):
        if not isinstance(m, Mapping):
            raise TypeError(f"{WHERE}: video_metadata[{i}] must be a mapping, got {type(m).__name__}")
    return metadata


def total_and_fps(metadata: Mapping | None, frames: int, name: str) -> tuple[int, float | None]:
    if metadata is None:
        return frames, None
    total, fps = metadata.get("total_num_frames"), metadata.get("fps")
    if not isinstance(total, int) or isinstance(total, bool) or total < 1:
        raise ValueError(f"{WHERE}: {name}'s video_metadata needs total_num_frames >= 1, got {total!r}")
    if fps is not None and not fps > 0:
        raise ValueError(f"{WHERE}: {name}'s video_metadata fps must be > 0 or None, got {fps!r}")
    return total, fps


class EncodedVideo:
    """A video file (path or bytes) opened as transformers' read_video_torchcodec opens it: torchcodec's
    VideoDecoder in exact seek mode (every frame indexed from the stream itself), FFmpeg's threads left to
    FFmpeg. `total` and `fps` are the stream's frame count and average fps, what sampling starts from."""

    def __init__(self, item: Any, name: str, device: torch.device):
        self.name = name
        source = bytes(item) if isinstance(item, bytearray | memoryview) else item
        if isinstance(source, bytes) and not source:
            raise ValueError(f"{WHERE}: {name} is empty bytes; expected an encoded video (MP4, WebM, ...)")
        if isinstance(source, str | os.PathLike):
            source = os.fspath(source)
            if source.startswith(("http://", "https://")):
                raise ValueError(f"{WHERE}: {name} is a URL; fetch it and pass the bytes (this package opens no URL)")
            if not os.path.isfile(source):
                raise FileNotFoundError(f"{WHERE}: {name}: no video file at {source!r}")
        decoder_class = _video_decoder_class(name)
        try:
            self._decoder = decoder_class(source, seek_mode="exact", num_ffmpeg_threads=0, device=str(device))
        except (RuntimeError, ValueError) as error:
            raise ValueError(f"{WHERE}: {name} could not be decoded as a video: {error}") from None
        metadata = self._decoder.metadata
        self.total, self.fps = metadata.num_frames, metadata.average_fps
        self.duration = metadata.duration_seconds  # what transformers' VideoMetadata.duration holds
        if not self.total:
            raise ValueError(f"{WHERE}: {name} has no video frame (its stream: {metadata.codec})")

    def frames(self, indices: list[int]) -> torch.Tensor:
        """The frames at `indices` (in that order, repeats allowed), uint8 [F, 3, H, W]."""
        try:
            return self._decoder.get_frames_at(indices=indices).data
        except (RuntimeError, IndexError, ValueError) as error:
            raise ValueError(f"{WHERE}: {self.name}: decoding frames {indices[:3]}... failed: {error}") from None


def _video_decoder_class(name: str):
    try:
        from torchcodec.decoders import VideoDecoder
    except (ImportError, OSError, RuntimeError) as error:
        raise ImportError(
            f"{WHERE}: {name} is an encoded video, and decoding it needs torchcodec (pip install torchcodec, the "
            f"release matched to your torch) and FFmpeg's libraries (apt-get install ffmpeg): {error}"
        ) from None
    return VideoDecoder
