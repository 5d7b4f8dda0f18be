"""LLaVA-OneVision's image processor ("anyres"): per image, the whole image resized to one tile (the base
image), then the image resized, keeping its aspect ratio, to fit the best of image_grid_pinpoints, padded
(centered, with 0 before rescale and normalize) to that resolution and cut into tiles after it;
pixel_values [n, most tiles + 1, C, tile, tile] with do_pad (the images with fewer tiles padded with zero
slots), image_sizes (each image's height, width) and batch_num_images.

An image of a multi-image group (a nested list holding several images) is padded to a square with the mean
color BEFORE its resize, which no output padding reproduces: the adapter hands such calls to transformers
(SINGLE_IMAGE_GROUPS)."""

import math
from collections.abc import Mapping

import torch

from ..checks import image_name, is_int
from . import clip
from .base import CLIP_MEAN, CLIP_STD, COMMON_DEFAULTS, Job, Plan, side

KIND = "llava_onevision"
TYPES = ("LlavaOnevisionImageProcessor",)
PROCESSOR_CLASSES = ("LlavaOnevisionProcessor",)
PIL_BYTES_AS_FLOAT = False
# With return_tensors unset (base.unstack).
UNSTACKED = {"pixel_values": "rows", "image_sizes": "tuples", "batch_num_images": "ints"}
KEYS = ("image_grid_pinpoints", "do_pad")
SINGLE_IMAGE_GROUPS = True  # nested groups of several images are not reproduced (see above)
TILE = 384
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"height": TILE, "width": TILE},
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
    "do_pad": True,
    # transformers' class default: every grid of 1..6 x 1..6 tiles of 384, rows first.
    "image_grid_pinpoints": [[TILE * rows, TILE * columns] for rows in range(1, 7) for columns in range(1, 7)],
}
FILL = 0  # the byte transformers pads the resized image with, before rescale and normalize


def settings(config: Mapping, get, where: str) -> dict:
    size = clip.resize_size(config.get("size"), DEFAULTS["size"], where)
    tile = size.get("shortest_edge", size.get("height"))
    if size.get("width", tile) != tile:
        # The tiles are size["height"] squares resized again to size: a non-square size stretches each.
        raise ValueError(f"{where}: a non-square LLaVA-OneVision size is not implemented, got {size}")
    if get("do_center_crop") or config.get("crop_size") is not None:
        raise ValueError(f"{where}: crop_size / do_center_crop are not implemented for LLaVA-OneVision")
    options = {"tile": tile, "pinpoints": pinpoints(get("image_grid_pinpoints"), tile, where), "do_pad": get("do_pad")}
    return {"size": size, "options": options}


def pinpoints(value: object, tile: int, where: str) -> tuple[tuple[int, int], ...]:
    """image_grid_pinpoints: [height, width] resolutions, each whole tiles (a partial edge tile would be
    resized again, which the plan does not reproduce). Lists, as transformers' call validation demands."""
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where}: image_grid_pinpoints must be a non-empty list of [height, width], got {value!r}")
    checked = []
    for i, pair in enumerate(value):
        if not isinstance(pair, list) or len(pair) != 2 or not all(is_int(v) for v in pair):
            raise ValueError(f"{where}: image_grid_pinpoints[{i}] must be [height, width] ints, got {pair!r}")
        height, width = (side(where, f"image_grid_pinpoints[{i}]", v) for v in pair)
        if height % tile or width % tile:
            raise ValueError(
                f"{where}: image_grid_pinpoints[{i}] = {[height, width]} is not whole tiles of {tile} (not implemented)"
            )
        checked.append((height, width))
    return tuple(checked)


def best_resolution(height: int, width: int, resolutions) -> tuple[int, int]:
    """transformers' select_best_resolution: the resolution keeping most of the image's pixels once it is
    scaled to fit inside (scaled down, counted at most the image's own); on a tie, the one wasting fewest."""
    best, most_kept, least_wasted = None, 0, float("inf")
    for res_h, res_w in resolutions:
        scale = min(res_w / width, res_h / height)
        kept = min(int(width * scale) * int(height * scale), width * height)
        wasted = res_h * res_w - kept
        if kept > most_kept or (kept == most_kept and wasted < least_wasted):
            best, most_kept, least_wasted = (res_h, res_w), kept, wasted
    return best


def fit_size(height: int, width: int, target: tuple[int, int]) -> tuple[int, int]:
    """transformers' get_patch_output_size: the image scaled to fit `target`, one side exactly the target's,
    the other rounded up (and at most the target's)."""
    target_h, target_w = target
    scale_w, scale_h = target_w / width, target_h / height
    if scale_w < scale_h:
        return min(math.ceil(height * scale_w), target_h), target_w
    return target_h, min(math.ceil(width * scale_h), target_w)


def plan(s, shapes: list, where: str) -> Plan:
    """Per image, slot 0 the base image, then the tiles of the padded best resolution, row by row, in one
    kernel run; with do_pad the images with fewer tiles end on zeroed slots."""
    tile = s.options["tile"]
    layouts = []
    for height, width in shapes:
        canvas = best_resolution(height, width, s.options["pinpoints"])
        layouts.append((canvas, fit_size(height, width, canvas)))
    counts = [1 + (canvas[0] // tile) * (canvas[1] // tile) for canvas, _ in layouts]
    if s.options["do_pad"]:
        width_slots = max(counts)
    elif len(set(counts)) > 1:
        listed = ", ".join(f"{image_name(i, len(counts))}: {c}" for i, c in enumerate(counts))
        raise ValueError(
            f"{where}: without do_pad the images give different numbers of tiles ({listed}), which do not stack "
            f"into one pixel_values"
        )
    else:
        width_slots = counts[0]
    jobs, zero = [], []
    for i, ((canvas, fitted), count) in enumerate(zip(layouts, counts, strict=True)):
        start = i * width_slots
        jobs.append(Job(i, (tile, tile), (0, 0, tile, tile), (start, start + 1)))
        top, left = (canvas[0] - fitted[0]) // 2, (canvas[1] - fitted[1]) // 2
        jobs.append(
            Job(
                i,
                fitted,
                (0, 0, *fitted),
                (start + 1, start + count),
                patches=(1, tile, 1),
                pad=(*canvas, top, left, FILL),
            )
        )
        if count < width_slots:
            zero.append((start + count, start + width_slots))
    extras = {
        "image_sizes": torch.tensor([list(shape) for shape in shapes], dtype=torch.int64, device="cpu"),
        "batch_num_images": torch.ones(len(shapes), dtype=torch.int64, device="cpu"),
    }
    shape = (len(shapes), width_slots, s.normalization.channel, tile, tile)
    return Plan(shape, jobs, extras, slot_dims=2, zero=zero)
