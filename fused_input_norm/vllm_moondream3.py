"""vLLM's own Moondream 3 image preprocessing served by FusedImageProcessor.

Moondream 3 (`Moondream3ForCausalLM`, and `HfMoondream`: the architecture moondream/moondream3-preview's
config.json names) is not preprocessed by transformers but by vllm/transformers_utils/processors/moondream3.py:
Moondream3Processor.preprocess_image resizes each image twice with Pillow's LANCZOS (to a 378 global view, and
to a grid of overlapping 378 crops), then rescales and normalizes the crops in bfloat16. `serve` replaces
preprocess_image with one that runs the families.moondream3 plan (the grid resize a uint8 stage, the crops
boxes of it) through FusedImageProcessor, reference "pil" (the installed Pillow's resize): the same bfloat16
pixel_values and tiling.

vLLM's code is only served as this module knows it: the sources of the functions it reproduces must be those
of vllm 0.34.0 (their SHA-256 below); where they moved, `serve` changes nothing and says why. A call it does
not reproduce (an image that is not an RGB or gray PIL image, return_tensors other than "pt", settings the
family refuses, a subclass) runs vLLM's own code, and the first call of each kind logs why.

vllm is imported only inside `serve`.
"""

import functools
import inspect
import logging

import torch

from .processor import FusedImageProcessor
from .vllm_internvl import HandedBack, bound_arguments, unwrapped_class, wrap_method

MODULE = "vllm.transformers_utils.processors.moondream3"
CLASS = "Moondream3Processor"
# What this reproduces: these functions of MODULE (and the class's methods), as vllm 0.34.0 writes them.
REPRODUCED = {
    "select_tiling": "b8a550f1005286cce135445076b2202448188cd434127ea3562027e04253de89",
    "convert_image_mode": "3242c1dcf5631812894bec08e93d1b1ec340a349511854f01edb0c1ff2822a46",
    f"{CLASS}._to_pil_image": "6e86ad1cf1a46fe0b049ae9b556ce2853c85a785dfd78e55bed37a7fd0dfdb1a",
    f"{CLASS}.preprocess_image": "7643ecc3458aa16cf84771ec978ea21768ce2560461c37d43de3a0a7f8f85c27",
}
SETTINGS = ("max_crops", "overlap_margin", "crop_size", "patch_size")


def serve(log: logging.Logger) -> str:
    """Makes FusedImageProcessor serve vLLM's Moondream3Processor.preprocess_image; returns the sentence to log."""
    served = (
        f"FusedImageProcessor (reference 'pil') serves vLLM's {CLASS} in place of its Pillow LANCZOS resizes, "
        f"crops and bfloat16 normalize"
    )
    label = "vLLM's Moondream 3 processing"
    _, cls, stop = unwrapped_class(MODULE, CLASS, "preprocess_image", REPRODUCED, served, label)
    if stop is not None:
        return stop
    original = cls.preprocess_image
    handed_back = HandedBack(log)
    signature = inspect.signature(original)

    wrap_method(
        cls,
        "preprocess_image",
        lambda upstream, args, kwargs: _served(cls, signature, upstream, args, kwargs),
        handed_back,
    )
    return served


def _served(cls, signature: inspect.Signature, upstream, args: tuple, kwargs: dict) -> tuple | str:
    """preprocess_image's (pixel_values, tiling) for this call, or why it goes to vLLM's code."""
    from PIL import Image

    call = bound_arguments(cls, "preprocess_image", signature, upstream, args, kwargs)
    if isinstance(call, str):
        return call
    image = call["image"]
    if not isinstance(image, Image.Image):
        return f"an image that is not a PIL image ({type(image).__name__})"
    if call["convert_to_rgb"] is not True and call["convert_to_rgb"] is not False:
        return f"convert_to_rgb={call['convert_to_rgb']!r} (not a bool)"
    if image.mode != "RGB" and not (image.mode == "L" and call["convert_to_rgb"]):
        return f"a {image.mode} image (convert_to_rgb={call['convert_to_rgb']})"
    if call["return_tensors"] != "pt":
        return f"return_tensors={call['return_tensors']!r} (only 'pt' is served)"
    try:
        out = _processor(tuple((key, call[key]) for key in SETTINGS))(image, torch.bfloat16)
    except (TypeError, ValueError) as e:
        return str(e)
    rows, columns = out["tilings"][0].tolist()
    return out["pixel_values"], (rows, columns)


@functools.lru_cache(maxsize=8)  # one per distinct setting (per-request crop settings), least recently used out
def _processor(items: tuple) -> FusedImageProcessor:
    config = {"image_processor_type": "Moondream3ImageProcessor", **dict(items)}
    return FusedImageProcessor.from_preprocessor_config(config, device=torch.device("cpu"), reference="pil")
