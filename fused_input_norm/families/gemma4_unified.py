"""Gemma 4 Unified's image processor (Gemma4UnifiedImageProcessor, torchvision only; read in transformers 5.22
and 5.25): Gemma 4's (gemma4.py: the same budget, resize and rescale), whose pooling_kernel_size^2 patches of a
block are merged into one channel-last patch of pooling_kernel_size * patch_size (its patches_merge), rows in
raster order of the blocks: pixel_values [n, max_soft_tokens, (k * P)^2 * C], image_position_ids the blocks'
(x, y), num_soft_tokens_per_image the blocks."""

from . import gemma4
from .base import Plan

KIND = "gemma4_unified"
TYPES = ("Gemma4UnifiedImageProcessor",)
PROCESSOR_CLASSES = ("Gemma4UnifiedProcessor",)
TORCHVISION_ONLY = True
PIL_BYTES_AS_FLOAT = False
RESCALE_ALONE = True
KEYS = gemma4.KEYS
UNSTACKED = gemma4.UNSTACKED
DEFAULTS = gemma4.DEFAULTS
settings = gemma4.settings


def plan(s, shapes: list, where: str) -> Plan:
    return gemma4.plan(s, shapes, where, merged=True)
