"""Issue 46's table through vLLM 0.34.0's own apply(), plugin on (FUSED_INPUT_NORM_VLLM_PROCESSOR=1) against off
(=0), each side one process for all its cases (`bash scripts/test_vllm.sh` runs it): hostile per-request
mm_processor_kwargs, as an API user sends them, on the tiny model directories tests/test_vllm_families.py
writes. Every case must have stock's outcome: the same tokens, placeholders, hashes and tensors where stock
serves, the same exception class and message where it refuses. The standalone table over every kwarg and
value (and the expensive flood) is tests/test_hostile_kwargs.py; the cases here are the ones the probe found
different, plus a few of each kind, one 480x640 image each."""

import math
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import HAS_VLLM, MODELS, RUN, assert_same_tensors, outputs, written_sides
from test_vllm_processor import class_name, photo

pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

CASES = {
    "qwen3_vl_moe": [
        *({"min_pixels": v} for v in (0, -1, 2.5, "7", True, None, math.nan)),
        {"max_pixels": 1, "min_pixels": 1},
        {"size": {"shortest_edge": 1003520, "longest_edge": 3136}},  # swapped edges
        {"size": None},
        {"size": {"longest_edge": {"longest_edge": 1024}}},
    ],
    "glm4v": [{"size": None}, {"size": {"shortest_edge": 4096, "longest_edge": 1024}}, {"patch_size": 0}],
    "idefics3": [
        {"size": None},
        {"size": {"longest_edge": 1}},
        {"do_image_splitting": 0},
        {"max_image_size": {"longest_edge": 0}},
        {"max_image_size": None},
    ],
    "llama4": [{"max_patches": [16]}, {"max_patches": 0}, {"max_patches": 2.5}, {"resize_to_max_canvas": "yes"}],
    "gemma3": [{"size": {"height": 1, "width": 1}}, {"do_pan_and_scan": 0}, {"pan_and_scan_max_num_crops": None}],
}
MODELS_RUN = [model for model in CASES if model in RUN]


def worker(root: str, out_path: str) -> None:
    """One side: every model's cases, each one's outcome and time."""
    import torch
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.plugins import load_general_plugins

    torch.set_num_threads(1)
    load_general_plugins()
    results = {}
    for model in MODELS_RUN:
        path = os.path.join(root, model)
        config = ModelConfig(model=path, tokenizer=path, dtype="float32", seed=0)
        processor = MULTIMODAL_REGISTRY.create_processor(config)
        results[model + "-class"] = class_name(processor.info.get_hf_processor().image_processor)
        for i, kwargs in enumerate(CASES[model]):
            images = processor.info.parse_mm_data({"image": [photo(480, 640, i)]})
            start = time.perf_counter()
            try:
                out = processor(f"{MODELS[model][1]} describe", images, hf_processor_mm_kwargs=dict(kwargs))
                result = {"served": outputs(out, "image")}
            except Exception as e:  # the outcome compared: its class and message
                result = {"refused": (type(e).__name__, str(e))}
            results[f"{model}-{i}"] = {**result, "s": time.perf_counter() - start}
    torch.save(results, out_path)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    return written_sides(tmp_path_factory, MODELS_RUN, __file__)


@pytest.mark.parametrize("model", list(CASES))
def test_hostile_kwargs_have_stock_outcome_in_vllm(request, model):
    if model not in MODELS_RUN:
        pytest.skip(f"{model}'s processor is not built here (see tests/test_vllm_families.py)")
    on, off = request.getfixturevalue("sides")
    adapter = "fused_input_norm.hf_adapter.FusedHFImageProcessor"
    assert on[model + "-class"] == adapter and off[model + "-class"] != adapter
    for i, kwargs in enumerate(CASES[model]):
        got, expected = on[f"{model}-{i}"], off[f"{model}-{i}"]
        print(
            f"{model} {kwargs}: {'served' if 'served' in expected else expected['refused'][0]}, "
            f"{got['s']:.3f} s on, {expected['s']:.3f} s off"
        )
        assert set(got) == set(expected), (kwargs, got.get("refused"), expected.get("refused"))
        if "refused" in expected:
            assert got["refused"] == expected["refused"], kwargs
            continue
        a, b = got["served"], expected["served"]
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
            assert a[field] == b[field], (kwargs, field)
        assert_same_tensors(str(kwargs), a["tensors"], b["tensors"])


if __name__ == "__main__":
    worker(*sys.argv[1:])
