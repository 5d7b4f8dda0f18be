"""vLLM's own image processors served in their class by wrapping one method: OpenVLA's (OpenVLAImageProcessor, by
vllm_openvla), Isaac's (IsaacImageProcessor, by vllm_isaac), Step3-VL's (Step3VLImageProcessor, by vllm_step3;
its directory and requests in tests/test_vllm_step3.py) and DeepSeek-VL2's (DeepseekVLV2Processor, by
vllm_deepseek_vl2; tests/test_vllm_deepseek_vl2.py's), and Muse Spark's and MiMo-V2-Omni's preprocessing (no
processor class: their modules' functions, by vllm_muse_spark and vllm_mimo). vLLM 0.34.0's `apply()` with the plugin on
(FUSED_INPUT_NORM_VLLM_PROCESSOR=1) against off (=0), each side one process for all six models, as a server
runs (`bash scripts/test_vllm.sh` runs it), on tiny model directories (no weights).

OpenVLA: config.json as openvla/openvla-7b ships it (its null act-layer overrides included, the Llama small; a
tokenizer with a BOS, after which vLLM inserts the image tokens). One image per prompt (OpenVLA takes one): a 12 MP
photo, 1080p, a small odd one, an extreme one, one already 224 x 224 (Pillow copies it), a grey and an RGBA PIL
image, and a uint8 array (vLLM's own to_rgb_image makes each RGB, on both sides). 6-channel pixel_values (DINOv2's
then SigLIP's normalization).

Isaac: config.json as PerceptronAI/Isaac-0.1's layout (Qwen3 text fields at the top, a pixel-shuffle SigLIP2
vision config, its null attention implementation; the sizes small). vLLM builds IsaacImageProcessor with its own
defaults (patch 16, 256 to 6144 patches, pixel shuffle 2) whatever the config says; one request sets
vision_max_num_patches and pixel_shuffle_scale per request. Images: 12 MP, 1080p, small ones upscaled to the
256-patch floor, an extreme one, grey, RGBA, and two in one prompt. pixel_values are rows of [16, 16, 3] patches.

MiMo-V2-Omni: config.json from vLLM's and transformers' config classes (no checkpoint reachable here), vLLM's
defaults for the pixel budgets; the images of photo_requests.

Compared: prompt_token_ids, mm_placeholders, mm_hashes and every tensor (float32 bit for bit here, within 1e-6
asked). In-process tests check what is handed back to vLLM's code, and that a changed vLLM function is not served.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_vllm_deepseek_vl2 as deepseek_vl2
import test_vllm_step3 as step3
from test_vllm_families import (
    HAS_VLLM,
    TEXT,
    VISION,
    assert_same_tensors,
    dump,
    one_side,
    recorded_log,
    tokenizer,
    unwrapped,
)
from test_vllm_processor import both_sides, photo

pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

MODULE = "vllm.transformers_utils.processors.openvla"
ISAAC = "vllm.transformers_utils.processors.isaac"
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


def photo_requests(placeholder: str, seed: int, pair: bool = False) -> list:
    """The image requests the models here share, one image each (photo seeds from `seed`): SIZES, a grey and an
    RGBA PIL image; with `pair`, two images in one prompt too."""
    import numpy as np
    from PIL import Image

    prompt = f"{placeholder} describe"
    out = [(f"{h}x{w}", prompt, [Image.fromarray(photo(h, w, seed + i))]) for i, (h, w) in enumerate(SIZES)]
    rgb = photo(300, 400, seed + 10)
    alpha = (photo(300, 400, seed + 11)[..., 0] // 2 + 64).astype("uint8")
    out.append(("gray", prompt, [Image.fromarray(rgb[..., 1])]))
    out.append(("rgba", prompt, [Image.fromarray(np.dstack([rgb, alpha]), "RGBA")]))
    if pair:
        two = [Image.fromarray(photo(480, 640, seed + 12)), Image.fromarray(photo(641, 479, seed + 13))]
        out.append(("two", f"{placeholder} and {placeholder} describe", two))
    return out


def requests():
    """(name, prompt, images): one image each; the prompts start with the BOS Llama's tokenizer adds (the
    WordLevel one here adds none)."""
    return [*photo_requests("<s>", 0), ("array", "<s> describe", [photo(480, 640, 12)])]


def write_isaac(path: str) -> None:
    """PerceptronAI/Isaac-0.1's config.json layout (vLLM's own IsaacConfig reads it: no remote code): Qwen3's text
    fields at the top level, a pixel_shuffle_siglip2 vision config, the vision settings, its null attention
    implementation; the sizes small."""
    os.makedirs(path, exist_ok=True)
    vocab = tokenizer(path, ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<|image_pad|>"],
                      "<|im_start|>", "<|endoftext|>")  # fmt: skip
    vision = VISION | {"model_type": "pixel_shuffle_siglip2", "patch_size": 16, "num_patches": 256}
    config = {
        "architectures": ["IsaacForConditionalGeneration"],
        "auto_map": {
            "AutoConfig": "modular_isaac.IsaacConfig",
            "AutoModelForCausalLM": "modular_isaac.IsaacForConditionalGeneration",
        },
        "model_type": "isaac",
        **TEXT,
        "head_dim": 16,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "use_sliding_window": False,
        "tie_word_embeddings": False,
        "bos_token_id": vocab["<|im_start|>"],
        "eos_token_id": vocab["<|endoftext|>"],
        "vision_config": vision | {"pixel_shuffle_scale_factor": 2},
        "vision_patch_size": 16,
        "vision_max_num_patches": 6144,
        "vision_min_num_patches": 256,
        "pixel_shuffle_scale": 2,
        "max_sequence_length": 16384,
        "vision_token": "<image>",
        "vision_attn_implementation": None,
        "torch_dtype": "float32",
        "transformers_version": "4.56.1",
    }
    dump(path, "config.json", config)


def isaac_requests():
    """(name, prompt, images[, mm_processor_kwargs]): Isaac's prompts hold "<image>" per image."""
    from PIL import Image

    out = photo_requests("<image>", 20, pair=True)
    settings = {"vision_max_num_patches": 1024, "pixel_shuffle_scale": 1}
    out.append(("kwargs", "<image> describe", [Image.fromarray(photo(1080, 1920, 34))], settings))
    return out


MUSE_SPARK = "vllm.models.muse_spark.common.processor"
MUSE_SPECIAL = ["<|begin_of_text|>", "<|end_of_text|>", "<|image_start|>", "<|image_end|>", "<|patch|>"]
MUSE_SPECIAL += ["<|video|>", "<|vid_start|>", "<|vid_end|>", "<|vid_frame_separator|>"]


def write_muse_spark(path: str) -> None:
    """A Muse Spark directory (MuseSparkForConditionalGeneration, vLLM's own MuseSparkConfig): no public checkpoint
    to copy, so config.json holds what MuseSparkConfig checks for (SiLU text layers with per-layer RoPE thetas, a
    GELU vision tower with axial RoPE, patch 14, temporal patch 2, merge 2, an audio tower) and processor_config.json
    the image and video settings vLLM reads (a 1024-token image budget, 16 frames at 2 fps, 64 tokens a frame);
    the sizes small, the tokenizer holding the image and video tokens vLLM's prompt updates look up."""
    os.makedirs(path, exist_ok=True)
    tokenizer(path, MUSE_SPECIAL, "<|begin_of_text|>", "<|end_of_text|>")
    layers, vision_layers = TEXT["num_hidden_layers"], VISION["num_hidden_layers"]
    text = TEXT | {
        "model_type": "muse_spark_text",
        "hidden_act": "silu",
        "attention_bias": False,
        "head_dim": 16,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
        "num_shared_experts": 0,
        "layer_types": ["full_attention"] * layers,
        "mlp_layer_types": ["dense"] * layers,
        "layer_rope_theta": [500000.0] * layers,
    }
    vision = VISION | {
        "model_type": "muse_spark_vision",
        "hidden_act": "gelu",
        "rope_parameters": {"rope_type": "axial"},
        "layer_types": ["full_attention"] * vision_layers,
        "patch_size": 14,
        "patch_temporal": 2,
        "merge_size": 2,
    }
    audio = {"model_type": "muse_spark_audio", "hidden_act": "gelu", "patch_sizes": [2], "depths": [1]}
    audio |= {"hidden_sizes": [32], "num_hidden_layers": 1, "out_hidden_size": TEXT["hidden_size"]}
    config = {
        "architectures": ["MuseSparkForConditionalGeneration"],
        "model_type": "muse_spark",
        "text_config": text,
        "vision_config": vision,
        "audio_config": audio,
        "projector_hidden_size": 64,
        "out_hidden_size": VISION["hidden_size"] * 4,
        "projector_hidden_act": "gelu",
        "torch_dtype": "bfloat16",
    }
    dump(path, "config.json", config)
    images = {"max_image_tokens": 1024, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    videos = {"num_frames": 16, "fps": 2.0, "max_video_frame_tokens": 64}
    dump(path, "processor_config.json", {"processor_class": "MuseSparkProcessor", "image_processor": images,
                                         "video_processor": videos})  # fmt: skip


def muse_spark_requests():
    """Images (12 MP and 1080p cut to the token budget, small ones grown to it, an RGBA one vLLM composites on
    white, a grey one, two in one prompt) and videos (8 frames at 4 fps, sampled to 4 at 2 fps; 3 frames, cut to
    the 2 a temporal patch takes; 1080p frames)."""
    import numpy as np

    out = photo_requests("<|patch|>", 40, pair=True)
    for name, count, fps, (h, w) in [("video-8", 8, 4.0, (240, 320)), ("video-3", 3, 1.0, (97, 61)),
                                      ("video-1080p", 4, 2.0, (1080, 1920))]:  # fmt: skip
        frames = np.stack([photo(h, w, 60 + i) for i in range(count)])
        meta = {"fps": fps, "frames_indices": list(range(count)), "total_num_frames": count}
        out.append((name, "<|video|> describe", {"video": [(frames, meta)]}))
    return out


MIMO = "vllm.transformers_utils.processors.mimo_v2_omni"
MIMO_SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>"]
MIMO_SPECIAL += ["<|video_pad|>", "<|mimo_audio_start|>", "<|mimo_audio_end|>", "<|audio_pad|>"]
MIMO_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"
MIMO_VIDEO = "<|vision_start|><|video_pad|><|vision_end|>"


def write_mimo(path: str) -> None:
    """A MiMo-V2-Omni directory (MiMoV2OmniForCausalLM): no checkpoint reachable here to copy, so config.json is
    what vLLM 0.34.0 reads: transformers' MiMoV2FlashConfig fields (model_type mimo_v2_flash; vLLM names the
    architecture Omni for a config with a vision_config), the vision tower's settings vLLM's Mimo_VLVisionConfig
    takes (patch 14, merge 2, temporal patch 2) and the processor_config with the special tokens' ids vLLM's prompt
    updates assert on; its defaults for the pixel budgets (4 to 4096 merged patches an image). Sizes small."""
    os.makedirs(path, exist_ok=True)
    vocab = tokenizer(path, MIMO_SPECIAL, "<|im_start|>", "<|im_end|>")
    text = TEXT | {"head_dim": 16, "v_head_dim": 16, "layer_types": ["full_attention"], "mlp_layer_types": ["dense"]}
    vision = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "patch_size": 14}
    vision |= {"spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 32, "fullatt_block_indexes": [0]}
    ids = {"image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>", "audio_token_id": "<|audio_pad|>"}
    ids |= {"vision_start_token_id": "<|vision_start|>", "vision_end_token_id": "<|vision_end|>"}
    ids |= {"video_start_token_id": "<|vision_start|>", "video_end_token_id": "<|vision_end|>"}
    ids |= {"audio_start_token_id": "<|mimo_audio_start|>", "audio_end_token_id": "<|mimo_audio_end|>"}
    config = {
        "architectures": ["MiMoV2OmniForCausalLM"],
        "model_type": "mimo_v2_flash",
        **text,
        "vision_config": vision,
        "processor_config": {name: vocab[token] for name, token in ids.items()},
        "torch_dtype": "bfloat16",
    }
    dump(path, "config.json", config)


def mimo_requests():
    """Images: photo_requests' (12 MP cut to the 4096-patch budget, small ones grown to 4, grey, RGBA: vLLM's
    convert("RGB") drops the alpha, two in one prompt). Videos (THWC bytes, as vLLM's loader gives them; the model
    file makes them float32 TCHW): 8 frames of 240 x 320, 3 of 20 x 61 (padded to 4 by repeating the last, the
    short side grown to 28, then to the pixel minimum), 4 of 1080p."""
    import numpy as np

    out = photo_requests(MIMO_IMAGE, 80, pair=True)
    video = f"{MIMO_VIDEO} describe"
    for name, count, (h, w) in [("video-8", 8, (240, 320)), ("video-3", 3, (20, 61)), ("video-1080p", 4, (1080, 1920))]:
        out.append((name, video, {"video": [np.stack([photo(h, w, 70 + i) for i in range(count)])]}))
    return out


# Each model: its directory's writer, its requests, its image processor's class (None: vLLM holds no processor
# object), the method its module wraps ("module:function" for a module's function).
MODELS = {
    "openvla": (write_openvla, requests, f"{MODULE}.OpenVLAImageProcessor", "__call__"),
    "isaac": (write_isaac, isaac_requests, f"{ISAAC}.IsaacImageProcessor", "__call__"),
    "step3_vl": (step3.write_step3_vl, step3.requests, f"{step3.MODULE}.Step3VLImageProcessor", "__call__"),
    "deepseek_vl2": (
        deepseek_vl2.write_model,
        deepseek_vl2.requests,
        f"{deepseek_vl2.MODULE}.DeepseekVLV2Processor",
        "tokenize_with_images",
    ),
    "muse_spark": (write_muse_spark, muse_spark_requests, None, f"{MUSE_SPARK}:_resize"),
    "mimo": (write_mimo, mimo_requests, f"{MIMO}._ImageProcessor", f"{MIMO}:_transform_single"),
}


def worker(root: str, out_path: str) -> None:
    """One side: every model's requests through apply(), in one process; the results to `out_path`."""
    import torch

    sides = {
        name: one_side(os.path.join(root, name), requests(), method)
        for name, (_, requests, _, method) in MODELS.items()
    }
    torch.save(sides, out_path)


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    for name, (write, *_) in MODELS.items():
        write(str(root / name))
    return both_sides(root, __file__)


def model_sides(both, model: str) -> list[dict]:
    """One model's results, plugin on and off, with the processes' log lines."""
    return [side[model] | {"log": side["log"]} for side in both]


@pytest.fixture(scope="module")
def sides(both):
    """OpenVLA's results, plugin on and off."""
    return model_sides(both, "openvla")


def assert_same_requests(on: dict, off: dict, model: str, names: list[str]) -> None:
    """Served on the plugin's side only, the same class on both, each request's outputs equal."""
    assert on["served"] and not off["served"], model
    assert on["class"] == off["class"] == (MODELS[model][2] or "builtins.NoneType")
    for name in names:
        got, expected = on[name], off[name]
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
            assert got[field] == expected[field], f"{model} {name}: {field}"
        assert_same_tensors(name, got["tensors"], expected["tensors"])


def assert_served_without_hand_backs(on: dict, off: dict, cls: str) -> None:
    """The plugin's process logs that it serves `cls` and hands no call of it back; the other names it not."""
    assert any(f"serves vLLM's {cls}" in entry for entry in on["log"]), on["log"]
    assert not any("serves this call" in entry and cls in entry for entry in on["log"]), on["log"]
    assert not any(f"serves vLLM's {cls}" in entry for entry in off["log"]), off["log"]


def test_no_call_of_any_model_is_handed_back(both):
    on, _ = both
    assert not [line for line in on["log"] if "serves this call" in line], on["log"]


def test_muse_spark_same_outputs_plugin_on_and_off(both):
    """Muse Spark: vLLM's own preprocessing (no processor object), its Pillow LANCZOS resizes served."""
    on, off = model_sides(both, "muse_spark")
    assert_same_requests(on, off, "muse_spark", [name for name, *_ in muse_spark_requests()])
    assert [tuple(t.shape) for item in on["two"]["tensors"] for t in item.values()] == [(3, 476, 644), (3, 644, 476)]
    assert [tuple(item["videos"].shape) for item in on["video-8"]["tensors"]] == [(4, 3, 196, 252)]
    assert_served_without_hand_backs(on, off, "Muse Spark preprocessing")


def test_mimo_same_outputs_plugin_on_and_off(both):
    """MiMo-V2-Omni: vLLM's own image and video preprocessing (module functions), its float32 resizes served. The
    sides run at 1 torch thread, as a server's processes do: torch's channels-last float kernel for RGB (the
    generic one, at 2 threads, in test_mimo_calls_it_does_not_reproduce_run_vllms_code)."""
    on, off = model_sides(both, "mimo")
    assert_same_requests(on, off, "mimo", [name for name, *_ in mimo_requests()])
    # 12 MP: within the 4096 merged-patch budget (4 rows of 3 * 2 * 14 * 14 per merged patch); 10 x 900: its short
    # side grown to 28, the long one with it (28 x 2520).
    assert 3000 < on["3024x4032"]["tensors"][0]["pixel_values"].shape[0] <= 4096 * 4
    assert [tuple(item["image_grid_thw"].tolist()) for item in on["10x900"]["tensors"]] == [(1, 2, 180)]
    # 3 frames of 20 x 61: padded to 4 (2 temporal groups), the short side grown to 28 (28 x 84), then to the pixel
    # minimum (56 x 112)
    assert [tuple(item["video_grid_thw"].tolist()) for item in on["video-3"]["tensors"]] == [(2, 4, 8)]
    assert [tuple(item["video_grid_thw"].tolist()) for item in on["video-8"]["tensors"]] == [(4, 18, 22)]
    assert_served_without_hand_backs(on, off, "MiMo-V2-Omni preprocessing")


def test_step3_same_outputs_plugin_on_and_off(both):
    """Step3-VL (tests/test_vllm_step3.py's directory and requests): float32 within 1e-6, the rest exactly."""
    import torch

    on, off = model_sides(both, "step3_vl")
    names = [name for name, *_ in step3.requests()]
    assert_same_requests(on, off, "step3_vl", names)
    # The sizes make what they are there for: windows (12 MP, 1080p, the small odd one), none (tiny, per request).
    windows = {name: [int(item["num_patches"]) for item in on[name]["tensors"]] for name in names}
    assert windows == {"3024x4032": [30], "1080x1920": [8], "57x29": [2], "10x90": [0], "no-windows": [0, 0]}
    assert all(t.dtype == torch.float32 for item in on["1080x1920"]["tensors"] for k, t in item.items() if "pixel" in k)
    assert_served_without_hand_backs(on, off, "Step3VLImageProcessor")


def test_deepseek_vl2_same_outputs_plugin_on_and_off(both):
    """DeepSeek-VL2 (tests/test_vllm_deepseek_vl2.py's directory and requests)."""
    on, off = model_sides(both, "deepseek_vl2")
    assert_same_requests(on, off, "deepseek_vl2", deepseek_vl2.NAMES)
    # The 1080p image is tiled (cropping on); with three images each has one tile besides its global view.
    assert on["1080x1920"]["tensors"][0]["pixel_values"].shape[0] > 2
    assert [item["pixel_values"].shape[0] for item in on["three"]["tensors"]] == [2, 2, 2]
    assert_served_without_hand_backs(on, off, "DeepseekVLV2Processor")


def test_isaac_same_outputs_plugin_on_and_off(both):
    on, off = model_sides(both, "isaac")
    assert_same_requests(on, off, "isaac", [name for name, *_ in isaac_requests()])
    for name, *_ in isaac_requests():
        for item in on[name]["tensors"]:
            rows, columns = item["image_grid_thw"].tolist()[1:]
            assert item["pixel_values"].shape == (rows * columns, 16 * 16 * 3), name
    # vLLM's defaults (6144 patches at most, shuffle 2): a 12 MP photo fills the budget; the request's own
    # settings give a smaller grid (1024 patches at most, no shuffle).
    assert on["3024x4032"]["tensors"][0]["pixel_values"].shape[0] <= 6144
    assert on["kwargs"]["tensors"][0]["pixel_values"].shape[0] <= 1024
    assert len(on["two"]["tensors"]) == 2


def test_isaac_log_says_fused_serves_it(both):
    assert_served_without_hand_backs(*model_sides(both, "isaac"), "IsaacImageProcessor")


def test_same_outputs_plugin_on_and_off(sides):
    on, off = sides
    assert_same_requests(on, off, "openvla", [name for name, *_ in requests()])
    for name, *_ in requests():
        assert [tuple(item["pixel_values"].shape) for item in on[name]["tensors"]] == [(6, 224, 224)], name
        assert on[name]["mm_placeholders"] == [(1, 256)], name  # after the BOS: (224 / 14)^2 image tokens


def test_log_says_fused_serves_openvla(sides):
    assert_served_without_hand_backs(*sides, "OpenVLAImageProcessor")


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
    log, messages = recorded_log(monkeypatch, "test_vllm_own")
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


def test_isaac_calls_it_does_not_reproduce_run_vllms_code(monkeypatch):
    """In this process: a served call (three images, per-call settings, return_tensors) equals vLLM's own bit
    for bit; no images, a subclass, a CPU where torch resizes uint8 in float, and an image over vLLM's pixel
    ceiling (its own ValueError, before any kernel) go to vLLM's code; a vLLM whose function changed is not
    served."""
    import importlib

    import numpy as np
    import torch
    from PIL import Image

    from fused_input_norm import resize, vllm_isaac

    module = importlib.import_module(ISAAC)
    cls = module.IsaacImageProcessor
    original = unwrapped(monkeypatch, cls, "__call__")
    log, messages = recorded_log(monkeypatch, "test_vllm_own")
    try:
        assert "serves vLLM's IsaacImageProcessor" in vllm_isaac.serve(log)
        assert cls.__call__ is not original
        images = [
            Image.fromarray(photo(300, 700, 1)),
            Image.fromarray(photo(57, 29, 2)),
            Image.fromarray(photo(9, 5, 3)),
        ]
        for processor, kwargs in [
            (cls(), {}),
            (cls(vision_max_num_patches=512), {"pixel_shuffle_scale": 1, "return_tensors": "pt"}),
            (cls(), {"patch_size": 14, "min_num_patches": 64, "max_num_patches": 300}),
        ]:
            served, expected = processor(images, **kwargs), original(processor, images, **kwargs)
            assert served.keys() == expected.keys() == {"pixel_values", "image_grid_thw"}
            assert torch.equal(served["pixel_values"], expected["pixel_values"]), kwargs
            assert torch.equal(served["image_grid_thw"], expected["image_grid_thw"]), kwargs

        class Subclass(cls):
            pass

        got, expected = Subclass()(images[:1]), original(Subclass(), images[:1])
        assert torch.equal(got["pixel_values"], expected["pixel_values"])
        assert cls()([])["pixel_values"].shape == original(cls(), [])["pixel_values"].shape == (0, 0)
        huge = Image.fromarray(np.zeros((1, 1), np.uint8)).resize((8000, 8000))  # 64 MP: over MAX_PIXELS
        with pytest.raises(ValueError, match="> MAX="):
            cls()([huge])
        for bad in [{"patch_size": 16.0}, {"pixel_shuffle_scale": "2"}, {"patch_size": 0}]:  # vLLM's own outcome
            try:
                expected = original(cls(), images[:1], **bad)
            except Exception as e:
                with pytest.raises(type(e)):
                    cls()(images[:1], **bad)
            else:
                assert torch.equal(cls()(images[:1], **bad)["pixel_values"], expected["pixel_values"]), bad
        monkeypatch.setattr(resize, "torch_uint8_kernel", lambda: False)
        got, expected = cls()(images), original(cls(), images)
        assert torch.equal(got["pixel_values"], expected["pixel_values"])
    finally:
        cls.__call__ = original
    assert any("no images" in m for m in messages), messages
    assert any("Subclass is a subclass of IsaacImageProcessor" in m for m in messages), messages
    assert any("resizes uint8 with its float kernel" in m for m in messages), messages
    assert any("patch_size 16.0 or pixel_shuffle_scale 2 is not an int" in m for m in messages), messages
    monkeypatch.setattr(module, "patchify_vision", lambda image, patch_size: None)
    said = vllm_isaac.serve(log)
    assert said == (
        "vLLM's IsaacImageProcessor serves: its patchify_vision is not vllm 0.34.0's (the one this reproduces)"
    ), said
    assert cls.__call__ is original


def test_muse_spark_calls_it_does_not_reproduce_run_vllms_code(monkeypatch):
    """In this process: served resizes equal vLLM's own (an image's HWC-backed view, a video's frames); an image
    not in RGB and frames of one channel go to vLLM's functions; a vLLM whose function changed is not served."""
    import importlib

    import numpy as np
    import torch
    from PIL import Image

    from fused_input_norm import vllm_muse_spark

    module = importlib.import_module(MUSE_SPARK)
    originals = {name: unwrapped(monkeypatch, module, name) for name in ("_resize", "_resize_frames")}
    for name, original in originals.items():  # what this test's end puts back, whatever serve() does here
        monkeypatch.setattr(module, name, original)
    log, messages = recorded_log(monkeypatch, "test_vllm_own")
    assert "serves vLLM's Muse Spark preprocessing" in vllm_muse_spark.serve(log)
    image = Image.fromarray(photo(301, 517, 70))
    got, expected = module._resize(image, 196, 336), originals["_resize"](image, 196, 336)
    assert torch.equal(got, expected) and got.stride() == expected.stride()
    frames = torch.from_numpy(np.stack([photo(97, 61, 71 + i) for i in range(4)])).permute(0, 3, 1, 2)
    got, expected = module._resize_frames(frames, 56, 28), originals["_resize_frames"](frames, 56, 28)
    assert torch.equal(got, expected) and got.stride() == expected.stride()
    # Inputs vLLM never hands them (it makes both RGB first): its own functions' own errors, raised the same.
    for name, args in [("_resize", (image.convert("L"), 28, 56)), ("_resize_frames", (frames[:, :1], 28, 28))]:
        with pytest.raises(Exception) as theirs:
            originals[name](*args)
        with pytest.raises(type(theirs.value)):
            getattr(module, name)(*args)
    assert any("mode 'L', not RGB" in m for m in messages), messages
    assert any("frames of 1 channels" in m for m in messages), messages
    for name, original in originals.items():
        monkeypatch.setattr(module, name, original)
    monkeypatch.setattr(module, "_resize", lambda image, target_h, target_w: None)
    said = vllm_muse_spark.serve(log)
    assert said == (
        "vLLM's Muse Spark preprocessing stays its own: its _resize is not vllm 0.34.0's (the one this reproduces)"
    ), said
    assert module._resize_frames is originals["_resize_frames"]


@pytest.mark.parametrize("threads", [1, 2])
def test_mimo_calls_it_does_not_reproduce_run_vllms_code(monkeypatch, threads):
    """In this process, at 1 and 2 torch threads (torch's two float kernels for RGB): served images equal vLLM's
    own _transform_single (values and sizes), served videos its _transform_batch (float32 frames in either layout,
    of any values, and bytes); a tensor image and 4-channel frames go to vLLM's functions; a vLLM whose function
    changed is not served."""
    import importlib

    import numpy as np
    import torch
    from PIL import Image

    from fused_input_norm import vllm_mimo

    module = importlib.import_module(MIMO)
    original = unwrapped(monkeypatch, module, "_transform_single")
    monkeypatch.setattr(module, "_transform_single", original)  # what this test's end puts back
    original_batch = unwrapped(monkeypatch, module, "_transform_batch")
    monkeypatch.setattr(module, "_transform_batch", original_batch)
    log, messages = recorded_log(monkeypatch, "test_vllm_own")
    monkeypatch.setattr(module.MiMoVLProcessor, "_flatten_visual", module.MiMoVLProcessor._flatten_visual)
    unwrapped(monkeypatch, module.MiMoVLProcessor, "_flatten_visual")
    assert "serves vLLM's MiMo-V2-Omni preprocessing (images and videos)" in vllm_mimo.serve(log)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for (h, w), seed in [((301, 517), 90), ((1080, 1920), 91), ((40, 30), 92)]:
            image = Image.fromarray(photo(h, w, seed))
            got, expected = module._transform_single(image, 28, 3136, 1003520), original(image, 28, 3136, 1003520)
            assert got[1:] == expected[1:], (h, w)
            assert torch.equal(got[0], expected[0]), (h, w, int((got[0] != expected[0]).sum()))
        rng = np.random.default_rng(threads)
        thwc = np.stack([photo(97, 61, 94), photo(97, 61, 95)])
        for frames in [
            torch.from_numpy(thwc).permute(0, 3, 1, 2).float(),  # as vLLM's model file makes them: channels-last
            torch.from_numpy(thwc).permute(0, 3, 1, 2).contiguous(),  # bytes
            torch.from_numpy(rng.normal(0, 100, (4, 3, 240, 320)).astype(np.float32)),  # contiguous, any values
            torch.from_numpy(rng.normal(0, 1, (2, 3, 1080, 1920)).astype(np.float32)),
        ]:
            args = (frames, 28, 3136, 1003520)
            got, expected = module._transform_batch(*args), original_batch(*args)
            assert got[1:] == expected[1:], tuple(frames.shape)
            assert torch.equal(got[0], expected[0]), (tuple(frames.shape), int((got[0] != expected[0]).sum()))
        assert not messages, messages  # the images and videos were served, none handed back
        # vLLM's mean and std made under another default dtype (its cache, as _standardize fills it): handed back
        cache = {"cpu": tuple(torch.tensor(v, dtype=torch.float64).view(1, -1, 1, 1) for v in ([1.0] * 3, [3.0] * 3))}
        monkeypatch.setattr(module, "_mean_std_cache", cache)
        frames = torch.from_numpy(thwc).permute(0, 3, 1, 2).float()
        assert torch.equal(
            module._transform_batch(frames, 28, 3136, 1003520)[0], original_batch(frames, 28, 3136, 1003520)[0]
        )
        assert any("a mean and std of torch.float64" in m for m in messages), messages
        monkeypatch.setattr(module, "_mean_std_cache", {})
        four = torch.from_numpy(np.stack([photo(64, 96, 96)] * 2)[..., [0, 1, 2, 0]]).permute(0, 3, 1, 2).float()
        with pytest.raises(RuntimeError):  # vLLM's own standardization of 4 channels, after the hand-back
            module._transform_batch(four, 28, 3136, 1003520)
        chw = torch.from_numpy(photo(64, 96, 93)).permute(2, 0, 1)
        got, expected = module._transform_single(chw, 28, 3136, 1003520), original(chw, 28, 3136, 1003520)
        assert torch.equal(got[0], expected[0])
    finally:
        torch.set_num_threads(before)
    assert any("a Tensor, not a PIL image" in m for m in messages), messages
    assert any("frames of shape (2, 4, 64, 96)" in m for m in messages), messages
    # _flatten_visual: an image's rows (repeated temporal_patch_size times) and a video's, positional and by keyword.
    processor = module.MiMoVLProcessor.__new__(module.MiMoVLProcessor)
    processor.patch_size, processor.merge_size, processor.temporal_patch_size = 14, 2, 2
    processor.temporal_compression_ratio = 1
    flatten = getattr(module.MiMoVLProcessor._flatten_visual, "fused_input_norm_wrapped", None)
    assert flatten is not None
    for kind, shape in [("image", (3, 56, 84)), ("video", (4, 3, 28, 56))]:
        visual = torch.randn(shape, generator=torch.Generator().manual_seed(threads))
        expected = flatten(processor, visual, kind)
        for got in (processor._flatten_visual(visual, kind), processor._flatten_visual(kind=kind, visual=visual)):
            assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1]), kind
            assert got[1].dtype == expected[1].dtype == torch.int32
    monkeypatch.setattr(module, "_transform_single", original)
    monkeypatch.setattr(module, "_transform_batch", original_batch)
    monkeypatch.setattr(module, "_transform_batch", lambda frames, factor, min_px, max_px, device=None: None)
    said = vllm_mimo.serve(log)
    assert said == (
        "vLLM's MiMo-V2-Omni preprocessing stays its own: its _transform_batch is not vllm 0.34.0's (the one "
        "this reproduces)"
    ), said
    assert module._transform_single is original


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
