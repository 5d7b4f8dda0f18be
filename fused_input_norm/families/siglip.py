"""SigLIP's image processor: CLIP's steps with a fixed 224x224 size, no crop, and mean = std = 0.5."""

from collections.abc import Mapping

from . import clip
from .base import COMMON_DEFAULTS

KIND = "siglip"
TYPES = ("SiglipImageProcessor",)
PROCESSOR_CLASSES = ("SiglipProcessor",)
PIL_BYTES_AS_FLOAT = False  # its Pil backend returns the resized bytes as uint8, as its torchvision one
UNSTACKED = clip.UNSTACKED
KEYS = clip.KEYS
BY_REFERENCE = clip.BY_REFERENCE
DEFAULTS = {**COMMON_DEFAULTS, "size": {"height": 224, "width": 224}}


def settings(config: Mapping, get, where: str) -> dict:
    return clip.settings(config, get, where, DEFAULTS)


plan = clip.plan
