"""Idefics3's image processor, and SmolVLM's (SmolVLM / SmolVLM2: the same algorithm under another name, with
the same class defaults; the checkpoints differ only in their configs). LANCZOS by default, in a chain of
resizes, each reading the uint8 bytes of the one before, as transformers keeps them:
  1. the image resized so its longest edge is size["longest_edge"] (the other side even, at most 4096; or
     to size's height x width), unless do_resize is off;
  2. with do_image_splitting, that resized again, up, to whole tiles of max_image_size["longest_edge"]; its
     tiles (row-major) are the image's first slots, then the global image: step 2's result resized to one
     tile (an image of exactly one tile is its own global image, with no crops);
     without it, step 1's result resized to one tile.
Steps 1 and 2 are Plan.stages; the tiles are one job of step 2's stage at its own size (an exact copy, laid
out as tile slots), the global image one job. Every slot is one tile square: pixel_values [samples, most
images of a sample, C, tile, tile], float32 (the resized bytes as float32 values from the torchvision
backend; from the Pil one too where a sample is padded, else uint8), the slots past a sample's own zero;
pixel_attention_mask int64 [samples, most images, tile, tile] (1 on a sample's own slots, 0 on padding);
with return_row_col_info, rows and cols: each image's tile rows and columns per sample, Python lists (0, 0
where it was not split), as the Pil backend lists them (the adapter gives each backend's: as_upstream).
Samples are transformers' nested list of images (images.samples).
do_pad off (a list of tensors, or a stack only where the samples match) is not reproduced."""

import math
from collections.abc import Mapping

import torch

from ..checks import is_int
from .base import COMMON_DEFAULTS, STANDARD_MEAN, STANDARD_STD, Job, Plan, Stage, not_one_pixel, side

KIND = "idefics3"
TYPES = ("Idefics3ImageProcessor", "SmolVLMImageProcessor")
PROCESSOR_CLASSES = ("Idefics3Processor", "SmolVLMProcessor")
PIL_BYTES_AS_FLOAT = False  # decided per call: as_upstream
BY_SAMPLE = True
KEYS = ("do_image_splitting", "max_image_size", "do_pad", "return_row_col_info")
TILE = 364
MAX_IMAGE_SIZE = 4096  # transformers' bound on step 1's sides
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"longest_edge": 4 * TILE},
    "resample": 1,  # lanczos
    "image_mean": STANDARD_MEAN,
    "image_std": STANDARD_STD,
    "do_image_splitting": True,
    "max_image_size": {"longest_edge": TILE},
    "do_pad": True,
    "return_row_col_info": False,
}


def settings(config: Mapping, get, where: str) -> dict:
    if not get("do_pad"):
        raise ValueError(f"{where}: do_pad off is not implemented for Idefics3 / SmolVLM")
    row_col = get("return_row_col_info")
    if not isinstance(row_col, bool):
        raise ValueError(f"{where}: return_row_col_info must be true or false, got {row_col!r}")
    tile = get("max_image_size")
    if not isinstance(tile, Mapping) or not is_int(tile.get("longest_edge")):
        raise ValueError(f"{where}: max_image_size must be {{'longest_edge': int}}, got {tile!r}")
    size = resize_size(get("size"), where)
    edge = size.get("longest_edge")  # a longest edge of 1 is a 1x1 image (the other side truncates to 0, then 1)
    not_one_pixel(where, "size", size.get("height", edge), size.get("width", edge))
    not_one_pixel(where, "max_image_size", tile["longest_edge"], tile["longest_edge"])
    options = {
        "tile": side(where, "max_image_size['longest_edge']", tile["longest_edge"]),
        "do_image_splitting": get("do_image_splitting"),
        "return_row_col_info": row_col,
    }
    return {"size": size, "options": options}


def resize_size(size: object, where: str) -> dict:
    """{"longest_edge"} (transformers reads it first) or {"height", "width"}, as Idefics3's resize reads size."""
    if isinstance(size, Mapping) and size.get("longest_edge") is not None:
        return {"longest_edge": side(where, "size['longest_edge']", size["longest_edge"])}
    if isinstance(size, Mapping) and size.get("height") is not None and size.get("width") is not None:
        return {key: side(where, f"size[{key!r}]", size[key]) for key in ("height", "width")}
    raise ValueError(f"{where}: size must be {{'longest_edge': int}} or {{'height': int, 'width': int}}, got {size!r}")


def longest_edge_size(height: int, width: int, longest_edge: int) -> tuple[int, int]:
    """Step 1's size (transformers' get_resize_output_image_size): the longest side made longest_edge, the
    other scaled and truncated, then made even (and at least 1); then both scaled below MAX_IMAGE_SIZE if one
    is over it. The float expressions are transformers', so that each truncates where its does."""
    aspect = width / height
    if width >= height:
        width = longest_edge
        height = int(width / aspect)
        height += height % 2
    else:
        height = longest_edge
        width = int(height * aspect)
        width += width % 2
    height, width = max(height, 1), max(width, 1)
    aspect = width / height
    if width >= height and width > MAX_IMAGE_SIZE:
        width = MAX_IMAGE_SIZE
        height = int(width / aspect)
    elif height > width and height > MAX_IMAGE_SIZE:
        height = MAX_IMAGE_SIZE
        width = int(height * aspect)
    return max(height, 1), max(width, 1)


def tiled_size(height: int, width: int, tile: int) -> tuple[int, int]:
    """Step 2's size (transformers' resize_for_vision_encoder): the longest side rounded up to whole tiles,
    the other scaled from it, truncated, then rounded up to whole tiles too."""
    aspect = width / height
    if width >= height:
        width = math.ceil(width / tile) * tile
        height = math.ceil(int(width / aspect) / tile) * tile
    else:
        height = math.ceil(height / tile) * tile
        width = math.ceil(int(height * aspect) / tile) * tile
    return height, width


def plan(s, shapes: list, where: str, samples: list[int]) -> Plan:
    """Per image its stages (step 1, step 2), then its slots in its sample's row: the tiles, the global image;
    the rows padded to the longest with zeroed slots."""
    tile = s.options["tile"]
    stages, slots_per_image, layouts = [], [], []

    def staged(source: int, shape: tuple[int, int], size: tuple[int, int]) -> int:
        if size == shape:  # the same size: both references copy the bytes as they are
            return source
        stages.append(Stage(source, size))
        return len(shapes) + len(stages) - 1

    for i, shape in enumerate(shapes):
        source, shape = i, tuple(shape)
        if s.do_resize:
            size = s.size
            resized = (
                longest_edge_size(*shape, size["longest_edge"])
                if "longest_edge" in size
                else (size["height"], size["width"])
            )
            source, shape = staged(source, shape, resized), resized
        grid = (0, 0)
        if s.options["do_image_splitting"]:
            resized = tiled_size(*shape, tile)
            source, shape = staged(source, shape, resized), resized
            if shape != (tile, tile):
                grid = (shape[0] // tile, shape[1] // tile)
        layouts.append((source, grid))
        slots_per_image.append(grid[0] * grid[1] + 1)
    counts, rows, cols = [], [], []
    first = 0
    for count in samples:
        counts.append(sum(slots_per_image[first : first + count]))
        rows.append([grid[0] for _, grid in layouts[first : first + count]])
        cols.append([grid[1] for _, grid in layouts[first : first + count]])
        first += count
    width = max(counts)
    jobs, zero = [], []
    image = 0
    for k, (count, filled) in enumerate(zip(samples, counts, strict=True)):
        slot = k * width
        for source, grid in layouts[image : image + count]:
            if grid != (0, 0):  # the tiles, row-major: the stage at its own size (an exact copy) as tile slots
                shape, tiles = (grid[0] * tile, grid[1] * tile), grid[0] * grid[1]
                jobs.append(Job(source, shape, (0, 0, *shape), (slot, slot + tiles), patches=(1, tile, 1)))
                slot += tiles
            jobs.append(Job(source, (tile, tile), (0, 0, tile, tile), (slot, slot + 1)))  # the global image
            slot += 1
        image += count
        if filled < width:
            zero.append((k * width + filled, (k + 1) * width))
    mask = torch.ones(len(samples) * width, tile, tile, dtype=torch.int64)
    for start, stop in zero:
        mask[start:stop] = 0
    extras = {"pixel_attention_mask": mask.view(len(samples), width, tile, tile)}
    if s.options["return_row_col_info"]:
        extras |= {"rows": rows, "cols": cols}
    shape = (len(samples), width, s.normalization.channel, tile, tile)
    return Plan(shape, jobs, extras, slot_dims=2, zero=zero, stages=stages)


def as_upstream(reference: str, outputs: dict, raw: bool) -> dict:
    """The outputs as each backend returns them. The resized bytes (`raw`) come back as float32 from the
    torchvision backend (padded into a float32 zeros tensor) and from the Pil one where a sample is padded
    (NumPy stacks its uint8 images with float32 zero slots); else as uint8. The torchvision backend's rows and
    cols lack the empty samples at the end of a call (its reorder_images loses the count of samples after
    its first use)."""
    outputs = dict(outputs)
    padded = lambda: bool((outputs["pixel_attention_mask"].flatten(2).amax(-1) == 0).any())  # noqa: E731
    if raw and (reference == "torchvision" or padded()):
        outputs["pixel_values"] = outputs["pixel_values"].float()
    if reference == "torchvision" and "rows" in outputs:
        kept = len(outputs["rows"])
        while kept and not outputs["rows"][kept - 1]:
            kept -= 1
        outputs["rows"], outputs["cols"] = outputs["rows"][:kept], outputs["cols"][:kept]
    return outputs
