"""Gemma 3's image processor: every image resized to size (896x896 in its checkpoints), pixel_values
[n, C, h, w] and num_crops (int64 [images]). With do_pan_and_scan, an image elongated enough is also cut into
2 to pan_and_scan_max_num_crops crops of the source along its long side, each resized to size as well: an
image's slots are the whole image first, then its crops in row-major order, as both transformers backends
order them; num_crops counts the crops (0 for an image left whole)."""

import math
from collections.abc import Mapping

import torch

from ..checks import image_name, is_number, positive_int
from . import clip
from .base import COMMON_DEFAULTS, STANDARD_MEAN, STANDARD_STD, Job, Plan, not_one_pixel

KIND = "gemma3"
TYPES = ("Gemma3ImageProcessor",)
PROCESSOR_CLASSES = ("Gemma3Processor",)
PIL_BYTES_AS_FLOAT = False  # its Pil backend returns the resized bytes as uint8, as its torchvision one
PAN_AND_SCAN_KEYS = ("pan_and_scan_min_crop_size", "pan_and_scan_max_num_crops", "pan_and_scan_min_ratio_to_activate")
UNSTACKED = {"pixel_values": "rows", "num_crops": "ints"}  # return_tensors unset (base.unstack)
KEYS = ("do_pan_and_scan", *PAN_AND_SCAN_KEYS)
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"height": 224, "width": 224},
    "resample": 2,  # bilinear
    "image_mean": STANDARD_MEAN,
    "image_std": STANDARD_STD,
    # transformers' class leaves these None: off, and no crop settings (Gemma3Processor's call passes them).
    "do_pan_and_scan": False,
    **dict.fromkeys(PAN_AND_SCAN_KEYS),
}


def settings(config: Mapping, get, where: str) -> dict:
    pan_and_scan = None
    if get("do_pan_and_scan"):
        if not get("do_resize"):
            # transformers' torchvision backend resizes the crops anyway, its Pil backend does not: the two
            # disagree, and neither is reproduced.
            raise ValueError(f"{where}: do_pan_and_scan with do_resize off is not implemented")
        min_crop, max_crops, min_ratio = (get(key) for key in PAN_AND_SCAN_KEYS)
        for key, value in zip(PAN_AND_SCAN_KEYS[:2], (min_crop, max_crops), strict=True):
            positive_int(where, f"{key} (do_pan_and_scan needs it)", value)
        if not is_number(min_ratio):
            raise ValueError(
                f"{where}: pan_and_scan_min_ratio_to_activate (do_pan_and_scan needs it) must be a number, got "
                f"{min_ratio!r}"
            )
        pan_and_scan = (min_crop, max_crops, float(min_ratio))
    return {"size": fixed_size(config.get("size"), where), "options": {"pan_and_scan": pan_and_scan}}


def fixed_size(size: object, where: str) -> dict:
    """{"height", "width"}, as transformers standardizes Gemma 3's size (default_to_square: an int is a square,
    a pair is (height, width)); a size of edges (an aspect-preserving resize) is not implemented."""
    if size is None:
        return dict(DEFAULTS["size"])
    height, width = clip.crop_size(size, where, "size")
    not_one_pixel(where, "size", height, width)
    return {"height": height, "width": width}


def pan_and_scan_boxes(
    height: int, width: int, min_crop_size: int, max_num_crops: int, min_ratio: float
) -> list[tuple[int, int, int, int]]:
    """transformers' Gemma 3 pan and scan: (top, left, height, width) of each crop of a height x width image,
    row-major; [] when the image is not elongated enough or the crops would be smaller than min_crop_size.
    The crops split the long side into equal ceil parts (the last one shorter where it does not divide);
    the float expressions are transformers', so that each rounds where its does."""
    long, short = (width, height) if width >= height else (height, width)
    if long / short < min_ratio:
        return []
    count = math.floor(long / short + 0.5)  # the aspect ratio, half rounded up
    count = min(math.floor(long / min_crop_size), count)
    count = min(max_num_crops, max(2, count))
    rows, cols = (1, count) if width >= height else (count, 1)
    crop_h, crop_w = math.ceil(height / rows), math.ceil(width / cols)
    if min(crop_h, crop_w) < min_crop_size:
        return []
    return [
        (top, left, min(crop_h, height - top), min(crop_w, width - left))
        for top in range(0, rows * crop_h, crop_h)
        for left in range(0, cols * crop_w, crop_w)
    ]


def plan(s, shapes: list, where: str) -> Plan:
    """Per image: its slot (the whole image), then one slot per pan-and-scan crop (a box of the source)."""
    count = len(shapes)
    jobs, num_crops = [], []
    for i, (height, width) in enumerate(shapes):
        size = (s.size["height"], s.size["width"]) if s.do_resize else (height, width)
        boxes = _crops(s, image_name(i, count), height, width, where)
        for box in (None, *boxes):  # None: the whole image
            jobs.append(Job(i, size, (0, 0, *size), (len(jobs), len(jobs) + 1), box))
        num_crops.append(len(boxes))
    sizes = {job.size for job in jobs}
    if len(sizes) > 1:  # only without do_resize
        listed = ", ".join(f"{image_name(i, count)}: {h}x{w}" for i, (h, w) in enumerate(shapes))
        raise ValueError(
            f"{where}: without do_resize the images must all be one size to stack into one pixel_values, got {listed}"
        )
    shape = (len(jobs), s.normalization.channel, *jobs[0].size)
    return Plan(shape, jobs, {"num_crops": torch.tensor(num_crops, dtype=torch.int64, device="cpu")})


def _crops(s, name: str, height: int, width: int, where: str) -> list[tuple[int, int, int, int]]:
    if s.options["pan_and_scan"] is None:
        return []
    boxes = pan_and_scan_boxes(height, width, *s.options["pan_and_scan"])
    if any(h <= 0 or w <= 0 for _, _, h, w in boxes):
        # So many crops of so small a size that the last ones start past the image's edge.
        raise ValueError(
            f"{where}: {name} is {height}x{width}: pan and scan (pan_and_scan_min_crop_size "
            f"{s.options['pan_and_scan'][0]}) would cut empty crops from it, which transformers cannot resize"
        )
    return boxes
