"""BLIP's image processor (BlipImageProcessor, and its Pil spelling; BLIP-2's and InstructBLIP's checkpoints hold
it too): read in transformers 5.22 and 5.25, both backends are their base class's own steps with no override,
as SigLIP's are (a resize to size, then rescale and normalize: clip.plan without a crop), with BLIP's defaults:
384x384, bicubic, CLIP's mean and std, and default_to_square (a bare int size is a square, not a shortest edge)."""

from collections.abc import Mapping

from ..checks import is_int
from . import clip
from .base import CLIP_MEAN, CLIP_STD, COMMON_DEFAULTS

KIND = "blip"
TYPES = ("BlipImageProcessor",)
PROCESSOR_CLASSES = ("BlipProcessor", "Blip2Processor")
PIL_BYTES_AS_FLOAT = False  # its Pil backend returns the resized bytes as uint8, as its torchvision one
UNSTACKED = clip.UNSTACKED
KEYS = clip.KEYS
BY_REFERENCE = clip.BY_REFERENCE
DEFAULTS = {**COMMON_DEFAULTS, "size": {"height": 384, "width": 384}, "image_mean": CLIP_MEAN, "image_std": CLIP_STD}


def settings(config: Mapping, get, where: str) -> dict:
    size = config.get("size")
    if is_int(size) or isinstance(size, list | tuple):  # default_to_square: (height, width), an int a square
        height, width = clip.crop_size(size, where, "size")
        config = {**config, "size": {"height": height, "width": width}}
    return clip.settings(config, get, where, DEFAULTS)


plan = clip.plan
