"""Recycled CPU memory for the processors' outputs: a bounded pool of page-aligned blocks.

A fresh large CPU tensor is fresh memory: glibc maps anything over 32 MiB anew (and smaller sizes too
until its mmap threshold adapts), and every 4 KiB page of it faults on first touch, zeroed by the kernel.
For a 12 MP photo's 73 MB of uint8 patch rows that is ~18,000 faults per request, a larger share of the
request than the resize itself. The pool keeps a few blocks (anonymous mmaps) whose pages were touched
before, and hands each out as a tensor over the block (`torch.frombuffer`): the block comes back to the
pool only when that tensor's storage is freed, i.e. when the last tensor or view sharing it (a slice
vLLM keeps until the request is sent, a NumPy array over it) is gone, and the tensor handed out is gone
too (so that moving either to new memory, share_memory_ or set_, leaves an array over the old bytes intact).

What vLLM keeps pointing at an output (tests/test_vllm_pool.py): its processor cache keeps views of it
until it evicts the item, and its ZMQ path sends memoryviews of it with copy=False, held (through the
array they come from, which holds the storage) until ZMQ has sent them, or over inproc until the receiver
drops the frames and the tensors decoded over them. Each holds the storage, so the block stays out.

The one known hole: a DLPack export (or any holder of a raw pointer that keeps a tensor, not the storage)
of an alias that is not a view (`detach()`, `.data`, a tensor `set_` onto the storage), followed by `set_`
on that alias: nothing then holds the block's storage, and once the output and its views are gone the
block is handed out again under the export (tests/test_output_pool.py's strict xfail). Views are safe: a
view holds its base, and the base the storage, whatever set_ does to the view; `numpy()` arrays are safe:
each holds an alias of its own. Stock torch frees that memory in the same case; the pool reuses it at once.

Bounds (FUSED_INPUT_NORM_OUTPUT_POOL_MB, default 256; 0 turns the pool off): the blocks the pool owns,
handed out or idle, never exceed that many bytes nor MAX_BLOCKS blocks, so the memory it can hold at
most is that bound. A request the pool cannot serve within it (too large, or every block handed out)
gets an ordinary `torch.empty`; idle blocks that do not fit a request are released, least recently
returned first, to make room for one that does. Outputs under MIN_BYTES, and outputs on other devices,
are `torch.empty`'s (malloc's heap already reuses small sizes; torch's caching allocator serves CUDA).

Threads: handing out takes a lock; a block comes back through a deque append (atomic in CPython), from
whichever thread frees the tensor, even from inside the garbage collector while the lock is held.
"""

import collections
import mmap
import os
import threading
import weakref

import torch

ENV = "FUSED_INPUT_NORM_OUTPUT_POOL_MB"
DEFAULT_MB = 256  # three 12 MP uint8 outputs (73 MB each) in flight, or one float32 1080p x 10
MAX_BLOCKS = 8
MIN_BYTES = 1 << 20
# Private anonymous memory, as malloc's: Python's default for mmap(-1) is MAP_SHARED, whose pages are shmem
# (slower to fault: 33 ms against 25 for 73 MB here) and would be shared with a forked child.
PRIVATE = {"flags": mmap.MAP_PRIVATE} if hasattr(mmap, "MAP_PRIVATE") else {}


def block_size(nbytes: int) -> int:
    """The size of the block made for `nbytes`: rounded up to a quarter step between powers of two (at most
    25% over, so that the next request of a similar size fits it too), then to whole pages. Pages never
    touched cost no memory, only address space."""
    step = max(1 << (nbytes.bit_length() - 3), mmap.PAGESIZE)
    return -(-nbytes // step) * step


class _Lease:
    """One handed-out block: back to the pool on the second release (the storage's and the tensor's)."""

    def __init__(self, returned: collections.deque, block: mmap.mmap) -> None:
        self._returned = returned
        self._block = block
        self._holders = collections.deque((0, 1))  # popped once per release; deque.pop is atomic in CPython

    def release(self) -> None:
        self._holders.pop()
        if not self._holders:
            self._returned.append(self._block)


class OutputPool:
    """At most `max_bytes` in at most `max_blocks` blocks, owned whether handed out or idle."""

    def __init__(self, max_bytes: int, max_blocks: int = MAX_BLOCKS) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"OutputPool: max_bytes must be an int >= 0, got {max_bytes!r}")
        if isinstance(max_blocks, bool) or not isinstance(max_blocks, int) or max_blocks < 0:
            raise ValueError(f"OutputPool: max_blocks must be an int >= 0, got {max_blocks!r}")
        self.max_bytes = max_bytes
        self.max_blocks = max_blocks
        self._lock = threading.Lock()
        self._idle: list[mmap.mmap] = []  # least recently returned first
        self._returned: collections.deque = collections.deque()  # appended by finalizers, without the lock
        self._owned_bytes = 0
        self._owned_blocks = 0
        self._counts = {"reused": 0, "created": 0, "released": 0, "declined": 0}

    def empty(self, shape: tuple, dtype: torch.dtype, device: torch.device | str = "cpu") -> torch.Tensor:
        """An uninitialized tensor, as `torch.empty(shape, dtype=dtype, device=device)`; on the CPU, from a
        pooled block when one fits within the bounds."""
        device = torch.device(device)
        nbytes = torch.Size(shape).numel() * dtype.itemsize
        if device.type != "cpu" or nbytes < MIN_BYTES or nbytes > self.max_bytes:
            return torch.empty(shape, dtype=dtype, device=device)
        block = self._take(nbytes)
        if block is None:
            return torch.empty(shape, dtype=dtype, device=device)
        out = torch.frombuffer(memoryview(block), dtype=torch.uint8, count=nbytes).view(dtype).view(shape)
        # The block comes back when both the storage and the tensor handed out are gone, not merely when the
        # storage lets go of the block's bytes: share_memory_ / _share_fd_cpu_ (torch.multiprocessing's
        # pickling) move a live storage to new memory and free the old bytes while a NumPy array, memoryview
        # or DLPack capsule made before still points at the block. Those hold the storage (an array holds an
        # alias of its own; a capsule holds the tensor, a view of the frombuffer tensor, which holds the
        # storage even after set_), so the storage's death is the sign that they are gone. Waiting for the
        # tensor too costs nothing and covers a holder of the tensor alone. (torch.utils.swap_tensors refuses
        # a tensor with a weakref, so a pooled output cannot be swapped away from an array over it.)
        lease = _Lease(self._returned, block)
        weakref.finalize(out.untyped_storage(), lease.release).atexit = False
        weakref.finalize(out, lease.release).atexit = False
        return out

    def _take(self, nbytes: int) -> mmap.mmap | None:
        with self._lock:
            while self._returned:
                self._idle.append(self._returned.popleft())
            fits = [i for i, block in enumerate(self._idle) if len(block) >= nbytes]
            if fits:
                self._counts["reused"] += 1
                return self._idle.pop(min(fits, key=lambda i: len(self._idle[i])))
            size = block_size(nbytes)
            while self._idle and not self._room_for(size):
                self._release(self._idle.pop(0))
            if not self._room_for(size):
                self._counts["declined"] += 1
                return None
            self._owned_bytes += size
            self._owned_blocks += 1
            self._counts["created"] += 1
            return mmap.mmap(-1, size, **PRIVATE)

    def _room_for(self, size: int) -> bool:
        return self._owned_bytes + size <= self.max_bytes and self._owned_blocks < self.max_blocks

    def _release(self, block: mmap.mmap) -> None:
        self._owned_bytes -= len(block)
        self._owned_blocks -= 1
        self._counts["released"] += 1
        block.close()  # idle: no view of it is alive, so its pages go back to the system now

    def stats(self) -> dict:
        """What the pool owns now (blocks, bytes, of which idle), its bounds, and its counts so far."""
        with self._lock:
            while self._returned:
                self._idle.append(self._returned.popleft())
            return {
                "blocks": self._owned_blocks,
                "bytes": self._owned_bytes,
                "idle_blocks": len(self._idle),
                "max_blocks": self.max_blocks,
                "max_bytes": self.max_bytes,
                **self._counts,
            }

    def _after_fork(self) -> None:
        self._lock = threading.Lock()  # another thread may have held it when the process forked


def _max_bytes_from_env() -> int:
    value = os.environ.get(ENV)
    if value is None:
        return DEFAULT_MB << 20
    try:
        megabytes = int(value)
    except ValueError:
        megabytes = -1
    if megabytes < 0:
        raise ValueError(f"fused_input_norm: {ENV} must be a whole number of MiB >= 0 (0: no pool), got {value!r}")
    return megabytes << 20


pool = OutputPool(_max_bytes_from_env())
os.register_at_fork(after_in_child=pool._after_fork)


def empty(shape: tuple, dtype: torch.dtype, device: torch.device | str = "cpu") -> torch.Tensor:
    """`torch.empty(shape, dtype=dtype, device=device)`, from the process's output pool on the CPU."""
    return pool.empty(shape, dtype, device)
