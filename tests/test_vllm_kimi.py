"""vLLM's own Kimi processor (KimiK25FusedVisionProcessor.preprocess, served in its class by vllm_kimi): vLLM
0.34.0's `apply()` with the plugin on (FUSED_INPUT_NORM_VLLM_PROCESSOR=1) against off (=0), each side in one
process as a server would (`bash scripts/test_vllm.sh` runs it), for the three architectures vLLM builds it for:
tiny KimiK25ForConditionalGeneration, KimiK3ForConditionalGeneration and KimiK31ForConditionalGeneration
directories (config.json and preprocessor_config.json's media_proc_cfg laid out as the checkpoints ship them,
small; a tokenizer holding Kimi's media tokens; no weights). vLLM's side runs its numba kernel.

Requests: a small odd image (no resize: padded to the 28 grid), for K3 / K3.1 a 1080p one (within the patch
budget: padded only), for K2.5 a 4K one (downscaled to the budget) and a video chunk of four 720p frames
(downscaled to the per-frame budget) beside an image, with vLLM's default device normalize (uint8 bytes) and,
for K2.5, its float32 path too (mm_device_do_normalize off). Compared: prompt_token_ids, mm_placeholders, mm_hashes,
every tensor (float32 within 1e-6, uint8 and grid_thws exactly). An in-process test checks what is handed back
to vLLM's code, and that a changed vLLM function is not served.
"""

import logging
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import HAS_VLLM, TEXT, assert_same_tensors, dump, outputs, recorded_log, tokenizer, unwrapped
from test_vllm_processor import both_sides, photo

pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

MODULE = "vllm.transformers_utils.processors.kimi_k25_vision_fused"
MEDIA = ["<|media_begin|>", "<|media_content|>", "<|media_pad|>", "<|media_end|>"]
K25_IMAGE = "<|media_begin|>image<|media_content|><|media_pad|><|media_end|>"  # K2.5's get_placeholder_str
K3_IMAGE = "<|kimi_image_placeholder|>"
# Kimi-K2.5's media_proc_cfg (K3 ships the same keys)
MEDIA_PROC_CFG = {
    "in_patch_limit": 16384,
    "patch_size": 14,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "merge_kernel_size": 2,
    "fixed_output_tokens": None,
    "patch_limit_on_one_side": 512,
    "in_patch_limit_each_frame": 4096,
    "in_patch_limit_video": None,
    "sample_fps": 2.0,
    "max_num_frames_each_video": None,
    "temporal_merge_kernel_size": 4,
    "timestamp_mode": "hh:mm:ss.fff",
    "config_type": "kimi_k25",
}
# model directory -> (architecture, model_type, device normalize settings: None is vLLM's default, uint8 here)
MODELS = {
    "kimi_k25": ("KimiK25ForConditionalGeneration", "kimi_k25", (None, False)),
    "kimi_k3": ("KimiK3ForConditionalGeneration", "kimi_k3", (None,)),
    "kimi_k31": ("KimiK31ForConditionalGeneration", "kimi_k31", (None,)),
}
# (height, width) per model: small and odd; 1080p (K3) or 4K (K2.5)
SIZES = {"kimi_k25": [(57, 29), (2160, 3840)], "kimi_k3": [(57, 29), (1080, 1920)]}


def write_kimi(path: str, architecture: str, model_type: str) -> None:
    """The checkpoints' layout (config.json with text and vision configs, preprocessor_config.json holding
    media_proc_cfg and the remote-code auto_map vLLM does not run), small; Kimi's media tokens."""
    os.makedirs(path, exist_ok=True)
    vocab = tokenizer(path, ["[BOS]", "[EOS]", *MEDIA, K3_IMAGE], "[BOS]", "[EOS]")
    vision = {"patch_size": 14, "merge_kernel_size": [2, 2], "num_hidden_layers": 1, "num_attention_heads": 2}
    if model_type == "kimi_k25":
        text = TEXT | {"model_type": "deepseek_v3", "kv_lora_rank": 16, "q_lora_rank": None, "qk_rope_head_dim": 8}
        text |= {"qk_nope_head_dim": 8, "v_head_dim": 8, "n_routed_experts": 2, "num_experts_per_tok": 1}
        vision |= {"model_type": "kimi_k25_vision", "hidden_size": 32, "intermediate_size": 64}
        config = {"text_config": text, "vision_config": vision, "image_token_id": vocab["<|media_pad|>"]}
        config |= {"projection_hidden_size": 32, "media_placeholder_token_id": vocab["<|media_pad|>"]}
        auto = {"AutoProcessor": "kimi_k25_processor.KimiK25Processor"}
        auto["AutoImageProcessor"] = "kimi_k25_vision_processing.KimiK25VisionProcessor"
    else:
        text = TEXT | {"model_type": "kimi_linear", "head_dim": 16}
        vision |= {"vt_hidden_size": 32, "vt_intermediate_size": 64, "vt_num_attention_heads": 2}
        vision |= {"vt_num_hidden_layers": 1, "qkv_hidden_size": 32, "text_hidden_size": 32}
        config = {"text_config": text, "vision_config": vision, "media_placeholder_token_id": vocab["<|media_pad|>"]}
        config |= {"image_placeholder": K3_IMAGE}
        auto = {"AutoProcessor": "processing_kimi_k3.KimiK3Processor"}
        auto["AutoImageProcessor"] = "kimi_k3_vision_processing.KimiK3VisionProcessor"
    config |= {"architectures": [architecture], "model_type": model_type, "torch_dtype": "bfloat16"}
    dump(path, "config.json", config)
    media = MEDIA_PROC_CFG | ({} if model_type == "kimi_k25" else {"config_type": model_type})
    dump(path, "preprocessor_config.json", {"auto_map": auto, "media_proc_cfg": media})


def requests(model: str):
    """(name, prompt, mm_data) for one model."""
    from PIL import Image

    sizes = SIZES["kimi_k25" if model == "kimi_k25" else "kimi_k3"]
    images = [Image.fromarray(photo(h, w, i)) for i, (h, w) in enumerate(sizes)]
    names = [f"{h}x{w}" for h, w in sizes]
    if model != "kimi_k25":
        return [(name, f"{K3_IMAGE} describe", {"image": [image]}) for name, image in zip(names, images, strict=True)]
    chunk = lambda image: {"type": "image", "image": image, "uuid": None}  # noqa: E731 (vLLM's VisionChunkImage)
    frames = [Image.fromarray(photo(720, 1280, 10 + i)) for i in range(4)]
    video = {"type": "video_chunk", "video_chunk": frames, "uuid": None, "prompt": "", "video_idx": 0}
    out = [
        (name, f"{K25_IMAGE} describe", {"vision_chunk": [chunk(image)]})
        for name, image in zip(names, images, strict=True)
    ]
    out.append(
        ("video-chunk-and-image", f"{K25_IMAGE} {K25_IMAGE} compare", {"vision_chunk": [video, chunk(images[0])]})
    )
    return out


def worker(root: str, out_path: str) -> None:
    """One side: every model, setting and request through apply(); the results to `out_path`."""
    import torch
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.plugins import load_general_plugins

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO)  # as a server shows vLLM's INFO lines
    load_general_plugins()
    results = {}
    for model, (_, _, settings) in MODELS.items():
        path = os.path.join(root, model)
        for device_normalize in settings:
            config = ModelConfig(
                model=path, tokenizer=path, dtype="float32", seed=0, mm_device_do_normalize=device_normalize
            )
            processor = MULTIMODAL_REGISTRY.create_processor(config)
            image_processor = processor.info.image_processor
            results[f"{model}-class"] = f"{type(image_processor).__module__}.{type(image_processor).__name__}"
            results[f"{model}-served"] = hasattr(type(image_processor).preprocess, "fused_input_norm_wrapped")
            for name, prompt, data in requests(model):
                modality = next(iter(data))
                out = processor(prompt, processor.info.parse_mm_data(data), hf_processor_mm_kwargs={})
                results[f"{model}-{device_normalize}-{name}"] = outputs(out, modality)
    torch.save(results, out_path)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    for model, (architecture, model_type, _) in MODELS.items():
        write_kimi(str(root / model), architecture, model_type)
    return both_sides(root, __file__)


def test_same_outputs_plugin_on_and_off(sides):
    import torch

    on, off = sides
    for model, (_, _, settings) in MODELS.items():
        assert on[f"{model}-served"] and not off[f"{model}-served"], model
        assert on[f"{model}-class"] == off[f"{model}-class"] == f"{MODULE}.KimiK25FusedVisionProcessor"
        for device_normalize in settings:
            for name, *_ in requests(model):
                key = f"{model}-{device_normalize}-{name}"
                got, expected = on[key], off[key]
                for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
                    assert got[field] == expected[field], f"{key}: {field}"
                assert_same_tensors(key, got["tensors"], expected["tensors"])
                dtype = torch.float32 if device_normalize is False else torch.uint8
                assert {item["pixel_values"].dtype for item in got["tensors"]} == {dtype}, key
    # The sizes make what they are there for: 4K downscaled (to 2392x1345), four 720p frames (to 1202x676), the
    # small one and 1080p padded only.
    grids = {key: [item["grid_thws"].tolist() for item in on[key]["tensors"]] for key in on if "-None-" in key}
    assert grids["kimi_k25-None-2160x3840"] == [[1, 98, 172]], grids
    assert grids["kimi_k25-None-video-chunk-and-image"] == [[4, 50, 86], [1, 6, 4]], grids
    assert grids["kimi_k3-None-1080x1920"] == grids["kimi_k31-None-1080x1920"] == [[1, 78, 138]], grids


def test_log_says_fused_serves_kimi(sides):
    on, off = sides
    assert any("serves vLLM's KimiK25FusedVisionProcessor" in entry for entry in on["log"]), on["log"]
    assert not any("serves this call" in entry for entry in on["log"]), on["log"]
    assert not any("KimiK25FusedVisionProcessor" in entry for entry in off["log"]), off["log"]


def test_calls_it_does_not_reproduce_run_vllms_code(monkeypatch):
    """In this process: return_tensors='np', do_rescale unlike do_normalize, a media that is not a dict and a
    subclass go to vLLM's code (equal to it, logged once each); a served call is vLLM's; a vLLM whose function
    changed is not served."""
    import importlib

    import numpy as np
    import torch
    from PIL import Image

    from fused_input_norm import vllm_kimi

    module = importlib.import_module(MODULE)
    cls = module.KimiK25FusedVisionProcessor
    original = unwrapped(monkeypatch, cls, "preprocess")
    log, messages = recorded_log(monkeypatch, "test_vllm_kimi")
    image = Image.fromarray(photo(300, 700, 1))
    media = lambda: [{"type": "image", "image": image}]  # noqa: E731 (preprocess converts the dicts in place)
    try:
        assert "serves vLLM's KimiK25FusedVisionProcessor" in vllm_kimi.serve(log)
        assert cls.preprocess is not original

        class Subclass(cls):
            pass

        for processor, tensors in [(cls(MEDIA_PROC_CFG), "np"), (Subclass(MEDIA_PROC_CFG), "pt")]:
            got, expected = processor.preprocess(media(), tensors), original(processor, media(), tensors)
            for key in expected:
                assert np.array_equal(np.asarray(got[key]), np.asarray(expected[key])), key
        with pytest.raises(AssertionError):  # vLLM's own assert, reached through the hand-back
            cls(MEDIA_PROC_CFG).preprocess(media(), "pt", do_rescale=True, do_normalize=False)
        with pytest.raises(TypeError):  # vLLM's own error for a bare image
            cls(MEDIA_PROC_CFG).preprocess([image], "pt")
        processor = cls(MEDIA_PROC_CFG)
        for normalize in (True, False):
            served = processor.preprocess(media(), "pt", do_rescale=normalize, do_normalize=normalize)
            expected = original(processor, media(), "pt", do_rescale=normalize, do_normalize=normalize)
            assert served["pixel_values"].dtype == expected["pixel_values"].dtype
            assert torch.equal(served["grid_thws"], expected["grid_thws"])
            diff = (served["pixel_values"].float() - expected["pixel_values"].float()).abs().max()
            assert float(diff) <= (1e-6 if normalize else 0), diff
    finally:
        cls.preprocess = original
    assert any("return_tensors='np'" in m for m in messages), messages
    assert any("do_rescale=True, do_normalize=False" in m for m in messages), messages
    assert any("not an image or video_chunk dict" in m for m in messages), messages
    assert any("Subclass is a subclass of KimiK25FusedVisionProcessor" in m for m in messages), messages
    monkeypatch.setattr(cls, "resize_image", staticmethod(lambda image, width, height: np.asarray(image)))
    said = vllm_kimi.serve(log)
    assert said == (
        "vLLM's KimiK25FusedVisionProcessor serves: its KimiK25FusedVisionProcessor.resize_image is not vllm 0.34.0's "
        "(the one this reproduces)"
    ), said
    assert cls.preprocess is original


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
