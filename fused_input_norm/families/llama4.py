"""Llama 4's image processor (transformers has only its torchvision backend): per image, the best canvas of
whole tiles (size, 336 in its checkpoints) among those of at most max_patches tiles, the image resized into it
without distortion (bilinear), padded with 0 at the bottom and right (before rescale and normalize), cut into
tiles row by row; with more than one tile, a global tile (the whole image resized to one tile) after them.
pixel_values [tiles of every image, C, tile, tile] and aspect_ratios (each image's tile rows and columns, int64
[n, 2]).

transformers rescales and normalizes in bfloat16, rounding after each step (normalize_steps): its
pixel_values are bfloat16, and their values are not the float32 affine's rounded once.

The sizes follow transformers' arithmetic to the bit: its canvas scales are float32 divisions (its canvases
are torch tensors), and the resize's scale is float32 or float64 depending on whether a canvas side or the
image's own side (a Python int) bounds it."""

import functools
import math
from collections.abc import Mapping

import numpy as np
import torch

from ..checks import positive_int
from ..geometry import MAX_SIDE
from . import clip
from .base import COMMON_DEFAULTS, STANDARD_MEAN, STANDARD_STD, Job, Plan

KIND = "llama4"
TYPES = ("Llama4ImageProcessor",)
PROCESSOR_CLASSES = ("Llama4Processor",)
PIL_BYTES_AS_FLOAT = False  # no Pil backend (TORCHVISION_ONLY)
TORCHVISION_ONLY = True  # transformers has no Pil backend for it: there is no "pil" answer to reproduce
UNSTACKED = {"pixel_values": "tiles", "aspect_ratios": "rows"}  # return_tensors unset (base.unstack)
KEYS = ("max_patches", "resize_to_max_canvas")
TILE = 336
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"height": TILE, "width": TILE},
    "resample": 2,  # bilinear
    "image_mean": STANDARD_MEAN,
    "image_std": STANDARD_STD,
    "max_patches": 16,
    "resize_to_max_canvas": False,
}
FILL = 0  # the byte transformers pads the resized image with, before rescale and normalize


def settings(config: Mapping, get, where: str) -> dict:
    if not get("do_resize"):
        raise ValueError(
            f"{where}: Llama 4 always resizes to a canvas of tiles: do_resize=False is refused (as transformers "
            f"refuses it)"
        )
    if get("do_normalize") and not get("do_rescale"):
        # transformers' torchvision normalize takes float tensors only: it fails on the bytes.
        raise ValueError(f"{where}: do_normalize without do_rescale is refused (transformers cannot run it either)")
    height, width = clip.crop_size(get("size"), where, "size")
    if height != width:
        raise ValueError(f"{where}: Llama 4's size must be square (its tiles are), got {height}x{width}")
    max_patches = positive_int(where, "max_patches", get("max_patches"))
    if height * max_patches >= MAX_SIDE:  # the 1 x max_patches canvas
        raise ValueError(
            f"{where}: max_patches {max_patches} x size {height} must be below {MAX_SIDE} (2^24, the largest "
            f"image side)"
        )
    to_max = get("resize_to_max_canvas")
    if not isinstance(to_max, bool):
        raise ValueError(f"{where}: resize_to_max_canvas must be true or false, got {to_max!r}")
    options = {
        "tile": height,
        "canvases": canvas_array(max_patches, height),
        "resize_to_max_canvas": to_max,
        "bfloat16_steps": get("do_rescale") and get("do_normalize"),
    }
    return {"size": {"height": height, "width": width}, "options": options}


def normalize_steps(s) -> torch.dtype | None:
    """transformers' Llama 4 rescales and normalizes in bfloat16, one rounding per step, when it does both."""
    return torch.bfloat16 if s.options["bfloat16_steps"] else None


@functools.lru_cache(maxsize=4)
def canvas_array(max_patches: int, tile: int) -> np.ndarray:
    """transformers' find_supported_resolutions as an int64 [n, 2] array (read-only; cached, as transformers
    caches its list): every (rows x tile, columns x tile) of at most max_patches tiles, grouped by aspect ratio
    in the order each ratio first appears (tile counts from max_patches down, rows ascending). The order
    decides nothing but ties of best_canvas, which it keeps transformers'. Vectorized: a request's
    max_patches=40000 lists 430,062 canvases, which a Python loop over divisors took seconds to build."""
    first_rows = np.arange(1, max_patches + 1, dtype=np.int64)
    per_row = max_patches // first_rows  # columns 1..max_patches // rows for each rows
    rows = np.repeat(first_rows, per_row)
    starts = np.repeat(np.cumsum(per_row) - per_row, per_row)
    columns = np.arange(rows.size, dtype=np.int64) - starts + 1
    order = np.lexsort((rows, -rows * columns))  # tile counts descending, then rows ascending
    rows, columns = rows[order], columns[order]
    g = np.gcd(rows, columns)
    ratio = (rows // g) * (max_patches + 1) + columns // g
    _, first, group = np.unique(ratio, return_index=True, return_inverse=True)
    grouped = np.lexsort((np.arange(rows.size), first[group]))  # by first appearance, stable within
    out = np.stack((rows[grouped] * tile, columns[grouped] * tile), axis=1)
    out.flags.writeable = False
    return out


def canvases(max_patches: int, tile: int) -> tuple[tuple[int, int], ...]:
    """canvas_array as a tuple of (height, width) pairs."""
    return tuple(map(tuple, canvas_array(max_patches, tile).tolist()))


def best_canvas(height: int, width: int, options, to_max: bool) -> tuple[int, int]:
    """transformers' get_best_fit over `options` (canvas_array's, or (height, width) pairs): each canvas's scale
    is the smaller of its sides' (float32) ratios to the image's; the smallest scale >= 1 (the largest with
    resize_to_max_canvas), else the largest below 1; of the canvases at that scale, the first of least area.
    Vectorized in float32, as transformers' tensors are (one IEEE division per side, the same bits)."""
    options = np.asarray(options, dtype=np.int64).reshape(-1, 2)
    sides = options.astype(np.float32)
    scales = np.minimum(sides[:, 0] / np.float32(height), sides[:, 1] / np.float32(width))
    up = scales[scales >= 1]
    chosen = (up.max() if to_max else up.min()) if up.size else scales.max()
    at = np.flatnonzero(scales == chosen)
    pick = at[np.argmin(options[at, 0] * options[at, 1])]  # argmin: the first of least area
    return int(options[pick, 0]), int(options[pick, 1])


def _f32(value: float) -> np.float32:
    return np.float32(value)


def fitted_size(height: int, width: int, canvas: tuple[int, int], tile: int, to_max: bool) -> tuple[int, int]:
    """The size transformers resizes the image to inside `canvas`: without resize_to_max_canvas it upscales
    no side past max(that side, tile); then get_max_res_without_distortion, the side with the smaller scale
    filling its target and the other floored. A target that is the canvas's own side (a tensor in transformers)
    gives a float32 scale, one that is the image's side or the tile (a Python int) a float64 one; a comparison
    with a float32 one is in float32."""
    targets = []
    for side, canvas_side in zip((height, width), canvas, strict=True):
        bound = max(side, tile)
        from_canvas = to_max or canvas_side < bound  # Python's min() keeps the first of equals: the int
        targets.append((canvas_side if from_canvas else bound, from_canvas))
    (target_h, h_f32), (target_w, w_f32) = targets
    scale_h = _f32(target_h) / _f32(height) if h_f32 else target_h / height
    scale_w = _f32(target_w) / _f32(width) if w_f32 else target_w / width
    narrower = _f32(scale_w) < _f32(scale_h) if h_f32 or w_f32 else scale_w < scale_h
    if narrower:
        scaled = _f32(height) * scale_w if w_f32 else height * scale_w
        size = (min(math.floor(scaled), target_h), target_w)
    else:
        scaled = _f32(width) * scale_h if h_f32 else width * scale_h
        size = (target_h, min(math.floor(scaled), target_w))
    return max(size[0], 1), max(size[1], 1)


def layout(height: int, width: int, s) -> tuple[tuple[int, int], tuple[int, int]]:
    """An image's canvas and the size it is resized to inside it."""
    tile, to_max = s.options["tile"], s.options["resize_to_max_canvas"]
    canvas = best_canvas(height, width, s.options["canvases"], to_max)
    return canvas, fitted_size(height, width, canvas, tile, to_max)


def plan(s, shapes: list, where: str) -> Plan:
    """Per image: its tiles (the resized image on its zero canvas, row by row, one kernel run), then with more
    than one tile the global tile."""
    tile = s.options["tile"]
    jobs, ratios = [], []
    start = 0
    for i, (height, width) in enumerate(shapes):
        canvas, fitted = layout(height, width, s)
        rows, columns = canvas[0] // tile, canvas[1] // tile
        count = rows * columns
        jobs.append(
            Job(i, fitted, (0, 0, *fitted), (start, start + count), patches=(1, tile, 1), pad=(*canvas, 0, 0, FILL))
        )
        start += count
        if count > 1:
            jobs.append(Job(i, (tile, tile), (0, 0, tile, tile), (start, start + 1)))
            start += 1
        ratios.append([rows, columns])
    extras = {"aspect_ratios": torch.tensor(ratios, dtype=torch.int64, device="cpu")}
    return Plan((start, s.normalization.channel, tile, tile), jobs, extras)
