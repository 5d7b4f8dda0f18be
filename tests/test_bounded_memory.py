"""Memory under a flood of distinct image sizes: the plan cache stays within its bounds (count and bytes) and
gives Pillow's pixels whatever it evicted, from one thread or several; a processor's RSS does not grow with
the number of sizes it has seen (a subprocess measures it).

FUSED_INPUT_NORM_LONG_PROBES=1 runs the long flood (2,000 heights) as well as the short one (200).
"""

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import torch
from conftest import QWEN2_VL_CHECKPOINT
from PIL import Image

from fused_input_norm import FusedImageProcessor, FusedInputNorm
from fused_input_norm.resize import PlanCache

LONG = os.environ.get("FUSED_INPUT_NORM_LONG_PROBES") == "1"
CPU = torch.device("cpu")
IDENTITY = FusedInputNorm.identity()
QWEN2_VL = {**QWEN2_VL_CHECKPOINT, "image_processor_type": "Qwen2VLImageProcessor"}


def image(height: int, width: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def pillow_resize(hwc: np.ndarray, size: tuple[int, int]) -> torch.Tensor:
    """PIL.Image.resize (bicubic) as float32 [3, H, W]: what the identity module's resize must give."""
    resized = np.asarray(Image.fromarray(hwc).resize(size[::-1], Image.Resampling.BICUBIC))
    return torch.from_numpy(resized.copy()).permute(2, 0, 1).float()


def resized(norm: FusedInputNorm, hwc: np.ndarray, size: tuple[int, int]) -> torch.Tensor:
    return norm.resize(torch.from_numpy(hwc).permute(2, 0, 1), torch.float32, size, reference="pil")


def assert_within(cache: PlanCache, max_plans: int, max_bytes: int) -> None:
    count, nbytes = cache.kept(CPU)
    assert count <= max_plans and nbytes <= max_bytes, (count, nbytes)


def test_a_flood_of_sizes_stays_within_the_bounds_and_gives_pillows_pixels():
    """Distinct output sizes (each a new plan per axis), a size that comes back every few calls (kept, or
    planned again when the ring passed over it) and the first sizes again at the end (evicted long ago):
    every result equals Pillow's, and after every call the cache holds at most its bounds."""
    max_plans, max_bytes = 8, 12_000  # plans here are 0.2-2.3 KB: the ring wraps many times
    norm = FusedInputNorm.identity()
    norm._plans = PlanCache(max_plans, max_bytes)
    hwc = image(61, 83)
    again = (47, 29)
    sizes = [(20 + i, 90 - i % 50) for i in range(60)]
    for i, size in enumerate([*sizes, *sizes[:5]]):
        assert torch.equal(resized(norm, hwc, size), pillow_resize(hwc, size)), size
        assert_within(norm._plans, max_plans, max_bytes)
        if i % 4 == 0:
            assert torch.equal(resized(norm, hwc, again), pillow_resize(hwc, again)), (i, again)
    assert norm._plans.kept(CPU)[0] > 1  # it did keep plans


def test_the_default_bounds_under_a_flood_through_the_processor():
    processor = FusedImageProcessor.from_preprocessor_config(QWEN2_VL, device="cpu")
    fresh_each_time = []
    for height in range(200, 500, 3):  # 100 heights: 100 row plans and one column plan
        out = processor(image(height, 96, height))
        assert_within(processor._plans, PlanCache.MAX_PLANS, PlanCache.MAX_BYTES)
        if height % 60 == 20:
            fresh_each_time.append((height, out))
    assert processor._plans.kept(CPU)[0] == PlanCache.MAX_PLANS
    for height, out in fresh_each_time:  # a processor that never saw another size: the same bits
        expected = FusedImageProcessor.from_preprocessor_config(QWEN2_VL, device="cpu")(image(height, 96, height))
        assert torch.equal(out["pixel_values"], expected["pixel_values"]), height


def test_a_plan_over_the_byte_bound_is_used_and_not_kept():
    norm = FusedInputNorm.identity()
    norm._plans = PlanCache(max_plans=8, max_bytes=1000)
    hwc = image(400, 7)
    size = (300, 7)  # one row plan of 300 * (2 + 5) * 4 bytes
    assert torch.equal(resized(norm, hwc, size), pillow_resize(hwc, size))
    assert norm._plans.kept(CPU) == (0, 0)


def test_device_plans_are_least_recently_used_first_out():
    """The GPU side's bookkeeping, on the meta device (no GPU here): within both bounds after every plan,
    and a plan in use stays while older ones go."""
    meta = torch.device("meta")
    cache = PlanCache(max_plans=4, max_bytes=3_000)
    hot = cache.get(40, 30, "bicubic", "pil", meta)
    for out_size in [*range(10, 40), *range(41, 60)]:  # 40 -> 40 has no plan
        assert cache.get(40, out_size, "bilinear", "pil", meta).device == meta
        assert cache.get(40, 30, "bicubic", "pil", meta) is hot  # used after every other: never evicted
        count, nbytes = cache.kept(meta)
        assert count <= 4 and nbytes <= 3_000, (count, nbytes)
    assert cache.kept(CPU) == (0, 0)


def test_threads_sharing_a_small_cache_get_pillows_pixels():
    """Eight threads, each with its own sizes and one size they all share, through one module whose cache
    holds 6 plans: evictions and ring writes race with hits; every result must still be Pillow's."""
    norm = FusedInputNorm.identity()
    norm._plans = PlanCache(max_plans=6, max_bytes=8_000)
    hwc = image(57, 71)
    shared = (33, 40)
    sizes = {t: [(18 + t + 8 * i, 60 - t - i) for i in range(12)] for t in range(8)}
    expected = {size: pillow_resize(hwc, size) for size in [shared, *(s for own in sizes.values() for s in own)]}
    errors = []
    start = threading.Barrier(8)

    def work(t):
        try:
            start.wait()
            for _ in range(3):
                for size in sizes[t]:
                    for s in (size, shared):
                        got = resized(norm, hwc, s)
                        if not torch.equal(got, expected[s]):
                            errors.append((t, s, int((got != expected[s]).sum())))
        except Exception as e:  # surfaced below: an exception in a thread would otherwise be lost
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:5]
    assert_within(norm._plans, 6, 8_000)


# One FusedImageProcessor from a Qwen2-VL config, float32 output (vLLM's float path) or uint8 (its default
# path), fed images 640 wide of increasing heights (each output a little larger than the last: the order in
# which an unbounded plan cache grew RSS by 2.3 GB over 200 heights), after a warm-up that already made the
# largest output. Prints the RSS growth in MB.
FLOOD = textwrap.dedent(
    """
    import ctypes
    import sys
    import numpy as np
    import torch
    from fused_input_norm import FusedImageProcessor

    config, count, dtype = sys.argv[1], int(sys.argv[2]), getattr(torch, sys.argv[3])
    processor = FusedImageProcessor.from_preprocessor_config(eval(config), device="cpu")
    rng = np.random.default_rng(0)

    def rss_mb():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))

    for height in (2200, 1000, 300) * 2:
        processor(rng.integers(0, 256, (height, 640, 3), dtype=np.uint8), dtype)
    start = rss_mb()
    for height in np.linspace(200, 2200, count).astype(int):
        processor(rng.integers(0, 256, (int(height), 640, 3), dtype=np.uint8), dtype)
    grown = rss_mb() - start
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # glibc's freed pages back to the kernel: what is left is held
    print(grown, rss_mb() - start)
    """
)


def rss_growth_mb(count: int, dtype: str) -> tuple[float, float]:
    """(RSS growth, the growth left once glibc has returned its freed pages) in MB."""
    # An address-space cap: an unbounded growth fails the test instead of the machine.
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (12 << 30, 12 << 30))\n"
    result = subprocess.run(
        [sys.executable, "-c", limit + FLOOD, repr(QWEN2_VL), str(count), dtype],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    grown, held = (float(v) for v in result.stdout.split()[-2:])
    return grown, held


# What the process holds after the flood, once glibc has returned its freed pages (malloc_trim), must not grow:
# no per-size store keeps anything. The raw RSS also counts freed pages glibc keeps, which depends on where
# one long-lived allocation lands (a build or an allocation order apart, the same code left 5-440 MB for the
# uint8 flood; malloc_trim returned all of it). The unbounded plan cache pinned the heap: +2.3 GB of raw RSS
# on the float32 flood, far past that noise; on the uint8 flood it was +346 MB, inside it, so only what is
# held is asserted there. transformers' Qwen2VLImageProcessor grew by 65 MB over 2,000 heights.
FLOODS = {"float32": 600, "uint8": None}  # the raw RSS bound, where it separates the unbounded cache


@pytest.mark.parametrize("dtype", FLOODS)
def test_rss_does_not_grow_with_a_flood_of_heights(dtype):
    grown, held = rss_growth_mb(200, dtype)
    assert held < 64, (grown, held)
    if FLOODS[dtype] is not None:
        assert grown < FLOODS[dtype], (grown, held)


@pytest.mark.skipif(not LONG, reason="the long flood: set FUSED_INPUT_NORM_LONG_PROBES=1")
@pytest.mark.parametrize("dtype", FLOODS)
def test_rss_does_not_grow_with_a_long_flood_of_heights(dtype):
    grown, held = rss_growth_mb(2000, dtype)
    assert held < 64, (grown, held)
    if FLOODS[dtype] is not None:
        assert grown < FLOODS[dtype], (grown, held)


WIDE = textwrap.dedent(
    """
    import torch
    from fused_input_norm import FusedInputNorm

    def rss_mb():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))

    torch.set_num_threads(1)
    norm = FusedInputNorm.identity()
    norm.resize(torch.zeros(3, 8, 8, dtype=torch.uint8), torch.float32, (5, 7))  # the thread's usual buffers
    wide = torch.randint(0, 256, (3, 2, 4_000_000), dtype=torch.uint8)
    start = rss_mb()
    out = norm.resize(wide, torch.float32, (1, 3_999_999))
    del out
    print(rss_mb() - start)
    """
)


def test_one_very_wide_image_leaves_no_large_buffers_behind():
    """The kernel's per-thread buffers (first-pass rows, transposed columns) are kept between calls only up
    to 16 MiB: a 2 x 4,000,000 image resized across kept 540 MB of them before (its output is 48 MB)."""
    result = subprocess.run([sys.executable, "-c", WIDE], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert float(result.stdout.split()[-1]) < 64
