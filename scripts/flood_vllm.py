"""Memory under a flood of distinct image sizes through vLLM's own apply(), plugin on vs off
(FUSED_INPUT_NORM_VLLM_PROCESSOR=1 / 0, each in its own process, 1 thread, the Qwen2-VL test model): the
resident set after a warm-up, then after N requests whose images all have distinct sizes, as a hostile
client would send them. The bar (issue 38): the plugin grows no more than transformers' processor does.

    .venv-vllm/bin/python scripts/flood_vllm.py [--requests N] [--float]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from bench_vllm import vllm_processor  # this script's folder: sys.path[0]
from test_vllm_processor import write_model  # the tests' model directory


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def worker(model_dir: str, requests: int, device_normalize: bool) -> dict:
    import numpy as np
    from PIL import Image
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs

    processor, prompt = vllm_processor(model_dir, device_normalize)
    rng = np.random.default_rng(0)
    # Distinct heights (each a new pair of resize plans), widths of ordinary photos.
    heights = rng.permutation(np.arange(200, 200 + requests + 20))
    widths = rng.integers(200, 2000, requests + 20)

    def request(i: int) -> None:
        pixels = rng.integers(0, 256, (int(heights[i]), int(widths[i]), 3), dtype=np.uint8)
        inputs = ProcessorInputs(prompt, processor.info.parse_mm_data({"image": [Image.fromarray(pixels)]}), None, {})
        processor.apply(inputs, TimingContext(enabled=False))

    for i in range(20):  # warm-up: lazy imports, the allocator's first arenas
        request(i)
    start = rss_mb()
    for i in range(20, 20 + requests):
        request(i)
    image_processor = processor.info.get_hf_processor().image_processor
    return {
        # The adapter's type carries transformers' class name (it stands in for it): its repr names the adapter.
        "class": repr(image_processor) if hasattr(image_processor, "upstream") else type(image_processor).__name__,
        "rss_start_mb": start,
        "rss_end_mb": rss_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000, help="requests of distinct sizes, per process")
    parser.add_argument("--float", action="store_true", help="mm_device_do_normalize off (float32 pixel_values)")
    parser.add_argument("--worker", nargs=2, metavar=("MODEL_DIR", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        with open(args.worker[1], "w") as f:
            json.dump(worker(args.worker[0], args.requests, not args.float), f)
        return
    with tempfile.TemporaryDirectory() as root:
        model_dir = os.path.join(root, "qwen2_vl")
        write_model(model_dir, "qwen2_vl")
        path = "float32" if args.float else "uint8 (mm_device_do_normalize)"
        print(f"vLLM apply(), {args.requests} requests of distinct image sizes, 1 thread, Qwen2-VL, {path}")
        for switch, name in (("1", "plugin on"), ("0", "plugin off")):
            out = os.path.join(root, f"{switch}.json")
            env = {**os.environ, "FUSED_INPUT_NORM_VLLM_PROCESSOR": switch, "OMP_NUM_THREADS": "1"}
            command = [sys.executable, os.path.abspath(__file__), "--worker", model_dir, out]
            command += ["--requests", str(args.requests)] + (["--float"] if args.float else [])
            subprocess.run(command, env=env, check=True, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(out) as f:
                r = json.load(f)
            grown = r["rss_end_mb"] - r["rss_start_mb"]
            print(f"  {name} ({r['class']}): RSS {r['rss_start_mb']:.0f} -> {r['rss_end_mb']:.0f} MB, {grown:+.0f} MB")


if __name__ == "__main__":
    main()
