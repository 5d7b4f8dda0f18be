"""vLLM's InternVL image processor (InternVLChatImageProcessor, vllm/transformers_utils/processors/internvl.py,
what vLLM runs for the remote-code InternVL2.5 / 3 / 3.5 checkpoints, `InternVLChatModel`): each image resized
(Pillow's bicubic) to the tile grid whose aspect ratio is closest to its own, cut into image_size x image_size
tiles, then (with use_thumbnail, where there is more than one tile) the whole image resized to one more tile;
then ToTensor + Normalize (ImageNet's mean and std). pixel_values [tiles, C, S, S] and num_patches (int64 [n]:
each image's tile count).

The grid is written as tiles by one kernel call (patch rows of side S, merge 1: row-major tiles, each a
[C, S, S] row); the thumbnail is a second job into the next slot.
"""

import functools
from collections.abc import Mapping

from ..checks import is_int, positive_int
from . import got_ocr2
from .base import COMMON_DEFAULTS, Plan, side

KIND = "internvl_chat"
TYPES = ("InternVLChatImageProcessor",)
PROCESSOR_CLASSES = ()
PIL_BYTES_AS_FLOAT = False
KEYS = ("min_dynamic_patch", "max_dynamic_patch", "dynamic_image_size", "use_thumbnail")
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
# The InternVL2.5 / 3 / 3.5 checkpoints' config.json values (vLLM reads them from there).
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"height": 448, "width": 448},
    "image_mean": IMAGENET_MEAN,
    "image_std": IMAGENET_STD,
    "min_dynamic_patch": 1,
    "max_dynamic_patch": 12,
    "dynamic_image_size": True,
    "use_thumbnail": True,
}


def square_tile(config: Mapping, default: Mapping, where: str, family: str) -> int:
    """The side of the square tile that config's size (an int, or {'height': S, 'width': S}) names."""
    size = config.get("size", default)
    if is_int(size):
        size = {"height": size, "width": size}
    if not isinstance(size, Mapping) or set(size) != {"height", "width"} or size["height"] != size["width"]:
        raise ValueError(f"{where}: {family}'s size is one square tile side, {{'height': S, 'width': S}}, got {size!r}")
    return side(where, "size['height']", size["height"])


def settings(config: Mapping, get, where: str) -> dict:
    tile = square_tile(config, DEFAULTS["size"], where, "InternVL")
    low = positive_int(where, "min_dynamic_patch", get("min_dynamic_patch"))
    high = positive_int(where, "max_dynamic_patch", get("max_dynamic_patch"))
    if low > high:
        raise ValueError(f"{where}: min_dynamic_patch ({low}) > max_dynamic_patch ({high}): no tile grid fits")
    for key in ("dynamic_image_size", "use_thumbnail"):
        if not isinstance(get(key), bool):
            raise ValueError(f"{where}: {key} must be true or false, got {get(key)!r}")
    if not get("dynamic_image_size"):  # vLLM: one tile, the image resized to it
        low = high = 1
    options = {"min_tiles": low, "max_tiles": high, "use_thumbnail": get("use_thumbnail")}
    return {"size": {"height": tile, "width": tile}, "options": options}


def grids(min_tiles: int, max_tiles: int) -> list[tuple[int, int]]:
    """The (columns, rows) grids of min_tiles..max_tiles tiles, in the order vLLM's get_internvl_target_ratios
    gives them: by tile count, and within a count in the iteration order of the Python set it builds them in
    (which decides a tie between two grids of one count equally close to an image's aspect ratio)."""
    found = {
        (columns, rows)
        for count in range(min_tiles, max_tiles + 1)
        for columns in range(1, count + 1)
        for rows in range(1, count + 1)
        if min_tiles <= columns * rows <= max_tiles
    }
    return sorted(found, key=lambda grid: grid[0] * grid[1])


def tile_grid(height: int, width: int, tile: int, min_tiles: int, max_tiles: int) -> tuple[int, int]:
    """(columns, rows): the grid of min_tiles..max_tiles tiles whose aspect ratio is closest to the image's."""
    return closest(height, width, tile, grids(min_tiles, max_tiles))


def closest(height: int, width: int, tile: int, candidates: list[tuple[int, int]]) -> tuple[int, int]:
    """(columns, rows): the candidate grid whose aspect ratio is closest to the image's; of equally close ones,
    a later (larger) grid wins where the image's area exceeds half of that grid's, as InternVL chooses; (1, 1)
    where there is no candidate."""
    aspect = width / height
    best, best_diff = (1, 1), float("inf")
    for columns, rows in candidates:
        diff = abs(aspect - columns / rows)
        if diff < best_diff:
            best, best_diff = (columns, rows), diff
        elif diff == best_diff and width * height > 0.5 * tile * tile * columns * rows:
            best = (columns, rows)
    return best


def plan(s, shapes: list, where: str) -> Plan:
    """Each image's tiles (row-major), then its thumbnail where it has more than one tile."""
    tile, o = s.size["height"], s.options
    grid_of = functools.partial(tile_grid, tile=tile, min_tiles=o["min_tiles"], max_tiles=o["max_tiles"])
    return got_ocr2.tiled_plan(s, shapes, grid_of, (tile, tile), o["use_thumbnail"])
