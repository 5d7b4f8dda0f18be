"""The output pool: a block comes back only when no tensor, view or array of it is alive, the bounds hold under
a flood of sizes and from several threads, and the processors' outputs from it are what they were (checked
against copies taken before the pool could reuse anything, and against torch.empty's semantics)."""

import itertools
import os
import random
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
from conftest import QWEN2_VL_CHECKPOINT

from fused_input_norm import FusedImageProcessor, output_pool
from fused_input_norm.output_pool import MIN_BYTES, OutputPool

MIB = 1 << 20


def overlaps(tensors: list) -> bool:
    """Whether any two tensors' byte ranges share memory."""
    spans = sorted((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in tensors)
    return any(end > start for (_, end), (start, _) in itertools.pairwise(spans))


def test_same_semantics_as_torch_empty():
    pool = OutputPool(64 * MIB)
    for shape, dtype in [((1024, 1176), torch.uint8), ((700, 1176), torch.float32), ((3, 512, 700), torch.bfloat16)]:
        out, ref = pool.empty(shape, dtype), torch.empty(shape, dtype=dtype)
        assert (out.shape, out.dtype, out.device, out.stride()) == (ref.shape, ref.dtype, ref.device, ref.stride())
        assert out.is_contiguous() and out.data_ptr() % 64 == 0
        out.fill_(3)  # writable, and every element is its own
        assert int(out.to(torch.int64).sum()) == 3 * out.numel()
    assert pool.stats()["created"] == 3


def test_small_and_device_outputs_are_not_pooled():
    pool = OutputPool(64 * MIB)
    small = pool.empty((MIN_BYTES // 2,), torch.uint8)
    meta = pool.empty((64, MIB), torch.uint8, "meta")  # any device but the CPU: torch.empty's
    assert small.numel() == MIN_BYTES // 2 and meta.device.type == "meta"
    assert pool.stats()["created"] == 0 and pool.stats()["blocks"] == 0


def test_block_is_reused_once_freed():
    pool = OutputPool(64 * MIB)
    first = pool.empty((4 * MIB,), torch.uint8)
    address = first.data_ptr()
    del first
    second = pool.empty((3 * MIB,), torch.uint8)  # a smaller request fits the idle block
    assert second.data_ptr() == address
    assert pool.stats()["reused"] == 1 and pool.stats()["blocks"] == 1


def what_keeps(out: torch.Tensor, keep: str) -> object:
    if keep == "view":
        return out[100:]
    if keep == "split":
        return out.split([1000, 1048])[1]  # as vLLM slices pixel_values per image
    if keep == "numpy":
        return out.numpy()
    return out.untyped_storage()


@pytest.mark.parametrize("keep", ["view", "split", "numpy", "storage"])
def test_block_is_never_reused_while_a_view_lives(keep):
    pool = OutputPool(64 * MIB)
    out = pool.empty((2048, 1176), torch.uint8)
    out.copy_(torch.randint(0, 256, out.shape, dtype=torch.uint8))
    expected = out.clone()
    alive = what_keeps(out, keep)
    address = out.data_ptr()
    del out
    newer = pool.empty((2048, 1176), torch.uint8)
    assert newer.data_ptr() != address
    newer.fill_(0)  # writing the newer output leaves the one still referenced untouched
    if keep == "numpy":
        assert np.array_equal(alive, expected.numpy())
    elif keep == "storage":
        assert torch.equal(torch.tensor([], dtype=torch.uint8).set_(alive).view(expected.shape), expected)
    else:
        assert torch.equal(alive, expected[-alive.shape[0] :])
    newer_address = newer.data_ptr()
    del alive, newer  # both blocks idle now: the next request gets one of them, no third block
    assert pool.empty((2048, 1176), torch.uint8).data_ptr() in (address, newer_address)
    assert pool.stats()["created"] == 2 and pool.stats()["reused"] == 1


def test_bounds_hold_under_a_flood_of_sizes():
    """Random sizes, some outputs kept a while: the pool never owns more than its bounds, no two live outputs
    share memory, and each keeps what was written into it."""
    rng = random.Random(0)
    pool = OutputPool(48 * MIB, max_blocks=4)
    live = []
    for i in range(300):
        numel = rng.randint(MIN_BYTES, 20 * MIB)
        out = pool.empty((numel,), torch.uint8)
        out.fill_(i % 251)
        live.append((i % 251, out))
        rng.shuffle(live)
        del live[rng.randint(0, 3) :]  # keep up to three
        stats = pool.stats()
        assert stats["bytes"] <= 48 * MIB and stats["blocks"] <= 4
        assert not overlaps([t for _, t in live])
        assert all(int(t[0]) == v and int(t[-1]) == v for v, t in live)
    stats = pool.stats()
    assert stats["reused"] > 50 and stats["declined"] > 0 and stats["released"] > 0, stats


def test_threads_share_the_pool_safely():
    pool = OutputPool(32 * MIB, max_blocks=6)
    errors, kept = [], []

    def work(seed: int) -> None:
        rng = random.Random(seed)
        mine = []
        for _ in range(150):
            out = pool.empty((rng.randint(MIN_BYTES, 6 * MIB),), torch.uint8)
            out.fill_(seed)
            mine.append(out)
            if len(mine) > 2:
                mine.pop(rng.randrange(len(mine)))  # freed here, sometimes while others take blocks
            if any(int(t[0]) != seed or int(t[-1]) != seed for t in mine):
                errors.append(seed)
            stats = pool.stats()
            if stats["bytes"] > 32 * MIB or stats["blocks"] > 6:
                errors.append(stats)
        kept.extend(mine)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(1, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert not overlaps(kept)
    assert pool.stats()["reused"] > 0


def test_bad_bounds_and_env_are_refused():
    for bad in (-1, 1.5, "64", True):
        with pytest.raises(ValueError, match="max_bytes"):
            OutputPool(bad)
    with pytest.raises(ValueError, match="max_blocks"):
        OutputPool(MIB, max_blocks=-2)
    env = {**os.environ, output_pool.ENV: "lots"}
    done = subprocess.run(
        [sys.executable, "-c", "import fused_input_norm.output_pool"], env=env, capture_output=True, text=True
    )
    assert done.returncode != 0 and output_pool.ENV in done.stderr and "'lots'" in done.stderr


def test_processor_output_kept_alive_is_untouched_by_the_next_call(monkeypatch):
    """The processor's outputs come from the pool (the next output reuses a freed one's block) and an output
    kept across calls is not overwritten by them."""
    # A pool of its own: blocks that earlier tests' outputs still hold must not decide which block comes next.
    monkeypatch.setattr(output_pool, "pool", OutputPool(64 * MIB))
    config = {**QWEN2_VL_CHECKPOINT, "image_processor_type": "Qwen2VLImageProcessor"}
    processor = FusedImageProcessor.from_preprocessor_config(config, device="cpu")
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (896, 1344, 3), dtype=np.uint8) for _ in range(3)]
    kept = processor(images[0], torch.uint8)["pixel_values"]
    before = kept.clone()
    assert kept.numel() >= MIN_BYTES
    address = processor(images[1], torch.uint8)["pixel_values"].data_ptr()  # freed at once
    again = processor(images[2], torch.uint8)["pixel_values"]
    assert again.data_ptr() == address != kept.data_ptr()
    assert torch.equal(kept, before)
    assert torch.equal(again, processor(images[2], torch.uint8)["pixel_values"].clone())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_blocks_are_private_to_a_forked_child():
    """A forked child's writes into a pooled output stay in the child (private pages, as malloc's)."""
    pool = OutputPool(64 * MIB)
    out = pool.empty((2 * MIB,), torch.uint8)
    out.fill_(5)
    pid = os.fork()
    if pid == 0:  # the child: write (NumPy: no torch thread pool after a fork), leave without pytest's exit
        pages = out.numpy()
        pages[:] = 9
        os._exit(0 if pages[0] == 9 else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert int(out[0]) == 5 and int(out[-1]) == 5


def moved_away(out: torch.Tensor, route: str) -> object:
    """Something that addresses `out`'s block, then `out` (or its storage) moved to other memory, as each
    route does; returns what still points at the block's bytes."""
    if route == "share_memory_":  # the probe: the array holds the tensor, whose storage moves
        kept = out.numpy()
        out.share_memory_()
    elif route == "share_fd":  # torch.multiprocessing's pickling moves the storage the same way
        kept = memoryview(out.numpy())
        out.untyped_storage()._share_fd_cpu_()
    elif route == "share_filename":
        kept = out[7:].numpy()
        out.untyped_storage()._share_filename_cpu_()
    elif route == "set_":
        kept = out.numpy()
        out.set_(torch.zeros(3, dtype=torch.uint8))
    elif route == "view_then_share":  # a view's array, the view dropped, the base's storage moved
        kept = out[5:].numpy()
        out.share_memory_()
    elif route == "dlpack_out":  # a capsule's consumer: a new storage over the block, holding the C++ tensor
        kept = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(out))
        out.share_memory_()
    elif route == "dlpack_in":  # NumPy -> torch: the new tensor's storage holds the array
        kept = torch.from_dlpack(out.numpy())
        out.share_memory_()
    elif route == "numpy_dlpack":
        kept = np.from_dlpack(out)
        out.share_memory_()
    elif route == "dlpack_set_":  # the capsule holds the tensor handed out, which set_ moves to other storage
        kept = np.from_dlpack(out)
        out.set_(torch.zeros(3, dtype=torch.uint8))
    elif route == "view_set_":  # a view's array, the view moved to other storage, then the base dropped
        view = out[5:]
        kept = view.numpy()  # the array holds an alias of its own, over the block's storage
        view.set_(torch.zeros(3, dtype=torch.uint8))
    elif route == "view_dlpack_set_":  # the capsule holds the view itself, which holds its base's storage
        view = out[5:]
        kept = np.from_dlpack(view)
        view.set_(torch.zeros(3, dtype=torch.uint8))
    return kept


def read_back(kept: object) -> np.ndarray:
    if isinstance(kept, torch.Tensor):
        return kept.numpy().reshape(-1)
    return np.asarray(kept).reshape(-1)


ROUTES = ["share_memory_", "share_fd", "share_filename", "set_", "view_then_share", "dlpack_out", "dlpack_in"]
ROUTES += ["numpy_dlpack", "dlpack_set_", "view_set_", "view_dlpack_set_"]


@pytest.mark.parametrize("route", ROUTES)
def test_block_is_never_reused_while_anything_points_at_it(route):
    """Issue 46's probe: `a = out.numpy(); out.share_memory_()` moved the storage to new memory, the pool saw
    the old bytes freed and handed the block to the next call, and `a` read that call's pixels. Each route here
    keeps something over the block while the tensor or its storage moves away: later outputs never land on it
    and the kept bytes never change; once it is gone, the block is reused (no leak)."""
    pool = OutputPool(64 * MIB)
    out = pool.empty((2048, 1176), torch.uint8)
    out.copy_(torch.randint(0, 256, out.shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(1)))
    address = out.data_ptr()
    kept = moved_away(out, route)
    first = read_back(kept).copy()
    assert first.size > MIB
    del out
    for value in (0, 255, 7):  # later outputs of the same size: never the kept block, and writing them
        newer = pool.empty((2048, 1176), torch.uint8)  # leaves the kept bytes as they were
        newer.fill_(value)
        assert newer.data_ptr() != address
        assert np.array_equal(read_back(kept), first)
        del newer
    del kept
    again = pool.empty((2048, 1176), torch.uint8)
    assert again.data_ptr() == address or pool.stats()["blocks"] == 2  # the block is the pool's again


def test_pickled_outputs_keep_their_bytes():
    """pickle copies; torch.multiprocessing's reduction (what a spawned worker's queue uses) moves the storage
    to shared memory in place, the share_fd route above: the bytes another process reads are the call's."""
    import pickle
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # registers torch's reductions with ForkingPickler

    pool = OutputPool(64 * MIB)
    out = pool.empty((2048, 1176), torch.uint8)
    out.fill_(42)
    kept = out.numpy()
    plain = pickle.loads(pickle.dumps(out))
    shared = ForkingPickler.dumps(out)  # share_memory_ under the hood
    del out
    newer = pool.empty((2048, 1176), torch.uint8)
    newer.fill_(0)
    assert int(plain.sum()) == 42 * plain.numel() and bool((kept == 42).all())
    assert bool((pickle.loads(shared) == 42).all())


@pytest.mark.xfail(strict=True, reason="the pool's one known hole, in its module docstring: not trackable from Python")
def test_known_hole_dlpack_of_an_alias_then_set_():
    """A DLPack export of an alias that is not a view (detach(), .data, a tensor set_ onto the storage) holds
    that alias, not the storage; set_ on the alias then leaves nothing holding the block's storage, and once the
    output is dropped the block is reused under the array. (Stock torch frees that memory too.) Strict: should
    the pool come to hold the block here, this test fails and the docstring's note is to go."""
    pool = OutputPool(64 * MIB)
    out = pool.empty((2048, 1176), torch.uint8)
    out.fill_(9)
    alias = out.detach()
    kept = np.from_dlpack(alias)
    alias.set_(torch.zeros(3, dtype=torch.uint8))
    del out
    newer = pool.empty((2048, 1176), torch.uint8)
    newer.fill_(0)
    assert bool((kept == 9).all())
