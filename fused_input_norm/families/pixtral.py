"""Pixtral's image processor, which Mistral Small 3.1 / 3.2 and Pixtral-12B in transformers format hold: each
image scaled down (never up) to fit in size["longest_edge"] (or a height x width box), its sides then rounded
UP to multiples of patch_size (so a small image grows by up to a patch less one pixel); pixel_values
[n, C, most rows, most columns] with do_pad, each image in the top-left corner of its slot and the rest 0
AFTER rescale and normalize (Plan.zero's boxes), and image_sizes (each resized image's height, width).
PixtralProcessor passes patch_size = the vision patch times spatial_merge_size on every call (28 for Mistral
Small 3.x), not the image processor config's own (14)."""

import math
from collections.abc import Mapping

import torch

from ..checks import image_name
from . import clip
from .base import CLIP_MEAN, CLIP_STD, COMMON_DEFAULTS, Job, Plan, side

KIND = "pixtral"
TYPES = ("PixtralImageProcessor",)
PROCESSOR_CLASSES = ("PixtralProcessor",)
PIL_BYTES_AS_FLOAT = False  # its Pil backend returns the resized bytes as uint8, as its torchvision one
UNSTACKED = {"image_sizes": "sizes"}  # return_tensors unset (base.unstack); pixel_values stay stacked
KEYS = ("patch_size", "do_pad")
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"longest_edge": 1024},
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
    "patch_size": {"height": 16, "width": 16},
    "do_pad": True,
}


def settings(config: Mapping, get, where: str) -> dict:
    if get("do_center_crop") or config.get("crop_size") is not None:
        # transformers' two backends disagree on image_sizes after a crop (before it / after it).
        raise ValueError(f"{where}: crop_size / do_center_crop are not implemented for Pixtral")
    size = bounds(get("size"), where)
    patch = clip.crop_size(get("patch_size"), where, "patch_size")
    return {"size": size, "options": {"patch": patch, "do_pad": get("do_pad")}}


def bounds(size: object, where: str) -> dict:
    """{"longest_edge"} or {"height", "width"} (a bare int or a pair is the latter, transformers' default_to_square):
    the box each image is scaled down to fit in."""
    if isinstance(size, Mapping) and set(size) == {"longest_edge"}:
        return {"longest_edge": side(where, "size['longest_edge']", size["longest_edge"])}
    if isinstance(size, Mapping) and set(size) != {"height", "width"}:
        raise ValueError(f"{where}: size must be {{'longest_edge'}} or {{'height', 'width'}}, got {size!r}")
    return dict(zip(("height", "width"), clip.crop_size(size, where, "size"), strict=True))


def fit_size(height: int, width: int, box: tuple[int, int], patch: tuple[int, int]) -> tuple[int, int]:
    """transformers' Pixtral resize size: an image larger than `box` (height, width) divided by its largest side
    ratio, each side floored (the float division is transformers', to floor where its does); then each side
    rounded up to a multiple of its patch side. 0 for a side that the fit floors to nothing."""
    ratio = max(height / box[0], width / box[1])
    if ratio > 1:
        height, width = math.floor(height / ratio), math.floor(width / ratio)
    return -(-height // patch[0]) * patch[0], -(-width // patch[1]) * patch[1]


def plan(s, shapes: list, where: str) -> Plan:
    """One [C, rows, columns] slot per image, its resized image at the top left; with do_pad the slots are the
    batch's largest sides and each image's margin (below, and right of it) is zeroed after the kernel."""
    box = (s.size["longest_edge"],) * 2 if "longest_edge" in s.size else (s.size["height"], s.size["width"])
    count = len(shapes)
    sizes = []
    for i, (height, width) in enumerate(shapes):
        size = fit_size(height, width, box, s.options["patch"]) if s.do_resize else (height, width)
        if 0 in size:
            raise ValueError(
                f"{where}: {image_name(i, count)} is {height}x{width}: fitting it in {box[0]}x{box[1]} leaves a "
                f"side of 0 pixels, which transformers cannot resize to"
            )
        sizes.append(size)
    if not s.options["do_pad"] and len(set(sizes)) > 1:
        listed = ", ".join(f"{image_name(i, count)}: {h}x{w}" for i, (h, w) in enumerate(sizes))
        raise ValueError(
            f"{where}: without do_pad the images come out in different sizes ({listed}), which do not stack into "
            f"one pixel_values"
        )
    rows, columns = max(h for h, _ in sizes), max(w for _, w in sizes)
    jobs, zero = [], []
    for i, (height, width) in enumerate(sizes):
        pad = (rows, columns, 0, 0, 0) if (height, width) != (rows, columns) else ()
        jobs.append(Job(i, (height, width), (0, 0, height, width), (i, i + 1), pad=pad))
        # transformers pads after normalize, with 0: the canvas's fill (a byte put through the affine) is not
        # that, so the margins are zeroed: the rows below the image, then the columns right of it.
        zero += [(i, i + 1, top, left, h, w) for top, left, h, w in margins(height, width, rows, columns) if h and w]
    image_sizes = torch.tensor(sizes, dtype=torch.int64, device="cpu").reshape(count, 2)
    return Plan((count, s.normalization.channel, rows, columns), jobs, {"image_sizes": image_sizes}, zero=zero)


def margins(height: int, width: int, rows: int, columns: int) -> list[tuple[int, int, int, int]]:
    """(top, left, height, width) of a rows x columns canvas outside its top-left height x width corner."""
    return [(height, 0, rows - height, columns), (0, width, height, columns - width)]
