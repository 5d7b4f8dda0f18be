"""What a family module gives the processor core: its plan of a call, as jobs for the fused kernel.

A family (one transformers image processor, with its Fast and Pil spellings) is a module with
  KIND, TYPES (image_processor_type names), PROCESSOR_CLASSES (processor_class names that imply it),
  DEFAULTS   transformers' class attributes: what a config that leaves a key out means,
  KEYS       the config / call keys it reads beyond the common ones (COMMON_KEYS),
  PIL_BYTES_AS_FLOAT  whether its Pil backend returns the resized bytes (rescale, normalize off) as float32,
  settings(config, get, where) -> dict   its geometry keys checked (size, patch sizes, options),
  plan(settings, shapes, where) -> Plan  every output size and slot decided from the images' shapes alone,
and optionally
  BY_SAMPLE = True: plan(settings, shapes, where, samples) is also given how many images each sample of the
  call holds (transformers' nested list of images: images.samples, or the family's own samples(images,
  where) where its processor counts them otherwise), for outputs laid out per sample;
  BY_REFERENCE = True: plan(settings, shapes, where, reference=...) is also given the backend it reproduces
  ("torchvision" or "pil"), where the two place pixels differently (CLIP's zero-padded center crop);
  as_upstream(reference, outputs, raw) -> outputs: the outputs as that backend of transformers returns them,
  where that depends on more than PIL_BYTES_AS_FLOAT says (the adapter then calls it instead);
  UNSTACKED = {output: how}: how transformers lists that output when the call leaves return_tensors unset
  (see unstack; outputs not named stay as the "pt" call's);
RESCALE_ALONE = True: its checkpoints rescale without normalizing (float32 x * rescale_factor), which the
  adapter then serves (elsewhere it serves do_rescale and do_normalize both on or both off);
TORCHVISION_ONLY = True: transformers has no Pil backend for it, and reference "pil" is refused;
normalize_steps(settings) -> torch.dtype | None: the dtype transformers rescales and then normalizes in,
  rounding after each step (Llama 4's bfloat16), where it does so; absent or None: the one float32 affine.
The core (processor.py) decodes, computes Plan.stages in order, allocates Plan.shape once, runs the fused
resize + normalize + layout kernel once per Job into its slots, zeroes Plan.zero (slot ranges or boxes of
them), and returns pixel_values with Plan.extras.

Stages are for processors that resize in steps, each step's uint8 bytes the next one's input (Idefics3:
the longest edge, then multiples of the tile, then the crops and the global image of that): a Stage is an
image (or an earlier stage) resized to its size and kept as uint8 [C, h, w], exactly the reference's bytes
(the same kernel with the identity affine and a uint8 output), and stage k is image len(images) + k to later
stages and to the jobs. A job whose size is its box's own size copies that box exactly (no resampling pass
runs): a crop of a stage is a job of a box of the stage at the box's size. A job with `pad` places its crop
on a canvas of a fill byte; `padded` makes the job of Pillow's ImageOps.pad (a contain-fit, centered), which
the DeepSeek plans share.

Imports nothing from the package but checks and geometry: config.py, processor.py and the adapters read the families.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from ..checks import positive_int
from ..geometry import MAX_SIDE

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]  # OPENAI_CLIP_MEAN, also Qwen-VL's
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
STANDARD_MEAN = [0.5, 0.5, 0.5]  # IMAGENET_STANDARD_MEAN / _STD, SigLIP's
STANDARD_STD = [0.5, 0.5, 0.5]

# The keys every family reads, as a config (or a call's kwargs) holds them.
COMMON_KEYS = (
    "do_resize",
    "size",
    "resample",
    "do_rescale",
    "rescale_factor",
    "do_normalize",
    "image_mean",
    "image_std",
    "do_convert_rgb",
)
# transformers 5's BaseImageProcessor defaults: what a config that leaves these out (or sets them null) means.
NORMALIZE_DEFAULTS = {
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "image_mean": STANDARD_MEAN,
    "image_std": STANDARD_STD,
}
COMMON_DEFAULTS = {
    **NORMALIZE_DEFAULTS,
    "do_resize": True,
    "resample": 3,
    "do_convert_rgb": True,
    "do_center_crop": False,
    "crop_size": None,
}


def unstack(how: str, value: Any, reference: str, outputs: Mapping) -> Any:
    """One output (a tensor, or a NumPy array for the Pil backend) as transformers lists it with return_tensors
    unset, where its _preprocess hands back the Python containers it built: "rows", a list of its rows;
    "ints", a list of ints; "tuples", a list of tuples of ints; "sizes", a list of torch.Size (the torchvision
    backend) or tuples (the Pil one); "tiles", a list per image of its tiles: rows x columns of its
    aspect_ratios, plus a global tile where that is more than one (Llama 4)."""
    if how == "rows":
        return list(value)
    if how == "ints":
        return [int(v) for v in value.tolist()]
    if how == "lists":
        return value.tolist()
    if how == "tuples" or (how == "sizes" and reference == "pil"):
        return [tuple(int(v) for v in row) for row in value.tolist()]
    if how == "sizes":
        return [torch.Size(row) for row in value.tolist()]
    if how == "tiles":
        counts = [r * c + (r * c > 1) for r, c in outputs["aspect_ratios"].tolist()]
        return list(torch.split(value, counts))  # Llama 4 has only the torchvision backend: a tensor
    raise ValueError(f"unstack: unknown kind {how!r}")


@dataclasses.dataclass(frozen=True)
class Job:
    """One run of the fused kernel: a box of one image, resized, cropped, written into output slots."""

    image: int  # which image of the call (len(images) + k: Plan.stages[k])
    size: tuple[int, int]  # the (box of the) image resized to this
    crop: tuple[int, int, int, int]  # (top, left, height, width) of the resized image that is written
    slots: tuple[int, int]  # [start, stop) along the output's slot axis (Plan.slot_dims flattened)
    box: tuple[int, int, int, int] | None = None  # (top, left, height, width) of the source; None: all of it
    patches: tuple[int, ...] = ()  # (T, P, m): the slots are patch rows; (): one [C, h, w] slot
    # (canvas_h, canvas_w, top, left, fill): the crop placed on a canvas of the fill byte (put through the same
    # affine), which the slots then hold; (): no canvas
    pad: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class Stage:
    """An intermediate image: a box of an image (or of an earlier stage) resized to `size`, kept as uint8."""

    image: int  # the call's image i, or len(images) + k: stage k (an earlier one)
    size: tuple[int, int]
    box: tuple[int, int, int, int] | None = None  # (top, left, height, width) of the source; None: all of it
    # (canvas_h, canvas_w, top, left, fills): the stage placed unresized (size is its box's own) on a canvas
    # of one byte per channel (LLaVA-OneVision's pad_to_square, before its resize); (): no canvas
    pad: tuple = ()


@dataclasses.dataclass(frozen=True)
class Plan:
    """A call's output: pixel_values' shape, the jobs that fill it, the slots left zero, the other outputs."""

    shape: tuple[int, ...]
    jobs: list[Job]
    extras: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    slot_dims: int = 1  # the leading dims of `shape` that number the slots
    # Set to 0 after the jobs (padding after normalize): (start, stop) slot ranges, or (start, stop, top, left,
    # height, width) boxes of those [C, H, W] slots.
    zero: list[tuple[int, ...]] = dataclasses.field(default_factory=list)
    stages: list[Stage] = dataclasses.field(default_factory=list)  # images len(images) + k, before the jobs
    # The slots are patch rows (Job.patches (1, P, m)) laid out channel-last, [P, P, C] (Gemma 4, LFM2-VL,
    # Cosmos-3 Edge): the kernel writes them so (the resize op's patches with layout 1).
    channel_last: bool = False
    # The slots are patch rows (Job.patches (1, P, 1)), shape (rows, C, P, P), and the output is MiniCPM-V's
    # NaViT strips [1, C, P, rows * P] (each channel's row i of every patch, one after another): the kernel
    # writes each job's strips into its window of them (the op's strips layout); no zero slots.
    strips: bool = False

    def __post_init__(self):
        if self.strips and self.zero:  # the core keeps no slot view of strips to zero
            raise ValueError(f"a plan of NaViT strips has no zero slots, got {self.zero}")


def side(where: str, name: str, value: object) -> int:
    """A positive int below MAX_SIDE: an image side (or a patch) the resize op can produce."""
    value = positive_int(where, name, value)
    if value >= MAX_SIDE:
        raise ValueError(f"{where}: {name} must be below {MAX_SIDE} (2^24, the largest image side), got {value}")
    return value


def not_one_pixel(where: str, name: str, height: int, width: int) -> None:
    """Refuses a fixed 1x1 resize target: transformers' torchvision resize of uint8 bytes to exactly 1x1 fails
    inside torch (an internal assert of its antialiased kernel), so stock serves no such call. Refused here,
    the adapter hands the call to transformers, whose answer (that error, or its Pil backend's pixel) it is."""
    if (height, width) == (1, 1):
        raise ValueError(f"{where}: {name} resizes every image to 1x1, which transformers' torchvision resize cannot")


def contained(height: int, width: int, box_h: int, box_w: int) -> tuple[int, int]:
    """(height, width) of Pillow's ImageOps.contain of a height x width image to box_w x box_h: one side the
    box's, the other as Pillow rounds it (Python's round of its float expression)."""
    image_ratio, box_ratio = width / height, box_w / box_h
    if image_ratio > box_ratio:
        return round(height / width * box_w), box_w
    if image_ratio < box_ratio:
        return box_h, round(width / height * box_h)
    return box_h, box_w


def padded(i: int, height: int, width: int, canvas: tuple[int, int], fill, slots, where: str, **kw) -> Job:
    """The job writing image i as Pillow's ImageOps.pad puts it on a canvas (height, width) of the fill byte:
    the contain-fit resize, centered (Python's round of half the margin): DeepSeek-V4's, DeepSeek-OCR's and
    DeepSeek-VL2's plans. `kw`: the rest of the Job (patches)."""
    fitted = contained(height, width, *canvas)
    if min(fitted) == 0:  # Pillow pads an empty image: a blank canvas, no resize
        raise ValueError(f"{where}: image {i} ({height}x{width}) fits {canvas[0]}x{canvas[1]} as an empty image")
    top, left = round((canvas[0] - fitted[0]) * 0.5), round((canvas[1] - fitted[1]) * 0.5)
    pad = (*canvas, top, left, fill) if fitted != canvas else ()
    return Job(i, fitted, (0, 0, *fitted), slots, pad=pad, **kw)
