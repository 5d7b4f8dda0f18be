"""vLLM's own DeepSeek-VL2 processor (DeepseekVLV2Processor) served by vllm_deepseek_vl2: the model directory and
requests that tests/test_vllm_own.py runs through vLLM 0.34.0's `apply()` with the plugin on against off (in the
processes it shares with vLLM's other own processors); here, the plan against vLLM's own tokenize_with_images on
more sizes, and the calls it hands back.

A tiny model directory written here, config.json and processor_config.json laid out as deepseek-vl2-tiny ships
them (vLLM reads the first with its own DeepseekVLV2Config and builds its processor from the second: 384 tiles,
the checkpoints' 23 candidate resolutions, patch 14, downsample 2), a `tokenizers` tokenizer with the image
token, no weights. Requests: a 1080p image (tiled), a small odd one (one tile), an elongated one, two images in
one prompt (cropping on) and three (vLLM turns cropping off). Compared: prompt_token_ids, mm_placeholders,
mm_hashes and every tensor of every item (float32 within 1e-6, integers exactly); the plugin's side must serve
every call (a hand-back logs, and fails the test).
"""

import importlib.util
import logging
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_deepseek_ocr import assert_handed_back
from test_vllm_families import TEXT, dump, tokenizer, unwrapped
from test_vllm_processor import photo

HAS_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

MODULE = "vllm.transformers_utils.processors.deepseek_vl2"
# deepseek-vl2-tiny's (and -small's, deepseek-vl2's) candidate resolutions, [width, height].
CANDIDATES = [[384, 384], [384, 768], [768, 384], [384, 1152], [1152, 384], [384, 1536], [1536, 384], [768, 768]]
CANDIDATES += [[384, 1920], [1920, 384], [384, 2304], [2304, 384], [768, 1152], [1152, 768], [384, 2688]]
CANDIDATES += [[2688, 384], [384, 3072], [3072, 384], [768, 1536], [1536, 768], [384, 3456], [3456, 384], [1152, 1152]]
BAR = "\uff5c"  # DeepSeek's tokens hold a fullwidth vertical line
SPECIAL = [f"<{BAR}begin▁of▁sentence{BAR}>", f"<{BAR}end▁of▁sentence{BAR}>", f"<{BAR}▁pad▁{BAR}>", "<image>"]
NAMES = ["1080x1920", "57x29", "300x2000", "two", "three"]


def write_model(path: str) -> None:
    """deepseek-vl2-tiny's config.json layout (a SigLIP tower, the downsample MLP projector, a DeepSeek-V2 text
    model without MLA: its null LoRA ranks; 2D tile tag, the global view first) at tiny sizes, and its
    processor_config.json."""
    os.makedirs(path, exist_ok=True)
    tokenizer(path, SPECIAL, SPECIAL[0], SPECIAL[1])
    language = {"model_type": "deepseek_v2", "kv_lora_rank": None, "q_lora_rank": None, "use_mla": False}
    config = {
        "architectures": ["DeepseekVLV2ForCausalLM"],
        "model_type": "deepseek_vl_v2",
        "candidate_resolutions": CANDIDATES,
        "global_view_pos": "head",
        "tile_tag": "2D",
        "vision_config": {"model_type": "vision", "image_size": 384, "patch_size": 14, "width": 32, "layers": 1},
        "projector_config": {
            "model_type": "mlp_projector",
            "projector_type": "downsample_mlp_gelu",
            "input_dim": 32,
            "n_embed": 32,
            "depth": 2,
            "downsample_ratio": 2,
        },
        "language_config": TEXT | language,
        "torch_dtype": "bfloat16",
    }
    dump(path, "config.json", config)
    processor = {
        "processor_class": "DeepseekVLV2Processor",
        "candidate_resolutions": CANDIDATES,
        "patch_size": 14,
        "downsample_ratio": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "normalize": True,
        "image_token": "<image>",
        "pad_token": SPECIAL[2],
        "add_special_token": False,
        "sft_format": "deepseek",
        "mask_prompt": False,
        "ignore_id": -100,
    }
    dump(path, "processor_config.json", processor)


def requests():
    """(name, prompt, images): every image a different one, so that none comes from vLLM's processing cache."""
    from PIL import Image

    def image(h, w, seed):
        return Image.fromarray(photo(h, w, seed))

    return [
        ("1080x1920", "<image> describe", [image(1080, 1920, 1)]),
        ("57x29", "<image> describe", [image(57, 29, 2)]),
        ("300x2000", "<image> describe", [image(300, 2000, 3)]),
        ("two", "<image> and <image> compare", [image(900, 700, 4), image(41, 77, 5)]),
        ("three", "<image> <image> and <image> compare", [image(720, 1280, 6), image(33, 95, 7), image(500, 80, 8)]),
    ]


def _processor(**kwargs):
    """vLLM's DeepseekVLV2Processor with a tokenizer holding its tokens, built from the checkpoint's settings."""
    import tempfile

    from transformers import AutoTokenizer

    cls = importlib.import_module(MODULE).DeepseekVLV2Processor
    with tempfile.TemporaryDirectory() as path:
        write_model(path)
        return cls(AutoTokenizer.from_pretrained(path), CANDIDATES, 14, 2, **kwargs)


# Odd sides (the pad's banker's rounding of a half), a square (no canvas), an image at a candidate's size, a
# thin one whose local view is a column of tiles, a 12 MP photo, one that fits both views exactly.
SHAPES = [(57, 29), (385, 383), (384, 384), (768, 1536), (2000, 90), (3024, 4032), (683, 1024), (1, 1)]


@pytest.mark.parametrize("cropping", [True, False])
def test_plan_equals_vllms_views(monkeypatch, cropping):
    """FusedImageProcessor with the config vllm_deepseek_vl2 builds, against vLLM's own tokenize_with_images
    (its ImageOps.pad, crops, ToTensor and Normalize) on more sizes."""
    import torch
    from PIL import Image

    from fused_input_norm import FusedImageProcessor

    module = importlib.import_module(MODULE)
    unwrapped(monkeypatch, module.DeepseekVLV2Processor, "tokenize_with_images")
    upstream = _processor()
    images = [Image.fromarray(photo(h, w, seed)) for seed, (h, w) in enumerate(SHAPES)]
    prompt = "<image>" * len(images)
    _, views, _, spatial, _ = upstream.tokenize_with_images(prompt, images, cropping=cropping)
    config = {"image_processor_type": "DeepseekVLV2Processor", "size": 384, "candidate_resolutions": CANDIDATES}
    served = FusedImageProcessor.from_preprocessor_config(
        config | {"cropping": cropping, "fill": 127}, device=torch.device("cpu"), reference="pil"
    )(images)
    assert served["images_spatial_crop"].tolist() == spatial
    want = torch.stack(views)
    assert served["pixel_values"].shape == want.shape
    assert float((served["pixel_values"] - want).abs().max()) <= 1e-6


def test_candidates_that_are_not_whole_tiles_are_refused():
    """vLLM cuts a 384 x 500 local view into two rows, the second past the canvas (Pillow's crop fills it with
    black), and counts the tokens of one: refused by name, so vllm_deepseek_vl2 hands such a processor back."""
    import torch

    from fused_input_norm import FusedImageProcessor

    config = {"image_processor_type": "DeepseekVLV2Processor", "size": 384, "candidate_resolutions": [[384, 500]]}
    with pytest.raises(ValueError, match=r"candidate_resolutions \[384, 500\] is not whole 384 x 384 tiles"):
        FusedImageProcessor.from_preprocessor_config(config, device=torch.device("cpu"), reference="pil")


def test_served_only_as_vllm_0_34_writes_it(monkeypatch):
    """A changed function: serve() wraps nothing and says which."""
    from fused_input_norm import vllm_deepseek_vl2

    module = importlib.import_module(MODULE)
    unwrapped(monkeypatch, module.DeepseekVLV2Processor, "tokenize_with_images")
    monkeypatch.setattr(module.DeepseekVLV2Processor, "select_best_resolution", lambda self, size: size)
    said = vllm_deepseek_vl2.serve(logging.getLogger("test"))
    expected = "its DeepseekVLV2Processor.select_best_resolution is not vllm 0.34.0's (the one this reproduces)"
    assert said == f"vLLM's DeepseekVLV2Processor serves: {expected}"
    assert not hasattr(module.DeepseekVLV2Processor.tokenize_with_images, "fused_input_norm_wrapped")


def test_calls_it_does_not_reproduce_run_vllms_code(monkeypatch, caplog):
    """A subclass, a mean that is not one grey, a blank-canvas image, an RGBA one: vLLM's code, logged once."""
    from fused_input_norm import vllm_deepseek_vl2

    module = importlib.import_module(MODULE)
    unwrapped(monkeypatch, module.DeepseekVLV2Processor, "tokenize_with_images")
    upstream = _processor()

    class Other(module.DeepseekVLV2Processor):
        pass

    others = [Other(upstream.tokenizer, CANDIDATES, 14, 2), _processor(image_mean=(0.5, 0.4, 0.3))]
    assert_handed_back(monkeypatch, caplog, vllm_deepseek_vl2.serve, upstream, others, "text")
