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
The filters "cv2_cubic" and "cv2_cubic_f32" are OpenCV's own algorithm whatever the reference: cv2.resize(...,
interpolation=cv2.INTER_CUBIC) of the uint8 image, and of the image as float32 (resample_kernel.h). The filter
"bilinear_no_antialias" is torch's whatever the reference: F.interpolate(mode="bilinear", antialias=False) of a
uint8 CPU tensor, bit for bit where torch runs its AVX2 kernel (x86; `torch_uint8_kernel` says whether it does).
"bilinear_no_antialias_f32" and "bilinear_no_antialias_f32_cl" are the same interpolate of the image as float32
(the float values, not rounded to bytes) by torch's generic and channels-last kernels, bit for bit where torch's
float kernels fuse their products into FMAs (`torch_float_fma_kernel`); `torch_float_bilinear` says which kernel
torch runs for a call.
"""

import functools
import mmap
import platform
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import torch
from torch._subclasses.fake_tensor import is_fake

from . import ops
from .checks import CV2_FILTERS, OWN_ORDER_FILTERS, RESAMPLE_FILTERS, check_ints

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


def torch_uint8_kernel() -> bool:
    """Whether torch resizes uint8 CPU tensors with its AVX2 kernel (the integer algorithm "bilinear_no_antialias"
    reproduces): torch dispatches to it at capability AVX2 and above; elsewhere (aarch64, ATEN_CPU_CAPABILITY=default)
    its antialias=False uint8 resize is a float computation, which no filter here reproduces."""
    return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


def torch_float_fma_kernel() -> bool:
    """Whether torch's CPU float32 bilinear interpolate (antialias=False, 1 to 3 channels) computes as
    "bilinear_no_antialias_f32" does: its x86 kernels for capability AVX2 and above fuse products into FMAs;
    the baseline build (ATEN_CPU_CAPABILITY=default) rounds each, and other CPUs were not compared."""
    return platform.machine() in ("x86_64", "AMD64") and torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


def torch_float_bilinear(channels: int, size: Sequence[int], channels_last: bool = False) -> str:
    """The filter that is torch's float32 F.interpolate(mode="bilinear", antialias=False) of a CPU [N, C, H, W]
    tensor to `size` now: torch runs its channels-last kernel when out_h + out_w <= 128, with one thread
    (torch.get_num_threads()) and 3 channels, or for a channels-last input (`channels_last`) of more than 3
    channels, and its generic kernel otherwise (upsample_bilinear2d_kernel_impl_float); they sum differently."""
    one_thread_rgb = torch.get_num_threads() == 1 and channels == 3
    if size[0] + size[1] <= 128 or one_thread_rgb or (channels_last and channels > 3):
        return "bilinear_no_antialias_f32_cl"
    return "bilinear_no_antialias_f32"


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
    """The coefficient plans of the (in size, out size, filter, reference) pairs used most recently, on each
    device they were used on: planned on the host once, then reused by later calls.

    Bounded, whatever sizes come: at most `max_plans` plans and `max_bytes` bytes of them on the CPU, and as
    many on the GPUs (a plan is 4 * (4 + out_size * (2 + taps)) bytes: 18 KB for 640 -> 644 bicubic, 130 KB
    for 4032 -> 1148). A plan larger than `max_bytes` is planned for its call and not kept. A miss costs a
    plan: tens of microseconds for a 1-2k side, under 1% of that image's resize (on a GPU also a blocking
    copy).

    CPU plans lie in one buffer of `max_bytes`, mapped once, off malloc's heap, written as a ring (the plans
    written longest ago give way), and a hit hands out a copy (1.5 us for 40 KB). Kept as tensors of their own,
    the plans of a flood of distinct sizes left small long-lived allocations on the heap among the freed
    large outputs (glibc's dynamic mmap threshold puts outputs up to 32 MiB there once one was freed), which
    kept the heap from returning their pages: RSS grew by 0.5 GB over 2,000 heights with 64 plans kept, as
    much as with every plan kept. A copy is freed with its call, and no thread reads the ring unlocked.
    Device plans are tensors of their own (device memory, from torch's caching allocator), least recently
    used first out; those handed to a CUDA graph being captured are kept for good: a replay reads them where
    they lay. Calls from several threads share a cache: a lock guards it; planning runs outside it."""

    MAX_PLANS = 64
    MAX_BYTES = 4 << 20

    def __init__(self, max_plans: int = MAX_PLANS, max_bytes: int = MAX_BYTES) -> None:
        self.max_plans = max_plans
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._ring: np.ndarray | None = None  # int32 [max_bytes // 4], mapped when the first CPU plan is kept
        self._spans: dict[tuple, tuple[int, int]] = {}  # CPU plan -> (offset, numel) in the ring, oldest first
        self._end = 0  # where in the ring the next CPU plan goes
        self._device: OrderedDict[tuple, torch.Tensor] = OrderedDict()  # least recently used first
        self._device_bytes = 0
        self._captured: dict[tuple, torch.Tensor] = {}  # read by captured CUDA graphs: never evicted

    def kept(self, device: torch.device) -> tuple[int, int]:
        """How many plans for `device` are kept, and their bytes (the bounds apply to these; captured aside)."""
        with self._lock:
            if device.type == "cpu":
                return len(self._spans), 4 * sum(numel for _, numel in self._spans.values())
            return len(self._device), self._device_bytes

    def get(
        self, in_size: int, out_size: int, resample: str, reference: str, device: torch.device, *, always=False
    ) -> torch.Tensor | None:
        if in_size == out_size and not always:
            return None  # both references skip a pass whose size does not change (OpenCV's cubic: `always`)
        algorithm = "torchvision" if reference == "torchvision" else "pil"
        if torch.compiler.is_compiling():
            # While tracing (torch.compile, torch.export) the plan is a fake tensor or a node of the graph: the
            # cache is neither read nor written (a cached plan would become a constant of the graph, a fake
            # one would hand later eager calls a tensor with no data; is_compiling first: dynamo cannot trace
            # is_fake, nor the lock).
            return _planned(in_size, out_size, resample, algorithm, device)
        key = (in_size, out_size, resample, algorithm, device)
        return self._on_cpu(key) if device.type == "cpu" else self._on_device(key)

    def _on_cpu(self, key: tuple) -> torch.Tensor:
        with self._lock:
            if key in self._spans:
                offset, numel = self._spans[key]
                return torch.from_numpy(self._ring[offset : offset + numel].copy())  # NumPy's: 1.5 us, torch's 2.6
        plan = _planned(*key)
        numel = plan.numel()
        if is_fake(plan) or self.max_plans < 1 or 4 * numel > self.max_bytes:  # fake: FakeTensorMode, no data
            return plan
        with self._lock:
            if key in self._spans:
                return plan
            if self._ring is None:
                self._ring = np.frombuffer(mmap.mmap(-1, self.max_bytes), dtype=np.int32)  # holds the map
            begin = self._end if self._end + numel <= self._ring.size else 0
            end = begin + numel
            for overwritten in [k for k, (o, n) in self._spans.items() if o < end and begin < o + n]:
                del self._spans[overwritten]
            while len(self._spans) >= self.max_plans:
                del self._spans[next(iter(self._spans))]
            self._ring[begin:end] = plan.numpy()
            self._spans[key] = (begin, numel)
            self._end = end
        return plan

    def _on_device(self, key: tuple) -> torch.Tensor:
        capturing = key[-1].type == "cuda" and torch.cuda.is_current_stream_capturing()
        with self._lock:
            plan = self._captured.get(key)
            if plan is None and key in self._device:
                self._device.move_to_end(key)
                plan = self._device[key]
                if capturing:
                    self._captured[key] = self._device.pop(key)
                    self._device_bytes -= _nbytes(plan)
                elif key[-1].type == "cuda":
                    # Evicted later, the plan goes back to torch's caching allocator: it must wait for the
                    # kernels of every stream that read it, not only of the stream it was copied on.
                    plan.record_stream(torch.cuda.current_stream(key[-1]))
            if plan is not None:
                return plan
        plan = _planned(*key)
        if is_fake(plan):
            return plan
        with self._lock:
            if capturing:
                return self._captured.setdefault(key, plan)
            if key not in self._device and _nbytes(plan) <= self.max_bytes and self.max_plans >= 1:
                self._device[key] = plan
                self._device_bytes += _nbytes(plan)
                while len(self._device) > self.max_plans or self._device_bytes > self.max_bytes:
                    self._device_bytes -= _nbytes(self._device.popitem(last=False)[1])
        return plan


def _planned(in_size: int, out_size: int, resample: str, algorithm: str, device: torch.device) -> torch.Tensor:
    plan = ops.resample_plan(in_size, out_size, resample, algorithm)
    if device.type != "cpu":
        # A blocking copy: a non-blocking one would be ordered on this call's stream only, and a later call on
        # another stream could read the cached plan before it lands.
        plan = plan.to(device)
    return plan


def _nbytes(plan: torch.Tensor) -> int:
    return plan.numel() * plan.element_size()


@functools.cache
def identity_affine() -> tuple[torch.Tensor, torch.Tensor]:
    """The weight and bias of x * 1 + 0: resize_into then writes the resized values themselves (Pillow's bytes,
    OpenCV's floats), for callers that normalize afterwards in their model's own order of steps."""
    return torch.ones(3), torch.zeros(3)


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
    clip: bool = False,
    pad: Sequence[int] = (),
) -> None:
    """Writes the resized, cropped, normalized `images` ([B, C, H, W] uint8, any strides) into `out`; with
    `clip`, the images are frames and each temporal_patch_size consecutive ones make one temporal patch; `pad`
    (canvas_height, canvas_width, top, left, fill) places the crop on a canvas of the fill byte. An
    image already at `size` goes through the same op (its crop copied, then normalized and laid out in one
    pass)."""
    in_h, in_w = images.shape[-2:]
    out_h, out_w = size
    device = images.device
    # OpenCV's cubic runs both passes, horizontal first, whenever the image changes size.
    cv2 = resample in CV2_FILTERS
    always = cv2 and (in_h, in_w) != (out_h, out_w)
    row_plan = plans.get(in_h, out_h, resample, reference, device, always=always)
    col_plan = plans.get(in_w, out_w, resample, reference, device, always=always)
    first = resample not in OWN_ORDER_FILTERS and vertical_first(pil_rule(reference), in_h, in_w, out_h, out_w)
    ops.resize_affine_out(
        out, images, weight, bias, row_plan, col_plan, size, crop, resample, first, patches, clip, pad
    )
