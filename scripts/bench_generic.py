"""The generic path against transformers: a processor's own preprocess called on transformers' instance and on
FusedHFGenericImageProcessor around it, on one thread, alternated call by call, medians; printed as Markdown
rows (class, image, transformers ms, generic path ms, ratio, largest difference of pixel_values).

    PYTHONPATH=. python scripts/bench_generic.py [--reps N] [--classes LlavaNextImageProcessor,...]

Times are the calling thread's CPU time (time.thread_time): on a shared machine the wall clock of a 1-thread
call doubles whenever another process takes the core, which says nothing about the code. The images are
random pixels as PIL images (the processors' cost does not depend on the content). --normalize-off-too adds the
generic path without its rescale_and_normalize primitive (hf_primitives.MIN_NORMALIZE_VALUES set out of reach),
timed in the same alternation.
"""

import argparse
import statistics
import time

import numpy as np
import torch

CLASSES = ["LlavaNextImageProcessor", "Gemma4ImageProcessor", "Lfm2VlImageProcessor", "Cohere2VisionImageProcessor"]
SIZES = {"small": (224, 224), "VGA": (480, 640), "1080p": (1080, 1920), "12 MP": (3024, 4032)}


def largest_difference(got, expected) -> float:
    if isinstance(expected, list | tuple):
        return max((largest_difference(g, e) for g, e in zip(got, expected, strict=True)), default=0.0)
    return (torch.as_tensor(got).double() - torch.as_tensor(expected).double()).abs().max().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--classes", default=",".join(CLASSES))
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"of {list(SIZES)}")
    parser.add_argument(
        "--normalize-off-too",
        action="store_true",
        help="also time the generic path with its rescale_and_normalize primitive off (transformers' steps)",
    )
    args = parser.parse_args()

    import transformers
    from PIL import Image

    from fused_input_norm import hf_primitives
    from fused_input_norm.hf_adapter import FusedHFGenericImageProcessor

    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, 1 thread, {args.reps} calls each")
    off = " | normalize primitive off ms | ratio" if args.normalize_off_too else ""
    print(f"| class | image | transformers ms | generic path ms | ratio{off} | max diff |")
    print("|---|---|---|---|---|" + "---|---|" * bool(off) + "---|")
    served_from = hf_primitives.MIN_NORMALIZE_VALUES
    for name in args.classes.split(","):
        upstream = getattr(transformers, name)()
        adapter = FusedHFGenericImageProcessor(upstream)
        sides = [("transformers", upstream, served_from), ("generic", adapter, served_from)]
        if off:  # the generic path with every rescale_and_normalize call left to transformers' own steps
            sides.append(("normalize off", adapter, float("inf")))
        for label in args.sizes.split(","):
            height, width = SIZES[label]
            rng = np.random.default_rng(height)
            image = Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
            times = {side: [] for side, *_ in sides}
            outputs = {}
            for _ in range(args.reps + 1):  # the first of each is a warm-up
                for side, processor, smallest in sides:
                    hf_primitives.MIN_NORMALIZE_VALUES = smallest
                    start = time.thread_time()
                    outputs[side] = processor(image, return_tensors="pt")["pixel_values"]
                    times[side].append(time.thread_time() - start)
            hf_primitives.MIN_NORMALIZE_VALUES = served_from
            ms = {side: statistics.median(times[side][1:]) * 1e3 for side in times}
            theirs, ours = ms["transformers"], ms["generic"]
            diff = max(largest_difference(outputs[side], outputs["transformers"]) for side in times)
            row = f"| {name} | {label} {width}x{height} | {theirs:.1f} | {ours:.1f} | {theirs / ours:.2f}x"
            if off:
                row += f" | {ms['normalize off']:.1f} | {theirs / ms['normalize off']:.2f}x"
            print(f"{row} | {diff:.1e} |")


if __name__ == "__main__":
    main()
