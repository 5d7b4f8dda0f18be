"""GLM-5 Next's image processor (Glm5NextImageProcessor, and its Pil spelling; read in transformers 5.25). Per
image a canvas from its own smart_resize: the aligned size (each side rounded up to the factor, patch_size *
merge_size * patch_expand_factor) when it fits the token budget (min_image_tokens .. max_image_tokens tokens of
temporal_patch_size * factor^2 pixels), scaled up by the square root of the shortfall below it, and above it the
largest aligned size a binary search over the height finds within it. The image is resized (where that changes
it) to fit the canvas, aspect kept (never scaled up where it holds the minimum), and padded with zero bytes on the
right and bottom before normalize; then Qwen2-VL's patch rows ([C, T, P, P], merge blocks together) and
image_grid_thw. size is read by nothing (its class says so), as here. The Pil backend leaves patch_expand_factor
out of the factor (the torchvision one multiplies it in): the plan follows the backend it reproduces."""

import functools
import math
from collections.abc import Mapping

from ..checks import positive_int
from . import qwen2_vl
from .base import Plan

KIND = "glm5_next"
TYPES = ("Glm5NextImageProcessor",)
PROCESSOR_CLASSES = ("Glm5NextProcessor",)
KEYS = (*qwen2_vl.KEYS, "patch_expand_factor", "min_image_tokens", "max_image_tokens")
PIL_BYTES_AS_FLOAT = True  # its Pil patchify casts to float32 first, as Qwen2-VL's does
BY_REFERENCE = True  # the backends' factors differ (above)
DEFAULTS = {
    **qwen2_vl.DEFAULTS,
    "size": {"longest_edge": 1},  # unread
    "patch_expand_factor": 1,
    "min_image_tokens": 16,
    "max_image_tokens": 8000,
}


def settings(config: Mapping, get, where: str) -> dict:
    patches = qwen2_vl.patch_sizes(where, get)
    options = {key: positive_int(where, key, get(key)) for key in KEYS[len(qwen2_vl.KEYS) :]}
    return {"size": {}, **patches, "options": options}


def smart_size(t: int, height: int, width: int, factor: int, min_tokens: int, max_tokens: int) -> tuple[int, int]:
    """transformers' GLM-5 Next smart_resize as its resize calls it (num_frames = temporal_factor = t)."""
    per_token = t * factor**2
    low, high = min_tokens * per_token, max_tokens * per_token

    def align(value: int) -> int:
        return math.ceil(value / factor) * factor

    frames = t  # its aligned frame count, max(t, round(num_frames / t) * t), with num_frames = t
    aligned_h, aligned_w = align(height), align(width)
    if frames * aligned_h * aligned_w < low:
        scale = math.sqrt(low / (t * height * width))
        aligned_h, aligned_w = align(max(1, math.ceil(height * scale))), align(max(1, math.ceil(width * scale)))
    if frames * aligned_h * aligned_w > high:
        if high < frames * factor**2:
            raise ValueError(
                f"max_pixels={high} is too small. At least {frames * factor**2} pixels are required for one aligned patch."
            )
        first, last = 1, height
        aligned_h, aligned_w = factor, factor
        while first <= last:
            content_h = (first + last) // 2
            content_w = max(1, math.floor(width * content_h / height))
            if frames * align(content_h) * align(content_w) <= high:
                aligned_h, aligned_w = align(content_h), align(content_w)
                first = content_h + 1
            else:
                last = content_h - 1
    return aligned_h, aligned_w


def canvas(s, height: int, width: int, reference: str = "torchvision") -> tuple[tuple[int, int], tuple[int, int]]:
    """The image's canvas and the size its content is resized to, as the `reference` backend's resize computes
    them."""
    t, o = s.temporal_patch_size, s.options
    factor = s.patch_size * s.merge_size * (o["patch_expand_factor"] if reference == "torchvision" else 1)
    target_h, target_w = smart_size(t, height, width, factor, o["min_image_tokens"], o["max_image_tokens"])
    scale = min(target_h / height, target_w / width)
    if t * height * width >= t * factor**2 * o["min_image_tokens"]:
        scale = min(1.0, scale)
    content = (max(1, min(target_h, math.floor(height * scale))), max(1, min(target_w, math.floor(width * scale))))
    return (target_h, target_w), content


def plan(s, shapes: list, where: str, reference: str = "torchvision") -> Plan:
    """Per image its patch rows: its content resized onto its canvas (zero bytes right and below), one job."""
    return qwen2_vl.patch_rows(s, shapes, where, None, placed=functools.partial(_placed, reference=reference))


def _placed(s, name: str, height: int, width: int, where: str, reference: str) -> tuple:
    try:
        return canvas(s, height, width, reference)
    except ValueError as error:
        raise ValueError(f"{where}: {name}: {error}") from None
