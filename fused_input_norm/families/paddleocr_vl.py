"""PaddleOCR-VL's image processor (PaddleOCRVLImageProcessor). Read in transformers 5.22 and 5.25, it is
Qwen2-VL's with two changes, both planned here: its smart_resize first stretches a side thinner than
patch_size * merge_size to it (the other side scaled and rounded), and its patches are in raster order, not
grouped by merge block, each [C * T, P, P] (pixel_values [patches, C * T, P, P]): the kernel's patch rows with
a merge size of 1. Its defaults: a 384*384 .. 1536*1536 pixel budget, temporal_patch_size 1, min_pixels /
max_pixels aliases of size (as Qwen2-VL's)."""

import dataclasses
from collections.abc import Mapping

from ..geometry import smart_resize
from . import qwen2_vl
from .base import Plan

KIND = "paddleocr_vl"
TYPES = ("PaddleOCRVLImageProcessor",)
PROCESSOR_CLASSES = ("PaddleOCRVLProcessor",)
KEYS = qwen2_vl.KEYS
PIL_BYTES_AS_FLOAT = True  # its Pil patchify casts to float32 first
DEFAULTS = {
    **qwen2_vl.DEFAULTS,
    "size": {"shortest_edge": 384 * 384, "longest_edge": 1536 * 1536},
    "temporal_patch_size": 1,
}


def settings(config: Mapping, get, where: str) -> dict:
    return {
        "size": qwen2_vl.pixel_bounds(config.get("size"), DEFAULTS["size"], config, where),
        **qwen2_vl.patch_sizes(where, get),
    }


def plan(s, shapes: list, where: str) -> Plan:
    rows = qwen2_vl.patch_rows(s, shapes, where, smart_size, _unresized, merge=1)  # merge 1: raster order
    count, _ = rows.shape
    shape = (count, s.normalization.channel * s.temporal_patch_size, s.patch_size, s.patch_size)
    return dataclasses.replace(rows, shape=shape)


def _unresized(s, name: str, height: int, width: int, where: str) -> tuple[int, int]:
    # Its raster patches need multiples of patch_size alone (Qwen2-VL's merge blocks need patch_size * merge_size).
    if height % s.patch_size or width % s.patch_size:
        raise ValueError(
            f"{where}: {name} is {height}x{width}; without do_resize, H and W must be multiples of patch_size = "
            f"{s.patch_size}"
        )
    return height, width


def smart_size(s, name: str, height: int, width: int, where: str) -> tuple[int, int]:
    """transformers' PaddleOCR-VL smart_resize: a side below the factor stretched to it first (the other side
    scaled in proportion and rounded, height before width), then Qwen2-VL's."""
    factor = s.patch_size * s.merge_size
    if height < factor:
        width, height = round(width * factor / height), factor
    if width < factor:
        height, width = round(height * factor / width), factor
    try:
        return smart_resize(height, width, factor, s.size["shortest_edge"], s.size["longest_edge"])
    except ValueError as e:
        raise ValueError(f"{where}: {name}: {e} (PaddleOCR-VL's smart_resize refuses it)") from None
