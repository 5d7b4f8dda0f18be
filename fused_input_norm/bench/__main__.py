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

The video cases (names starting "video"; `--cases ^video`) time a decoded clip (32 frames of 1280x720, 64 of
1920x1080) to pixel_values_videos with Qwen2-VL's and Qwen3-VL's video processor defaults (do_sample_frames
off, as vLLM calls them), on the CPU at the same thread counts: FusedVideoProcessor against transformers' video
processor built from the same config (target: >= 5x faster), float32 rows and uint8 rows (rescale and
normalize off).
"""

import argparse
import datetime
import importlib.util
import json
import os
import re

import torch

from . import affine, jpeg, resize, video
from .affine import CASES, Case, add_compiled, compiled_worker, ratios, run_affine
from .common import cpu_model
from .jpeg import JPEG_CASES, JpegCase, missing_jpeg_dependencies, run_jpeg
from .resize import RESIZE_CASES, ResizeCase, missing_resize_dependencies, run_resize
from .video import VIDEO_CASES, VideoCase, missing_video_dependencies, run_video

SUITES = (affine.SUITE, resize.SUITE, jpeg.SUITE, video.SUITE)  # in the report's, the text's and the plot's order


def run(
    device: torch.device,
    reps: int,
    with_compile: bool = True,
    cases: list[Case | ResizeCase | JpegCase | VideoCase] = CASES,
    case_budget_s: float = 20.0,
    resize_threads: list[int] | None = None,
) -> dict:
    """Times every case's methods in this process, then torch.compile in a subprocess (see the docstring).

    Resize, JPEG and video cases run on the CPU whatever the device, at each of `resize_threads` (default: 1 and
    the current count), and have no compiled baseline."""
    resize_cases = [case for case in cases if isinstance(case, ResizeCase)]
    jpeg_cases = [case for case in cases if isinstance(case, JpegCase)]
    video_cases = [case for case in cases if isinstance(case, VideoCase)]
    cases = [case for case in cases if isinstance(case, Case)]
    unknown = {case.name for case in cases} - {case.name for case in CASES}
    if with_compile and unknown:
        raise ValueError(
            f"torch.compile is timed in a subprocess that only knows bench.affine.CASES; unknown: {unknown}"
        )
    if resize_threads is None:
        resize_threads = sorted({1, torch.get_num_threads()})
    report = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "cpu_model": cpu_model(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "reps": reps,
        "load_average": [os.getloadavg()[0]],
        **{suite.key: [] for suite in SUITES},
    }
    if cases:
        run_affine(cases, device, reps, case_budget_s, report)
    if resize_cases:
        report["resize_results"] = run_resize(resize_cases, reps, resize_threads, case_budget_s, report)
    if jpeg_cases:
        report["jpeg_results"] = run_jpeg(jpeg_cases, reps, resize_threads, case_budget_s, report)
    if video_cases:
        report["video_results"] = run_video(video_cases, reps, resize_threads, case_budget_s, report)
    if with_compile and cases:
        add_compiled(report, device, reps, case_budget_s)
    for result in report["results"]:
        result["ratios"] = ratios(result["times_ms"])
    report["load_average"].append(os.getloadavg()[0])
    return report


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
    for suite in SUITES:
        if report.get(suite.key):
            lines.append("")
            lines.append(suite.format(report))
    return "\n".join(lines)


def plot(report: dict, path: str) -> None:
    """One panel per affine case, then one per resize case and thread count, then one per JPEG case and
    thread count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(suite.panel, r) for suite in SUITES for r in report.get(suite.key, [])]
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
    legend = [suite.legend for suite in SUITES if report.get(suite.key)]
    fig.suptitle(
        f"fused_input_norm: {device}, {report['cpu_model']}, {report['threads']} threads, "
        f"median of up to {report['reps']} reps, torch {report['torch']}, {report['date']}\n" + "\n".join(legend),
        fontsize=9,
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict | None:
    # prog: under -m, argparse would name this file (__main__.py)
    parser = argparse.ArgumentParser(prog="python -m fused_input_norm.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reps", type=int, default=15, help="rounds per case (fewer for a slow case: --case-budget-s)")
    parser.add_argument("--case-budget-s", type=float, default=20.0, help="about this many seconds of rounds per case")
    parser.add_argument(
        "--cases",
        metavar="REGEX",
        help="only the cases whose name matches ('^resize': only the resize cases, '^jpeg': the JPEG ones, '^video': the video ones)",
    )
    parser.add_argument(
        "--resize-threads",
        metavar="N[,N...]",
        type=_thread_counts,
        help="torch thread counts the resize, JPEG and video cases run at (default: 1 and the current count)",
    )
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (~1 min of compiling on CPU)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON ('-' for stdout)")
    parser.add_argument("--plot", metavar="FILE.png", help="bar chart (needs matplotlib)")
    parser.add_argument("--compiled-worker", metavar="FILE", help=argparse.SUPPRESS)  # run()'s subprocess
    args = parser.parse_args(argv)
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        parser.error("--plot needs matplotlib: pip install matplotlib (or the package's [plot] extra)")
    all_cases = [*CASES, *RESIZE_CASES, *JPEG_CASES, *VIDEO_CASES]
    cases = [case for case in all_cases if args.cases is None or re.search(args.cases, case.name)]
    if not cases:
        parser.error(f"--cases {args.cases!r} matches none of: {', '.join(case.name for case in all_cases)}")
    device = torch.device(args.device)
    if args.compiled_worker:
        compiled_worker(
            device, args.reps, [c for c in cases if isinstance(c, Case)], args.case_budget_s, args.compiled_worker
        )
        return None
    for label, case_type, missing_dependencies, extra in (
        ("resize", ResizeCase, missing_resize_dependencies, ", or the package's [test] extra"),
        ("jpeg", JpegCase, missing_jpeg_dependencies, ""),
        ("video", VideoCase, missing_video_dependencies, ""),
    ):
        missing = missing_dependencies()
        if missing and any(isinstance(case, case_type) for case in cases):
            parser.error(
                f"the {label} cases need {', '.join(missing)} (pip install torchvision pillow transformers "
                f"scikit-image{extra}); --cases can leave them out"
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
