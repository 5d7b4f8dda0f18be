"""Side-by-side benchmark: this op against what engines run today and against a bare converting copy.

    python -m fused_input_norm.bench [--device cpu|cuda] [--reps N] [--json FILE] [--plot FILE.png]

Every method of a case is timed in the same run, interleaved (A B C ... A B C ...), and the median is
reported, so the ratios are robust to a noisy machine. Bytes = input read once + output written once.
"""

import argparse
import datetime
import json
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .module import FusedInputNorm
from .ops import affine, affine_out

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


@dataclass
class Case:
    name: str
    shape: tuple[int, ...]
    in_dtype: torch.dtype
    out_dtype: torch.dtype
    dim: int  # channel axis of `shape` as the op sees it (patch rows are viewed [P, 3, K])


CASES = [
    Case("qwen2vl 70000 patches u8->bf16", (70000, 3, 392), torch.uint8, torch.bfloat16, 1),
    Case("qwen2vl 70000 patches f32->bf16", (70000, 3, 392), torch.float32, torch.bfloat16, 1),
    Case("qwen2vl 1 image (5120 patches) u8->bf16", (5120, 3, 392), torch.uint8, torch.bfloat16, 1),
    Case("NCHW 32x3x448x448 u8->f32", (32, 3, 448, 448), torch.uint8, torch.float32, 1),
    Case("NHWC 32x448x448x3 u8->bf16", (32, 448, 448, 3), torch.uint8, torch.bfloat16, -1),
]
SMALL_CASE = 2  # replayed through a CUDA graph on GPUs, where launch latency matters


@dataclass
class Result:
    case: str
    bytes: int
    times_ms: dict[str, float] = field(default_factory=dict)

    def ratios(self) -> dict[str, float]:
        t = self.times_ms
        r = {"op/floor": t["op (out=)"] / t["floor: out.copy_(x)"], "eager/op": t["eager mul-add"] / t["op (out=)"]}
        if "torch.compile(eager)" in t:
            r["compiled/op"] = t["torch.compile(eager)"] / t["op (out=)"]
        return r


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


def time_interleaved(
    methods: dict[str, Callable[[], object]], timer: Timer, reps: int, warmup: int = 2
) -> dict[str, float]:
    """Median milliseconds per method, calling the methods in turn, round after round."""
    for _ in range(warmup):
        for fn in methods.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(reps):
        for name, fn in methods.items():
            samples[name].append(timer(fn))
    return {name: statistics.median(s) for name, s in samples.items()}


def make_input(case: Case, device: torch.device) -> torch.Tensor:
    x = torch.randint(0, 256, case.shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    return x.to(case.in_dtype).to(device)


def methods_for(
    case: Case, x: torch.Tensor, norm: FusedInputNorm, with_compile: bool
) -> dict[str, Callable[[], object]]:
    out = torch.empty(x.shape, dtype=case.out_dtype, device=x.device)
    w, b = norm.weight, norm.bias
    bshape = [1] * x.dim()
    bshape[case.dim] = -1
    w_b, b_b = w.view(bshape), b.view(bshape)

    def eager():  # the in-tree module today: cast, mul, add, cast
        return (x.to(torch.float32) * w_b + b_b).to(case.out_dtype)

    methods = {
        "op (out=)": lambda: affine_out(out, x, w, b, case.dim),
        "op": lambda: affine(x, w, b, case.dim, case.out_dtype),
        "eager mul-add": eager,
    }
    if case.dim == 1:  # the original formulation; batch_norm takes channels on dim 1 only
        zeros, ones = torch.zeros_like(w), torch.ones_like(w)
        methods["F.batch_norm"] = lambda: F.batch_norm(x.to(torch.float32), zeros, ones, w, b, False, 0.0, 0.0).to(
            case.out_dtype
        )
    if with_compile:
        methods["torch.compile(eager)"] = torch.compile(eager, dynamic=False)
    methods["floor: out.copy_(x)"] = lambda: out.copy_(x)
    return methods


def copy_bandwidth_gbs(device: torch.device, timer: Timer, reps: int) -> float:
    """Device-to-device copy of 1 GiB: the practical bandwidth ceiling (bytes read + written)."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = time_interleaved({"copy": lambda: dst.copy_(src)}, timer, reps)["copy"]
    return 2 * src.numel() / ms / 1e6


def graph_replay_ms(
    case: Case, norm: FusedInputNorm, device: torch.device, timer: Timer, reps: int
) -> dict[str, float]:
    x = make_input(case, device)
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


def run(device: torch.device, reps: int, with_compile: bool = True, cases: list[Case] = CASES) -> dict:
    timer = Timer(device)
    with torch.device(device):
        norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    report = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "cpu_model": _cpu_model(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "reps": reps,
        "results": [],
    }
    if device.type == "cuda":
        report["copy_bandwidth_gbs"] = copy_bandwidth_gbs(device, timer, reps)
    for case in cases:
        x = make_input(case, device)
        result = Result(case.name, x.numel() * (x.element_size() + torch.empty(0, dtype=case.out_dtype).element_size()))
        result.times_ms = time_interleaved(methods_for(case, x, norm, with_compile), timer, reps)
        report["results"].append(
            {"case": result.case, "bytes": result.bytes, "times_ms": result.times_ms, "ratios": result.ratios()}
        )
        del x
    if device.type == "cuda":
        report["graph"] = {
            "case": CASES[SMALL_CASE].name,
            **graph_replay_ms(CASES[SMALL_CASE], norm, device, timer, reps),
        }
    return report


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def format_report(report: dict) -> str:
    lines = [
        f"fused_input_norm benchmark, {report['date']}: {report['device']} ({report['cpu_model']}), "
        f"{report['threads']} threads, torch {report['torch']}, median of {report['reps']}",
    ]
    if "copy_bandwidth_gbs" in report:
        lines.append(f"device-to-device copy: {report['copy_bandwidth_gbs']:.0f} GB/s")
    for r in report["results"]:
        lines.append("")
        ratios = "  ".join(f"{k} {v:.2f}x" for k, v in r["ratios"].items())
        lines.append(f"{r['case']}  ({r['bytes'] / 1e6:.0f} MB moved)   {ratios}")
        lines.append(f"  {'method':<24}{'time ms':>10}{'GB/s':>9}{'vs op':>9}")
        op = r["times_ms"]["op (out=)"]
        for name, ms in r["times_ms"].items():
            lines.append(f"  {name:<24}{ms:>10.3f}{r['bytes'] / ms / 1e6:>9.1f}{ms / op:>8.2f}x")
    if "graph" in report:
        g = report["graph"]
        lines.append("")
        lines.append(
            f"{g['case']}: CUDA graph replay {g['graph replay']:.3f} ms, eager launch {g['eager launch']:.3f} ms"
        )
    return "\n".join(lines)


def plot(report: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = report["results"]
    fig, axes = plt.subplots(len(results), 1, figsize=(8, 2.2 * len(results)), squeeze=False)
    for ax, r in zip(axes[:, 0], results, strict=True):
        names = list(r["times_ms"])
        ax.barh(
            names,
            [r["times_ms"][n] for n in names],
            color=["tab:green" if n.startswith("op") else "tab:gray" for n in names],
        )
        ax.set_title(r["case"], fontsize=9)
        ax.set_xlabel("ms (median)")
        ax.invert_yaxis()
    fig.suptitle(f"{report['device']}, {report['threads']} threads, torch {report['torch']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (it compiles for minutes on CPU)")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON ('-' for stdout)")
    parser.add_argument("--plot", metavar="FILE.png", help="bar chart (needs matplotlib)")
    args = parser.parse_args(argv)
    report = run(torch.device(args.device), args.reps, not args.no_compile)
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
