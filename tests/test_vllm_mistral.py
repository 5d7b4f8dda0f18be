"""Mistral-format checkpoints' images (vLLM's MistralCommonImageProcessor around mistral_common's ImageEncoder,
served in its class by vllm_mistral): vLLM 0.34.0's `apply()` with the plugin on (FUSED_INPUT_NORM_VLLM_PROCESSOR=1)
against off (=0), each side in its own process as a server would (`bash scripts/test_vllm.sh` runs it), on tiny
directories in the Mistral format as mistralai/Mistral-Small-3.1-24B-Instruct-2503 and Pixtral-12B-2409 ship it
(params.json with its vision_encoder section, tekken.json with its image section, consolidated.safetensors; small,
no real weights). vLLM itself picks the Mistral config format and tokenizer mode from those files, as it does for
the real ones.

Each side runs every request twice in its one process: with OpenCV's Intel IPP off (cv2.ipp.setUseIPP(False):
the engine's cv2_cubic_f32 filter resizes) and on (on x86 wheels IPP's INTER_CUBIC is what stock runs, and the
plugin calls cv2.resize itself, then its own normalize). The processor vLLM builds here has no processor cache,
so the second pass runs the image processor again (the off side's two passes differ where IPP runs).

Requests: 1080p (downscaled to the 1540 / 1024 cap: the rounding path), a small odd image (an upscale), an RGBA one
(composited on white), two images in one prompt. Prompts are token ids from the Mistral tokenizer's chat
encoding, as vLLM's chat path sends them. Compared: prompt_token_ids, mm_placeholders, mm_hashes, every tensor
bit for bit. An in-process test checks what is handed back, and that a changed mistral_common function is not
served.
"""

import base64
import logging
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import HAS_VLLM, dump, outputs, recorded_log, unwrapped
from test_vllm_processor import class_name, photo, written_sides

pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

MODULE = "vllm.transformers_utils.processors.pixtral"
# Each model: its tekken.json version, the key of its image section and that section, and its vision encoder's
# params.json keys that differ. mistralai/Mistral-Small-3.1-24B-Instruct-2503: patch 14, longest side 1540, 2x2
# patches merged into one token (a 28-pixel token grid), its special tokens listed in the file.
# mistralai/Pixtral-12B-2409: an older tokenizer (v3, the section still called "multimodal", mistral_common's
# default special tokens), patch 16, longest side 1024, no merge.
SMALL = {"image_patch_size": 14, "max_image_size": 1540, "spatial_merge_size": 2}
PIXTRAL = {"image_patch_size": 16, "max_image_size": 1024, "spatial_merge_size": 1}
SMALL_VISION = {"spatial_merge_size": 2, "max_image_size": 1540, "mm_projector_id": "patch_merge"}
SMALL_VISION |= {"add_pre_mm_projector_layer_norm": True, "adapter_bias": False}
MODELS = {
    "mistral-small-3.1": ("v7", "image", SMALL, SMALL_VISION),
    "pixtral-12b": ("v3", "multimodal", PIXTRAL, {"adapter_bias": True}),
}
NUM_SPECIAL = 100  # the real file has 1000; the ids of [IMG], [IMG_BREAK], [IMG_END] (10, 12, 13) are the same
# tekken.json's pre-tokenizer pattern (tiktoken's pat_str), as the real file has it.
PATTERN = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)


def write_mistral(path: str, model: str) -> None:
    """The Mistral-format layout of `model` (MODELS), small: params.json (its keys; a 32-wide text model, a
    one-layer vision encoder of its patch and merge sizes), tekken.json (the 256 byte tokens, the special tokens,
    the image section) and a one-tensor consolidated.safetensors, the file vLLM looks for to pick the Mistral
    format (and reads the dtype from)."""
    import torch
    from mistral_common.tokens.tokenizers.base import SpecialTokens
    from safetensors.torch import save_file

    version, section, image, vision_keys = MODELS[model]
    os.makedirs(path, exist_ok=True)
    vocab = [
        {
            "rank": i,
            "token_bytes": base64.b64encode(bytes([i])).decode(),
            "token_str": chr(i) if 32 <= i < 127 else None,
        }
        for i in range(256)
    ]
    tekken = {
        "config": {
            "pattern": PATTERN,
            "num_vocab_tokens": len(vocab),
            "default_vocab_size": len(vocab) + NUM_SPECIAL,
            "default_num_special_tokens": NUM_SPECIAL,
            "version": version,
        },
        "vocab": vocab,
        section: image,
    }
    if version != "v3":  # v3 files list none: mistral_common's defaults, the same ranks
        tekken["special_tokens"] = [
            {"rank": i, "token_str": str(t), "is_control": True} for i, t in enumerate(SpecialTokens)
        ]
    dump(path, "tekken.json", tekken)
    vision = {"image_token_id": 10, "image_break_token_id": 12, "image_end_token_id": 13, "intermediate_size": 64}
    vision |= {"num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 32, "num_channels": 3}
    vision |= {"image_size": image["max_image_size"], "patch_size": image["image_patch_size"], "rope_theta": 10000.0}
    vision |= vision_keys
    params = {"dim": 32, "n_layers": 1, "head_dim": 16, "hidden_dim": 64, "n_heads": 2, "n_kv_heads": 1}
    params |= {"rope_theta": 1e9, "norm_eps": 1e-5, "vocab_size": len(vocab) + NUM_SPECIAL}
    # Here, or vLLM looks for a config.json beside it (the real repositories ship one) and warns.
    params |= {"max_position_embeddings": 4096, "vision_encoder": vision}
    dump(path, "params.json", params)
    save_file({"norm.weight": torch.ones(32, dtype=torch.bfloat16)}, os.path.join(path, "consolidated.safetensors"))


def rgba(height: int, width: int, seed: int):
    """A photo with an alpha channel: opaque, transparent and half-transparent areas."""
    import numpy as np
    from PIL import Image

    alpha = np.zeros((height, width, 1), np.uint8)
    alpha[:, width // 3 :] = 128
    alpha[:, 2 * width // 3 :] = 255
    return Image.fromarray(np.concatenate([photo(height, width, seed), alpha], axis=-1), "RGBA")


def requests():
    """(name, text, images)."""
    from PIL import Image

    return [
        ("1080x1920", "describe", [Image.fromarray(photo(1080, 1920, 0))]),
        ("57x29", "describe", [Image.fromarray(photo(57, 29, 1))]),
        ("rgba", "describe", [rgba(300, 700, 2)]),
        ("two", "compare these", [Image.fromarray(photo(480, 640, 3)), Image.fromarray(photo(200, 90, 4))]),
    ]


def worker(root: str, out_path: str) -> None:
    """One side: every request through apply(), with IPP off then on; the results to `out_path`."""
    import cv2
    import torch
    from mistral_common.protocol.instruct.chunk import ImageChunk, TextChunk
    from mistral_common.protocol.instruct.messages import UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.plugins import load_general_plugins

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO)  # as a server shows vLLM's INFO lines
    lines = []  # the plugin's log lines, to tell the two passes apart

    class Lines(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    logging.getLogger("vllm.plugins.fused_input_norm").addHandler(Lines())
    load_general_plugins()
    results, processors = {}, {}
    for model in MODELS:
        path = os.path.join(root, model)
        config = ModelConfig(model=path, tokenizer=path, dtype="float32", seed=0, mm_processor_cache_gb=0)
        processors[model] = MULTIMODAL_REGISTRY.create_processor(config)  # no processor cache: each call runs it
        image_processor = processors[model].info.get_hf_processor().image_processor
        results[model] = {
            "architectures": config.architectures,  # config_format and tokenizer_mode left "auto"
            "tokenizer": type(processors[model].info.get_tokenizer()).__name__,
            "class": class_name(image_processor),
            "served": hasattr(type(image_processor).__call__, "fused_input_norm_wrapped"),
        }
    for ipp in (False, True):
        cv2.ipp.setUseIPP(ipp)
        results[f"useIPP-{ipp}"] = cv2.ipp.useIPP()  # False where this OpenCV has no IPP (aarch64 wheels)
        start = len(lines)
        for model, processor in processors.items():
            tokenizer = processor.info.get_tokenizer()
            for name, text, images in requests():
                chat = ChatCompletionRequest(
                    messages=[UserMessage(content=[TextChunk(text=text), *(ImageChunk(image=i) for i in images)])]
                )
                prompt = tokenizer.mistral.encode_chat_completion(chat).tokens
                out = processor(prompt, processor.info.parse_mm_data({"image": images}), hf_processor_mm_kwargs={})
                results[f"{model}/ipp-{ipp}/{name}"] = outputs(out, "image")
        results[f"log-ipp-{ipp}"] = lines[start:]
    torch.save(results, out_path)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    return written_sides(tmp_path_factory, MODELS, write_mistral, __file__)


def assert_equal(on: dict, off: dict, ipp: bool) -> None:
    """Every request of every model: tokens, placeholders, hashes and the float32 tensors equal, bit for bit."""
    import torch

    for name in [f"{model}/ipp-{ipp}/{name}" for model in MODELS for name, *_ in requests()]:
        got, expected = on[name], off[name]
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
            assert got[field] == expected[field], f"{name}: {field}"
        assert len(got["tensors"]) == len(expected["tensors"]), name
        for i, (a, b) in enumerate(zip(got["tensors"], expected["tensors"], strict=True)):
            assert sorted(a) == sorted(b) == ["images"], (name, i)
            x, y = a["images"], b["images"]
            assert x.dtype == y.dtype == torch.float32 and x.shape == y.shape, (name, i, x.shape, y.shape)
            assert torch.equal(x, y), f"{name}: item {i} differs by {float((x - y).abs().max())}"


def test_same_outputs_plugin_on_and_off(sides):
    """OpenCV's own INTER_CUBIC (IPP off): the plugin serves, and every tensor equals mistral_common's bit for bit."""
    on, off = sides
    for model in MODELS:  # vLLM found the Mistral format by itself (params.json read, mistral_common's tokenizer)
        for side in (on[model], off[model]):
            assert side["architectures"] == ["PixtralForConditionalGeneration"], (model, side["architectures"])
            assert side["tokenizer"] == "MistralTokenizer", model
            assert side["class"] == f"{MODULE}.MistralCommonImageProcessor", model
        assert on[model]["served"] and not off[model]["served"], model
    assert not on["useIPP-False"]
    assert not any("serves this call" in line for line in on["log-ipp-False"]), on["log-ipp-False"]
    assert_equal(on, off, False)
    # The sizes make what they are there for: the 1080p photo downscaled to the cap (rounded to the token grid:
    # 28 pixels for Mistral Small, 16 for Pixtral), the small one upscaled, each image of the pair on its own grid.
    shapes = {
        key: [tuple(t["images"].shape) for t in on[key]["tensors"]]
        for key in [f"{model}/ipp-False/{name}" for model in MODELS for name, *_ in requests()]
    }
    assert shapes == {
        "mistral-small-3.1/ipp-False/1080x1920": [(3, 868, 1540)],
        "mistral-small-3.1/ipp-False/57x29": [(3, 84, 56)],
        "mistral-small-3.1/ipp-False/rgba": [(3, 308, 700)],
        "mistral-small-3.1/ipp-False/two": [(3, 504, 644), (3, 224, 112)],
        "pixtral-12b/ipp-False/1080x1920": [(3, 576, 1024)],
        "pixtral-12b/ipp-False/57x29": [(3, 64, 32)],
        "pixtral-12b/ipp-False/rgba": [(3, 304, 704)],
        "pixtral-12b/ipp-False/two": [(3, 480, 640), (3, 208, 96)],  # 480x640: already on the grid, same size
    }, shapes


def test_same_outputs_where_opencv_runs_ipp(sides):
    """IPP on: the plugin serves with cv2.resize itself (IPP's results differ from OpenCV's own code), and every
    tensor equals mistral_common's bit for bit again."""
    import torch

    on, off = sides
    assert_equal(on, off, True)
    assert not any("serves this call" in line for line in on["log-ipp-True"]), on["log-ipp-True"]
    if on["useIPP-True"]:
        # IPP's INTER_CUBIC differs from OpenCV's own (most values, by up to ~3e-4 here): the off side's second
        # pass ran the processor again rather than a cache answering it from the first.
        for key in [f"{model}/ipp-{{}}/{name}" for model in MODELS for name, *_ in requests()]:
            first, second = off[key.format(False)]["tensors"], off[key.format(True)]["tensors"]
            assert not all(torch.equal(a["images"], b["images"]) for a, b in zip(first, second, strict=True)), key


def test_log_says_fused_serves_mistral(sides):
    on, off = sides
    assert any("serves vLLM's MistralCommonImageProcessor" in line for line in on["log"]), on["log"]
    assert not any("MistralCommonImageProcessor" in line for line in off["log"]), off["log"]


def test_calls_it_does_not_reproduce_run_mistral_commons_code(monkeypatch):
    """In this process: return_tensors='np' and a subclass go to mistral_common's code (equal to it, logged once
    each); a served call is equal to it bit for bit, IPP off and on; a mistral_common whose transform_image changed
    is not served."""
    import importlib

    import cv2
    import numpy as np
    import torch
    from mistral_common.tokens.tokenizers import image as encoder_module
    from PIL import Image

    from fused_input_norm import vllm_mistral
    from fused_input_norm.images import pil_to_chw

    module = importlib.import_module(MODULE)
    cls = module.MistralCommonImageProcessor
    original = unwrapped(monkeypatch, cls, "__call__")
    log, messages = recorded_log(monkeypatch, "test_vllm_mistral")
    encoder = encoder_module.ImageEncoder(
        encoder_module.ImageConfig(**SMALL), encoder_module.SpecialImageIDs(10, 12, 13)
    )
    ipp = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(False)
    try:
        assert "serves vLLM's MistralCommonImageProcessor" in vllm_mistral.serve(log)
        assert cls.__call__ is not original
        image = Image.fromarray(photo(300, 700, 1))

        class Subclass(cls):
            pass

        for processor, tensors in [(cls(encoder), "np"), (Subclass(encoder), None)]:
            got, expected = processor(image, return_tensors=tensors), original(processor, image, return_tensors=tensors)
            assert len(got["images"]) == len(expected["images"]) == 1
            assert np.array_equal(np.asarray(got["images"][0]), np.asarray(expected["images"][0]))
        # Served with OpenCV's own INTER_CUBIC (the engine's filter) and, where this OpenCV has it, under IPP
        # (cv2.resize itself): a downscale, an upscale, RGBA composited on white.
        images = [Image.fromarray(photo(1080, 1920, 3)), image, rgba(57, 29, 2)]
        resize, resized = cv2.resize, []
        monkeypatch.setattr(cv2, "resize", lambda *args, **kwargs: resized.append(args[1]) or resize(*args, **kwargs))
        for setting in (False, True):
            cv2.ipp.setUseIPP(setting)
            resized.clear()
            served = cls(encoder)(images)
            # cv2.resize itself only under IPP, once an image
            assert len(resized) == (3 if cv2.ipp.useIPP() else 0), (setting, resized)
            expected = original(cls(encoder), images)
            assert all(torch.equal(a, b) for a, b in zip(served["images"], expected["images"], strict=True)), setting
        # Under IPP, the float32 copy of each way a [3, H, W] image can lie in memory: Pillow's RGBX memory read in
        # place, NumPy's HWC copy, channels-first planes.
        cv2.ipp.setUseIPP(True)
        mean, std = (np.asarray(v, np.float32) for v in (encoder_module.DATASET_MEAN, encoder_module.DATASET_STD))
        hwc = torch.from_numpy(np.array(image))
        expected = encoder_module.transform_image(image, (352, 168))  # (width, height)
        for pixels in (pil_to_chw(image), hwc.permute(2, 0, 1), hwc.permute(2, 0, 1).contiguous()):
            got = vllm_mistral._transformed(pixels, (168, 352), mean, std, cv2)
            assert np.array_equal(got.numpy(), expected), pixels.stride()
    finally:
        cls.__call__ = original
        cv2.ipp.setUseIPP(ipp)
    handed_back = [m for m in messages if "serves this call" in m]  # the two above, and not the served call
    assert len(handed_back) == 2, messages
    assert any("return_tensors='np'" in m for m in handed_back), messages
    assert any("Subclass is a subclass of MistralCommonImageProcessor" in m for m in handed_back), messages
    monkeypatch.setattr(encoder_module, "transform_image", lambda image, new_size: image)
    said = vllm_mistral.serve(log)
    assert said == (
        "Mistral's image encoder (the Mistral-format path) stays mistral_common's: its transform_image is not "
        "mistral_common 1.13's (the one this reproduces)"
    ), said
    assert cls.__call__ is original


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
