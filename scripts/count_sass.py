"""Static SASS counts of the built extension's GPU kernels: registers, spills, instructions, hot loops.

    .venv/bin/python scripts/count_sass.py [SO] [--arch sm_90] [--match REGEX] [--dump]

Builds nothing: reads SO (default: fused_input_norm/_C*.so, a CUDA build) with the cuobjdump that ships
in this Python's triton package (the CUDA toolkit here has none). Per kernel (demangled, shortened):
registers and local memory (-res-usage), LDL/STL instructions (spill traffic), all instructions, and its
hot loops: the largest loop body (a backward branch's target through that branch), plus any other
outermost loop at least a quarter its size (a loop the compiler unswitched into variants).

Each loop is counted three ways: its static size, and the shortest and longest path through one
iteration. A body that branches (a vector path and a per-channel path, a fast and a slow division)
executes one side per iteration; called subroutines count with their own shortest/longest path; an inner
loop counts once (its size is shown apart). Instructions per element = loop instructions / elements one
iteration handles, which ELEMENTS_PER_ITERATION gives per kernel: update it when the kernels change.
`--match` filters on the short name (e.g. 'u8, bf16'), `--dump` prints each hot loop's SASS.
"""

import argparse
import bisect
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

SIZEOF = {"u8": 1, "u16": 2, "f16": 2, "bf16": 2, "f32": 4, "i32": 4, "u32": 4, "i64": 8, "u64": 8}


def _one_16_byte_vector(in_t: str, out_t: str, *index_t: str) -> int:
    return 16 // min(SIZEOF[in_t], SIZEOF[out_t])  # kElemsPerVector: one 16-byte access of the narrower type


# Elements one iteration of a kernel's hot loop handles, from its shortened template arguments; keyed by
# the kernel's base name. A kernel missing here is still counted, without the per-element figures.
ELEMENTS_PER_ITERATION = {
    # <in_t, out_t, index_t, VEC>: two vectors of VEC elements per grid-stride step.
    "affine_contiguous_kernel": lambda in_t, out_t, index_t, vec: 2 * int(vec),
    # <in_t, out_t, index_t, planar>: one group of C vectors; C (2..4) is a run-time switch over three
    # loops, and this counts C = 3 (RGB), whose loop is the middle-sized one.
    "affine_pixels_kernel": lambda in_t, out_t, index_t, planar: 3 * _one_16_byte_vector(in_t, out_t),
    # <in_t, out_t, index_t>: kStridedRun = 8 consecutive outputs per step.
    "affine_strided_kernel": lambda in_t, out_t, index_t: 8,
}

# Demangled type -> short name (namespaces are dropped first).
SHORT_TYPES = {
    "unsigned char": "u8",
    "unsigned short": "u16",
    "unsigned int": "u32",
    "unsigned long": "u64",
    "int": "i32",
    "long": "i64",
    "float": "f32",
    "bfloat16_bits": "bf16",
    "half_bits": "f16",
    "__nv_bfloat16": "bf16",
    "__half": "f16",
}


@dataclass
class Instruction:
    addr: int
    guard: str | None  # "@P0", "@!P3"; None when always executed
    op: str  # "BRA", "LDG.E.128", ...
    args: str

    @property
    def is_branch(self) -> bool:
        return self.op.startswith("BRA")

    @property
    def unconditional(self) -> bool:
        # `BRA.U !UP0, 0x...` and `BRA.DIV UR4, 0x...` carry their condition in the operands.
        return self.guard in (None, "@PT") and re.fullmatch(r"0x[0-9a-f]+", self.args) is not None

    @property
    def target(self) -> int | None:
        if not (self.is_branch or self.op.startswith("CALL")):
            return None
        found = re.findall(r"0x([0-9a-f]+)", self.args)
        return int(found[-1], 16) if found else None


_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")


def parse_sass(text: str) -> dict[str, list[Instruction]]:
    """cuobjdump -sass output -> {mangled kernel name: its instructions, NOPs dropped}."""
    kernels: dict[str, list[Instruction]] = {}
    current = None
    for line in text.splitlines():
        if m := re.match(r"\s*Function : (\S+)", line):
            current = kernels.setdefault(m.group(1), [])
        elif current is not None and (m := _LINE.search(line)):
            addr, guard, op, args = m.groups()
            if op != "NOP":
                current.append(Instruction(int(addr, 16), guard.strip() if guard else None, op, args.strip()))
    return kernels


def parse_res_usage(text: str) -> dict[str, dict[str, int]]:
    """cuobjdump -res-usage output -> {mangled kernel name: {"REG": 40, "LOCAL": 0, ...}}."""
    usage, current = {}, None
    for line in text.splitlines():
        if m := re.match(r"\s*Function (\S+):", line):
            current = m.group(1)
        elif current is not None and "REG:" in line:
            usage[current] = {k: int(v) for k, v in re.findall(r"(\w+)(?:\[\d+\])?:(\d+)", line)}
            current = None
    return usage


@dataclass
class Loop:
    first: int  # index of the backward branch's target
    last: int  # index of the backward branch
    shortest: float  # instructions along the shortest path through one iteration, callees included
    longest: float
    inner: int  # static size of the largest loop inside it (0: none)

    @property
    def static(self) -> int:
        return self.last - self.first + 1


def _index(code: list[Instruction], addr: int) -> int:
    return bisect.bisect_left([ins.addr for ins in code], addr)  # a target on a dropped NOP: the next one


def _returns(ins: Instruction) -> bool | str:
    if not ins.op.startswith("RET"):
        return False
    return True if ins.guard in (None, "@PT") else "maybe"


def paths(code: list[Instruction], first: int, last: int, end, depth: int = 0) -> tuple[float, float]:
    """Shortest and longest instruction count from index `first` until an end instruction executes (counted),
    following fall-through, forward branches inside [first, last] and calls. `end(i)`: True when index i
    ends the path, "maybe" when it may (a guarded return), else False. A path that leaves the range, exits
    or returns elsewhere is no path; a backward branch inside the range is taken as not taken."""
    n = last - first + 1
    lo, hi = [float("inf")] * n, [float("-inf")] * n
    for i in range(last, first - 1, -1):  # forward edges only: every successor is already known
        ins, ends = code[i], end(i)
        if ends is True:
            lo[i - first] = hi[i - first] = 1
            continue
        successors = []
        leaves = ins.op.startswith(("EXIT", "RET", "BRX", "JMX"))  # guarded ones may also fall through
        if i < last and not (leaves and ins.guard is None) and not (ins.is_branch and ins.unconditional):
            successors.append(i + 1)
        if ins.is_branch and ins.target is not None and i < _index(code, ins.target) <= last:
            successors.append(_index(code, ins.target))
        call = (0.0, 0.0)
        if ins.op.startswith("CALL") and ins.target is not None and depth < 4:
            callee = _index(code, ins.target)
            call = paths(code, callee, len(code) - 1, lambda j: _returns(code[j]), depth + 1)
        reachable = [s - first for s in successors if lo[s - first] != float("inf")]
        if reachable:
            lo[i - first] = 1 + call[0] + min(lo[s] for s in reachable)
            hi[i - first] = 1 + call[1] + max(hi[s] for s in reachable)
        if ends == "maybe":
            lo[i - first], hi[i - first] = min(lo[i - first], 1), max(hi[i - first], 1)
    return lo[0], hi[0]


def hot_loops(code: list[Instruction]) -> list[Loop]:
    """The largest loop, and every other outermost loop at least a quarter its size, in address order."""
    spans = sorted(
        {
            (_index(code, ins.target), i)
            for i, ins in enumerate(code)
            if ins.is_branch and ins.target is not None and ins.target < ins.addr
        }
    )
    if not spans:
        return []

    def inside(a, b):
        return a != b and b[0] <= a[0] and a[1] <= b[1]

    outermost = [s for s in spans if not any(inside(s, o) for o in spans)]
    largest = max(last - first + 1 for first, last in outermost)
    loops = []
    for first, last in outermost:
        if 4 * (last - first + 1) >= largest:
            lo, hi = paths(code, first, last, lambda j, last=last: j == last)
            inner = max((b - a + 1 for a, b in spans if inside((a, b), (first, last))), default=0)
            loops.append(Loop(first, last, lo, hi, inner))
    return loops


def demangle(names: list[str]) -> dict[str, str]:
    cxxfilt = shutil.which("c++filt")
    if cxxfilt is None or not names:
        return {n: n for n in names}
    out = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return dict(zip(names, out.splitlines(), strict=True))


def shorten(demangled: str) -> tuple[str, str, list[str]]:
    """'void ns::affine_contiguous_kernel<unsigned char, ns::bfloat16_bits, unsigned int>(...)' ->
    ('affine_contiguous_kernel<u8, bf16, u32>', 'affine_contiguous_kernel', ['u8', 'bf16', 'u32'])."""
    name = demangled.split("(", 1)[0].removeprefix("void ")
    base, _, rest = name.partition("<")
    base = base.rsplit("::", 1)[-1]
    args, depth, current = [], 0, ""
    for ch in rest.removesuffix(">"):
        if ch == "," and depth == 0:
            args.append(current.strip())
            current = ""
            continue
        depth += {"<": 1, ">": -1}.get(ch, 0)
        current += ch
    if current.strip():
        args.append(current.strip())
    args = [SHORT_TYPES.get(a.rsplit("::", 1)[-1], a.rsplit("::", 1)[-1]) for a in args]
    return (f"{base}<{', '.join(args)}>" if args else base), base, args


def find_cuobjdump() -> str:
    spec = importlib.util.find_spec("triton")
    candidates = (
        [os.path.join(p, "backends/nvidia/bin/cuobjdump") for p in (spec.submodule_search_locations or [])]
        if spec
        else []
    )
    candidates += [
        shutil.which("cuobjdump") or "",
        os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin/cuobjdump"),
    ]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    sys.exit(
        f"count_sass: no cuobjdump (looked at {[c for c in candidates if c]}); run this with the CUDA-build "
        "venv's python, whose triton package ships one, or pass --cuobjdump"
    )


def default_so() -> str:
    package = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fused_input_norm"))
    found = sorted(glob.glob(os.path.join(package, "_C*.so")))
    if not found:
        sys.exit(
            f"count_sass: no built extension in {package}: build the CUDA one (VENV=.venv bash scripts/setup_env.sh) or pass the .so"
        )
    return found[0]


def _per_elem(count: float, elems: int | None) -> str:
    return f"{count / elems:.1f}" if elems else "?"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("so", nargs="?", help="the built extension (default: fused_input_norm/_C*.so)")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--match", metavar="REGEX", help="only kernels whose short name matches")
    parser.add_argument("--dump", action="store_true", help="print each hot loop's SASS")
    parser.add_argument("--cuobjdump", help="default: the one in this Python's triton package")
    args = parser.parse_args(argv)
    so = args.so or default_so()
    cuobjdump = args.cuobjdump or find_cuobjdump()

    def run_cuobjdump(flag: str) -> str:
        done = subprocess.run([cuobjdump, "-arch", args.arch, flag, so], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"count_sass: {cuobjdump} -arch {args.arch} {flag} failed: {done.stderr.strip()}")
        return done.stdout

    kernels = parse_sass(run_cuobjdump("-sass"))
    if not kernels:
        sys.exit(f"count_sass: no {args.arch} SASS in {so} (`cuobjdump --list-elf` shows what is there)")
    usage = parse_res_usage(run_cuobjdump("-res-usage"))
    names = demangle(list(kernels))
    rows = []
    for mangled, code in kernels.items():
        short, base, template_args = shorten(names[mangled])
        if args.match is None or re.search(args.match, short):
            per_iteration = ELEMENTS_PER_ITERATION.get(base)
            rows.append((short, mangled, code, per_iteration(*template_args) if per_iteration else None))
    rows.sort(key=lambda row: row[0])

    print(f"{os.path.basename(so)}, {args.arch}, {len(rows)} kernels. Loop sizes in instructions; per element: / elems")
    print(
        "| kernel | regs | local B | LDL/STL | instrs | loop at | loop | inner | shortest | longest | elems | per elem: loop | shortest | longest |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for short, mangled, code, elems in rows:
        res = usage.get(mangled, {})
        spills = sum(ins.op.startswith(("LDL", "STL")) for ins in code)
        total = sum(not (ins.is_branch and ins.target == ins.addr) for ins in code)  # not the trailing self-branch
        kernel = [short, str(res.get("REG", "?")), str(res.get("LOCAL", "?")), str(spills), str(total)]
        for n, loop in enumerate(hot_loops(code) or [None]):
            if loop is None:
                cells = ["-"] * 6 + [str(elems or "?")] + ["-"] * 3
            else:
                cells = [
                    f"{code[loop.first].addr:#06x}",
                    str(loop.static),
                    str(loop.inner or "-"),
                    f"{loop.shortest:.0f}",
                    f"{loop.longest:.0f}",
                    str(elems or "?"),
                ]
                cells += [_per_elem(c, elems) for c in (loop.static, loop.shortest, loop.longest)]
            print("| " + " | ".join((kernel if n == 0 else ["", "", "", "", ""]) + cells) + " |")
    if args.dump:
        for short, _, code, _ in rows:
            for loop in hot_loops(code):
                print(f"\n{short}: loop {code[loop.first].addr:#06x}..{code[loop.last].addr:#06x}")
                for ins in code[loop.first : loop.last + 1]:
                    print(f"  {ins.addr:06x}  {ins.guard or '':6} {ins.op} {ins.args}")


if __name__ == "__main__":
    main()
