"""vLLM's own OpenVLA image processor (OpenVLAImageProcessor, served in its class by vllm_openvla): vLLM 0.34.0's
`apply()` with the plugin on (FUSED_INPUT_NORM_VLLM_PROCESSOR=1) against off (=0), each side in its own process
as a server would (`bash scripts/test_vllm.sh` runs it), on a tiny OpenVLAForActionPrediction directory
(config.json as openvla/openvla-7b ships it, its null act-layer overrides included, the Llama small; a tokenizer
with a BOS, after which vLLM inserts the image tokens; no weights).

One image per prompt (OpenVLA takes one): a 12 MP photo, 1080p, a small odd one, an extreme one, one already
224 x 224 (Pillow copies it), a grey and an RGBA PIL image, and a uint8 array (vLLM's own to_rgb_image makes each
RGB, on both sides). Compared: prompt_token_ids, mm_placeholders, mm_hashes and the 6-channel pixel_values
(DINOv2's then SigLIP's normalization: float32, bit for bit here, within 1e-6 asked). An in-process test checks
what is handed back to vLLM's code, and that a changed vLLM function is not served.
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

MODULE = "vllm.transformers_utils.processors.openvla"
# (height, width): 12 MP, 1080p, small and odd, extreme, and the tower's own 224 x 224.
SIZES = [(3024, 4032), (1080, 1920), (57, 29), (10, 900), (224, 224)]


def write_openvla(path: str) -> None:
    """openvla/openvla-7b's config.json (vLLM's own OpenVLAConfig reads it: no remote code), the Llama small."""
    os.makedirs(path, exist_ok=True)
    vocab = tokenizer(path, ["<s>", "</s>", "<PAD>"], "<s>", "</s>", special_first=True)
    config = {
        "architectures": ["OpenVLAForActionPrediction"],
        "auto_map": {
            "AutoConfig": "configuration_prismatic.OpenVLAConfig",
            "AutoModelForVision2Seq": "modeling_prismatic.OpenVLAForActionPrediction",
        },
        "model_type": "openvla",
        "arch_specifier": "no-align+fused-gelu-mlp",
        "hf_llm_id": "meta-llama/Llama-2-7b-hf",
        "llm_backbone_id": "llama2-7b-pure",
        "vision_backbone_id": "dinosiglip-vit-so-224px",
        "image_resize_strategy": "resize-naive",
        "image_sizes": [224, 224],
        "timm_model_ids": ["vit_large_patch14_reg4_dinov2.lvd142m", "vit_so400m_patch14_siglip_224"],
        "timm_override_act_layers": [None, None],
        "use_fused_vision_backbone": True,
        "n_action_bins": 256,
        "pad_to_multiple_of": 64,
        "pad_token_id": vocab["<PAD>"],
        "image_token_index": vocab["<PAD>"],
        "text_config": TEXT | {"model_type": "llama", "pad_token_id": vocab["<PAD>"], "torch_dtype": "bfloat16"},
        "torch_dtype": "bfloat16",
        "transformers_version": "4.40.1",
    }
    dump(path, "config.json", config)


def requests():
    """(name, prompt, images): one image each; the prompts start with the BOS Llama's tokenizer adds (the
    WordLevel one here adds none)."""
    import numpy as np
    from PIL import Image

    out = [(f"{h}x{w}", "<s> describe", [Image.fromarray(photo(h, w, i))]) for i, (h, w) in enumerate(SIZES)]
    rgb = photo(300, 400, 10)
    alpha = (photo(300, 400, 11)[..., 0] // 2 + 64).astype("uint8")
    out.append(("gray", "<s> describe", [Image.fromarray(rgb[..., 1])]))
    out.append(("rgba", "<s> describe", [Image.fromarray(np.dstack([rgb, alpha]), "RGBA")]))
    out.append(("array", "<s> describe", [photo(480, 640, 12)]))
    return out


def worker(root: str, out_path: str) -> None:
    """One side: every request through apply(); the results to `out_path`."""
    import torch

    torch.save(one_side(os.path.join(root, "openvla"), requests()), out_path)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    write_openvla(str(root / "openvla"))
    return both_sides(root, __file__)


def test_same_outputs_plugin_on_and_off(sides):
    on, off = sides
    assert on["served"] and not off["served"]
    assert on["class"] == off["class"] == f"{MODULE}.OpenVLAImageProcessor"
    for name, *_ in requests():
        got, expected = on[name], off[name]
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
            assert got[field] == expected[field], f"{name}: {field}"
        assert_same_tensors(name, got["tensors"], expected["tensors"])
        assert [tuple(item["pixel_values"].shape) for item in got["tensors"]] == [(6, 224, 224)], name
        assert got["mm_placeholders"] == [(1, 256)], name  # after the BOS: (224 / 14)^2 image tokens


def test_log_says_fused_serves_openvla(sides):
    on, off = sides
    assert any("serves vLLM's OpenVLAImageProcessor" in entry for entry in on["log"]), on["log"]
    assert not any("serves this call" in entry and "OpenVLA" in entry for entry in on["log"]), on["log"]
    assert not any("OpenVLAImageProcessor" in entry for entry in off["log"]), off["log"]


def test_calls_it_does_not_reproduce_run_vllms_code(monkeypatch):
    """In this process: no images and a subclass go to vLLM's code (equal to it, logged once each); a served
    call equals vLLM's own bit for bit; a vLLM whose function changed is not served."""
    import importlib

    import torch
    from PIL import Image

    from fused_input_norm import vllm_openvla

    module = importlib.import_module(MODULE)
    cls = module.OpenVLAImageProcessor
    original = unwrapped(monkeypatch, cls, "__call__")
    messages = []
    log = logging.getLogger("test_vllm_openvla")
    monkeypatch.setattr(log, "info", lambda fmt, *args: messages.append(fmt % args))
    try:
        assert "serves vLLM's OpenVLAImageProcessor" in vllm_openvla.serve(log)
        assert cls.__call__ is not original
        images = [Image.fromarray(photo(300, 700, 1)), Image.fromarray(photo(57, 29, 2))]

        class Subclass(cls):
            pass

        assert cls(image_size=224)([]) == original(cls(image_size=224), []) == {}
        got, expected = Subclass(image_size=224)(images), original(Subclass(image_size=224), images)
        assert torch.equal(got["pixel_values"], expected["pixel_values"])
        served, expected = cls(image_size=224)(images), original(cls(image_size=224), images)
        assert served["pixel_values"].shape == (2, 6, 224, 224)
        assert torch.equal(served["pixel_values"], expected["pixel_values"])
    finally:
        cls.__call__ = original
    assert any("no images" in m for m in messages), messages
    assert any("Subclass is a subclass of OpenVLAImageProcessor" in m for m in messages), messages
    monkeypatch.setattr(module, "preprocess_openvla_image", lambda image, image_size: None)
    said = vllm_openvla.serve(log)
    assert said == (
        "vLLM's OpenVLAImageProcessor serves: its preprocess_openvla_image is not vllm 0.34.0's (the one this "
        "reproduces)"
    ), said
    assert cls.__call__ is original


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
