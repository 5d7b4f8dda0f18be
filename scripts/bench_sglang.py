"""Per-request time of SGLang's process_mm_data_async with the plugin serving images (FusedImageProcessor) and
with transformers' processor (FUSED_INPUT_NORM_SGLANG_PROCESSOR=1 / 0, each in its own process, the two
alternated round by round), at 1 and 2 torch threads (SGLang runs 2 processor threads by default on a CPU
host), for JPEG bytes as a client sends them (SGLang's decode is inside the request, Pillow's for served
classes and, here without a GPU, for transformers' too).

    .venv-sglang/bin/python scripts/bench_sglang.py [--models qwen2_vl,gemma3] [--repeats N] [--rounds R]

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
SIZES = [(1080, 1920), (3024, 4032)]
THREADS = [1, 2]


def measure(model_dir: str, model: str, threads: int, repeats: int) -> dict:
    """One side's median per-request time (ms) by image size, in this process."""
    import io

    import torch
    from PIL import Image
    from test_sglang import MODELS, process, sglang_manager, start_sglang
    from test_vllm_processor import photo

    torch.set_num_threads(threads)
    start_sglang()
    mm = sglang_manager(model_dir, {}).mm_processor
    placeholder = MODELS[model][0]
    times = {}
    for h, w in SIZES:
        out = io.BytesIO()
        Image.fromarray(photo(h, w, 0)).save(out, format="JPEG", quality=90)
        jpeg = out.getvalue()
        process(mm, f"{placeholder} describe", [jpeg])  # warm-up
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            process(mm, f"{placeholder} describe", [jpeg])
            samples.append((time.perf_counter() - start) * 1e3)
        times[f"{w}x{h}"] = statistics.median(samples)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="qwen2_vl,qwen2_5_vl,qwen3_vl,gemma3")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)  # model_dir model threads repeats
    args = parser.parse_args()
    if args.child:
        model_dir, model, threads, repeats = args.child
        print(json.dumps(measure(model_dir, model, int(threads), int(repeats))))
        return
    from test_sglang import write_models

    root = tempfile.mkdtemp(prefix="bench-sglang-")
    write_models(root)
    print(f"{'model':<12} {'threads':>7} {'image':>10} {'plugin ms':>10} {'transformers ms':>16} {'speed-up':>9}")
    for model in args.models.split(","):
        for threads in THREADS:
            results = {"1": [], "0": []}
            for _ in range(args.rounds):  # alternated: the machine's load drifts
                for switch in ("1", "0"):
                    env = {**os.environ, "FUSED_INPUT_NORM_SGLANG_PROCESSOR": switch, "OMP_NUM_THREADS": str(threads)}
                    child = [sys.executable, __file__, "--child", os.path.join(root, model), model, str(threads)]
                    run = subprocess.run(
                        [*child, str(args.repeats)], env=env, capture_output=True, text=True, cwd="/", check=False
                    )
                    if run.returncode != 0:
                        sys.exit(run.stderr[-3000:])
                    results[switch].append(json.loads(run.stdout.strip().splitlines()[-1]))
            for size in results["1"][0]:
                ours = min(r[size] for r in results["1"])
                theirs = min(r[size] for r in results["0"])
                print(f"{model:<12} {threads:>7} {size:>10} {ours:>10.1f} {theirs:>16.1f} {theirs / ours:>8.2f}x")


if __name__ == "__main__":
    main()
