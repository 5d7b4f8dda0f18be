"""A 12 MP photo resized to ~1 MP by resize_into (bicubic, reference="pil", HWC input, CLIP's affine), on one
thread, planar float32 and Qwen2-VL bfloat16 patch rows, with and without `pad`: the cost of the padding move,
and that the unpadded path kept its speed. Each tree runs in its own process (two builds of the extension cannot
share one), alternately, ROUNDS times; printed: per case and tree, the median over rounds of each round's median.

    python scripts/bench_resize_pad.py TREE [TREE ...]   # a TREE holds a built fused_input_norm/

Times are the calling thread's CPU time (time.thread_time): on a shared machine the wall clock of a 1-thread
call doubles whenever another process takes the core, which says nothing about the code.
"""

import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict

ROUNDS, REPS = 8, 11
SIZE_PLANAR, SIZE_ROWS, CANVAS = (864, 1152), (840, 1148), (896, 1176)


def one_tree() -> dict:
    """This process's tree: the median time of each case (the padded ones where the tree has `pad`)."""
    import numpy as np
    import torch

    from fused_input_norm.resize import PlanCache, resize_into

    torch.set_num_threads(1)
    x = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (3024, 4032, 3), dtype=np.uint8))
    x = x.permute(2, 0, 1)[None]  # HWC memory, as an image is decoded
    std = torch.tensor([0.26862954, 0.26130258, 0.27577711])
    weight, bias = 1 / (255 * std), -torch.tensor([0.48145466, 0.4578275, 0.40821073]) / std

    def rows_out(h, w):
        return torch.empty(h // 14 * (w // 14), 3 * 2 * 14 * 14, dtype=torch.bfloat16)

    cases = {  # name: out, size, patches, pad
        "planar f32": (torch.empty(1, 3, *SIZE_PLANAR), SIZE_PLANAR, (), ()),
        "rows bf16 (2,14,2)": (rows_out(*SIZE_ROWS), SIZE_ROWS, (2, 14, 2), ()),
    }
    padded = "pad" in resize_into.__code__.co_varnames
    if padded:
        cases["planar f32, padded to 896x1176"] = (torch.empty(1, 3, *CANVAS), SIZE_PLANAR, (), (*CANVAS, 16, 12, 0))
        cases["rows bf16 (2,14,2), padded to 896x1176"] = (rows_out(*CANVAS), SIZE_ROWS, (2, 14, 2), (*CANVAS, 0, 0, 0))
    plans, medians = PlanCache(), {}
    for name, (out, size, patches, pad) in cases.items():
        extra = {"pad": pad} if padded else {}

        def call(out=out, size=size, patches=patches, extra=extra):
            resize_into(out, x, weight, bias, size, (0, 0, *size), "bicubic", "pil", plans, patches, **extra)

        call()
        times = []
        for _ in range(REPS):
            start = time.thread_time()
            call()
            times.append(time.thread_time() - start)
        medians[name] = statistics.median(times) * 1e3
    return medians


def main(trees: list[str]) -> None:
    runs = defaultdict(list)
    for _ in range(ROUNDS):
        for tree in trees:
            env = dict(os.environ, PYTHONPATH=tree)
            code = f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); import bench_resize_pad as b; "
            code += "import json; print(json.dumps(b.one_tree()))"
            result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            for name, ms in json.loads(result.stdout.strip().splitlines()[-1]).items():
                runs[(name, tree)].append(ms)
    for (name, tree), ms in sorted(runs.items()):
        print(f"{name:40s} {tree:30s} median {statistics.median(ms):6.2f} ms (rounds {min(ms):.1f}-{max(ms):.1f})")


if __name__ == "__main__":
    main(sys.argv[1:])
