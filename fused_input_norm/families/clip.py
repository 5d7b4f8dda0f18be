"""CLIP's image processor: the short side resized to size["shortest_edge"] (or to a fixed height x width),
then a center crop; pixel_values [n, C, h, w], every image the same size."""

from collections.abc import Mapping

from ..checks import image_name, is_int
from ..geometry import center_crop_box, shortest_edge_size
from .base import CLIP_MEAN, CLIP_STD, COMMON_DEFAULTS, Job, Plan, side

KIND = "clip"
TYPES = ("CLIPImageProcessor",)
PROCESSOR_CLASSES = ("CLIPProcessor",)
PIL_BYTES_AS_FLOAT = False  # its Pil backend returns the resized bytes as uint8, as its torchvision one
UNSTACKED = {"pixel_values": "rows"}  # with return_tensors unset: a list of images (base.unstack)
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
    crop = None
    if get("do_center_crop"):
        crop = crop_size(get("crop_size"), where)
        fits = (
            max(crop) <= size["shortest_edge"]
            if "shortest_edge" in size
            else crop[0] <= size["height"] and crop[1] <= size["width"]
        )
        if get("do_resize") and not fits:
            raise ValueError(
                f"{where}: crop_size {crop[0]}x{crop[1]} is larger than the resize gives (size {size}): the config "
                f"contradicts itself"
            )
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


def plan(s, shapes: list, where: str) -> Plan:
    """One [C, h, w] slot per image; images that come out in different sizes do not stack, and are refused."""
    count = len(shapes)
    jobs = []
    for i, (height, width) in enumerate(shapes):
        size, crop = resize_and_crop(s, image_name(i, count), height, width, where)
        jobs.append(Job(i, size, crop, (i, i + 1)))
    if len({job.crop[2:] for job in jobs}) > 1:
        listed = ", ".join(f"{image_name(i, count)}: {h}x{w}" for i, (_, _, h, w) in enumerate(j.crop for j in jobs))
        raise ValueError(
            f"{where}: the images come out in different sizes ({listed}), which do not stack into one "
            f"pixel_values; give a config with do_center_crop or a fixed size"
        )
    return Plan((count, s.normalization.channel, *jobs[0].crop[2:]), jobs)


def resize_and_crop(s, name: str, height: int, width: int, where: str):
    """An image (or LLaVA-NeXT's view) of height x width: the size it is resized to (its own without do_resize),
    and the (top, left, height, width) of that kept by the center crop."""
    if not s.do_resize:
        size = (height, width)
    elif "shortest_edge" in s.size:
        size = shortest_edge_size(height, width, s.size["shortest_edge"])
    else:
        size = (s.size["height"], s.size["width"])
    if not s.do_center_crop:
        return size, (0, 0, *size)
    crop_h, crop_w = s.crop_size
    if crop_h > size[0] or crop_w > size[1]:
        raise ValueError(
            f"{where}: {name} is {size[0]}x{size[1]}, smaller than crop_size {crop_h}x{crop_w} (transformers pads it "
            f"before the crop: not implemented)"
        )
    return size, center_crop_box(size, s.crop_size)
