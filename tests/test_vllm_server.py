"""The request as vLLM's OpenAI server sees it (a base64 data URL through vLLM's MediaConnector, then the
processor's apply()), against the real vllm package (.venv-vllm), plugin on vs off in separate processes:
the same outputs and hashes as transformers' processor; outputs kept alive across requests are never
overwritten by the output pool's recycling; the plugin's Pillow block cache is set, bounded, logged, and used
(Pillow's own counters), and the user's PILLOW_BLOCKS_MAX wins; the server benchmark runs (quick mode)."""

import base64
import importlib.util
import io
import json
import os
import re
import subprocess
import sys

import pytest
from test_vllm_processor import IMAGE, photo, write_model

HAS_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = pytest.mark.skipif(not HAS_VLLM, reason="needs vllm (.venv-vllm: `bash scripts/test_vllm.sh`)")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (height, width, seed, max_pixels kwarg or None): every output over the pool's 1 MiB threshold.
REQUESTS = [(1200, 1600, 0, None), (900, 1200, 1, None), (1200, 1600, 2, 1003520), (1080, 1920, 3, None)]


def data_url(height: int, width: int, seed: int) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(photo(height, width, seed)).save(buffer, "JPEG", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


def worker(model_dir: str, out_path: str) -> None:
    """One side: each request through MediaConnector and apply(); the first three outputs kept alive, the last
    one made after the second was dropped."""
    import logging

    import torch
    from PIL import Image
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.media import MediaConnector
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs
    from vllm.plugins import load_general_plugins

    from fused_input_norm import output_pool

    torch.set_num_threads(1)
    log = io.StringIO()
    logging.basicConfig(level=logging.INFO)  # as a server shows vLLM's INFO lines (a bare import shows none)
    logging.getLogger("vllm.plugins.fused_input_norm").addHandler(logging.StreamHandler(log))
    load_general_plugins()
    config = ModelConfig(model=model_dir, tokenizer=model_dir, dtype="bfloat16", mm_device_do_normalize=True)
    processor = MULTIMODAL_REGISTRY.create_processor(config)
    prompt = processor.info.get_tokenizer().encode(IMAGE + " describe")
    connector = MediaConnector()
    Image.core.reset_stats()
    kept, results = [], {"at_return": [], "hashes": []}
    for i, (height, width, seed, max_pixels) in enumerate(REQUESTS):
        item = connector.fetch_image(data_url(height, width, seed))
        kwargs = {} if max_pixels is None else {"max_pixels": max_pixels}
        inputs = ProcessorInputs(prompt, processor.info.parse_mm_data({"image": [item]}), None, kwargs)
        out = processor.apply(inputs, TimingContext(enabled=False))
        pixels = out["mm_kwargs"]["image"][0]["pixel_values"].data
        results["at_return"].append(pixels.clone())
        results["hashes"].append(list(out["mm_hashes"]["image"]))
        kept.append(pixels)
        del item, inputs, out, pixels
        if i == 1:
            kept[1] = None  # dropped: its block may serve the last request
    results["at_end"] = [None if t is None else t.clone() for t in kept]
    results["pillow"] = {"blocks_max": Image.core.get_blocks_max(), **Image.core.get_stats()}
    results["pool"] = output_pool.pool.stats()
    results["log"] = log.getvalue()
    torch.save(results, out_path)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """(plugin on, plugin off): each side's results, from a process of its own."""
    import torch

    root = tmp_path_factory.mktemp("server")
    write_model(str(root / "qwen2_vl"), "qwen2_vl")
    results = []
    for switch in ("1", "0"):
        out = root / f"side{switch}.pt"
        env = {**os.environ, "FUSED_INPUT_NORM_VLLM_PROCESSOR": switch, "OMP_NUM_THREADS": "1"}
        env.pop("PILLOW_BLOCKS_MAX", None)
        run = subprocess.run(
            [sys.executable, __file__, str(root / "qwen2_vl"), str(out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            cwd=os.path.dirname(__file__),
        )
        assert run.returncode == 0, run.stderr[-4000:]
        results.append(torch.load(out, weights_only=False))
    return results


def test_same_outputs_and_hashes_as_transformers(sides):
    import torch

    on, off = sides
    assert len(on["at_return"]) == len(REQUESTS)
    for i, (mine, theirs) in enumerate(zip(on["at_return"], off["at_return"], strict=True)):
        assert mine.dtype == theirs.dtype == torch.uint8 and torch.equal(mine, theirs), f"request {i}"
    assert on["hashes"] == off["hashes"]  # vLLM hashes the encoded bytes, whoever processes them


def test_outputs_kept_alive_are_untouched_while_blocks_are_recycled(sides):
    import torch

    on, _ = sides
    for i, (end, at_return) in enumerate(zip(on["at_end"], on["at_return"], strict=True)):
        if end is not None:
            assert torch.equal(end, at_return), f"request {i}'s output changed after later requests"
    pool = on["pool"]
    assert pool["reused"] >= 1, pool  # the dropped output's block served the last request
    assert pool["blocks"] <= pool["max_blocks"] and pool["bytes"] <= pool["max_bytes"], pool


def test_plugin_keeps_freed_pillow_blocks(sides):
    from fused_input_norm.vllm_plugin import PILLOW_BLOCK_SIZE, PILLOW_BLOCKS_MAX

    on, off = sides
    assert on["pillow"]["blocks_max"] == PILLOW_BLOCKS_MAX and off["pillow"]["blocks_max"] == 0
    # Pillow's own counters: decodes after the first took a freed block with the plugin, never without it.
    assert on["pillow"]["reused_blocks"] >= len(REQUESTS) - 1, on["pillow"]
    assert off["pillow"]["reused_blocks"] == 0, off["pillow"]
    bound = PILLOW_BLOCKS_MAX * PILLOW_BLOCK_SIZE >> 20
    assert f"keeps up to {PILLOW_BLOCKS_MAX} freed image blocks" in on["log"] and f"= {bound} MiB" in on["log"]


@pytest.mark.parametrize(("env", "expected"), [({"PILLOW_BLOCKS_MAX": "5"}, 5), ({"PILLOW_BLOCKS_MAX": "0"}, 0)])
def test_users_pillow_blocks_max_wins(env, expected):
    code = (
        "import io, json, logging\n"
        "from PIL import Image\n"
        "from fused_input_norm import vllm_plugin\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "log = io.StringIO()\n"
        "logging.getLogger('vllm.plugins.fused_input_norm').addHandler(logging.StreamHandler(log))\n"
        "vllm_plugin.register_image_processor()\n"
        "print(json.dumps({'blocks_max': Image.core.get_blocks_max(), 'log': log.getvalue()}))\n"
    )
    full_env = {**os.environ, "FUSED_INPUT_NORM_VLLM_PROCESSOR": "1", **env}
    run = subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    result = json.loads(run.stdout.splitlines()[-1])
    assert result["blocks_max"] == expected
    assert "freed image blocks" not in result["log"] and "block size raised" in result["log"]


def test_server_benchmark_quick_mode():
    """The benchmark's plumbing (no timing asserted): both tables, every phase, for each max_pixels."""
    script = os.path.join(ROOT, "scripts", "bench_vllm_server.py")
    run = subprocess.run([sys.executable, script, "--quick"], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    number = r"\d+\.\d+"
    pair = rf"{number} / {number}"
    row = rf"\| 320x240 jpeg \| (12845056|1003520) \| {pair} \| {pair} \| {pair} \| {pair} \| {number}x \| {number} \| {number}x \|"
    assert "Steady state" in run.stdout and "First request of a fresh process" in run.stdout
    assert len(re.findall(row, run.stdout)) == 3, run.stdout  # two steady rows, one first-request row


if __name__ == "__main__":
    worker(*sys.argv[1:])
