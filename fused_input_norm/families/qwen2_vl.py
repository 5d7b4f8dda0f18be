"""Qwen2-VL's image processor (also Qwen2.5-VL's and Qwen3-VL's): smart_resize to multiples of
patch_size * merge_size within a pixel budget, then patch rows [patches, C * T * P * P] and image_grid_thw.

CohereCompassImageProcessor is served here too: in transformers 5.22 and 5.25 both of its backends are
Qwen2-VL's code with the names changed (class defaults, min_pixels / max_pixels aliases, smart_resize,
patchify, outputs), the files generated from Qwen2-VL's by transformers' modular converter."""

from collections.abc import Mapping

import torch

from ..checks import image_name, positive_int
from ..geometry import MAX_ASPECT_RATIO, MAX_SIDE, QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, patch_grid, smart_resize
from .base import CLIP_MEAN, CLIP_STD, COMMON_DEFAULTS, Job, Plan

KIND = "qwen2_vl"
TYPES = ("Qwen2VLImageProcessor", "CohereCompassImageProcessor")
PROCESSOR_CLASSES = ("Qwen2VLProcessor", "Qwen2_5_VLProcessor", "Qwen3VLProcessor", "CohereCompassProcessor")
KEYS = ("patch_size", "temporal_patch_size", "merge_size")
# Its Pil backend returns the resized bytes (do_rescale and do_normalize off) as float32 values.
PIL_BYTES_AS_FLOAT = True
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"shortest_edge": QWEN_MIN_PIXELS, "longest_edge": QWEN_MAX_PIXELS},
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
}


def settings(config: Mapping, get, where: str) -> dict:
    return {"size": pixel_bounds(config.get("size"), DEFAULTS["size"], config, where), **patch_sizes(where, get)}


def pixel_bounds(size: object, default: Mapping, aliases: Mapping | None, where: str) -> dict:
    """A Qwen-VL size: {"shortest_edge": min_pixels, "longest_edge": max_pixels}. With `aliases` (the image
    processor's and Qwen2-VL's video processor's config: transformers' __init__), min_pixels / max_pixels
    override size's edges; Qwen3-VL's video processor reads size alone."""
    if size is not None and not isinstance(size, Mapping):
        raise ValueError(f"{where}: a Qwen-VL size needs shortest_edge and longest_edge, got {size!r}")
    size = dict(default if size is None else size)
    for key, edge in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge")):
        if aliases is not None and aliases.get(key) is not None:
            size[edge] = aliases[key]
    if set(size) - {"min_pixels", "max_pixels"} != {"shortest_edge", "longest_edge"}:
        raise ValueError(f"{where}: a Qwen-VL size needs shortest_edge and longest_edge, got {size}")
    low = positive_int(where, "size['shortest_edge'] (min_pixels)", size["shortest_edge"])
    high = positive_int(where, "size['longest_edge'] (max_pixels)", size["longest_edge"])
    if low > high:
        raise ValueError(f"{where}: min_pixels ({low}) > max_pixels ({high}): the config contradicts itself")
    return {"shortest_edge": low, "longest_edge": high}


def patch_sizes(where: str, get, keys: tuple[str, ...] = KEYS) -> dict:
    """patch_size, temporal_patch_size and merge_size: positive ints, and a patch_size * merge_size (the side
    every resized image is a multiple of) below MAX_SIDE."""
    patches = {k: positive_int(where, k, get(k)) for k in keys}
    factor = patches["patch_size"] * patches["merge_size"]
    if factor >= MAX_SIDE:
        raise ValueError(
            f"{where}: patch_size * merge_size must be below {MAX_SIDE} (2^24, the largest image side), got "
            f"{patches['patch_size']} * {patches['merge_size']} = {factor}"
        )
    return patches


def plan(s, shapes: list, where: str) -> Plan:
    return patch_rows(s, shapes, where, smart_size)


def patch_rows(s, shapes: list, where: str, smart_size, unresized=None, merge: int | None = None, placed=None) -> Plan:
    """Each image's patch rows, one after another; image_grid_thw (int64, on the CPU) says how many.
    `smart_size(s, name, height, width, where)`: the family's resized size (with do_resize); `unresized`: the
    same without do_resize (the size, or refused); `merge`: the merge blocks the rows are grouped in (1: raster
    order), s.merge_size unless given; `placed(s, name, height, width, where)`, in place of smart_size: (the
    canvas, the size the image is resized to at its top left), the rest zero bytes (GLM-5 Next's)."""
    count = len(shapes)
    unresized = unresized or _unresized
    canvases, contents = [], []
    for i, (h, w) in enumerate(shapes):
        name = image_name(i, count)
        if not s.do_resize:
            canvas = content = unresized(s, name, h, w, where)
        elif placed is not None:
            canvas, content = placed(s, name, h, w, where)
        else:
            canvas = content = smart_size(s, name, h, w, where)
        canvases.append(canvas)
        contents.append(content)
    grids = [(1, *patch_grid(*canvas, s.patch_size)) for canvas in canvases]
    patches = (s.temporal_patch_size, s.patch_size, s.merge_size if merge is None else merge)
    jobs, start = [], 0
    for i, (canvas, content, (t, h, w)) in enumerate(zip(canvases, contents, grids, strict=True)):
        pad = (*canvas, 0, 0, 0) if content != canvas else ()
        jobs.append(Job(i, content, (0, 0, *content), (start, start + t * h * w), patches=patches, pad=pad))
        start += t * h * w
    row = s.normalization.channel * s.temporal_patch_size * s.patch_size**2
    grid_thw = torch.tensor(grids, dtype=torch.int64, device="cpu")
    return Plan((start, row), jobs, {"image_grid_thw": grid_thw})


def _unresized(s, name: str, height: int, width: int, where: str) -> tuple[int, int]:
    factor = s.patch_size * s.merge_size
    if height % factor or width % factor:
        raise ValueError(
            f"{where}: {name} is {height}x{width}; without do_resize, H and W must be multiples of "
            f"patch_size * merge_size = {factor}"
        )
    return height, width


def smart_size(s, name: str, height: int, width: int, where: str) -> tuple[int, int]:
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise ValueError(
            f"{where}: {name} of size {height}x{width} has an aspect ratio over {MAX_ASPECT_RATIO}, which "
            f"Qwen-VL's smart_resize refuses"
        )
    factor = s.patch_size * s.merge_size
    return smart_resize(height, width, factor, s.size["shortest_edge"], s.size["longest_edge"])
