"""The affine suite: every layout an engine feeds the op (patch rows, NCHW, NHWC, HWC->CHW, patchify, batches),
the op against eager PyTorch, F.batch_norm, torch.compile (in a subprocess) and copy floors."""

import json
import logging
import os
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

from ..config import CLIP_MEAN, CLIP_STD
from ..geometry import PATCH_CHANNEL_DIM, patch_view
from ..module import FusedInputNorm
from ..ops import affine, affine_out
from .common import (
    Suite,
    Timer,
    bars,
    drop_failing,
    failed_lines,
    markdown_table,
    ms_label,
    progress,
    sample_interleaved,
    time_interleaved,
)

PATCH, TEMPORAL, MERGE = 14, 2, 2  # Qwen2-VL / Qwen2.5-VL

# Method names, as they appear in the report.
OP_OUT, OP_ALLOC, EAGER, BATCH_NORM = "op (out=)", "op", "eager mul-add", "F.batch_norm"
COPY_VIEW, COPY_CONTIG = "floor: out.copy_(view)", "floor: contiguous copy"
COMPILED, OP_OUT_COMPILE_RUN = "torch.compile(eager)", "op (out=), compile run"
FLOORS = (COPY_VIEW, COPY_CONTIG)


def qwen2vl_patch_view(frames: torch.Tensor) -> torch.Tensor:
    """uint8 frames [F, C, H, W] -> the zero-copy 9-D view whose contiguous copy, viewed [N, C*T*P*P], is
    Qwen2-VL's pixel_values; channel axis PATCH_CHANNEL_DIM (5)."""
    return patch_view(frames, PATCH, TEMPORAL, MERGE)


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
    Case("patchify video 32x3x728x1288 u8->bf16", (32, 3, 728, 1288), u8, bf16, PATCH_CHANNEL_DIM, qwen2vl_patch_view),
    Case(
        "patchify 1 image 3x728x1288 (2 frames, stride 0) u8->bf16",
        (1, 3, 728, 1288),
        u8,
        bf16,
        PATCH_CHANNEL_DIM,
        image_as_two_frames,
    ),
    Case("patches[1:] of 70000 (misaligned) u8->bf16", (70000, 1176), u8, bf16, 1, rows_after_first),
    Case("broadcast 1 image 3x448x448 to 32 u8->bf16", (3, 448, 448), u8, bf16, 1, batch_of_32),
]
SMALL_CASE = 2  # replayed through a CUDA graph on GPUs, where launch latency matters


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
        # eps = 0 in the original; torch 2.11 refuses it, and 1 + tiny rounds to 1 in float32 (the same values).
        eps = torch.finfo(torch.float32).tiny
        methods[BATCH_NORM] = lambda: F.batch_norm(x.to(torch.float32), zeros, ones, w, b, False, 0.0, eps).to(
            case.out_dtype
        )
    methods[COPY_VIEW] = lambda: out.copy_(x)
    methods[COPY_CONTIG] = lambda: out.copy_(contiguous)
    return methods


def check_op(case: Case, x: torch.Tensor, norm: FusedInputNorm) -> None:
    """A benchmark of a wrong result is worthless: the op must match the eager formula before it is timed."""
    torch.testing.assert_close(affine(x, norm.weight, norm.bias, case.dim, case.out_dtype), eager_fn(case, x, norm)())


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


def run_affine(cases: list[Case], device: torch.device, reps: int, case_budget_s: float, report: dict) -> None:
    """Times every case's methods but torch.compile in this process, into report["results"]; on CUDA also the
    copy bandwidth (first) and the small case's CUDA graph replay (last)."""
    timer = Timer(device)
    norm = clip_norm(device)
    if device.type == "cuda":
        report["copy_bandwidth_gbs"] = copy_bandwidth_gbs(device, timer, reps)
    for n, case in enumerate(cases, 1):
        progress(f"case {n}/{len(cases)}: {case.name}")
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


def add_compiled(report: dict, device: torch.device, reps: int, case_budget_s: float) -> None:
    """torch.compile of report["results"]' cases, timed in a subprocess (run last, see the CLI's docstring):
    its times join each result's, or report["compile_error"] says why there are none."""
    progress("torch.compile, in a subprocess")
    compiled = run_compiled_subprocess(device, reps, [r["case"] for r in report["results"]], case_budget_s)
    if compiled is None:
        report["compile_error"] = "the torch.compile subprocess failed (its output is above): no compiled/op"
        return
    for result in report["results"]:
        result["times_ms"].update(compiled[result["case"]]["times_ms"])
        result["min_ms"].update(compiled[result["case"]]["min_ms"])
        result["compile_s"] = compiled[result["case"]]["compile_s"]


def clip_norm(device: torch.device) -> FusedInputNorm:
    with torch.device(device):
        return FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)


def run_compiled_subprocess(
    device: torch.device, reps: int, case_names: list[str], case_budget_s: float
) -> dict | None:
    """Runs compiled_worker in a fresh interpreter; returns {case name: {"times_ms": ..., ...}}, or None if
    it failed."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "compiled.json")
        args = ["--device", str(device), "--reps", str(reps), "--case-budget-s", str(case_budget_s)]
        args += ["--compiled-worker", path, "--cases", "|".join(f"^{re.escape(name)}$" for name in case_names)]
        # The child imports this very package, wherever it was imported from here: the folder that holds
        # fused_input_norm/ (this file is fused_input_norm/bench/affine.py).
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
        progress(f"compiled case {n}/{len(cases)}: {case.name}")
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


def format_affine(report: dict) -> str:
    """Per case: the ratios, each method's median, bandwidth, ratio to the op and minimum; the CUDA graph
    replay; then one Markdown table."""
    lines = []
    for r in report["results"]:
        if lines:
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
        lines += failed_lines(r, 26)
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
    """One Markdown row per case: the figures to compare across runs (and docs/performance.md's table)."""
    ratio_names = [name for name in RATIOS if any(name in r["ratios"] for r in report["results"])]
    head = ["case", OP_OUT, "copy_(view)", "contiguous copy", OP_ALLOC, *ratio_names]
    rows = []
    for r in report["results"]:
        t = r["times_ms"]
        cells = [r["case"], *(ms_label(t[k]) if k in t else "-" for k in (OP_OUT, COPY_VIEW, COPY_CONTIG, OP_ALLOC))]
        cells += [f"{r['ratios'][k]:.2f}" if k in r["ratios"] else "-" for k in ratio_names]
        rows.append(cells)
    return markdown_table(head, rows)


def affine_panel(ax, r: dict) -> None:
    t = r["times_ms"]
    colors = {
        OP_OUT: "tab:green",
        OP_ALLOC: "tab:green",
        OP_OUT_COMPILE_RUN: "#98df8a",
        **dict.fromkeys(FLOORS, "white"),
    }
    bars(ax, t, colors, FLOORS, lambda name: t[OP_OUT_COMPILE_RUN if name == COMPILED else OP_OUT], "op")
    # The floors as lines across the whole panel, so every bar reads against them.
    for floor, color, style in ((COPY_CONTIG, "tab:blue", "--"), (COPY_VIEW, "tab:red", ":")):
        if floor in t:
            ax.axvline(t[floor], color=color, linestyle=style, linewidth=1.2)
    rt = "   ".join(f"{k} {v:.2f}" for k, v in r["ratios"].items())
    ax.set_title(f"{r['case']}  ({r['bytes'] / 1e6:.0f} MB, median of {r['reps']})\n{rt}", fontsize=8)


SUITE = Suite(
    "results",
    format_affine,
    affine_panel,
    "green: this op (light: re-timed beside torch.compile, in its own process); hatched: the floors, converting "
    "copies; blue dashed line: contiguous copy; red dotted line: copy_(view); ratios vs op (out=) of the same run",
)
