"""vLLM's Moondream 3 image preprocessing (Moondream3Processor.preprocess_image,
vllm/transformers_utils/processors/moondream3.py, what vLLM runs for Moondream3ForCausalLM / HfMoondream): a
global view (the whole image resized to crop_size x crop_size) and overlapping local crops: the image resized to
a grid of crop windows plus a margin all round, cut into crop_size squares that step by the window (so each
overlaps its neighbours by twice the margin). Both resizes are Pillow's LANCZOS on the uint8 image; the crops
are then rescaled and normalized in bfloat16, one rounding per step (x / 255, - 0.5, / 0.5), as vLLM does.
pixel_values [crops, C, S, S] (each image's global view, then its crops row by row) and tilings (int64 [n, 2]:
each image's rows and columns of crops).

The grid resize is a uint8 stage (the bytes Pillow returns); each local crop is a job copying a box of it (no
second resampling), so the overlap costs a copy, not a resize.
"""

import math
from collections.abc import Mapping

import torch

from ..checks import is_int, positive_int
from .base import COMMON_DEFAULTS, STANDARD_MEAN, STANDARD_STD, Job, Plan, Stage, side

KIND = "moondream3"
TYPES = ("Moondream3ImageProcessor",)  # no transformers class: vllm_moondream3 builds the config
PROCESSOR_CLASSES = ()
PIL_BYTES_AS_FLOAT = False
KEYS = ("crop_size", "max_crops", "overlap_margin", "patch_size")
# Moondream3Processor's defaults (Moondream3ProcessorKwargs).
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"height": 378, "width": 378},
    "resample": 1,  # LANCZOS
    "image_mean": STANDARD_MEAN,
    "image_std": STANDARD_STD,
    "crop_size": 378,
    "max_crops": 12,
    "overlap_margin": 4,
    "patch_size": 14,
}


def settings(config: Mapping, get, where: str) -> dict:
    crop = side(where, "crop_size", get("crop_size"))
    patch = positive_int(where, "patch_size", get("patch_size"))
    max_crops = positive_int(where, "max_crops", get("max_crops"))
    margin = get("overlap_margin")
    if not is_int(margin) or margin < 0:
        raise ValueError(f"{where}: overlap_margin must be an int >= 0, got {margin!r}")
    if crop % patch:
        # vLLM then leaves a strip of each crop zero bytes (-1 after normalize): not reproduced
        raise ValueError(f"{where}: crop_size ({crop}) is not a multiple of patch_size ({patch})")
    window = (crop // patch - 2 * margin) * patch
    if window <= 0:
        raise ValueError(
            f"{where}: crop_size ({crop}) leaves no crop window inside two overlap margins of "
            f"{margin} patches of {patch}"
        )
    if not get("do_resize") or not get("do_rescale") or not get("do_normalize"):
        raise ValueError(f"{where}: Moondream 3 always resizes, rescales and normalizes")
    options = {"window": window, "margin": margin * patch, "max_crops": max_crops}
    return {"size": {"height": crop, "width": crop}, "options": options}


def normalize_steps(s) -> torch.dtype:
    """vLLM's Moondream 3 rescales and normalizes the uint8 crops in bfloat16, one rounding per step."""
    return torch.bfloat16


def select_tiling(height: int, width: int, window: int, max_crops: int) -> tuple[int, int]:
    """(rows, columns) of crop windows covering an image of this size (less its margins), as vLLM's
    select_tiling chooses them: one where a side fits one window; else at least enough to cover each side,
    scaled down to at most max_crops, spread after the image's aspect ratio."""
    if height <= window or width <= window:
        return 1, 1
    min_h, min_w = math.ceil(height / window), math.ceil(width / window)
    if min_h * min_w > max_crops:
        ratio = math.sqrt(max_crops / (min_h * min_w))
        return max(1, math.floor(min_h * ratio)), max(1, math.floor(min_w * ratio))
    rows = max(math.floor(math.sqrt(max_crops * height / width)), min_h)
    columns = max(math.floor(math.sqrt(max_crops * width / height)), min_w)
    if rows * columns > max_crops:
        if columns > rows:
            columns = math.floor(max_crops / rows)
        else:
            rows = math.floor(max_crops / columns)
    return max(1, rows), max(1, columns)


def plan(s, shapes: list, where: str) -> Plan:
    """Each image's global view, then its crops row by row (boxes of its grid resize, a stage)."""
    crop, o = s.size["height"], s.options
    window, margin = o["window"], o["margin"]
    jobs, stages, tilings, start = [], [], [], 0
    for i, (height, width) in enumerate(shapes):
        rows, columns = select_tiling(height - 2 * margin, width - 2 * margin, window, o["max_crops"])
        tilings.append((rows, columns))
        jobs.append(Job(i, (crop, crop), (0, 0, crop, crop), (start, start + 1)))
        stage = len(shapes) + len(stages)
        stages.append(Stage(i, (rows * window + 2 * margin, columns * window + 2 * margin)))
        for r in range(rows):
            for c in range(columns):
                slot = start + 1 + r * columns + c
                box = (r * window, c * window, crop, crop)
                jobs.append(Job(stage, (crop, crop), (0, 0, crop, crop), (slot, slot + 1), box=box))
        start += 1 + rows * columns
    tilings = torch.tensor(tilings, dtype=torch.int64, device="cpu").reshape(-1, 2)
    return Plan((start, s.normalization.channel, crop, crop), jobs, {"tilings": tilings}, stages=stages)
