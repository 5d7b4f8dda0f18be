"""vLLM's own dots3.note preprocessing (Dots3NoteImageProcessor.preprocess, vllm/models/dots3_note/common/processor.py,
served in its class by vllm_dots3_note) against vLLM 0.34.0's own code, in this process.

Not through apply(): vLLM's dots3_note package imports the CUDA build's FlashAttention modules when it is imported
(vllm/models/dots3_note/__init__.py -> nvidia/: vllm.vllm_flash_attn, the sparse MLA backends), which vLLM's CPU
build does not have, so vLLM cannot load the model class here, plugin on or off. So the tests import vLLM's
processing module alone (`processing_module`: its package's __init__ skipped; the package is put back as it was
afterwards) and compare what apply() calls, vLLM's own HF-like Dots3NoteProcessor.__call__ (input_ids,
pixel_values, image_grid_thw; a video's frames sampled, resized, JPEG-roundtripped and each preprocessed as an
image by vLLM's own video code), with the plugin's wrapping on and off; then the wrapped method call by call, and
what it hands back. No checkpoint is reachable here: the image settings are dots.ocr's (rednote-hilab/dots.ocr's
preprocessor_config.json: 3136 to 11289600 pixels, CLIP's mean and std, patch 14, merge 2) with a temporal patch
of 2, written under "vision_config" as vLLM reads them, and a "low" detail level with a smaller budget.
"""

import logging
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import HAS_VLLM, recorded_log, tokenizer, unwrapped
from test_vllm_processor import photo

pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

PACKAGE = "vllm.models.dots3_note"
MODULE = f"{PACKAGE}.common.processor"
SPECIAL = ["<|endoftext|>", "<|img|>", "<|imgpad|>", "<|endofimg|>", "<|video_pad|>", "<|audio_comp_start|>"]
SPECIAL += ["<|audio_comp_pad|>", "<|audio_comp_end|>"]
IMAGE = "<|img|><|imgpad|><|endofimg|>"
VISION = {"min_pixels": 3136, "max_pixels": 11289600, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2}
VISION |= {"image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}
VISION |= {"image_details": {"low": {"max_pixels": 200704}}}
# (height, width): 12 MP (floored within the budget), 1080p, small and odd (grown to the floor), extreme, 224 x 224
SIZES = [(3024, 4032), (1080, 1920), (57, 29), (10, 900), (224, 224)]


def processing_module():
    """vLLM's dots3_note processing module, imported without its package's CUDA-only __init__ (an empty package
    module in its place, whose __path__ finds the real submodules). scripts/bench_dots3_note.py uses it too."""
    import importlib
    import importlib.util
    import types

    if MODULE not in sys.modules:
        for name in _package_modules():
            del sys.modules[name]
        package = types.ModuleType(PACKAGE)
        package.__path__ = list(importlib.util.find_spec(PACKAGE).submodule_search_locations)
        sys.modules[PACKAGE] = package
    return importlib.import_module(MODULE)


def _package_modules() -> list[str]:
    return [name for name in sys.modules if name == PACKAGE or name.startswith(f"{PACKAGE}.")]


@pytest.fixture
def module(monkeypatch):
    """processing_module() for the test, with Dots3NoteImageProcessor.preprocess vLLM's own (unwrapped); the
    package's modules in sys.modules as they were before, afterwards."""
    saved = {name: sys.modules.pop(name) for name in _package_modules()}
    try:
        processing = processing_module()
        unwrapped(monkeypatch, processing.Dots3NoteImageProcessor, "preprocess")
        yield processing
    finally:
        for name in _package_modules():
            del sys.modules[name]
        sys.modules.update(saved)


def requests():
    """(name, text, processor kwargs): images as vLLM's media loader gives them (SIZES, a grey and an RGBA one, two
    in one prompt, the "low" detail, a max_pixels per request) and a video of decoded frames with its metadata
    (8 of 240 x 320 at 4 fps), as vLLM's video loader gives them."""
    import numpy as np
    from PIL import Image

    prompt = f"{IMAGE} describe"
    out = [(f"{h}x{w}", prompt, {"images": [Image.fromarray(photo(h, w, 110 + i))]}) for i, (h, w) in enumerate(SIZES)]
    rgb = photo(300, 400, 120)
    alpha = (photo(300, 400, 121)[..., 0] // 2 + 64).astype("uint8")
    out.append(("gray", prompt, {"images": [Image.fromarray(rgb[..., 1])]}))
    out.append(("rgba", prompt, {"images": [Image.fromarray(np.dstack([rgb, alpha]), "RGBA")]}))
    two = [Image.fromarray(photo(480, 640, 122)), Image.fromarray(photo(641, 479, 123))]
    out.append(("two", f"{IMAGE} and {IMAGE} describe", {"images": two}))
    image = [Image.fromarray(photo(1080, 1920, 124))]
    out.append(("low-detail", prompt, {"images": image, "image_detail": "low"}))
    out.append(("max-pixels", prompt, {"images": image, "max_pixels": 500000}))
    frames = np.stack([photo(240, 320, 125 + i) for i in range(8)])
    meta = {"fps": 4.0, "frames_indices": list(range(8)), "total_num_frames": 8}
    out.append(("video", "<|video_pad|> describe", {"videos": [(frames, meta)]}))
    return out


def test_vllms_processor_gives_the_same_outputs_served_and_not(module, monkeypatch, tmp_path):
    """vLLM's Dots3NoteProcessor (as its processing info builds it: no audio tower) on every request, with
    vLLM's own preprocess, then with vllm_dots3_note serving it: every output equal (float32 bit for bit), no call
    handed back."""
    import torch
    from transformers import AutoTokenizer

    from fused_input_norm import vllm_dots3_note

    tokenizer(str(tmp_path), SPECIAL, "<|endoftext|>", "<|endoftext|>")
    images = module.Dots3NoteImageProcessor(VISION, VISION["image_details"])
    processor = module.Dots3NoteProcessor(
        AutoTokenizer.from_pretrained(tmp_path), images, max_model_len=4096, video_audio_enabled=False,
        audio_token_stride=1280,
    )  # fmt: skip
    calls = requests()
    expected = {name: processor(text, **kwargs) for name, text, kwargs in calls}
    log, messages = recorded_log(monkeypatch, "test_vllm_dots3_note")
    assert "serves vLLM's Dots3NoteImageProcessor" in vllm_dots3_note.serve(log)
    assert module.Dots3NoteImageProcessor.preprocess.fused_input_norm_wrapped
    for name, text, kwargs in calls:
        got = processor(text, **kwargs)
        assert sorted(got) == sorted(expected[name]), name
        for key, value in expected[name].items():
            assert type(got[key]) is type(value), (name, key)
            if isinstance(value, torch.Tensor):
                assert got[key].dtype == value.dtype and torch.equal(got[key], value), (name, key)
            else:
                assert got[key] == value, (name, key)
    assert not messages, messages
    # The sizes make what they are there for: 12 MP floored within the budget (206 x 276 patches), the extreme one
    # rounded (28 x 896: 2 x 64 patches), the detail and size settings under their budgets, a video's frames.
    grids = {name: expected[name]["image_grid_thw"].tolist() for name, _, kwargs in calls if "images" in kwargs}
    assert grids["3024x4032"] == [[1, 206, 276]] and grids["10x900"] == [[1, 2, 64]], grids
    assert expected["low-detail"]["pixel_values"].shape[0] * 14 * 14 <= 200704
    assert expected["max-pixels"]["pixel_values"].shape == (36 * 66, 3 * 2 * 14 * 14)  # 504 x 924
    assert len(expected["video"]["video_image_grid_thw"]) > 1


def test_each_call_equals_vllms_and_what_it_does_not_reproduce_runs_vllms_code(module, monkeypatch):
    """The wrapped method against vLLM's own, call by call: both patch orders (pre_pixel_shuffle or not), three
    temporal sizes, every mode vLLM converts (RGB, RGBA on white, L, P), each detail and size keyword, vLLM's own
    ValueError for a too thin image; a NumPy image goes to vLLM's code (its TypeError); a vLLM whose preprocess
    changed is not served; the plugin serves the module once vLLM has imported it."""
    import numpy as np
    import torch
    from PIL import Image

    from fused_input_norm import vllm_dots3_note, vllm_plugin

    cls = module.Dots3NoteImageProcessor
    original = cls.preprocess
    log, messages = recorded_log(monkeypatch, "test_vllm_dots3_note")
    assert "serves vLLM's Dots3NoteImageProcessor" in vllm_dots3_note.serve(log)
    rgb = photo(333, 517, 130)
    alpha = (photo(333, 517, 131)[..., 0] // 3 + 40).astype("uint8")
    images = [Image.fromarray(rgb), Image.fromarray(np.dstack([rgb, alpha]), "RGBA"), Image.fromarray(rgb[..., 0])]
    images += [Image.fromarray(rgb).convert("P"), Image.fromarray(photo(3, 400, 132))]  # the last too thin
    settings = [VISION, VISION | {"pre_pixel_shuffle": False, "temporal_patch_size": 1, "patch_size": 16}]
    settings.append(VISION | {"temporal_patch_size": 3, "image_mean": [0.5] * 3, "image_std": [0.5] * 3})
    calls = [{}, {"detail": "low"}, {"max_pixels": 40000}, {"min_pixels": 400000}, {"target_height": 99}]
    for config in settings:
        processor = cls(config, config["image_details"])
        for image in images:
            for kwargs in calls:
                try:
                    expected = original(processor, image, **kwargs)
                except ValueError as e:  # vLLM's own error for the thin image, raised by its own sizing
                    with pytest.raises(ValueError, match=str(e)):
                        processor.preprocess(image, **kwargs)
                    continue
                got = processor.preprocess(image, **kwargs)
                assert got[0].dtype == torch.float32 and torch.equal(got[0], expected[0]), (config, image, kwargs)
                assert got[1].dtype == expected[1].dtype and torch.equal(got[1], expected[1])
    assert not messages, messages  # every call above served
    with pytest.raises(TypeError):
        processor.preprocess(rgb)
    assert any("a ndarray, not a PIL image" in m for m in messages), messages
    monkeypatch.setattr(cls, "preprocess", lambda self, image, **kwargs: None)
    said = vllm_dots3_note.serve(log)
    assert said == (
        "vLLM's Dots3NoteImageProcessor serves: its Dots3NoteImageProcessor.preprocess is not vllm 0.34.0's (the one "
        "this reproduces)"
    ), said
    monkeypatch.setattr(cls, "preprocess", original)
    monkeypatch.setattr(vllm_plugin, "_say_once", lambda key, fmt, said: log.info(fmt, said))
    vllm_plugin.serve_imported()  # what the plugin does once vLLM has imported the module
    assert cls.preprocess.fused_input_norm_wrapped is original
    assert any("serves vLLM's Dots3NoteImageProcessor" in m for m in messages), messages


def test_serving_says_why_not_where_vllm_has_no_such_module(monkeypatch):
    from fused_input_norm import vllm_dots3_note

    monkeypatch.setattr(vllm_dots3_note, "MODULE", "vllm.models.no_such_model.processor")
    said = vllm_dots3_note.serve(logging.getLogger("test_vllm_dots3_note"))
    assert said.startswith("vLLM's Dots3NoteImageProcessor stays vLLM's: this vLLM has no vllm.models.no_such_model")
