"""Per-request time of SGLang's process_mm_data_async with the plugin serving images (FusedImageProcessor) and
with transformers' processor (FUSED_INPUT_NORM_SGLANG_PROCESSOR=1 / 0, each in its own process, the two
alternated round by round; the best round's median is shown), at 1 and 2 torch threads (SGLang runs 2
processor threads by default on a CPU host), for JPEG bytes as a client sends them (SGLang's decode is inside
the request: Pillow's for served classes and, here without a GPU, for transformers' too).

    .venv-sglang/bin/python scripts/bench_sglang.py [--models qwen2_vl,gemma3] [--sizes 1920x1080,4032x3024]
        [--repeats N] [--rounds R]

--models: any model of tests/test_sglang.py (its tiny model directories, each with its checkpoint's config).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
THREADS = [1, 2]


def measure(model_dir: str, model: str, repeats: int, sizes: list) -> dict:
    """One side's median per-request time (ms) by thread count and image size, in this process."""
    import io

    import torch
    from PIL import Image
    from test_sglang import MODELS, process, sglang_manager, start_sglang
    from test_vllm_processor import photo

    start_sglang()
    mm = sglang_manager(model_dir, {}).mm_processor
    prompt = f"{MODELS[model][0]} describe"
    times = {}
    for threads in THREADS:
        torch.set_num_threads(threads)
        for h, w in sizes:
            out = io.BytesIO()
            Image.fromarray(photo(h, w, 0)).save(out, format="JPEG", quality=90)
            jpeg = out.getvalue()
            process(mm, prompt, [jpeg])  # warm-up
            samples = []
            for _ in range(repeats):
                start = time.perf_counter()
                process(mm, prompt, [jpeg])
                samples.append((time.perf_counter() - start) * 1e3)
            times[f"{threads} {w}x{h}"] = statistics.median(samples)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="qwen2_vl,qwen2_5_vl,qwen3_vl,gemma3")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sizes", default="1920x1080,4032x3024", help="the JPEG photos, width x height")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # model_dir model repeats
    args = parser.parse_args()
    if args.child:
        model_dir, model, repeats = args.child
        sizes = [tuple(int(n) for n in reversed(size.split("x"))) for size in args.sizes.split(",")]  # (h, w)
        print(json.dumps(measure(model_dir, model, int(repeats), sizes)))
        return
    from test_sglang import write_models

    root = tempfile.mkdtemp(prefix="bench-sglang-")
    write_models(root)
    print(f"{'model':<12} {'threads':>7} {'image':>10} {'plugin ms':>10} {'transformers ms':>16} {'speed-up':>9}")
    for model in args.models.split(","):
        results = {"1": [], "0": []}
        for _ in range(args.rounds):  # alternated: the machine's load drifts
            for switch in ("1", "0"):
                env = {**os.environ, "FUSED_INPUT_NORM_SGLANG_PROCESSOR": switch}
                child = [sys.executable, __file__, "--sizes", args.sizes, "--child", os.path.join(root, model), model]
                child.append(str(args.repeats))
                run = subprocess.run(child, env=env, capture_output=True, text=True, cwd="/", check=False)
                if run.returncode != 0:
                    sys.exit(run.stderr[-3000:])
                results[switch].append(json.loads(run.stdout.strip().splitlines()[-1]))
        for key in results["1"][0]:
            threads, size = key.split()
            ours = min(r[key] for r in results["1"])
            theirs = min(r[key] for r in results["0"])
            print(
                f"{model:<12} {threads:>7} {size:>10} {ours:>10.1f} {theirs:>16.1f} {theirs / ours:>8.2f}x", flush=True
            )


if __name__ == "__main__":
    main()
