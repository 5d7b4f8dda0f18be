"""Side-by-side benchmark: this op against what engines run today and against bare converting copies.

    python -m fused_input_norm.bench [--device cpu|cuda] [--reps N] [--cases REGEX] [--no-compile]
                                     [--resize-threads 1,N] [--json FILE] [--plot FILE.png]

Each case is a layout an engine feeds (patch rows, NCHW, NHWC, HWC viewed as CHW, Qwen2-VL patch views
of images and videos, a misaligned slice, a broadcast batch). Its methods are timed interleaved in one
run (A B C ... A B C ...) and the median is reported, so the ratios are robust to a noisy machine.
Bytes = the view's elements read once + the output written once.

torch.compile runs last, in a subprocess of its own, so that its compile work and threads cannot slow
the other methods (in one process with it, the 5120-patch op once took 11.8 ms instead of 0.6 ms on 2 CPU
cores). That subprocess re-times `op (out=)` interleaved with the compiled code: compiled/op stays a
same-run ratio.

The resize cases (names starting "resize"; `--cases ^resize` runs only them) time the exact uint8 resize
fused with normalize and layout (FusedInputNorm.patchify with max_pixels, FusedInputNorm.resize with crop)
on real-photo pixels, against torchvision's uint8 resize alone, Pillow's resize alone and the default
transformers processor (normalize off and in full), interleaved, on the CPU, at 1 thread and at the default
thread count (`--resize-threads`). They need torchvision, Pillow, transformers and scikit-image, have no
compiled baseline, and report each ratio against its target (met / not met).

The JPEG cases (names starting "jpeg"; `--cases ^jpeg`) time an engine's whole image path from the JPEG bytes
of a 1920x1080 and a 4032x3024 photo to Qwen2-VL's fp32 pixel_values, decode included, on the CPU at the
same thread counts: FusedImageProcessor (both references) against PIL.Image.open + Qwen2VLImageProcessor
(target: >= 3x faster for the 12 MP photo) and PIL.Image.open + Qwen2VLImageProcessorPil. They also need
fused_input_norm.FusedImageProcessor.
"""

import argparse
import datetime
import functools
import importlib.util
import json
import logging
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .geometry import smart_resize
from .module import FusedInputNorm
from .ops import affine, affine_out

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
PATCH, TEMPORAL, MERGE = 14, 2, 2  # Qwen2-VL / Qwen2.5-VL

# Method names, as they appear in the report.
OP_OUT, OP_ALLOC, EAGER, BATCH_NORM = "op (out=)", "op", "eager mul-add", "F.batch_norm"
COPY_VIEW, COPY_CONTIG = "floor: out.copy_(view)", "floor: contiguous copy"
COMPILED, OP_OUT_COMPILE_RUN = "torch.compile(eager)", "op (out=), compile run"
FLOORS = (COPY_VIEW, COPY_CONTIG)


def qwen2vl_patch_view(frames: torch.Tensor) -> torch.Tensor:
    """uint8 frames [F, C, H, W] -> the zero-copy 9-D view whose contiguous copy, viewed [N, C*T*P*P], is
    Qwen2-VL's pixel_values; channel axis 5."""
    f, c, h, w = frames.shape
    gh, gw = h // PATCH, w // PATCH
    return frames.view(f // TEMPORAL, TEMPORAL, c, gh // MERGE, MERGE, PATCH, gw // MERGE, MERGE, PATCH).permute(
        0, 3, 6, 4, 7, 2, 1, 5, 8
    )


def nhwc_as_nchw(x: torch.Tensor) -> torch.Tensor:
    return x.permute(0, 3, 1, 2)


def image_as_two_frames(image: torch.Tensor) -> torch.Tensor:
    """A still image is repeated to TEMPORAL frames (stride 0), then patchified."""
    return qwen2vl_patch_view(image.expand(TEMPORAL, -1, -1, -1))


def rows_after_first(patches: torch.Tensor) -> torch.Tensor:
    """patches[1:] of [N, 1176] rows: contiguous, but 1176 bytes past a 16-byte-aligned start."""
    return patches[1:].view(-1, 3, 392)


def batch_of_32(image: torch.Tensor) -> torch.Tensor:
    return image.expand(32, -1, -1, -1)


@dataclass(frozen=True)
class Case:
    name: str
    shape: tuple[int, ...]  # of the stored tensor
    in_dtype: torch.dtype
    out_dtype: torch.dtype
    dim: int  # channel axis of the tensor the op sees (patch rows are viewed [N, 3, 392])
    view: Callable[[torch.Tensor], torch.Tensor] | None = None  # zero-copy view of the stored tensor


u8, f32, bf16 = torch.uint8, torch.float32, torch.bfloat16
CASES = [
    Case("qwen2vl 70000 patches u8->bf16", (70000, 3, 392), u8, bf16, 1),
    Case("qwen2vl 70000 patches f32->bf16", (70000, 3, 392), f32, bf16, 1),
    Case("qwen2vl 1 image (5120 patches) u8->bf16", (5120, 3, 392), u8, bf16, 1),
    Case("NCHW 32x3x448x448 u8->f32", (32, 3, 448, 448), u8, f32, 1),
    Case("NHWC 32x448x448x3 u8->bf16", (32, 448, 448, 3), u8, bf16, -1),
    Case("HWC->CHW 32x448x448x3 u8->bf16", (32, 448, 448, 3), u8, bf16, 1, nhwc_as_nchw),
    Case("HWC->CHW 32x448x448x3 u8->f32", (32, 448, 448, 3), u8, f32, 1, nhwc_as_nchw),
    Case("patchify video 32x3x728x1288 u8->bf16", (32, 3, 728, 1288), u8, bf16, 5, qwen2vl_patch_view),
    Case(
        "patchify 1 image 3x728x1288 (2 frames, stride 0) u8->bf16", (1, 3, 728, 1288), u8, bf16, 5, image_as_two_frames
    ),
    Case("patches[1:] of 70000 (misaligned) u8->bf16", (70000, 1176), u8, bf16, 1, rows_after_first),
    Case("broadcast 1 image 3x448x448 to 32 u8->bf16", (3, 448, 448), u8, bf16, 1, batch_of_32),
]
SMALL_CASE = 2  # replayed through a CUDA graph on GPUs, where launch latency matters


class Timer:
    """Times one call: host clock around a synchronized call on CPU, CUDA events on GPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def __call__(self, fn: Callable[[], object]) -> float:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3


def sample_interleaved(
    methods: dict[str, Callable[[], object]],
    timer: Timer,
    reps: int,
    warmup: int = 2,
    budget_s: float | None = None,
    min_reps: int = 5,
) -> dict[str, list[float]]:
    """Milliseconds per call of each method, calling the methods in turn, round after round.

    With budget_s, a case whose round is slow gets fewer rounds (at least min_reps) so that it takes
    about budget_s; the last warm-up round sets the pace.
    """
    for _ in range(warmup):
        t0 = time.perf_counter()
        for fn in methods.values():
            fn()
        round_s = time.perf_counter() - t0
    if budget_s is not None and warmup:
        reps = max(min(reps, min_reps), min(reps, int(budget_s / round_s)))
    samples: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(reps):
        for name, fn in methods.items():
            samples[name].append(timer(fn))
    return samples


def time_interleaved(
    methods: dict[str, Callable[[], object]], timer: Timer, reps: int, warmup: int = 2
) -> dict[str, float]:
    """Median milliseconds per method, calling the methods in turn, round after round."""
    return {name: statistics.median(s) for name, s in sample_interleaved(methods, timer, reps, warmup).items()}


def make_input(case: Case, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(stored tensor, the view the op sees)."""
    x = torch.randint(0, 256, case.shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    stored = x.to(case.in_dtype).to(device)
    return stored, case.view(stored) if case.view is not None else stored


def eager_fn(case: Case, x: torch.Tensor, norm: FusedInputNorm) -> Callable[[], torch.Tensor]:
    """The in-tree module's code: cast, multiply, add, cast; made contiguous like the op's output."""
    bshape = [1] * x.dim()
    bshape[case.dim] = -1
    w, b = norm.weight.view(bshape), norm.bias.view(bshape)
    return lambda: (x.to(torch.float32) * w + b).to(case.out_dtype).contiguous()


def methods_for(case: Case, x: torch.Tensor, norm: FusedInputNorm) -> dict[str, Callable[[], object]]:
    """Every method but torch.compile, on the view `x`."""
    out = torch.empty(x.shape, dtype=case.out_dtype, device=x.device)
    # The same bytes, contiguous and freshly allocated (so 16-byte aligned): what the layout costs.
    contiguous = torch.empty(x.shape, dtype=x.dtype, device=x.device).copy_(x)
    w, b = norm.weight, norm.bias
    methods = {
        OP_OUT: lambda: affine_out(out, x, w, b, case.dim),
        OP_ALLOC: lambda: affine(x, w, b, case.dim, case.out_dtype),
        EAGER: eager_fn(case, x, norm),
    }
    if case.dim == 1:  # the original formulation; batch_norm takes channels on dim 1 only
        zeros, ones = torch.zeros_like(w), torch.ones_like(w)
        methods[BATCH_NORM] = lambda: F.batch_norm(x.to(torch.float32), zeros, ones, w, b, False, 0.0, 0.0).to(
            case.out_dtype
        )
    methods[COPY_VIEW] = lambda: out.copy_(x)
    methods[COPY_CONTIG] = lambda: out.copy_(contiguous)
    return methods


def check_op(case: Case, x: torch.Tensor, norm: FusedInputNorm) -> None:
    """A benchmark of a wrong result is worthless: the op must match the eager formula before it is timed."""
    torch.testing.assert_close(affine(x, norm.weight, norm.bias, case.dim, case.out_dtype), eager_fn(case, x, norm)())


def drop_failing(methods: dict[str, Callable[[], object]]) -> dict[str, str]:
    """Calls each method once; removes those that raise (e.g. a cuDNN limit) and returns their errors."""
    errors = {}
    for name, fn in list(methods.items()):
        try:
            fn()
        except Exception as e:  # reported with the results, not hidden
            errors[name] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            del methods[name]
    return errors


# Each ratio's numerator and denominator; compiled/op compares the compiled code with the op re-timed
# beside it in the compile subprocess.
RATIOS = {
    "op/copy_(view)": (OP_OUT, COPY_VIEW),
    "op/contiguous floor": (OP_OUT, COPY_CONTIG),
    "alloc/out=": (OP_ALLOC, OP_OUT),
    "eager/op": (EAGER, OP_OUT),
    "compiled/op": (COMPILED, OP_OUT_COMPILE_RUN),
}


def ratios(times: dict[str, float]) -> dict[str, float]:
    return {name: times[a] / times[b] for name, (a, b) in RATIOS.items() if a in times and b in times}


def copy_bandwidth_gbs(device: torch.device, timer: Timer, reps: int) -> float:
    """Device-to-device copy of 1 GiB: the practical bandwidth ceiling (bytes read + written)."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = time_interleaved({"copy": lambda: dst.copy_(src)}, timer, reps)["copy"]
    return 2 * src.numel() / ms / 1e6


def graph_replay_ms(
    case: Case, norm: FusedInputNorm, device: torch.device, timer: Timer, reps: int
) -> dict[str, float]:
    _, x = make_input(case, device)
    out = torch.empty(x.shape, dtype=case.out_dtype, device=device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        affine_out(out, x, norm.weight, norm.bias, case.dim)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        affine_out(out, x, norm.weight, norm.bias, case.dim)
    return time_interleaved(
        {"graph replay": graph.replay, "eager launch": lambda: affine_out(out, x, norm.weight, norm.bias, case.dim)},
        timer,
        reps,
    )


def clip_norm(device: torch.device) -> FusedInputNorm:
    with torch.device(device):
        return FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)


# ----- Resize: the exact uint8 resize fused with normalize and layout, against what engines run today -----

# Method names, as they appear in the report.
OURS_TV, OURS_PIL = "ours, reference=torchvision", "ours, reference=pil (HWC)"
TV_RESIZE, PIL_RESIZE = "torchvision resize u8->u8", "Pillow resize"
PROC_U8, PROC_FULL = "processor, normalize off", "processor, full"
# name -> (numerator, denominator, "<=" or ">=", bound, the thread count it is set for or None for any)
RESIZE_TARGETS = {
    "reference=torchvision / torchvision resize": (OURS_TV, TV_RESIZE, "<=", 1.0, None),
    "reference=pil / torchvision resize": (OURS_PIL, TV_RESIZE, "<=", 1.3, None),
    "Pillow resize / reference=pil": (PIL_RESIZE, OURS_PIL, ">=", 3.0, 1),  # Pillow is single-threaded
}
SHORT_NAMES = {  # for the Markdown table and the plot
    OURS_TV: "ours tv",
    OURS_PIL: "ours pil",
    TV_RESIZE: "tv resize",
    PIL_RESIZE: "Pillow",
    PROC_U8: "proc. u8",
    PROC_FULL: "proc. full",
}
RESIZE_RATIOS = {  # printed without a target
    "processor normalize off / reference=torchvision": (PROC_U8, OURS_TV),
    "processor full / reference=torchvision": (PROC_FULL, OURS_TV),
}
RESIZE_DEPENDENCIES = ("torchvision", "PIL", "transformers", "skimage")


@dataclass(frozen=True)
class ResizeCase:
    name: str
    photo: tuple[int, int]  # (height, width) of the native photo
    model: str  # "qwen2vl": smart_resize (default bounds) to patch rows; "clip": shortest edge 224, center crop 224


RESIZE_CASES = [
    ResizeCase("resize qwen2vl 800x600 photo u8->bf16 rows", (600, 800), "qwen2vl"),
    ResizeCase("resize qwen2vl 1920x1080 photo u8->bf16 rows", (1080, 1920), "qwen2vl"),
    ResizeCase("resize qwen2vl 4032x3024 photo u8->bf16 rows", (3024, 4032), "qwen2vl"),
    ResizeCase("resize clip 224 (shortest edge + center crop) 1920x1080 photo u8->bf16 NCHW", (1080, 1920), "clip"),
]


def missing_resize_dependencies() -> list[str]:
    return [name for name in RESIZE_DEPENDENCIES if importlib.util.find_spec(name) is None]


@dataclass
class ResizeInputs:
    """One photo in every form a method takes, the default processor, and the geometry it resizes to."""

    hwc: torch.Tensor  # uint8 [H, W, 3], contiguous: what a PIL-decoded image gives
    chw: torch.Tensor  # uint8 [3, H, W], contiguous: what the default processor resizes
    image: object  # the PIL image
    processor: object  # Qwen2VLImageProcessor or CLIPImageProcessor (torchvision backend)
    norm: FusedInputNorm  # the processor's rescale and normalize
    size: tuple[int, int]  # (height, width) of the resized image
    crop: tuple[int, int, int, int] | None  # (top, left, height, width) inside it; None: all of it
    bounds: dict  # patchify's min_pixels / max_pixels (Qwen2-VL)


@functools.cache
def _source_photo():
    import numpy as np
    from skimage import data

    return np.ascontiguousarray(data.coffee())  # a real photo, 400x600x3


def resize_photo(height: int, width: int) -> torch.Tensor:
    """A real photo as uint8 [H, W, 3]: scikit-image's coffee, resized once by Pillow (bicubic)."""
    import numpy as np
    from PIL import Image

    image = Image.fromarray(_source_photo()).resize((width, height), Image.Resampling.BICUBIC)
    return torch.from_numpy(np.array(image))


def clip_geometry(height: int, width: int, shortest_edge: int, crop_h: int, crop_w: int):
    """transformers' geometry: the short side to `shortest_edge`, the long one int(shortest_edge * long /
    short); then center_crop's top = (h - crop_h) // 2, left = (w - crop_w) // 2."""
    if width <= height:
        size = (int(shortest_edge * height / width), shortest_edge)
    else:
        size = (shortest_edge, int(shortest_edge * width / height))
    return size, ((size[0] - crop_h) // 2, (size[1] - crop_w) // 2, crop_h, crop_w)


def make_resize_inputs(case: ResizeCase) -> ResizeInputs:
    import transformers
    from PIL import Image

    hwc = resize_photo(*case.photo)
    chw = hwc.permute(2, 0, 1).contiguous()
    if case.model == "qwen2vl":
        processor = transformers.Qwen2VLImageProcessor()
        bounds = {"min_pixels": processor.size["shortest_edge"], "max_pixels": processor.size["longest_edge"]}
        size = smart_resize(*case.photo, processor.patch_size * processor.merge_size, **bounds)
        crop = None
    elif case.model == "clip":
        processor = transformers.CLIPImageProcessor()
        crop_size = (processor.crop_size["height"], processor.crop_size["width"])
        size, crop = clip_geometry(*case.photo, processor.size["shortest_edge"], *crop_size)
        bounds = {}
    else:
        raise ValueError(f"{case.name}: unknown model {case.model!r}")
    keys = ("do_rescale", "rescale_factor", "do_normalize", "image_mean", "image_std")
    norm = FusedInputNorm.from_preprocessor_config({k: getattr(processor, k) for k in keys})
    return ResizeInputs(hwc, chw, Image.fromarray(hwc.numpy()), processor, norm, size, crop, bounds)


def resize_methods(case: ResizeCase, inp: ResizeInputs, dtype: torch.dtype = bf16) -> dict[str, Callable[[], object]]:
    """Our two references (the whole call: resize, normalize, layout), then the others, on the CPU."""
    import torchvision.transforms.v2.functional as tvF
    from PIL import Image
    from torchvision.transforms import InterpolationMode

    norm, chw, hwc, size = inp.norm, inp.chw, inp.hwc, inp.size
    if case.model == "qwen2vl":

        def ours_tv():
            return norm.patchify(chw, dtype, reference="torchvision", **inp.bounds)[0]

        def ours_pil():
            return norm.patchify(hwc, dtype, channel_dim=-1, reference="pil", **inp.bounds)[0]

    else:

        def ours_tv():
            return norm.resize(chw, dtype, size, reference="torchvision", crop=inp.crop)

        def ours_pil():
            return norm.resize(hwc, dtype, size, reference="pil", crop=inp.crop, channel_dim=-1)

    processor = inp.processor
    return {
        OURS_TV: ours_tv,
        OURS_PIL: ours_pil,
        TV_RESIZE: lambda: tvF.resize(chw, list(size), InterpolationMode.BICUBIC, antialias=True),
        PIL_RESIZE: lambda: inp.image.resize((size[1], size[0]), Image.Resampling.BICUBIC),
        PROC_U8: lambda: processor(chw, do_rescale=False, do_normalize=False, return_tensors="pt")["pixel_values"],
        PROC_FULL: lambda: processor(chw, return_tensors="pt")["pixel_values"],
    }


def _crop(x: torch.Tensor, crop: tuple[int, int, int, int] | None) -> torch.Tensor:
    if crop is None:
        return x
    top, left, height, width = crop
    return x[..., top : top + height, left : left + width]


def check_resize(case: ResizeCase, inp: ResizeInputs) -> float:
    """A benchmark of a wrong result is worthless. Before timing, in fp32: our resized pixels equal
    torchvision's and Pillow's uint8 resize exactly, the whole calls equal the module's normalize of those
    uint8 images exactly, and reference="torchvision" is within 1e-6 of the default processor (the max
    difference is returned)."""
    import numpy as np

    methods = resize_methods(case, inp, torch.float32)
    tv = methods[TV_RESIZE]()
    pil = torch.from_numpy(np.array(methods[PIL_RESIZE]())).permute(2, 0, 1)
    identity = FusedInputNorm.identity()
    for reference, x, channel_dim, want in (("torchvision", inp.chw, -3, tv), ("pil", inp.hwc, -1, pil)):
        got = identity.resize(x, torch.float32, inp.size, reference=reference, channel_dim=channel_dim)
        torch.testing.assert_close(got, want.to(torch.float32), rtol=0, atol=0, msg=f"{case.name}: {reference}")
    if case.model == "qwen2vl":
        expected = {
            OURS_TV: inp.norm.patchify(tv, torch.float32)[0],
            OURS_PIL: inp.norm.patchify(pil, torch.float32)[0],
        }
    else:
        expected = {
            OURS_TV: inp.norm(_crop(tv, inp.crop), torch.float32),
            OURS_PIL: inp.norm(_crop(pil, inp.crop), torch.float32),
        }
    got = {name: methods[name]() for name in expected}
    for name, want in expected.items():
        torch.testing.assert_close(got[name], want, rtol=0, atol=0, msg=f"{case.name}: {name}")
    processor = methods[PROC_FULL]().reshape(got[OURS_TV].shape)
    diff = (got[OURS_TV] - processor).abs().max().item()
    if not diff <= 1e-6:
        raise AssertionError(f"{case.name}: reference='torchvision' differs from the processor by {diff}")
    return diff


def resize_targets(times: dict[str, float], mins: dict[str, float], threads: int) -> dict[str, dict]:
    """Each target's ratio of medians (and of minima), and whether the median meets it; a target set for
    another thread count is left out."""
    targets = {}
    for name, (a, b, op, bound, at_threads) in RESIZE_TARGETS.items():
        if a in times and b in times and at_threads in (None, threads):
            ratio = times[a] / times[b]
            met = ratio <= bound if op == "<=" else ratio >= bound
            targets[name] = {"ratio": ratio, "min_ratio": mins[a] / mins[b], "op": op, "bound": bound, "met": met}
    return targets


def time_cpu_methods(
    name: str, methods: dict[str, Callable[[], object]], ours: tuple[str, ...], threads: int, reps: int, budget_s: float
) -> tuple[tuple, dict, dict, dict, dict]:
    """Times `methods` interleaved on the CPU at `threads` torch threads (restored afterwards), once `ours` are
    known to run. Returns our output's shape, the samples, their medians and minima, and the peers that failed."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        errors = drop_failing(methods)
        if any(method in errors for method in ours):  # a bug, not a benchmark result
            raise RuntimeError(f"{name}: ours failed: {errors}")
        out_shape = tuple(methods[ours[0]]().shape)
        samples = sample_interleaved(methods, Timer(torch.device("cpu")), reps, budget_s=budget_s)
    finally:
        torch.set_num_threads(before)
    times = {method: statistics.median(s) for method, s in samples.items()}
    mins = {method: min(s) for method, s in samples.items()}
    return out_shape, samples, times, mins, errors


def run_resize_case(case: ResizeCase, inp: ResizeInputs, threads: int, reps: int, case_budget_s: float) -> dict:
    """Times the case's methods interleaved at `threads` torch threads."""
    methods = resize_methods(case, inp)
    out_shape, samples, times, mins, errors = time_cpu_methods(
        case.name, methods, (OURS_TV, OURS_PIL), threads, reps, case_budget_s
    )
    result = {
        "case": case.name,
        "threads": threads,
        "photo": list(case.photo),
        "size": list(inp.size),
        "crop": list(inp.crop) if inp.crop is not None else None,
        "out_shape": list(out_shape),
        "reps": len(samples[OURS_TV]),
        "times_ms": times,
        "min_ms": mins,
        "ratios": {name: times[a] / times[b] for name, (a, b) in RESIZE_RATIOS.items() if a in times and b in times},
        "targets": resize_targets(times, mins, threads),
    }
    if errors:
        result["errors"] = errors
    return result


def run_resize(
    cases: list[ResizeCase], reps: int, threads: list[int], case_budget_s: float, report: dict
) -> list[dict]:
    results = []
    for n, case in enumerate(cases, 1):
        _progress(f"resize case {n}/{len(cases)}: {case.name}")
        inp = make_resize_inputs(case)
        report.setdefault("resize_check_max_diff", {})[case.name] = check_resize(case, inp)
        for t in threads:
            _progress(f"  {t} thread{'s' if t > 1 else ''}")
            results.append(run_resize_case(case, inp, t, reps, case_budget_s))
    return results


# ----- JPEG bytes end to end: decode included, FusedImageProcessor against the processors engines run -----

# Method names, as they appear in the report.
FUSED_TV, FUSED_PIL = "FusedImageProcessor, reference=torchvision", "FusedImageProcessor, reference=pil"
PIL_PROC, PIL_PIL_PROC = "PIL decode + processor", "PIL decode + Pil processor"
JPEG_SHORT_NAMES = {
    FUSED_TV: "fused tv",
    FUSED_PIL: "fused pil",
    PIL_PROC: "PIL + proc.",
    PIL_PIL_PROC: "PIL + Pil proc.",
}
# name -> (numerator, denominator, bound or None (printed without a target)); the bound holds where the
# case sets it (JpegCase.targets).
JPEG_RATIOS = {
    "processor / fused tv": (PIL_PROC, FUSED_TV),
    "Pil processor / fused pil": (PIL_PIL_PROC, FUSED_PIL),
}
JPEG_QUALITY = 90


@dataclass(frozen=True)
class JpegCase:
    name: str
    photo: tuple[int, int]  # (height, width) of the photo, encoded once to JPEG
    targets: tuple[tuple[str, float], ...] = ()  # (JPEG_RATIOS key, ratio >= this) on the CPU


JPEG_CASES = [
    JpegCase("jpeg qwen2vl 1920x1080 photo end to end (decode included) -> f32 rows", (1080, 1920)),
    JpegCase(
        "jpeg qwen2vl 4032x3024 photo end to end (decode included) -> f32 rows",
        (3024, 4032),
        (("processor / fused tv", 3.0),),
    ),
]


def missing_jpeg_dependencies() -> list[str]:
    missing = missing_resize_dependencies()
    try:
        from . import FusedImageProcessor  # noqa: F401
    except ImportError:
        missing.append("fused_input_norm.FusedImageProcessor (this checkout has none)")
    return missing


@dataclass
class JpegInputs:
    data: bytes  # the JPEG
    methods: dict[str, Callable[[], object]]  # each the whole path from the bytes to pixel_values on the CPU
    fused: dict[str, object]  # reference -> FusedImageProcessor on the CPU
    processors: dict[str, object]  # reference -> the transformers processor it reproduces


def make_jpeg_inputs(case: JpegCase) -> JpegInputs:
    """The photo as JPEG bytes (Pillow, quality 90), and the four paths from those bytes to pixel_values."""
    import io

    import transformers
    from PIL import Image

    from . import FusedImageProcessor

    buffer = io.BytesIO()
    Image.fromarray(resize_photo(*case.photo).numpy()).save(buffer, format="JPEG", quality=JPEG_QUALITY)
    data = buffer.getvalue()
    config = {"image_processor_type": "Qwen2VLImageProcessor"}
    fused = {
        ref: FusedImageProcessor.from_preprocessor_config(config, device="cpu", reference=ref)
        for ref in ("torchvision", "pil")
    }
    processors = {"torchvision": transformers.Qwen2VLImageProcessor(), "pil": transformers.Qwen2VLImageProcessorPil()}

    def pil_then(processor):
        # What engines do with an image request: PIL opens the bytes, convert("RGB") decodes, the processor runs.
        return lambda: processor(Image.open(io.BytesIO(data)).convert("RGB"), return_tensors="pt")["pixel_values"]

    methods = {
        FUSED_TV: lambda: fused["torchvision"](data)["pixel_values"],
        FUSED_PIL: lambda: fused["pil"](data)["pixel_values"],
        PIL_PROC: pil_then(processors["torchvision"]),
        PIL_PIL_PROC: pil_then(processors["pil"]),
    }
    return JpegInputs(data, methods, fused, processors)


def check_jpeg(case: JpegCase, inp: JpegInputs) -> dict:
    """Before timing: each FusedImageProcessor, given PIL's decoded pixels, is within 1e-6 of the processor
    it reproduces (the arithmetic); from the bytes, the difference adds the decoders' (PIL's libjpeg against
    torchvision's), measured here on the pixels too. Returns the max differences."""
    import io

    import numpy as np
    from PIL import Image

    pixels = np.array(Image.open(io.BytesIO(inp.data)).convert("RGB"))  # writable: from_numpy warns otherwise
    checked = {}
    for ref, fused_name, proc_name in (("torchvision", FUSED_TV, PIL_PROC), ("pil", FUSED_PIL, PIL_PIL_PROC)):
        want = inp.methods[proc_name]()
        same = (inp.fused[ref](pixels)["pixel_values"] - want).abs().max().item()
        if not same <= 1e-6:
            raise AssertionError(f"{case.name}: {fused_name} differs from the processor by {same} on the same pixels")
        checked[f"{ref}: same pixels"] = same
        checked[f"{ref}: from the bytes"] = (inp.methods[fused_name]() - want).abs().max().item()
    with warnings.catch_warnings():  # torchvision 0.29 deprecates its decoders for TorchCodec's
        warnings.simplefilter("ignore")
        from torchvision.io import ImageReadMode, decode_image

        theirs = decode_image(torch.frombuffer(bytearray(inp.data), dtype=torch.uint8), mode=ImageReadMode.RGB)
    levels = (theirs.permute(1, 2, 0).to(torch.int16) - torch.from_numpy(pixels).to(torch.int16)).abs()
    checked["decoders: max levels"] = levels.max().item()
    checked["decoders: fraction differing"] = (levels > 0).double().mean().item()
    return checked


def jpeg_ratios(case: JpegCase, times: dict[str, float], mins: dict[str, float]) -> dict[str, dict]:
    """Each ratio of medians (and of minima); with its target where the case sets one."""
    bounds = dict(case.targets)
    out = {}
    for name, (a, b) in JPEG_RATIOS.items():
        if a in times and b in times:
            ratio = times[a] / times[b]
            out[name] = {"ratio": ratio, "min_ratio": mins[a] / mins[b]}
            if name in bounds:
                out[name].update(op=">=", bound=bounds[name], met=ratio >= bounds[name])
    return out


def run_jpeg_case(case: JpegCase, inp: JpegInputs, threads: int, reps: int, case_budget_s: float) -> dict:
    """Times the four paths interleaved at `threads` torch threads, on the CPU."""
    out_shape, samples, times, mins, errors = time_cpu_methods(
        case.name, dict(inp.methods), (FUSED_TV, FUSED_PIL), threads, reps, case_budget_s
    )
    result = {
        "case": case.name,
        "threads": threads,
        "photo": list(case.photo),
        "jpeg_bytes": len(inp.data),
        "out_shape": list(out_shape),
        "reps": len(samples[FUSED_TV]),
        "load_average": os.getloadavg()[0],
        "times_ms": times,
        "min_ms": mins,
        "ratios": jpeg_ratios(case, times, mins),
    }
    if errors:
        result["errors"] = errors
    return result


def run_jpeg(cases: list[JpegCase], reps: int, threads: list[int], case_budget_s: float, report: dict) -> list[dict]:
    results = []
    for n, case in enumerate(cases, 1):
        _progress(f"jpeg case {n}/{len(cases)}: {case.name}")
        inp = make_jpeg_inputs(case)
        report.setdefault("jpeg_check", {})[case.name] = check_jpeg(case, inp)
        for t in threads:
            _progress(f"  {t} thread{'s' if t > 1 else ''}")
            results.append(run_jpeg_case(case, inp, t, reps, case_budget_s))
    return results


def run(
    device: torch.device,
    reps: int,
    with_compile: bool = True,
    cases: list[Case | ResizeCase | JpegCase] = CASES,
    case_budget_s: float = 20.0,
    resize_threads: list[int] | None = None,
) -> dict:
    """Times every case's methods in this process, then torch.compile in a subprocess (see the docstring).

    Resize and JPEG cases run on the CPU whatever the device, at each of `resize_threads` (default: 1 and
    the current count), and have no compiled baseline."""
    resize_cases = [case for case in cases if isinstance(case, ResizeCase)]
    jpeg_cases = [case for case in cases if isinstance(case, JpegCase)]
    cases = [case for case in cases if isinstance(case, Case)]
    unknown = {case.name for case in cases} - {case.name for case in CASES}
    if with_compile and unknown:
        raise ValueError(f"torch.compile is timed in a subprocess that only knows bench.CASES; unknown: {unknown}")
    if resize_threads is None:
        resize_threads = sorted({1, torch.get_num_threads()})
    timer = Timer(device)
    norm = clip_norm(device)
    report = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "cpu_model": _cpu_model(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "reps": reps,
        "load_average": [os.getloadavg()[0]],
        "results": [],
        "resize_results": [],
        "jpeg_results": [],
    }
    if device.type == "cuda" and cases:
        report["copy_bandwidth_gbs"] = copy_bandwidth_gbs(device, timer, reps)
    for n, case in enumerate(cases, 1):
        _progress(f"case {n}/{len(cases)}: {case.name}")
        stored, x = make_input(case, device)
        check_op(case, x, norm)
        methods = methods_for(case, x, norm)
        errors = drop_failing(methods)
        if OP_OUT in errors or OP_ALLOC in errors:  # a bug, not a benchmark result
            raise RuntimeError(f"{case.name}: the op failed: {errors}")
        samples = sample_interleaved(methods, timer, reps, budget_s=case_budget_s)
        result = {
            "case": case.name,
            "bytes": x.numel() * (x.element_size() + torch.empty(0, dtype=case.out_dtype).element_size()),
            "reps": len(samples[OP_OUT]),
            "times_ms": {name: statistics.median(s) for name, s in samples.items()},
            # On a shared machine, other processes only ever add time: the minimum shows what is left.
            "min_ms": {name: min(s) for name, s in samples.items()},
        }
        if errors:
            result["errors"] = errors
        report["results"].append(result)
        del stored, x, methods
    if device.type == "cuda" and cases:
        report["graph"] = {
            "case": CASES[SMALL_CASE].name,
            **graph_replay_ms(CASES[SMALL_CASE], norm, device, timer, reps),
        }
    if resize_cases:
        report["resize_results"] = run_resize(resize_cases, reps, resize_threads, case_budget_s, report)
    if jpeg_cases:
        report["jpeg_results"] = run_jpeg(jpeg_cases, reps, resize_threads, case_budget_s, report)
    if with_compile and cases:
        _progress("torch.compile, in a subprocess")
        compiled = run_compiled_subprocess(device, reps, [case.name for case in cases], case_budget_s)
        if compiled is None:
            report["compile_error"] = "the torch.compile subprocess failed (its output is above): no compiled/op"
        else:
            for result in report["results"]:
                result["times_ms"].update(compiled[result["case"]]["times_ms"])
                result["min_ms"].update(compiled[result["case"]]["min_ms"])
                result["compile_s"] = compiled[result["case"]]["compile_s"]
    for result in report["results"]:
        result["ratios"] = ratios(result["times_ms"])
    report["load_average"].append(os.getloadavg()[0])
    return report


def run_compiled_subprocess(
    device: torch.device, reps: int, case_names: list[str], case_budget_s: float
) -> dict | None:
    """Runs compiled_worker in a fresh interpreter; returns {case name: {"times_ms": ..., ...}}, or None if
    it failed."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "compiled.json")
        args = ["--device", str(device), "--reps", str(reps), "--case-budget-s", str(case_budget_s)]
        args += ["--compiled-worker", path, "--cases", "|".join(f"^{re.escape(name)}$" for name in case_names)]
        # The child imports this very package, wherever it was imported from here.
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        if subprocess.run([sys.executable, "-m", "fused_input_norm.bench", *args], env=env).returncode != 0:
            return None  # its traceback is on stderr; the rest of the report stands
        with open(path) as f:
            return json.load(f)


def compiled_worker(device: torch.device, reps: int, cases: list[Case], case_budget_s: float, path: str) -> None:
    """torch.compile of the eager code, interleaved with `op (out=)` on the same tensors, case by case."""
    import torch._dynamo
    import torch._inductor.config

    if device.type != "cuda":
        logging.getLogger("torch.utils.cpp_extension").addFilter(_no_cuda_home_guess)
    # Compile in this process: a pool of compile workers gains nothing for one kernel per case and could
    # still be busy next to the timed code.
    torch._inductor.config.compile_threads = 1
    timer = Timer(device)
    norm = clip_norm(device)
    results = {}
    for n, case in enumerate(cases, 1):
        _progress(f"compiled case {n}/{len(cases)}: {case.name}")
        results[case.name] = time_compiled(case, norm, timer, reps, case_budget_s)
        torch._dynamo.reset()  # every case compiles the same code object: keep clear of the recompile limit
    with open(path, "w") as f:
        json.dump(results, f)


def _no_cuda_home_guess(record: logging.LogRecord) -> bool:
    """Drops cpp_extension's "No CUDA runtime is found, using CUDA_HOME=..." (nothing else).

    Inductor's CPU code generation imports torch.utils.cpp_extension for torch's include and library paths;
    that import guesses CUDA_HOME (the environment, else the directory above an `nvcc` on PATH, else
    /usr/local/cuda) and warns whenever it finds one on a machine with no CUDA runtime. A CPU compile never
    uses CUDA_HOME, and no value of it avoids the warning (setting one is a guess found too), so on the CPU
    the worker drops that one record."""
    return not record.getMessage().startswith("No CUDA runtime is found")


def time_compiled(case: Case, norm: FusedInputNorm, timer: Timer, reps: int, case_budget_s: float) -> dict:
    _, x = make_input(case, norm.weight.device)
    out = torch.empty(x.shape, dtype=case.out_dtype, device=x.device)
    t0 = time.perf_counter()
    compiled = torch.compile(eager_fn(case, x, norm), dynamic=False)
    compiled()  # compiles
    compile_s = time.perf_counter() - t0
    methods = {OP_OUT_COMPILE_RUN: lambda: affine_out(out, x, norm.weight, norm.bias, case.dim), COMPILED: compiled}
    samples = sample_interleaved(methods, timer, reps, budget_s=case_budget_s)
    return {
        "times_ms": {name: statistics.median(s) for name, s in samples.items()},
        "min_ms": {name: min(s) for name, s in samples.items()},
        "compile_s": compile_s,
    }


def _progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def format_report(report: dict) -> str:
    lines = [
        f"fused_input_norm benchmark, {report['date']}: {report['device']} ({report['cpu_model']}), "
        f"{report['threads']} threads, torch {report['torch']}, median of up to {report['reps']} rounds; "
        f"1-min load average {report['load_average'][0]:.1f} at the start, {report['load_average'][-1]:.1f} at the end",
    ]
    if "compile_error" in report:
        lines.append(report["compile_error"])
    if "copy_bandwidth_gbs" in report:
        lines.append(f"device-to-device copy: {report['copy_bandwidth_gbs']:.0f} GB/s")
    for r in report["results"]:
        lines.append("")
        compile_note = f", compiled in {r['compile_s']:.0f} s" if "compile_s" in r else ""
        lines.append(f"{r['case']}  ({r['bytes'] / 1e6:.0f} MB moved, median of {r['reps']}{compile_note})")
        lines.append("  " + "  ".join(f"{k} {v:.2f}x" for k, v in r["ratios"].items()))
        lines.append(f"  {'method':<26}{'median ms':>10}{'GB/s':>9}{'vs op':>9}{'min ms':>10}")
        for name, ms in r["times_ms"].items():
            op = r["times_ms"][OP_OUT_COMPILE_RUN if name == COMPILED else OP_OUT]
            lines.append(
                f"  {name:<26}{ms:>10.3f}{r['bytes'] / ms / 1e6:>9.1f}{ms / op:>8.2f}x{r['min_ms'][name]:>10.3f}"
            )
        for name, error in r.get("errors", {}).items():
            lines.append(f"  {name:<26}failed: {error}")
    if "graph" in report:
        g = report["graph"]
        lines.append("")
        lines.append(
            f"{g['case']}: CUDA graph replay {g['graph replay']:.3f} ms, eager launch {g['eager launch']:.3f} ms"
        )
    if report["results"]:
        lines.append("")
        lines.append(summary_table(report))
    if report.get("resize_results"):
        lines.append("")
        lines.append(format_resize(report))
    if report.get("jpeg_results"):
        lines.append("")
        lines.append(format_jpeg(report))
    return "\n".join(lines)


def _threads(n: int) -> str:
    return f"{n} thread{'s' if n > 1 else ''}"


def _target(name: str, t: dict) -> str:
    return (
        f"{name} {t['ratio']:.2f}x (minima {t['min_ratio']:.2f}x), target {t['op']} {t['bound']:g}x: "
        f"{'met' if t['met'] else 'NOT MET'}"
    )


def format_resize(report: dict) -> str:
    """Per case and thread count: each method's median and minimum, its ratio to torchvision's resize, the
    targets; then one Markdown table."""
    lines = [
        "Resize (on the CPU; Pillow is single-threaded at any count): exact uint8 resize fused with normalize and "
        "layout, u8 -> bf16, against the u8 -> u8 resizes alone and the default transformers processor "
        "(torchvision backend; its full output is fp32)"
    ]
    for r in report["resize_results"]:
        h, w = r["photo"]
        crop = f", crop {r['crop'][2]}x{r['crop'][3]} at ({r['crop'][0]}, {r['crop'][1]})" if r["crop"] else ""
        lines.append("")
        lines.append(
            f"{r['case']}  ({w}x{h} -> {r['size'][1]}x{r['size'][0]}{crop}, out {r['out_shape']}; "
            f"{_threads(r['threads'])}, median of {r['reps']})"
        )
        lines.append(f"  {'method':<30}{'median ms':>10}{'min ms':>10}{'vs tv resize':>14}")
        base = r["times_ms"].get(TV_RESIZE)
        for name, ms in r["times_ms"].items():
            rel = f"{ms / base:>13.2f}x" if base else f"{'-':>14}"
            lines.append(f"  {name:<30}{ms:>10.3f}{r['min_ms'][name]:>10.3f}{rel}")
        for name, error in r.get("errors", {}).items():
            lines.append(f"  {name:<30}failed: {error}")
        for name, t in r["targets"].items():
            lines.append("  " + _target(name, t))
        for name, ratio in r["ratios"].items():
            lines.append(f"  {name} {ratio:.2f}x")
    lines.append("")
    lines.append(resize_summary_table(report))
    return "\n".join(lines)


def _jpeg_ratio(name: str, t: dict) -> str:
    text = f"{name} {t['ratio']:.2f}x (minima {t['min_ratio']:.2f}x)"
    if "bound" in t:
        text += f", target {t['op']} {t['bound']:g}x: {'met' if t['met'] else 'NOT MET'}"
    return text


def format_jpeg(report: dict) -> str:
    """Per JPEG case and thread count: each path's median and minimum, the ratios (targets met or not), the
    checks; then one Markdown table."""
    lines = [
        "JPEG bytes end to end (on the CPU, decode included; PIL's decode and the Pil processor are single-threaded "
        "at any count): FusedImageProcessor (torchvision.io decode, then resize + normalize + patchify in one op "
        "call) against PIL.Image.open + the transformers processor it reproduces; fp32 Qwen2-VL rows"
    ]
    for r in report["jpeg_results"]:
        h, w = r["photo"]
        lines.append("")
        lines.append(
            f"{r['case']}  ({w}x{h}, JPEG {r['jpeg_bytes'] / 1e6:.2f} MB, out {r['out_shape']}; "
            f"{_threads(r['threads'])}, median of {r['reps']}, load {r['load_average']:.1f})"
        )
        lines.append(f"  {'method':<46}{'median ms':>10}{'min ms':>10}")
        for name, ms in r["times_ms"].items():
            lines.append(f"  {name:<46}{ms:>10.2f}{r['min_ms'][name]:>10.2f}")
        for name, error in r.get("errors", {}).items():
            lines.append(f"  {name:<46}failed: {error}")
        for name, t in r["ratios"].items():
            lines.append("  " + _jpeg_ratio(name, t))
    for name, checked in report.get("jpeg_check", {}).items():
        lines.append(
            f"{name}: max |fused - processor| on PIL's decoded pixels {checked['torchvision: same pixels']:.1e} "
            f"(torchvision), {checked['pil: same pixels']:.1e} (pil); from the bytes {checked['torchvision: from the bytes']:.1e}, "
            f"{checked['pil: from the bytes']:.1e}; PIL vs torchvision.io decode: max {checked['decoders: max levels']} "
            f"levels, {100 * checked['decoders: fraction differing']:.2f}% of values differ"
        )
    lines.append("")
    lines.append(jpeg_summary_table(report))
    return "\n".join(lines)


def jpeg_summary_table(report: dict) -> str:
    """One Markdown row per JPEG case and thread count: medians, the ratios (targets met or not), load."""
    head = ["case", "threads", "load", *JPEG_SHORT_NAMES.values(), *JPEG_RATIOS]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report["jpeg_results"]:
        t = r["times_ms"]
        cells = [r["case"], str(r["threads"]), f"{r['load_average']:.1f}"]
        cells += [_ms(t[k]) if k in t else "-" for k in JPEG_SHORT_NAMES]
        for name in JPEG_RATIOS:
            x = r["ratios"].get(name)
            if x is None:
                cells.append("-")
            elif "bound" in x:
                cells.append(f"{x['ratio']:.2f} (>= {x['bound']:g}: {'met' if x['met'] else 'not met'})")
            else:
                cells.append(f"{x['ratio']:.2f}")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def resize_summary_table(report: dict) -> str:
    """One Markdown row per resize case and thread count: medians, and the targets' ratios (met or not)."""
    targets = [
        f"{SHORT_NAMES[a]} / {SHORT_NAMES[b]} ({op} {bound:g}{', 1 thread' if at == 1 else ''})"
        for a, b, op, bound, at in RESIZE_TARGETS.values()
    ]
    head = ["case", "threads", *SHORT_NAMES.values(), *targets]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report["resize_results"]:
        t = r["times_ms"]
        cells = [r["case"], str(r["threads"]), *(_ms(t[k]) if k in t else "-" for k in SHORT_NAMES)]
        for name in RESIZE_TARGETS:
            target = r["targets"].get(name)
            cells.append(f"{target['ratio']:.2f} {'met' if target['met'] else 'not met'}" if target else "-")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def summary_table(report: dict) -> str:
    """One Markdown row per case: the figures to compare across runs (and the README's table)."""
    ratio_names = [name for name in RATIOS if any(name in r["ratios"] for r in report["results"])]
    head = ["case", OP_OUT, "copy_(view)", "contiguous copy", OP_ALLOC, *ratio_names]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report["results"]:
        t = r["times_ms"]
        cells = [r["case"], *(_ms(t[k]) if k in t else "-" for k in (OP_OUT, COPY_VIEW, COPY_CONTIG, OP_ALLOC))]
        cells += [f"{r['ratios'][k]:.2f}" if k in r["ratios"] else "-" for k in ratio_names]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _ms(ms: float) -> str:
    return f"{ms:.3f} ms" if ms < 1 else f"{ms:.3g} ms" if ms < 100 else f"{ms:.0f} ms"


def plot(report: dict, path: str) -> None:
    """One panel per affine case, then one per resize case and thread count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(_affine_panel, r) for r in report["results"]]
    panels += [(_resize_panel, r) for r in report.get("resize_results", [])]
    panels += [(_jpeg_panel, r) for r in report.get("jpeg_results", [])]
    cols = 2 if len(panels) > 3 else 1
    rows = max(1, (len(panels) + cols - 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(9 * cols, 2.9 * rows), squeeze=False, layout="constrained")
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax, (draw, r) in zip(axes.flat, panels, strict=False):
        draw(ax, r)
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=7)
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xscale("log")
        ax.set_xlabel("ms per call (log)", fontsize=7)
    device = report["device"] if report["device"] != "cpu" else "CPU"
    legend = []
    if report["results"]:
        legend.append(
            "green: this op (light: re-timed beside torch.compile, in its own process); hatched: the floors, "
            "converting copies; blue dashed line: contiguous copy; red dotted line: copy_(view); ratios vs op (out=) "
            "of the same run"
        )
    if report.get("resize_results"):
        legend.append(
            "resize (CPU): green: ours, whole call u8 -> bf16; hatched: the u8 -> u8 resizes alone; blue dashed line: "
            "torchvision's resize; ratios vs it, of the same run"
        )
    if report.get("jpeg_results"):
        legend.append("JPEG bytes end to end (CPU): green: FusedImageProcessor; ratios vs it, of the same run")
    fig.suptitle(
        f"fused_input_norm: {device}, {report['cpu_model']}, {report['threads']} threads, "
        f"median of up to {report['reps']} reps, torch {report['torch']}, {report['date']}\n" + "\n".join(legend),
        fontsize=9,
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _bars(
    ax, t: dict[str, float], colors: dict[str, str], hatched: tuple[str, ...], base: Callable[[str], float], unit: str
):
    names = list(t)
    bars = ax.barh(
        names, [t[n] for n in names], color=[colors.get(n, "tab:gray") for n in names], edgecolor="black", linewidth=0.6
    )
    for bar, name in zip(bars, names, strict=True):
        if name in hatched:
            bar.set_hatch("///")
    lo, hi = min(t.values()), max(t.values())
    ax.set_xlim(lo / 1.6, hi * 6)  # room for the labels right of the longest bar
    for bar, name in zip(bars, names, strict=True):
        ax.text(
            bar.get_width() * 1.08,
            bar.get_y() + bar.get_height() / 2,
            f"{_ms(t[name])}  {t[name] / base(name):.2f}x {unit}",
            va="center",
            fontsize=7,
        )


def _affine_panel(ax, r: dict) -> None:
    t = r["times_ms"]
    colors = {
        OP_OUT: "tab:green",
        OP_ALLOC: "tab:green",
        OP_OUT_COMPILE_RUN: "#98df8a",
        **dict.fromkeys(FLOORS, "white"),
    }
    _bars(ax, t, colors, FLOORS, lambda name: t[OP_OUT_COMPILE_RUN if name == COMPILED else OP_OUT], "op")
    # The floors as lines across the whole panel, so every bar reads against them.
    for floor, color, style in ((COPY_CONTIG, "tab:blue", "--"), (COPY_VIEW, "tab:red", ":")):
        if floor in t:
            ax.axvline(t[floor], color=color, linestyle=style, linewidth=1.2)
    rt = "   ".join(f"{k} {v:.2f}" for k, v in r["ratios"].items())
    ax.set_title(f"{r['case']}  ({r['bytes'] / 1e6:.0f} MB, median of {r['reps']})\n{rt}", fontsize=8)


def _resize_panel(ax, r: dict) -> None:
    t = r["times_ms"]
    colors = {OURS_TV: "tab:green", OURS_PIL: "tab:green", TV_RESIZE: "white", PIL_RESIZE: "white"}
    base = t.get(TV_RESIZE, t[OURS_TV])
    _bars(ax, t, colors, (TV_RESIZE, PIL_RESIZE), lambda name: base, "tv resize" if TV_RESIZE in t else "ours tv")
    ax.axvline(base, color="tab:blue", linestyle="--", linewidth=1.2)
    rt = "   ".join(
        f"{SHORT_NAMES[a]}/{SHORT_NAMES[b]} {v['ratio']:.2f} ({v['op']} {v['bound']:g}: {'met' if v['met'] else 'not met'})"
        for k, v in r["targets"].items()
        for a, b, *_ in [RESIZE_TARGETS[k]]
    )
    h, w = r["photo"]
    ax.set_title(
        f"{r['case']}  ({w}x{h} -> {r['size'][1]}x{r['size'][0]}, {_threads(r['threads'])}, median of {r['reps']})"
        f"\n{rt}",
        fontsize=8,
    )


def _jpeg_panel(ax, r: dict) -> None:
    t = r["times_ms"]
    colors = {FUSED_TV: "tab:green", FUSED_PIL: "tab:green"}
    _bars(ax, t, colors, (), lambda name: t[FUSED_TV], "fused tv")
    rt = "   ".join(
        f"{k} {v['ratio']:.2f}" + (f" (>= {v['bound']:g}: {'met' if v['met'] else 'not met'})" if "bound" in v else "")
        for k, v in r["ratios"].items()
    )
    h, w = r["photo"]
    ax.set_title(f"{r['case']}  ({w}x{h}, {_threads(r['threads'])}, median of {r['reps']})\n{rt}", fontsize=8)


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reps", type=int, default=15, help="rounds per case (fewer for a slow case: --case-budget-s)")
    parser.add_argument("--case-budget-s", type=float, default=20.0, help="about this many seconds of rounds per case")
    parser.add_argument(
        "--cases",
        metavar="REGEX",
        help="only the cases whose name matches ('^resize': only the resize cases, '^jpeg': only the JPEG ones)",
    )
    parser.add_argument(
        "--resize-threads",
        metavar="N[,N...]",
        type=_thread_counts,
        help="torch thread counts the resize and JPEG cases run at (default: 1 and the current count)",
    )
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (~1 min of compiling on CPU)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON ('-' for stdout)")
    parser.add_argument("--plot", metavar="FILE.png", help="bar chart (needs matplotlib)")
    parser.add_argument("--compiled-worker", metavar="FILE", help=argparse.SUPPRESS)  # run()'s subprocess
    args = parser.parse_args(argv)
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        parser.error("--plot needs matplotlib: pip install matplotlib (or the package's [plot] extra)")
    all_cases = [*CASES, *RESIZE_CASES, *JPEG_CASES]
    cases = [case for case in all_cases if args.cases is None or re.search(args.cases, case.name)]
    if not cases:
        parser.error(f"--cases {args.cases!r} matches none of: {', '.join(case.name for case in all_cases)}")
    device = torch.device(args.device)
    if args.compiled_worker:
        compiled_worker(
            device, args.reps, [c for c in cases if isinstance(c, Case)], args.case_budget_s, args.compiled_worker
        )
        return None
    missing = missing_resize_dependencies()
    if missing and any(isinstance(case, ResizeCase) for case in cases):
        parser.error(
            f"the resize cases need {', '.join(missing)} (pip install torchvision pillow transformers scikit-image, "
            "or the package's [test] extra); --cases can leave them out"
        )
    missing = missing_jpeg_dependencies()
    if missing and any(isinstance(case, JpegCase) for case in cases):
        parser.error(
            f"the jpeg cases need {', '.join(missing)} (pip install torchvision pillow transformers scikit-image); "
            "--cases can leave them out"
        )
    report = run(device, args.reps, not args.no_compile, cases, args.case_budget_s, args.resize_threads)
    if args.json == "-":
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2)
    if args.plot:
        plot(report, args.plot)
    return report


def _thread_counts(text: str) -> list[int]:
    try:
        counts = sorted({int(part) for part in text.split(",")})
    except ValueError:
        counts = []
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"expected positive thread counts separated by commas, got {text!r}")
    return counts


if __name__ == "__main__":
    main()
