"""vLLM's Llama-Nemotron-Nano-VL image processor (LlamaNemotronNanoVLImageProcessor,
vllm/transformers_utils/processors/nemotron_vl.py, what vLLM runs for `Llama_Nemotron_Nano_VL`): InternVL's tiles
and thumbnail (internvl_chat), with a grid chosen by its own score (the closeness of the aspect ratios times the
grid's area over the image's, capped at 0.6: the first best wins) and no Normalize: ToTensor's [0, 1] floats
(image_mean 0, image_std 1). pixel_values [tiles, C, S, S] and num_patches. The embedding model's
LlamaNemotronVLEmbedImageProcessor (`LlamaNemotronVLModel`) cuts the same grid and normalizes with SigLIP's 0.5.
"""

import functools
from collections.abc import Mapping

from . import got_ocr2, internvl_chat
from .base import Plan

KIND = "nemotron_vl"
TYPES = ("LlamaNemotronNanoVLImageProcessor", "LlamaNemotronVLEmbedImageProcessor")  # the embedding model's too
PROCESSOR_CLASSES = ()
PIL_BYTES_AS_FLOAT = False
KEYS = internvl_chat.KEYS
# Llama-3.1-Nemotron-Nano-VL-8B's values (vLLM reads them from its remote image processor): 512 tiles, 1 to 12.
DEFAULTS = {
    **internvl_chat.DEFAULTS,
    "size": {"height": 512, "width": 512},
    "image_mean": [0.0, 0.0, 0.0],
    "image_std": [1.0, 1.0, 1.0],
}


def settings(config: Mapping, get, where: str) -> dict:
    return internvl_chat.settings(config, get, where)


def tile_grid(height: int, width: int, tile: int, min_tiles: int, max_tiles: int) -> tuple[int, int]:
    """(columns, rows): the grid of min_tiles..max_tiles tiles of the highest score, in vLLM's order and
    arithmetic (its find_closest_aspect_ratio), so that equal scores resolve as there."""
    aspect = width / height
    area = width * height
    best, best_score = (1, 1), float("-inf")
    for columns, rows in internvl_chat.grids(min_tiles, max_tiles):
        target = columns / rows
        size = min((columns * rows * tile * tile) / area, 0.6)
        score = size * min(target / aspect, aspect / target)
        if score > best_score:
            best, best_score = (columns, rows), score
    return best


def plan(s, shapes: list, where: str) -> Plan:
    tile, o = s.size["height"], s.options
    grid_of = functools.partial(tile_grid, tile=tile, min_tiles=o["min_tiles"], max_tiles=o["max_tiles"])
    return got_ocr2.tiled_plan(s, shapes, grid_of, (tile, tile), o["use_thumbnail"])
