"""The CPU layout cases of issue 27 against their floors, side by side in one process (PERF_NOTES.md,
"2026-12-04 (evening)"): for each case and thread count, interleaved rounds of

- op (out=), the converting copy of the same bytes laid out contiguously (the bench's "contiguous copy"),
- op allocating, torch's allocating converting copy of the same contiguous bytes (`torch.empty(...).copy_(x)`:
  the fair floor of an allocating op), and
- a fresh output filled (`torch.empty(...).fill_(1)`) against the same fill into the reused output,

with the minor page faults of one call of each (getrusage), and the first-touch cost per MB. Medians (ms) and
same-run ratios are printed. The process reads FUSED_INPUT_NORM_HUGE_PAGES once at import: run it once without
and once with FUSED_INPUT_NORM_HUGE_PAGES=1.

    .venv/bin/python scripts/layout_floors.py [--threads 1,2] [--reps 15] [--cases REGEX]
"""

import argparse
import os
import re
import resource
import statistics
import time

import torch

from fused_input_norm.bench.affine import CASES, clip_norm, make_input
from fused_input_norm.ops import affine, affine_out


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def measure(fn) -> tuple[float, int]:
    f0, t0 = minor_faults(), time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3, minor_faults() - f0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--cases", default="HWC->CHW 32x448x448x3 u8->bf16|patchify video|70000 patches u8")
    args = parser.parse_args()
    huge = os.environ.get("FUSED_INPUT_NORM_HUGE_PAGES") == "1"
    print(f"FUSED_INPUT_NORM_HUGE_PAGES={'1' if huge else 'unset'}, load average {os.getloadavg()}")
    norm = clip_norm(torch.device("cpu"))
    for case in [c for c in CASES if re.search(args.cases, c.name)]:
        for threads in [int(t) for t in args.threads.split(",")]:
            run_case(case, threads, args.reps, norm.weight, norm.bias)
    torch.set_num_threads(2)


def run_case(case, threads: int, reps: int, w: torch.Tensor, b: torch.Tensor) -> None:
    torch.set_num_threads(threads)
    _, x = make_input(case, torch.device("cpu"))
    contiguous = x.contiguous()
    out = torch.empty(x.shape, dtype=case.out_dtype)
    mb = out.numel() * out.element_size() / 1e6
    methods = {
        "op out=": lambda: affine_out(out, x, w, b, case.dim),
        "contiguous copy": lambda: out.copy_(contiguous),
        "op alloc": lambda: affine(x, w, b, case.dim, case.out_dtype),
        "torch alloc copy": lambda: torch.empty(x.shape, dtype=case.out_dtype).copy_(contiguous),
        "fresh fill": lambda: torch.empty(x.shape, dtype=case.out_dtype).fill_(1),
        "reused fill": lambda: out.fill_(1),
    }
    for fn in methods.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {name: [] for name in methods}
    faults: dict[str, list[int]] = {name: [] for name in methods}
    for _ in range(reps):
        for name, fn in methods.items():
            ms, nf = measure(fn)
            times[name].append(ms)
            faults[name].append(nf)
    med = {name: statistics.median(t) for name, t in times.items()}
    flt = {name: statistics.median(f) for name, f in faults.items()}
    print(f"\n{case.name}, {threads} thread(s), output {mb:.1f} MB, {reps} rounds, load {os.getloadavg()[0]:.2f}")
    for name in methods:
        print(f"  {name:17s} {med[name]:8.2f} ms (min {min(times[name]):7.2f})  {flt[name]:8.0f} faults")
    fault_ms = med["fresh fill"] - med["reused fill"]
    print(
        f"  op out= / contiguous copy {med['op out='] / med['contiguous copy']:.2f}; "
        f"op alloc / op out= {med['op alloc'] / med['op out=']:.2f}; "
        f"torch alloc copy / contiguous copy {med['torch alloc copy'] / med['contiguous copy']:.2f}; "
        f"op alloc / torch alloc copy {med['op alloc'] / med['torch alloc copy']:.2f}"
    )
    print(
        f"  first touch: fresh - reused fill {fault_ms:.2f} ms = {fault_ms / mb * 1e3:.0f} us/MB, "
        f"{flt['fresh fill'] / mb:.0f} faults/MB; op alloc - op out= {med['op alloc'] - med['op out=']:.2f} ms, "
        f"torch alloc copy - contiguous copy {med['torch alloc copy'] - med['contiguous copy']:.2f} ms"
    )


if __name__ == "__main__":
    main()
