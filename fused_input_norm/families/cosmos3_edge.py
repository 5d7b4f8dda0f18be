"""Cosmos-3 Edge's image processor (Cosmos3EdgeImageProcessor, and its Pil spelling; read in transformers 5.25),
served with Qwen2-VL's plan and channel-last rows. Its resize is Qwen2-VL's smart_resize (factor patch_size *
merge_size, the pixel budget size's shortest_edge .. longest_edge; with temporal_patch_size 1 its frame terms are
Qwen's) after an image with a side under the factor is scaled up to it (int() of each side times max(factor / h,
factor / w)). Its patchify writes Qwen2-VL's merge-block order of rows, each row [P, P, C, T]: channels last, the
temporal copies innermost; image_grid_thw as Qwen2-VL's. Its __init__ has no min_pixels / max_pixels aliases.
Only temporal_patch_size 1, its default: with more, each row repeats every value T times in a row, a layout the
kernel has no move for (the generic path serves such a processor)."""

import dataclasses
from collections.abc import Mapping

from . import qwen2_vl
from .base import STANDARD_MEAN, STANDARD_STD, Plan

KIND = "cosmos3_edge"
TYPES = ("Cosmos3EdgeImageProcessor",)
PROCESSOR_CLASSES = ("Cosmos3EdgeProcessor",)
KEYS = qwen2_vl.KEYS
PIL_BYTES_AS_FLOAT = True  # its Pil patchify casts to float32 first, as Qwen2-VL's does
DEFAULTS = {
    **qwen2_vl.DEFAULTS,
    "size": {"shortest_edge": 256 * 256, "longest_edge": 4096 * 4096},
    "image_mean": STANDARD_MEAN,
    "image_std": STANDARD_STD,
    "patch_size": 16,
    "temporal_patch_size": 1,
}


def settings(config: Mapping, get, where: str) -> dict:
    patches = qwen2_vl.patch_sizes(where, get)
    if patches["temporal_patch_size"] != 1:
        raise ValueError(
            f"{where}: temporal_patch_size {patches['temporal_patch_size']} is not implemented for Cosmos-3 Edge "
            "(its rows repeat each value temporal_patch_size times in a row)"
        )
    return {"size": qwen2_vl.pixel_bounds(config.get("size"), DEFAULTS["size"], None, where), **patches}


def smart_size(s, name: str, height: int, width: int, where: str) -> tuple[int, int]:
    factor = s.patch_size * s.merge_size
    if height < factor or width < factor:  # scaled up to the factor first, each side truncated
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    return qwen2_vl.smart_size(s, name, height, width, where)


def plan(s, shapes: list, where: str) -> Plan:
    return dataclasses.replace(qwen2_vl.patch_rows(s, shapes, where, smart_size), channel_last=True)
