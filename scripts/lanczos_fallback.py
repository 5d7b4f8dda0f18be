"""What transformers' CUDA fallback changes for Idefics3 / SmolVLM: on a CUDA tensor its torchvision backend
resizes with BICUBIC (antialiased) where the model's config says LANCZOS (which torchvision runs only on the
CPU). Reproduced on the CPU here: the same uint8 images through transformers' Idefics3ImageProcessor with
resample BICUBIC against LANCZOS, the resized bytes compared (do_rescale and do_normalize off), for the first
resize alone (to the longest edge) and for the whole chain's output (the tiles and the global image the model
reads). Real photos (scikit-image's), and a 1080x1920 mosaic of four of them (a resize down).

    .venv/bin/python scripts/lanczos_fallback.py [--longest-edge 1456] [--tile 364]
"""

import argparse

import numpy as np
import torch
from PIL import Image
from skimage import data
from torchvision.transforms.v2 import functional as tvF
from transformers import Idefics3ImageProcessor
from transformers.models.idefics3.image_processing_idefics3 import get_resize_output_image_size


def photos() -> dict[str, np.ndarray]:
    named = {name: getattr(data, name)() for name in ("astronaut", "coffee", "chelsea", "rocket", "retina")}
    named["hubble"] = data.hubble_deep_field()
    tiles = [
        np.asarray(Image.fromarray(named[n]).resize((960, 540))) for n in ("astronaut", "coffee", "rocket", "retina")
    ]
    named["mosaic-1080p"] = np.concatenate([np.concatenate(tiles[:2], 1), np.concatenate(tiles[2:], 1)], 0)
    return named


def compare(a: torch.Tensor, b: torch.Tensor) -> tuple[float, int, int]:
    """(fraction of values that differ, max |diff| in levels, values)."""
    diff = (a.to(torch.int32) - b.to(torch.int32)).abs()
    return float((diff > 0).double().mean()), int(diff.max()), diff.numel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--longest-edge", type=int, default=1456)
    parser.add_argument("--tile", type=int, default=364)
    args = parser.parse_args()
    kwargs = {"size": {"longest_edge": args.longest_edge}, "max_image_size": {"longest_edge": args.tile}}
    kwargs |= {"do_rescale": False, "do_normalize": False, "return_tensors": "pt"}
    lanczos, bicubic = Idefics3ImageProcessor(resample=1), Idefics3ImageProcessor(resample=3)
    print(
        f"Idefics3 sizes: longest edge {args.longest_edge}, tiles of {args.tile}; BICUBIC (the CUDA fallback) vs LANCZOS"
    )
    print("| photo | size | first resize: values differing, max diff | chain output: values differing, max diff |")
    print("|---|---|---|---|")
    totals = {"first": [0, 0, 0], "chain": [0, 0, 0]}
    for name, hwc in photos().items():
        chw = torch.from_numpy(np.ascontiguousarray(hwc[..., :3])).permute(2, 0, 1).contiguous()
        size = get_resize_output_image_size(chw, args.longest_edge)
        first = compare(
            tvF.resize(chw, list(size), interpolation=tvF.InterpolationMode.BICUBIC, antialias=True),
            tvF.resize(chw, list(size), interpolation=tvF.InterpolationMode.LANCZOS, antialias=True),
        )
        chain = compare(bicubic([chw], **kwargs)["pixel_values"], lanczos([chw], **kwargs)["pixel_values"])
        for key, (fraction, most, count) in (("first", first), ("chain", chain)):
            totals[key][0] += round(fraction * count)
            totals[key][1] = max(totals[key][1], most)
            totals[key][2] += count
        print(f"| {name} | {hwc.shape[1]}x{hwc.shape[0]} | {first[0]:.1%}, {first[1]} | {chain[0]:.1%}, {chain[1]} |")
    first, chain = totals["first"], totals["chain"]
    print(f"| all | | {first[0] / first[2]:.1%}, {first[1]} | {chain[0] / chain[2]:.1%}, {chain[1]} |")


if __name__ == "__main__":
    main()
