"""vLLM's own DeepSeek-OCR processor (DeepseekOCRProcessor and its Unlimited-OCR subclasses) served by
vllm_deepseek_ocr: vLLM 0.34.0's `apply()` with the plugin on (FUSED_INPUT_NORM_VLLM_PROCESSOR=1) against off
(=0), every architecture in one process per side, as a server runs (`bash scripts/test_vllm.sh` runs it).

Tiny model directories written here, config.json as the checkpoints ship it (vLLM reads it with its own config
classes: model_type deepseek_vl_v2 / unlimited-ocr), a `tokenizers` tokenizer with the image token, no weights:
DeepSeek-OCR (DeepseekOCRForCausalLM), DeepSeek-OCR-2 (DeepseekOCR2ForCausalLM: its "v2" token count),
Unlimited-OCR (UnlimitedOCRForCausalLM: 32 crops, crop mode off for several images) and Unlimited-OCR-2 (the same
architecture with text_config.unlimited_ocr2: UnlimitedOCR2Processor's global view, 16 crops). Requests: a
small odd image (no tiles), a 1080p one (tiles), two images in one prompt, and a 1080p one with crop_mode=False
per request. Compared: prompt_token_ids, mm_placeholders, mm_hashes and every tensor of every item (float32
within 1e-6, integers exactly); the plugin's side must serve every call (a hand-back logs, and fails the test).
"""

import importlib.util
import logging
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import TEXT, assert_same_tensors, dump, tokenizer, unwrapped
from test_vllm_processor import both_sides, photo

HAS_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

MODULE = "vllm.transformers_utils.processors.deepseek_ocr"
# model -> (architecture, model_type, language_config beyond TEXT, the processor class vLLM builds)
MODELS = {
    "deepseek_ocr": ("DeepseekOCRForCausalLM", "deepseek_vl_v2", {}, "DeepseekOCRProcessor"),
    "deepseek_ocr2": ("DeepseekOCR2ForCausalLM", "deepseek_vl_v2", {}, "DeepseekOCRProcessor"),
    "unlimited_ocr": ("UnlimitedOCRForCausalLM", "unlimited-ocr", {}, "UnlimitedOCRProcessor"),
    "unlimited_ocr2": ("UnlimitedOCRForCausalLM", "unlimited-ocr", {"unlimited_ocr2": True}, "UnlimitedOCR2Processor"),
}
NAMES = ["57x29", "1080x1920", "two", "crop-off"]


def write_model(path: str, model: str) -> None:
    """A DeepSeek-OCR checkpoint's config.json layout (vision, projector and language configs, the 2D tile tag,
    the global view first), a DeepSeek-V2 text model of 64 tokens."""
    architecture, model_type, language, _ = MODELS[model]
    os.makedirs(path, exist_ok=True)
    bar = "\uff5c"  # DeepSeek's tokens hold a fullwidth vertical line
    special = [f"<{bar}begin▁of▁sentence{bar}>", f"<{bar}end▁of▁sentence{bar}>", f"<{bar}▁pad▁{bar}>", "<image>"]
    tokenizer(path, special, special[0], special[1])
    config = {
        "architectures": [architecture],
        "model_type": model_type,
        "candidate_resolutions": [[1024, 1024]],
        "global_view_pos": "head",
        "tile_tag": "2D",
        "vision_config": {"image_size": 1024, "patch_size": 16, "width": 32, "layers": 1, "heads": 2},
        "projector_config": {"projector_type": "linear", "input_dim": 32, "n_embed": 32},
        "language_config": TEXT | {"model_type": "deepseek_v2", "kv_lora_rank": None, "q_lora_rank": None} | language,
        "torch_dtype": "bfloat16",
    }
    dump(path, "config.json", config)


def requests():
    """(name, prompt, images, per-request kwargs)."""
    from PIL import Image

    small, wide, page = (
        Image.fromarray(photo(h, w, seed)) for h, w, seed in ((57, 29, 1), (1080, 1920, 2), (900, 700, 3))
    )
    return [
        ("57x29", "<image> describe", [small], {}),
        ("1080x1920", "<image> describe", [wide], {}),
        ("two", "<image> and <image> compare", [page, small], {}),
        ("crop-off", "<image> describe", [wide], {"crop_mode": False}),
    ]


def worker(root: str, out_path: str) -> None:
    """One side: every model, every request; the results to `out_path`."""
    import torch
    from test_vllm_families import outputs
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.plugins import load_general_plugins

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO)  # as a server shows vLLM's INFO lines
    load_general_plugins()
    results = {}
    for model in MODELS:
        path = os.path.join(root, model)
        processor = MULTIMODAL_REGISTRY.create_processor(
            ModelConfig(model=path, tokenizer=path, dtype="float32", seed=0)
        )
        hf_processor = processor.info.get_hf_processor()
        results[f"{model}-class"] = type(hf_processor).__name__
        # Served in DeepseekOCRProcessor's class (Unlimited-OCR's override calls it).
        wrapped = importlib.import_module(MODULE).DeepseekOCRProcessor.tokenize_with_images
        results[f"{model}-served"] = hasattr(wrapped, "fused_input_norm_wrapped")
        for name, prompt, images, kwargs in requests():
            out = processor(prompt, processor.info.parse_mm_data({"image": images}), hf_processor_mm_kwargs=kwargs)
            results[f"{model}-{name}"] = outputs(out, "image")
    torch.save(results, out_path)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    for model in MODELS:
        write_model(str(root / model), model)
    return both_sides(root, __file__)


@pytest.mark.parametrize("model", MODELS)
def test_same_outputs_plugin_on_and_off(sides, model):
    on, off = sides
    assert on[f"{model}-class"] == off[f"{model}-class"] == MODELS[model][3]
    assert on[f"{model}-served"] and not off[f"{model}-served"]
    for name in NAMES:
        got, expected = on[f"{model}-{name}"], off[f"{model}-{name}"]
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
            assert got[field] == expected[field], f"{name}: {field}"
        assert_same_tensors(name, got["tensors"], expected["tensors"])
    tiles = [t for item in on[f"{model}-1080x1920"]["tensors"] for k, t in item.items() if k == "images_crop"]
    assert tiles and tiles[0].shape[0] > 1, "the 1080p image is tiled"


def test_log_says_fused_serves_and_nothing_is_handed_back(sides):
    on, off = sides
    assert any("serves vLLM's DeepseekOCRProcessor" in line for line in on["log"]), on["log"]
    assert not [line for line in on["log"] if "serves this call" in line], on["log"]
    assert not any("serves vLLM's DeepseekOCRProcessor" in line for line in off["log"]), off["log"]


def _processor(cls_name: str = "DeepseekOCRProcessor"):
    """vLLM's processor class `cls_name` with a tokenizer holding its tokens, built as vLLM builds it."""
    import tempfile

    from transformers import AutoTokenizer

    module = importlib.import_module(MODULE)
    unlimited = importlib.import_module("vllm.transformers_utils.processors.unlimited_ocr")
    cls = getattr(module, cls_name, None) or getattr(unlimited, cls_name)
    with tempfile.TemporaryDirectory() as path:
        write_model(path, "deepseek_ocr")
        return cls(AutoTokenizer.from_pretrained(path))


def test_served_only_as_vllm_0_34_writes_it(monkeypatch):
    """A changed function: serve() wraps nothing and says which."""
    from fused_input_norm import vllm_deepseek_ocr

    module = importlib.import_module(MODULE)
    monkeypatch.setattr(module, "dynamic_preprocess", lambda image, **kwargs: None)
    original = module.DeepseekOCRProcessor.tokenize_with_images
    monkeypatch.setattr(
        module.DeepseekOCRProcessor, "tokenize_with_images", getattr(original, "fused_input_norm_wrapped", original)
    )
    said = vllm_deepseek_ocr.serve(logging.getLogger("test"))
    assert (
        said
        == "vLLM's DeepseekOCRProcessor serves: its dynamic_preprocess is not vllm 0.34.0's (the one this reproduces)"
    )
    assert not hasattr(module.DeepseekOCRProcessor.tokenize_with_images, "fused_input_norm_wrapped")


def test_calls_it_does_not_reproduce_run_vllms_code(monkeypatch, caplog):
    """A subclass it does not know, a mean that is not one grey, a blank-canvas image, an RGBA one: vLLM's code."""
    from fused_input_norm import vllm_deepseek_ocr

    module = importlib.import_module(MODULE)
    unwrapped(monkeypatch, module.DeepseekOCRProcessor, "tokenize_with_images")
    upstream = _processor()

    class Other(module.DeepseekOCRProcessor):
        pass

    others = [Other(upstream.tokenizer), module.DeepseekOCRProcessor(upstream.tokenizer, image_mean=(0.5, 0.4, 0.3))]
    assert_handed_back(monkeypatch, caplog, vllm_deepseek_ocr.serve, upstream, others, "prompt")


def assert_handed_back(monkeypatch, caplog, serve, upstream, others: list, argument: str) -> None:
    """What vllm_deepseek_ocr and vllm_deepseek_vl2 do not reproduce: `others` (an instance of a subclass and one
    whose mean is not one grey) given an RGB image and `upstream` given a 1 x 3000 image (Pillow pads it as a
    blank canvas) get vLLM's own outputs; an RGBA image, vLLM's own error (its Normalize of 4 channels); each
    reason logged once. `serve` wraps type(upstream).tokenize_with_images, unwrapped here; `argument`: the
    prompt's name in the processor's __call__."""
    import numpy as np
    import torch
    from PIL import Image

    cls = type(upstream)
    rgb = Image.fromarray(photo(900, 700, 4))
    rgba = Image.fromarray(np.full((900, 700, 4), 200, dtype=np.uint8))
    line = Image.fromarray(photo(1, 3000, 5))
    cases = [(others[0], rgb), (others[1], rgb), (upstream, line)]

    def call(processor, image):
        return processor(**{argument: "<image> describe"}, images=[image])

    expected = [call(p, i) for p, i in cases]
    monkeypatch.setattr(cls, "tokenize_with_images", cls.tokenize_with_images)
    serve(logging.getLogger("test"))
    assert hasattr(cls.tokenize_with_images, "fused_input_norm_wrapped")
    with caplog.at_level(logging.INFO, logger="test"):
        for _ in range(2):
            for (p, image), want in zip(cases, expected, strict=True):
                got = call(p, image)
                assert all(torch.equal(got[k], want[k]) for k in want), list(want)
            with pytest.raises(RuntimeError, match="must match the size"):
                call(upstream, rgba)
    reasons = [r.getMessage() for r in caplog.records if "serves this call" in r.getMessage()]
    assert len(reasons) == 4, reasons
    assert "Other" in reasons[0] and "not one grey" in reasons[1] and "empty image" in reasons[2], reasons
    assert "RGBA" in reasons[3], reasons


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
