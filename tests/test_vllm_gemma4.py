"""Gemma 4's family inside vLLM: vLLM 0.34.0's `apply()` for Gemma4ForConditionalGeneration,
Gemma4UnifiedForConditionalGeneration and DiffusionGemmaForBlockDiffusion with the plugin on
(FUSED_INPUT_NORM_VLLM_PROCESSOR=1) against off (=0), each side one process for all three models (the tiny
directories test_vllm_generic.py writes, configs as the classes save them). Compared for each request (a
small odd image, a 1080p one, the same with a per-request max_soft_tokens, each on vLLM's default and uint8
paths where the model has both): prompt_token_ids, mm_placeholders, mm_hashes and every tensor of every item
(uint8 and integer exactly, float32 within 1e-6). The plugin's side must hold the family's adapter
(FusedHFImageProcessor, still an instance of transformers' class), have run the family's processor on every
request, and hand no call back.

Videos (a small odd clip, an 8-frame 1080p one, the small one with a per-request max_soft_tokens), in the same
two processes: vLLM 0.34.0's Gemma 4 processing sends a video's frames, as PIL images with max_soft_tokens=70,
through the processor's image processor (not its video processor), so the family's image adapter serves them,
one call per video; the plugin's side must also hold the family's video adapter (FusedHFVideoProcessor, still
an instance of transformers' video class) for whoever calls the video processor itself."""

import importlib
import importlib.util
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import assert_same_tensors, outputs
from test_vllm_generic import MODELS as GENERIC_MODELS
from test_vllm_generic import key_of, settings, write_model
from test_vllm_processor import class_name, photo, written_sides

HAS_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

MODELS = ("gemma4", "gemma4_unified", "diffusion_gemma")
FAMILY = {"gemma4": "gemma4", "gemma4_unified": "gemma4_unified", "diffusion_gemma": "gemma4"}
# name -> (height, width, mm_processor_kwargs)
REQUESTS = {"57x29": (57, 29, {}), "1080x1920": (1080, 1920, {}), "kwargs": (1080, 1920, {"max_soft_tokens": 70})}
# name -> (frames, height, width, mm_processor_kwargs); vLLM sets the frames' budget itself (70), over a request's
VIDEOS = {
    "video-4x57x29": (4, 57, 29, {}),
    "video-8x1080x1920": (8, 1080, 1920, {}),
    "video-kwargs": (4, 57, 29, {"max_soft_tokens": 280}),
}


def clip(frames: int, height: int, width: int, seed: int):
    """(uint8 [T, H, W, 3] frames, metadata) as vLLM's video loader hands them, the frames already sampled."""
    import numpy as np

    video = np.stack([photo(height, width, seed + t) for t in range(frames)])
    metadata = {"fps": 2.0, "duration": frames / 2.0, "total_num_frames": frames}
    metadata |= {"frames_indices": list(range(frames)), "video_backend": "opencv", "do_sample_frames": False}
    return video, metadata


def worker(root: str, out_path: str) -> None:
    """One side: every model and device-normalize setting, every request; the results to `out_path`."""
    import logging

    import torch
    import transformers
    from PIL import Image
    from vllm.config import ModelConfig
    from vllm.model_executor.models import registry
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.plugins import load_general_plugins

    from fused_input_norm import processor as fused

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO)
    load_general_plugins()
    served = []  # the family of each FusedImageProcessor call: the family, not transformers, computed it
    call = fused.FusedImageProcessor.__call__

    def counted(self, *args, **kwargs):
        served.append(self.settings.kind)
        return call(self, *args, **kwargs)

    fused.FusedImageProcessor.__call__ = counted
    results = {}
    for model in MODELS:
        spec = GENERIC_MODELS[model]
        module, cls = registry._MULTIMODAL_MODELS[spec["arch"]]
        module = module if module.startswith("vllm.") else f"vllm.model_executor.models.{module}"
        model_class = getattr(importlib.import_module(module), cls)
        image, video = model_class.get_placeholder_str("image", 1), model_class.get_placeholder_str("video", 1)
        for device_normalize in settings(model):
            path = os.path.join(root, model)
            config = ModelConfig(
                model=path, tokenizer=path, dtype="float32", mm_device_do_normalize=device_normalize, seed=0
            )
            processor = MULTIMODAL_REGISTRY.create_processor(config)
            hf = processor.info.get_hf_processor()
            key = key_of(model, device_normalize)
            results[key + "-class"] = class_name(hf.image_processor)
            results[key + "-isinstance"] = isinstance(hf.image_processor, getattr(transformers, spec["image"]))
            for name, (height, width, kwargs) in REQUESTS.items():
                before = len(served)
                images = [Image.fromarray(photo(height, width, 3))]
                out = processor(
                    f"{image} describe", processor.info.parse_mm_data({"image": images}), hf_processor_mm_kwargs=kwargs
                )
                results[f"{key}-{name}"] = outputs(out, "image")
                results[f"{key}-{name}-served"] = served[before:]
            results[key + "-video-class"] = class_name(hf.video_processor)
            results[key + "-video-isinstance"] = isinstance(hf.video_processor, getattr(transformers, spec["video"]))
            for name, (frames, height, width, kwargs) in VIDEOS.items():
                before = len(served)
                data = processor.info.parse_mm_data({"video": [clip(frames, height, width, 40)]})
                out = processor(f"{video} describe", data, hf_processor_mm_kwargs=kwargs)
                results[f"{key}-{name}"] = outputs(out, "video")
                results[f"{key}-{name}-served"] = served[before:]
    torch.save(results, out_path)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """Both sides' results: (plugin on, plugin off), each with its log lines."""
    return written_sides(tmp_path_factory, MODELS, write_model, __file__)


@pytest.mark.parametrize("medium", ["image", "video"])
@pytest.mark.parametrize(("model", "device_normalize"), [(m, n) for m in MODELS for n in settings(m)])
def test_same_outputs_plugin_on_and_off_served_by_the_family(sides, model, device_normalize, medium):
    on, off = sides
    key = key_of(model, device_normalize)
    cls, adapter, names = ("-class", "FusedHFImageProcessor", REQUESTS)
    if medium == "video":
        cls, adapter, names = ("-video-class", "FusedHFVideoProcessor", VIDEOS)
    assert on[key + cls] == f"fused_input_norm.hf_adapter.{adapter}", on[key + cls]
    assert off[key + cls].startswith("transformers."), off[key + cls]
    isinstance_key = key + cls.replace("-class", "-isinstance")
    assert on[isinstance_key] and off[isinstance_key]
    for name in names:
        got, expected = on[f"{key}-{name}"], off[f"{key}-{name}"]
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
            assert got[field] == expected[field], f"{name}: {field}"
        assert_same_tensors(name, got["tensors"], expected["tensors"])
        # the image family computed it (a video's frames: one call of the image adapter)
        assert on[f"{key}-{name}-served"] == [FAMILY[model]], (name, on[f"{key}-{name}-served"])
        assert off[f"{key}-{name}-served"] == [], name
    if medium == "image":  # the per-request budget reached the processor: fewer soft tokens than without it
        assert len(off[f"{key}-kwargs"]["prompt_token_ids"]) < len(off[f"{key}-1080x1920"]["prompt_token_ids"])
    else:  # vLLM sets the frames' budget (70) over the request's 280: the same prompt as without it
        assert off[f"{key}-video-kwargs"]["prompt_token_ids"] == off[f"{key}-video-4x57x29"]["prompt_token_ids"]


def test_no_call_handed_back_and_the_log_names_the_family(sides):
    on, off = sides
    handed_back = [line for line in on["log"] if "serves this call" in line]
    assert not handed_back, handed_back
    for model in MODELS:
        arch = GENERIC_MODELS[model]["arch"]
        lines = [line for line in on["log"] if f"'{arch}'" in line]
        assert lines and all("FusedImageProcessor" in line or "FusedHFImageProcessor" in line for line in lines), (
            model,
            lines,
        )
        assert not any(f"'{arch}'" in line for line in off["log"]), off["log"]


if __name__ == "__main__":
    worker(*sys.argv[1:])
