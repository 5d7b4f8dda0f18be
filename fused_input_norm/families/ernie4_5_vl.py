"""ERNIE-4.5-VL's image processor (Ernie4_5_VLMoeImageProcessor), served as Qwen2-VL's: read in transformers
5.22 and 5.25, its resize is Qwen2-VL's smart_resize (factor patch_size * merge_size) and its patchify writes
Qwen2-VL's patch rows ([C, T, P, P] per row, merge blocks together, the image repeated over temporal_patch_size)
and image_grid_thw; only its class defaults differ (a 56*56 .. 28*28*6177 pixel budget, temporal_patch_size 1),
and, like GLM-4.1V's, its __init__ has no min_pixels / max_pixels aliases of size."""

from collections.abc import Mapping

from . import qwen2_vl
from .base import Plan

KIND = "ernie4_5_vl"
# The second spelling is transformers' deprecated alias of the same class.
TYPES = ("Ernie4_5_VLMoeImageProcessor", "Ernie4_5_VL_MoeImageProcessor")
PROCESSOR_CLASSES = ("Ernie4_5_VLMoeProcessor",)
KEYS = qwen2_vl.KEYS
PIL_BYTES_AS_FLOAT = True  # its Pil patchify casts to float32 first, as Qwen2-VL's does
DEFAULTS = {
    **qwen2_vl.DEFAULTS,
    "size": {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 6177},
    "temporal_patch_size": 1,
}


def settings(config: Mapping, get, where: str) -> dict:
    return {
        "size": qwen2_vl.pixel_bounds(config.get("size"), DEFAULTS["size"], None, where),
        **qwen2_vl.patch_sizes(where, get),
    }


def plan(s, shapes: list, where: str) -> Plan:
    return qwen2_vl.plan(s, shapes, where)
