"""LFM2-VL's image processor (Lfm2VlImageProcessor; torchvision backend only; read in transformers 5.22 and
5.25). Every image is resized whatever do_resize says, bilinear by default:
  - an image too large for one view (rounded to whole encoder_patch_size * downsample_factor blocks, over
    max_image_tokens of those blocks times max_pixels_tolerance), with do_image_splitting, is resized to the
    grid of tile_size tiles whose aspect ratio is nearest its own (min_tiles..max_tiles tiles) and cut into
    those tiles, row by row; then, with use_thumbnail and more than one tile, the thumbnail;
  - any other image is resized to the thumbnail size alone: its smart_resize (sides multiples of the block,
    between min_image_tokens and max_image_tokens blocks).
Each tile and thumbnail is a slot of patch rows, each [P, P, C] channel-last, padded with zero rows to the
budget (max(max_image_tokens * downsample_factor^2, (tile_size / P)^2 with splitting)): pixel_values
[slots, budget, P * P * C], pixel_attention_mask int32 [slots, budget] (0 on the padding), spatial_shapes
int64 [slots, 2] (the slot's patch rows and columns); with return_row_col_info (which LFM2-VL's processor
asks for), image_rows, image_cols and image_sizes (each image's grid, and its thumbnail's size). do_pad off
(transformers then stacks rows of different lengths) is not reproduced."""

import math
from collections.abc import Mapping

import torch

from ..checks import image_name, is_number, positive_int
from . import internvl_chat
from .base import COMMON_DEFAULTS, STANDARD_MEAN, STANDARD_STD, Job, Plan, side

KIND = "lfm2_vl"
TYPES = ("Lfm2VlImageProcessor",)
PROCESSOR_CLASSES = ("Lfm2VlProcessor",)
PIL_BYTES_AS_FLOAT = False  # no Pil backend (TORCHVISION_ONLY)
TORCHVISION_ONLY = True
KEYS = (
    "downsample_factor",
    "do_image_splitting",
    "min_tiles",
    "max_tiles",
    "use_thumbnail",
    "min_image_tokens",
    "max_image_tokens",
    "encoder_patch_size",
    "tile_size",
    "max_pixels_tolerance",
    "do_pad",
    "return_row_col_info",
)
UNSTACKED = {"image_rows": "ints", "image_cols": "ints", "image_sizes": "lists"}  # return_tensors unset
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"height": 512, "width": 512},  # unread: the token bounds and the tiles decide the sizes
    "resample": 2,  # bilinear
    "do_convert_rgb": False,  # None in its class: gray and RGBA images reach normalize as they are (and fail there)
    "image_mean": STANDARD_MEAN,
    "image_std": STANDARD_STD,
    "downsample_factor": 2,
    "do_image_splitting": True,
    "min_tiles": 2,
    "max_tiles": 10,
    "use_thumbnail": True,
    "min_image_tokens": 64,
    "max_image_tokens": 256,
    "encoder_patch_size": 16,
    "tile_size": 512,
    "max_pixels_tolerance": 2.0,
    "do_pad": True,
    "return_row_col_info": False,
}
_INTS = ("downsample_factor", "min_tiles", "max_tiles", "min_image_tokens", "max_image_tokens")


def settings(config: Mapping, get, where: str) -> dict:
    if not get("do_pad"):
        raise ValueError(f"{where}: do_pad off is not implemented for LFM2-VL (transformers stacks unpadded rows)")
    options = {key: positive_int(where, key, get(key)) for key in _INTS}
    for key in ("use_thumbnail", "return_row_col_info"):
        if not isinstance(get(key), bool):
            raise ValueError(f"{where}: {key} must be true or false, got {get(key)!r}")
        options[key] = get(key)
    tolerance = get("max_pixels_tolerance")
    if not is_number(tolerance) or not math.isfinite(tolerance):
        raise ValueError(f"{where}: max_pixels_tolerance must be a finite number, got {tolerance!r}")
    patch = side(where, "encoder_patch_size", get("encoder_patch_size"))
    tile = side(where, "tile_size", get("tile_size"))
    options |= {"do_image_splitting": get("do_image_splitting"), "tile": tile, "tolerance": tolerance}
    if options["do_image_splitting"]:
        if options["min_tiles"] > options["max_tiles"]:
            raise ValueError(f"{where}: min_tiles must be less than or equal to max_tiles")  # transformers' words
        if tile % patch:
            raise ValueError(f"{where}: tile_size ({tile}) must be a multiple of encoder_patch_size ({patch})")
        side(where, "tile_size * max_tiles", tile * options["max_tiles"])
    else:
        options["min_tiles"] = options["max_tiles"] = 1  # as its _preprocess sets them
    return {"size": {}, "patch_size": patch, "options": options}


def smart_size(height: int, width: int, o: Mapping, patch: int) -> tuple[int, int]:
    """(height, width) of transformers' smart_resize: the sides rounded to whole blocks of patch *
    downsample_factor, scaled down (floor) above max_image_tokens blocks or up (ceil) below min_image_tokens."""
    factor = patch * o["downsample_factor"]
    block_pixels = factor * factor
    h_bar, w_bar = max(factor, round(height / factor) * factor), max(factor, round(width / factor) * factor)
    if h_bar * w_bar > o["max_image_tokens"] * block_pixels:
        beta = math.sqrt((height * width) / (o["max_image_tokens"] * block_pixels))
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < o["min_image_tokens"] * block_pixels:
        beta = math.sqrt((o["min_image_tokens"] * block_pixels) / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def too_large(height: int, width: int, o: Mapping, patch: int) -> bool:
    """transformers' _is_image_too_large: over max_image_tokens blocks times the tolerance, once rounded."""
    factor = patch * o["downsample_factor"]
    h_bar, w_bar = max(patch, round(height / factor) * factor), max(patch, round(width / factor) * factor)
    return h_bar * w_bar > o["max_image_tokens"] * factor * factor * o["tolerance"]


def plan(s, shapes: list, where: str) -> Plan:
    """Per image its slots (the tiles row by row, then the thumbnail; or the one view), each one job of patch
    rows (merge 1) of its crop of the resize, then zero rows to the budget."""
    o, patch = s.options, s.patch_size
    tile = o["tile"]
    budget = o["max_image_tokens"] * o["downsample_factor"] ** 2
    if o["do_image_splitting"]:
        budget = max(budget, (tile // patch) ** 2)
    count = len(shapes)
    jobs, zero, grids, sizes, rows_of_slots = [], [], [], [], []

    def slot(size: tuple[int, int], crop: tuple[int, int, int, int], i: int) -> None:
        rows = (crop[2] // patch) * (crop[3] // patch)
        if rows > budget:  # a thumbnail: min_image_tokens' ceil can pass max_image_tokens
            height, width = shapes[i]
            raise ValueError(
                f"{where}: {image_name(i, count)} is {height}x{width}: resized to {size[0]}x{size[1]} it has "
                f"{rows} patches, over the budget ({budget}), which transformers does not pad"
            )
        start = len(rows_of_slots) * budget
        jobs.append(Job(i, size, crop, (start, start + rows), patches=(1, patch, 1)))
        if rows < budget:
            zero.append((start + rows, start + budget))
        rows_of_slots.append((rows, crop[2] // patch, crop[3] // patch))

    for i, (height, width) in enumerate(shapes):
        thumb = smart_size(height, width, o, patch)
        grid = (1, 1)
        if o["do_image_splitting"] and o["max_tiles"] > 1 and too_large(height, width, o, patch):
            # its find_closest_aspect_ratio over its _target_ratios is vLLM's InternVL's choice, to the tie
            grid = internvl_chat.tile_grid(height, width, tile, o["min_tiles"], o["max_tiles"])
            columns, rows = grid
            size = (rows * tile, columns * tile)
            for r in range(rows):
                for c in range(columns):
                    slot(size, (r * tile, c * tile, tile, tile), i)
            if o["use_thumbnail"] and columns * rows != 1:
                slot(thumb, (0, 0, *thumb), i)
        else:
            slot(thumb, (0, 0, *thumb), i)
        grids.append(grid)
        sizes.append(thumb)
    mask = torch.ones(len(rows_of_slots), budget, dtype=torch.int32)
    for k, (rows, _, _) in enumerate(rows_of_slots):
        mask[k, rows:] = 0
    extras = {
        "pixel_attention_mask": mask,
        "spatial_shapes": torch.tensor([[h, w] for _, h, w in rows_of_slots], dtype=torch.int64).view(-1, 2),
    }
    if o["return_row_col_info"]:
        extras |= {
            "image_rows": torch.tensor([rows for _, rows in grids], dtype=torch.int64),
            "image_cols": torch.tensor([columns for columns, _ in grids], dtype=torch.int64),
            "image_sizes": torch.tensor(sizes, dtype=torch.int64).view(-1, 2),
        }
    shape = (len(rows_of_slots), budget, patch * patch * s.normalization.channel)
    return Plan(shape, jobs, extras, slot_dims=2, zero=zero, channel_last=True)
