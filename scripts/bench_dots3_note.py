"""dots3.note's image preprocessing, vLLM's own against the plugin's (vllm_dots3_note), per request: vLLM's own
HF-like Dots3NoteProcessor.__call__ (what apply() calls: tokenizing, preprocess, the patch rows), at 1 thread, one
process, the two alternated call by call, medians; vLLM's hash of the image (its processor-cache key, the same
work on both sides of apply()) timed apart, and the ratio with it added to both sides.

    PYTHONPATH=. .venv-vllm/bin/python scripts/bench_dots3_note.py [--repeats N]

Not apply() itself: vLLM's CPU build cannot load dots3.note's model package (its CUDA-only FlashAttention
imports), so scripts/bench_vllm.py cannot build its processor here; tests/test_vllm_dots3_note.py imports the
processing module alone, as this does, and checks the two equal. Settings: the test's (dots.ocr's budget, 3136
to 11289600 pixels; patch 14, merge 2, temporal patch 2).
"""

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import test_vllm_dots3_note as dots3  # the test's settings and module import
from test_vllm_families import tokenizer
from test_vllm_processor import photo

SIZES = [(1080, 1920), (3024, 4032)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    import torch
    from PIL import Image
    from transformers import AutoTokenizer
    from vllm.multimodal.hasher import MultiModalHasher

    from fused_input_norm import vllm_dots3_note

    torch.set_num_threads(1)
    module = dots3.processing_module()
    cls = module.Dots3NoteImageProcessor
    original = cls.preprocess
    assert "serves" in vllm_dots3_note.serve(logging.getLogger("bench"))
    served = cls.preprocess
    with tempfile.TemporaryDirectory() as path:
        tokenizer(path, dots3.SPECIAL, "<|endoftext|>", "<|endoftext|>")
        tok = AutoTokenizer.from_pretrained(path)
    images = cls(dots3.VISION, dots3.VISION["image_details"])
    processor = module.Dots3NoteProcessor(
        tok, images, max_model_len=4096, video_audio_enabled=False, audio_token_stride=1280
    )
    print(f"dots3.note Dots3NoteProcessor.__call__, 1 thread, median of {args.repeats} (alternated)")
    print("| image | vLLM ms | fused ms | speed-up | vLLM hashing ms | speed-up with the hashing |")
    print("|---|---|---|---|---|---|")
    for h, w in SIZES:
        image = Image.fromarray(photo(h, w, 7))
        times = {"vllm": [], "fused": [], "hash": []}
        for _ in range(args.repeats):
            for name, method in (("vllm", original), ("fused", served)):
                cls.preprocess = method
                start = time.perf_counter()
                processor(f"{dots3.IMAGE} describe", images=[image])
                times[name].append(time.perf_counter() - start)
            start = time.perf_counter()
            MultiModalHasher.hash_kwargs("blake3", image=image)  # vLLM's default mm_hasher_algorithm
            times["hash"].append(time.perf_counter() - start)
        cls.preprocess = served
        off, on, hashing = (statistics.median(times[k]) * 1e3 for k in ("vllm", "fused", "hash"))
        print(
            f"| {w}x{h} | {off:.1f} | {on:.1f} | {off / on:.2f}x | {hashing:.1f} | "
            f"{(off + hashing) / (on + hashing):.2f}x |"
        )


if __name__ == "__main__":
    main()
