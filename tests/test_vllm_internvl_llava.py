"""InternVL3 in transformers format (InternVLForConditionalGeneration: GotOcr2ImageProcessor, crop_to_patches
per call) and LLaVA-OneVision (LlavaOnevisionForConditionalGeneration: LlavaOnevisionImageProcessor) through
vLLM 0.34.0's `apply()`, with the plugin on (FUSED_INPUT_NORM_VLLM_PROCESSOR=1) against off (=0), each side
in its own process (`bash scripts/test_vllm.sh` installs vLLM; then run this file with .venv-vllm).

Tiny local model directories written here (config.json from transformers' config classes, a `tokenizers`
tokenizer with the model's special tokens, the checkpoints' preprocessor_config.json; no weights). Compared,
for every request: prompt_token_ids, mm_placeholders, mm_hashes and every tensor of every item of mm_kwargs
(integers exactly, float32 within 1e-6); the plugin's side must hold a FusedHFImageProcessor and log it.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import TEXT, VISION, assert_same_tensors, dump, tokenizer
from test_vllm_processor import photo

HAS_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm"
)

# model -> (architecture, the image placeholder of its prompts, transformers' image processor class)
MODELS = {
    "internvl_hf": ("InternVLForConditionalGeneration", "<IMG_CONTEXT>", "GotOcr2ImageProcessor"),
    "llava_onevision": ("LlavaOnevisionForConditionalGeneration", "<image>", "LlavaOnevisionImageProcessor"),
}
# (height, width): 1080p, VGA, tiny, elongated, one 448 tile, two 384 tiles.
SIZES = [(1080, 1920), (480, 640), (57, 29), (40, 900), (448, 448), (384, 768)]


def write_internvl_hf(path: str) -> None:
    """InternVL3-1B-hf's layout: an InternVL vision tower at 448 (patch 14, pixel shuffle 0.5: 256 tokens a
    tile), a Qwen2 text model, GotOcr2ImageProcessorFast as the checkpoint ships it (crop_to_patches off in
    the config; InternVLProcessor turns it on for every call)."""
    from transformers import InternVLConfig

    os.makedirs(path, exist_ok=True)
    extra = {
        "start_image_token": "<img>",
        "end_image_token": "</img>",
        "context_image_token": "<IMG_CONTEXT>",
        "video_token": "<video>",
    }
    vocab = tokenizer(path, ["<|im_start|>", "<|im_end|>", *extra.values()], "<|im_start|>", "<|im_end|>")
    with open(os.path.join(path, "tokenizer_config.json")) as f:
        tokenizer_config = json.load(f)
    dump(path, "tokenizer_config.json", tokenizer_config | {"extra_special_tokens": extra})
    vision = VISION | {"model_type": "internvl_vision", "image_size": [448, 448], "patch_size": [14, 14]}
    config = InternVLConfig(
        text_config=TEXT | {"model_type": "qwen2"},
        vision_config=vision,
        image_token_id=vocab["<IMG_CONTEXT>"],
        downsample_ratio=0.5,
    )
    config.architectures = ["InternVLForConditionalGeneration"]
    config.save_pretrained(path)
    preprocessor = {
        "image_processor_type": "GotOcr2ImageProcessorFast",
        "processor_class": "InternVLProcessor",
        "crop_to_patches": False,
        "min_patches": 1,
        "max_patches": 12,
        "size": {"height": 448, "width": 448},
        "resample": 3,
        "image_mean": [0.485, 0.456, 0.406],
        "image_std": [0.229, 0.224, 0.225],
    }
    dump(path, "preprocessor_config.json", preprocessor)
    dump(path, "processor_config.json", {"processor_class": "InternVLProcessor", "image_seq_length": 256})


def write_llava_onevision(path: str) -> None:
    """llava-onevision-qwen2-0.5b-ov-hf's layout: a SigLIP tower at 384 (patch 14), a Qwen2 text model, its
    LlavaOnevisionImageProcessor (384 tiles, 1..6 x 1..6 pinpoints, do_pad, mean = std = 0.5)."""
    from transformers import LlavaOnevisionConfig

    os.makedirs(path, exist_ok=True)
    special = ["<|im_start|>", "<|im_end|>", "<image>", "<video>"]
    vocab = tokenizer(path, special, "<|im_start|>", "<|im_end|>")
    vision = VISION | {"model_type": "siglip_vision_model", "image_size": 384, "patch_size": 14}
    config = LlavaOnevisionConfig(
        text_config=TEXT | {"model_type": "qwen2"},
        vision_config=vision,
        image_token_index=vocab["<image>"],
        video_token_index=vocab["<video>"],
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
    )
    config.architectures = ["LlavaOnevisionForConditionalGeneration"]
    config.save_pretrained(path)
    preprocessor = {
        "image_processor_type": "LlavaOnevisionImageProcessor",
        "processor_class": "LlavaOnevisionProcessor",
        "size": {"height": 384, "width": 384},
        "image_grid_pinpoints": [[384 * r, 384 * c] for r in range(1, 7) for c in range(1, 7)],
        "do_pad": True,
        "resample": 3,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    }
    dump(path, "preprocessor_config.json", preprocessor)
    processor = {"processor_class": "LlavaOnevisionProcessor", "num_image_tokens": 729}
    processor |= {"vision_feature_select_strategy": "full", "image_token": "<image>", "video_token": "<video>"}
    dump(path, "processor_config.json", processor | {"vision_aspect_ratio": "anyres_max_9"})


WRITERS = {"internvl_hf": write_internvl_hf, "llava_onevision": write_llava_onevision}


def requests(model: str, image: str):
    """(name, prompt, images, mm_processor_kwargs): each size alone, gray and RGBA PIL images, a batch of three,
    InternVL's per-request tile limit, and a kwarg FusedImageProcessor does not reproduce (nearest
    resampling: transformers serves that call)."""
    import numpy as np
    from PIL import Image

    out = [(f"{h}x{w}", f"{image} describe", [Image.fromarray(photo(h, w, i))], {}) for i, (h, w) in enumerate(SIZES)]
    rgb = photo(300, 400, 10)
    alpha = (photo(300, 400, 11)[..., 0] // 2 + 64).astype("uint8")
    out.append(("gray", f"{image} describe", [Image.fromarray(rgb[..., 1])], {}))
    out.append(("rgba", f"{image} describe", [Image.fromarray(np.dstack([rgb, alpha]), "RGBA")], {}))
    batch = [Image.fromarray(photo(h, w, 20 + i)) for i, (h, w) in enumerate([(480, 640), (1080, 1920), (57, 29)])]
    out.append(("batch", " and ".join([image] * 3) + " compare them", batch, {}))
    if model == "internvl_hf":
        out.append(("max_patches", " and ".join([image] * 3) + " compare them", batch, {"max_patches": 4}))
    out.append(("fallback", f"{image} describe", batch[:1], {"resample": 0}))
    return out


def worker(root: str, out_path: str) -> None:
    """One side: every model, every request; the results to `out_path`."""
    import logging

    import torch
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.plugins import load_general_plugins

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO)
    load_general_plugins()
    results = {}
    for model, (_, image, _) in MODELS.items():
        path = os.path.join(root, model)
        config = ModelConfig(model=path, tokenizer=path, dtype="float32", seed=0)
        processor = MULTIMODAL_REGISTRY.create_processor(config)
        image_processor = processor.info.get_hf_processor().image_processor
        results[f"{model}-class"] = f"{type(image_processor).__module__}.{type(image_processor).__name__}"
        for name, prompt, images, kwargs in requests(model, image):
            out = processor(prompt, processor.info.parse_mm_data({"image": images}), hf_processor_mm_kwargs=kwargs)
            items = out["mm_kwargs"]["image"]
            results[f"{model}-{name}"] = {
                "prompt_token_ids": list(out["prompt_token_ids"]),
                "mm_placeholders": [(p.offset, p.length) for p in out["mm_placeholders"]["image"]],
                "mm_hashes": list(out["mm_hashes"]["image"]),
                "tensors": [{k: v.data for k, v in item.items() if isinstance(v.data, torch.Tensor)} for item in items],
            }
    torch.save(results, out_path)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """Both sides' results: (plugin on, plugin off), each with its log lines."""
    root = tmp_path_factory.mktemp("models")
    for model, write in WRITERS.items():
        write(str(root / model))
    results = []
    for switch in ("1", "0"):
        out = root / f"side{switch}.pt"
        env = {**os.environ, "FUSED_INPUT_NORM_VLLM_PROCESSOR": switch, "OMP_NUM_THREADS": "1"}
        run = subprocess.run(
            [sys.executable, __file__, str(root), str(out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            cwd="/",  # the installed package (or PYTHONPATH's), not the tests' directory
        )
        assert run.returncode == 0, run.stderr[-4000:]
        import torch

        results.append(torch.load(out, weights_only=False))
        results[-1]["log"] = [line for line in (run.stdout + run.stderr).splitlines() if "fused_input_norm" in line]
    return results


@pytest.mark.parametrize("model", list(MODELS))
def test_same_outputs_plugin_on_and_off(sides, model):
    import torch

    on, off = sides
    assert on[f"{model}-class"] == "fused_input_norm.hf_adapter.FusedHFImageProcessor", on[f"{model}-class"]
    assert off[f"{model}-class"].startswith("transformers."), off[f"{model}-class"]
    names = [name for name, *_ in requests(model, MODELS[model][1])]
    for name in names:
        got, expected = on[f"{model}-{name}"], off[f"{model}-{name}"]
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
            assert got[field] == expected[field], f"{name}: {field}"
        assert_same_tensors(name, got["tensors"], expected["tensors"])
        dtypes = {t.dtype for item in got["tensors"] for k, t in item.items() if k.startswith("pixel_values")}
        assert dtypes == {torch.float32}, (name, dtypes)


@pytest.mark.parametrize("model", list(MODELS))
def test_log_says_which_processor_serves_images(sides, model):
    on, off = sides
    architecture, _, upstream = MODELS[model]
    said = [line for line in on["log"] if architecture in line and "serves images" in line]
    assert said and f"in place of transformers' {upstream}" in said[0], on["log"]
    assert not any(architecture in line and "FusedImageProcessor" in line for line in off["log"]), off["log"]
    # Every request served but the fallback's (nearest resampling), which transformers serves, said once.
    handed_back = [line for line in on["log"] if f"transformers' {upstream} serves this call" in line]
    assert len(handed_back) == 1 and "resample 0 (nearest)" in handed_back[0], handed_back


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
