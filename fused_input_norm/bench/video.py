"""The video suite: a decoded clip to pixel_values_videos, FusedVideoProcessor against transformers' video
processor built from the same config (Qwen2-VL's and Qwen3-VL's class defaults), on the CPU at each thread
count; float32 rows and the uint8 rows of vLLM's device-normalize path."""

import os
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

# Method names, as they appear in the report.
FUSED, FUSED_U8 = "FusedVideoProcessor", "FusedVideoProcessor, uint8"
PROC, PROC_U8 = "transformers video processor", "transformers, rescale/normalize off (uint8)"
VIDEO_SHORT_NAMES = {FUSED: "fused", FUSED_U8: "fused u8", PROC: "processor", PROC_U8: "proc. u8"}
# name -> (numerator, denominator); a case's targets (VideoCase.targets) bound some of them.
VIDEO_RATIOS = {"processor / fused": (PROC, FUSED), "uint8: processor / fused": (PROC_U8, FUSED_U8)}
MODELS = {"qwen2vl": "Qwen2VLVideoProcessor", "qwen3vl": "Qwen3VLVideoProcessor"}


@dataclass(frozen=True)
class VideoCase:
    name: str
    clip: tuple[int, int, int]  # (frames, height, width)
    model: str  # "qwen2vl" or "qwen3vl": the class's defaults, do_sample_frames off (as vLLM calls it)
    targets: tuple[tuple[str, float], ...] = (("processor / fused", 5.0),)  # (VIDEO_RATIOS key, ratio >= this)


VIDEO_CASES = [
    VideoCase("video qwen2vl 32x1280x720 clip -> f32 rows", (32, 720, 1280), "qwen2vl"),
    VideoCase("video qwen3vl 32x1280x720 clip -> f32 rows", (32, 720, 1280), "qwen3vl"),
    VideoCase("video qwen2vl 64x1920x1080 clip -> f32 rows", (64, 1080, 1920), "qwen2vl"),
    VideoCase("video qwen3vl 64x1920x1080 clip -> f32 rows", (64, 1080, 1920), "qwen3vl"),
]


def missing_video_dependencies() -> list[str]:
    return missing_resize_dependencies()


def make_clip(frames: int, height: int, width: int, step: tuple[int, int] = (2, 3)) -> torch.Tensor:
    """uint8 [T, H, W, 3]: a window moving `step` pixels a frame across a real photo (what a decoder gives)."""
    dy, dx = step
    photo = resize_photo(height + dy * (frames - 1), width + dx * (frames - 1))
    return torch.stack([photo[t * dy : t * dy + height, t * dx : t * dx + width] for t in range(frames)])


@dataclass
class VideoInputs:
    clip: torch.Tensor  # uint8 [T, H, W, 3]
    methods: dict[str, Callable[[], object]]


def make_video_inputs(case: VideoCase) -> VideoInputs:
    import transformers

    from ..video import FusedVideoProcessor

    clip = make_clip(*case.clip)
    config = {"video_processor_type": MODELS[case.model]}
    fused = FusedVideoProcessor.from_preprocessor_config(config, device="cpu")
    processor = getattr(transformers, MODELS[case.model])(**config)
    call = {"do_sample_frames": False, "cap_pixels_per_frame": False}

    def theirs(**kwargs):
        return lambda: processor(clip, return_tensors="pt", **call, **kwargs)["pixel_values_videos"]

    methods = {
        FUSED: lambda: fused(clip, **call)["pixel_values_videos"],
        FUSED_U8: lambda: fused(clip, torch.uint8, **call)["pixel_values_videos"],
        PROC: theirs(),
        PROC_U8: theirs(do_rescale=False, do_normalize=False),
    }
    return VideoInputs(clip, methods)


def check_video(case: VideoCase, inp: VideoInputs) -> dict:
    """Before timing: float32 within 1e-6 of the processor's, uint8 equal. Returns the max differences."""
    f32 = (inp.methods[FUSED]() - inp.methods[PROC]()).abs().max().item()
    if not f32 <= 1e-6:
        raise AssertionError(f"{case.name}: FusedVideoProcessor differs from the processor by {f32}")
    u8 = (inp.methods[FUSED_U8]().int() - inp.methods[PROC_U8]().int()).abs().max().item()
    if u8 != 0:
        raise AssertionError(f"{case.name}: the uint8 rows differ from the processor's by {u8} levels")
    return {"float32 max |diff|": f32, "uint8 max |diff|": u8}


def video_ratios(case: VideoCase, times: dict[str, float], mins: dict[str, float]) -> dict[str, dict]:
    return target_ratios(VIDEO_RATIOS, case.targets, times, mins)


def run_video_case(case: VideoCase, inp: VideoInputs, threads: int, reps: int, case_budget_s: float) -> dict:
    out_shape, samples, times, mins, errors = time_cpu_methods(
        case.name, dict(inp.methods), (FUSED, FUSED_U8), threads, reps, case_budget_s
    )
    result = {
        "case": case.name,
        "threads": threads,
        "clip": list(case.clip),
        "out_shape": list(out_shape),
        "reps": len(samples[FUSED]),
        "load_average": os.getloadavg()[0],
        "times_ms": times,
        "min_ms": mins,
        "ratios": video_ratios(case, times, mins),
    }
    if errors:
        result["errors"] = errors
    return result


def run_video(cases: list[VideoCase], reps: int, threads: list[int], case_budget_s: float, report: dict) -> list[dict]:
    def run_case(case: VideoCase, inp: VideoInputs, t: int) -> dict:
        return run_video_case(case, inp, t, reps, case_budget_s)

    return run_cpu_suite("video", cases, threads, report, "video_check", make_video_inputs, check_video, run_case)


def format_video(report: dict) -> str:
    lines = [
        "Video clips (on the CPU; a decoded uint8 clip [T, H, W, 3] to pixel_values_videos): FusedVideoProcessor "
        "against transformers' video processor built from the same config (the class defaults, do_sample_frames "
        "off, as vLLM calls it); float32 rows, and uint8 rows (rescale and normalize off: vLLM's device-normalize "
        "path)"
    ]
    for r in report["video_results"]:
        frames, h, w = r["clip"]
        lines += result_lines(
            r,
            f"{r['case']}  ({frames} frames of {w}x{h}, out {r['out_shape']}; {threads_label(r['threads'])}, "
            f"median of {r['reps']}, load {r['load_average']:.1f})",
        )
    for name, checked in report.get("video_check", {}).items():
        lines.append(
            f"{name}: max |fused - processor| {checked['float32 max |diff|']:.1e} (float32), "
            f"{checked['uint8 max |diff|']} (uint8)"
        )
    lines.append("")
    lines.append(video_summary_table(report))
    return "\n".join(lines)


def video_summary_table(report: dict) -> str:
    return summary_table(report["video_results"], VIDEO_SHORT_NAMES, list(VIDEO_RATIOS))


def video_panel(ax, r: dict) -> None:
    t = r["times_ms"]
    bars(ax, t, {FUSED: "tab:green", FUSED_U8: "tab:green"}, (), lambda name: t[FUSED], "fused")
    rt = "   ".join(
        f"{k} {v['ratio']:.2f}" + (f" (>= {v['bound']:g}: {'met' if v['met'] else 'not met'})" if "bound" in v else "")
        for k, v in r["ratios"].items()
    )
    frames, h, w = r["clip"]
    ax.set_title(
        f"{r['case']}  ({frames}x{w}x{h}, {threads_label(r['threads'])}, median of {r['reps']})\n{rt}", fontsize=8
    )


SUITE = Suite(
    "video_results",
    format_video,
    video_panel,
    "Video clips (CPU): green: FusedVideoProcessor; ratios vs it, of the same run",
)
