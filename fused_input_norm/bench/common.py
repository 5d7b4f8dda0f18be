"""What every benchmark suite shares: the timers, interleaved sampling, the skeleton of the CPU suites (cases ->
inputs -> check -> time at each thread count), how a suite is reported (its text, its plot panel, its legend),
the labels, the Markdown table and the bar chart helper."""

import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch


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


def run_cpu_suite(
    label: str,
    cases: Sequence,
    threads: list[int],
    report: dict,
    check_key: str,
    make_inputs: Callable[[object], object],
    check: Callable[[object, object], object],
    run_case: Callable[[object, object, int], dict],
) -> list[dict]:
    """The CPU suites' skeleton: each case's inputs are made once and checked (the check's result goes to
    report[check_key][case name]: a benchmark of a wrong result is worthless), then the case is timed at each
    thread count by run_case(case, inputs, threads). Returns the results, case by case, thread count by count."""
    results = []
    for n, case in enumerate(cases, 1):
        progress(f"{label} case {n}/{len(cases)}: {case.name}")
        inputs = make_inputs(case)
        report.setdefault(check_key, {})[case.name] = check(case, inputs)
        for t in threads:
            progress(f"  {threads_label(t)}")
            results.append(run_case(case, inputs, t))
    return results


@dataclass(frozen=True)
class Suite:
    """How one suite is reported: the report's key for its list of results, its text (from the whole report),
    its plot panel (one per result) and its line of the plot's legend."""

    key: str
    format: Callable[[dict], str]
    panel: Callable[[object, dict], None]
    legend: str


def target_ratios(
    pairs: dict[str, tuple[str, str]], targets: Sequence[tuple[str, float]], times: dict, mins: dict
) -> dict[str, dict]:
    """Each ratio of medians (and of minima) named in `pairs` whose two paths ran, with its target (>=) where
    `targets` sets one."""
    bounds = dict(targets)
    out = {}
    for name, (a, b) in pairs.items():
        if a in times and b in times:
            ratio = times[a] / times[b]
            out[name] = {"ratio": ratio, "min_ratio": mins[a] / mins[b]}
            if name in bounds:
                out[name].update(op=">=", bound=bounds[name], met=ratio >= bounds[name])
    return out


def result_lines(result: dict, header: str) -> list[str]:
    """A suite result's block: its header, each method's median and minimum, what failed, the ratios."""
    lines = ["", header, f"  {'method':<46}{'median ms':>10}{'min ms':>10}"]
    for name, ms in result["times_ms"].items():
        lines.append(f"  {name:<46}{ms:>10.2f}{result['min_ms'][name]:>10.2f}")
    lines += failed_lines(result, 46)
    return lines + ["  " + ratio_line(name, t) for name, t in result["ratios"].items()]


def summary_table(results: list[dict], short_names: dict[str, str], ratio_names: Sequence[str]) -> str:
    """One Markdown row per case and thread count: medians, the ratios (targets met or not), load."""
    head = ["case", "threads", "load", *short_names.values(), *ratio_names]
    rows = []
    for r in results:
        t = r["times_ms"]
        cells = [r["case"], str(r["threads"]), f"{r['load_average']:.1f}"]
        cells += [ms_label(t[k]) if k in t else "-" for k in short_names]
        for name in ratio_names:
            x = r["ratios"].get(name)
            if x is None:
                cells.append("-")
            elif "bound" in x:
                cells.append(f"{x['ratio']:.2f} (>= {x['bound']:g}: {'met' if x['met'] else 'not met'})")
            else:
                cells.append(f"{x['ratio']:.2f}")
        rows.append(cells)
    return markdown_table(head, rows)


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    return "\n".join(
        ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
    )


def ratio_line(name: str, t: dict) -> str:
    """A ratio of medians and of minima, and its target where it has one ({"op": ">=", "bound": 3.0, "met": ...})."""
    text = f"{name} {t['ratio']:.2f}x (minima {t['min_ratio']:.2f}x)"
    if "bound" in t:
        text += f", target {t['op']} {t['bound']:g}x: {'met' if t['met'] else 'NOT MET'}"
    return text


def failed_lines(result: dict, width: int) -> list[str]:
    """One line per method that raised (and so was not timed), its name padded to the table's first column."""
    return [f"  {name:<{width}}failed: {error}" for name, error in result.get("errors", {}).items()]


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def threads_label(n: int) -> str:
    return f"{n} thread{'s' if n > 1 else ''}"


def ms_label(ms: float) -> str:
    return f"{ms:.3f} ms" if ms < 1 else f"{ms:.3g} ms" if ms < 100 else f"{ms:.0f} ms"


def bars(
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
            f"{ms_label(t[name])}  {t[name] / base(name):.2f}x {unit}",
            va="center",
            fontsize=7,
        )
