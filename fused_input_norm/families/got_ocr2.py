"""GOT-OCR2's image processor, which InternVL3 / 3.5 in transformers format hold: with crop_to_patches, each
image resized to the tile grid whose aspect ratio is nearest its own (within min_patches..max_patches tiles)
and cut into size-sized tiles, then, when there is more than one tile, the whole image resized to one tile
(the thumbnail) after them; pixel_values [sum of tiles (+ thumbnails), C, h, w] and num_patches. Without
crop_to_patches, CLIP's fixed-size resize and num_patches all 1."""

import functools
from collections.abc import Mapping

import torch

from ..checks import positive_int
from . import clip
from .base import CLIP_MEAN, CLIP_STD, COMMON_DEFAULTS, Job, Plan

KIND = "got_ocr2"
TYPES = ("GotOcr2ImageProcessor",)
PROCESSOR_CLASSES = ("GotOcr2Processor", "InternVLProcessor")
PIL_BYTES_AS_FLOAT = False  # its Pil backend returns the resized bytes as uint8, as its torchvision one
UNSTACKED = {"pixel_values": "rows", "num_patches": "ints"}  # return_tensors unset (base.unstack)
KEYS = ("crop_to_patches", "min_patches", "max_patches")
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"height": 384, "width": 384},
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
    "crop_to_patches": False,
    "min_patches": 1,
    "max_patches": 12,
}


def settings(config: Mapping, get, where: str) -> dict:
    # The tile: a bare int is a square (GOT-OCR2's default_to_square), not a shortest edge.
    tile = clip.crop_size(get("size"), where, "size")
    size = {"height": tile[0], "width": tile[1]}
    crop_to_patches = get("crop_to_patches")
    if not isinstance(crop_to_patches, bool):
        raise ValueError(f"{where}: crop_to_patches must be true or false, got {crop_to_patches!r}")
    low = positive_int(where, "min_patches", get("min_patches"))
    high = positive_int(where, "max_patches", get("max_patches"))
    if low > high:
        raise ValueError(f"{where}: min_patches ({low}) > max_patches ({high}): the config contradicts itself")
    if crop_to_patches and high == 1 and not get("do_resize"):
        # transformers' two backends differ here: the torchvision one still resizes each image to one tile,
        # the Pil one (which tiles only above one patch) passes it through unresized.
        raise ValueError(
            f"{where}: crop_to_patches with max_patches 1 and do_resize off is not implemented (transformers' "
            f"torchvision and Pil backends give different results)"
        )
    return {"size": size, "options": {"crop_to_patches": crop_to_patches, "min_patches": low, "max_patches": high}}


def tile_grid(height: int, width: int, tile: tuple[int, int], min_tiles: int, max_tiles: int) -> tuple[int, int]:
    """(columns, rows) of the tile grid for an image of height x width, as transformers' GOT-OCR2 chooses it:
    the grid (with min_tiles..max_tiles tiles) whose width / height ratio is nearest the image's; on a tie the
    later grid (more tiles) wins while the image's area is over half of the grid's; (1, 1) if none fits."""
    ratio = width / height
    area = width * height
    tile_area = tile[0] * tile[1]
    # Candidates by tile count, and for one count by columns then rows: the order ties are broken in.
    grids = sorted(
        ((columns, rows) for columns in range(1, max_tiles + 1) for rows in range(1, max_tiles + 1)),
        key=lambda grid: grid[0] * grid[1],
    )
    best, best_diff = (1, 1), float("inf")
    for columns, rows in grids:
        if not min_tiles <= columns * rows <= max_tiles:
            continue
        diff = abs(ratio - columns / rows)
        if diff < best_diff or (diff == best_diff and area > 0.5 * tile_area * columns * rows):
            best, best_diff = (columns, rows), diff
    return best


def plan(s, shapes: list, where: str) -> Plan:
    if not s.options["crop_to_patches"]:
        fixed = clip.plan(s, shapes, where)
        return Plan(fixed.shape, fixed.jobs, {"num_patches": _counts([1] * len(shapes))})
    tile = (s.size["height"], s.size["width"])
    o = s.options
    grid_of = functools.partial(tile_grid, tile=tile, min_tiles=o["min_patches"], max_tiles=o["max_patches"])
    return tiled_plan(s, shapes, grid_of, tile, thumbnail=True)


def tiled_plan(s, shapes: list, grid_of, tile: tuple[int, int], thumbnail: bool) -> Plan:
    """Each image's tiles on its grid_of(height, width) = (columns, rows), then its thumbnail (tiled_jobs), one
    image after another; num_patches (int64, on the CPU) says how many slots each fills."""
    jobs, counts, start = [], [], 0
    for i, (height, width) in enumerate(shapes):
        image_jobs, count = tiled_jobs(i, grid_of(height, width), tile, start, thumbnail)
        jobs += image_jobs
        counts.append(count)
        start += count
    return Plan((start, s.normalization.channel, *tile), jobs, {"num_patches": _counts(counts)})


def tiled_jobs(
    image: int, grid: tuple[int, int], tile: tuple[int, int], start: int, thumbnail: bool
) -> tuple[list[Job], int]:
    """The image resized to the grid (columns, rows) of tiles and written as its tiles, row by row, into the
    slots from `start` (square tiles in one kernel run: patch rows of side tile, merge 1; others one run per
    tile, each writing its crop of the same resize); then, with `thumbnail` and more than one tile, the whole
    image resized to one tile in the next slot (InternVL's thumbnail, GOT-OCR2's and vLLM's alike). Returns
    the jobs and how many slots they fill."""
    columns, rows = grid
    size = (rows * tile[0], columns * tile[1])
    count = rows * columns
    if tile[0] == tile[1]:
        jobs = [Job(image, size, (0, 0, *size), (start, start + count), patches=(1, tile[0], 1))]
    else:
        jobs = [
            Job(image, size, (r * tile[0], c * tile[1], *tile), (start + r * columns + c, start + r * columns + c + 1))
            for r in range(rows)
            for c in range(columns)
        ]
    if thumbnail and count > 1:
        jobs.append(Job(image, tile, (0, 0, *tile), (start + count, start + count + 1)))
        count += 1
    return jobs, count


def _counts(counts: list[int]) -> torch.Tensor:
    return torch.tensor(counts, dtype=torch.int64, device="cpu")
