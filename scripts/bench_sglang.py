"""Per-request time of SGLang's process_mm_data_async with the plugin serving images (FusedImageProcessor) and
with transformers' processor (FUSED_INPUT_NORM_SGLANG_PROCESSOR=1 / 0, each in its own process, the two
alternated round by round; the best round's median is shown), at 1 and 2 torch threads (SGLang runs 2
processor threads by default on a CPU host), for JPEG bytes as a client sends them (SGLang's decode is inside
the request: Pillow's for served classes and, here without a GPU, for transformers' too). Beside each request,
the image processor's own call inside it (the adapter's, or transformers' processor's), timed on the inputs
SGLang hands it: the rest of the request (decode, tokenization, hashing) is the same on both sides.

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
    # The image processor's call, timed where SGLang makes it (its class's __call__: the adapter's on the
    # plugin's side, transformers' on the other; a call the adapter hands back is timed in full).
    image_processor = type(mm._processor.image_processor)
    call, calls = image_processor.__call__, []

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return call(self, *args, **kwargs)
        finally:
            calls.append((time.perf_counter() - start) * 1e3)

    image_processor.__call__ = timed
    times = {}
    for threads in THREADS:
        torch.set_num_threads(threads)
        for h, w in sizes:
            out = io.BytesIO()
            Image.fromarray(photo(h, w, 0)).save(out, format="JPEG", quality=90)
            jpeg = out.getvalue()
            process(mm, prompt, [jpeg])  # warm-up
            samples, calls[:] = [], []
            for _ in range(repeats):
                start = time.perf_counter()
                process(mm, prompt, [jpeg])
                samples.append((time.perf_counter() - start) * 1e3)
            assert len(calls) == repeats, calls  # one image processor call per request
            times[f"{threads} {w}x{h}"] = (statistics.median(samples), statistics.median(calls))
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
    print(
        f"{'model':<12} {'threads':>7} {'image':>10} {'request: plugin ms':>19} {'transformers ms':>16} "
        f"{'speed-up':>9} {'processor: plugin ms':>21} {'transformers ms':>16} {'speed-up':>9}"
    )
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
            ours = [min(r[key][i] for r in results["1"]) for i in (0, 1)]  # (request, processor call)
            theirs = [min(r[key][i] for r in results["0"]) for i in (0, 1)]
            row = (
                f"{model:<12} {threads:>7} {size:>10} {ours[0]:>19.1f} {theirs[0]:>16.1f} {theirs[0] / ours[0]:>8.2f}x"
            )
            print(f"{row} {ours[1]:>21.1f} {theirs[1]:>16.1f} {theirs[1] / ours[1]:>8.2f}x", flush=True)


if __name__ == "__main__":
    main()
