"""pillow-simd as a peer of the exact CPU resize (issue 27), in one process: pillow-simd's Image.resize(size,
BICUBIC) alone (uint8 out, not exact) against our whole fused call (resize + normalize + Qwen2-VL patch rows,
bf16, exact) with reference="torchvision" (CHW input) and reference="pil-13" (HWC input, Pillow 13's pass
order), interleaved, at 1 and 2 threads, under each CPU capability (one subprocess each: the capability is
chosen once per process). Also how many values pillow-simd's resize changes against Pillow 13 and 12.1 (our
exact reference="pil-13"/"pil-12.1" outputs, equal to those Pillows bit for bit: tests/test_resize.py) and
against torchvision's uint8 kernel.

Run with the venv scripts/build_pillow_simd.sh makes (pillow-simd first on sys.path, torch and this project
from the main venv):
    .venv-pillow-simd/bin/python scripts/bench_pillow_simd.py [--capabilities avx2 avx512] [--reps 15]
Prints one Markdown table per capability and the ratios against issue 27's targets (measured, not asserted).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PHOTOS = [(3024, 4032), (1080, 1920), (600, 800)]  # (height, width)
# ratio name -> (ours, bound for 12 MP and 1080p, bound for 800x600)
TARGETS = {"tv": (1.0, 1.5), "pil": (1.5, 1.5)}
QWEN = {"image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}


def photo(height: int, width: int):
    """scikit-image's coffee resized to (height, width) by our exact Pillow 13 resize (the same pixels as stock
    Pillow 13 gives; pillow-simd's PIL is the one imported here, so it cannot make them)."""
    import numpy as np
    import torch
    from skimage import data

    from fused_input_norm import FusedInputNorm

    src = torch.from_numpy(np.ascontiguousarray(data.coffee()))
    out = FusedInputNorm.identity().resize(src, torch.float32, (height, width), reference="pil-13", channel_dim=-1)
    return out.to(torch.uint8).permute(1, 2, 0).contiguous()


def child(reps: int) -> None:
    import numpy as np
    import PIL
    import torch
    import torchvision.transforms.v2.functional as tvF
    from PIL import Image
    from torchvision.transforms import InterpolationMode

    import fused_input_norm
    from fused_input_norm import FusedInputNorm, smart_resize

    assert ".venv-pillow-simd" in PIL.__file__, f"not pillow-simd's PIL: {PIL.__file__} (run it with .venv-pillow-simd)"
    capability = fused_input_norm.build_info()["cpu_capability"]
    norm = FusedInputNorm.from_preprocessor_config(QWEN)
    identity = FusedInputNorm.identity()
    bounds = {"min_pixels": 3136, "max_pixels": 1003520}
    rows = []
    for height, width in PHOTOS:
        hwc = photo(height, width)
        chw = hwc.permute(2, 0, 1).contiguous()
        image = Image.fromarray(hwc.numpy())
        oh, ow = smart_resize(height, width, 28, **bounds)
        simd = torch.from_numpy(np.array(image.resize((ow, oh), Image.Resampling.BICUBIC))).permute(2, 0, 1)
        exact = {
            ref: identity.resize(x, torch.float32, (oh, ow), reference=ref, channel_dim=cd).to(torch.uint8)
            for ref, x, cd in (("pil-13", hwc, -1), ("pil-12.1", hwc, -1), ("torchvision", chw, -3))
        }
        tv = tvF.resize(chw, [oh, ow], InterpolationMode.BICUBIC, antialias=True)
        assert torch.equal(exact["torchvision"], tv), "reference=torchvision is not torchvision's bytes"
        differ = {
            ref: {"values": int((simd != v).sum()), "of": v.numel(), "max": int((simd.int() - v.int()).abs().max())}
            for ref, v in exact.items()
        }
        methods = {
            "pillow-simd resize": lambda image=image, ow=ow, oh=oh: image.resize((ow, oh), Image.Resampling.BICUBIC),
            "ours tv": lambda chw=chw: norm.patchify(chw, torch.bfloat16, reference="torchvision", **bounds),
            "ours pil": lambda hwc=hwc: norm.patchify(
                hwc, torch.bfloat16, channel_dim=-1, reference="pil-13", **bounds
            ),
        }
        for threads in (1, 2):
            torch.set_num_threads(threads)
            times = {name: [] for name in methods}
            for f in methods.values():  # warm-up: plans, scratch, pages
                f()
                f()
            n = reps if width < 4000 else max(5, reps * 2 // 3)
            for _ in range(n):
                for name, f in methods.items():
                    start = time.perf_counter()
                    f()
                    times[name].append((time.perf_counter() - start) * 1e3)
            rows.append(
                {
                    "capability": capability,
                    "photo": f"{width}x{height}",
                    "size": f"{ow}x{oh}",
                    "threads": threads,
                    "median_ms": {k: statistics.median(v) for k, v in times.items()},
                    "min_ms": {k: min(v) for k, v in times.items()},
                    "reps": n,
                    "pillow_simd_differs": differ,
                }
            )
    print("RESULT " + json.dumps(rows), flush=True)


def report(rows: list[dict]) -> None:
    print(
        "| capability | photo -> size | threads | pillow-simd | ours tv | ours pil | tv / simd (target) | pil / simd (target) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        med = r["median_ms"]
        simd = med["pillow-simd resize"]
        small = r["photo"] == "800x600"
        cells = []
        for key in ("tv", "pil"):
            bound = TARGETS[key][1 if small else 0]
            ratio = med[f"ours {key}"] / simd
            cells.append(f"{ratio:.2f}x (<= {bound}: {'met' if ratio <= bound else 'not met'})")
        print(
            f"| {r['capability']} | {r['photo']} -> {r['size']} | {r['threads']} | {simd:.2f} ms | "
            f"{med['ours tv']:.2f} ms | {med['ours pil']:.2f} ms | {cells[0]} | {cells[1]} |"
        )
    print()
    print("pillow-simd's resize against the exact references (values differing, of all; max difference):")
    seen = set()
    for r in rows:
        if r["photo"] in seen:
            continue
        seen.add(r["photo"])
        parts = [
            f"{ref}: {d['values']} of {d['of']} ({100 * d['values'] / d['of']:.2f}%, max {d['max']})"
            for ref, d in r["pillow_simd_differs"].items()
        ]
        print(f"- {r['photo']} -> {r['size']}: " + "; ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capabilities", nargs="+", default=["avx2", "avx512"])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.reps)
        return
    rows = []
    for capability in args.capabilities:
        env = dict(os.environ, FUSED_INPUT_NORM_CPU_CAPABILITY=capability)
        done = subprocess.run(
            [sys.executable, __file__, "--child", "--reps", str(args.reps)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            sys.exit(f"bench_pillow_simd: the {capability} run failed:\n{done.stdout}\n{done.stderr}")
        rows += json.loads(lines[-1].removeprefix("RESULT "))
    report(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
