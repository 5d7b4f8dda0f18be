"""Exact resizing of uint8 images, fused with the affine and the output layout: the Python side of
FusedInputNorm.resize and of patchify's min_pixels/max_pixels.

Two references, both integer algorithms that the kernels reproduce bit for bit (resample_kernel.h):
  "pil"          PIL.Image.resize, as transformers' *Pil processors, qwen-vl-utils and most training
                 pipelines resize. Its pass order changed between releases; "pil" follows the installed
                 Pillow (the newest rule without one), and "pil-13", "pil-12.2", "pil-12.1" pin a rule:
                 "pil-12.1" is every Pillow up to 12.1, "pil-12.2" is 12.2 and 12.3, "pil-13" is 13.x.
  "torchvision"  torchvision.transforms.v2.functional.resize(..., antialias=True) of a CPU uint8 tensor,
                 i.e. torch's uint8 kernel: what transformers 5's default processors produce on the CPU.
"""

import math
from collections.abc import Sequence

import torch
from torch._subclasses.fake_tensor import is_fake

from . import ops

REFERENCES = ("pil", "pil-13", "pil-12.2", "pil-12.1", "torchvision")
_NEWEST_PIL_RULE = "13"


def smart_resize(
    height: int, width: int, factor: int = 28, min_pixels: int = 56 * 56, max_pixels: int = 28 * 28 * 1280
) -> tuple[int, int]:
    """transformers' Qwen2-VL smart_resize: the (height, width) nearest the image's that are multiples of
    `factor`, with an area in [min_pixels, max_pixels] and the aspect ratio kept as well as that allows."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError(
            f"absolute aspect ratio must be smaller than 200, got {max(height, width) / min(height, width)}"
        )
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def shortest_edge_size(height: int, width: int, shortest_edge: int) -> tuple[int, int]:
    """transformers' get_resize_output_image_size(size=shortest_edge, default_to_square=False), as CLIP's
    processors resize: the short side to `shortest_edge`, the long side int(shortest_edge * long / short)."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = shortest_edge, int(shortest_edge * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def pil_rule(reference: str) -> str | None:
    """The pass-order rule of a reference: "13", "12.2", "12.1", or None for torchvision."""
    if reference == "torchvision":
        return None
    if reference != "pil":
        return reference.removeprefix("pil-")
    try:
        import PIL
    except ImportError:
        return _NEWEST_PIL_RULE
    major, minor = (int(part) for part in PIL.__version__.split(".")[:2])
    if major >= 13:
        return "13"
    return "12.2" if (major, minor) >= (12, 2) else "12.1"


def vertical_first(rule: str | None, in_h: int, in_w: int, out_h: int, out_w: int) -> bool:
    """Whether the reference runs the vertical pass first (only matters when both axes change). torch and
    Pillow up to 12.1: never. Pillow 12.2/12.3: when the height shrinks and the image is over 100 times
    taller than wide. Pillow 13: when the height shrinks by more than twice what the width shrinks by."""
    if rule == "13":
        return in_h - out_h > 0 and in_h - out_h > 2 * (in_w - out_w)
    if rule == "12.2":
        return out_h < in_h and in_h > 100 * in_w
    return False


def check_resample(where: str, resample: object, reference: object) -> None:
    if resample not in ops.RESAMPLE_FILTERS:
        raise ValueError(
            f"{where}: resample must be one of {', '.join(map(repr, ops.RESAMPLE_FILTERS))}, got {resample!r}"
        )
    if reference not in REFERENCES:
        raise ValueError(f"{where}: reference must be one of {', '.join(map(repr, REFERENCES))}, got {reference!r}")


def check_size(where: str, name: str, value: object, length: int) -> tuple[int, ...]:
    if (
        not isinstance(value, Sequence)
        or len(value) != length
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise ValueError(f"{where}: {name} must be a sequence of {length} ints, got {value!r}")
    return tuple(value)


class PlanCache:
    """The coefficient plans of every (in size, out size, filter, reference) seen, on each device they were
    used on: planned once on the host, copied once, then reused by every call (and CUDA-graph replays)."""

    def __init__(self) -> None:
        self._plans: dict[tuple, torch.Tensor] = {}

    def get(
        self, in_size: int, out_size: int, resample: str, reference: str, device: torch.device
    ) -> torch.Tensor | None:
        if in_size == out_size:
            return None  # both references skip a pass whose size does not change
        algorithm = "torchvision" if reference == "torchvision" else "pil"
        key = (in_size, out_size, resample, algorithm, device)
        plan = self._plans.get(key)
        if plan is None:
            plan = ops.resample_plan(in_size, out_size, resample, algorithm)
            if device.type != "cpu":
                # A blocking copy, once per size pair: a non-blocking one would be ordered on this call's
                # stream only, and a later call on another stream could read the plan before it lands.
                plan = plan.to(device)
            # While tracing (torch.compile, torch.export, FakeTensorMode) the plan is a fake tensor: caching it
            # would hand later eager calls a tensor with no data. (is_compiling first: dynamo cannot trace
            # is_fake.)
            if not torch.compiler.is_compiling() and not is_fake(plan):
                self._plans[key] = plan
        return plan


def resize_into(
    out: torch.Tensor,
    images: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    size: tuple[int, int],
    crop: tuple[int, int, int, int],
    resample: str,
    reference: str,
    plans: PlanCache,
    patches: Sequence[int] = (),
) -> None:
    """Writes the resized, cropped, normalized `images` ([B, C, H, W] uint8, any strides) into `out`."""
    in_h, in_w = images.shape[-2:]
    out_h, out_w = size
    if (out_h, out_w) == (in_h, in_w):
        # Nothing to resample: both references copy. The crop and layout are a view for the affine.
        top, left, h, w = crop
        view = images[:, :, top : top + h, left : left + w]
        if patches:
            from .patchify import PATCH_CHANNEL_DIM, _patch_view

            temporal, patch, merge = patches
            rows = out.shape[0] // view.shape[0]
            for b in range(view.shape[0]):
                frames = view[b].unsqueeze(0).expand(temporal, -1, -1, -1)
                pv = _patch_view(frames, patch, temporal, merge)
                ops.affine_out(out[b * rows : (b + 1) * rows].view(pv.shape), pv, weight, bias, PATCH_CHANNEL_DIM)
        else:
            ops.affine_out(out, view, weight, bias, 1)
        return
    device = images.device
    row_plan = plans.get(in_h, out_h, resample, reference, device)
    col_plan = plans.get(in_w, out_w, resample, reference, device)
    first = vertical_first(pil_rule(reference), in_h, in_w, out_h, out_w)
    ops.resize_affine_out(out, images, weight, bias, row_plan, col_plan, size, crop, resample, first, patches)
