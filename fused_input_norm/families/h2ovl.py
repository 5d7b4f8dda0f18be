"""vLLM's H2OVL image processor (H2OVLImageProcessor, vllm/transformers_utils/processors/h2ovl.py, what vLLM runs
for `H2OVLChatModel`): InternVL's tiles and thumbnail (internvl_chat), except that a call of exactly one image
with use_msac (multi-scale adaptive cropping) cuts that image twice: a first grid of 1..max tiles, then a second
one of 3..max tiles among the grids whose columns and rows divide neither of the first's. pixel_values holds the
second grid's tiles, then the first's, then the thumbnail (a grid of one tile adds none: its one tile is the
thumbnail's resize); num_patches (int64 [n]) each image's count.
"""

from collections.abc import Mapping

import torch

from . import got_ocr2, internvl_chat
from .base import Job, Plan

KIND = "h2ovl"
TYPES = ("H2OVLImageProcessor",)
PROCESSOR_CLASSES = ()
PIL_BYTES_AS_FLOAT = False
KEYS = (*internvl_chat.KEYS, "use_msac")
# vLLM's H2OVLImageProcessor has no defaults of its own (vLLM passes each key from config.json): InternVL's, and
# MSAC on, as the H2OVL-Mississippi checkpoints set it.
DEFAULTS = {**internvl_chat.DEFAULTS, "use_msac": True}


def settings(config: Mapping, get, where: str) -> dict:
    out = internvl_chat.settings(config, get, where)
    if not isinstance(get("use_msac"), bool):
        raise ValueError(f"{where}: use_msac must be true or false, got {get('use_msac')!r}")
    out["options"]["use_msac"] = get("use_msac")
    return out


def msac_grids(height: int, width: int, tile: int, max_tiles: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(first, second): the two (columns, rows) grids of MSAC. The first is the closest of 1..max_tiles tiles
    (whatever min_dynamic_patch says); the second the closest of 3..max_tiles tiles whose columns divide none
    of the first's and whose rows none of its rows, (1, 1) where no grid is left."""
    first = internvl_chat.tile_grid(height, width, tile, 1, max_tiles)
    others = [(c, r) for c, r in internvl_chat.grids(3, max_tiles) if first[0] % c != 0 and first[1] % r != 0]
    return first, internvl_chat.closest(height, width, tile, others)


def plan(s, shapes: list, where: str) -> Plan:
    o = s.options
    if not (o["use_msac"] and len(shapes) == 1):  # vLLM's MSAC is for a call of one image only
        return internvl_chat.plan(s, shapes, where)
    tile = s.size["height"]
    ((height, width),) = shapes
    first, second = msac_grids(height, width, tile, o["max_tiles"])
    jobs, start = [], 0
    for grid in (second, first):
        if grid[0] * grid[1] > 1:
            grid_jobs, count = got_ocr2.tiled_jobs(0, grid, (tile, tile), start, thumbnail=False)
            jobs += grid_jobs
            start += count
    jobs.append(Job(0, (tile, tile), (0, 0, tile, tile), (start, start + 1)))  # the thumbnail
    start += 1
    counts = torch.tensor([start], dtype=torch.int64, device="cpu")
    return Plan((start, s.normalization.channel, tile, tile), jobs, {"num_patches": counts})
