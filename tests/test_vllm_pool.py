"""Issue 46's last two routes for the output pool, through vLLM 0.34.0's own code (`bash scripts/test_vllm.sh`
runs it): what vLLM keeps pointing at a pooled output after apply() returns, and that those bytes never change
while later requests reuse the pool.

- The processor cache (`vllm/multimodal/cache`, MultiModalProcessorOnlyCache: P0's cache when IPC caching is
  off) keeps each processed item, i.e. views of the pooled pixel_values, across requests until it evicts them.
  (The "lru" sender cache keeps only sizes; the "shm" one copies the item into shared memory.)
- The ZMQ path: MsgpackEncoder hands each large tensor out as a memoryview of its storage (tensor_data), and
  the API server sends those frames with copy=False, so ZMQ holds pooled memory until it has sent them. Over
  inproc the receiver's frames are those very bytes, and the engine core's decoder (share_mem=True) makes
  tensors over them, so the pooled memory is pointed at until the receiver drops them.

One process with the plugin on, on the tiny Qwen3-VL-MoE directory: the bytes vLLM kept are compared, after
later requests reused the pool, with a copy taken when vLLM first kept them (that the plugin's outputs are
stock's is tests/test_vllm_families.py's business). A pool that gave the block back too early fails both tests:
the later requests land on the kept block and overwrite it."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import HAS_VLLM, MODELS, RUN, written_sides
from test_vllm_processor import class_name, photo

pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

MODEL = "qwen3_vl_moe"
LATER = 3  # later requests, each a new image of the same size: each reuses a freed block


def worker(root: str, out_path: str) -> None:
    import multiprocessing

    import numpy as np
    import torch
    import zmq
    from vllm.config import DeviceConfig, ModelConfig, VllmConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.cache import (
        LruKeyReplicatedSenderCache,
        MultiModalProcessorOnlyCache,
        ShmObjectStoreReceiverCache,
        ShmObjectStoreSenderCache,
    )
    from vllm.multimodal.inputs import MultiModalKwargsItem
    from vllm.plugins import load_general_plugins
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    from fused_input_norm import output_pool

    torch.set_num_threads(1)
    load_general_plugins()
    path = os.path.join(root, MODEL)
    config = ModelConfig(model=path, tokenizer=path, dtype="float32", seed=0)
    processor = MULTIMODAL_REGISTRY.create_processor(config)
    prompt = f"{MODELS[MODEL][1]} describe"
    results = {"class": class_name(processor.info.get_hf_processor().image_processor)}

    def apply(seed: int, cache=None):
        images = processor.info.parse_mm_data({"image": [photo(480, 640, seed)]})
        return processor(prompt, images, cache=cache)

    def tensors(item) -> dict:
        return {key: elem.data for key, elem in item.items() if isinstance(elem.data, torch.Tensor)}

    def block_of(tensor) -> int:
        return tensor.untyped_storage().data_ptr()

    def later_requests(seed: int) -> list[int]:
        """LATER requests, each output written and dropped: the blocks they landed on."""
        blocks = []
        for i in range(LATER):
            blocks.append(block_of(tensors(apply(seed + i)["mm_kwargs"]["image"][0])["pixel_values"]))
        return blocks

    # The processor cache: the first request's item is kept in the cache (a view of the pooled output).
    cache = MultiModalProcessorOnlyCache(config)
    first = apply(1, cache)
    (mm_hash,) = first["mm_hashes"]["image"]
    del first
    kept = tensors(cache.get_cached_item(mm_hash)[0])
    results["cache_first"] = {key: t.clone() for key, t in kept.items()}
    cached_block = block_of(kept["pixel_values"])
    del kept
    before = output_pool.pool.stats()
    results["cache_later_blocks"] = later_requests(10)
    results["cache_later_stats"] = {key: output_pool.pool.stats()[key] - before[key] for key in ("created", "reused")}
    hit = apply(1, cache)  # a cache hit: vLLM hands out the kept item
    results["cache_hit"] = {key: t.clone() for key, t in tensors(hit["mm_kwargs"]["image"][0]).items()}
    results["cache_after"] = {key: t.clone() for key, t in tensors(cache.get_cached_item(mm_hash)[0]).items()}
    results["cache_block"] = cached_block
    del hit
    cache.clear_cache()  # evicted: the block is the pool's again
    results["cache_block_reused_after_eviction"] = cached_block in later_requests(20)

    # The other two P0 caches keep no pooled memory: "lru" keeps the item's size only (its engine-side twin
    # keeps the decoded copy), "shm" copies the item into a shared-memory ring that the workers read.
    lru = LruKeyReplicatedSenderCache(config)
    sent = apply(60, lru)
    (mm_hash,) = sent["mm_hashes"]["image"]
    lru_block = block_of(tensors(sent["mm_kwargs"]["image"][0])["pixel_values"])
    del sent
    results["lru_block_reused_while_cached"] = lru_block in later_requests(61) and lru.is_cached_item(mm_hash)
    os.environ["VLLM_OBJECT_STORAGE_SHM_BUFFER_NAME"] = f"fused_input_norm_pool_test_{os.getpid()}"
    shm_config = ModelConfig(
        model=path, tokenizer=path, dtype="float32", seed=0, mm_processor_cache_type="shm", mm_processor_cache_gb=1 / 16
    )
    vllm_config = VllmConfig(model_config=shm_config, device_config=DeviceConfig(device="cpu"))
    sender = ShmObjectStoreSenderCache(vllm_config)
    try:
        receiver = ShmObjectStoreReceiverCache(vllm_config, multiprocessing.Lock())
        # No GPU here: the worker's decoder would pin (a copy into pinned memory); it clones (a copy) instead.
        receiver._shm_cache.ser_de.mm_decoder.pin_tensors = False
        results["shm_first"] = {key: t.clone() for key, t in tensors(apply(70)["mm_kwargs"]["image"][0]).items()}
        handle = apply(70, sender)
        (mm_hash,) = handle["mm_hashes"]["image"]
        handle = handle["mm_kwargs"]["image"][0]
        results["shm_handle_keys"] = sorted(handle)
        before = output_pool.pool.stats()["reused"]
        later_requests(71)
        results["shm_later_reused"] = output_pool.pool.stats()["reused"] - before
        results["shm_read"] = {
            key: t.clone() for key, t in tensors(receiver.get_and_update_item(handle, mm_hash)).items()
        }
    finally:
        sender.close()

    # The ZMQ path, as the API server sends an EngineCoreRequest's items and the engine core decodes them.
    for transport in ("inproc", "ipc"):
        address = f"inproc://pool-{transport}" if transport == "inproc" else f"ipc://{root}/pool.ipc"
        context = zmq.Context()
        pull, push = context.socket(zmq.PULL), context.socket(zmq.PUSH)
        pull.bind(address)
        push.connect(address)
        out = apply(30)
        items = list(out["mm_kwargs"]["image"])
        sent = tensors(items[0])
        frames = MsgpackEncoder().encode(items)
        # Which frames are the pooled output's own bytes (zero-copy), not copies.
        pixels = sent["pixel_values"]
        span = (pixels.data_ptr(), pixels.data_ptr() + pixels.nbytes)
        aliasing = [
            isinstance(f, memoryview) and span[0] <= np.frombuffer(f, np.uint8).ctypes.data < span[1] for f in frames
        ]
        results[f"{transport}_aliasing_frames"] = sum(aliasing)
        results[f"{transport}_sent"] = {key: t.clone() for key, t in sent.items()}
        sent_block = block_of(pixels)
        tracker = push.send_multipart(frames, copy=False, track=True)
        del out, items, sent, pixels, frames  # the API server's references are gone once it has sent
        results[f"{transport}_later_blocks"] = later_requests(40)
        results[f"{transport}_block"] = sent_block
        results[f"{transport}_held_until_received"] = not tracker.done
        received = pull.recv_multipart(copy=False)
        decoded = MsgpackDecoder(list[MultiModalKwargsItem]).decode(received)
        got = tensors(decoded[0])
        results[f"{transport}_received"] = {key: t.clone() for key, t in got.items()}
        results[f"{transport}_received_aliases_block"] = block_of(got["pixel_values"]) == sent_block
        del decoded, got, received
        tracker.wait(10)
        results[f"{transport}_block_reused_after"] = sent_block in later_requests(50)
        push.close(linger=0)
        pull.close(linger=0)
        context.term()
    results["pool"] = output_pool.pool.stats()
    torch.save(results, out_path)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    if MODEL not in RUN:
        pytest.skip(f"{MODEL}'s processor is not built here (see tests/test_vllm_families.py)")
    (on,) = written_sides(tmp_path_factory, [MODEL], __file__, switches=("1",))
    assert on["class"] == "fused_input_norm.hf_adapter.FusedHFImageProcessor"
    return on


def assert_equal_tensors(got: dict, expected: dict, where: str) -> None:
    import torch

    assert sorted(got) == sorted(expected) and "pixel_values" in got, where
    for key in got:
        assert got[key].dtype == expected[key].dtype and got[key].shape == expected[key].shape, (where, key)
        assert torch.equal(got[key], expected[key]), f"{where}: {key}: {int((got[key] != expected[key]).sum())} differ"


def test_processor_cache_keeps_its_bytes_while_the_pool_is_reused(sides):
    on = sides
    # The later requests were served from the pool, reusing blocks, never the one the cache keeps.
    assert on["cache_later_stats"]["reused"] >= LATER - 1, on["cache_later_stats"]
    assert on["cache_block"] not in on["cache_later_blocks"]
    # What the cache kept, and what a hit hands out, are still the first request's bytes.
    assert_equal_tensors(on["cache_after"], on["cache_first"], "cached item after later requests")
    assert_equal_tensors(on["cache_hit"], on["cache_first"], "cache hit after later requests")
    # The cache held a pooled block (it comes back once the item is evicted): no leak either.
    assert on["cache_block_reused_after_eviction"]


def test_lru_and_shm_caches_keep_no_pooled_memory(sides):
    on = sides
    # "lru": the block is the pool's again while the cache still lists the item.
    assert on["lru_block_reused_while_cached"]
    # "shm": the request carries a handle; what the worker reads from shared memory after later requests reused
    # the pool is the item's bytes.
    assert on["shm_handle_keys"] == ["address", "monotonic_id", "signature"]
    assert on["shm_later_reused"] >= LATER - 1
    assert_equal_tensors(on["shm_read"], on["shm_first"], "read from the shm cache after later requests")


@pytest.mark.parametrize("transport", ["inproc", "ipc"])
def test_zmq_frames_keep_their_bytes_while_the_pool_is_reused(sides, transport):
    on = sides
    # vLLM's encoder sends the pooled bytes themselves (no copy), and ZMQ holds them until they are received.
    assert on[f"{transport}_aliasing_frames"] >= 1
    assert_equal_tensors(on[f"{transport}_received"], on[f"{transport}_sent"], f"received over {transport}")
    if transport == "inproc":  # the receiver's frames, and the engine core's decoded tensors, are the block itself
        assert on["inproc_held_until_received"] and on["inproc_received_aliases_block"]
        assert on["inproc_block"] not in on["inproc_later_blocks"]
    # Over ipc, ZMQ lets go once it has written the bytes to the socket: later requests may then reuse the block.
    # Once nothing points at it, the block is the pool's again.
    assert on[f"{transport}_block_reused_after"]


if __name__ == "__main__":
    worker(*sys.argv[1:])
