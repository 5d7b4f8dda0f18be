"""vLLM's own DeepSeek-OCR image processing (DeepseekOCRProcessor, vllm/transformers_utils/processors/
deepseek_ocr.py: DeepSeek-OCR, DeepSeek-OCR-2, Unlimited-OCR / -2): per image a global view, Pillow's
ImageOps.pad to base_size x base_size (a bicubic contain-fit resize, centered on a canvas of the grey fill byte),
after a resize to image_size x image_size where crop mode is off and the processor does that first; and, in crop
mode for an image larger than one tile, the image resized (Pillow's bicubic) to its aspect grid of 2..max_crops
image_size tiles and cut into them, row by row; then ToTensor + Normalize.

The two views have different sides, so a call plans one of them (`view`): "global" gives pixel_values
[n, C, B, B]; "tiles" gives the tiles [tiles, C, S, S] and images_spatial_crop (int64 [n, 2]: each image's
columns and rows, 1 x 1 where it has no tiles).
"""

from collections.abc import Mapping

import torch

from ..checks import positive_int
from . import got_ocr2, internvl_chat
from .base import COMMON_DEFAULTS, STANDARD_MEAN, STANDARD_STD, Job, Plan, Stage, padded, side

KIND = "deepseek_ocr"
TYPES = ("DeepseekOCRProcessor",)
PROCESSOR_CLASSES = ()
PIL_BYTES_AS_FLOAT = False
KEYS = ("base_size", "max_crops", "cropping", "resize_first", "fill", "view")
VIEWS = ("global", "tiles")
MIN_CROPS = 2  # vLLM's MIN_CROPS: a tiled image has at least two tiles
# vLLM's defaults (the "Gundam" mode it runs: a 1024 global view, 640 tiles, at most 6 of them).
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"height": 640, "width": 640},
    "image_mean": STANDARD_MEAN,
    "image_std": STANDARD_STD,
    "base_size": 1024,
    "max_crops": 6,
    "cropping": True,
    "resize_first": True,
    "fill": 127,  # int(0.5 * 255): the mean as a byte
    "view": "global",
}


def settings(config: Mapping, get, where: str) -> dict:
    tile = internvl_chat.square_tile(config, DEFAULTS["size"], where, "DeepSeek-OCR")
    options = {"base_size": side(where, "base_size", get("base_size"))}
    options["max_crops"] = positive_int(where, "max_crops", get("max_crops"))
    for key in ("cropping", "resize_first"):
        if not isinstance(get(key), bool):
            raise ValueError(f"{where}: {key} must be true or false, got {get(key)!r}")
        options[key] = get(key)
    fill = get("fill")
    if isinstance(fill, bool) or not isinstance(fill, int) or not 0 <= fill <= 255:
        raise ValueError(f"{where}: fill must be a byte (0..255), got {fill!r}")
    if get("view") not in VIEWS:
        raise ValueError(f"{where}: view must be one of {VIEWS}, got {get('view')!r}")
    return {"size": {"height": tile, "width": tile}, "options": {**options, "fill": fill, "view": get("view")}}


def tile_grid(height: int, width: int, tile: int, cropping: bool, max_crops: int) -> tuple[int, int]:
    """(columns, rows): 1 x 1 (no tiles) unless crop mode is on and the image exceeds a tile on some side; then
    the grid of 2..max_crops tiles vLLM's dynamic_preprocess picks (InternVL's rule, which it copies)."""
    if not cropping or (width <= tile and height <= tile):
        return 1, 1
    return internvl_chat.tile_grid(height, width, tile, MIN_CROPS, max_crops)


def plan(s, shapes: list, where: str) -> Plan:
    tile, o = s.size["height"], s.options
    if o["view"] == "tiles":
        jobs, grids, start = [], [], 0
        for i, (height, width) in enumerate(shapes):
            grids.append(tile_grid(height, width, tile, o["cropping"], o["max_crops"]))
            if grids[-1] != (1, 1):
                image_jobs, count = got_ocr2.tiled_jobs(i, grids[-1], (tile, tile), start, False)
                jobs += image_jobs
                start += count
        crops = torch.tensor(grids, dtype=torch.int64).reshape(-1, 2)
        return Plan((start, s.normalization.channel, tile, tile), jobs, {"images_spatial_crop": crops})
    base, jobs, stages = o["base_size"], [], []
    for i, (height, width) in enumerate(shapes):
        if o["resize_first"] and not o["cropping"]:  # vLLM's image.resize((S, S)), then the pad of a square
            stages.append(Stage(i, (tile, tile)))
            jobs.append(Job(len(shapes) + len(stages) - 1, (base, base), (0, 0, base, base), (i, i + 1)))
            continue
        jobs.append(padded(i, height, width, (base, base), o["fill"], (i, i + 1), where))
    return Plan((len(shapes), s.normalization.channel, base, base), jobs, stages=stages)
