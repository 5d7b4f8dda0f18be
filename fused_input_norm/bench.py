"""Side-by-side benchmark: this op against what engines run today and against bare converting copies.

    python -m fused_input_norm.bench [--device cpu|cuda] [--reps N] [--cases REGEX] [--no-compile]
                                     [--json FILE] [--plot FILE.png]

Each case is a layout an engine feeds (patch rows, NCHW, NHWC, HWC viewed as CHW, Qwen2-VL patch views
of images and videos, a misaligned slice, a broadcast batch). Its methods are timed interleaved in one
run (A B C ... A B C ...) and the median is reported, so the ratios are robust to a noisy machine.
Bytes = the view's elements read once + the output written once.

torch.compile runs last, in a subprocess of its own, so that its compile work and threads cannot slow
the other methods (in one process with it, the 5120-patch op once took 11.8 ms instead of 0.6 ms on 2 CPU
cores). That subprocess re-times `op (out=)` interleaved with the compiled code: compiled/op stays a
same-run ratio.
"""

import argparse
import datetime
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

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


def run(
    device: torch.device,
    reps: int,
    with_compile: bool = True,
    cases: list[Case] = CASES,
    case_budget_s: float = 20.0,
) -> dict:
    """Times every case's methods in this process, then torch.compile in a subprocess (see the docstring)."""
    unknown = {case.name for case in cases} - {case.name for case in CASES}
    if with_compile and unknown:
        raise ValueError(f"torch.compile is timed in a subprocess that only knows bench.CASES; unknown: {unknown}")
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
    }
    if device.type == "cuda":
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
    if device.type == "cuda":
        report["graph"] = {
            "case": CASES[SMALL_CASE].name,
            **graph_replay_ms(CASES[SMALL_CASE], norm, device, timer, reps),
        }
    if with_compile:
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
    lines.append("")
    lines.append(summary_table(report))
    return "\n".join(lines)


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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = report["results"]
    cols = 2 if len(results) > 3 else 1
    rows = (len(results) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(9 * cols, 2.9 * rows), squeeze=False, layout="constrained")
    for ax in axes.flat[len(results) :]:
        ax.set_visible(False)
    for ax, r in zip(axes.flat, results, strict=False):
        t = r["times_ms"]
        names = list(t)
        colors = {OP_OUT: "tab:green", OP_ALLOC: "tab:green", OP_OUT_COMPILE_RUN: "#98df8a"}
        colors = [colors.get(n, "white" if n in FLOORS else "tab:gray") for n in names]
        bars = ax.barh(names, [t[n] for n in names], color=colors, edgecolor="black", linewidth=0.6)
        for bar, name in zip(bars, names, strict=True):
            if name in FLOORS:
                bar.set_hatch("///")
        ax.set_xscale("log")
        # The floors as lines across the whole panel, so every bar reads against them.
        for floor, color, style in ((COPY_CONTIG, "tab:blue", "--"), (COPY_VIEW, "tab:red", ":")):
            if floor in t:
                ax.axvline(t[floor], color=color, linestyle=style, linewidth=1.2)
        lo, hi = min(t.values()), max(t.values())
        ax.set_xlim(lo / 1.6, hi * 6)  # room for the labels right of the longest bar
        for bar, name in zip(bars, names, strict=True):
            op = t[OP_OUT_COMPILE_RUN if name == COMPILED else OP_OUT]
            ax.text(
                bar.get_width() * 1.08,
                bar.get_y() + bar.get_height() / 2,
                f"{_ms(t[name])}  {t[name] / op:.2f}x op",
                va="center",
                fontsize=7,
            )
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=7)
        ax.tick_params(axis="x", labelsize=7)
        rt = "   ".join(f"{k} {v:.2f}" for k, v in r["ratios"].items())
        ax.set_title(f"{r['case']}  ({r['bytes'] / 1e6:.0f} MB, median of {r['reps']})\n{rt}", fontsize=8)
        ax.set_xlabel("ms per call (log)", fontsize=7)
    device = report["device"] if report["device"] != "cpu" else "CPU"
    fig.suptitle(
        f"fused_input_norm: {device}, {report['cpu_model']}, {report['threads']} threads, "
        f"median of up to {report['reps']} reps, torch {report['torch']}, {report['date']}\n"
        "green: this op (light: re-timed beside torch.compile, in its own process); hatched: the floors, converting "
        "copies; blue dashed line: contiguous copy; red dotted line: copy_(view); ratios vs op (out=) of the same run",
        fontsize=9,
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reps", type=int, default=15, help="rounds per case (fewer for a slow case: --case-budget-s)")
    parser.add_argument("--case-budget-s", type=float, default=20.0, help="about this many seconds of rounds per case")
    parser.add_argument("--cases", metavar="REGEX", help="only the cases whose name matches")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (~1 min of compiling on CPU)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON ('-' for stdout)")
    parser.add_argument("--plot", metavar="FILE.png", help="bar chart (needs matplotlib)")
    parser.add_argument("--compiled-worker", metavar="FILE", help=argparse.SUPPRESS)  # run()'s subprocess
    args = parser.parse_args(argv)
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        parser.error("--plot needs matplotlib: pip install matplotlib (or the package's [plot] extra)")
    cases = [case for case in CASES if args.cases is None or re.search(args.cases, case.name)]
    if not cases:
        parser.error(f"--cases {args.cases!r} matches none of: {', '.join(case.name for case in CASES)}")
    device = torch.device(args.device)
    if args.compiled_worker:
        compiled_worker(device, args.reps, cases, args.case_budget_s, args.compiled_worker)
        return None
    report = run(device, args.reps, not args.no_compile, cases, args.case_budget_s)
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


if __name__ == "__main__":
    main()
