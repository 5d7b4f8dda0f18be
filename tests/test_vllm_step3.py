"""vLLM's own Step3-VL image processor (Step3VLImageProcessor, served in its class by vllm_step3): the tiny
Step3VLForConditionalGeneration directory (config.json as stepfun-ai/step3 ships it, small; a tokenizer with its
image tokens; no weights) and the requests that tests/test_vllm_own.py runs through vLLM 0.34.0's `apply()` with
the plugin on against off, in the processes it shares with vLLM's other own processors.

Sizes that make windows and ones that do not: a 12 MP photo (capped at 3024, then 504 windows), 1080p (8
windows), a small odd image (windows of its short side, upscaled to 504 as normalized floats), a tiny one of
extreme aspect (vLLM's black square pad, no windows), a batch of two with enable_patch=False per request.
Compared: prompt_token_ids, mm_placeholders, mm_hashes, every tensor (float32 within 1e-6, the rest exactly).
An in-process test checks what is handed back to vLLM's code, and that a changed vLLM function is not served.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import HAS_VLLM, TEXT, dump, recorded_log, tokenizer, unwrapped
from test_vllm_processor import photo

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
    log, messages = recorded_log(monkeypatch, "test_vllm_step3")
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
