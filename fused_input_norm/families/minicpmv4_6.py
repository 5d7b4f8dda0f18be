"""MiniCPM-V 4.6's image processor (MiniCPMV4_6ImageProcessor, and its Pil spelling; read in transformers
5.22 and 5.25), which MiniCPM-V 4.7 holds too. Bicubic by default. Per image:
  - with slice_mode, a grid of slices (rows x columns) for an image over scale_resolution^2 pixels: the
    count nearest its area in tiles of scale_resolution (at most max_slice_nums), the shape nearest its
    aspect ratio in log space (a tie to more rows);
  - the source view: the image resized to about scale_resolution^2 pixels, aspect kept (scaled up too where
    there is no grid), each side a multiple of patch_size times the merge (4, or 2 for downsample_mode "4x");
  - with a grid, the refined image: resized to the grid of slices of such sides, cut into its slices row by
    row.
Each view is laid out as NaViT strips [C, P, patches * P] (its patch_size patches in raster order, each
channel's row i of every patch one after another), and all views of all images are concatenated along the
last axis: pixel_values [1, C, P, all patches * P] (Plan.strips), target_sizes int32 [views, 2] (each view's
patch rows and columns), grids (each image's [rows, columns], [0, 0] without slices) and
num_patches_per_image (its views), both Python lists whatever return_tensors says. do_resize off is not
reproduced (the torchvision backend fails on it)."""

import math
from collections.abc import Mapping

import torch

from ..checks import positive_int
from .base import COMMON_DEFAULTS, STANDARD_MEAN, STANDARD_STD, Job, Plan, side

KIND = "minicpmv4_6"
TYPES = ("MiniCPMV4_6ImageProcessor",)
PROCESSOR_CLASSES = ("MiniCPMV4_6Processor", "MiniCPMV4_7Processor")
PIL_BYTES_AS_FLOAT = False  # decided per backend: as_upstream
KEYS = ("max_slice_nums", "scale_resolution", "patch_size", "slice_mode", "downsample_mode", "use_image_id")
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": None,  # unread: scale_resolution decides the sizes
    "resample": 3,  # bicubic
    "image_mean": STANDARD_MEAN,
    "image_std": STANDARD_STD,
    "max_slice_nums": 9,
    "scale_resolution": 448,
    "patch_size": 14,
    "slice_mode": True,
    "downsample_mode": "16x",
    "use_image_id": True,  # the processor's (its placeholders), not the image processor's
}


def settings(config: Mapping, get, where: str) -> dict:
    if not get("do_resize"):
        raise ValueError(f"{where}: do_resize off is not implemented for MiniCPM-V 4.6 (its torchvision backend fails)")
    for key in ("slice_mode", "use_image_id"):
        if not isinstance(get(key), bool):
            raise ValueError(f"{where}: {key} must be true or false, got {get(key)!r}")
    mode = get("downsample_mode")
    if not isinstance(mode, str):
        raise ValueError(f"{where}: downsample_mode must be a string ('16x' or '4x'), got {mode!r}")
    options = {
        "max_slice_nums": positive_int(where, "max_slice_nums", get("max_slice_nums")),
        "scale_resolution": side(where, "scale_resolution", get("scale_resolution")),
        "slice_mode": get("slice_mode"),
        "merge": 2 if mode == "4x" else 4,  # its find_best_resize: any other string is "16x"
    }
    return {"size": {}, "patch_size": side(where, "patch_size", get("patch_size")), "options": options}


def ensure_divide(length: float, divisor: int) -> int:
    return max(round(length / divisor) * divisor, divisor)


def best_resize(height: float, width: float, scale: int, block: int, allow_upscale: bool) -> tuple[int, int]:
    """transformers' find_best_resize, its float expressions: to about scale^2 pixels, aspect kept (only down,
    unless allow_upscale), each side rounded to a multiple of block (patch_size * merge)."""
    if height * width > scale * scale or allow_upscale:
        aspect_ratio = width / height
        height = int(scale / math.sqrt(aspect_ratio))
        width = int(height * aspect_ratio)
    return ensure_divide(height, block), ensure_divide(width, block)


def refine_size(height: int, width: int, grid: tuple[int, int], scale: int, block: int) -> tuple[int, int]:
    """transformers' get_refine_size: each slice best_resize'd (scaled up too), times the grid (rows, columns)."""
    rows, columns = grid
    slice_h, slice_w = ensure_divide(height, rows) / rows, ensure_divide(width, columns) / columns
    best_h, best_w = best_resize(slice_h, slice_w, scale, block, allow_upscale=True)
    return best_h * rows, best_w * columns


def sliced_grid(height: int, width: int, max_slices: int, scale: int) -> tuple[int, int] | None:
    """transformers' get_sliced_grid: (rows, columns), or None for an image of one slice."""
    log_ratio = math.log(width / height)
    multiple = min(math.ceil(width * height / (scale * scale)), max_slices)
    if multiple <= 1:
        return None
    best, min_error = (1, 1), float("inf")
    for count in (multiple - 1, multiple, multiple + 1):
        if count == 1 or count > max_slices:
            continue
        for rows in range(1, count + 1):
            if count % rows == 0:
                error = abs(log_ratio - math.log((count // rows) / rows))
                if error < min_error or (error == min_error and rows > best[0]):
                    best, min_error = (rows, count // rows), error
    return best


def plan(s, shapes: list, where: str) -> Plan:
    """Per image its source view, then its slices row by row; each view one job of patch rows (merge 1) into
    the next rows, which Plan.strips has the kernel write as the strips."""
    o, patch = s.options, s.patch_size
    scale, block = o["scale_resolution"], patch * o["merge"]
    jobs, target_sizes, grids, views = [], [], [], []
    start = 0

    def view(i: int, size: tuple[int, int], crop: tuple[int, int, int, int]) -> None:
        nonlocal start
        rows = (crop[2] // patch) * (crop[3] // patch)
        jobs.append(Job(i, size, crop, (start, start + rows), patches=(1, patch, 1)))
        target_sizes.append([crop[2] // patch, crop[3] // patch])
        start += rows

    for i, (height, width) in enumerate(shapes):
        grid = sliced_grid(height, width, o["max_slice_nums"], scale) if o["slice_mode"] else None
        source = best_resize(height, width, scale, block, allow_upscale=grid is None)
        view(i, source, (0, 0, *source))
        if grid is not None:
            refined = refine_size(height, width, grid, scale, block)
            slice_h, slice_w = refined[0] // grid[0], refined[1] // grid[1]
            for r in range(grid[0]):
                for c in range(grid[1]):
                    view(i, refined, (r * slice_h, c * slice_w, slice_h, slice_w))
        grids.append(list(grid) if grid is not None else [0, 0])
        views.append(1 + (grid[0] * grid[1] if grid is not None else 0))
    extras = {
        "target_sizes": torch.tensor(target_sizes, dtype=torch.int32).view(-1, 2),
        "grids": grids,  # Python lists, as transformers returns them (skip_tensor_conversion)
        "num_patches_per_image": views,
    }
    return Plan((start, s.normalization.channel, patch, patch), jobs, extras, strips=True)


def as_upstream(reference: str, outputs: dict, raw: bool) -> dict:
    """The resized bytes (`raw`): float32 from the torchvision backend (it casts before rescale_and_normalize),
    uint8 from the Pil one."""
    if raw and reference == "torchvision":
        outputs = dict(outputs, pixel_values=outputs["pixel_values"].float())
    return outputs
