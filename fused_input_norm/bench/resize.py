"""The resize suite: the exact uint8 resize fused with normalize and layout, against what engines run today
(torchvision's and Pillow's resizes, transformers' processors), on the CPU at each thread count."""

import functools
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..geometry import center_crop_box, shortest_edge_size, smart_resize
from ..module import FusedInputNorm
from .common import (
    Suite,
    bars,
    failed_lines,
    markdown_table,
    ms_label,
    ratio_line,
    run_cpu_suite,
    threads_label,
    time_cpu_methods,
)

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
    size = shortest_edge_size(height, width, shortest_edge)
    return size, center_crop_box(size, (crop_h, crop_w))


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


def resize_methods(
    case: ResizeCase, inp: ResizeInputs, dtype: torch.dtype = torch.bfloat16
) -> dict[str, Callable[[], object]]:
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
    def run_case(case: ResizeCase, inp: ResizeInputs, t: int) -> dict:
        return run_resize_case(case, inp, t, reps, case_budget_s)

    return run_cpu_suite(
        "resize", cases, threads, report, "resize_check_max_diff", make_resize_inputs, check_resize, run_case
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
            f"{threads_label(r['threads'])}, median of {r['reps']})"
        )
        lines.append(f"  {'method':<30}{'median ms':>10}{'min ms':>10}{'vs tv resize':>14}")
        base = r["times_ms"].get(TV_RESIZE)
        for name, ms in r["times_ms"].items():
            rel = f"{ms / base:>13.2f}x" if base else f"{'-':>14}"
            lines.append(f"  {name:<30}{ms:>10.3f}{r['min_ms'][name]:>10.3f}{rel}")
        lines += failed_lines(r, 30)
        for name, t in r["targets"].items():
            lines.append("  " + ratio_line(name, t))
        for name, ratio in r["ratios"].items():
            lines.append(f"  {name} {ratio:.2f}x")
    lines.append("")
    lines.append(resize_summary_table(report))
    return "\n".join(lines)


def resize_summary_table(report: dict) -> str:
    """One Markdown row per resize case and thread count: medians, and the targets' ratios (met or not)."""
    targets = [
        f"{SHORT_NAMES[a]} / {SHORT_NAMES[b]} ({op} {bound:g}{', 1 thread' if at == 1 else ''})"
        for a, b, op, bound, at in RESIZE_TARGETS.values()
    ]
    head = ["case", "threads", *SHORT_NAMES.values(), *targets]
    rows = []
    for r in report["resize_results"]:
        t = r["times_ms"]
        cells = [r["case"], str(r["threads"]), *(ms_label(t[k]) if k in t else "-" for k in SHORT_NAMES)]
        for name in RESIZE_TARGETS:
            target = r["targets"].get(name)
            cells.append(f"{target['ratio']:.2f} {'met' if target['met'] else 'not met'}" if target else "-")
        rows.append(cells)
    return markdown_table(head, rows)


def resize_panel(ax, r: dict) -> None:
    t = r["times_ms"]
    colors = {OURS_TV: "tab:green", OURS_PIL: "tab:green", TV_RESIZE: "white", PIL_RESIZE: "white"}
    base = t.get(TV_RESIZE, t[OURS_TV])
    bars(ax, t, colors, (TV_RESIZE, PIL_RESIZE), lambda name: base, "tv resize" if TV_RESIZE in t else "ours tv")
    ax.axvline(base, color="tab:blue", linestyle="--", linewidth=1.2)
    rt = "   ".join(
        f"{SHORT_NAMES[a]}/{SHORT_NAMES[b]} {v['ratio']:.2f} ({v['op']} {v['bound']:g}: {'met' if v['met'] else 'not met'})"
        for k, v in r["targets"].items()
        for a, b, *_ in [RESIZE_TARGETS[k]]
    )
    h, w = r["photo"]
    ax.set_title(
        f"{r['case']}  ({w}x{h} -> {r['size'][1]}x{r['size'][0]}, {threads_label(r['threads'])}, median of {r['reps']})"
        f"\n{rt}",
        fontsize=8,
    )


SUITE = Suite(
    "resize_results",
    format_resize,
    resize_panel,
    "resize (CPU): green: ours, whole call u8 -> bf16; hatched: the u8 -> u8 resizes alone; blue dashed line: "
    "torchvision's resize; ratios vs it, of the same run",
)
