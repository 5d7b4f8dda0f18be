"""Kimi-K2.5's image preprocessing: vLLM 0.34.0's own fused path (KimiK25FusedVisionProcessor.preprocess:
Pillow's bicubic resize, then one numba kernel that zero-pads to the 28-pixel grid, normalizes through a
float32 lookup table and writes [patches, 3, 14, 14]) against the package's one fused op for the same job
(resize_into: Pillow's bicubic reproduced, the pad byte put through the same affine, patch rows), side by side
in one process, alternated, at 1 thread (torch and numba), float32 (normalized) and uint8 (vLLM's
mm_device_do_normalize path: the identity table). Prints each size's times and the largest difference.

    .venv-vllm/bin/python scripts/bench_kimi_k25.py [--repeats N]

Kimi-K2.5's media_proc_cfg: patch 14, merge 2, in_patch_limit 16384, patch_limit_on_one_side 512, mean and std
0.5. vllm_* serves Kimi only where the package is equal and faster (issue 44); docs/performance.md has the result.
"""

import argparse
import itertools
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from test_vllm_processor import photo

CONFIG = {
    "patch_size": 14,
    "merge_kernel_size": 2,
    "in_patch_limit": 16384,
    "patch_limit_on_one_side": 512,
    "fixed_output_tokens": None,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "temporal_merge_kernel_size": 4,
    "in_patch_limit_each_frame": 4096,
    "in_patch_limit_video": None,
}
SIZES = [(57, 29), (1080, 1920), (3024, 4032)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    import numba
    import numpy as np
    import torch
    from PIL import Image
    from vllm.transformers_utils.processors.kimi_k25_vision_fused import KimiK25FusedVisionProcessor

    from fused_input_norm.module import FusedInputNorm
    from fused_input_norm.resize import PlanCache, resize_into

    torch.set_num_threads(1)
    numba.set_num_threads(1)
    kimi = KimiK25FusedVisionProcessor(CONFIG)
    norm = FusedInputNorm(CONFIG["image_mean"], CONFIG["image_std"], 1 / 255)
    affines = {
        torch.float32: norm.affine_constants(torch.device("cpu")),
        torch.uint8: FusedInputNorm.identity().affine_constants(torch.device("cpu")),  # vLLM's device normalize
    }
    plans, patch = PlanCache(), CONFIG["patch_size"]

    def fused(image: Image.Image, resize: dict, dtype: torch.dtype) -> torch.Tensor:
        """The package's answer: one resize_into call on the image's pixels (np.array: a copy, as vLLM's)."""
        pixels = torch.from_numpy(np.array(image)).permute(2, 0, 1)
        height, width = resize["new_height"], resize["new_width"]
        padded = (height + resize["pad_height"], width + resize["pad_width"])
        out = torch.empty(padded[0] // patch * (padded[1] // patch), 3 * patch * patch, dtype=dtype)
        weight, bias = affines[dtype]
        pad = (*padded, 0, 0, 0)  # the canvas of byte 0 (normalized, as Kimi's LUT[0]), the image at its top left
        resize_into(
            out,
            pixels[None],
            weight,
            bias,
            (height, width),
            (0, 0, height, width),
            "bicubic",
            "pil",
            plans,
            (1, patch, 1),
            pad=pad,
        )
        return out.view(-1, 3, patch, patch)

    print(
        "| image | output | resized to | vLLM's fused Kimi ms | package ms | speed-up | max abs diff | values differing |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (height, width), dtype in itertools.product(SIZES, (torch.float32, torch.uint8)):
        normalize = dtype == torch.float32
        image = Image.fromarray(photo(height, width, 0))
        medias = [{"type": "image", "image": image}]
        resize = kimi.get_resize_config(medias[0])
        times = {"kimi": [], "fused": []}
        for i in range(args.repeats + 2):
            for name in ("kimi", "fused"):
                start = time.perf_counter()
                if name == "kimi":
                    out = kimi.preprocess(medias, "pt", do_rescale=normalize, do_normalize=normalize)["pixel_values"]
                else:
                    out = fused(image, resize, dtype)
                if i >= 2:
                    times[name].append(time.perf_counter() - start)
                if name == "kimi":
                    expected = out
                else:
                    got = out
        diff = (got.float() - expected.float()).abs()
        a, b = (statistics.median(times[k]) * 1e3 for k in ("kimi", "fused"))
        print(
            f"| {width}x{height} | {str(dtype)[6:]} | {resize['new_width']}x{resize['new_height']} (+{resize['pad_width']}, "
            f"+{resize['pad_height']}) | {a:.1f} | {b:.1f} | {a / b:.2f}x | {float(diff.max()):.2e} | "
            f"{int((diff > 0).sum())} of {diff.numel()} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
