"""The plugin serves by image processor, not by model name: vLLM 0.34.0's `apply()` for architectures that hold
an image processor FusedImageProcessor reproduces, with the plugin on (FUSED_INPUT_NORM_VLLM_PROCESSOR=1)
against off (=0), each side in its own process as a server would (`bash scripts/test_vllm.sh` runs it).

Tiny local model directories written here (config.json from transformers' config classes, a `tokenizers`
tokenizer with the model's special tokens, preprocessor_config.json as the checkpoints have it; no weights):
  LLaVA-1.5 (LlavaForConditionalGeneration): transformers' CLIPImageProcessor, 336 crops;
  PaliGemma (PaliGemmaForConditionalGeneration): SiglipImageProcessor, 224x224;
  Qwen3-VL-MoE (Qwen3VLMoeForConditionalGeneration): Qwen2VLImageProcessor under an architecture the
    plugin's old allowlist turned away, with vLLM's device normalize on (uint8 rows) and off;
  InternVL (InternVLChatModel, remote code): vLLM's own InternVLChatImageProcessor (vllm_internvl), with its
    per-request min/max_dynamic_patch and dynamic_image_size; its InternVLChatVideoProcessor on a second
    directory whose vocabulary has the video token;
  Gemma 3 (pan and scan per request), InternVL3 in transformers' format (GotOcr2ImageProcessor), GLM-4.1V,
    LLaVA-OneVision and Llama 4 (Llama4ImageProcessor, max_patches and resize_to_max_canvas per request): run
    where this tree has their family (skipped, with the reason, before it lands);
  Mistral Small 3.x (Mistral3ForConditionalGeneration, a per-request longest edge, device normalize on and
    off) and Pixtral-12B (LlavaForConditionalGeneration with a Pixtral tower): PixtralImageProcessor, through
    PixtralProcessor's per-call patch_size;
  LLaVA-NeXT 1.6 (LlavaNextForConditionalGeneration), Granite 4 Vision (Granite4VisionForConditionalGeneration,
    Granite Vision's 27 pinpoints) and LLaVA-NeXT-Video (LlavaNextVideoForConditionalGeneration: its videos,
    LlavaNextVideoVideoProcessor): LlavaNextImageProcessor, per-request resample and mean / std.
Compared, for every request: prompt_token_ids, mm_placeholders, mm_hashes and every tensor of every item of
mm_kwargs (uint8 and integer ones exactly, float32 within 1e-6); the plugin's side must hold a
FusedHFImageProcessor and say so in its log line.
"""

import functools
import importlib.util
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from family_checks import GRANITE_VISION, LLAVA_NEXT_V16
from test_vllm_processor import CLIP_MEAN, CLIP_STD, both_sides, class_name, photo, write_model

HAS_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

# model -> (architecture, the image placeholder of its prompts, the device-normalize settings it runs (both
# where vLLM's model supports it: uint8 rows, then float32), the image processor it holds)
MODELS = {
    "llava": ("LlavaForConditionalGeneration", "<image>", (None,), "CLIPImageProcessor"),
    "paligemma": ("PaliGemmaForConditionalGeneration", "<image>", (None,), "SiglipImageProcessor"),
    "qwen3_vl_moe": (
        "Qwen3VLMoeForConditionalGeneration",
        "<|vision_start|><|image_pad|><|vision_end|>",
        (True, False),
        "Qwen2VLImageProcessor",
    ),
    "internvl_chat": ("InternVLChatModel", "<image>", (None,), "InternVLChatImageProcessor"),
    # The same with a video token in its vocabulary (a Qwen2 text model's): vLLM builds its video processor
    # too, and then refuses per-request min/max_dynamic_patch (it passes them to the video processor's
    # constructor), so the videos have a directory of their own.
    "internvl_chat_video": ("InternVLChatModel", "<image>", (None,), "InternVLChatImageProcessor"),
    "gemma3": ("Gemma3ForConditionalGeneration", "<start_of_image>", (True, False), "Gemma3ImageProcessor"),
    "internvl": ("InternVLForConditionalGeneration", "<IMG_CONTEXT>", (None,), "GotOcr2ImageProcessor"),
    "glm4v": (
        "Glm4vForConditionalGeneration",
        "<|begin_of_image|><|image|><|end_of_image|>",
        (True, False),
        "Glm4vImageProcessor",
    ),
    "llava_onevision": ("LlavaOnevisionForConditionalGeneration", "<image>", (None,), "LlavaOnevisionImageProcessor"),
    # The same two directories again for their videos (LlavaOnevisionVideoProcessor, InternVLVideoProcessor).
    "llava_onevision_video": (
        "LlavaOnevisionForConditionalGeneration",
        "<image>",
        (None,),
        "LlavaOnevisionImageProcessor",
    ),
    "internvl_video": ("InternVLForConditionalGeneration", "<IMG_CONTEXT>", (None,), "GotOcr2ImageProcessor"),
    "mistral3": ("Mistral3ForConditionalGeneration", "[IMG]", (True, False), "PixtralImageProcessor"),
    # Pixtral-12B in transformers' format: LLaVA's architecture with a Pixtral tower and PixtralProcessor.
    "pixtral_llava": ("LlavaForConditionalGeneration", "[IMG]", (None,), "PixtralImageProcessor"),
    "llama4": ("Llama4ForConditionalGeneration", "<|image|>", (None,), "Llama4ImageProcessor"),
    "idefics3": ("Idefics3ForConditionalGeneration", "<image>", (None,), "Idefics3ImageProcessor"),
    "smolvlm": ("SmolVLMForConditionalGeneration", "<image>", (None,), "SmolVLMImageProcessor"),
    "llava_next": ("LlavaNextForConditionalGeneration", "<image>", (None,), "LlavaNextImageProcessor"),
    "granite4_vision": ("Granite4VisionForConditionalGeneration", "<image>", (None,), "LlavaNextImageProcessor"),
    # LLaVA-NeXT-Video: vLLM takes only its videos (LlavaNextVideoVideoProcessor); it holds the image processor
    "llava_next_video": ("LlavaNextVideoForConditionalGeneration", "<image>", (None,), "LlavaNextImageProcessor"),
}


def family_missing(model: str) -> bool:
    """Whether this tree has no family for the model's image processor (issue 35's families land one by one):
    its cases are then skipped, and the workers do not run it."""
    from fused_input_norm import config

    return config.kind_of({"image_processor_type": MODELS[model][3]}) is None


# Models whose transformers processor vLLM cannot build here, for a reason outside this package: model -> why.
# SmolVLMProcessor imports num2words (for its video prompts) and refuses to build without it; vLLM does not
# depend on it.
UNBUILDABLE = {
    "smolvlm": None if importlib.util.find_spec("num2words") else "transformers' SmolVLMProcessor needs num2words"
}
RUN = [model for model in MODELS if not family_missing(model) and not UNBUILDABLE.get(model)]
WORDS = ["[UNK]", "describe", "these", "images", "and", "compare", "them", "."]
# (height, width): a 12 MP phone photo, 1080p, VGA, tiny, elongated, and one at the crop size already.
SIZES = [(3024, 4032), (1080, 1920), (480, 640), (57, 29), (40, 900), (336, 336)]


def tokenizer(
    path: str, special: list[str], bos: str, eos: str, named: dict | None = None, special_first: bool = False
) -> dict:
    """A WordLevel tokenizer holding `special`, saved as transformers saves one (`named`: its extra special
    tokens by attribute name, e.g. image_token; `special_first`: `special` take ids 0, 1, ..., as in
    tokenizers whose code relies on those ids); its vocabulary."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(special + WORDS if special_first else WORDS + special)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(special)
    PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        bos_token=bos,
        eos_token=eos,
        pad_token=eos,
        extra_special_tokens=named or {},
    ).save_pretrained(path)
    return vocab


def dump(path: str, name: str, content: dict) -> None:
    with open(os.path.join(path, name), "w") as f:
        json.dump(content, f)


TEXT = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1}
TEXT |= {"num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 4096}
VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2}


def write_llava(path: str) -> None:
    """LLaVA-1.5's layout: a CLIP ViT-L/14-336 tower's sizes, a Llama text model, CLIPImageProcessor (shortest
    edge 336, center crop 336) and the LlavaProcessor settings of llava-hf/llava-1.5-7b-hf."""
    from transformers import LlavaConfig

    os.makedirs(path, exist_ok=True)
    vocab = tokenizer(path, ["<s>", "</s>", "<image>"], "<s>", "</s>")
    vision = VISION | {"model_type": "clip_vision_model", "image_size": 336, "patch_size": 14, "projection_dim": 32}
    config = LlavaConfig(
        text_config=TEXT | {"model_type": "llama"},
        vision_config=vision,
        image_token_index=vocab["<image>"],
        vision_feature_select_strategy="default",
        vision_feature_layer=-2,
    )
    config.architectures = ["LlavaForConditionalGeneration"]
    config.save_pretrained(path)
    dump(
        path,
        "preprocessor_config.json",
        {
            "image_processor_type": "CLIPImageProcessor",
            "processor_class": "LlavaProcessor",
            "size": {"shortest_edge": 336},
            "crop_size": {"height": 336, "width": 336},
            "do_center_crop": True,
            "resample": 3,
            "image_mean": CLIP_MEAN,
            "image_std": CLIP_STD,
        },
    )
    processor = {"processor_class": "LlavaProcessor", "patch_size": 14, "vision_feature_select_strategy": "default"}
    dump(path, "processor_config.json", processor | {"num_additional_image_tokens": 1, "image_token": "<image>"})


def write_paligemma(path: str) -> None:
    """PaliGemma's layout: a SigLIP tower at 224 (patch 14: 256 image tokens), a Gemma text model,
    SiglipImageProcessor at 224x224 with mean = std = 0.5."""
    from transformers import PaliGemmaConfig

    os.makedirs(path, exist_ok=True)
    vocab = tokenizer(path, ["<bos>", "<eos>", "<image>", "\n"], "<bos>", "<eos>")  # vLLM appends "\n"
    vision = VISION | {"model_type": "siglip_vision_model", "image_size": 224, "patch_size": 14}
    vision["projection_dim"] = 32
    text = TEXT | {"model_type": "gemma", "head_dim": 16, "vocab_size": 2048}  # PaliGemma adds 1,152 loc/seg tokens
    config = PaliGemmaConfig(text_config=text, vision_config=vision, image_token_index=vocab["<image>"])
    config.architectures = ["PaliGemmaForConditionalGeneration"]
    config.save_pretrained(path)
    dump(
        path,
        "preprocessor_config.json",
        {
            "image_processor_type": "SiglipImageProcessor",
            "processor_class": "PaliGemmaProcessor",
            "size": {"height": 224, "width": 224},
            "resample": 3,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "image_seq_length": 256,
        },
    )


def write_qwen3_vl_moe(path: str) -> None:
    """Qwen3-VL's tiny directory (test_vllm_processor.write_model) with a mixture-of-experts text model: the
    config of Qwen3-VL-30B-A3B's kind, the same Qwen3VLProcessor and Qwen2VLImageProcessor."""
    write_model(path, "qwen3_vl")
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    config["model_type"] = "qwen3_vl_moe"
    config["architectures"] = ["Qwen3VLMoeForConditionalGeneration"]
    text = config["text_config"]
    text |= {"model_type": "qwen3_vl_moe_text", "num_experts": 4, "num_experts_per_tok": 2}
    text |= {"moe_intermediate_size": 32, "decoder_sparse_step": 1, "mlp_only_layers": []}
    config["vision_config"]["model_type"] = "qwen3_vl_moe"
    dump(path, "config.json", config)


# InternVL's checkpoints ship their config class as remote code; this one holds what vLLM reads of it.
INTERNVL_CONFIG_CODE = """
from transformers import AutoConfig, PretrainedConfig


class InternVisionConfig(PretrainedConfig):
    model_type = "intern_vit_6b"

    def __init__(self, image_size=448, patch_size=14, hidden_size=32, num_hidden_layers=1, **kwargs):
        super().__init__(**kwargs)
        self.image_size, self.patch_size = image_size, patch_size
        self.hidden_size, self.num_hidden_layers = hidden_size, num_hidden_layers


class InternVLChatConfig(PretrainedConfig):
    model_type = "internvl_chat"
    is_composition = True

    def __init__(self, vision_config=None, llm_config=None, **kwargs):
        super().__init__(**kwargs)
        self.vision_config = InternVisionConfig(**(vision_config or {}))
        llm_config = dict(llm_config or {"model_type": "qwen2"})
        self.llm_config = AutoConfig.for_model(llm_config.pop("model_type"), **llm_config)

    def to_dict(self):
        out = super().to_dict()
        out["vision_config"], out["llm_config"] = self.vision_config.to_dict(), self.llm_config.to_dict()
        return out
"""


def write_internvl_chat(path: str, video: bool = False) -> None:
    """A remote-code InternVL3 checkpoint's layout (InternVLChatModel, a Qwen2 text model, 448 tiles of patch
    14 at downsample 0.5: 256 tokens a tile; 1 to 12 tiles and a thumbnail), its config class written here."""
    os.makedirs(path, exist_ok=True)
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>", "<image>"]
    if video:  # a Qwen2 text model's video token: vLLM then takes videos too
        special += ["<video>", "<|video_pad|>"]
    tokenizer(path, special, "<|im_start|>", "<|im_end|>")
    with open(os.path.join(path, "configuration_internvl_chat.py"), "w") as f:
        f.write(INTERNVL_CONFIG_CODE)
    config = {
        "architectures": ["InternVLChatModel"],
        "model_type": "internvl_chat",
        "auto_map": {"AutoConfig": "configuration_internvl_chat.InternVLChatConfig"},
        "vision_config": {"image_size": 448, "patch_size": 14, "hidden_size": 32, "num_hidden_layers": 1},
        "llm_config": TEXT | {"model_type": "qwen2", "max_position_embeddings": 32768},
        "downsample_ratio": 0.5,
        "force_image_size": 448,
        "min_dynamic_patch": 1,
        "max_dynamic_patch": 12,
        "dynamic_image_size": True,
        "use_thumbnail": True,
        "ps_version": "v2",
        "select_layer": -1,
        "template": "internvl2_5",
    }
    dump(path, "config.json", config)


def write_gemma3(path: str) -> None:
    """Gemma 3's layout: a SigLIP tower at 896 (256 tokens an image), Gemma3ImageProcessor (bilinear, 896x896,
    mean = std = 0.5), its preprocessor_config.json as the checkpoints ship it: do_pan_and_scan and the
    pan_and_scan settings null (Gemma3Processor's call fills them where a request turns pan and scan on)."""
    from transformers import Gemma3Config

    os.makedirs(path, exist_ok=True)
    named = {"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>"}
    newlines = ["\n" * n for n in range(1, 5)]  # vLLM's Gemma 3 processing looks these up
    vocab = tokenizer(path, ["<bos>", "<eos>", *newlines, *named.values()], "<bos>", "<eos>", named)
    config = Gemma3Config(
        text_config=TEXT | {"model_type": "gemma3_text", "head_dim": 16, "sliding_window": 512},
        vision_config=VISION | {"model_type": "siglip_vision_model", "image_size": 896, "patch_size": 14},
        mm_tokens_per_image=256,
        boi_token_index=vocab["<start_of_image>"],
        eoi_token_index=vocab["<end_of_image>"],
        image_token_index=vocab["<image_soft_token>"],
    )
    config.architectures = ["Gemma3ForConditionalGeneration"]
    config.save_pretrained(path)
    preprocessor = {"image_processor_type": "Gemma3ImageProcessor", "processor_class": "Gemma3Processor"}
    preprocessor |= {"size": {"height": 896, "width": 896}, "resample": 2, "image_mean": [0.5] * 3}
    preprocessor |= {"image_std": [0.5] * 3, "do_pan_and_scan": None, "pan_and_scan_min_crop_size": None}
    preprocessor |= {"pan_and_scan_max_num_crops": None, "pan_and_scan_min_ratio_to_activate": None}
    preprocessor |= {"do_convert_rgb": None, "do_normalize": True, "do_rescale": True, "do_resize": True}
    preprocessor |= {"rescale_factor": 1 / 255}
    dump(path, "preprocessor_config.json", preprocessor | {"image_seq_length": 256})
    dump(path, "processor_config.json", {"processor_class": "Gemma3Processor", "image_seq_length": 256})


def write_internvl(path: str) -> None:
    """InternVL3 in transformers' format: GotOcr2ImageProcessor with crop_to_patches (448 tiles, 1 to 12, a
    thumbnail), a Qwen2 text model, the InternVL processor's tokens."""
    from transformers import InternVLConfig

    os.makedirs(path, exist_ok=True)
    named = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>"}
    named["video_token"] = "<video>"
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *named.values()]
    vocab = tokenizer(path, special, "<|im_start|>", "<|im_end|>", named)
    vision = VISION | {"model_type": "internvl_vision", "image_size": [448, 448], "patch_size": [14, 14]}
    config = InternVLConfig(
        text_config=TEXT | {"model_type": "qwen2", "max_position_embeddings": 32768},
        vision_config=vision,
        image_token_id=vocab["<IMG_CONTEXT>"],
        downsample_ratio=0.5,
    )
    config.architectures = ["InternVLForConditionalGeneration"]
    config.save_pretrained(path)
    preprocessor = {"image_processor_type": "GotOcr2ImageProcessor", "processor_class": "InternVLProcessor"}
    preprocessor |= {"size": {"height": 448, "width": 448}, "resample": 3, "image_mean": [0.485, 0.456, 0.406]}
    preprocessor |= {"image_std": [0.229, 0.224, 0.225], "crop_to_patches": True, "min_patches": 1}
    dump(path, "preprocessor_config.json", preprocessor | {"max_patches": 12})
    dump(path, "processor_config.json", {"processor_class": "InternVLProcessor", "image_seq_length": 256})


def write_glm4v(path: str) -> None:
    """GLM-4.1V's layout: Glm4vImageProcessor (patch 14, merge 2, its pixel budget), a GLM-4 text model with
    its image and video tokens."""
    from transformers import Glm4vConfig

    os.makedirs(path, exist_ok=True)
    special = ["<|endoftext|>", "[gMASK]", "<sop>", "<|begin_of_image|>", "<|end_of_image|>", "<|image|>"]
    special += ["<|begin_of_video|>", "<|end_of_video|>", "<|video|>"]
    named = {"image_token": "<|image|>", "video_token": "<|video|>"}
    vocab = tokenizer(path, special, "<sop>", "<|endoftext|>", named)
    text = TEXT | {"model_type": "glm4v_text", "partial_rotary_factor": 0.5}
    text["rope_scaling"] = {"rope_type": "default", "mrope_section": [2, 3, 3]}
    vision = {"depth": 1, "hidden_size": 32, "num_heads": 2, "intermediate_size": 64, "out_hidden_size": 32}
    vision |= {"patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "image_size": 336}
    config = Glm4vConfig(text_config=text, vision_config=vision, **glm_token_ids(vocab))
    config.architectures = ["Glm4vForConditionalGeneration"]
    config.save_pretrained(path)
    preprocessor = {"image_processor_type": "Glm4vImageProcessor", "processor_class": "Glm4vProcessor"}
    preprocessor |= {"size": {"shortest_edge": 12544, "longest_edge": 9633792}, "patch_size": 14}
    preprocessor |= {"temporal_patch_size": 2, "merge_size": 2, "image_mean": CLIP_MEAN, "image_std": CLIP_STD}
    dump(path, "preprocessor_config.json", preprocessor)


def glm_token_ids(vocab: dict) -> dict:
    """A GLM-4V config's image and video token ids (and their begin / end tokens), from the tokenizer's vocabulary."""
    tokens = {f"{kind}_token_id": vocab[f"<|{kind}|>"] for kind in ("image", "video")}
    for kind in ("image", "video"):
        tokens[f"{kind}_start_token_id"] = vocab[f"<|begin_of_{kind}|>"]
        tokens[f"{kind}_end_token_id"] = vocab[f"<|end_of_{kind}|>"]
    return tokens


def write_llava_onevision(path: str) -> None:
    """LLaVA-OneVision's layout: a SigLIP tower at 384, anyres pinpoints up to 1152, padding on, a Qwen2 text
    model."""
    from transformers import LlavaOnevisionConfig

    os.makedirs(path, exist_ok=True)
    named = {"image_token": "<image>", "video_token": "<video>"}
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *named.values()]
    vocab = tokenizer(path, special, "<|im_start|>", "<|im_end|>", named)
    pinpoints = [[384, 384], [384, 768], [768, 384], [768, 768], [384, 1152], [1152, 384]]
    config = LlavaOnevisionConfig(
        text_config=TEXT | {"model_type": "qwen2", "max_position_embeddings": 32768},
        vision_config=VISION | {"model_type": "siglip_vision_model", "image_size": 384, "patch_size": 14},
        image_token_index=vocab["<image>"],
        video_token_index=vocab["<video>"],
        image_grid_pinpoints=pinpoints,
        vision_feature_select_strategy="full",
        vision_aspect_ratio="anyres_max_9",
    )
    config.architectures = ["LlavaOnevisionForConditionalGeneration"]
    config.save_pretrained(path)
    preprocessor = {
        "image_processor_type": "LlavaOnevisionImageProcessor",
        "processor_class": "LlavaOnevisionProcessor",
    }
    preprocessor |= {"size": {"height": 384, "width": 384}, "resample": 3, "image_mean": [0.5] * 3}
    dump(
        path,
        "preprocessor_config.json",
        preprocessor | {"image_std": [0.5] * 3, "do_pad": True, "image_grid_pinpoints": pinpoints},
    )
    processor = {"processor_class": "LlavaOnevisionProcessor", "num_image_tokens": 729}
    dump(
        path,
        "processor_config.json",
        processor | {"vision_feature_select_strategy": "full", "vision_aspect_ratio": "anyres_max_9"},
    )


def write_llava_next(path: str, video: bool = False) -> None:
    """LLaVA-NeXT 1.6's layout: a CLIP ViT-L/14-336 tower, anyres over its five pinpoints, a Mistral text model
    (LLaVA-NeXT-Video: a Llama one, LlavaNextVideoVideoProcessor's CLIP-style frames, 2x2 pooling)."""
    from transformers import LlavaNextConfig, LlavaNextVideoConfig

    os.makedirs(path, exist_ok=True)
    named = {"image_token": "<image>"} | ({"video_token": "<video>"} if video else {})
    vocab = tokenizer(path, ["<s>", "</s>", *named.values()], "<s>", "</s>", named)
    common = {
        "vision_config": VISION | {"model_type": "clip_vision_model", "image_size": 336, "patch_size": 14},
        "image_token_index": vocab["<image>"],
        "image_grid_pinpoints": LLAVA_NEXT_V16["image_grid_pinpoints"],
        "vision_feature_select_strategy": "default",
        "vision_feature_layer": -2,
    }
    if video:
        config = LlavaNextVideoConfig(
            text_config=TEXT | {"model_type": "llama"},
            video_token_index=vocab["<video>"],
            spatial_pool_mode="average",
            spatial_pool_stride=2,
            **common,
        )
    else:
        config = LlavaNextConfig(text_config=TEXT | {"model_type": "mistral"}, **common)
    config.architectures = ["LlavaNextVideoForConditionalGeneration" if video else "LlavaNextForConditionalGeneration"]
    config.save_pretrained(path)
    processor_class = "LlavaNextVideoProcessor" if video else "LlavaNextProcessor"
    preprocessor = {"image_processor_type": "LlavaNextImageProcessor", "processor_class": processor_class}
    dump(path, "preprocessor_config.json", preprocessor | LLAVA_NEXT_V16)
    processor = {"processor_class": processor_class, "patch_size": 14, "vision_feature_select_strategy": "default"}
    dump(path, "processor_config.json", processor | {"num_additional_image_tokens": 1} | named)
    if video:  # llava-hf/LLaVA-NeXT-Video-7B-hf's video_preprocessor_config.json
        keys = {k: v for k, v in LLAVA_NEXT_V16.items() if k not in ("aspect_ratio_setting", "image_grid_pinpoints")}
        video_keys = {"video_processor_type": "LlavaNextVideoVideoProcessor", "processor_class": processor_class}
        video_keys |= {"default_to_square": False, "do_sample_frames": False, "fps": None, "num_frames": None}
        dump(path, "video_preprocessor_config.json", video_keys | keys)


def write_granite4_vision(path: str) -> None:
    """Granite 4 Vision's layout: a SigLIP tower at 384 (patch 16), the Window Q-Former's 4/8 downsampling,
    a Granite text model, LlavaNextImageProcessor with Granite Vision's pinpoints, Granite4VisionProcessor."""
    from transformers import Granite4VisionConfig

    os.makedirs(path, exist_ok=True)
    named = {"image_token": "<image>"}
    vocab = tokenizer(
        path, ["<|end_of_text|>", "<|start_of_role|>", "<image>"], "<|start_of_role|>", "<|end_of_text|>", named
    )
    config = Granite4VisionConfig(
        text_config=TEXT | {"model_type": "granite4_vision_text"},
        # the Q-Former takes hidden_size // 64 heads: 128, two
        vision_config=VISION
        | {"model_type": "siglip_vision_model", "hidden_size": 128, "image_size": 384, "patch_size": 16},
        image_token_index=vocab["<image>"],
        image_grid_pinpoints=GRANITE_VISION["image_grid_pinpoints"],
        vision_feature_select_strategy="full",
        downsample_rate="4/8",
    )
    config.architectures = ["Granite4VisionForConditionalGeneration"]
    config.save_pretrained(path)
    preprocessor = {"image_processor_type": "LlavaNextImageProcessor", "processor_class": "Granite4VisionProcessor"}
    dump(path, "preprocessor_config.json", preprocessor | GRANITE_VISION)
    processor = {"processor_class": "Granite4VisionProcessor", "patch_size": 16, "downsample_rate": "4/8"}
    processor |= {"vision_feature_select_strategy": "full", "num_additional_image_tokens": 0}
    dump(path, "processor_config.json", processor | named)


def write_pixtral(path: str, architecture: str, longest_edge: int, patch: int, merge: int) -> None:
    """A Pixtral-tower model in transformers' format: Mistral3ForConditionalGeneration (Mistral Small 3.1 /
    3.2: longest edge 1540, patch 14, spatial merge 2) or LlavaForConditionalGeneration (Pixtral-12B: 1024,
    16, no merge), a Mistral text model, PixtralImageProcessor and PixtralProcessor with its [IMG] tokens."""
    from transformers import LlavaConfig, Mistral3Config

    os.makedirs(path, exist_ok=True)
    vocab = tokenizer(path, ["<s>", "</s>", "[IMG]", "[IMG_BREAK]", "[IMG_END]"], "<s>", "</s>")
    vision = VISION | {"model_type": "pixtral", "image_size": longest_edge, "patch_size": patch, "head_dim": 16}
    text = TEXT | {"model_type": "mistral", "head_dim": 16}
    if architecture == "Mistral3ForConditionalGeneration":
        config = Mistral3Config(
            text_config=text, vision_config=vision, image_token_index=vocab["[IMG]"], spatial_merge_size=merge
        )
    else:
        config = LlavaConfig(text_config=text, vision_config=vision, image_token_index=vocab["[IMG]"])
    config.architectures = [architecture]
    config.save_pretrained(path)
    preprocessor = {"image_processor_type": "PixtralImageProcessor", "processor_class": "PixtralProcessor"}
    preprocessor |= {"size": {"longest_edge": longest_edge}, "patch_size": {"height": patch, "width": patch}}
    dump(path, "preprocessor_config.json", preprocessor | {"image_mean": CLIP_MEAN, "image_std": CLIP_STD})
    processor = {"processor_class": "PixtralProcessor", "patch_size": patch, "spatial_merge_size": merge}
    processor |= {"image_token": "[IMG]", "image_break_token": "[IMG_BREAK]", "image_end_token": "[IMG_END]"}
    dump(path, "processor_config.json", processor)


def write_llama4(path: str) -> None:
    """Llama 4's layout (Llama-4-Scout's kind, tiny): a vision tower of 336 tiles, patch 14, pixel shuffle 0.5
    (144 tokens a tile), a mixture-of-experts text model, Llama4ImageProcessor as its checkpoints save it (336
    tiles, at most 16, bilinear, mean = std = 0.5), Llama4Processor's image tokens."""
    from transformers import Llama4Config

    os.makedirs(path, exist_ok=True)
    images = ["<|image_start|>", "<|image_end|>", "<|image|>", "<|patch|>", "<|tile_x_separator|>"]
    special = ["<|begin_of_text|>", "<|eot|>", *images, "<|tile_y_separator|>"]
    vocab = tokenizer(path, special, "<|begin_of_text|>", "<|eot|>")
    text = TEXT | {"model_type": "llama4_text", "head_dim": 16, "intermediate_size_mlp": 64}
    text |= {"num_local_experts": 2, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1}
    text |= {"attention_chunk_size": 8192, "max_position_embeddings": 32768}
    vision = VISION | {"model_type": "llama4_vision_model", "image_size": 336, "patch_size": 14}
    vision |= {"pixel_shuffle_ratio": 0.5, "vision_output_dim": 32, "projector_input_dim": 32}
    vision |= {"projector_output_dim": 32}
    config = Llama4Config(
        text_config=text,
        vision_config=vision,
        boi_token_index=vocab["<|image_start|>"],
        eoi_token_index=vocab["<|image_end|>"],
        image_token_index=vocab["<|image|>"],
    )
    config.architectures = ["Llama4ForConditionalGeneration"]
    config.save_pretrained(path)
    preprocessor = {"image_processor_type": "Llama4ImageProcessorFast", "processor_class": "Llama4Processor"}
    preprocessor |= {"size": {"height": 336, "width": 336}, "max_patches": 16, "resize_to_max_canvas": False}
    preprocessor |= {"resample": 2, "image_mean": [0.5] * 3, "image_std": [0.5] * 3}
    dump(path, "preprocessor_config.json", preprocessor | {"rescale_factor": 1 / 255})
    dump(path, "processor_config.json", {"processor_class": "Llama4Processor", "patch_size": 14})


def write_idefics3(path: str, smolvlm: bool = False) -> None:
    """Idefics3's layout (HuggingFaceM4/Idefics3-8B-Llama3: tiles of 364, patch 14, pixel shuffle 2, 169 tokens a
    tile, a Llama text model), or SmolVLM's (SmolVLM2-2.2B-Instruct's tiles of 384, shuffle 3: 81 tokens a tile);
    the processor's tokens (the fake token around images, the global image's, a token per tile row and column)."""
    from transformers import Idefics3Config, SmolVLMConfig

    os.makedirs(path, exist_ok=True)
    tiles = [f"<row_{row}_col_{col}>" for row in range(1, 7) for col in range(1, 7)]
    special = ["<|endoftext|>", "<|im_start|>", "<fake_token_around_image>", "<image>", "<end_of_utterance>"]
    special += ["<global-img>", *tiles] + (["<video>"] if smolvlm else [])
    vocab = tokenizer(path, special, "<|im_start|>", "<end_of_utterance>")
    tile, scale = (384, 3) if smolvlm else (364, 2)
    config = (SmolVLMConfig if smolvlm else Idefics3Config)(
        text_config=TEXT | {"model_type": "llama", "vocab_size": 128},
        vision_config=VISION | {"image_size": tile, "patch_size": 14},
        scale_factor=scale,
        image_token_id=vocab["<image>"],
    )
    name = "SmolVLM" if smolvlm else "Idefics3"
    config.architectures = [f"{name}ForConditionalGeneration"]
    config.save_pretrained(path)
    preprocessor = {"image_processor_type": f"{name}ImageProcessor", "processor_class": f"{name}Processor"}
    preprocessor |= {"size": {"longest_edge": 4 * tile}, "max_image_size": {"longest_edge": tile}, "resample": 1}
    preprocessor |= {"do_image_splitting": True, "do_pad": True, "image_mean": [0.5] * 3, "image_std": [0.5] * 3}
    dump(path, "preprocessor_config.json", preprocessor)
    if smolvlm:  # SmolVLMProcessor holds a video processor too
        video = {"video_processor_type": "SmolVLMVideoProcessor", "processor_class": "SmolVLMProcessor"}
        dump(path, "video_preprocessor_config.json", video | {"max_image_size": {"longest_edge": tile}})
    seq_len = ((tile // 14) ** 2) // (scale**2)
    dump(path, "processor_config.json", {"processor_class": f"{name}Processor", "image_seq_len": seq_len})


WRITERS = {
    "llava": write_llava,
    "paligemma": write_paligemma,
    "qwen3_vl_moe": write_qwen3_vl_moe,
    "internvl_chat": write_internvl_chat,
    "internvl_chat_video": functools.partial(write_internvl_chat, video=True),
    "gemma3": write_gemma3,
    "internvl": write_internvl,
    "glm4v": write_glm4v,
    "llava_onevision": write_llava_onevision,
    "llava_onevision_video": write_llava_onevision,
    "internvl_video": write_internvl,
    "mistral3": functools.partial(
        write_pixtral, architecture="Mistral3ForConditionalGeneration", longest_edge=1540, patch=14, merge=2
    ),
    "pixtral_llava": functools.partial(
        write_pixtral, architecture="LlavaForConditionalGeneration", longest_edge=1024, patch=16, merge=1
    ),
    "llama4": write_llama4,
    "idefics3": write_idefics3,
    "smolvlm": functools.partial(write_idefics3, smolvlm=True),
    "llava_next": write_llava_next,
    "granite4_vision": write_granite4_vision,
    "llava_next_video": functools.partial(write_llava_next, video=True),
}
# vLLM's InternVL processor's per-request kwargs: fewer tiles; exactly two (a 5:4 image is equally close to
# 1x2 and 2x1: vLLM's order of the grids decides); one tile (no dynamic size).
# Gemma 3's pan and scan, asked per request; InternVL3's tile limits (transformers' format), per request;
# Llama 4's tile limit and its largest-canvas rule, per request; Idefics3 without its crops, per request.
REQUEST_KWARGS = {
    "internvl_chat": [
        {"max_dynamic_patch": 4},
        {"min_dynamic_patch": 2, "max_dynamic_patch": 2},
        {"dynamic_image_size": False},
    ],
    "gemma3": [{"do_pan_and_scan": True}],
    "internvl": [{"max_patches": 4}, {"min_patches": 2, "max_patches": 4}],
    "mistral3": [{"size": {"longest_edge": 448}}],
    "llama4": [{"max_patches": 4}, {"resize_to_max_canvas": True}],
    "idefics3": [{"do_image_splitting": False}],
    "llava_next": [{"resample": 2}, {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.25, 0.25, 0.25]}],
    "granite4_vision": [{"resample": 2}],
}


def requests(image: str):
    """(name, prompt, images, mm_processor_kwargs): each size alone, gray and RGBA PIL images, a batch of three
    (one image only for PaliGemma, whose vLLM processor takes one per prompt is checked by the caller) and a
    kwarg FusedImageProcessor does not reproduce (nearest resampling: transformers serves that call)."""
    import numpy as np
    from PIL import Image

    out = [(f"{h}x{w}", f"{image} describe", [Image.fromarray(photo(h, w, i))], {}) for i, (h, w) in enumerate(SIZES)]
    rgb = photo(300, 400, 10)
    alpha = (photo(300, 400, 11)[..., 0] // 2 + 64).astype("uint8")
    out.append(("gray", f"{image} describe", [Image.fromarray(rgb[..., 1])], {}))
    out.append(("rgba", f"{image} describe", [Image.fromarray(np.dstack([rgb, alpha]), "RGBA")], {}))
    batch = [Image.fromarray(photo(h, w, 20 + i)) for i, (h, w) in enumerate([(480, 640), (1080, 1920), (57, 29)])]
    out.append(("batch", " and ".join([image] * 3) + " compare them", batch, {}))
    out.append(("fallback", f"{image} describe", batch[:1], {"resample": 0}))
    tie = Image.fromarray(photo(448, 560, 30))  # 5:4
    for model, listed in REQUEST_KWARGS.items():
        for i, kwargs in enumerate(listed):
            prompt = " and ".join([image] * 3) + " compare"
            out.append((f"{model}-kwargs{i}", prompt, [*batch[:2], tie], kwargs))
    return out


def request_names(model: str) -> list[str]:
    if model in VIDEO_MODELS:
        return []
    names = [f"{h}x{w}" for h, w in SIZES] + ["gray", "rgba", "batch"]
    names += [f"{model}-kwargs{i}" for i in range(len(REQUEST_KWARGS.get(model, [])))]
    if model == "internvl_chat":  # vLLM's processor takes no resample
        return names
    return [n for n in names if not (model == "paligemma" and n == "batch")] + ["fallback"]  # PaliGemma: 1 image


def worker(root: str, out_path: str) -> None:
    """One side: every model and device-normalize setting, every request; the results to `out_path`."""
    import logging

    import torch
    from vllm.plugins import load_general_plugins

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO)  # as a server shows vLLM's INFO lines
    load_general_plugins()
    results = {}
    for model in RUN:
        _, image, normalize_settings, _ = MODELS[model]
        for device_normalize in normalize_settings:
            processor = create_processor(os.path.join(root, model), device_normalize, model.startswith("internvl_chat"))
            image_processor = processor.info.get_hf_processor().image_processor
            key = f"{model}-{'uint8' if device_normalize else 'float'}"
            results[key + "-class"] = class_name(image_processor)
            # vLLM's own InternVL processor is served in its class (vllm_internvl), not replaced.
            results[key + "-served"] = hasattr(type(image_processor).__call__, "fused_input_norm_wrapped")
            if model in VIDEO_MODELS:
                results[key + "-video-class"] = class_name(processor.info.get_hf_processor().video_processor)
                for name, prompt, videos in video_requests(VIDEO_MODELS[model]):
                    if name not in video_names(model):
                        continue
                    out = processor(prompt, processor.info.parse_mm_data({"video": videos}), hf_processor_mm_kwargs={})
                    results[f"{key}-{name}"] = outputs(out, "video")
            for name, prompt, images, kwargs in requests(image):
                if name not in request_names(model):
                    continue
                out = processor(prompt, processor.info.parse_mm_data({"image": images}), hf_processor_mm_kwargs=kwargs)
                results[f"{key}-{name}"] = outputs(out, "image")
    torch.save(results, out_path)


def create_processor(path: str, device_normalize: bool | None, trust_remote_code: bool):
    """vLLM's multimodal processor for a model directory (float32 weights' config, seed 0), as a worker runs it."""
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    config = ModelConfig(
        model=path,
        tokenizer=path,
        dtype="float32",
        mm_device_do_normalize=device_normalize,
        seed=0,
        trust_remote_code=trust_remote_code,
    )
    return MULTIMODAL_REGISTRY.create_processor(config)


def one_side(path: str, requests: list, method: str = "__call__") -> dict:
    """A worker's side as a server sets it up (1 torch thread, vLLM's INFO lines logged, the general plugins
    loaded: this plugin where FUSED_INPUT_NORM_VLLM_PROCESSOR says so), for vLLM's processor of the model
    directory `path`: each (name, prompt, images[, mm_processor_kwargs]) request's `outputs` through apply(), by
    name (`images`: a list of images, or {modality: items} for another modality); "class", the image processor's
    (the processor's where it holds none); "served", whether that class's `method` is wrapped by a vllm_* module
    (a "module:function" method: whether vLLM's module function is)."""
    import importlib
    import logging

    import torch
    from vllm.plugins import load_general_plugins

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO)
    load_general_plugins()
    processor = create_processor(path, None, False)
    hf_processor = processor.info.get_hf_processor()
    image_processor = getattr(hf_processor, "image_processor", hf_processor)
    module, _, function = method.rpartition(":")
    owner = importlib.import_module(module) if module else type(image_processor)
    results = {
        "class": class_name(image_processor),
        "served": hasattr(getattr(owner, function), "fused_input_norm_wrapped"),
    }
    for name, prompt, items, *kwargs in requests:
        (modality, items), *_ = items.items() if isinstance(items, dict) else [("image", items)]
        data = processor.info.parse_mm_data({modality: items})
        results[name] = outputs(processor(prompt, data, hf_processor_mm_kwargs=kwargs[0] if kwargs else {}), modality)
    return results


def outputs(out, modality: str) -> dict:
    """What apply() returned that is compared: tokens, placeholders, hashes, every tensor of every item."""
    import torch

    return {
        "prompt_token_ids": list(out["prompt_token_ids"]),
        "mm_placeholders": [(p.offset, p.length) for p in out["mm_placeholders"][modality]],
        "mm_hashes": list(out["mm_hashes"][modality]),
        "tensors": [
            {k: v.data for k, v in item.items() if isinstance(v.data, torch.Tensor)}
            for item in out["mm_kwargs"][modality]
        ],
    }


# Models whose videos are compared too (vLLM's InternVL video processor: each frame one tile), and their prompt's
# video placeholder.
VIDEO_MODELS = {
    "internvl_chat_video": "<video>",
    "llava_onevision_video": "<video>",
    "internvl_video": "<video>",
    "llava_next_video": "<video>",
}
VIDEO_NAMES = ["video-9x180x320", "videos-2"]
ONE_VIDEO = ("llava_next_video",)  # vLLM takes one video per prompt for these


def video_names(model: str) -> list[str]:
    return VIDEO_NAMES[:1] if model in ONE_VIDEO else VIDEO_NAMES if model in VIDEO_MODELS else []


def video_requests(placeholder: str):
    """(name, prompt, videos): uint8 [frames, H, W, 3] clips as vLLM's loader hands them; two in one prompt."""
    import numpy as np

    def clip(frames: int, height: int, width: int, seed: int):
        return np.stack([photo(height, width, seed + t) for t in range(frames)])

    return [
        (VIDEO_NAMES[0], f"{placeholder} describe", [clip(9, 180, 320, 40)]),
        (VIDEO_NAMES[1], f"{placeholder} and {placeholder} compare", [clip(4, 240, 200, 50), clip(6, 720, 1280, 60)]),
    ]


def written_sides(tmp_path_factory, models: list[str], script: str, switches: tuple = ("1", "0")) -> list[dict]:
    """`models`' directories written, then `script`'s worker on them with the plugin on, then off (`switches`)."""
    root = tmp_path_factory.mktemp("models")
    for model in models:
        WRITERS[model](str(root / model))
    return both_sides(root, script, switches)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """Both sides' results: (plugin on, plugin off), each with its log lines."""
    return written_sides(tmp_path_factory, RUN, __file__)


def assert_same_tensors(name: str, got: list[dict], expected: list[dict]) -> None:
    """Every tensor of every item: the same keys, shapes and dtypes; floats within 1e-6, the rest exactly."""
    import torch

    assert len(got) == len(expected), name
    for i, (a, b) in enumerate(zip(got, expected, strict=True)):
        assert sorted(a) == sorted(b), (name, i)
        for key in a:
            x, y = a[key], b[key]
            where = f"{name}: item {i} {key}"
            assert x.dtype == y.dtype and x.shape == y.shape, (where, x.dtype, y.dtype, x.shape, y.shape)
            if x.is_floating_point():
                diff = float((x - y).abs().max()) if x.numel() else 0.0
                assert diff <= 1e-6, f"{where}: differs by {diff}"
            else:
                assert torch.equal(x, y), f"{where}: {int((x != y).sum())} values differ"


def recorded_log(monkeypatch, name: str) -> tuple:
    """A logger to hand a vllm_* module's serve() and the list its info lines land in, formatted, for the rest
    of this test."""
    import logging

    messages = []
    log = logging.getLogger(name)
    monkeypatch.setattr(log, "info", lambda fmt, *args: messages.append(fmt % args))
    return log, messages


def unwrapped(monkeypatch, cls: type, name: str):
    """vLLM's own cls.<name> for the rest of this test: the plugin, registered in this pytest process by an
    earlier test, may have wrapped it already (vllm_internvl.wrap_method keeps the original beside it);
    monkeypatch puts the wrapped one back afterwards. Returns the unwrapped method."""
    original = getattr(getattr(cls, name), "fused_input_norm_wrapped", None)
    if original is not None:
        monkeypatch.setattr(cls, name, original)
    return getattr(cls, name)


def assert_same_results(on: dict, off: dict, key: str, names: list[str], uint8: bool) -> None:
    """Each request's results of one model and path: tokens, placeholders and hashes equal, every tensor equal
    (assert_same_tensors), pixel values of the path's dtype."""
    import torch

    for name in names:
        got, expected = on[f"{key}-{name}"], off[f"{key}-{name}"]
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
            assert got[field] == expected[field], f"{name}: {field}"
        assert_same_tensors(name, got["tensors"], expected["tensors"])
        dtypes = {t.dtype for item in got["tensors"] for k, t in item.items() if k.startswith("pixel_values")}
        assert dtypes == {torch.uint8 if uint8 else torch.float32}, (name, dtypes)


CASES = [(model, "uint8" if n else "float") for model, (_, _, settings, _) in MODELS.items() for n in settings]


def skip_missing(model: str) -> None:
    if family_missing(model):
        pytest.skip(f"this tree has no family for {MODELS[model][3]} yet (issue 35)")
    if UNBUILDABLE.get(model):
        pytest.skip(f"vLLM cannot build {MODELS[model][0]}'s processor here: {UNBUILDABLE[model]}")


@pytest.mark.parametrize(("model", "path"), CASES)
def test_same_outputs_plugin_on_and_off(request, model, path):

    skip_missing(model)
    on, off = request.getfixturevalue("sides")
    key = f"{model}-{path}"
    if model.startswith("internvl_chat"):  # vLLM's own processor, served in its class
        assert on[key + "-served"] and not off[key + "-served"]
        assert on[key + "-class"] == off[key + "-class"] == f"{INTERNVL_MODULE}.InternVLChatImageProcessor"
    else:
        assert on[key + "-class"] == "fused_input_norm.hf_adapter.FusedHFImageProcessor", on[key + "-class"]
        assert off[key + "-class"].startswith("transformers."), off[key + "-class"]
    assert_same_results(on, off, key, request_names(model) + video_names(model), path == "uint8")


def test_gemma3_pan_and_scan_request_is_served_with_the_checkpoints_null_settings(sides):
    """A Gemma 3 checkpoint ships its pan-and-scan settings null; a request's do_pan_and_scan=True makes vLLM
    build the processor with do_pan_and_scan=True (the adapter used to refuse that, leaving transformers' in
    place). vLLM now holds the adapter, the request's crops are served (no call handed back for it), and the
    outputs equal the plugin-off side's (test_same_outputs_plugin_on_and_off compares them)."""
    skip_missing("gemma3")
    on, off = sides
    for path in ("float", "uint8"):
        assert on[f"gemma3-{path}-class"] == "fused_input_norm.hf_adapter.FusedHFImageProcessor", on[
            f"gemma3-{path}-class"
        ]
        assert off[f"gemma3-{path}-class"].endswith(".Gemma3ImageProcessor"), off[f"gemma3-{path}-class"]
        crops = [t["pixel_values"].shape[0] for t in on[f"gemma3-{path}-gemma3-kwargs0"]["tensors"]]
        assert max(crops) > 1, crops  # the 1080x1920 image is cut into crops
    handed_back = [
        line for line in on["log"] if "Gemma3ImageProcessor serves this call" in line and "nearest" not in line
    ]
    assert not handed_back, handed_back


# (the video directories repeat an architecture: its line is checked once, on the image directory)
@pytest.mark.parametrize("model", [m for m in MODELS if not m.startswith("internvl_chat") and m not in VIDEO_MODELS])
def test_log_says_which_processor_serves_images(request, model):
    """One line per model names the architecture and the processor serving its images; the call the adapter
    does not reproduce (nearest resampling) is logged as transformers'."""
    skip_missing(model)
    on, off = request.getfixturevalue("sides")
    architecture, upstream = MODELS[model][0], MODELS[model][3]
    # one architecture may hold several image processors (LLaVA: CLIP's, Pixtral's): the line names which
    lines = [
        line
        for line in on["log"]
        if f"'{architecture}'" in line and "serves images" in line and f"transformers' {upstream}" in line
    ]
    # one line per model directory (the video directories repeat LLaVA-OV's and InternVL's architecture)
    directories = sum(1 for m in RUN if MODELS[m][0] == architecture and MODELS[m][3] == upstream)
    assert len(lines) == directories, on["log"]
    assert all("FusedImageProcessor (reference 'torchvision') serves images" in line for line in lines), lines
    assert any("serves this call" in line and "nearest" in line for line in on["log"]), on["log"]
    assert not any(f"'{architecture}'" in line for line in off["log"]), off["log"]


# The video directories whose transformers video processor the adapter stands in for: model -> its class.
HF_VIDEO_PROCESSORS = {
    "llava_onevision_video": "LlavaOnevisionVideoProcessor",
    "internvl_video": "InternVLVideoProcessor",
    "llava_next_video": "LlavaNextVideoVideoProcessor",
}


@pytest.mark.parametrize(("model", "upstream"), list(HF_VIDEO_PROCESSORS.items()))
def test_videos_are_served_by_the_adapter(request, model, upstream):
    """vLLM holds FusedHFVideoProcessor with the plugin on (transformers' class with it off), the log says so,
    and no video call was handed back (test_same_outputs_plugin_on_and_off compares the outputs)."""
    skip_missing(model)
    on, off = request.getfixturevalue("sides")
    assert on[f"{model}-float-video-class"] == "fused_input_norm.hf_adapter.FusedHFVideoProcessor", on[
        f"{model}-float-video-class"
    ]
    assert off[f"{model}-float-video-class"].endswith(f".{upstream}"), off[f"{model}-float-video-class"]
    assert any(f"FusedVideoProcessor serves videos in place of transformers' {upstream}" in x for x in on["log"])
    assert not any(f"{upstream} serves this call" in line for line in on["log"]), on["log"]


def test_llava_next_requests_are_served(sides):
    """LLaVA-NeXT, Granite 4 Vision and LLaVA-NeXT-Video (LlavaNextImageProcessor and its video processor):
    every request but the one asking for nearest resampling is served, none handed back."""
    if family_missing("llava_next"):
        pytest.skip("this tree has no family for LlavaNextImageProcessor yet")
    on, _ = sides
    handed_back = [
        line
        for line in on["log"]
        if ("LlavaNextImageProcessor serves this call" in line and "nearest" not in line)
        or "LlavaNextVideoVideoProcessor serves this call" in line
    ]
    assert not handed_back, handed_back
    assert sum("LlavaNextImageProcessor serves this call" in line for line in on["log"]) == 2  # the two fallbacks


def test_log_says_fused_serves_vllm_internvl(sides):
    on, off = sides
    served = [entry for entry in on["log"] if "serves vLLM's InternVLChat" in entry]
    assert len(served) == 1, on["log"]
    for name in ("InternVLChatImageProcessor", "InternVLChatVideoProcessor"):
        assert f"FusedImageProcessor (reference 'pil') serves vLLM's {name}" in served[0], served
    assert not any("serves this call" in entry and "InternVLChat" in entry for entry in on["log"]), on["log"]
    assert not any("InternVLChatImageProcessor" in entry for entry in off["log"]), off["log"]


# ----- vLLM's InternVL processor, in this process: its tile grid, and what moves it back to vLLM -----
INTERNVL_MODULE = "vllm.transformers_utils.processors.internvl"


def test_internvl_tile_grid_is_vllms():
    """families.internvl_chat.tile_grid against vLLM's own calculate_internvl_targets (with its
    get_internvl_target_ratios), over many image shapes and tile bounds, ties (5:4 between 1x2 and 2x1) and the
    area rule included."""
    import importlib

    from fused_input_norm.families import internvl_chat

    vllm_internvl = importlib.import_module(INTERNVL_MODULE)
    shapes = [
        (h, w) for h in (1, 7, 57, 224, 448, 449, 480, 896, 1080, 3024) for w in (1, 29, 448, 560, 640, 1920, 4032)
    ]
    shapes += [(448, 560), (560, 448), (896, 1120), (100, 125), (4, 5), (448 * 3, 448), (40, 900)]
    for low, high in [(1, 12), (1, 6), (2, 2), (1, 1), (3, 9), (4, 40), (5, 5)]:
        ratios = vllm_internvl.get_internvl_target_ratios(low, high)
        assert internvl_chat.grids(low, high) == ratios
        for h, w in shapes:
            blocks, width, height = vllm_internvl.calculate_internvl_targets(
                orig_width=w, orig_height=h, target_ratios=ratios, image_size=448, use_thumbnail=False
            )
            columns, rows = internvl_chat.tile_grid(h, w, 448, low, high)
            assert (rows * 448, columns * 448, rows * columns) == (height, width, blocks), (h, w, low, high)


def test_internvl_served_only_as_vllm_0_34_writes_it(monkeypatch):
    """`moved` accepts the installed vLLM's functions and names the first one that differs, or is missing."""
    import importlib
    import types

    from fused_input_norm import vllm_internvl

    module = importlib.import_module(INTERNVL_MODULE)
    assert vllm_internvl.moved(module) is None
    changed = types.SimpleNamespace(**vars(module))
    changed.build_transform = lambda input_size: None  # another transform
    assert "build_transform is not vllm 0.34.0's" in vllm_internvl.moved(changed)
    del changed.build_transform
    assert "build_transform cannot be read" in vllm_internvl.moved(changed)


def test_internvl_calls_it_does_not_reproduce_run_vllms_code():
    """In this process: an RGBA image (vLLM resizes it in RGBA, then converts), a video as a list of frames and a subclass
    of the processor go to vLLM's own code (its exact output), each logged once; an RGB image is served."""
    import importlib
    import logging

    import numpy as np
    import torch
    from PIL import Image

    from fused_input_norm import vllm_internvl, vllm_plugin

    module = importlib.import_module(INTERNVL_MODULE)
    records = []
    log = logging.getLogger("test_vllm_families.internvl")
    handler = logging.Handler()
    handler.emit = records.append
    loggers = (log, vllm_plugin.logger)  # the plugin's, where vLLM's plugin loading in this process served it
    levels = [each.level for each in loggers]
    for each in loggers:
        each.addHandler(handler)
        each.setLevel(logging.INFO)
    try:
        said = vllm_internvl.serve(log)
        assert "serves vLLM's InternVLChatImageProcessor" in said, said
        images = module.InternVLChatImageProcessor(
            image_size=448, min_dynamic_patch=1, max_dynamic_patch=6, dynamic_image_size=True, use_thumbnail=True
        )
        videos = module.InternVLChatVideoProcessor(image_size=448)
        original = type(images).__call__.fused_input_norm_wrapped
        rgb = photo(300, 500, 1)
        rgba = Image.fromarray(np.dstack([rgb, (rgb[..., 0] // 2 + 64).astype(np.uint8)]), "RGBA")
        for _ in range(2):  # logged once
            got = images(images=[rgba])  # by name, as vLLM's InternVLChatProcessor calls it
        assert torch.equal(got["pixel_values_flat"], original(images, [rgba])["pixel_values_flat"])

        class Subclass(module.InternVLChatImageProcessor):
            pass

        sub = Subclass(
            image_size=448, min_dynamic_patch=1, max_dynamic_patch=6, dynamic_image_size=True, use_thumbnail=True
        )
        got = sub([Image.fromarray(rgb)])
        assert torch.equal(got["pixel_values_flat"], original(sub, [Image.fromarray(rgb)])["pixel_values_flat"])
        clip = [rgb, rgb]  # frames in a list, not one array: vLLM's code iterates them alike
        got = videos([clip])
        expected = type(videos).__call__.fused_input_norm_wrapped(videos, [clip])
        assert torch.equal(got["pixel_values_flat_video"], expected["pixel_values_flat_video"])
        served = images([Image.fromarray(rgb)])  # and an RGB image is FusedImageProcessor's: within 1e-6
        expected = original(images, [Image.fromarray(rgb)])
        assert float((served["pixel_values_flat"] - expected["pixel_values_flat"]).abs().max()) <= 1e-6
    finally:
        for each, level in zip(loggers, levels, strict=True):
            each.removeHandler(handler)
            each.setLevel(level)
    messages = [r.getMessage() for r in records]
    assert sum("a RGBA image" in m for m in messages) == 1, messages
    assert any("Subclass is a subclass of InternVLChatImageProcessor" in m for m in messages), messages
    assert any("InternVLChatVideoProcessor serves this call: a video that is not a uint8" in m for m in messages), (
        messages
    )
    assert len(messages) == 3, messages


if __name__ == "__main__":
    worker(*sys.argv[1:])
