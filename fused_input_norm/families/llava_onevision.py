"""LLaVA-OneVision's image processor ("anyres"): per image, the whole image resized to one tile (the base
image), then the image resized, keeping its aspect ratio, to fit the best of image_grid_pinpoints, padded
(centered, with 0 before rescale and normalize) to that resolution and cut into tiles after it;
pixel_values [n, most tiles + 1, C, tile, tile] with do_pad (the images with fewer tiles padded with zero
slots), image_sizes (each image's height, width) and batch_num_images.

An image of a multi-image sample (a nested list holding several images) is not tiled: it is padded to a
square of the instance's image_mean bytes (int(mean * 255) per channel) BEFORE its resize, then resized to one
tile, its one slot (a padded stage, then one job). A flat list is one sample per image, as transformers'
preprocess counts them (`samples`), not one sample of several as images.samples reads it."""

import math
from collections.abc import Mapping

import torch

from ..checks import image_name, is_int
from . import clip
from .base import CLIP_MEAN, CLIP_STD, COMMON_DEFAULTS, Job, Plan, Stage, side

KIND = "llava_onevision"
TYPES = ("LlavaOnevisionImageProcessor",)
PROCESSOR_CLASSES = ("LlavaOnevisionProcessor",)
PIL_BYTES_AS_FLOAT = False
# With return_tensors unset (base.unstack).
UNSTACKED = {"pixel_values": "rows", "image_sizes": "tuples", "batch_num_images": "ints"}
KEYS = ("image_grid_pinpoints", "do_pad")
BY_SAMPLE = True  # plan() reads how many images each sample holds (see samples)
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
    options = {
        "tile": tile,
        "pinpoints": pinpoints(get("image_grid_pinpoints"), tile, where),
        "do_pad": get("do_pad"),
        "do_resize": get("do_resize"),
        # pad_to_square's background: transformers reads the instance's image_mean (self.image_mean), which a
        # call's image_mean does not change; the adapter hands back a multi-image call that sets another one.
        "fill": tuple(int(x * 255) for x in square_mean(get("image_mean"), where)),
    }
    return {"size": size, "options": options}


def square_mean(value: object, where: str) -> list[float]:
    """image_mean as pad_to_square reads it (a sequence of per-channel floats; a scalar has no channels)."""
    if isinstance(value, int | float):
        return [float(value)]
    if not isinstance(value, list | tuple) or not all(isinstance(v, int | float) for v in value):
        raise ValueError(f"{where}: image_mean must be a number or a list of numbers, got {value!r}")
    return list(value)


def samples(images, where: str) -> list[int]:
    """How many images each sample of a call holds, as LlavaOnevisionImageProcessor.preprocess counts them
    (its batch_num_images): a nested list, one count per non-empty inner list; a flat list, one image per
    sample; anything else (one image, a 4-D batch) one sample of one image."""
    if isinstance(images, list | tuple) and images and isinstance(images[0], list | tuple):
        return [len(group) for group in images if group]
    if isinstance(images, list | tuple):
        return [1] * len(images)
    return [1]


def pinpoints(value: object, tile: int | None, where: str) -> tuple[tuple[int, int], ...]:
    """image_grid_pinpoints: [height, width] resolutions, each whole tiles where a tile is given (a partial edge
    tile would be resized again, which LLaVA-OneVision's plan does not reproduce; LLaVA-NeXT's passes None).
    Lists, as transformers' call validation demands."""
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where}: image_grid_pinpoints must be a non-empty list of [height, width], got {value!r}")
    checked = []
    for i, pair in enumerate(value):
        if not isinstance(pair, list) or len(pair) != 2 or not all(is_int(v) for v in pair):
            raise ValueError(f"{where}: image_grid_pinpoints[{i}] must be [height, width] ints, got {pair!r}")
        height, width = (side(where, f"image_grid_pinpoints[{i}]", v) for v in pair)
        if tile and (height % tile or width % tile):
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


def slots_per_image(counts: list[int], do_pad: bool, where: str) -> int:
    """The slots each image gets: with do_pad the most any image fills (the rest zeroed); without it, images
    filling different numbers do not stack (transformers returns them as a list, or fails to make a tensor)."""
    if do_pad:
        return max(counts)
    if len(set(counts)) > 1:
        listed = ", ".join(f"{image_name(i, len(counts))}: {c}" for i, c in enumerate(counts))
        raise ValueError(
            f"{where}: without do_pad the images give different numbers of tiles ({listed}), which do not stack "
            f"into one pixel_values"
        )
    return counts[0]


def plan(s, shapes: list, where: str, samples: list[int] | None = None) -> Plan:
    """Per image of a one-image sample, slot 0 the base image, then the tiles of the padded best resolution,
    row by row, in one kernel run; per image of a multi-image sample, its padded square resized to one tile
    (one slot). With do_pad the images with fewer slots end on zeroed ones."""
    tile = s.options["tile"]
    samples = [1] * len(shapes) if samples is None else samples
    if sum(samples) != len(shapes):
        # transformers' preprocess counts a 4-D batch as one image, then fails on its second one
        raise ValueError(
            f"{where}: the samples hold {sum(samples)} images but the call gives {len(shapes)} (a 4-D batch is one "
            f"sample of one image to LLaVA-OneVision's processor: pass a list of images)"
        )
    single = [count == 1 for count in samples for _ in range(count)]
    if not all(single) and not s.options["do_resize"]:
        raise ValueError(f"{where}: a multi-image sample without do_resize is not implemented (its squares differ)")
    layouts = []
    for (height, width), alone in zip(shapes, single, strict=True):
        canvas = best_resolution(height, width, s.options["pinpoints"]) if alone else None
        layouts.append((canvas, fit_size(height, width, canvas) if alone else None))
    counts = [1 + (canvas[0] // tile) * (canvas[1] // tile) if canvas else 1 for canvas, _ in layouts]
    width_slots = slots_per_image(counts, s.options["do_pad"], where)
    jobs, zero, stages = [], [], []
    for i, ((canvas, fitted), count) in enumerate(zip(layouts, counts, strict=True)):
        start = i * width_slots
        source = i
        if canvas is None:  # in a multi-image sample: its square (pad_to_square), resized to one tile
            height, width = shapes[i]
            square = max(height, width)
            if height != width:
                pad = (square, square, (square - height) // 2, (square - width) // 2, s.options["fill"])
                stages.append(Stage(i, (height, width), pad=pad))
                source = len(shapes) + len(stages) - 1
        jobs.append(Job(source, (tile, tile), (0, 0, tile, tile), (start, start + 1)))
        if count < width_slots:
            zero.append((start + count, start + width_slots))
        if canvas is None:
            continue
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
    extras = {
        "image_sizes": torch.tensor([list(shape) for shape in shapes], dtype=torch.int64, device="cpu"),
        "batch_num_images": torch.tensor(samples, dtype=torch.int64, device="cpu"),
    }
    shape = (len(shapes), width_slots, s.normalization.channel, tile, tile)
    return Plan(shape, jobs, extras, slot_dims=2, zero=zero, stages=stages)
