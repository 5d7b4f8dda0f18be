"""vLLM's own DeepSeek-OCR processor served by FusedImageProcessor.

DeepSeek-OCR, DeepSeek-OCR-2 and Unlimited-OCR / -2 are not preprocessed by transformers but by
vllm/transformers_utils/processors/deepseek_ocr.py (DeepseekOCRProcessor, and unlimited_ocr.py's two
subclasses): its tokenize_with_images builds the prompt's tokens and, image by image, a global view
(ImageOps.pad to base_size with the grey of the mean; where crop mode is off, after a resize to image_size) and,
in crop mode, the tiles of dynamic_preprocess, each through ToTensor + Normalize. `serve` wraps
DeepseekOCRProcessor.tokenize_with_images: vLLM's own code still builds every token, run on a copy of the
processor given each image's size alone (its resize and crop of a stand-in cost nothing, its transform gives
placeholders), and the families.deepseek_ocr plan writes pixel_values and images_crop (reference "pil": the
installed Pillow's bicubic resize; float32). The tile grid vLLM chose is checked against the plan's.

vLLM's code is only served as this module knows it: the sources of the functions it reproduces must be those
of vllm 0.34.0 (their SHA-256 below); where they moved, `serve` changes nothing and says why. A call it does not
reproduce (an image that is not an RGB PIL image, a subclass it does not know, a mean that is not one grey)
runs vLLM's own code, and the first call of each kind logs why.

vllm is imported only inside `serve`.
"""

import copy
import importlib
import inspect
import logging

import torch

from .families import deepseek_ocr
from .vllm_internvl import HandedBack, digest, processor, unwrapped_class, wrap_method

MODULE = "vllm.transformers_utils.processors.deepseek_ocr"
UNLIMITED_MODULE = "vllm.transformers_utils.processors.unlimited_ocr"
CLASS = "DeepseekOCRProcessor"
# What this reproduces: these functions of MODULE (and the class's methods), as vllm 0.34.0 writes them.
REPRODUCED = {
    "find_closest_aspect_ratio": "df7ba22388724105094b31785d926e11fb39600bdd4e12d4022d3f522b90498b",
    "calculate_aspect_ratios": "80df66d4979e04026dfc97e181545dd5ac1e2a07e77a683e7d98a8e33c459a97",
    "dynamic_preprocess": "b5bf0823e47b70ed300602ec9b77b1bf8d444a6318f3e1add2ea8e12b78760d6",
    "ImageTransform.__init__": "4ef82a7e2d42483832614391b382bd02b361ec80883b9fbe37568c3c073e181a",
    "ImageTransform.__call__": "60f3cfc1e9b588320971f88241b01cc363d68d97bace940d36411ab42798a216",
    f"{CLASS}.__init__": "e51306bb3b70e2d5e4ec69def0adb098c86f60363f58953af4519a31c790830c",
    f"{CLASS}._prepare_global_view": "f1eafce60f636f60f9a834d8d17b6815424e8066ecdaea7fab0a559fb297ce99",
    f"{CLASS}.tokenize_with_images": "16f7d65cbd98ef801c32bf95ae6a32c1c25185cedc3a68c9d4bf1ee07977e624",
}
# The subclasses served, by name: the SHA-256 of the method each overrides, and whether its global view is
# resized to image_size first where crop mode is off (DeepseekOCRProcessor's is).
SUBCLASSES = {
    "UnlimitedOCRProcessor": (
        "tokenize_with_images",
        "a88296fd813287555bccf08a5e3da55822a14723d741fdeb55abb01220d6dc37",
        True,
    ),  # crop mode off for several images
    "UnlimitedOCR2Processor": (
        "_prepare_global_view",
        "8717eeee5c75432b4630225a772ec14b76fb0216dec2201f62b2d53bbe0868bd",
        False,
    ),  # the page padded as it is
}
# The vLLM classes whose images this module serves (scripts/vllm_reach.py reads it).
IMAGE_CLASSES = (CLASS, *SUBCLASSES)


class Shape:
    """An image's size alone: what vLLM's tokenize_with_images reads of an image to build the tokens (its
    dynamic_preprocess resizes and crops one, DeepSeek-VL2's pads and crops one: nothing to compute)."""

    def __init__(self, size: tuple[int, int]):
        self.size = size

    def resize(self, size, *args, **kwargs) -> "Shape":
        return Shape(tuple(size))

    def crop(self, box) -> "Shape":
        return Shape((box[2] - box[0], box[3] - box[1]))


def serve(log: logging.Logger) -> str:
    """Makes FusedImageProcessor serve vLLM's DeepseekOCRProcessor (and its Unlimited-OCR subclasses); returns
    the sentence to log."""
    served = f"FusedImageProcessor (reference 'pil') serves vLLM's {CLASS} in place of its Pillow resize, pad, ToTensor and Normalize"
    label = "vLLM's DeepSeek-OCR processing"
    _, cls, stop = unwrapped_class(MODULE, CLASS, "tokenize_with_images", REPRODUCED, served, label)
    if stop is not None:
        return stop
    try:
        unlimited = importlib.import_module(UNLIMITED_MODULE)
    except ImportError as e:
        return f"{label} stays vLLM's: this vLLM has no {UNLIMITED_MODULE} ({e})"
    original = cls.tokenize_with_images
    resize_first = {cls: True}
    for name, (method, expected, first) in SUBCLASSES.items():
        subclass = getattr(unlimited, name, None)
        if subclass is not None and method in vars(subclass) and digest(getattr(subclass, method)) == expected:
            resize_first[subclass] = first
    handed_back = HandedBack(log)
    signature = inspect.signature(original)

    def serve_call(upstream, args: tuple, kwargs: dict) -> tuple | str:
        call = signature.bind(upstream, *args, **kwargs)
        call.apply_defaults()
        return _served(original, upstream, resize_first, call.arguments)

    wrap_method(cls, "tokenize_with_images", serve_call, handed_back)
    return served


def _served(original, upstream, resize_first: dict, call: dict) -> tuple | str:
    """vLLM's tokenize_with_images' outputs for this call, its pixels FusedImageProcessor's, or why the call goes
    to vLLM's code."""
    from PIL import Image

    if type(upstream) not in resize_first:
        return f"{type(upstream).__name__} is a subclass of {CLASS} this does not know (or not vllm 0.34.0's)"
    images, cropping = call["images"], call["cropping"]
    if not isinstance(images, list) or not images:
        return "images is not a non-empty list"
    for image in images:
        if not isinstance(image, Image.Image) or image.mode != "RGB":
            return f"an image that is not an RGB PIL image ({getattr(image, 'mode', type(image).__name__)})"
    transform = upstream.image_transform
    fills = {int(x * 255) for x in transform.mean}
    if len(fills) != 1:
        return f"the mean {tuple(transform.mean)} pads with a color that is not one grey"
    tile, base = upstream.image_size, upstream.base_size
    grids = [deepseek_ocr.tile_grid(i.height, i.width, tile, bool(cropping), upstream.max_crops) for i in images]
    stand_in = copy.copy(upstream)
    stand_in.image_transform = lambda image: torch.empty(0)
    stand_in._prepare_global_view = lambda image, cropping: image
    shapes = [Shape(image.size) for image in images]
    ids, _, _, mask, spatial, counts, sizes = original(
        stand_in, call["conversation"], shapes, bos=call["bos"], eos=call["eos"], cropping=cropping
    )
    if spatial.tolist() != [list(grid) for grid in grids]:
        return f"vLLM's tile grids {spatial.tolist()} are not the plan's {grids}"
    config = {
        "image_processor_type": CLASS,
        "size": tile,
        "base_size": base,
        "max_crops": upstream.max_crops,
        "cropping": bool(cropping),
        "resize_first": resize_first[type(upstream)],
        "fill": fills.pop(),
        "resample": 3,  # Pillow's default filter for RGB images: bicubic
        "do_normalize": bool(transform.normalize),
        "image_mean": list(transform.mean),
        "image_std": list(transform.std),
    }
    try:
        pixel_values = _run({**config, "view": "global"}, images)["pixel_values"]
        if any(grid != (1, 1) for grid in grids):
            crops = _run({**config, "view": "tiles"}, images)["pixel_values"]
        else:  # vLLM's empty images_crop
            crops = torch.zeros((0, 3, tile, tile))
    except (TypeError, ValueError) as e:
        return str(e)
    return ids, pixel_values, crops, mask, spatial, counts, sizes


def _run(config: dict, images: list) -> dict:
    items = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in config.items()))
    return processor(items, "pil")(images)
