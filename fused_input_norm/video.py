"""FusedVideoProcessor: transformers' Qwen2-VL / Qwen2.5-VL / Qwen3-VL video processors, from a model's config.

What `Qwen2VLVideoProcessor` and `Qwen3VLVideoProcessor` do (their torchvision backend, the only one they
have): optional frame sampling (fps or num_frames, with the clip's metadata), the per-clip size
(`smart_resize`; Qwen3-VL's bounds the whole clip's pixels), the bicubic antialiased resize of the uint8
frames, rescale + normalize, the last frame repeated to a multiple of temporal_patch_size, and the patch-row
layout `pixel_values_videos [N, C * T * P * P]` with `video_grid_thw`. Here each clip is resized, paired
and patchified by the fused resize op in clip mode (each frame resampled once, bit for bit torchvision's
uint8 kernel, straight into its slot of the patch rows), into one output allocated per call. Every clip is
read, sampled, checked and sized before the first kernel runs.
"""

import dataclasses
import math
import os
from collections.abc import Mapping
from typing import Any

import torch

from . import config as configs
from .checks import check_visual_dtype
from .geometry import smart_resize, smart_resize_clip
from .images import from_numpy, is_pil
from .module import FusedInputNorm
from .resize import PlanCache, check_reference, resize_into

_WHERE = "FusedVideoProcessor"
VideoSettings = configs.VideoSettings

# What a call may override: transformers' VideosKwargs that change the result, and the Qwen classes' own.
_COMMON_KEYS = {
    "do_convert_rgb",
    "do_resize",
    "size",
    "resample",
    "do_rescale",
    "rescale_factor",
    "do_normalize",
    "image_mean",
    "image_std",
    "do_sample_frames",
    "fps",
    "num_frames",
    "patch_size",
    "temporal_patch_size",
    "merge_size",
    "min_frames",
    "max_frames",
    "cap_pixels_per_frame",
    "max_video_tokens",
}
CALL_KEYS = {"qwen2_vl": _COMMON_KEYS | {"min_pixels", "max_pixels"}, "qwen3_vl": _COMMON_KEYS}
# Keys whose explicit None in a call means None (transformers keeps a passed None; a config's null is the default).
_NONE_KEYS = ("fps", "num_frames", "cap_pixels_per_frame")


def video_name(i: int, count: int) -> str:
    """How an error names the i-th of `count` videos: as the user's argument."""
    return f"videos[{i}]" if count > 1 else "videos"


@dataclasses.dataclass(frozen=True)
class _Clip:
    """One clip of a call, read and sampled: its frames, its resized size and where it goes."""

    frames: torch.Tensor  # uint8 [F, C, H, W], the whole clip as given (a view where possible), C 1 or 3
    indices: list[int]  # the frames taken, in order (sampled, or all of them)
    size: tuple[int, int]
    grid: tuple[int, int, int]


class FusedVideoProcessor:
    """A Qwen2-VL / Qwen2.5-VL / Qwen3-VL video processor on the device.

    Build it with `from_preprocessor_config`; call it on videos to get what transformers' video processor
    returns.
    """

    def __init__(
        self, config: Mapping, settings: VideoSettings, norm: FusedInputNorm, device: torch.device, reference: str
    ):
        self.config = dict(config)
        self.settings = settings
        self.norm = norm
        self.device = device
        self.reference = reference
        self._plans = PlanCache()
        self._bytes = FusedInputNorm.identity(norm.channel)  # uint8 output: weight 1, bias 0

    @classmethod
    def from_preprocessor_config(
        cls,
        config: Mapping | str | os.PathLike,
        *,
        device: torch.device | str | None = None,
        reference: str = "torchvision",
    ) -> "FusedVideoProcessor":
        """Reads a model's video processor config: a model directory (processor_config.json's nested
        "video_processor", else video_preprocessor_config.json, else preprocessor_config.json, as
        transformers' AutoVideoProcessor reads them), a JSON file or a dict. `video_processor_type`
        Qwen2VLVideoProcessor or Qwen3VLVideoProcessor (or their Fast spellings; else `processor_class`);
        missing keys take the class's defaults.

        `device`: where the videos are processed (default: CUDA if available, else the CPU).
        `reference`: whose resize to reproduce bit for bit: "torchvision" (the default: transformers' video
        processors resize with torchvision's uint8 kernel) or a Pillow one ("pil", "pil-13", ...).
        """
        check_reference(_WHERE, reference)
        raw = configs.read_video(config, _WHERE)
        settings = configs.resolve_video(raw, _WHERE)
        device = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
        return cls(raw, settings, _norm(settings, device), device, reference)

    def __repr__(self) -> str:
        return (
            f"FusedVideoProcessor({self.settings.kind}, device={str(self.device)!r}, reference={self.reference!r}, "
            f"{self.settings}, {self.norm.extra_repr()})"
        )

    def __call__(
        self,
        videos: Any,
        visual_dtype: torch.dtype = torch.float32,
        *,
        video_metadata: Any = None,
        **overrides: Any,
    ) -> dict[str, torch.Tensor]:
        """Processes one video or a list of them.

        A video is a uint8 array or tensor [T, H, W, C] or [T, C, H, W] (inferred as transformers infers it:
        C 1 or 3), or a list of frames (PIL images in RGB or L, or uint8 [H, W, C] arrays / tensors); a 5-D
        array is a batch of videos, and a list of videos may mix sizes. Gray is repeated to RGB
        (do_convert_rgb). `video_metadata`: one mapping per video (transformers' VideoMetadata or a dict with
        total_num_frames and fps), for do_sample_frames. `overrides`: any key the transformers class takes
        per call (size, fps, num_frames, do_sample_frames, do_normalize, ...).

        Returns {"pixel_values_videos": [N, C * T * P * P] in `visual_dtype` on the processor's device,
        "video_grid_thw": int64 [n, 3] on the CPU}. `visual_dtype=torch.uint8`: the resized bytes in that
        layout, without rescale and normalize (what transformers returns with do_rescale and do_normalize off).
        """
        if visual_dtype != torch.uint8:
            check_visual_dtype(_WHERE, visual_dtype)
        settings, norm = self.settings, self.norm
        if overrides:
            settings = self._with_overrides(overrides)
            if settings.normalization != self.settings.normalization:
                norm = _norm(settings, self.device)
        clips = self._read(videos, video_metadata, settings)
        if visual_dtype == torch.uint8:
            norm = self._bytes
        weight, bias = norm.affine_constants(self.device, _WHERE)
        temporal, patch, merge = settings.temporal_patch_size, settings.patch_size, settings.merge_size
        rows = [t * h * w for t, h, w in (clip.grid for clip in clips)]
        out = torch.empty(sum(rows), norm.channel * temporal * patch**2, dtype=visual_dtype, device=self.device)
        patches = (temporal, patch, merge)
        for clip, clip_out in zip(clips, out.split(rows), strict=True):
            frames = clip.frames.to(self.device, non_blocking=clip.frames.device.type == "cpu")
            if frames.shape[1] == 1:  # do_convert_rgb: gray repeated (a stride-0 view)
                frames = frames.expand(-1, 3, -1, -1)
            group_rows = clip.grid[1] * clip.grid[2]
            done = 0
            for piece, groups, as_clip in temporal_pieces(frames, clip.indices, temporal):
                # Each piece: whole temporal groups of frames (each resampled once, into its slot), or the
                # last frame alone, repeated T times (the op's still-image layout).
                resize_into(
                    clip_out[done * group_rows : (done + groups) * group_rows],
                    piece,
                    weight,
                    bias,
                    clip.size,
                    (0, 0, *clip.size),
                    settings.resample,
                    self.reference,
                    self._plans,
                    patches,
                    clip=as_clip,
                )
                done += groups
        grid = torch.tensor([clip.grid for clip in clips], dtype=torch.int64, device="cpu")
        return {"pixel_values_videos": out, "video_grid_thw": grid}

    # ---- the call's settings ----

    def _with_overrides(self, overrides: dict) -> VideoSettings:
        """The config with a call's keys on top, as transformers merges them: a call's size replaces the
        config's (its min_pixels / max_pixels already folded in), a call's min_pixels / max_pixels then
        fold into that; an explicit None for fps, num_frames or cap_pixels_per_frame means None."""
        kind = self.settings.kind
        unknown = sorted(set(overrides) - CALL_KEYS[kind])
        if unknown:
            raise TypeError(
                f"{_WHERE}: unexpected keyword argument(s) {', '.join(unknown)}; a call takes "
                f"{', '.join(sorted(CALL_KEYS[kind]))}"
            )
        merged = dict(self.config)
        if {"size", "min_pixels", "max_pixels"} & set(overrides):
            merged.pop("min_pixels", None)
            merged.pop("max_pixels", None)
            merged["size"] = overrides.get("size") or dict(self.settings.size)
        merged.update({k: v for k, v in overrides.items() if k != "size" and v is not None})
        settings = configs.resolve_video(merged, _WHERE)
        nones = {k: None if k != "cap_pixels_per_frame" else False for k in _NONE_KEYS if k in overrides}
        nones = {k: v for k, v in nones.items() if overrides[k] is None}
        return dataclasses.replace(settings, **nones) if nones else settings

    # ---- the call's clips: read, sampled and sized before any kernel ----

    def _read(self, videos: Any, metadata: Any, settings: VideoSettings) -> list[_Clip]:
        items = as_video_list(videos)
        count = len(items)
        metas = _metadata_list(metadata, count)
        clips = []
        for i, item in enumerate(items):
            name = video_name(i, count)
            frames = clip_frames(item, name, settings.do_convert_rgb, self.norm.channel)
            if settings.do_sample_frames:
                total, fps = _total_and_fps(metas[i], frames.shape[0], name)
                indices = self._sample(total, fps, settings, name)
                _check_indices(indices, frames.shape[0], name)
            else:
                indices = list(range(frames.shape[0]))
            size = self._size(len(indices), *frames.shape[-2:], settings, name)
            temporal = settings.temporal_patch_size
            grid = (-(-len(indices) // temporal), size[0] // settings.patch_size, size[1] // settings.patch_size)
            clips.append(_Clip(frames, indices, size, grid))
        return clips

    def _sample(self, total: int, video_fps: float | None, s: VideoSettings, name: str) -> list[int]:
        """The frame indices transformers' sample_frames picks (Qwen2VLVideoProcessor's or Qwen3VL's)."""
        if s.fps is not None and s.num_frames is not None:
            raise ValueError(
                f"{_WHERE}: {name}: `num_frames` and `fps` are mutually exclusive arguments, please use only one "
                f"(a call's fps=None clears the config's fps {self.settings.fps})"
            )
        num_frames = s.num_frames if s.num_frames is not None else self.settings.num_frames
        fps = s.fps if s.fps is not None else self.settings.fps
        if s.kind == "qwen3_vl":
            # Qwen3VLVideoProcessor.sample_frames: min_frames / max_frames are the config's (self.*), the
            # video's fps 24 where its metadata has none; np.linspace over the whole clip, rounded.
            if num_frames is None and fps is not None:
                video_fps = 24 if video_fps is None else video_fps
                num_frames = int(total / video_fps * fps)
                num_frames = min(max(num_frames, self.settings.min_frames), self.settings.max_frames, total)
            if num_frames is None:
                num_frames = min(max(total, self.settings.min_frames), self.settings.max_frames)
            import numpy as np

            return np.linspace(0, total - 1, num_frames).round().astype(int).tolist()
        temporal = s.temporal_patch_size
        if num_frames is not None:
            num_frames = round(num_frames / temporal) * temporal
        elif fps is not None:
            if video_fps is None:
                raise ValueError(
                    f"{_WHERE}: {name}: sampling {fps} frames per second needs the video's fps: pass video_metadata "
                    f"(total_num_frames and fps per video) or num_frames"
                )
            max_frames = math.floor(min(s.max_frames, total) / temporal) * temporal
            num_frames = total / video_fps * fps
            num_frames = min(max(num_frames, s.min_frames), max_frames, total)
            num_frames = math.floor(num_frames / temporal) * temporal
        else:
            raise ValueError(
                f"{_WHERE}: {name}: do_sample_frames needs fps (with video_metadata) or num_frames; the config "
                f"gives neither"
            )
        if num_frames > total:
            raise ValueError(
                f"{_WHERE}: {name} can't be sampled: the inferred num_frames={num_frames} exceeds "
                f"total_num_frames={total}; decrease num_frames or fps"
            )
        if num_frames < 1:
            raise ValueError(
                f"{_WHERE}: {name} samples no frame (total_num_frames={total}, temporal_patch_size={temporal})"
            )
        return torch.arange(0, total, total / num_frames).int().tolist()

    def _size(self, frames: int, height: int, width: int, s: VideoSettings, name: str) -> tuple[int, int]:
        """The clip's resized size, as the class's resize computes it."""
        factor = s.patch_size * s.merge_size
        if not s.do_resize:
            if height % factor or width % factor:
                raise ValueError(
                    f"{_WHERE}: {name} is {height}x{width}; without do_resize, H and W must be multiples of "
                    f"patch_size * merge_size = {factor}"
                )
            return height, width
        low, high = s.size["shortest_edge"], s.size["longest_edge"]
        try:
            if s.kind == "qwen3_vl":
                if s.cap_pixels_per_frame:
                    frame_cap = s.max_video_tokens * factor * factor
                    high = max(min(frame_cap, high // frames), int(low * 1.05)) * frames
                return smart_resize_clip(frames, height, width, s.temporal_patch_size, factor, low, high)
            if s.cap_pixels_per_frame:
                total_pixels = int(s.max_video_tokens * factor * factor * 0.9)
                high = max(min(high, total_pixels * s.temporal_patch_size // frames), int(low * 1.05))
            return smart_resize(height, width, factor, low, high)
        except ValueError as error:  # the aspect ratio (over MAX_ASPECT_RATIO), or too few frames for Qwen3-VL
            raise ValueError(f"{_WHERE}: {name} of {frames} frames of {height}x{width}: {error}") from None


def _norm(settings: VideoSettings, device: torch.device) -> FusedInputNorm:
    n = settings.normalization
    return FusedInputNorm(n.image_mean, n.image_std, n.rescale_factor, n.channel).to(device)


# ---- intake: what a user hands a video processor, as uint8 [F, C, H, W] ----


def _is_array(item: Any) -> bool:
    return isinstance(item, torch.Tensor) or (type(item).__module__ == "numpy" and hasattr(item, "ndim"))


def _is_frame(item: Any) -> bool:
    return is_pil(item) or (_is_array(item) and item.ndim == 3)


def as_video_list(videos: Any) -> list:
    """A flat list of videos, as transformers' make_batched_videos makes one: a 5-D batch, a 4-D video, a list
    of frames (one video), a list of videos or of lists of frames (nested lists flattened), one frame."""
    if _is_array(videos):
        if videos.ndim == 5:
            return list(videos)
        if videos.ndim == 4:
            return [videos]
        if videos.ndim == 3:  # one frame
            return [videos[None]]
        raise ValueError(
            f"{_WHERE}: videos must be a video [T, H, W, C] / [T, C, H, W], a batch of them or a list; got an "
            f"array of shape {tuple(videos.shape)}"
        )
    if is_pil(videos):
        return [[videos]]
    if not isinstance(videos, list | tuple):
        raise TypeError(
            f"{_WHERE}: videos is a {type(videos).__name__}; expected a uint8 array or tensor [T, H, W, C], a list "
            f"of frames (PIL images or arrays), or a list of videos"
        )
    if not videos:
        raise ValueError(f"{_WHERE}: videos holds no video")
    if all(_is_frame(item) for item in videos):
        return [list(videos)]
    flat = []
    for item in videos:
        if isinstance(item, list | tuple) and item and not all(_is_frame(f) for f in item):
            flat.extend(as_video_list(item))
        else:
            flat.append(item)
    return flat


def clip_frames(item: Any, name: str, convert_rgb: bool, channel: int) -> torch.Tensor:
    """One video as uint8 [F, C, H, W] (a view of an array or tensor; PIL frames stacked), C 1 or 3 with
    do_convert_rgb (else `channel`); anything else refused, naming the video."""
    if isinstance(item, list | tuple):
        item = _stack_frames(item, name)
    elif not _is_array(item):
        raise TypeError(
            f"{_WHERE}: {name} is a {type(item).__name__}; expected a uint8 video [T, H, W, C] or a list of frames"
        )
    if type(item).__module__ == "numpy":
        import numpy as np

        if item.dtype != np.uint8:
            raise TypeError(f"{_WHERE}: {name} must be uint8 frames, got a NumPy array of {item.dtype}")
        item = from_numpy(np.ascontiguousarray(item) if item.strides and min(item.strides) < 0 else item)
    if item.dtype != torch.uint8:
        raise TypeError(f"{_WHERE}: {name} must be uint8 frames, got a tensor of {item.dtype}")
    if item.dim() != 4:
        raise ValueError(f"{_WHERE}: {name} must be [T, H, W, C] or [T, C, H, W], got shape {tuple(item.shape)}")
    # transformers' infer_channel_dimension_format for a video: C (1 or 3) first if it fits, else last.
    if item.shape[1] in (1, 3):
        frames = item
    elif item.shape[3] in (1, 3):
        frames = item.permute(0, 3, 1, 2)
    else:
        raise ValueError(
            f"{_WHERE}: {name} of shape {tuple(item.shape)} has no channel axis of 1 (gray) or 3 (RGB) channels, "
            f"second or last (transformers' video processors infer no other)"
        )
    count, channels, height, width = frames.shape
    if count < 1:
        raise ValueError(f"{_WHERE}: {name} is an empty clip (shape {tuple(item.shape)})")
    if height < 1 or width < 1:
        raise ValueError(f"{_WHERE}: {name} has empty frames (shape {tuple(item.shape)})")
    if not convert_rgb and channels != channel:
        raise ValueError(
            f"{_WHERE}: {name} has {channels} channels (shape {tuple(item.shape)}), expected {channel} "
            f"(do_convert_rgb is off)"
        )
    return frames


def _stack_frames(frames: list | tuple, name: str) -> torch.Tensor:
    """A list of frames (PIL images in RGB or L, or uint8 [H, W, C] / [C, H, W] arrays and tensors, all of one
    size) as one [F, H, W, C] or [F, C, H, W] tensor (a copy: the frames are separate buffers)."""
    if not frames:
        raise ValueError(f"{_WHERE}: {name} is an empty clip (a list of no frames)")
    arrays = []
    for j, frame in enumerate(frames):
        if is_pil(frame):
            if frame.mode not in ("RGB", "L"):
                raise ValueError(
                    f"{_WHERE}: {name} frame {j} is a PIL image in mode {frame.mode!r}; video frames must be RGB or L"
                )
            import numpy as np

            array = np.asarray(frame)
            frame = from_numpy(array if array.ndim == 3 else array[:, :, None])
        elif _is_array(frame) and frame.ndim == 3:
            if type(frame).__module__ == "numpy":
                import numpy as np

                if frame.dtype != np.uint8:
                    raise TypeError(f"{_WHERE}: {name} frame {j} must be uint8, got a NumPy array of {frame.dtype}")
                frame = from_numpy(frame)
        else:
            raise TypeError(
                f"{_WHERE}: {name} frame {j} is a {type(frame).__name__}"
                + (f" of shape {tuple(frame.shape)}" if _is_array(frame) else "")
                + "; expected a PIL image or a uint8 [H, W, C] array"
            )
        if frame.dtype != torch.uint8:
            raise TypeError(f"{_WHERE}: {name} frame {j} must be uint8, got a tensor of {frame.dtype}")
        if arrays and frame.shape != arrays[0].shape:
            raise ValueError(
                f"{_WHERE}: {name}: frame {j} has shape {tuple(frame.shape)}, frame 0 {tuple(arrays[0].shape)}; the "
                f"frames of a clip must have one size"
            )
        arrays.append(frame)
    return torch.stack(arrays)


def _metadata_list(metadata: Any, count: int) -> list[Mapping | None]:
    """One metadata mapping (or None) per video, as transformers' make_batched_metadata pairs them."""
    if metadata is None:
        return [None] * count
    if isinstance(metadata, Mapping):
        metadata = [metadata]
    elif isinstance(metadata, list | tuple):
        metadata = [m for item in metadata for m in (item if isinstance(item, list | tuple) else [item])]
    else:
        raise TypeError(
            f"{_WHERE}: video_metadata must be a mapping (VideoMetadata or dict) or a list of them, got "
            f"{type(metadata).__name__}"
        )
    if len(metadata) != count:
        raise ValueError(f"{_WHERE}: {count} videos but {len(metadata)} video_metadata entries; pass one per video")
    for i, m in enumerate(metadata):
        if not isinstance(m, Mapping):
            raise TypeError(f"{_WHERE}: video_metadata[{i}] must be a mapping, got {type(m).__name__}")
    return metadata


def _total_and_fps(metadata: Mapping | None, frames: int, name: str) -> tuple[int, float | None]:
    if metadata is None:
        return frames, None
    total, fps = metadata.get("total_num_frames"), metadata.get("fps")
    if not isinstance(total, int) or isinstance(total, bool) or total < 1:
        raise ValueError(f"{_WHERE}: {name}'s video_metadata needs total_num_frames >= 1, got {total!r}")
    if fps is not None and not fps > 0:
        raise ValueError(f"{_WHERE}: {name}'s video_metadata fps must be > 0 or None, got {fps!r}")
    return total, fps


def _check_indices(indices: list[int], count: int, name: str) -> None:
    if not indices or max(indices) >= count or min(indices) < 0:
        raise ValueError(
            f"{_WHERE}: {name} has {count} frames; sampling picked frames {indices[:3]}...{indices[-3:]} "
            f"(its video_metadata's total_num_frames does not describe it)"
        )


def temporal_pieces(frames: torch.Tensor, indices: list[int], temporal: int):
    """The frames `indices` of `frames` (padded with the last to whole groups of `temporal`, as transformers
    pads) as (view, groups, clip mode) pieces, in order, without copying a frame where strides allow: runs of
    whole groups whose indices step evenly are one strided view each (all frames, and fps sampling, are one
    run; np.linspace's uneven steps give a run per group, which for T = 2 is still a view); a last lone frame
    is the still-image layout (its T copies are one frame resampled once). Only a group of 3+ frames with
    uneven steps, or a padded group of several real frames (T > 2), is gathered (a copy of T frames)."""
    whole = len(indices) // temporal * temporal
    main, rest = indices[:whole], indices[whole:]
    pos = 0
    while pos < whole:
        step = main[pos + 1] - main[pos] if pos + 1 < whole else 1
        end = pos + 1
        while end < whole and main[end] - main[end - 1] == step:
            end += 1
        run = (end - pos) // temporal * temporal
        if run == 0 or step < 0:  # a group that is no progression: gathered
            yield frames[torch.tensor(main[pos : pos + temporal], device=frames.device)], 1, True
            pos += temporal
            continue
        first = main[pos]
        if step == 0:  # one frame repeated (sampling more frames than the clip has)
            view = frames[first : first + 1].expand(run, -1, -1, -1)
        else:
            view = frames[first : first + step * (run - 1) + 1 : step]
        yield view, run // temporal, True
        pos += run
    if len(rest) == 1:
        yield frames[rest[0] : rest[0] + 1], 1, False
    elif rest:
        padded = rest + [rest[-1]] * (temporal - len(rest))
        yield frames[torch.tensor(padded, device=frames.device)], 1, True
