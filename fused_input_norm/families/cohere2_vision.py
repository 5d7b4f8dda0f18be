"""Command A Vision's image processor (Cohere2VisionImageProcessor; torchvision backend only; read in
transformers 5.22 and 5.25): GOT-OCR2's tiles and thumbnail (got_ocr2.tiled_plan) on another grid. With
crop_to_patches (its default), each image resized to the canvas of size tiles (at most max_patches; its
min_patches is read by nothing) that needs the smallest upscale, or, where every canvas is a downscale, the
least downscale, and cut into its tiles row by row; then, with more than one tile, the whole image resized
to one tile; pixel_values [sum of tiles (+ thumbnails), C, h, w] and num_patches. Without it, every image
resized to size (CLIP's fixed-size resize), num_patches all 1."""

import functools
from collections.abc import Mapping

from ..checks import positive_int
from . import clip, got_ocr2
from .base import CLIP_MEAN, CLIP_STD, COMMON_DEFAULTS, Plan

KIND = "cohere2_vision"
TYPES = ("Cohere2VisionImageProcessor",)
PROCESSOR_CLASSES = ("Cohere2VisionProcessor",)
PIL_BYTES_AS_FLOAT = False  # no Pil backend (TORCHVISION_ONLY)
TORCHVISION_ONLY = True
UNSTACKED = got_ocr2.UNSTACKED
KEYS = got_ocr2.KEYS
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"height": 512, "width": 512},
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
    "crop_to_patches": True,
    "min_patches": 1,
    "max_patches": 12,
}


def settings(config: Mapping, get, where: str) -> dict:
    tile = clip.crop_size(get("size"), where, "size")
    crop_to_patches = get("crop_to_patches")
    if not isinstance(crop_to_patches, bool):
        raise ValueError(f"{where}: crop_to_patches must be true or false, got {crop_to_patches!r}")
    options = {
        "crop_to_patches": crop_to_patches,
        "max_patches": positive_int(where, "max_patches", get("max_patches")),
    }
    return {"size": {"height": tile[0], "width": tile[1]}, "options": options}


def tile_grid(height: int, width: int, tile: tuple[int, int], max_tiles: int) -> tuple[int, int]:
    """(columns, rows): transformers' get_optimal_tiled_canvas. The grids of at most max_tiles tiles, by tile
    count (width-major within a count); each one's scale, the smaller of its width over the image's and its
    height over the image's (float64, as NumPy divides); the first with the smallest scale of at least 1, or,
    where every scale is below 1, the first with the largest."""
    grids = sorted(
        ((w, h) for w in range(1, max_tiles + 1) for h in range(1, max_tiles + 1) if w * h <= max_tiles),
        key=lambda grid: grid[0] * grid[1],
    )
    scales = [min(w * tile[0] / width, h * tile[0] / height) for w, h in grids]  # its tiles are square (height)
    if all(scale < 1 for scale in scales):
        return grids[scales.index(max(scales))]
    return grids[scales.index(min(scale for scale in scales if scale >= 1))]


def plan(s, shapes: list, where: str) -> Plan:
    if not s.options["crop_to_patches"]:
        return got_ocr2.plan(s, shapes, where)  # its crop_to_patches off: CLIP's fixed size, num_patches 1
    tile = (s.size["height"], s.size["width"])
    grid_of = functools.partial(tile_grid, tile=tile, max_tiles=s.options["max_patches"])
    return got_ocr2.tiled_plan(s, shapes, grid_of, tile, thumbnail=True)
