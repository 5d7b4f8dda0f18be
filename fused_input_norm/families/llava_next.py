"""LLaVA-NeXT's image processor ("anyres", also Granite Vision's and LLaVA-NeXT-Video's images): per image,
the image resized, keeping its aspect ratio, to fit the best of image_grid_pinpoints, padded (centered, with
0 before rescale and normalize) to that resolution and cut into patches of crop_size's height, row by row;
the whole image resized to size (the base view) before them. Every view (base and patches) then goes
through CLIP's steps: resized to size (shortest_edge) when do_resize, center-cropped to crop_size when
do_center_crop. pixel_values [n, most views, C, h, w] with do_pad (zero slots after an image's last view),
image_sizes (each image's height, width).

The checkpoints' configs (patches of the size they are resized to and cropped to, pinpoints whole patches)
make those last steps copies: then a view is one kernel run (the patches one run on the padded canvas, as
LLaVA-OneVision's). Any other config is planned as transformers computes it: the fitted image and its
canvas are uint8 stages, each patch a job of a box of the canvas (partial patches at the edges included)."""

from collections.abc import Mapping

import torch

from ..checks import image_name
from . import clip
from .base import Job, Plan, Stage, not_one_pixel
from .llava_onevision import best_resolution, fit_size, pinpoints, slots_per_image

KIND = "llava_next"
TYPES = ("LlavaNextImageProcessor",)
PROCESSOR_CLASSES = ("LlavaNextProcessor", "LlavaNextVideoProcessor", "Granite4VisionProcessor")
PIL_BYTES_AS_FLOAT = False
# With return_tensors unset (base.unstack).
UNSTACKED = {"pixel_values": "rows", "image_sizes": "tuples"}
KEYS = ("image_grid_pinpoints", "do_pad", "do_center_crop", "crop_size")
DEFAULTS = {
    **clip.DEFAULTS,  # CLIP's size, center crop, mean and std
    "do_pad": True,
    "image_grid_pinpoints": [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]],
}
FILL = 0  # the byte transformers pads the fitted image with, before rescale and normalize


def settings(config: Mapping, get, where: str) -> dict:
    size = clip.resize_size(config.get("size"), DEFAULTS["size"], where)
    crop = get("crop_size")
    crop = None if crop is None else clip.crop_size(crop, where)
    if get("do_center_crop") and crop is None:
        raise ValueError(f"{where}: do_center_crop needs a crop_size, got None")
    # transformers cuts the canvas into squares of crop_size's height, else of size's
    patch = crop[0] if crop else size.get("height", size.get("shortest_edge"))
    base = (size["height"], size["width"]) if "height" in size else (size["shortest_edge"],) * 2
    not_one_pixel(where, "size", *base)
    options = {
        "patch": patch,
        # the base view: the whole image resized to (height, width), a shortest_edge meaning a square of it
        "base": base,
        "pinpoints": pinpoints(get("image_grid_pinpoints"), None, where),
        "do_pad": get("do_pad"),
    }
    return {"size": size, "do_center_crop": get("do_center_crop"), "crop_size": crop, "options": options}


def plan(s, shapes: list, where: str) -> Plan:
    """Per image, slot 0 its base view, then its patches row by row; with do_pad the images with fewer views
    end on zeroed slots. Every view must come out the same size (transformers stacks them)."""
    patch, count = s.options["patch"], len(shapes)
    layouts = []
    for i, (height, width) in enumerate(shapes):
        canvas = best_resolution(height, width, s.options["pinpoints"])
        fitted = fit_size(height, width, canvas)
        not_one_pixel(where, f"image_grid_pinpoints' fit of {image_name(i, len(shapes))}", *fitted)
        boxes = [
            (top, left, min(patch, canvas[0] - top), min(patch, canvas[1] - left))
            for top in range(0, canvas[0], patch)
            for left in range(0, canvas[1], patch)
        ]
        name = image_name(i, count)
        # every view through CLIP's steps: the size it is resized to, the box of that its crop keeps
        base = clip.resize_and_crop(s, f"{name}'s base view", *s.options["base"], where)
        views = [clip.resize_and_crop(s, f"a patch of {name}", *box[2:], where) for box in boxes]
        layouts.append((canvas, fitted, boxes, base, views))
    out = {crop[2:] for *_, base, views in layouts for _, crop in (base, *views)}
    if len(out) > 1:
        raise ValueError(
            f"{where}: the views come out in sizes {sorted(out)}, which do not stack into one pixel_values "
            f"(transformers fails on them too)"
        )
    counts = [1 + len(boxes) for _, _, boxes, _, _ in layouts]
    width_slots = slots_per_image(counts, s.options["do_pad"], where)
    jobs, zero, stages = [], [], []
    channels = s.normalization.channel
    for i, (canvas, fitted, boxes, base, views) in enumerate(layouts):
        start = i * width_slots
        # the base view's second resize (to size) gives it back its own size: one run, its crop
        jobs.append(Job(i, *base, (start, start + 1)))
        if counts[i] < width_slots:
            zero.append((start + counts[i], start + width_slots))
        top, left = (canvas[0] - fitted[0]) // 2, (canvas[1] - fitted[1]) // 2
        pad = (*canvas, top, left)
        if all(
            box[2:] == (patch, patch) and size == (patch, patch) and crop == (0, 0, patch, patch)
            for box, (size, crop) in zip(boxes, views, strict=True)
        ):
            # every patch is the canvas's own square, kept as it is: the patches are one run on the canvas
            jobs.append(
                Job(i, fitted, (0, 0, *fitted), (start + 1, start + counts[i]), patches=(1, patch, 1), pad=(*pad, FILL))
            )
            continue
        # the fitted image and its canvas as uint8 stages, each patch resized and cropped from a box of it
        stages.append(Stage(i, fitted))
        stages.append(Stage(len(shapes) + len(stages) - 1, fitted, pad=(*pad, (FILL,) * channels)))
        source = len(shapes) + len(stages) - 1
        for k, (box, (size, crop)) in enumerate(zip(boxes, views, strict=True)):
            jobs.append(Job(source, size, crop, (start + 1 + k, start + 2 + k), box=box))
    extras = {"image_sizes": torch.tensor([list(shape) for shape in shapes], dtype=torch.int64, device="cpu")}
    shape = (count, width_slots, channels, *out.pop())
    return Plan(shape, jobs, extras, slot_dims=2, zero=zero, stages=stages)
