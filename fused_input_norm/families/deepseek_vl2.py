"""vLLM's own DeepSeek-VL2 image processing (DeepseekVLV2Processor, vllm/transformers_utils/processors/
deepseek_vl2.py: deepseek-vl2-tiny, -small, deepseek-vl2): per image a global view, Pillow's ImageOps.pad to
S x S (S the first candidate resolution's side: a bicubic contain-fit, centered on a canvas of the grey fill
byte), then a local view, ImageOps.pad to the candidate resolution that keeps most of the image (S x S where
cropping is off: vLLM turns it off for more than two images), cut into S x S tiles row by row; each through
ToTensor + Normalize.

pixel_values [views, C, S, S]: each image's global view, then its tiles (vLLM's images_list, stacked), and
images_spatial_crop (int64 [n, 2]: each image's columns and rows of tiles).
"""

import math
from collections.abc import Mapping

import torch

from ..checks import is_int
from . import internvl_chat
from .base import COMMON_DEFAULTS, STANDARD_MEAN, STANDARD_STD, Plan, padded

KIND = "deepseek_vl2"
TYPES = ("DeepseekVLV2Processor",)  # no transformers class: vllm_deepseek_vl2 builds the config
PROCESSOR_CLASSES = ()
PIL_BYTES_AS_FLOAT = False
KEYS = ("candidate_resolutions", "cropping", "fill")
# vLLM's DeepseekVLV2Config default (the checkpoints list 23 resolutions, each (width, height) in whole tiles).
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"height": 384, "width": 384},
    "image_mean": STANDARD_MEAN,
    "image_std": STANDARD_STD,
    "candidate_resolutions": [[384, 384]],
    "cropping": True,
    "fill": 127,  # int(0.5 * 255): the mean as a byte
}


def settings(config: Mapping, get, where: str) -> dict:
    tile = internvl_chat.square_tile(config, DEFAULTS["size"], where, "DeepSeek-VL2")
    candidates = get("candidate_resolutions")
    if (
        not isinstance(candidates, (list, tuple))
        or not candidates
        or not all(isinstance(c, (list, tuple)) and len(c) == 2 and all(is_int(v) for v in c) for c in candidates)
    ):
        raise ValueError(f"{where}: candidate_resolutions must be a list of [width, height] ints, got {candidates!r}")
    for width, height in candidates:
        # vLLM cuts the local view at every multiple of S below its sides: a side that is not one gives a
        # partial tile (Pillow's crop fills past the canvas with black) that its token count leaves out.
        if width < tile or height < tile or width % tile or height % tile:
            raise ValueError(f"{where}: candidate_resolutions [{width}, {height}] is not whole {tile} x {tile} tiles")
    if not isinstance(get("cropping"), bool):
        raise ValueError(f"{where}: cropping must be true or false, got {get('cropping')!r}")
    fill = get("fill")
    if isinstance(fill, bool) or not isinstance(fill, int) or not 0 <= fill <= 255:
        raise ValueError(f"{where}: fill must be a byte (0..255), got {fill!r}")
    options = {"candidate_resolutions": tuple((w, h) for w, h in candidates), "cropping": get("cropping")}
    return {"size": {"height": tile, "width": tile}, "options": {**options, "fill": fill}}


def best_resolution(height: int, width: int, candidates) -> tuple[int, int]:
    """(width, height) of the candidate the image keeps most pixels in once contain-fit (sides truncated), the
    least canvas wasted among equals, the first among those: vLLM's select_best_resolution."""
    best, kept, wasted = candidates[0], 0, math.inf
    for w, h in candidates:
        scale = min(w / width, h / height)
        effective = min(int(width * scale) * int(height * scale), width * height)
        if effective > kept or (effective == kept and w * h - effective < wasted):
            best, kept, wasted = (w, h), effective, w * h - effective
    return best


def plan(s, shapes: list, where: str) -> Plan:
    tile, o = s.size["height"], s.options
    jobs, grids, start = [], [], 0
    for i, (height, width) in enumerate(shapes):
        jobs.append(padded(i, height, width, (tile, tile), o["fill"], (start, start + 1), where))
        best_w, best_h = best_resolution(height, width, o["candidate_resolutions"]) if o["cropping"] else (tile, tile)
        columns, rows = best_w // tile, best_h // tile
        slots = (start + 1, start + 1 + rows * columns)
        # The tiles are patch rows of side S of the padded local view, row by row: one kernel run.
        jobs.append(padded(i, height, width, (best_h, best_w), o["fill"], slots, where, patches=(1, tile, 1)))
        grids.append((columns, rows))
        start = slots[1]
    crops = torch.tensor(grids, dtype=torch.int64).reshape(-1, 2)
    return Plan((start, s.normalization.channel, tile, tile), jobs, {"images_spatial_crop": crops})
