"""Gemma 4's image processor (Gemma4ImageProcessor, and its Pil spelling; read in transformers 5.22 and 5.25):
each image resized, aspect ratio kept, to the largest size whose sides are multiples of pooling_kernel_size *
patch_size and whose patch_size patches number at most max_soft_tokens * pooling_kernel_size^2 (the budget),
then cut into patches in raster order, each channel-last [P, P, C], and padded with zero rows to the budget:
pixel_values [n, budget, P * P * C], image_position_ids int64 [n, budget, 2] (each patch's (x, y), -1 on the
padding), num_soft_tokens_per_image (its patches / pooling_kernel_size^2). It rescales without normalizing
(mean 0, std 1): pixels in [0, 1]. Gemma 4 Unified's processor (gemma4_unified.py) is this one with its
pooling_kernel_size^2 patches merged into one, which plan() takes as `merged`."""

import math
from collections.abc import Mapping

import torch

from ..checks import image_name, positive_int
from ..geometry import MAX_SIDE
from .base import COMMON_DEFAULTS, Job, Plan

KIND = "gemma4"
TYPES = ("Gemma4ImageProcessor",)
PROCESSOR_CLASSES = ("Gemma4Processor",)
PIL_BYTES_AS_FLOAT = False  # its Pil patchify and pad keep the resized bytes uint8
RESCALE_ALONE = True  # its checkpoints rescale without normalizing: float32 x * rescale_factor, the kernel's affine
SOFT_TOKENS = (70, 140, 280, 560, 1120)  # the budgets its processor accepts
KEYS = ("patch_size", "max_soft_tokens", "pooling_kernel_size")
UNSTACKED = {"num_soft_tokens_per_image": "ints"}  # return_tensors unset (base.unstack)
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": None,  # unread: the budget decides the size
    "resample": 3,  # bicubic
    "do_normalize": False,
    "image_mean": [0.0, 0.0, 0.0],
    "image_std": [1.0, 1.0, 1.0],
    "patch_size": 16,
    "max_soft_tokens": 280,
    "pooling_kernel_size": 3,
}


def settings(config: Mapping, get, where: str) -> dict:
    patch_size = positive_int(where, "patch_size", get("patch_size"))
    pooling = positive_int(where, "pooling_kernel_size", get("pooling_kernel_size"))
    tokens = get("max_soft_tokens")
    if tokens not in SOFT_TOKENS:
        raise ValueError(f"{where}: max_soft_tokens must be one of {SOFT_TOKENS}, got {tokens!r}")
    if patch_size * pooling >= MAX_SIDE:
        raise ValueError(
            f"{where}: patch_size * pooling_kernel_size must be below {MAX_SIDE}, got {patch_size * pooling}"
        )
    return {"size": {}, "patch_size": patch_size, "options": {"max_soft_tokens": tokens, "pooling": pooling}}


def budget_size(height: int, width: int, patch_size: int, max_patches: int, pooling: int) -> tuple[int, int]:
    """transformers' get_aspect_ratio_preserving_size: the largest (height, width), multiples of pooling *
    patch_size, holding at most max_patches patches; a side that rounds to 0 is one multiple, the other its
    whole ratio of multiples (at most the budget's side). Its float expressions, so each rounds where its does;
    ValueError where it raises."""
    target_px = max_patches * patch_size**2
    factor = math.sqrt(target_px / (height * width))
    step = pooling * patch_size
    out_h = math.floor(factor * height / step) * step
    out_w = math.floor(factor * width / step) * step
    if out_h == 0 and out_w == 0:
        raise ValueError(f"it would be resized to 0x0 (sides multiples of pooling_kernel_size * patch_size = {step})")
    longest = (max_patches // pooling**2) * step
    if out_h == 0:
        out_h, out_w = step, min(math.floor(width / height) * step, longest)
    elif out_w == 0:
        out_h, out_w = min(math.floor(height / width) * step, longest), step
    if out_h * out_w > target_px:
        raise ValueError(f"resized to {out_h}x{out_w} it would exceed {max_patches} patches of {patch_size}")
    return out_h, out_w


def plan(s, shapes: list, where: str, merged: bool = False) -> Plan:
    """Per image its patch rows (the kernel's raster patches, merge 1), then zero rows to the budget. The
    kernel writes each row [P, P, C] (Plan.channel_last: the op's channels_last patch rows). `merged`
    (Gemma 4 Unified): a row is pooling x pooling patches, one patch of pooling * patch_size, and the budget
    max_soft_tokens rows."""
    tokens, pooling = s.options["max_soft_tokens"], s.options["pooling"]
    max_patches = tokens * pooling**2
    side = s.patch_size * pooling if merged else s.patch_size  # a row's patch
    budget = tokens if merged else max_patches
    count = len(shapes)
    jobs, zero, positions, soft = [], [], [], []
    for i, (height, width) in enumerate(shapes):
        name = image_name(i, count)
        if s.do_resize:
            try:
                size = budget_size(height, width, s.patch_size, max_patches, pooling)
            except ValueError as e:
                raise ValueError(f"{where}: {name} is {height}x{width}: {e}") from None
        else:
            size = (height, width)
            if height % side or width % side or (height // side) * (width // side) > budget:
                raise ValueError(
                    f"{where}: {name} is {height}x{width}; without do_resize its sides must be multiples of {side} "
                    f"and its patches at most {budget}"
                )
        grid_h, grid_w = size[0] // side, size[1] // side
        rows = grid_h * grid_w
        start = i * budget
        jobs.append(Job(i, size, (0, 0, *size), (start, start + rows), patches=(1, side, 1)))
        if rows < budget:
            zero.append((start + rows, start + budget))
        ys, xs = torch.meshgrid(torch.arange(grid_h), torch.arange(grid_w), indexing="ij")
        xy = torch.full((budget, 2), -1, dtype=torch.int64)
        xy[:rows] = torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=-1)
        positions.append(xy)
        soft.append(rows if merged else rows // pooling**2)
    channel = s.normalization.channel
    extras = {
        "image_position_ids": torch.stack(positions),
        "num_soft_tokens_per_image": torch.tensor(soft, dtype=torch.int64),
    }
    shape = (count, budget, side * side * channel)
    return Plan(shape, jobs, extras, slot_dims=2, zero=zero, channel_last=True)
