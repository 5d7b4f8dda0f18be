"""The patch-row layouts written by the kernel against the copy they replaced, side by side in one process: for
Gemma 4, LFM2-VL and MiniCPM-V 4.6 (the families whose pixel_values are channel-last rows or NaViT strips), the
adapter's call on a 1080p and a 12 MP photo, alternated call by call with the same call whose plan asks the
kernel for channel-first rows and lays them out afterwards with the copy the core made before (a transpose of
every row, or a permute into strips). Both give the same pixel_values (checked); medians of the calling thread's
CPU time (time.thread_time), one thread, printed as Markdown rows.

    PYTHONPATH=. python scripts/bench_layouts.py [--reps N] [--families gemma4,lfm2_vl,minicpmv4_6]
"""

import argparse
import dataclasses
import importlib
import statistics
import time

import numpy as np
import torch

# family module -> transformers' class
FAMILIES = {
    "gemma4": "Gemma4ImageProcessor",
    "lfm2_vl": "Lfm2VlImageProcessor",
    "minicpmv4_6": "MiniCPMV4_6ImageProcessor",
}
SIZES = {"1080p": (1080, 1920), "12 MP": (3024, 4032)}


def copied_after(plan, channel: int):
    """The plan with channel-first rows from the kernel, and the copy that lays them out as the plan's layout."""
    rows = dataclasses.replace(plan, channel_last=False, strips=False)
    if plan.channel_last:  # rows [C, P * P] -> [P * P, C]
        return rows, lambda out: out.view(-1, channel, plan.shape[-1] // channel).transpose(1, 2).reshape(plan.shape)
    count, _, patch, _ = plan.shape  # rows [C, P, P] -> strips [1, C, P, rows * P]
    return rows, lambda out: out.permute(1, 2, 0, 3).reshape(1, channel, patch, count * patch)


def timed_call(family, adapter, image: torch.Tensor, copy: bool) -> tuple[float, torch.Tensor]:
    """The adapter's call on the image and its pixel_values; with `copy`, the kernel's channel-first rows and
    then the copy that lays them out."""
    planned, finish = family.plan, []

    def rows_then_copy(*args, **kwargs):
        rows, after = copied_after(planned(*args, **kwargs), image.shape[0])
        finish.append(after)
        return rows

    family.plan = rows_then_copy if copy else planned
    try:
        start = time.thread_time()
        values = adapter([image], return_tensors="pt")["pixel_values"]
        if copy:
            values = finish[0](values)
        return time.thread_time() - start, values
    finally:
        family.plan = planned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--families", default=",".join(FAMILIES))
    args = parser.parse_args()

    import skimage.data
    import transformers
    from PIL import Image

    from fused_input_norm.hf_adapter import FusedHFImageProcessor

    torch.set_num_threads(1)
    base = Image.fromarray(skimage.data.astronaut())
    photos = {
        name: torch.from_numpy(np.array(base.resize((w, h), Image.BICUBIC))).permute(2, 0, 1).contiguous()
        for name, (h, w) in SIZES.items()
    }
    print("| family | image | pixel_values | kernel layout ms | rows + copy ms | ratio |")
    print("|---|---|---|---|---|---|")
    for name in args.families.split(","):
        family = importlib.import_module(f"fused_input_norm.families.{name}")
        adapter = FusedHFImageProcessor(getattr(transformers, FAMILIES[name])())
        for size, image in photos.items():
            (_, direct), (_, copied) = (timed_call(family, adapter, image, copy) for copy in (False, True))
            assert torch.equal(direct, copied), (name, size)
            times = {False: [], True: []}
            for _ in range(args.reps):
                for copy in (False, True):
                    times[copy].append(timed_call(family, adapter, image, copy)[0])
            fast, slow = (1e3 * statistics.median(times[c]) for c in (False, True))
            shape = "x".join(map(str, direct.shape))
            print(f"| {name} | {size} | {shape} | {fast:.1f} | {slow:.1f} | {slow / fast:.2f}x |")


if __name__ == "__main__":
    main()
