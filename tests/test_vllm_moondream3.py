"""vLLM's own Moondream 3 processor (Moondream3Processor.preprocess_image, served in its class by
vllm_moondream3): vLLM 0.34.0's `apply()` with the plugin on (FUSED_INPUT_NORM_VLLM_PROCESSOR=1) against off
(=0), each side in one process as a server would (`bash scripts/test_vllm.sh` runs it), for both architectures
vLLM maps to it: a tiny HfMoondream directory (config.json as moondream/moondream3-preview ships it: vLLM's own
moondream3 config class reads its nested "config"; small) and a tiny Moondream3ForCausalLM one, each with a
tokenizer holding Moondream's special tokens at ids 0-3; no weights.

Sizes: 1080p (a 2 x 4 grid of overlapping crops), a small odd image (one crop, upscaled), a gray 12 MP photo
with max_crops and overlap_margin per request (which transformers drops, on both sides). Compared: prompt_token_ids, mm_placeholders, mm_hashes, every
tensor (pixel_values exactly: vLLM's bfloat16 values, cast to the model's float32 by apply(); tilings exactly). An in-process test checks what is handed back to
vLLM's code, and that a changed vLLM function is not served.
"""

import logging
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import HAS_VLLM, assert_same_tensors, dump, outputs, recorded_log, tokenizer, unwrapped
from test_vllm_processor import both_sides, photo

pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

MODULE = "vllm.transformers_utils.processors.moondream3"
ARCHITECTURES = ("HfMoondream", "Moondream3ForCausalLM")
SPECIAL = ["<|endoftext|>", "<|md_reserved_0|>", "<|md_reserved_1|>", "<|md_reserved_2|>", "<image>"]
PROMPT = "<|endoftext|><image><|md_reserved_0|>query<|md_reserved_1|>describe<|md_reserved_2|>"


def write_moondream3(path: str, architecture: str) -> None:
    """moondream/moondream3-preview's config.json layout (architectures, model_type moondream3, the model's
    own settings nested under "config", its remote-code auto_map), small; Moondream's special tokens."""
    os.makedirs(path, exist_ok=True)
    tokenizer(path, SPECIAL, "<|endoftext|>", "<|endoftext|>", special_first=True)
    text = {"dim": 32, "ff_dim": 64, "n_layers": 1, "vocab_size": 64, "max_context": 4096, "n_heads": 2}
    text |= {"n_kv_heads": 1, "prefix_attn": 730, "group_size": None}
    text["moe"] = {"num_experts": 2, "start_layer": 4, "experts_per_token": 1, "expert_inner_dim": 16}
    vision = {"enc_dim": 32, "enc_patch_size": 14, "enc_n_layers": 1, "enc_ff_dim": 64, "enc_n_heads": 2}
    vision |= {"proj_out_dim": 32, "crop_size": 378, "in_channels": 3, "max_crops": 12, "overlap_margin": 4}
    vision |= {"proj_inner_dim": 64}
    config = {
        "architectures": [architecture],
        "auto_map": {"AutoConfig": "hf_moondream.HfConfig", "AutoModelForCausalLM": "hf_moondream.HfMoondream"},
        "config": {
            "text": text,
            "vision": vision,
            "region": None,
            "tokenizer": {"bos_id": 0, "eos_id": 0, "answer_id": 3, "thinking_id": None, "templates": None},
        },
        "model_type": "moondream3",
        "torch_dtype": "bfloat16",
    }
    dump(path, "config.json", config)


def requests():
    """(name, image, mm_processor_kwargs): one image each (vLLM allows Moondream 3 one per prompt)."""
    from PIL import Image

    gray = Image.fromarray(photo(3024, 4032, 3)).convert("L")
    return [
        ("1080x1920", Image.fromarray(photo(1080, 1920, 1)), {}),
        ("57x29", Image.fromarray(photo(57, 29, 2)), {}),
        ("gray-12MP-kwargs", gray, {"max_crops": 4, "overlap_margin": 2}),
    ]


def worker(root: str, out_path: str) -> None:
    """One side: every request through apply() for each architecture; the results to `out_path`."""
    import torch
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.plugins import load_general_plugins

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO)  # as a server shows vLLM's INFO lines
    load_general_plugins()
    module = sys.modules[MODULE] if MODULE in sys.modules else __import__(MODULE, fromlist=["_"])
    results = {"served": hasattr(module.Moondream3Processor.preprocess_image, "fused_input_norm_wrapped")}
    for architecture in ARCHITECTURES:
        path = os.path.join(root, architecture)
        config = ModelConfig(model=path, tokenizer=path, dtype="float32", seed=0, trust_remote_code=False)
        processor = MULTIMODAL_REGISTRY.create_processor(config)
        for name, image, kwargs in requests():
            out = processor(PROMPT, processor.info.parse_mm_data({"image": [image]}), hf_processor_mm_kwargs=kwargs)
            results[f"{architecture}-{name}"] = outputs(out, "image")
            # the tiling is a pair of ints (not a tensor): compared as it is
            results[f"{architecture}-{name}"]["tilings"] = [item["tilings"].data for item in out["mm_kwargs"]["image"]]
    torch.save(results, out_path)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    for architecture in ARCHITECTURES:
        write_moondream3(str(root / architecture), architecture)
    return both_sides(root, __file__)


def test_same_outputs_plugin_on_and_off(sides):
    import torch

    on, off = sides
    assert on["served"] and not off["served"]
    for architecture in ARCHITECTURES:
        for name, *_ in requests():
            key = f"{architecture}-{name}"
            got, expected = on[key], off[key]
            for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes", "tilings"):
                assert got[field] == expected[field], f"{key}: {field}"
            assert_same_tensors(key, got["tensors"], expected["tensors"])
            # bit for bit: vLLM's bfloat16 values, cast to the model's dtype (float32 here) by apply()
            assert torch.equal(got["tensors"][0]["pixel_values"], expected["tensors"][0]["pixel_values"]), key
    # The sizes make what they are there for: a grid of crops, one crop. The per-request max_crops and
    # overlap_margin reach no processor: transformers' _merge_kwargs drops them ("not a valid argument"), plugin
    # on or off, so that request gets the default grid (its hash still differs: vLLM hashes the kwargs).
    tilings = {name: on[f"HfMoondream-{name}"]["tilings"] for name, *_ in requests()}
    assert tilings == {"1080x1920": [(2, 4)], "57x29": [(1, 1)], "gray-12MP-kwargs": [(2, 4)]}, tilings


def test_log_says_fused_serves_moondream3(sides):
    on, off = sides
    assert any("serves vLLM's Moondream3Processor" in entry for entry in on["log"]), on["log"]
    assert not any("serves this call" in entry for entry in on["log"]), on["log"]
    assert not any("Moondream3Processor" in entry for entry in off["log"]), off["log"]


def test_calls_it_does_not_reproduce_run_vllms_code(monkeypatch):
    """In this process: an RGBA image, return_tensors='np', a crop_size that is not a multiple of patch_size
    and a subclass go to vLLM's code (equal to it, logged once each); a served call is vLLM's bit for bit; a
    vLLM whose function changed is not served."""
    import importlib

    import numpy as np
    import torch
    from PIL import Image

    from fused_input_norm import vllm_moondream3

    module = importlib.import_module(MODULE)
    cls = module.Moondream3Processor
    original = unwrapped(monkeypatch, cls, "preprocess_image")
    log, messages = recorded_log(monkeypatch, "test_vllm_moondream3")

    class Subclass(cls):
        pass

    upstream, subclass = cls.__new__(cls), Subclass.__new__(Subclass)  # no tokenizer: preprocess_image needs none
    rgb = Image.fromarray(photo(400, 700, 1))
    try:
        assert "serves vLLM's Moondream3Processor" in vllm_moondream3.serve(log)
        assert cls.preprocess_image is not original
        handed = [
            (upstream, (rgb.convert("RGBA"),), {}),
            (upstream, (rgb,), {"return_tensors": "np"}),
            (upstream, (rgb,), {"crop_size": 380}),
            (subclass, (rgb,), {}),
        ]
        for processor, args, kwargs in handed:
            (got, got_tiling), (expected, tiling) = (
                processor.preprocess_image(*args, **kwargs),
                original(processor, *args, **kwargs),
            )
            same = np.array_equal(got, expected) if isinstance(got, np.ndarray) else torch.equal(got, expected)
            assert got_tiling == tiling and same, (args, kwargs)
        (got, got_tiling), (expected, tiling) = upstream.preprocess_image(rgb), original(upstream, rgb)
        assert got_tiling == tiling == (2, 4) and torch.equal(got, expected)
    finally:
        cls.preprocess_image = original
    for said in ("a RGBA image", "return_tensors='np'", "not a multiple of patch_size", "Subclass is a subclass"):
        assert sum(said in m for m in messages) == 1, (said, messages)
    monkeypatch.setattr(module, "select_tiling", lambda height, width, crop_size, max_crops: (1, 1))
    said = vllm_moondream3.serve(log)
    assert said == (
        "vLLM's Moondream3Processor serves: its select_tiling is not vllm 0.34.0's (the one this reproduces)"
    ), said
    assert cls.preprocess_image is original


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
