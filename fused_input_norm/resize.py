"""Exact resizing of uint8 images, fused with the affine and the output layout: the references and their pass
order, the coefficient plans, and resize_into, which every resizing path (FusedInputNorm.resize, patchify's
min_pixels/max_pixels, FusedImageProcessor) calls with its sizes already decided.

Two references, both integer algorithms that the kernels reproduce bit for bit (resample_kernel.h):
  "pil"          PIL.Image.resize, as transformers' *Pil processors, qwen-vl-utils and most training
                 pipelines resize. Its pass order changed between releases; "pil" follows the installed
                 Pillow (the newest rule without one), and "pil-13", "pil-12.2", "pil-12.1" pin a rule:
                 "pil-12.1" is every Pillow up to 12.1, "pil-12.2" is 12.2 and 12.3, "pil-13" is 13.x.
  "torchvision"  torchvision.transforms.v2.functional.resize(..., antialias=True) of a CPU uint8 tensor,
                 i.e. torch's uint8 kernel: what transformers 5's default processors produce on the CPU.
"""

from collections.abc import Sequence

import torch
from torch._subclasses.fake_tensor import is_fake

from . import ops
from .checks import RESAMPLE_FILTERS, check_ints

REFERENCES = ("pil", "pil-13", "pil-12.2", "pil-12.1", "torchvision")
_NEWEST_PIL_RULE = "13"


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


def check_reference(where: str, reference: object) -> None:
    if reference not in REFERENCES:
        raise ValueError(f"{where}: reference must be one of {', '.join(map(repr, REFERENCES))}, got {reference!r}")


def check_resample(where: str, resample: object, reference: object) -> None:
    if resample not in RESAMPLE_FILTERS:
        raise ValueError(f"{where}: resample must be one of {', '.join(map(repr, RESAMPLE_FILTERS))}, got {resample!r}")
    check_reference(where, reference)


def resize_arguments(
    where: str, images: object, channel: int, size: object, crop: object, channel_dim: object
) -> tuple[torch.Tensor, tuple[int, int], tuple[int, int, int, int]]:
    """FusedInputNorm.resize's images, size and crop checked: the images as a [B, C, H, W] view, the size, and
    the crop box (top, left, height, width) inside it (all of it when `crop` is None)."""
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"{where}: images must be a torch.Tensor, got {type(images).__name__}")
    if images.dtype != torch.uint8:
        raise TypeError(f"{where}: images must be torch.uint8 (the references resample uint8), got {images.dtype}")
    if channel_dim not in (-3, -1) or isinstance(channel_dim, bool):
        raise ValueError(f"{where}: channel_dim must be -3 (channels first) or -1 (channels last), got {channel_dim!r}")
    if images.dim() not in (3, 4) or images.shape[channel_dim] != channel:
        layout = "[C, H, W] or [B, C, H, W]" if channel_dim == -3 else "[H, W, C] or [B, H, W, C]"
        raise ValueError(
            f"{where}: images must be {layout} with C = {channel} (channel_dim={channel_dim}), "
            f"got shape {tuple(images.shape)}"
        )
    x = images if images.dim() == 4 else images.unsqueeze(0)
    if channel_dim == -1:
        x = x.movedim(-1, -3)
    if min(x.shape[-2:]) < 1:
        raise ValueError(f"{where}: images must have H, W >= 1, got shape {tuple(images.shape)}")
    size = check_ints(where, "size", size, 2)
    if min(size) < 1:
        raise ValueError(f"{where}: size must be (height, width) >= 1, got {size}")
    crop = (0, 0, *size) if crop is None else check_ints(where, "crop", crop, 4)
    top, left, height, width = crop
    if top < 0 or left < 0 or height < 1 or width < 1 or top + height > size[0] or left + width > size[1]:
        raise ValueError(
            f"{where}: crop (top, left, height, width) = {crop} must lie inside the resized image of size {size}"
        )
    return x, size, crop


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
    """Writes the resized, cropped, normalized `images` ([B, C, H, W] uint8, any strides) into `out`. An image
    already at `size` goes through the same op (its crop copied, then normalized and laid out in one pass)."""
    in_h, in_w = images.shape[-2:]
    out_h, out_w = size
    device = images.device
    row_plan = plans.get(in_h, out_h, resample, reference, device)
    col_plan = plans.get(in_w, out_w, resample, reference, device)
    first = vertical_first(pil_rule(reference), in_h, in_w, out_h, out_w)
    ops.resize_affine_out(out, images, weight, bias, row_plan, col_plan, size, crop, resample, first, patches)
