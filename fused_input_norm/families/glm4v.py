"""GLM-4.1V's image processor (also GLM-4.5V's): Qwen2-VL's patch rows and image_grid_thw, with its own
smart_resize: the pixel budget counts the image as temporal_patch_size frames (a still image is one temporal
patch), and an image thinner than patch_size * merge_size is scaled up to it first.

Glm46VImageProcessor (GLM-4.6V's, which GLM-OCR's checkpoints name too) is served here: in transformers 5.22
and 5.25 both of its backends are GLM-4.1V's code with the names changed (defaults, smart_resize, patch rows)."""

from collections.abc import Mapping

from ..geometry import smart_resize_clip
from . import qwen2_vl
from .base import Plan

KIND = "glm4v"
TYPES = ("Glm4vImageProcessor", "Glm46VImageProcessor")
# GLM-4.1V's and GLM-4.5V's (Glm4vMoe) processor, GLM-4.6V's
PROCESSOR_CLASSES = ("Glm4vProcessor", "Glm46VProcessor")
KEYS = qwen2_vl.KEYS
PIL_BYTES_AS_FLOAT = True  # its Pil backend's patch rows are float32, the resized bytes (rescale, normalize off) too
# Qwen2-VL's class defaults (CLIP's mean and std, patches 14 / 2 / 2) with GLM's pixel bounds.
DEFAULTS = {**qwen2_vl.DEFAULTS, "size": {"shortest_edge": 112 * 112, "longest_edge": 28 * 28 * 15000}}


def settings(config: Mapping, get, where: str) -> dict:
    # Unlike Qwen2-VL's, its __init__ has no min_pixels / max_pixels aliases of size: size alone counts.
    return {
        "size": qwen2_vl.pixel_bounds(config.get("size"), DEFAULTS["size"], None, where),
        **qwen2_vl.patch_sizes(where, get),
    }


def plan(s, shapes: list, where: str) -> Plan:
    return qwen2_vl.patch_rows(s, shapes, where, smart_size)


def smart_size(s, name: str, height: int, width: int, where: str) -> tuple[int, int]:
    """transformers' GLM-4V smart_resize, as its image processor calls it: one temporal patch of frames.
    It is Qwen3-VL's video smart_resize line for line (smart_resize_clip)."""
    t = s.temporal_patch_size
    factor = s.patch_size * s.merge_size
    try:
        return smart_resize_clip(t, height, width, t, factor, s.size["shortest_edge"], s.size["longest_edge"])
    except ValueError as e:  # the aspect ratio, measured after a thin image is scaled up to `factor`
        raise ValueError(f"{where}: {name} of size {height}x{width}: {e} (GLM-4V's smart_resize refuses it)") from None
