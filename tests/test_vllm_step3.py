"""vLLM's own Step3-VL image processor (Step3VLImageProcessor, served in its class by vllm_step3): vLLM 0.34.0's
`apply()` with the plugin on (FUSED_INPUT_NORM_VLLM_PROCESSOR=1) against off (=0), each side in its own process
as a server would (`bash scripts/test_vllm.sh` runs it), on a tiny Step3VLForConditionalGeneration directory
(config.json as stepfun-ai/step3 ships it, small; a tokenizer with its image tokens; no weights).

Sizes that make windows and ones that do not: a 12 MP photo (capped at 3024, then 504 windows), 1080p (8
windows), a small odd image (windows of its short side, upscaled to 504 as normalized floats), a tiny one of
extreme aspect (vLLM's black square pad, no windows), a batch of two with enable_patch=False per request.
Compared: prompt_token_ids, mm_placeholders, mm_hashes, every tensor (float32 within 1e-6, the rest exactly).
An in-process test checks what is handed back to vLLM's code, and that a changed vLLM function is not served.
"""

import logging
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import HAS_VLLM, TEXT, assert_same_tensors, dump, one_side, tokenizer, unwrapped
from test_vllm_processor import both_sides, photo

pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

MODULE = "vllm.transformers_utils.processors.step3_vl"
PLACEHOLDER = "<im_patch>"
# (height, width): 12 MP, 1080p, small and odd, tiny and extreme (square-padded).
SIZES = [(3024, 4032), (1080, 1920), (57, 29), (10, 90)]


def write_step3_vl(path: str) -> None:
    """stepfun-ai/step3's layout (Step3VLForConditionalGeneration, vLLM's own step3_vl config class, a
    step3_text model), small: a 728 vision tower of patch 14, the image tokens in the tokenizer."""
    os.makedirs(path, exist_ok=True)
    special = ["<|endoftext|>", "<|begin▁of▁sentence|>", "<im_start>", "<im_end>", "<patch_start>", "<patch_end>"]
    special += ["<patch_newline>", PLACEHOLDER]
    vocab = tokenizer(path, special, "<|begin▁of▁sentence|>", "<|endoftext|>")
    config = {
        "architectures": ["Step3VLForConditionalGeneration"],
        "model_type": "step3_vl",
        "image_token_id": vocab[PLACEHOLDER],
        "projector_bias": False,
        "understand_projector_stride": 2,
        "vision_config": {
            "model_type": "step3_vision_encoder",
            "hidden_size": 32,
            "intermediate_size": 64,
            "output_hidden_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 728,
            "patch_size": 14,
            "hidden_act": "quick_gelu",
            "layer_norm_eps": 1e-5,
        },
        "text_config": TEXT
        | {
            "model_type": "step3_text",
            "architectures": ["Step3TextForCausalLM"],
            "num_attention_groups": 1,
            "max_seq_len": 65536,
            "moe_layers_enum": [],
            "head_dim": 16,
            "share_q_dim": 32,
        },
        "torch_dtype": "bfloat16",
    }
    dump(path, "config.json", config)


def requests():
    """(name, prompt, images, mm_processor_kwargs)."""
    from PIL import Image

    out = [
        (f"{h}x{w}", f"{PLACEHOLDER} describe", [Image.fromarray(photo(h, w, i))], {}) for i, (h, w) in enumerate(SIZES)
    ]
    batch = [Image.fromarray(photo(h, w, 20 + i)) for i, (h, w) in enumerate([(1080, 1920), (300, 700)])]
    out.append(("no-windows", f"{PLACEHOLDER} and {PLACEHOLDER} compare", batch, {"enable_patch": False}))
    return out


def worker(root: str, out_path: str) -> None:
    """One side: every request through apply(); the results to `out_path`."""
    import torch

    torch.save(one_side(os.path.join(root, "step3_vl"), requests()), out_path)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    write_step3_vl(str(root / "step3_vl"))
    return both_sides(root, __file__)


def test_same_outputs_plugin_on_and_off(sides):
    import torch

    on, off = sides
    assert on["served"] and not off["served"]
    assert on["class"] == off["class"] == f"{MODULE}.Step3VLImageProcessor"
    names = [name for name, *_ in requests()]
    for name in names:
        got, expected = on[name], off[name]
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
            assert got[field] == expected[field], f"{name}: {field}"
        assert_same_tensors(name, got["tensors"], expected["tensors"])
    # The sizes make what they are there for: windows (12 MP, 1080p, the small odd one), none (tiny, per request).
    windows = {name: [int(item["num_patches"]) for item in on[name]["tensors"]] for name in names}
    assert windows == {"3024x4032": [30], "1080x1920": [8], "57x29": [2], "10x90": [0], "no-windows": [0, 0]}
    assert all(t.dtype == torch.float32 for item in on["1080x1920"]["tensors"] for k, t in item.items() if "pixel" in k)


def test_log_says_fused_serves_step3(sides):
    on, off = sides
    assert any("serves vLLM's Step3VLImageProcessor" in entry for entry in on["log"]), on["log"]
    assert not any("serves this call" in entry and "Step3VL" in entry for entry in on["log"]), on["log"]
    assert not any("Step3VLImageProcessor" in entry for entry in off["log"]), off["log"]


def test_calls_it_does_not_reproduce_run_vllms_code(monkeypatch):
    """In this process: return_tensors='np' and a subclass go to vLLM's code (equal to it, logged once
    each); a vLLM whose function changed is not served."""
    import importlib

    import numpy as np
    from PIL import Image

    from fused_input_norm import vllm_step3

    module = importlib.import_module(MODULE)
    cls = module.Step3VLImageProcessor
    original = unwrapped(monkeypatch, cls, "__call__")
    messages = []
    log = logging.getLogger("test_vllm_step3")
    monkeypatch.setattr(log, "info", lambda fmt, *args: messages.append(fmt % args))
    try:
        assert "serves vLLM's Step3VLImageProcessor" in vllm_step3.serve(log)
        assert cls.__call__ is not original
        rgb = Image.fromarray(photo(300, 700, 1))

        class Subclass(cls):
            pass

        for processor, tensors in [(cls(), "np"), (Subclass(), None)]:
            got, expected = processor(rgb, return_tensors=tensors), original(processor, rgb, return_tensors=tensors)
            for key in expected:
                assert np.array_equal(np.asarray(got[key]), np.asarray(expected[key])), key
        served, expected = cls()(rgb), original(cls(), rgb)  # served: within 1e-6 of vLLM's own
        assert float((served["patch_pixel_values"] - expected["patch_pixel_values"]).abs().max()) <= 1e-6
        assert served["num_patches"] == expected["num_patches"] == [3]
    finally:
        cls.__call__ = original
    assert any("return_tensors='np'" in m for m in messages), messages
    assert any("Subclass is a subclass of Step3VLImageProcessor" in m for m in messages), messages
    monkeypatch.setattr(module.ImagePatcher, "determine_window_size", lambda self, long, short: 504)
    said = vllm_step3.serve(log)
    assert (
        said
        == "vLLM's Step3VLImageProcessor serves: its ImagePatcher.determine_window_size is not vllm 0.34.0's (the one this reproduces)"
    ), said
    assert cls.__call__ is original


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
