"""The JPEG suite: encoded bytes to pixel_values end to end, decode included, FusedImageProcessor against
PIL decode + transformers' processors, on the CPU."""

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .common import (
    Suite,
    bars,
    result_lines,
    run_cpu_suite,
    summary_table,
    target_ratios,
    threads_label,
    time_cpu_methods,
)
from .resize import missing_resize_dependencies, resize_photo

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
        from ..processor import FusedImageProcessor  # noqa: F401
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

    from ..processor import FusedImageProcessor

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
    return target_ratios(JPEG_RATIOS, case.targets, times, mins)


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
    def run_case(case: JpegCase, inp: JpegInputs, t: int) -> dict:
        return run_jpeg_case(case, inp, t, reps, case_budget_s)

    return run_cpu_suite("jpeg", cases, threads, report, "jpeg_check", make_jpeg_inputs, check_jpeg, run_case)


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
        lines += result_lines(
            r,
            f"{r['case']}  ({w}x{h}, JPEG {r['jpeg_bytes'] / 1e6:.2f} MB, out {r['out_shape']}; "
            f"{threads_label(r['threads'])}, median of {r['reps']}, load {r['load_average']:.1f})",
        )
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
    return summary_table(report["jpeg_results"], JPEG_SHORT_NAMES, list(JPEG_RATIOS))


def jpeg_panel(ax, r: dict) -> None:
    t = r["times_ms"]
    colors = {FUSED_TV: "tab:green", FUSED_PIL: "tab:green"}
    bars(ax, t, colors, (), lambda name: t[FUSED_TV], "fused tv")
    rt = "   ".join(
        f"{k} {v['ratio']:.2f}" + (f" (>= {v['bound']:g}: {'met' if v['met'] else 'not met'})" if "bound" in v else "")
        for k, v in r["ratios"].items()
    )
    h, w = r["photo"]
    ax.set_title(f"{r['case']}  ({w}x{h}, {threads_label(r['threads'])}, median of {r['reps']})\n{rt}", fontsize=8)


SUITE = Suite(
    "jpeg_results",
    format_jpeg,
    jpeg_panel,
    "JPEG bytes end to end (CPU): green: FusedImageProcessor; ratios vs it, of the same run",
)
