"""vLLM 0.34.0's `apply()` with the plugin on against off, for the architectures served by a family they copy
(CohereCompass: Qwen2-VL's image processor; GLM-OCR: Glm46VImageProcessor, GLM-4.1V's; PaddleOCR-VL: the
paddleocr_vl family) and for those whose processor vLLM builds outside cached_processor_from_config
(OpenCUA: Qwen2VLImageProcessor made by vLLM's OpenCUAProcessor; BAGEL: SiglipImageProcessor from vLLM's
cached_get_image_processor; GLM-4V-9B: vLLM's own GLM4VImageProcessorFast, a TorchvisionBackend no family
reproduces, so the generic path's), reached by wrapping their processing info class (vllm_plugin.BUILT_ELSEWHERE),
and for Ovis2.5 / Ovis2.6 (Ovis2_5, Ovis2_6ForCausalLM, Ovis2_6_MoeForCausalLM: vLLM's own Ovis2_5Processor,
built through cached_processor_from_config, holding the checkpoint's SiglipImageProcessor, which it calls once per
image and once per video frame at its own smart_resize size: the siglip family's, images and videos) and
Ovis1.6 / Ovis2 (Ovis: vLLM's own OvisProcessor calling the checkpoint's SiglipImageProcessor or, Ovis2's,
CLIPImageProcessor with a 448 center crop that pads the crops it resizes smaller: the siglip and clip families)
and LFM3-VL (vLLM's own Lfm3VlProcessor, a Qwen3VLProcessor loading transformers' Qwen2VLImageProcessor: its
images; its videos are not compared, see NO_VIDEOS) and MiniMax-M3 (vLLM's own MiniMaxVLProcessor holding vLLM's
MiniMaxM3VLImageProcessor, a TorchvisionBackend no family reproduces: the generic path's images, and its videos,
whose MiniMaxM3VLVideoProcessor resizes float32 frames with torch's antialiased bicubic: "bicubic_f32").
Each side runs in its own process, as a server would (`bash scripts/test_vllm.sh`).

Tiny model directories (no weights): config.json from the config classes (vLLM's BagelConfig; OpenCUA's
remote-code config class written here, with what vLLM reads of it), a `tokenizers` tokenizer holding the
model's special tokens, preprocessor_config.json as the checkpoints ship it (GLM-OCR's and PaddleOCR-VL's
verbatim; CohereCompass's and OpenCUA's the class defaults Qwen2-VL's checkpoints ship; BAGEL's a SigLIP
processor at its 980-pixel vit_max_num_patch_per_side * patch_size; GLM-4V-9B ships none: vLLM's class holds
its settings, and its config.json is zai-org/glm-4v-9b's with tiny sizes, run as vLLM's ChatGLM model asks, with
hf_overrides naming GLM4VForCausalLM; Ovis's remote-code config class written here, with what vLLM reads of
it). Compared per request: prompt_token_ids, mm_placeholders, mm_hashes, every tensor (floats within 1e-6, the
rest exactly); the plugin's side must hold FusedHFImageProcessor (GLM-4V-9B: the
generic adapter, whose resize must run), say so once per model, and hand back no call but the one it must
(nearest resampling).
"""

import functools
import importlib.util
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import TEXT, assert_same_tensors, dump, glm_token_ids, outputs, tokenizer
from test_vllm_generic import counting_kernels
from test_vllm_processor import CLIP_MEAN, CLIP_STD, both_sides, class_name, photo

HAS_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

QWEN_TOKENS = ["<|vision_start|>", "<|image_pad|>", "<|vision_end|>", "<|video_pad|>"]
# model -> (architecture, the image placeholder of its prompts, the transformers class vLLM holds with the plugin off)
MODELS = {
    "cohere_compass": (
        "CohereCompassForConditionalGeneration",
        "<|VISION_START|><|IMAGE_PAD|><|VISION_END|>",
        "CohereCompassImageProcessor",
    ),
    "glm_ocr": (
        "GlmOcrForConditionalGeneration",
        "<|begin_of_image|><|image|><|end_of_image|>",
        "Glm46VImageProcessor",
    ),
    "paddleocr_vl": (
        "PaddleOCRVLForConditionalGeneration",
        "<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>",
        "PaddleOCRVLImageProcessor",
    ),
    "opencua": (
        "OpenCUAForConditionalGeneration",
        "<|media_begin|><|media_placeholder|><|media_end|>",
        "Qwen2VLImageProcessor",
    ),
    "bagel": ("BagelForConditionalGeneration", "<|image_pad|>", "SiglipImageProcessor"),
    "glm4v_9b": ("GLM4VForCausalLM", "<|begin_of_image|><|endoftext|><|end_of_image|>", "GLM4VImageProcessorFast"),
    "ovis2_5": ("Ovis2_5", "<image>", "SiglipImageProcessor"),
    "ovis2_6": ("Ovis2_6ForCausalLM", "<image>", "SiglipImageProcessor"),
    "ovis2_6_moe": ("Ovis2_6_MoeForCausalLM", "<image>", "SiglipImageProcessor"),
    "ovis1_6": ("Ovis", "<image>", "SiglipImageProcessor"),
    "ovis2": ("Ovis", "<image>", "CLIPImageProcessor"),
    "lfm3_vl": (
        "Lfm3VlForConditionalGeneration",
        "<|vision_start|><|image_pad|><|vision_end|>",
        "Qwen2VLImageProcessor",
    ),
    "minimax_m3": ("MiniMaxM3SparseForConditionalGeneration", "]<]image[>[", "MiniMaxM3VLImageProcessor"),
}
OVIS = ("ovis2_5", "ovis2_6", "ovis2_6_moe")  # vLLM's Ovis2_5Processor
OVIS_TILES = ("ovis1_6", "ovis2")  # vLLM's OvisProcessor (Ovis1.6, Ovis2): a grid of crops plus the whole image
# The models whose image processor no family reproduces, served by the generic path: model -> its class's module.
GENERIC = {
    "glm4v_9b": "vllm.transformers_utils.processors.glm4v",
    "minimax_m3": "vllm.transformers_utils.processors.minimax_m3",
}
# The generic models whose videos it does not serve, and why (the row says so: scripts/vllm_reach.py).
VIDEO_UNSERVED: dict[str, str] = {}
# The models vLLM takes one image a prompt of (no batch), and the sizes they get: 1080p and a tiny odd one.
ONE_IMAGE = {"glm4v_9b": [(1080, 1920), (57, 29)]}
# How the log names nearest resampling where the generic path hands it back (its resize's reason).
NEAREST_SAYS = {"glm4v_9b": "resize: resample=0 ", "minimax_m3": "resize: resample=0 "}
# What vLLM's ChatGLM model tells users to pass where the checkpoint names its text-only architecture
# (ChatGLMModel), as zai-org/glm-4v-9b does.
HF_OVERRIDES = {"glm4v_9b": {"architectures": ["GLM4VForCausalLM"]}}
# (height, width): 1080p, VGA, tiny, elongated (the 12 MP photo is test_vllm_families'; its CPU time is not spent twice)
SIZES = [(1080, 1920), (480, 640), (57, 29), (40, 900)]
# The models whose videos are compared too (vLLM's Ovis2_5Processor sends each frame through the image processor),
# and their prompt's video placeholder.
VIDEOS = {model: "<video>" for model in OVIS} | {"minimax_m3": "]<]video[>["}
# The models whose videos the plugin serves by a family but this test does not compare, and why (their reach row
# says partly: scripts/vllm_reach.py).
NO_VIDEOS = {
    "lfm3_vl": (
        "Qwen3VLVideoProcessor (qwen3_vl) is replaced, but not compared: stock vLLM 0.34.0 fails on a video "
        "request in tests/test_vllm_copies.py's LFM3-VL directory (Found 0 video placeholders), plugin on or off"
    )
}
# The models whose vLLM processor passes no per-request kwargs on to the image processor (so no nearest-resampling
# request to hand back): OpenCUA's and BAGEL's; Ovis's passes only its pixel bounds to its own smart_resize.
NO_IMAGE_KWARGS = ("opencua", "bagel", *OVIS, *OVIS_TILES)
# Per-request mm_processor_kwargs each model's processor takes, served: model -> kwargs.
REQUEST_KWARGS = {
    "cohere_compass": {"size": {"shortest_edge": 3136, "longest_edge": 401408}},
    "glm_ocr": {"size": {"shortest_edge": 3136, "longest_edge": 401408}},
    "paddleocr_vl": {"size": {"shortest_edge": 3136, "longest_edge": 401408}},
    "lfm3_vl": {"size": {"shortest_edge": 3136, "longest_edge": 401408}},
    "ovis1_6": {"max_partition": 4},  # its processor's own grid bound (9 by default)
    "ovis2": {"max_partition": 4},
}
VISION_QWEN = {"depth": 1, "hidden_size": 32, "num_heads": 2, "intermediate_size": 64, "out_hidden_size": 32}


def write_cohere_compass(path: str) -> None:
    from transformers import CohereCompassConfig

    os.makedirs(path, exist_ok=True)
    special = ["<BOS_TOKEN>", "<EOS_TOKEN>", "<|VISION_START|>", "<|IMAGE_PAD|>", "<|VISION_END|>", "<|VIDEO_PAD|>"]
    vocab = tokenizer(path, special, "<BOS_TOKEN>", "<EOS_TOKEN>")
    vision = VISION_QWEN | {"patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2}
    vision |= {"num_position_embeddings": 64, "deepstack_visual_indexes": []}
    tokens = {"image_token_id": vocab["<|IMAGE_PAD|>"], "video_token_id": vocab["<|VIDEO_PAD|>"]}
    tokens |= {"vision_start_token_id": vocab["<|VISION_START|>"], "vision_end_token_id": vocab["<|VISION_END|>"]}
    config = CohereCompassConfig(text_config=TEXT | {"sliding_window": 4096}, vision_config=vision, **tokens)
    config.architectures = ["CohereCompassForConditionalGeneration"]
    config.save_pretrained(path)
    # CohereCompassImageProcessor's defaults are Qwen2-VL's (its code); patch 16 as the tower's.
    preprocessor = {"image_processor_type": "CohereCompassImageProcessor", "processor_class": "CohereCompassProcessor"}
    preprocessor |= {"patch_size": 16, "merge_size": 2, "temporal_patch_size": 2, "image_mean": CLIP_MEAN}
    preprocessor |= {"image_std": CLIP_STD, "size": {"shortest_edge": 3136, "longest_edge": 12845056}}
    dump(path, "preprocessor_config.json", preprocessor)


def write_glm_ocr(path: str) -> None:
    from transformers import GlmOcrConfig

    os.makedirs(path, exist_ok=True)
    special = ["<|endoftext|>", "[gMASK]", "<sop>", "<|begin_of_image|>", "<|end_of_image|>", "<|image|>"]
    special += ["<|begin_of_video|>", "<|end_of_video|>", "<|video|>"]
    named = {"image_token": "<|image|>", "video_token": "<|video|>"}
    vocab = tokenizer(path, special, "<sop>", "<|endoftext|>", named)
    text = TEXT | {"partial_rotary_factor": 0.5}
    text["rope_parameters"] = {"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 10000.0}
    vision = VISION_QWEN | {"patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "image_size": 336}
    config = GlmOcrConfig(text_config=text, vision_config=vision, **glm_token_ids(vocab))
    config.architectures = ["GlmOcrForConditionalGeneration"]
    config.save_pretrained(path)
    preprocessor = {  # zai-org/GLM-OCR's, verbatim
        "size": {"shortest_edge": 12544, "longest_edge": 9633792},
        "do_rescale": True,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "image_processor_type": "Glm46VImageProcessor",
        "processor_class": "Glm46VProcessor",
    }
    dump(path, "preprocessor_config.json", preprocessor)


def write_paddleocr_vl(path: str) -> None:
    from transformers import PaddleOCRVLConfig

    os.makedirs(path, exist_ok=True)
    special = ["<s>", "</s>", "<|IMAGE_START|>", "<|IMAGE_PLACEHOLDER|>", "<|IMAGE_END|>", "<|video_pad|>"]
    named = {"image_token": "<|IMAGE_PLACEHOLDER|>"}
    vocab = tokenizer(path, special, "<s>", "</s>", named)
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2}
    vision |= {"patch_size": 14, "spatial_merge_size": 2, "image_size": 384}
    tokens = {"image_token_id": vocab["<|IMAGE_PLACEHOLDER|>"], "video_token_id": vocab["<|video_pad|>"]}
    tokens |= {"vision_start_token_id": vocab["<|IMAGE_START|>"], "vision_end_token_id": vocab["<|IMAGE_END|>"]}
    text = TEXT | {"head_dim": 16, "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3]}}
    config = PaddleOCRVLConfig(text_config=text, vision_config=vision, **tokens)
    config.architectures = ["PaddleOCRVLForConditionalGeneration"]
    config.save_pretrained(path)
    preprocessor = {  # PaddlePaddle/PaddleOCR-VL's
        "do_convert_rgb": True,
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "max_pixels": 2822400,
        "merge_size": 2,
        "min_pixels": 147384,
        "patch_size": 14,
        "resample": 3,
        "rescale_factor": 0.00392156862745098,
        "temporal_patch_size": 1,
        "image_processor_type": "PaddleOCRVLImageProcessor",
        "processor_class": "PaddleOCRVLProcessor",
    }
    dump(path, "preprocessor_config.json", preprocessor)


# OpenCUA's checkpoints ship their config class as remote code; this one holds what vLLM reads of it.
OPENCUA_CONFIG_CODE = """
from transformers import AutoConfig, PretrainedConfig
from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig


class OpenCUAConfig(PretrainedConfig):
    model_type = "opencua"
    is_composition = True

    def __init__(self, vision_config=None, text_config=None, media_placeholder_token_id=None, **kwargs):
        super().__init__(**kwargs)
        self.vision_config = Qwen2_5_VLVisionConfig(**(vision_config or {}))
        text_config = dict(text_config or {"model_type": "qwen2"})
        self.text_config = AutoConfig.for_model(text_config.pop("model_type"), **text_config)
        self.media_placeholder_token_id = media_placeholder_token_id

    def to_dict(self):
        out = super().to_dict()
        out["vision_config"], out["text_config"] = self.vision_config.to_dict(), self.text_config.to_dict()
        return out
"""


def write_opencua(path: str) -> None:
    os.makedirs(path, exist_ok=True)
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|media_begin|>", "<|media_placeholder|>"]
    special += ["<|media_end|>"]
    vocab = tokenizer(path, special, "<|im_start|>", "<|im_end|>")
    with open(os.path.join(path, "configuration_opencua.py"), "w") as f:
        f.write(OPENCUA_CONFIG_CODE)
    vision = VISION_QWEN | {"patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
    vision |= {"window_size": 112, "fullatt_block_indexes": [0], "in_chans": 3}
    config = {
        "architectures": ["OpenCUAForConditionalGeneration"],
        "model_type": "opencua",
        "auto_map": {"AutoConfig": "configuration_opencua.OpenCUAConfig"},
        "vision_config": vision,
        "text_config": TEXT | {"model_type": "qwen2", "max_position_embeddings": 32768},
        "media_placeholder_token_id": vocab["<|media_placeholder|>"],
    }
    dump(path, "config.json", config)
    preprocessor = {"image_processor_type": "Qwen2VLImageProcessor", "patch_size": 14, "merge_size": 2}
    preprocessor |= {"temporal_patch_size": 2, "min_pixels": 3136, "max_pixels": 12845056}
    preprocessor |= {"image_mean": CLIP_MEAN, "image_std": CLIP_STD}
    dump(path, "preprocessor_config.json", preprocessor)


def write_bagel(path: str) -> None:
    from vllm.transformers_utils.configs.bagel import BagelConfig

    os.makedirs(path, exist_ok=True)
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>"]
    tokenizer(path, special, "<|im_start|>", "<|im_end|>")
    vit = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2}
    vit |= {"patch_size": 14, "image_size": 980}
    config = BagelConfig(llm_config=TEXT | {"max_position_embeddings": 32768}, vit_config=vit)
    config.vit_max_num_patch_per_side = 4  # few placeholder tokens: the pixels are what is compared
    config.architectures = ["BagelForConditionalGeneration"]
    config.save_pretrained(path)
    preprocessor = {"image_processor_type": "SiglipImageProcessor", "size": {"height": 980, "width": 980}}
    preprocessor |= {"resample": 3, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    dump(path, "preprocessor_config.json", preprocessor)


def write_glm4v_9b(path: str) -> None:
    """zai-org/glm-4v-9b's config.json (vLLM's ChatGLMConfig reads it: no remote code) at tiny sizes, its image
    size 1120 and patch 14 kept; the checkpoint's tokenizer is remote code (tiktoken), so a WordLevel one holds
    its special tokens here. No preprocessor_config.json: the checkpoint ships none, vLLM's class holds it all."""
    os.makedirs(path, exist_ok=True)
    special = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>"]
    special += ["<|assistant|>", "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>"]
    vocab = tokenizer(path, special, "<sop>", "<|endoftext|>")
    model = "modeling_chatglm.ChatGLMForConditionalGeneration"
    auto_map = {"AutoConfig": "configuration_chatglm.ChatGLMConfig", "AutoModel": model}
    auto_map |= {"AutoModelForCausalLM": model, "AutoModelForSeq2SeqLM": model}
    auto_map["AutoModelForSequenceClassification"] = "modeling_chatglm.ChatGLMForSequenceClassification"
    vision = {"dropout_prob": 0.0, "hidden_act": "gelu", "in_channels": 3, "num_hidden_layers": 1, "hidden_size": 32}
    vision |= {"patch_size": 14, "num_heads": 2, "intermediate_size": 64, "layer_norm_eps": 1e-06}
    vision |= {"num_positions": 6401, "image_size": 1120, "scaling_factor": 8}
    config = {
        "_name_or_path": "THUDM/glm-4v-9b",
        "model_type": "chatglm",
        "architectures": ["ChatGLMModel"],
        "auto_map": auto_map,
        "add_bias_linear": False,
        "add_qkv_bias": True,
        "apply_query_key_layer_scaling": True,
        "apply_residual_connection_post_layernorm": False,
        "attention_dropout": 0.0,
        "attention_softmax_in_fp32": True,
        "bias_dropout_fusion": True,
        "ffn_hidden_size": 64,
        "fp32_residual_connection": False,
        "hidden_dropout": 0.0,
        "hidden_size": 32,
        "kv_channels": 16,
        "layernorm_epsilon": 1.5625e-07,
        "multi_query_attention": True,
        "multi_query_group_num": 1,
        "num_attention_heads": 2,
        "num_layers": 1,
        "original_rope": True,
        "padded_vocab_size": 64,
        "post_layer_norm": True,
        "rmsnorm": True,
        "seq_length": 8192,
        "use_cache": True,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.42.4",
        "tie_word_embeddings": False,
        "eos_token_id": [vocab["<|endoftext|>"], vocab["<|user|>"], vocab["<|observation|>"]],
        "pad_token_id": vocab["<|endoftext|>"],  # also the image placeholder vLLM's GLM-4V processing expands
        "boi_token_id": vocab["<|begin_of_image|>"],
        "eoi_token_id": vocab["<|end_of_image|>"],
        "vision_config": vision,
    }
    dump(path, "config.json", config)


# Ovis2.5's checkpoints ship their config class as remote code (configuration_ovis2_5.py); this one holds what
# vLLM reads of it: the ViT's patch_size, hidden_stride and temporal_patch_size, the LLM's config.
OVIS_CONFIG_CODE = """
from transformers import AutoConfig, PretrainedConfig


class Siglip2NavitConfig(PretrainedConfig):
    model_type = "siglip2_navit"

    def __init__(self, hidden_size=1152, patch_size=16, hidden_stride=2, temporal_patch_size=1, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size, self.patch_size = hidden_size, patch_size
        self.hidden_stride, self.temporal_patch_size = hidden_stride, temporal_patch_size


class Ovis2_5_Config(PretrainedConfig):
    model_type = "ovis2_5"
    sub_configs = {"vit_config": Siglip2NavitConfig}

    def __init__(self, llm_config=None, vit_config=None, visual_vocab_size=65536, hidden_size=None, **kwargs):
        llm_config = dict(llm_config or {"model_type": "qwen3"})
        self.llm_config = AutoConfig.for_model(llm_config.pop("model_type"), **llm_config)
        self.vit_config = Siglip2NavitConfig(**(vit_config or {}))
        self.visual_vocab_size = visual_vocab_size
        super().__init__(**kwargs)  # reads get_text_config(): llm_config is set before
        self.hidden_size = hidden_size

    def get_text_config(self, *args, **kwargs):
        return self.llm_config

    def to_dict(self):
        out = super().to_dict()
        out["llm_config"], out["vit_config"] = self.llm_config.to_dict(), self.vit_config.to_dict()
        return out
"""


def write_ovis(path: str, architecture: str) -> None:
    """An Ovis2.5 directory (Ovis2.6's run through the same vLLM model and processor: their architecture names
    here). Its preprocessor_config.json is the SigLIP2 so400m-patch16-512 tower's, as Ovis2.5's checkpoints ship
    it: a SiglipImageProcessor (bilinear, mean and std 0.5, 512x512 that vLLM's processor overrides per image with
    its own smart_resize) inside vLLM's Ovis2_5Processor, which vLLM builds through cached_processor_from_config."""
    os.makedirs(path, exist_ok=True)
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|image_pad|>", "<image>", "<video>"]
    tokenizer(path, special, "<|im_start|>", "<|im_end|>")
    with open(os.path.join(path, "configuration_ovis2_5.py"), "w") as f:
        f.write(OVIS_CONFIG_CODE)
    vit = {"model_type": "siglip2_navit", "hidden_size": 32, "patch_size": 16, "hidden_stride": 2}
    config = {
        "architectures": [architecture],
        "model_type": "ovis2_5",
        "auto_map": {"AutoConfig": "configuration_ovis2_5.Ovis2_5_Config"},
        "llm_config": TEXT | {"model_type": "qwen3", "head_dim": 16, "max_position_embeddings": 40960},
        "vit_config": vit | {"temporal_patch_size": 1},
        "visual_vocab_size": 64,
        "hidden_size": 32,
    }
    dump(path, "config.json", config)
    preprocessor = {"do_convert_rgb": None, "do_normalize": True, "do_rescale": True, "do_resize": True}
    preprocessor |= {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 2}
    preprocessor |= {"image_processor_type": "SiglipImageProcessor", "processor_class": "SiglipProcessor"}
    preprocessor |= {"rescale_factor": 1 / 255, "size": {"height": 512, "width": 512}}
    dump(path, "preprocessor_config.json", preprocessor)


def write_ovis_tiles(path: str, tower: str) -> None:
    """An Ovis1.6 or Ovis2 directory: vLLM's own OvisConfig reads its config.json (no remote code); vLLM's
    OvisProcessor holds the checkpoint's image processor and calls it per crop at a height x width of its own,
    then pads each to a square. The preprocessor_config.json is the vision tower's, as these checkpoints ship
    it: Ovis1.6's SigLIP so400m-patch14-384 (SiglipImageProcessor, 384x384, bicubic, 0.5) and Ovis2's AIMv2
    huge-patch14-448 (CLIPImageProcessor, shortest edge 448 and a 448 center crop, which pads the crops vLLM
    resizes smaller than 448 along a side: transformers' zero padding, then vLLM's own)."""
    os.makedirs(path, exist_ok=True)
    siglip = tower == "siglip"
    pad = "<unused0>" if siglip else "<|image_pad|>"  # vLLM's IMAGE_PAD_TOKEN_MAP: Gemma 2's, Qwen2's
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", pad, "<image>"]
    tokenizer(path, special, "<|im_start|>", "<|im_end|>")
    side = 384 if siglip else 448
    backbone = {"model_type": "siglip_vision_model" if siglip else "aimv2", "image_size": side, "patch_size": 14}
    backbone |= {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    visual = {"model_type": "siglip_visual_tokenizer" if siglip else "aimv2_visual_tokenizer"}
    visual |= {"backbone_config": backbone, "hidden_stride": 2, "vocab_size": 64}
    llm = TEXT | {"model_type": "gemma2" if siglip else "qwen2", "max_position_embeddings": 32768}
    config = {"architectures": ["Ovis"], "model_type": "ovis", "llm_config": llm, "hidden_size": 32}
    dump(path, "config.json", config | {"visual_tokenizer_config": visual})
    if siglip:
        preprocessor = {"image_processor_type": "SiglipImageProcessor", "processor_class": "SiglipProcessor"}
        preprocessor |= {"size": {"height": 384, "width": 384}, "image_mean": [0.5] * 3, "image_std": [0.5] * 3}
    else:
        preprocessor = {"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 448}}
        preprocessor |= {"do_center_crop": True, "crop_size": {"height": 448, "width": 448}, "do_convert_rgb": True}
        preprocessor |= {"image_mean": CLIP_MEAN, "image_std": CLIP_STD}
    preprocessor |= {"do_normalize": True, "do_rescale": True, "do_resize": True, "resample": 3}
    dump(path, "preprocessor_config.json", preprocessor | {"rescale_factor": 1 / 255})


def write_lfm3_vl(path: str) -> None:
    """An LFM3-VL directory: vLLM's own Lfm3VlConfig (no remote code) at tiny sizes. vLLM's Lfm3VlProcessor (a
    Qwen3VLProcessor) loads transformers' Qwen2VLImageProcessor and Qwen3VLVideoProcessor from it, in place of
    the checkpoints' remote-code wrappers of those classes; their configs here are those classes' as Qwen3-VL's
    checkpoints ship them (patch 16, merge 2, mean and std 0.5): LFM3-VL's own are not readable offline."""
    from vllm.transformers_utils.configs.lfm3_vl import Lfm3VlConfig

    os.makedirs(path, exist_ok=True)
    vocab = tokenizer(path, ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *QWEN_TOKENS], "<|im_start|>", "<|im_end|>")
    text = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "head_dim": 16}
    text |= {"num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 32768}
    text |= {"pad_token_id": vocab["<|endoftext|>"], "bos_token_id": vocab["<|im_start|>"]}
    text["eos_token_id"] = vocab["<|im_end|>"]
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2}
    vision |= {"num_key_value_heads": 1, "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2}
    tokens = {"image_token_id": vocab["<|image_pad|>"], "video_token_id": vocab["<|video_pad|>"]}
    tokens |= {"vision_start_token_id": vocab["<|vision_start|>"], "vision_end_token_id": vocab["<|vision_end|>"]}
    config = Lfm3VlConfig(vision_config=vision, text_config=text, projector_hidden_size=32, **tokens)
    config.architectures = ["Lfm3VlForConditionalGeneration"]
    config.save_pretrained(path)
    common = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5] * 3}
    common |= {"image_std": [0.5] * 3}
    images = {
        "image_processor_type": "Qwen2VLImageProcessor",
        "size": {"shortest_edge": 65536, "longest_edge": 16777216},
    }
    dump(path, "preprocessor_config.json", common | images)
    videos = {
        "video_processor_type": "Qwen3VLVideoProcessor",
        "size": {"shortest_edge": 4096, "longest_edge": 25165824},
    }
    dump(path, "video_preprocessor_config.json", common | videos | {"fps": 2, "min_frames": 4, "max_frames": 768})


MINIMAX_TOKENS = ["]<]image[>[", "]<]video[>[", "]<]start of image[>[", "]<]end of image[>["]


def write_minimax_m3(path: str) -> None:
    """A MiniMax-M3 directory: transformers' own MiniMaxM3VLConfig (config.json, no remote code) at tiny sizes;
    vLLM builds its own MiniMaxVLProcessor from it, which loads vLLM's MiniMaxM3VLImageProcessor and
    MiniMaxM3VLVideoProcessor (transformers' TorchvisionBackend and video backend, no family: the generic path)
    from preprocessor_config.json / video_preprocessor_config.json: their class defaults here, as the
    checkpoint's own are not readable offline."""
    from transformers import MiniMaxM3VLConfig

    os.makedirs(path, exist_ok=True)
    vocab = tokenizer(path, ["<s>", "</s>", *MINIMAX_TOKENS], "<s>", "</s>")
    text = TEXT | {"head_dim": 16, "max_position_embeddings": 32768, "bos_token_id": vocab["<s>"]}
    text["eos_token_id"] = vocab["</s>"]
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2}
    tokens = {"image_token_index": vocab[MINIMAX_TOKENS[0]], "video_token_index": vocab[MINIMAX_TOKENS[1]]}
    config = MiniMaxM3VLConfig(text_config=text, vision_config=vision, projector_hidden_size=32, **tokens)
    config.architectures = ["MiniMaxM3SparseForConditionalGeneration"]
    config.save_pretrained(path)
    processor = {"processor_class": "MiniMaxVLProcessor"}
    dump(path, "preprocessor_config.json", processor | {"image_processor_type": "MiniMaxM3VLImageProcessor"})
    dump(path, "video_preprocessor_config.json", processor | {"video_processor_type": "MiniMaxM3VLVideoProcessor"})


WRITERS = {
    "cohere_compass": write_cohere_compass,
    "glm_ocr": write_glm_ocr,
    "paddleocr_vl": write_paddleocr_vl,
    "opencua": write_opencua,
    "bagel": write_bagel,
    "glm4v_9b": write_glm4v_9b,
    "lfm3_vl": write_lfm3_vl,
    "minimax_m3": write_minimax_m3,
} | {model: functools.partial(write_ovis, architecture=MODELS[model][0]) for model in OVIS}
WRITERS |= {
    "ovis1_6": functools.partial(write_ovis_tiles, tower="siglip"),
    "ovis2": functools.partial(write_ovis_tiles, tower="aimv2"),
}


def requests(model: str):
    """(name, prompt, modality, items, mm_processor_kwargs): each size alone, a batch of three, the model's
    per-request kwargs, nearest resampling (a call FusedImageProcessor hands back; where the processor takes it)
    and a video of four frames (where its processor takes videos)."""
    import numpy as np
    from PIL import Image

    placeholder = MODELS[model][1]
    sizes = ONE_IMAGE.get(model, SIZES)
    out = [
        (f"{h}x{w}", f"{placeholder} describe", "image", [Image.fromarray(photo(h, w, i))], {})
        for i, (h, w) in enumerate(sizes)
    ]
    batch = [Image.fromarray(photo(h, w, 20 + i)) for i, (h, w) in enumerate([(480, 640), (1080, 1920), (57, 29)])]
    if model in OVIS_TILES:  # stock vLLM 0.34.0 fails on an Ovis prompt whose images' crop grids differ
        batch = [Image.fromarray(photo(480, 640, 20 + i)) for i in range(3)]  # (a ragged placeholder tensor)
    if model not in ONE_IMAGE:
        out.append(("batch", " and ".join([placeholder] * 3) + " compare them", "image", batch, {}))
    if model in REQUEST_KWARGS:
        out.append(("kwargs", " and ".join([placeholder] * 2) + " compare", "image", batch[:2], REQUEST_KWARGS[model]))
    if model not in NO_IMAGE_KWARGS:
        out.append(("fallback", f"{placeholder} describe", "image", batch[:1], {"resample": 0}))
    if model in VIDEOS:
        video = np.stack([photo(480, 640, 30 + i) for i in range(4)])
        out.append(("video", f"{VIDEOS[model]} describe", "video", [video], {}))
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
    counts = counting_kernels() if os.environ.get("FUSED_INPUT_NORM_VLLM_PROCESSOR") == "1" else {"resize": 0}
    results = {}
    for model in MODELS:
        path = os.path.join(root, model)
        config = ModelConfig(
            model=path,
            tokenizer=path,
            dtype="float32",
            seed=0,
            trust_remote_code=model == "opencua" or model in OVIS,
            hf_overrides=HF_OVERRIDES.get(model, {}),
        )
        processor = MULTIMODAL_REGISTRY.create_processor(config)
        results[f"{model}-class"] = class_name(processor.info.get_hf_processor().image_processor)
        for name, prompt, modality, items, kwargs in requests(model):
            before = counts["resize"]
            out = processor(prompt, processor.info.parse_mm_data({modality: items}), hf_processor_mm_kwargs=kwargs)
            results[f"{model}-{name}"] = outputs(out, modality)
            results[f"{model}-{name}-class"] = class_name(processor.info.get_hf_processor(**kwargs).image_processor)
            results[f"{model}-{name}-resized"] = counts["resize"] - before  # the generic path's resizes served
    # Every class vllm_plugin.BUILT_ELSEWHERE names, LLaVA-OneVision-2's included (whose remote-code processor no
    # directory here can hold), is wrapped once vLLM's registry loads its model.
    from vllm.model_executor.models.registry import ModelRegistry

    from fused_input_norm.vllm_plugin import BUILT_ELSEWHERE

    for architecture in ELSEWHERE:
        ModelRegistry.models[architecture].load_model_cls()
    results["wrapped"] = {
        name: hasattr(getattr(sys.modules[name], info).get_hf_processor, "fused_input_norm_wrapped")
        for name, info in BUILT_ELSEWHERE.items()
    }
    torch.save(results, out_path)


ELSEWHERE = (
    "OpenCUAForConditionalGeneration",
    "LlavaOnevision2ForConditionalGeneration",
    "BagelForConditionalGeneration",
    "GLM4VForCausalLM",
)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    for model, write in WRITERS.items():
        write(str(root / model))
    return both_sides(root, __file__)


ADAPTER = "fused_input_norm.hf_adapter.FusedHFImageProcessor"
GENERIC_ADAPTER = "fused_input_norm.hf_adapter.FusedHFGenericImageProcessor"


@pytest.mark.parametrize("model", MODELS)
def test_same_outputs_plugin_on_and_off(sides, model):
    on, off = sides
    adapter = GENERIC_ADAPTER if model in GENERIC else ADAPTER
    assert on[f"{model}-class"] == adapter, on[f"{model}-class"]
    upstream = off[f"{model}-class"]
    assert upstream.startswith(GENERIC.get(model, "transformers.")) and upstream.endswith(MODELS[model][2]), upstream
    names = [name for name, *_ in requests_names(model)]
    for name in names:
        got, expected = on[f"{model}-{name}"], off[f"{model}-{name}"]
        assert on[f"{model}-{name}-class"] == adapter, (name, on[f"{model}-{name}-class"])
        if model in GENERIC:  # the package's resize computed it (none where the call is handed back)
            assert (on[f"{model}-{name}-resized"] > 0) == (name != "fallback"), (name, on[f"{model}-{name}-resized"])
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
            assert got[field] == expected[field], f"{model} {name}: {field}"
        assert_same_tensors(f"{model} {name}", got["tensors"], expected["tensors"])
        pixels = [key for key in got["tensors"][0] if "pixel_values" in key]  # pixel_values_videos, Ovis's video_...
        assert len(pixels) == 1 and all(item[pixels[0]].numel() for item in got["tensors"]), (name, pixels)


def requests_names(model: str) -> list[tuple]:
    """The request names of `model` (without building its images)."""
    names = [(f"{h}x{w}",) for h, w in ONE_IMAGE.get(model, SIZES)] + ([] if model in ONE_IMAGE else [("batch",)])
    names += [("kwargs",)] if model in REQUEST_KWARGS else []
    names += [("fallback",)] if model not in NO_IMAGE_KWARGS else []
    return names + ([("video",)] if model in VIDEOS else [])


@pytest.mark.parametrize("model", MODELS)
def test_log_says_once_which_processor_serves_images(sides, model):
    """One line per model names the architecture and says FusedImageProcessor (the generic path) serves its
    images; no call is handed back but nearest resampling's."""
    on, off = sides
    architecture, _, upstream = MODELS[model]
    lines = [line for line in on["log"] if f"'{architecture}'" in line and "serves images" in line]
    lines = [line for line in lines if f"transformers' {upstream}" in line]  # Ovis: two directories, two classes
    assert len(lines) == 1, on["log"]
    says = f"transformers' {upstream} runs with" if model in GENERIC else f"in place of transformers' {upstream}"
    assert says in lines[0], lines
    nearest = NEAREST_SAYS.get(model, "nearest")
    handed_back = [line for line in on["log"] if f"{upstream} serves this call" in line and nearest not in line]
    assert not handed_back, handed_back
    if ("fallback",) in requests_names(model):  # the call it must hand back is logged as transformers'
        assert any(f"{upstream} serves this call" in line and nearest in line for line in on["log"]), on["log"]
    assert not any(f"'{architecture}'" in line for line in off["log"]), off["log"]


def test_every_processor_built_elsewhere_is_reached(sides):
    """vLLM's processing info classes of OpenCUA, LLaVA-OneVision-2, BAGEL and GLM-4V-9B are wrapped with the
    plugin on (after vLLM's registry loads the model, as a server does), and not with it off."""
    on, off = sides
    assert len(on["wrapped"]) == 4 and all(on["wrapped"].values()), on["wrapped"]
    assert not any(off["wrapped"].values()), off["wrapped"]


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
