"""The video suite: a decoded clip to pixel_values_videos, FusedVideoProcessor against transformers' video
processor built from the same config (Qwen2-VL's and Qwen3-VL's class defaults), on the CPU at each thread
count; float32 rows and the uint8 rows of vLLM's device-normalize path. Where torchcodec can decode, the same
clip encoded as an H.264 MP4 too: decode included, the bytes to our processor and the file's path to
transformers' (which decodes it with torchcodec), and the frames per second each gets through."""

import atexit
import os
import shutil
import tempfile
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
FUSED_MP4, PROC_MP4 = "FusedVideoProcessor from MP4 bytes", "transformers from the MP4's path"
VIDEO_SHORT_NAMES = {
    FUSED: "fused",
    FUSED_U8: "fused u8",
    PROC: "processor",
    PROC_U8: "proc. u8",
    FUSED_MP4: "fused mp4",
    PROC_MP4: "proc. mp4",
}
# name -> (numerator, denominator); a case's targets (VideoCase.targets) bound some of them.
VIDEO_RATIOS = {
    "processor / fused": (PROC, FUSED),
    "uint8: processor / fused": (PROC_U8, FUSED_U8),
    "mp4: processor / fused": (PROC_MP4, FUSED_MP4),
}
MP4_FPS = 30.0
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


def mp4_unavailable() -> str | None:
    """Why the MP4 methods cannot run (torchcodec or FFmpeg's libraries missing), or None."""
    try:
        from torchcodec.encoders import VideoEncoder  # noqa: F401
    except Exception as error:  # ImportError, or FFmpeg's libraries missing
        return f"torchcodec cannot decode here ({type(error).__name__}: {error})"
    return None


def encode_mp4(clip: torch.Tensor) -> tuple[bytes, str]:
    """uint8 [T, H, W, 3] as an H.264 MP4 at MP4_FPS (torchcodec's encoder): its bytes, and a file holding them
    (removed at exit) for transformers, which takes a path."""
    from torchcodec.encoders import VideoEncoder

    data = VideoEncoder(clip.permute(0, 3, 1, 2).contiguous(), frame_rate=MP4_FPS).to_tensor("mp4").numpy().tobytes()
    folder = tempfile.mkdtemp(prefix="fused_input_norm_bench_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = os.path.join(folder, "clip.mp4")
    with open(path, "wb") as f:
        f.write(data)
    return data, path


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
    if mp4_unavailable() is None:
        data, path = encode_mp4(clip)
        methods[FUSED_MP4] = lambda: fused(data, **call)["pixel_values_videos"]
        methods[PROC_MP4] = lambda: processor(path, return_tensors="pt", **call)["pixel_values_videos"]
    return VideoInputs(clip, methods)


def check_video(case: VideoCase, inp: VideoInputs) -> dict:
    """Before timing: float32 within 1e-6 of the processor's, uint8 equal. Returns the max differences."""
    f32 = (inp.methods[FUSED]() - inp.methods[PROC]()).abs().max().item()
    if not f32 <= 1e-6:
        raise AssertionError(f"{case.name}: FusedVideoProcessor differs from the processor by {f32}")
    u8 = (inp.methods[FUSED_U8]().int() - inp.methods[PROC_U8]().int()).abs().max().item()
    if u8 != 0:
        raise AssertionError(f"{case.name}: the uint8 rows differ from the processor's by {u8} levels")
    checked = {"float32 max |diff|": f32, "uint8 max |diff|": u8}
    if FUSED_MP4 in inp.methods:
        mp4 = (inp.methods[FUSED_MP4]() - inp.methods[PROC_MP4]()).abs().max().item()
        if not mp4 <= 1e-6:
            raise AssertionError(f"{case.name}: from the MP4, FusedVideoProcessor differs from the processor by {mp4}")
        checked["mp4 float32 max |diff|"] = mp4
    return checked


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
        if FUSED_MP4 in r["times_ms"]:
            rates = ", ".join(
                f"{VIDEO_SHORT_NAMES[k]} {frames / r['times_ms'][k] * 1e3:.0f}"
                for k in (FUSED_MP4, PROC_MP4)
                if k in r["times_ms"]
            )
            lines.append(f"  from the H.264 MP4, decode included, frames per second: {rates}")
    for name, checked in report.get("video_check", {}).items():
        lines.append(
            f"{name}: max |fused - processor| {checked['float32 max |diff|']:.1e} (float32), "
            f"{checked['uint8 max |diff|']} (uint8)"
            + (
                f", {checked['mp4 float32 max |diff|']:.1e} (from the MP4)"
                if "mp4 float32 max |diff|" in checked
                else ""
            )
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
