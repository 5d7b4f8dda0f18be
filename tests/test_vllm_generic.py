"""The generic path inside vLLM: vLLM 0.34.0's `apply()` for the architectures whose transformers image (and
video) processor no family module reproduces, with the plugin on (FUSED_INPUT_NORM_VLLM_PROCESSOR=1: the
generic adapters, FusedHFGenericImageProcessor / FusedHFGenericVideoProcessor, run the model's own
preprocessing with the package's exact primitives) against off (=0), each side in its own process as a server
would (`bash scripts/test_vllm.sh` runs it).

Tiny local model directories written here as transformers writes a checkpoint: config.json from the model's
config class (its defaults, null fields included; the token ids set to the tiny tokenizer's, and the few
fields vLLM's model file reads that the installed transformers' config class does not define, written as the
checkpoints carry them), and the processor saved by its own class's save_pretrained from the image (and
video) processor class's defaults, so preprocessor_config.json, video_preprocessor_config.json and
processor_config.json hold every field the class saves. No weights.

Compared, for every request (several sizes, gray and RGBA, a batch, one per-request `mm_processor_kwargs`
each, videos where the model takes them): prompt_token_ids, mm_placeholders, mm_hashes and every tensor of
every item (uint8 and integer ones exactly, float32 within 1e-6). The plugin's side must hold the generic
adapter (still an instance of transformers' class), log the generic path's line, hand no call back, and have
run the package's resize and normalize kernels (counted in the worker).
"""

import importlib
import importlib.util
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import assert_same_tensors, outputs, tokenizer
from test_vllm_processor import both_sides, class_name, photo

HAS_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

GEMMA4_TOKENS = {"boi_token": "<|image>", "eoi_token": "<image|>", "image_token": "<|image|>"}
GEMMA4_TOKENS |= {"audio_token": "<|audio|>", "boa_token": "<|audio>", "eoa_token": "<audio|>"}
GEMMA4_IDS = {"image_token_id": "<|image|>", "boi_token_id": "<|image>", "eoi_token_id": "<image|>"}
GEMMA4_AUDIO_IDS = {"video_token_id": "<|video|>", "audio_token_id": "<|audio|>", "boa_token_id": "<|audio>"}
GEMMA4_AUDIO_IDS["eoa_token_index"] = "<audio|>"
# What Gemma 4's three architectures share (MODELS' fields, below), Gemma 4's own processor classes.
GEMMA4 = dict(
    processor="Gemma4Processor",
    image="Gemma4ImageProcessor",
    video="Gemma4VideoProcessor",
    feature="Gemma4AudioFeatureExtractor",
    special=["<bos>", "<eos>", "<|video|>"],
    named=GEMMA4_TOKENS,
    ids=GEMMA4_IDS | GEMMA4_AUDIO_IDS,
    # vLLM's Gemma 4 reads the image token budget from vision_config.default_output_length
    config_fields={"vision_config": {"default_output_length": 280}},
    kwargs={"max_soft_tokens": 70},
)
MINICPM_TOKENS = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>", "image_start_token": "<image>"}
MINICPM_TOKENS |= {"image_end_token": "</image>", "slice_start_token": "<slice>", "slice_end_token": "</slice>"}
MINICPM_TOKENS |= {"image_id_start_token": "<image_id>", "image_id_end_token": "</image_id>"}
MINICPM_IDS = {"image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>"}
MINICPM_V4_7_IDS = {"image_start_id": "<image>", "image_end_id": "</image>", "slice_start_id": "<slice>"}
MINICPM_V4_7_IDS |= {"slice_end_id": "</slice>", "newline_id": "\n"}
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
IMAGE_VIDEO_BOUNDS = ["<|begin_of_image|>", "<|end_of_image|>", "<|begin_of_video|>", "<|end_of_video|>"]
GLM_IDS = {"image_token_id": "<|image|>", "video_token_id": "<|video|>"}
GLM_IDS |= {"image_start_token_id": "<|begin_of_image|>", "image_end_token_id": "<|end_of_image|>"}
GLM_IDS |= {"video_start_token_id": "<|begin_of_video|>", "video_end_token_id": "<|end_of_video|>"}
# What GLM-V's tokenizers and configs share (MODELS' fields, below): GLM-5 Next's, GLM-OCR's
GLM = dict(
    special=["<|endoftext|>", "[gMASK]", "<sop>", *IMAGE_VIDEO_BOUNDS],
    named={"image_token": "<|image|>", "video_token": "<|video|>"},
    ids=GLM_IDS,
)
MOLMO2_SPECIAL = ["<|endoftext|>", "<|im_end|>", "<im_start>", "<im_end>", "<im_patch>", "<im_col>", "<im_low>"]
MOLMO2_SPECIAL += ["<low_res_im_start>", "<frame_start>", "<frame_end>", "<|image|>", "<|video|>"]
MUSE_SPECIAL = ["<|begin_of_text|>", "<|eot|>", "<|image_start|>", "<|image_end|>", "<|patch|>", "<|vid_start|>"]
MUSE_SPECIAL += ["<|vid_end|>", "<|vid_frame_separator|>", "<|video|>"]


def minicpm(name: str, processors: str, ids: dict | None = None) -> dict:
    """A MiniCPM model's entry (MODELS): `name` its architecture's, config's and processor's prefix, `processors`
    its image and video processors'."""
    return dict(
        arch=f"{name}ForConditionalGeneration",
        config=f"{name}Config",
        processor=f"{name}Processor",
        image=f"{processors}ImageProcessor",
        video=f"{processors}VideoProcessor",
        special=["<|endoftext|>", "<|im_end|>", "\n"],
        named=MINICPM_TOKENS,
        ids=MINICPM_IDS | (ids or {}),
        kwargs={"max_slice_nums": 2},
        video_request={"scale_resolution": 224},
    )


# model -> how its directory is written and run:
#   arch: the architecture; config / processor / image / video / feature: transformers' classes (video and the
#   audio feature extractor where the processor holds one); special: the tokenizer's special tokens (the first
#   two its bos and eos), named: those it names (tokenizer.image_token, ...); ids: config fields set to a
#   token's id; config_fields: further config fields; video_kwargs: the video processor's saved settings;
#   placeholder: the prompt's image placeholder where vLLM's model class names none (get_placeholder_str);
#   normalize: vLLM's mm_device_do_normalize settings run (None: vLLM's default; True and False where the
#   model supports the uint8 path); kwargs: a per-request mm_processor_kwargs for its images, video_request
#   one for its videos (none for Gemma 4's: its video budget kwarg changes nothing at these sizes).
MODELS = {
    "blip2": dict(
        arch="Blip2ForConditionalGeneration",
        config="Blip2Config",
        processor="Blip2Processor",
        image="BlipImageProcessor",
        special=["<s>", "</s>", "<image>"],
        named={"image_token": "<image>"},
        ids={"image_token_index": "<image>"},
        processor_kwargs={"num_query_tokens": 32},
        kwargs={"size": {"height": 224, "width": 224}},
    ),
    "cohere2_vision": dict(
        arch="Cohere2VisionForConditionalGeneration",
        config="Cohere2VisionConfig",
        processor="Cohere2VisionProcessor",
        image="Cohere2VisionImageProcessor",
        special=["<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"],
        named={"boi_token": "<|START_OF_IMG|>", "eoi_token": "<|END_OF_IMG|>", "image_token": "<|IMG_PATCH|>"}
        | {"img_line_break_token": "<|IMG_LINE_BREAK|>"},
        ids={"image_token_id": "<|IMG_PATCH|>"},
        placeholder="<|IMG_PATCH|>",  # vLLM's Cohere2Vision matches the image token itself
        kwargs={"max_patches": 4},
    ),
    "cosmos3_edge": dict(
        arch="Cosmos3EdgeForConditionalGeneration",
        config="Cosmos3EdgeConfig",
        processor="Cosmos3EdgeProcessor",
        image="Cosmos3EdgeImageProcessor",
        video="Cosmos3EdgeVideoProcessor",
        # Its processor builds the video prompt's timestamps from the video processor's metadata, which the
        # video processor returns only with return_metadata on (vLLM 0.34.0's processing does not ask for it).
        video_kwargs={"return_metadata": True},
        special=QWEN_SPECIAL,
        named={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>"}
        | {"vision_start_token": "<|vision_start|>", "vision_end_token": "<|vision_end|>"},
        ids={"image_token_id": "<|image_pad|>", "video_token_id": "<|video_pad|>"}
        | {"vision_start_token_id": "<|vision_start|>", "vision_end_token_id": "<|vision_end|>"},
        kwargs={"size": {"shortest_edge": 65536, "longest_edge": 262144}},
        video_request={"size": {"shortest_edge": 4096, "longest_edge": 65536}},
    ),
    "gemma4": GEMMA4 | dict(arch="Gemma4ForConditionalGeneration", config="Gemma4Config", normalize=(True, False)),
    "gemma4_unified": GEMMA4
    | dict(
        arch="Gemma4UnifiedForConditionalGeneration",
        config="Gemma4UnifiedConfig",
        processor="Gemma4UnifiedProcessor",
        image="Gemma4UnifiedImageProcessor",
        video="Gemma4UnifiedVideoProcessor",
        feature="Gemma4UnifiedAudioFeatureExtractor",
        config_fields={"vision_config": {"num_soft_tokens": 280}},  # read by vLLM's Gemma 4 Unified
    ),
    # (its tokenizer keeps the audio tokens: Gemma4Processor refuses one without them; its config has no audio)
    "diffusion_gemma": GEMMA4
    | dict(arch="DiffusionGemmaForBlockDiffusion", config="DiffusionGemmaConfig", ids=GEMMA4_IDS),
    "glm5_next": GLM
    | dict(
        arch="Glm5NextForConditionalGeneration",
        config="Glm5NextConfig",
        processor="Glm5NextProcessor",
        image="Glm5NextImageProcessor",
        video="Glm5NextVideoProcessor",
        normalize=(True, False),
        kwargs={"max_image_tokens": 256},
        video_request={"max_image_tokens": 64},
    ),
    # GLM-OCR: its images are Glm46VImageProcessor's (the glm4v family; test_vllm_copies compares them with the
    # checkpoint's own preprocessor_config.json), its videos Glm46VVideoProcessor's, which no family reproduces
    "glm_ocr": GLM
    | dict(
        arch="GlmOcrForConditionalGeneration",
        config="GlmOcrConfig",
        processor="Glm46VProcessor",
        image="Glm46VImageProcessor",
        video="Glm46VVideoProcessor",
        kwargs={"size": {"shortest_edge": 3136, "longest_edge": 401408}},
        video_request={"size": {"shortest_edge": 3136, "longest_edge": 65536}},
    ),
    "lfm2_vl": dict(
        arch="Lfm2VlForConditionalGeneration",
        config="Lfm2VlConfig",
        processor="Lfm2VlProcessor",
        image="Lfm2VlImageProcessor",
        special=["<|startoftext|>", "<|im_end|>", "<|image_start|>", "<|image_end|>", "<|img_thumbnail|>"]
        + [f"<|img_row_{row}_col_{col}|>" for row in range(1, 11) for col in range(1, 11)],
        named={"image_token": "<image>"},
        ids={"image_token_id": "<image>"},
        kwargs={"do_image_splitting": False},
    ),
    "minicpm_ocr": minicpm("MiniCPMOcr", "MiniCPMOcr"),
    "minicpmv4_6": minicpm("MiniCPMV4_6", "MiniCPMV4_6"),
    # MiniCPM-V 4.7 holds 4.6's image and video processors; vLLM's model reads its boundary tokens' ids
    "minicpmv4_7": minicpm("MiniCPMV4_7", "MiniCPMV4_6", MINICPM_V4_7_IDS),
    "molmo2": dict(
        arch="Molmo2ForConditionalGeneration",
        config="Molmo2Config",
        processor="Molmo2Processor",
        image="Molmo2ImageProcessor",
        video="Molmo2VideoProcessor",
        special=MOLMO2_SPECIAL,
        # image_col_id and image_low_res_id: read by vLLM's Molmo2, not fields of transformers' config class
        ids={"image_start_token_id": "<im_start>", "low_res_image_start_token_id": "<low_res_im_start>"}
        | {"image_end_token_id": "<im_end>", "image_patch_id": "<im_patch>", "image_col_id": "<im_col>"}
        | {"image_low_res_id": "<im_low>", "frame_start_token_id": "<frame_start>"}
        | {"frame_end_token_id": "<frame_end>"},
        normalize=(True, False),
        kwargs={"max_crops": 4},
        video_request={"size": {"height": 224, "width": 224}},
    ),
    "muse_glimmer": dict(
        arch="MuseGlimmerForConditionalGeneration",
        config="MuseGlimmerConfig",
        processor="MuseGlimmerProcessor",
        image="MuseGlimmerImageProcessor",
        video="MuseGlimmerVideoProcessor",
        video_kwargs={"return_metadata": True},  # as Cosmos3-Edge's: its video prompt needs the metadata
        special=MUSE_SPECIAL,
        ids={"image_token_id": "<|patch|>", "video_token_id": "<|video|>"},
        kwargs={"max_image_tokens": 256},
        video_request={"max_video_frame_tokens": 16},
    ),
}

# Models whose image (video) processor the generic adapter stands in for, but where its resize never runs: only
# the PIL image's read (process_image, an exact copy) and, for large images, the rescale are the package's, the
# resampling is transformers' own code's, so these do not count as served. test_same_outputs_plugin_on_and_off asserts that no resize kernel ran there (and that one did
# everywhere else), so it notices when that changes.
GEMMA4_UNSERVED = "Gemma 4's processors call tvF.resize themselves, not the backend's resize"
UNSERVED = {"gemma4": GEMMA4_UNSERVED, "gemma4_unified": GEMMA4_UNSERVED, "diffusion_gemma": GEMMA4_UNSERVED}
VIDEO_UNSERVED = dict(UNSERVED)
# The calls the generic path may hand back to transformers (the log line's reason), for any class: gray and
# RGBA PIL images without do_convert_rgb are read by transformers' own process_image (with it, and RGB ones, by
# the package; vLLM 0.34.0 converts the gray and RGBA requests here to RGB first, so none is logged today)...
HANDED_BACK_ANY = {f"process_image: a PIL image in mode {mode} (served: RGB)" for mode in ("L", "RGBA")}
# ... and by upstream class (none now: Molmo 2's float32 resizes are the engine's float32 bilinear).
HANDED_BACK = {}

# Models whose images the generic path's rescale_and_normalize serves (uint8 after the resize, at least 2^20
# values): counted in the worker too.
NORMALIZED = ("muse_glimmer",)
# Videos not compared, with the reason (stock vLLM fails on them here, plugin or not).
NO_VIDEOS = {
    "minicpm_ocr": "vLLM 0.34.0 passes disable_small_image_upsize to transformers 5.22's MiniCPMOcrVideoProcessor, "
    "which refuses it (TypeError), plugin on or off",
}


def family_of(model: str, video: bool = False) -> str | None:
    """The family module that serves the model's image (video) processor, where one has landed: a family wins
    over the generic path, so the plugin's side then holds the family's adapter (FusedHFImageProcessor /
    FusedHFVideoProcessor) and the comparison still runs."""
    from fused_input_norm import config

    if video:
        return config.video_kind_of({"video_processor_type": MODELS[model]["video"]})
    return config.kind_of({"image_processor_type": MODELS[model]["image"]})


# Models whose vLLM processing sends a video's frames through the image processor, one call per frame (vLLM
# 0.34.0's MiniCPM-V 4.6 / 4.7), not through the video processor: where a family serves the images, it serves
# the frames too.
FRAMES_AS_IMAGES = ("minicpmv4_6", "minicpmv4_7")


def generic_serves(model: str, video: bool = False) -> bool:
    """Whether the generic path serves the model's images (videos) here: no family, its resize runs (not
    UNSERVED / VIDEO_UNSERVED), and (videos) they are compared (not NO_VIDEOS)."""
    if video and ("video" not in MODELS[model] or model in NO_VIDEOS):
        return False
    if video and model in FRAMES_AS_IMAGES and family_of(model):
        return False
    return family_of(model, video) is None and model not in (VIDEO_UNSERVED if video else UNSERVED)


def write_model(path: str, model: str) -> None:
    """The model's tiny directory: its tokenizer, config.json and the processor's saved configs."""
    import transformers

    spec = MODELS[model]
    os.makedirs(path, exist_ok=True)
    named = spec.get("named", {})
    special = list(dict.fromkeys(spec["special"] + list(named.values())))
    vocab = tokenizer(path, special, special[0], special[1], named)
    config = getattr(transformers, spec["config"])(
        **{field: vocab[token] for field, token in spec["ids"].items()}, **spec.get("config_fields", {})
    )
    config.architectures = [spec["arch"]]
    config.save_pretrained(path)
    parts = {"image_processor": getattr(transformers, spec["image"])()}
    parts["tokenizer"] = transformers.AutoTokenizer.from_pretrained(path)
    if "video" in spec:
        parts["video_processor"] = getattr(transformers, spec["video"])(**spec.get("video_kwargs", {}))
    if "feature" in spec:
        parts["feature_extractor"] = getattr(transformers, spec["feature"])()
    getattr(transformers, spec["processor"])(**parts, **spec.get("processor_kwargs", {})).save_pretrained(path)


# (height, width): 1080p, VGA, tiny, elongated
SIZES = [(1080, 1920), (480, 640), (57, 29), (40, 900)]
VIDEO_NAMES = ["video-8x180x320", "videos-2"]


def requests(model: str, image: str, several: bool):
    """(name, prompt, images, mm_processor_kwargs): each size alone, gray and RGBA, a batch of two (where vLLM
    takes several images a prompt: `several`) and the model's per-request kwargs."""
    import numpy as np
    from PIL import Image

    out = [(f"{h}x{w}", f"{image} describe", [Image.fromarray(photo(h, w, i))], {}) for i, (h, w) in enumerate(SIZES)]
    rgb = photo(300, 400, 10)
    alpha = (photo(300, 400, 11)[..., 0] // 2 + 64).astype("uint8")
    out.append(("gray", f"{image} describe", [Image.fromarray(rgb[..., 1])], {}))
    out.append(("rgba", f"{image} describe", [Image.fromarray(np.dstack([rgb, alpha]), "RGBA")], {}))
    batch = [Image.fromarray(photo(h, w, 20 + i)) for i, (h, w) in enumerate([(480, 640), (720, 1280)])]
    if several:
        out.append(("batch", f"{image} and {image} compare", batch, {}))
    out.append(("720x1280", f"{image} describe", batch[1:], {}))
    out.append(("kwargs", f"{image} describe", batch[1:], MODELS[model]["kwargs"]))  # the same, with the kwarg
    return out


def video_requests(placeholder: str, several: bool, kwargs: dict | None):
    """(name, prompt, videos, mm_processor_kwargs): (uint8 [T, H, W, 3] frames, metadata) as vLLM's video loader
    hands them, frames already sampled; two clips of different sizes in one prompt (where vLLM takes several:
    `several`); the first clip again with the model's per-request `kwargs` (where it has them)."""
    import numpy as np

    def clip(frames: int, height: int, width: int, seed: int):
        video = np.stack([photo(height, width, seed + t) for t in range(frames)])
        metadata = {"fps": 2.0, "duration": frames / 2.0, "total_num_frames": frames}
        metadata |= {"frames_indices": list(range(frames)), "video_backend": "opencv", "do_sample_frames": False}
        return video, metadata

    out = [(VIDEO_NAMES[0], f"{placeholder} describe", [clip(8, 180, 320, 40)], {})]
    if several:
        two = [clip(4, 240, 200, 50), clip(6, 360, 640, 60)]
        out.append((VIDEO_NAMES[1], f"{placeholder} and {placeholder} compare", two, {}))
    if kwargs:
        out.append(("video-kwargs", f"{placeholder} describe", [clip(8, 180, 320, 40)], kwargs))
    return out


def settings(model: str) -> tuple:
    return MODELS[model].get("normalize", (None,))


def key_of(model: str, device_normalize) -> str:
    return f"{model}-{ {None: 'default', True: 'uint8', False: 'float'}[device_normalize] }"


def counting_kernels() -> dict:
    """Counts the generic path's served primitive calls (hf_primitives' kernels that returned a tensor, not a
    reason): the evidence that the package, not transformers, computed the outputs."""
    from fused_input_norm import hf_primitives

    counts = {"pixels": 0, "resize": 0, "normalize": 0}

    def counted(function, name):
        def wrapper(*args, **kwargs):
            out = function(*args, **kwargs)
            if out is not None and not isinstance(out, str):  # None: torchvision_normalize's "the backend's"
                counts[name] += 1
            return out

        return wrapper

    kernels = [("pil_pixels", "pixels"), ("pil_array", "pixels"), ("torchvision_resize", "resize")]
    kernels.append(("torchvision_normalize", "normalize"))
    for attribute, name in [*kernels, ("pil_resize", "resize")]:
        setattr(hf_primitives, attribute, counted(getattr(hf_primitives, attribute), name))
    return counts


def worker(root: str, out_path: str) -> None:
    """One side: every model and device-normalize setting, every request; the results to `out_path`."""
    import logging

    import torch
    import transformers
    from vllm.config import ModelConfig
    from vllm.model_executor.models import registry
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.plugins import load_general_plugins

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO)  # as a server shows vLLM's INFO lines
    load_general_plugins()
    counts = counting_kernels() if os.environ.get("FUSED_INPUT_NORM_VLLM_PROCESSOR") == "1" else {}
    results = {}
    for model, spec in MODELS.items():
        module, cls = registry._MULTIMODAL_MODELS[spec["arch"]]
        module = module if module.startswith("vllm.") else f"vllm.model_executor.models.{module}"
        model_class = getattr(importlib.import_module(module), cls)
        image = spec.get("placeholder") or model_class.get_placeholder_str("image", 1) or ""
        for device_normalize in settings(model):
            path = os.path.join(root, model)
            config = ModelConfig(
                model=path, tokenizer=path, dtype="float32", mm_device_do_normalize=device_normalize, seed=0
            )
            processor = MULTIMODAL_REGISTRY.create_processor(config)
            hf = processor.info.get_hf_processor()
            key = key_of(model, device_normalize)
            before = dict(counts)
            results[key + "-class"] = class_name(hf.image_processor)
            results[key + "-isinstance"] = isinstance(hf.image_processor, getattr(transformers, spec["image"]))
            if "video" in spec:
                results[key + "-video-class"] = class_name(hf.video_processor)
                results[key + "-video-isinstance"] = isinstance(
                    hf.video_processor, getattr(transformers, spec["video"])
                )
            # where vLLM takes one image (video) a prompt, no batch of them
            limits = processor.info.get_supported_mm_limits()
            names = results[key + "-requests"] = []
            for name, prompt, images, kwargs in requests(model, image, limits.get("image") != 1):
                out = processor(prompt, processor.info.parse_mm_data({"image": images}), hf_processor_mm_kwargs=kwargs)
                results[f"{key}-{name}"] = outputs(out, "image")
                names.append(name)
            results[key + "-kernels"] = {name: counts[name] - before[name] for name in counts}
            before = dict(counts)
            if "video" in spec and model not in NO_VIDEOS:
                placeholder = model_class.get_placeholder_str("video", 1)
                several = limits.get("video") != 1
                for name, prompt, videos, kwargs in video_requests(placeholder, several, spec.get("video_request")):
                    data = processor.info.parse_mm_data({"video": videos})
                    out = processor(prompt, data, hf_processor_mm_kwargs=kwargs)
                    results[f"{key}-{name}"] = outputs(out, "video")
                    names.append(name)
            results[key + "-video-kernels"] = {name: counts[name] - before[name] for name in counts}
    torch.save(results, out_path)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """Both sides' results: (plugin on, plugin off), each with its log lines."""
    root = tmp_path_factory.mktemp("models")
    for model in MODELS:
        write_model(str(root / model), model)
    return both_sides(root, __file__)


CASES = [(model, n) for model in MODELS for n in settings(model)]


def changed(plain: dict, other: dict) -> bool:
    """Whether two requests' outputs differ in their tokens or their tensors' shapes."""

    def shapes(result):
        return [[tuple(t.shape) for t in item.values()] for item in result["tensors"]]

    return plain["prompt_token_ids"] != other["prompt_token_ids"] or shapes(plain) != shapes(other)


@pytest.mark.parametrize(("model", "device_normalize"), CASES)
def test_same_outputs_plugin_on_and_off(sides, model, device_normalize):
    """Tokens, placeholders, hashes and every tensor equal; the plugin's side holds the generic adapters (still
    instances of transformers' classes) and ran the package's kernels for this model."""
    on, off = sides
    key = key_of(model, device_normalize)
    adapter = "FusedHFImageProcessor" if family_of(model) else "FusedHFGenericImageProcessor"
    assert on[key + "-class"] == f"fused_input_norm.hf_adapter.{adapter}", on[key + "-class"]
    assert off[key + "-class"].startswith("transformers."), off[key + "-class"]
    assert on[key + "-isinstance"] and off[key + "-isinstance"]
    if "video" in MODELS[model]:
        adapter = "FusedHFVideoProcessor" if family_of(model, video=True) else "FusedHFGenericVideoProcessor"
        assert on[key + "-video-class"] == f"fused_input_norm.hf_adapter.{adapter}", on[key + "-video-class"]
        assert off[key + "-video-class"].startswith("transformers."), off[key + "-video-class"]
        assert on[key + "-video-isinstance"] and off[key + "-video-isinstance"]
    names = on[key + "-requests"]
    assert names == off[key + "-requests"] and len(names) >= 8, names
    assert ("video-8x180x320" in names) == ("video" in MODELS[model] and model not in NO_VIDEOS), names
    for name in names:
        got, expected = on[f"{key}-{name}"], off[f"{key}-{name}"]
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
            assert got[field] == expected[field], f"{name}: {field}"
        assert_same_tensors(name, got["tensors"], expected["tensors"])
    # the per-request kwargs reached the processor: the same image (video) without them comes out otherwise
    for plain, with_kwargs in (("720x1280", "kwargs"), ("video-8x180x320", "video-kwargs")):
        if with_kwargs in names:
            assert changed(off[f"{key}-{plain}"], off[f"{key}-{with_kwargs}"]), (model, with_kwargs)
    assert ("video-kwargs" in names) == ("video_request" in MODELS[model] and model not in NO_VIDEOS), names
    for video, unserved in ((False, UNSERVED), (True, VIDEO_UNSERVED)):
        kernels = on[key + ("-video-kernels" if video else "-kernels")]
        if generic_serves(model, video):
            assert kernels["resize"] > 0, (model, video, kernels)
            if model in NORMALIZED and not video:
                assert kernels["normalize"] > 0, (model, kernels)
        elif family_of(model) and (not video or model in FRAMES_AS_IMAGES):  # the family's plan, not the primitives
            assert kernels["resize"] == 0, (model, video, kernels)
        elif model in unserved and not family_of(model, video):
            assert kernels["resize"] == 0, (model, video, unserved[model], kernels)


def test_no_call_handed_back_and_the_log_names_the_generic_path(sides):
    """Strict: no call of these models went back to transformers (the adapter logs each hand-back) beyond those
    HANDED_BACK and HANDED_BACK_ANY list, and one line per model says the generic path serves it (its videos,
    where a family serves its images); the plugin-off side says nothing of them."""
    on, off = sides
    handed_back = {line.split("fused_input_norm: ", 1)[1] for line in on["log"] if "serves this call" in line}
    expected = {f"transformers' {name} serves this call: {why}" for name, whys in HANDED_BACK.items() for why in whys}
    assert expected <= handed_back, sorted(expected - handed_back)  # still handed back (else: drop them here)
    unexpected = [line for line in handed_back - expected if line.split(": ", 1)[1] not in HANDED_BACK_ANY]
    assert not unexpected, unexpected
    for model, spec in MODELS.items():
        assert not any(f"'{spec['arch']}'" in line for line in off["log"]), off["log"]
        lines = [line for line in on["log"] if f"'{spec['arch']}'" in line and "the generic path serves" in line]
        if family_of(model):  # the family's images: checked as test_vllm_families checks its models'
            if generic_serves(model, video=True):  # the generic path's videos: said on the same line
                video = f"the generic path serves videos: transformers' {spec['video']} runs"
                assert lines and all(video in line for line in lines), (model, on["log"])
            continue
        assert lines and all(f"transformers' {spec['image']}" in line for line in lines), (model, on["log"])


if __name__ == "__main__":
    worker(*sys.argv[1:])
