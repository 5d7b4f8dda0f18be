"""CLIP's image processor: the short side resized to size["shortest_edge"] (or to a fixed height x width),
then a center crop; pixel_values [n, C, h, w], every image the same size."""

from collections.abc import Mapping

from ..checks import image_name, is_int
from ..geometry import center_crop_box, padded_center_crop, shortest_edge_size
from .base import CLIP_MEAN, CLIP_STD, COMMON_DEFAULTS, Job, Plan, side

KIND = "clip"
TYPES = ("CLIPImageProcessor",)
PROCESSOR_CLASSES = ("CLIPProcessor",)
PIL_BYTES_AS_FLOAT = False  # its Pil backend returns the resized bytes as uint8, as its torchvision one
UNSTACKED = {"pixel_values": "rows"}  # with return_tensors unset: a list of images (base.unstack)
BY_REFERENCE = True  # plan places a center crop's zero padding as the reference backend does
KEYS = ("do_center_crop", "crop_size")
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"shortest_edge": 224},
    "do_center_crop": True,
    "crop_size": {"height": 224, "width": 224},
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
}


def settings(config: Mapping, get, where: str, defaults: Mapping = DEFAULTS) -> dict:
    size = resize_size(config.get("size"), defaults["size"], where)
    # a crop_size larger than the resize is no contradiction: transformers pads with zeros, then crops (plan)
    crop = crop_size(get("crop_size"), where) if get("do_center_crop") else None
    return {"size": size, "do_center_crop": get("do_center_crop"), "crop_size": crop}


def resize_size(size: object, default: Mapping, where: str) -> dict:
    """{"shortest_edge"} or {"height", "width"}, as transformers 5 standardizes a config's size."""
    if size is None:
        return dict(default)
    if is_int(size):  # transformers 5 reads a bare int as the shortest edge (default_to_square is False)
        size = {"shortest_edge": size}
    elif isinstance(size, list | tuple) and len(size) == 2:  # get_size_dict: (height, width)
        size = {"height": size[0], "width": size[1]}
    if isinstance(size, Mapping) and set(size) == {"shortest_edge"}:
        return {"shortest_edge": side(where, "size['shortest_edge']", size["shortest_edge"])}
    if isinstance(size, Mapping) and set(size) == {"height", "width"}:
        return {k: side(where, f"size[{k!r}]", size[k]) for k in ("height", "width")}
    raise ValueError(f"{where}: size must be {{'shortest_edge'}} or {{'height', 'width'}}, got {size!r}")


def crop_size(value: object, where: str, name: str = "crop_size") -> tuple[int, int]:
    """(height, width) from an int (a square), a pair or {"height", "width"}, as get_size_dict reads a
    crop_size (and a size where default_to_square holds: Gemma 3's)."""
    if is_int(value):
        value = {"height": value, "width": value}
    elif isinstance(value, list | tuple) and len(value) == 2:
        value = {"height": value[0], "width": value[1]}
    if not isinstance(value, Mapping) or set(value) != {"height", "width"}:
        raise ValueError(f"{where}: {name} must be an int or {{'height', 'width'}}, got {value!r}")
    return tuple(side(where, f"{name}[{k!r}]", value[k]) for k in ("height", "width"))


def plan(s, shapes: list, where: str, reference: str | None = None) -> Plan:
    """One [C, h, w] slot per image; images that come out in different sizes do not stack, and are refused. A
    center crop larger than an image's resize is that image on a crop_size canvas of zeros, placed as the
    `reference` backend places it (None: refused, as for callers that do not say which)."""
    count = len(shapes)
    jobs = []
    for i, (height, width) in enumerate(shapes):
        size = resized_size(s, height, width)
        crop, pad = center_crop(s, image_name(i, count), size, where, reference)
        jobs.append(Job(i, size, crop, (i, i + 1), pad=pad))
    outs = [job.pad[:2] if job.pad else job.crop[2:] for job in jobs]  # a padded crop is its canvas
    if len(set(outs)) > 1:
        listed = ", ".join(f"{image_name(i, count)}: {h}x{w}" for i, (h, w) in enumerate(outs))
        raise ValueError(
            f"{where}: the images come out in different sizes ({listed}), which do not stack into one "
            f"pixel_values; give a config with do_center_crop or a fixed size"
        )
    return Plan((count, s.normalization.channel, *outs[0]), jobs)


def resize_and_crop(s, name: str, height: int, width: int, where: str):
    """An image (or LLaVA-NeXT's view) of height x width: the size it is resized to (its own without do_resize),
    and the (top, left, height, width) of that kept by the center crop (one that needs padding is refused)."""
    size = resized_size(s, height, width)
    return size, center_crop(s, name, size, where, None)[0]


def resized_size(s, height: int, width: int) -> tuple[int, int]:
    """The size an image of height x width is resized to (its own without do_resize)."""
    if not s.do_resize:
        return height, width
    if "shortest_edge" in s.size:
        return shortest_edge_size(height, width, s.size["shortest_edge"])
    return s.size["height"], s.size["width"]


def center_crop(s, name: str, size: tuple[int, int], where: str, reference: str | None) -> tuple[tuple, tuple]:
    """The (top, left, height, width) of the resized image the center crop keeps, and the Job's pad: () where
    the crop fits, else (canvas_h, canvas_w, top, left, 0), the image on the zeros transformers pads with, as
    the `reference` backend places it (None: refused)."""
    if not s.do_center_crop:
        return (0, 0, *size), ()
    crop_h, crop_w = s.crop_size
    if crop_h <= size[0] and crop_w <= size[1]:
        return center_crop_box(size, s.crop_size), ()
    if reference is None:
        raise ValueError(
            f"{where}: {name} is {size[0]}x{size[1]}, smaller than crop_size {crop_h}x{crop_w} (transformers pads it "
            f"before the crop: not implemented here)"
        )
    kept, (top, left) = padded_center_crop(size, s.crop_size, reference)
    return kept, (crop_h, crop_w, top, left, 0)
