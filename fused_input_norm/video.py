"""FusedVideoProcessor: transformers' Qwen2-VL / Qwen2.5-VL / Qwen3-VL, GLM-4.1V / GLM-4.5V and SmolVLM2 video
processors, from a model's config.

What `Qwen2VLVideoProcessor`, `Qwen3VLVideoProcessor` and `Glm4vVideoProcessor` do (their torchvision
backend, the only one they have): optional frame sampling (fps or num_frames, with the clip's metadata;
GLM-4V's by fps alone, over at most max_duration seconds, to an even count), the per-clip size
(`smart_resize`; Qwen3-VL's and GLM-4V's bound the whole clip's pixels), the bicubic antialiased resize of the uint8
frames, rescale + normalize, the last frame repeated to a multiple of temporal_patch_size, and the patch-row
layout `pixel_values_videos [N, C * T * P * P]` with `video_grid_thw`. Here each clip is resized, paired
and patchified by the fused resize op in clip mode (each frame resampled once, bit for bit torchvision's
uint8 kernel, straight into its slot of the patch rows), into one output allocated per call. Every clip is
read, sampled, checked and sized before the first kernel runs.

`SmolVLMVideoProcessor` (SmolVLM2) resizes each frame as Idefics3's image processor resizes an image without
splitting (LANCZOS to size's longest edge, then again, from those uint8 bytes, to the square max_image_size),
rescales, normalizes and pads the videos to the most frames: here each video's sampled frames are one sample
of images, planned by the Idefics3 family and run by FusedImageProcessor's core (one resize path for both).
Gemma 4's video processors (and Gemma 4 Unified's) do to each frame what their image processors do to an
image: every frame of a call is one image of a batch planned by the gemma4 (gemma4_unified) family.
"""

import dataclasses
import math
import os
from collections.abc import Mapping
from typing import Any

import torch

from . import config as configs
from . import output_pool
from .checks import check_output_size, check_strided, check_visual_dtype
from .families.base import COMMON_KEYS
from .geometry import smart_resize, smart_resize_clip
from .module import FusedInputNorm
from .processor import FusedImageProcessor
from .resize import PlanCache, check_reference, resize_into
from .videos import (
    DECODERS,
    WHERE,
    EncodedVideo,
    as_video_list,
    clip_frames,
    is_encoded,
    metadata_list,
    total_and_fps,
    video_name,
)

_WHERE = WHERE
VideoSettings = configs.VideoSettings

# What a call may override: transformers' VideosKwargs that change the result, and the Qwen classes' own.
_COMMON_KEYS = {
    *COMMON_KEYS,
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
# GLM-4V's call takes max_duration and max_image_size too, and changes nothing with them: its sampling reads
# the instance's max_duration, and no step reads max_image_size. Nor does any read min_frames, max_frames,
# cap_pixels_per_frame or max_video_tokens: it does not take them.
_GLM_IGNORED = {"max_duration", "max_image_size"}
# SmolVLM's call takes max_image_size and changes nothing with it: its resize reads the instance's.
_SMOLVLM_IGNORED = {"max_image_size"}
# LLaVA-OV's and InternVL's calls take do_pad (their processors pass the image's on) and change nothing with it:
# BaseVideoProcessor's _preprocess reads none.
_FRAMEWISE_IGNORED = {"do_pad"}
CALL_KEYS = {
    "qwen2_vl": _COMMON_KEYS | {"min_pixels", "max_pixels"},
    "qwen3_vl": _COMMON_KEYS,
    "glm4v": _COMMON_KEYS - {"min_frames", "max_frames", "cap_pixels_per_frame", "max_video_tokens"} | _GLM_IGNORED,
    "smolvlm": {*COMMON_KEYS, "do_sample_frames", "fps", "num_frames", "do_pad"} | _SMOLVLM_IGNORED,
    "llava_onevision": {*COMMON_KEYS, "do_sample_frames", "fps", "num_frames", "do_center_crop", "crop_size"}
    | _FRAMEWISE_IGNORED,
    "internvl": {*COMMON_KEYS, "do_sample_frames", "fps", "num_frames", "do_center_crop", "crop_size"}
    | _FRAMEWISE_IGNORED,
    "llava_next_video": {*COMMON_KEYS, "do_sample_frames", "fps", "num_frames", "do_center_crop", "crop_size"}
    | _FRAMEWISE_IGNORED,
    "gemma4": {
        *COMMON_KEYS,
        "do_sample_frames",
        "fps",
        "num_frames",
        "patch_size",
        "max_soft_tokens",
        "pooling_kernel_size",
    },
}
CALL_KEYS["gemma4_unified"] = CALL_KEYS["gemma4"]
# Keys whose explicit None in a call means None (transformers keeps a passed None; a config's null is the default).
_NONE_KEYS = ("fps", "num_frames", "cap_pixels_per_frame")


@dataclasses.dataclass(frozen=True)
class _Clip:
    """One clip of a call, read and sampled: its frames, its resized size and where it goes."""

    frames: torch.Tensor  # uint8 [F, C, H, W], the whole clip as given (a view where possible), C 1 or 3
    indices: list[int]  # the frames taken, in order (sampled, or all of them)
    size: tuple[int, int] | None  # None for SmolVLM (its frames are planned as Idefics3 images)
    grid: tuple[int, int, int] | None


class FusedVideoProcessor:
    """A Qwen2-VL / Qwen2.5-VL / Qwen3-VL, GLM-4.1V / GLM-4.5V or SmolVLM2 video processor on the device.

    Build it with `from_preprocessor_config`; call it on videos to get what transformers' video processor
    returns.
    """

    def __init__(
        self,
        config: Mapping,
        settings: VideoSettings,
        norm: FusedInputNorm,
        device: torch.device,
        reference: str,
        decoder: str = "exact",
    ):
        self.config = dict(config)
        self.settings = settings
        self.norm = norm
        self.device = device
        self.reference = reference
        self.decoder = decoder
        # Where encoded videos are decoded: FFmpeg on the CPU (transformers' frames), or NVDEC when asked for.
        self._decode_device = device if decoder == "nvdec" else torch.device("cpu")
        self._plans = PlanCache()
        self._bytes = FusedInputNorm.identity(norm.channel)  # uint8 output: weight 1, bias 0
        self._frames: FusedImageProcessor | None = None  # SmolVLM: its frames' processor (the last settings)

    @classmethod
    def from_preprocessor_config(
        cls,
        config: Mapping | str | os.PathLike,
        *,
        device: torch.device | str | None = None,
        reference: str = "torchvision",
        decoder: str = "exact",
    ) -> "FusedVideoProcessor":
        """Reads a model's video processor config: a model directory (processor_config.json's nested
        "video_processor", else video_preprocessor_config.json, else preprocessor_config.json, as
        transformers' AutoVideoProcessor reads them), a JSON file or a dict. `video_processor_type`
        Qwen2VLVideoProcessor, Qwen3VLVideoProcessor, Glm4vVideoProcessor or SmolVLMVideoProcessor (or their
        Fast spellings; else `processor_class`); missing keys take the class's defaults (SmolVLM's older
        "video_sampling" read as its class reads it).

        `device`: where the videos are processed (default: CUDA if available, else the CPU).
        `reference`: whose resize to reproduce bit for bit: "torchvision" (the default: transformers' video
        processors resize with torchvision's uint8 kernel) or a Pillow one ("pil", "pil-13", ...).
        `decoder`: how encoded videos (paths, bytes) are decoded: "exact" (the default: torchcodec's FFmpeg decode
        on the CPU, the frames transformers decodes) or "nvdec" (torchcodec on the processor's CUDA device:
        only the encoded bytes cross PCIe, but NVDEC's colour conversion is its own, so its frames may differ).
        """
        check_reference(_WHERE, reference)
        if decoder not in DECODERS:
            raise ValueError(f"{_WHERE}: decoder must be one of {', '.join(map(repr, DECODERS))}, got {decoder!r}")
        raw = configs.settle_video(configs.read_video(config, _WHERE), _WHERE)
        settings = configs.resolve_video(raw, _WHERE)
        device = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
        if decoder == "nvdec" and device.type != "cuda":
            raise ValueError(f"{_WHERE}: decoder='nvdec' decodes on a CUDA device; the processor's device is {device}")
        return cls(raw, settings, _norm(settings, device), device, reference, decoder)

    def __repr__(self) -> str:
        return (
            f"FusedVideoProcessor({self.settings.kind}, device={str(self.device)!r}, reference={self.reference!r}, "
            f"decoder={self.decoder!r}, "
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
        C 1 or 3), a list of frames (PIL images in RGB or L, or uint8 [H, W, C] arrays / tensors), or a path or
        the bytes of a video file (MP4, WebM, ...: decoded as transformers decodes a path, only the frames sampling
        picks); a 5-D array is a batch of videos, and a list of videos may mix sizes and forms. Gray is repeated to
        RGB (do_convert_rgb). `video_metadata`: one mapping per decoded video (transformers' VideoMetadata or a
        dict with total_num_frames and fps), for do_sample_frames; an encoded video's come from its stream, as
        in transformers. `overrides`: any key the transformers class takes
        per call (size, fps, num_frames, do_sample_frames, do_normalize, ...).

        Returns {"pixel_values_videos": [N, C * T * P * P] in `visual_dtype` on the processor's device,
        "video_grid_thw": int64 [n, 3] on the CPU}. `visual_dtype=torch.uint8`: the resized bytes in that
        layout, without rescale and normalize (what transformers returns with do_rescale and do_normalize off).
        SmolVLM2: {"pixel_values": [videos, most frames, C, tile, tile] in `visual_dtype` on the processor's
        device (the frames past a video's own zero), "pixel_attention_mask": int64 [videos, most frames, tile,
        tile] on the CPU, all ones (transformers' mask marks padded pixels, and its padded frames have none)}.
        """
        if visual_dtype != torch.uint8:
            check_visual_dtype(_WHERE, visual_dtype)
        settings, norm = self.settings, self.norm
        if overrides:
            settings = self._with_overrides(overrides)
            if settings.normalization != self.settings.normalization:
                norm = _norm(settings, self.device)
        clips = self._read(videos, video_metadata, settings)
        if settings.frames is not None:
            return self._run_frames(clips, settings, visual_dtype)
        if visual_dtype == torch.uint8:
            norm = self._bytes
        weight, bias = norm.affine_constants(self.device, _WHERE)
        temporal, patch, merge = settings.temporal_patch_size, settings.patch_size, settings.merge_size
        rows = [t * h * w for t, h, w in (clip.grid for clip in clips)]
        shape = (sum(rows), norm.channel * temporal * patch**2)
        check_output_size(_WHERE, "pixel_values_videos", shape, visual_dtype)
        out = output_pool.empty(shape, visual_dtype, self.device)
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

    def _run_frames(self, clips: list[_Clip], settings: VideoSettings, visual_dtype: torch.dtype) -> dict:
        """SmolVLM: each clip's frames as one sample of Idefics3 images, through FusedImageProcessor's core.
        LLaVA-OneVision and InternVL: each clip's frames as CLIP images, one call per clip."""
        if self._frames is None or self._frames.settings != settings.frames:
            self._frames = FusedImageProcessor(
                settings.frames, _norm(settings, self.device), self.device, self.reference
            )
        if settings.kind in configs.BUDGET_VIDEO_KINDS:
            # Gemma 4: every frame of every clip one image of the batch; transformers concatenates the clips'
            # frames, so the batch's rows are its pixel_values_videos and video_position_ids as they are.
            out = self._frames([clip.frames[i] for clip in clips for i in clip.indices], visual_dtype)
            counts = [len(clip.indices) for clip in clips]
            firsts = torch.tensor([0, *counts[:-1]]).cumsum(0)  # each clip's first frame: its soft tokens
            return {
                "pixel_values_videos": out["pixel_values"],
                "video_position_ids": out["image_position_ids"],
                "num_frames_per_video": torch.tensor(counts, dtype=torch.int64),
                "num_soft_tokens_per_video": out["num_soft_tokens_per_image"][firsts],
            }
        if settings.kind in configs.FRAMEWISE_VIDEO_KINDS:
            # (their sampling is refused: every clip's frames are all its frames, a [T, C, H, W] batch of images)
            videos = [self._frames(clip.frames, visual_dtype)["pixel_values"] for clip in clips]
            same = len({video.shape for video in videos}) == 1
            return {"pixel_values_videos": torch.stack(videos) if same else videos}
        out = self._frames([[clip.frames[i] for i in clip.indices] for clip in clips], visual_dtype)
        # The image processor's mask zeroes padded slots; transformers' video mask marks padded pixels only, and
        # its padded frames (whole frames of zeros) are all tile-sized, so its mask is all ones.
        mask = torch.ones_like(out["pixel_attention_mask"])
        return {"pixel_values": out["pixel_values"], "pixel_attention_mask": mask}

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
        ignored = {
            "glm4v": _GLM_IGNORED,
            "smolvlm": _SMOLVLM_IGNORED,
            **dict.fromkeys(configs.FRAMEWISE_VIDEO_KINDS, _FRAMEWISE_IGNORED),
        }.get(kind, set())
        merged.update({k: v for k, v in overrides.items() if k != "size" and k not in ignored and v is not None})
        settings = configs.resolve_video(merged, _WHERE)
        nones = {k: None if k != "cap_pixels_per_frame" else False for k in _NONE_KEYS if k in overrides}
        nones = {k: v for k, v in nones.items() if overrides[k] is None}
        return dataclasses.replace(settings, **nones) if nones else settings

    # ---- the call's clips: read, sampled and sized before any kernel ----

    def _read(self, videos: Any, metadata: Any, settings: VideoSettings) -> list[_Clip]:
        if isinstance(videos, torch.Tensor):  # a batch: checked before it is split into videos
            check_strided(_WHERE, "videos", videos)
        items = as_video_list(videos)
        count = len(items)
        metas = metadata_list(metadata, count)
        clips = []
        for i, item in enumerate(items):
            name = video_name(i, count)
            if is_encoded(item):
                clips.append(self._read_encoded(item, name, settings))
                continue
            for frame in item if isinstance(item, list | tuple) else [item]:
                if isinstance(frame, torch.Tensor):
                    check_strided(_WHERE, name, frame)
            frames = clip_frames(item, name, settings.do_convert_rgb, self.norm.channel)
            if settings.do_sample_frames:
                total, fps = total_and_fps(metas[i], frames.shape[0], name)
                duration = metas[i].get("duration") if metas[i] is not None else None
                indices = self._sample(total, fps, settings, name, duration)
                _check_indices(indices, frames.shape[0], name)
            else:
                indices = list(range(frames.shape[0]))
            clips.append(self._clip(frames, indices, settings, name))
        return clips

    def _read_encoded(self, item: Any, name: str, settings: VideoSettings) -> _Clip:
        """A video file: the frames sampling picks (from the stream's frame count and fps), and only those,
        decoded."""
        video = EncodedVideo(item, name, self._decode_device)
        if settings.do_sample_frames:  # from the stream's own count: in range (decoded arrays' metadata may not be)
            indices = self._sample(video.total, video.fps, settings, name, video.duration)
        else:
            indices = list(range(video.total))
        frames = clip_frames(video.frames(indices), name, settings.do_convert_rgb, self.norm.channel)
        return self._clip(frames, list(range(len(indices))), settings, name)

    def _clip(self, frames: torch.Tensor, indices: list[int], settings: VideoSettings, name: str) -> _Clip:
        if settings.frames is not None:  # SmolVLM: sized by its image plan
            return _Clip(frames, indices, None, None)
        size = self._size(len(indices), *frames.shape[-2:], settings, name)
        temporal = settings.temporal_patch_size
        grid = (-(-len(indices) // temporal), size[0] // settings.patch_size, size[1] // settings.patch_size)
        return _Clip(frames, indices, size, grid)

    def _sample(
        self, total: int, video_fps: float | None, s: VideoSettings, name: str, duration: float | None = None
    ) -> list[int]:
        """The frame indices transformers' sample_frames picks (Qwen2VLVideoProcessor's, Qwen3VL's or
        Glm4v's or SmolVLM's). `duration`: the video's metadata's, in seconds (GLM-4V's and SmolVLM's
        sampling read it)."""
        if s.kind in configs.FRAMEWISE_VIDEO_KINDS + configs.BUDGET_VIDEO_KINDS:
            raise ValueError(
                f"{_WHERE}: {name}: {s.kind}'s frame sampling is not implemented: sample the frames first (its "
                f"transformers class does, before the frames reach the step reproduced here), or do_sample_frames=False"
            )
        if s.kind == "smolvlm":
            # A call's None fps or num_frames is the config's (its sample_frames falls back to self.*).
            num_frames = s.num_frames if s.num_frames is not None else self.settings.num_frames
            fps = s.fps if s.fps is not None else self.settings.fps
            needed = {
                "the video's fps": video_fps,
                "the video's duration": duration,
                "fps": fps,
                "num_frames": num_frames,
            }
            missing = [what for what, value in needed.items() if value is None]
            if missing:
                raise ValueError(
                    f"{_WHERE}: {name}: SmolVLM samples frames from {' and '.join(missing)}: pass video_metadata "
                    f"(total_num_frames, fps and duration per video) and fps and num_frames (or a config's "
                    f"video_sampling), or do_sample_frames=False"
                )
            return smolvlm_frame_indices(total, video_fps, duration, num_frames, fps)
        if s.kind == "glm4v":
            # Glm4vVideoProcessor.sample_frames: fps alone (num_frames is not read), its config's fps where the
            # call's is None, and its config's max_duration (self.*), whatever the call says.
            fps = s.fps if s.fps is not None else self.settings.fps
            if video_fps is None or fps is None:
                raise ValueError(
                    f"{_WHERE}: {name}: GLM-4V samples frames per second from the video's fps: pass video_metadata "
                    f"(total_num_frames and fps per video), or do_sample_frames=False"
                    + ("" if fps is not None else "; and the config's fps is null")
                )
            return glm4v_frame_indices(total, video_fps, duration, fps, self.settings.max_duration)
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
            if s.kind in ("qwen3_vl", "glm4v"):  # GLM-4V: no cap_pixels_per_frame (always off)
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


def glm4v_frame_indices(
    total: int, video_fps: float, duration: float | None, fps: float, max_duration: int
) -> list[int]:
    """transformers' Glm4vVideoProcessor.sample_frames: `fps` frames per second of the video's duration (its
    metadata's, else from its frame count), each index rounded up; a video longer than max_duration seconds
    gets max_duration * fps frames spread over it (all of them if it has no more); repeats dropped, and the
    last index repeated to an even count. The float expressions are transformers', to round where its do."""
    last = total - 1
    duration = duration or round(last / video_fps) + 1
    if duration <= max_duration:
        count = max(math.floor(duration * fps), 1)
        indices = [min(last, math.ceil(i * video_fps / fps)) for i in range(count)]
    else:
        count = int(max_duration * fps)
        if count >= total:
            indices = list(range(total))
        else:
            import numpy as np

            seconds = np.linspace(0, duration, count, endpoint=True)
            indices = [min(last, math.ceil(t * video_fps)) for t in seconds]
    indices = list(dict.fromkeys(indices))  # in order, each once
    if len(indices) % 2:
        indices.append(indices[-1])
    return indices


def smolvlm_frame_indices(
    total: int, video_fps: float, duration: float, num_frames: int, fps: float, skip_secs: float = 1
) -> list[int]:
    """transformers' SmolVLMVideoProcessor.sample_frames (a call cannot set its skip_secs: always 1):
    round(fps * duration) frames, at most num_frames and at least 1, spread evenly (np.linspace, truncated)
    over the video, or over it less skip_secs at each end where it lasts more than num_frames * fps seconds
    beyond those; repeats dropped. The float expressions are transformers', to truncate where its do."""
    import numpy as np

    wanted = max(min(round(fps * duration), num_frames), 1)
    start, end = 0, total - 1
    if skip_secs > 0 and duration - 2 * skip_secs > num_frames * fps:
        start, end = int(skip_secs * video_fps), min(int(total - skip_secs * video_fps), total - 1)
    if start >= end:
        start, end = 0, total - 1
    return sorted(set(np.linspace(start, end, wanted, dtype=int).tolist()))


def _norm(settings: VideoSettings, device: torch.device) -> FusedInputNorm:
    n = settings.normalization
    return FusedInputNorm(n.image_mean, n.image_std, n.rescale_factor, n.channel).to(device)


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
