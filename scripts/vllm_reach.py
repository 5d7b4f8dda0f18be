"""The reach table: for the installed vLLM, every multimodal architecture of its model registry, what serves its
images and its videos, and why not where not.

    .venv-vllm/bin/python scripts/vllm_reach.py            # the whole table, markdown (docs/reach.md is this)
    .venv-vllm/bin/python scripts/vllm_reach.py --json     # the same rows as JSON
    .venv-vllm/bin/python scripts/vllm_reach.py --summary  # the lines the README embeds between its reach markers

What serves a modality: a fused_input_norm family by name (fused_input_norm.families, through the plugin's hook
on vLLM's cached_processor_from_config), one of the package's own vLLM-processor modules (vllm_internvl: the
`fused_input_norm.vllm_*` modules naming the vLLM processor classes they serve as CLASS / IMAGE_CLASSES, VIDEO_CLASS / VIDEO_CLASSES), "generic"
(the generic path: a transformers processor class on its TorchvisionBackend or PilBackend that no family
reproduces runs its own code with the package's primitives), or "transformers" / "vLLM" / "mistral_common" (not
served, with the reason). A generic row is "served" only where tests/test_vllm_generic.py compares that
architecture's modality in vLLM, plugin on vs off, and its primitives ran there (GENERIC_TESTED reads the test's
table), or, for a vLLM-defined class on transformers' backend that vLLM builds outside its processor cache
(GLM-4V-9B's GLM4VImageProcessorFast: vllm_plugin.BUILT_ELSEWHERE), where tests/test_vllm_copies.py runs the
architecture; elsewhere the generic path would stand in, unchecked, and the row says so as not served.

Read from the installed packages, so that a new family, a new plugin module or a new vLLM shows up without an
edit here:
  - the architectures: vllm.model_executor.models.registry's _MULTIMODAL_MODELS;
  - the modalities each takes: its model class's get_placeholder_str and its processing info's
    get_supported_mm_limits (the source, where the module cannot be imported here);
  - whether vLLM builds its processor through cached_processor_from_config (the hook) or elsewhere: the source
    of its processing info's get_hf_processor;
  - the served set: fused_input_norm.config.kind_of / video_kind_of (the families' registry), the vllm_*
    modules, and for the generic path the transformers class's backend (hf_primitives.backend_of) and the
    architectures tests/test_vllm_generic.py checks.
Only a checkpoint tells which image (and video) processor class a model loads: that is CHECKPOINTS below, with
the example checkpoint each row stands for. An image-capable architecture missing from it is reported as
"unknown (not in the table)", so the table cannot silently go stale.
"""

import argparse
import ast
import functools
import importlib
import importlib.util
import inspect
import json
import pathlib
import pkgutil
import re
import sys
from collections.abc import Mapping

MODELS_PACKAGE = "vllm.model_executor.models"
MEDIA = ("image", "video", "audio")
STATUSES = ("served", "partly", "not", "unknown")

# architecture -> (image processor, video processor, example checkpoint): the classes the checkpoint's
# preprocessor_config.json / video_preprocessor_config.json (or vLLM's own processing code) load.
# A name is transformers' class unless prefixed: "vllm:" vLLM's own preprocessing (a class of
# vllm/transformers_utils/processors, vllm/models or the model file), "remote:" the checkpoint's remote code
# ("remote:?": not readable offline), "mistral_common:" Mistral's own encoder, "frames:" (videos) a transformers
# image processor vLLM's code calls once per frame. None: the modality has no
# processor of its own. Read from vllm 0.34.0's model files (and the remote-code classes they name) and
# transformers 5.22's auto mappings, offline, without downloading the checkpoints: a checkpoint ending in "?" is
# the model's name, not a repository id checked. A row whose checkpoint ships another class is wrong here, and
# only here.
CHECKPOINTS: dict[str, tuple[str | None, str | None, str]] = {
    "Alpamayo2Super": ("Qwen2VLImageProcessor", "Qwen3VLVideoProcessor", "nvidia/Alpamayo-2-Super?"),
    "BagelForConditionalGeneration": ("SiglipImageProcessor", None, "ByteDance-Seed/BAGEL-7B-MoT"),
    "BailingMoeV3VLForConditionalGeneration": ("remote:?", None, "inclusionAI (Ling/Ming V3 VL)?"),
    "BeeForConditionalGeneration": ("remote:?", "remote:?", "Open-Bee/Bee-8B-RL"),
    "Blip2ForConditionalGeneration": ("BlipImageProcessor", None, "Salesforce/blip2-opt-2.7b"),
    "Cohere2VisionForConditionalGeneration": (
        "Cohere2VisionImageProcessor",
        None,
        "CohereLabs/command-a-vision-07-2025",
    ),
    "CohereCompassForConditionalGeneration": ("CohereCompassImageProcessor", None, "CohereLabs (Compass)?"),
    "Cosmos3ForConditionalGeneration": ("Qwen2VLImageProcessor", "Qwen3VLVideoProcessor", "nvidia/Cosmos-3?"),
    "Cosmos3EdgeForConditionalGeneration": (
        "Cosmos3EdgeImageProcessor",
        "Cosmos3EdgeVideoProcessor",
        "nvidia/Cosmos-3-Edge?",
    ),
    "DeepseekVLV2ForCausalLM": ("vllm:DeepseekVLV2Processor", None, "deepseek-ai/deepseek-vl2-tiny"),
    "DeepseekOCRForCausalLM": ("vllm:DeepseekOCRProcessor", None, "deepseek-ai/DeepSeek-OCR"),
    "DeepseekOCR2ForCausalLM": ("vllm:DeepseekOCRProcessor", None, "deepseek-ai/DeepSeek-OCR-2?"),
    "DeepseekV4ForConditionalGeneration": ("vllm:DeepseekV4VLImageProcessor", None, "deepseek-ai/DeepSeek-V4-Pro"),
    "DeepseekV41ForCausalLM": ("vllm:DeepseekV4VLImageProcessor", None, "deepseek-ai/DeepSeek-V4.1?"),
    "Dots3NoteForCausalLM": (
        "vllm:Dots3NoteImageProcessor",
        "vllm:Dots3NoteImageProcessor",
        "rednote-hilab/dots3.note?",
    ),
    "UnlimitedOCRForCausalLM": ("vllm:UnlimitedOCRProcessor", None, "Unlimited-OCR?"),
    "DotsOCRForCausalLM": ("Qwen2VLImageProcessor", None, "rednote-hilab/dots.ocr"),
    "Eagle2_5_VLForConditionalGeneration": ("vllm:InternVLChatImageProcessor", None, "nvidia/Eagle2.5-8B"),
    "Ernie4_5_VLMoeForConditionalGeneration": (
        "Ernie4_5_VLMoeImageProcessor",
        "Ernie4_5_VLMoeVideoProcessor",
        "baidu/ERNIE-4.5-VL-28B-A3B-PT",
    ),
    "Exaone4_5_ForConditionalGeneration": ("Qwen2VLImageProcessor", "Qwen2VLVideoProcessor", "LGAI-EXAONE/EXAONE-4.5?"),
    "Gemma3ForConditionalGeneration": ("Gemma3ImageProcessor", None, "google/gemma-3-4b-it"),
    "Gemma3nForConditionalGeneration": ("SiglipImageProcessor", None, "google/gemma-3n-E4B-it"),
    "DiffusionGemmaForBlockDiffusion": ("Gemma4ImageProcessor", "Gemma4VideoProcessor", "google/diffusion-gemma?"),
    "Gemma4ForConditionalGeneration": ("Gemma4ImageProcessor", "Gemma4VideoProcessor", "google/gemma-4?"),
    "Gemma4UnifiedForConditionalGeneration": (
        "Gemma4UnifiedImageProcessor",
        "Gemma4UnifiedVideoProcessor",
        "google/gemma-4 (unified)?",
    ),
    "GLM4VForCausalLM": ("vllm:GLM4VImageProcessorFast", None, "zai-org/glm-4v-9b"),
    "Glm4vForConditionalGeneration": ("Glm4vImageProcessor", "Glm4vVideoProcessor", "zai-org/GLM-4.1V-9B-Thinking"),
    "Glm4vMoeForConditionalGeneration": ("Glm4vImageProcessor", "Glm4vVideoProcessor", "zai-org/GLM-4.5V"),
    "GlmOcrForConditionalGeneration": ("Glm46VImageProcessor", "Glm46VVideoProcessor", "zai-org/GLM-OCR?"),
    "Glm5NextForConditionalGeneration": ("Glm5NextImageProcessor", "Glm5NextVideoProcessor", "zai-org/GLM-5-Next?"),
    "Granite4VisionForConditionalGeneration": ("LlavaNextImageProcessor", None, "ibm-granite/granite-4.0-vision?"),
    "H2OVLChatModel": ("vllm:H2OVLImageProcessor", "vllm:H2OVLImageProcessor", "h2oai/h2ovl-mississippi-800m"),
    "InternVLChatModel": (
        "vllm:InternVLChatImageProcessor",
        "vllm:InternVLChatVideoProcessor",
        "OpenGVLab/InternVL3-8B",
    ),
    "InternS1ForConditionalGeneration": ("GotOcr2ImageProcessor", "InternVLVideoProcessor", "internlm/Intern-S1"),
    "InternVLForConditionalGeneration": (
        "GotOcr2ImageProcessor",
        "InternVLVideoProcessor",
        "OpenGVLab/InternVL3-1B-hf",
    ),
    "InternS1ProForConditionalGeneration": (
        "Qwen2VLImageProcessor",
        "Qwen3VLVideoProcessor",
        "internlm/Intern-S1-Pro?",
    ),
    "InternS2MobiusForConditionalGeneration": ("remote:?", "remote:?", "internlm/Intern-S2-Mobius?"),
    "InternS2PreviewForConditionalGeneration": ("remote:?", "remote:?", "internlm/Intern-S2-Preview?"),
    "Idefics3ForConditionalGeneration": ("Idefics3ImageProcessor", None, "HuggingFaceM4/Idefics3-8B-Llama3"),
    "IsaacForConditionalGeneration": ("vllm:IsaacImageProcessor", None, "PerceptronAI/Isaac-0.1"),
    "KananaVForConditionalGeneration": ("remote:?", None, "kakaocorp/kanana-1.5-v-3b-instruct"),
    "KimiVLForConditionalGeneration": ("remote:KimiVLImageProcessor", None, "moonshotai/Kimi-VL-A3B-Instruct"),
    "KimiK25ForConditionalGeneration": ("vllm:KimiK25Processor", "vllm:KimiK25Processor", "moonshotai/Kimi-K2.5?"),
    "KimiK3ForConditionalGeneration": ("vllm:KimiK3Processor", None, "moonshotai/Kimi-K3?"),
    "KimiK31ForConditionalGeneration": ("vllm:KimiK3Processor", None, "moonshotai/Kimi-K3.1?"),
    "LightOnOCRForConditionalGeneration": ("PixtralImageProcessor", None, "lightonai/LightOnOCR-1B-1025"),
    "Lfm2VlForConditionalGeneration": ("Lfm2VlImageProcessor", None, "LiquidAI/LFM2-VL-1.6B"),
    # vLLM's Lfm3VlProcessor (a Qwen3VLProcessor) loads these transformers classes in place of the checkpoints'
    # remote-code wrappers of them.
    "Lfm3VlForConditionalGeneration": ("Qwen2VLImageProcessor", "Qwen3VLVideoProcessor", "LiquidAI/LFM3-VL?"),
    "Llama4ForConditionalGeneration": ("Llama4ImageProcessor", None, "meta-llama/Llama-4-Scout-17B-16E-Instruct"),
    "Llama_Nemotron_Nano_VL": (
        "vllm:LlamaNemotronNanoVLImageProcessor",
        None,
        "nvidia/Llama-3.1-Nemotron-Nano-VL-8B-V1",
    ),
    "LlavaForConditionalGeneration": ("CLIPImageProcessor", None, "llava-hf/llava-1.5-7b-hf"),
    "LlavaNextForConditionalGeneration": ("LlavaNextImageProcessor", None, "llava-hf/llava-v1.6-mistral-7b-hf"),
    "LlavaNextVideoForConditionalGeneration": (
        "LlavaNextImageProcessor",
        "LlavaNextVideoVideoProcessor",
        "llava-hf/LLaVA-NeXT-Video-7B-hf",
    ),
    "LlavaOnevisionForConditionalGeneration": (
        "LlavaOnevisionImageProcessor",
        "LlavaOnevisionVideoProcessor",
        "llava-hf/llava-onevision-qwen2-7b-ov-hf",
    ),
    "LlavaOnevision2ForConditionalGeneration": (
        "Qwen2VLImageProcessor",
        "LlavaOnevision2VideoProcessor",
        "lmms-lab/LLaVA-OneVision-2?",
    ),
    "MiMoV2OmniForCausalLM": ("vllm:MiMoVLProcessor", "vllm:MiMoVLProcessor", "XiaomiMiMo/MiMo-V2-Omni?"),
    "MiniMaxM3SparseForConditionalGeneration": (
        "vllm:MiniMaxM3VLImageProcessor",
        "vllm:MiniMaxM3VLVideoProcessor",
        "MiniMaxAI/MiniMax-M3?",
    ),
    "MiniCPMO": ("remote:MiniCPMVImageProcessor", "remote:MiniCPMVImageProcessor", "openbmb/MiniCPM-o-2_6"),
    "MiniCPMOcrForConditionalGeneration": (
        "MiniCPMOcrImageProcessor",
        "MiniCPMOcrVideoProcessor",
        "openbmb/MiniCPM-OCR?",
    ),
    "MiniCPMV": ("remote:MiniCPMVImageProcessor", "remote:MiniCPMVImageProcessor", "openbmb/MiniCPM-V-2_6"),
    "MiniCPMV4_6ForConditionalGeneration": (
        "MiniCPMV4_6ImageProcessor",
        "frames:MiniCPMV4_6ImageProcessor",  # vLLM's processing sends each frame through the image processor
        "openbmb/MiniCPM-V-4_6?",
    ),
    "MiniCPMV4_7ForConditionalGeneration": (
        "MiniCPMV4_6ImageProcessor",
        "frames:MiniCPMV4_6ImageProcessor",  # vLLM's processing sends each frame through the image processor
        "openbmb/MiniCPM-V-4_7?",
    ),
    "Mistral3ForConditionalGeneration": (
        "PixtralImageProcessor",
        None,
        "mistralai/Mistral-Small-3.1-24B-Instruct-2503 (--config-format hf; the Mistral format is Pixtral's row)",
    ),
    "MolmoForCausalLM": ("remote:MolmoImageProcessor", None, "allenai/Molmo-7B-D-0924"),
    "Molmo2ForConditionalGeneration": ("Molmo2ImageProcessor", "Molmo2VideoProcessor", "allenai/Molmo2-8B?"),
    "Moondream3ForCausalLM": ("vllm:Moondream3Processor", None, "moondream/moondream3-preview"),
    "HfMoondream": ("vllm:Moondream3Processor", None, "moondream/moondream3-preview"),
    "NemotronH_Nano_VL_V2": (
        "vllm:NanoNemotronVLProcessor",
        "vllm:NanoNemotronVLProcessor",
        "nvidia/Nemotron-Nano-12B-v2-VL",
    ),
    "NemotronH_Nano_Omni_Reasoning_V3": (
        "vllm:NanoNemotronVLProcessor",
        "vllm:NanoNemotronVLProcessor",
        "nvidia/Nemotron-3-Nano-Omni?",
    ),
    "NemotronH_Super_Omni_Reasoning_V3": (
        "vllm:NanoNemotronVLProcessor",
        "vllm:NanoNemotronVLProcessor",
        "nvidia/Nemotron-3-Super-Omni?",
    ),
    "NemotronH_Omni_Reasoning_V3": (
        "vllm:NanoNemotronVLProcessor",
        "vllm:NanoNemotronVLProcessor",
        "nvidia/Nemotron-3-Omni?",
    ),
    "NVLM_D": ("vllm:InternVLChatImageProcessor", "vllm:InternVLChatVideoProcessor", "nvidia/NVLM-D-72B"),
    "MuseGlimmerForConditionalGeneration": ("MuseGlimmerImageProcessor", "MuseGlimmerVideoProcessor", "Muse Glimmer?"),
    "MuseSparkForConditionalGeneration": ("vllm:MuseSparkProcessor", "vllm:MuseSparkVideoProcessor", "Muse Spark?"),
    "OpenCUAForConditionalGeneration": ("Qwen2VLImageProcessor", None, "xlangai/OpenCUA-7B"),
    "OpenPanguVLForConditionalGeneration": ("remote:?", "remote:?", "openPangu-VL?"),
    "OpenVLAForActionPrediction": ("vllm:OpenVLAImageProcessor", None, "openvla/openvla-7b"),
    # vLLM's OvisProcessor (Ovis1.6, Ovis2) holds the checkpoint's image processor and calls it per crop: Ovis2's
    # AIMv2 huge-patch14-448 tower's CLIPImageProcessor (Ovis1.6's: SigLIP's), inferred from the tower, not read.
    "Ovis": ("CLIPImageProcessor", None, "AIDC-AI/Ovis2-8B"),
    # vLLM's Ovis2_5Processor holds the checkpoint's image processor (AutoImageProcessor) and calls it per image
    # and per video frame. SiglipImageProcessor: the preprocessor of the SigLIP2 so400m-patch16-512 tower Ovis2.5
    # starts from (bilinear, mean/std 0.5, as transformers' own Ovis2.5 port keeps), not read from the checkpoint.
    "Ovis2_5": ("SiglipImageProcessor", "frames:SiglipImageProcessor", "AIDC-AI/Ovis2.5-9B"),
    "Ovis2_6ForCausalLM": ("SiglipImageProcessor", "frames:SiglipImageProcessor", "AIDC-AI/Ovis2.6?"),
    "Ovis2_6_MoeForCausalLM": ("SiglipImageProcessor", "frames:SiglipImageProcessor", "AIDC-AI/Ovis2.6 MoE?"),
    "PaddleOCRVLForConditionalGeneration": ("PaddleOCRVLImageProcessor", None, "PaddlePaddle/PaddleOCR-VL"),
    "PaliGemmaForConditionalGeneration": ("SiglipImageProcessor", None, "google/paligemma-3b-mix-224"),
    "Phi3VForCausalLM": ("remote:Phi3VImageProcessor", None, "microsoft/Phi-3.5-vision-instruct"),
    "Phi4ForCausalLMV": ("remote:?", None, "microsoft Phi-4 SigLIP vision?"),
    "Phi4MMForCausalLM": ("remote:Phi4MMImageProcessor", None, "microsoft/Phi-4-multimodal-instruct"),
    "PixtralForConditionalGeneration": (
        "mistral_common:ImageEncoder",
        None,
        "mistralai/Pixtral-12B-2409 (and every Mistral-format repository: params.json)",
    ),
    "QianfanOCRForConditionalGeneration": (
        "vllm:InternVLChatImageProcessor",
        "vllm:InternVLChatVideoProcessor",
        "baidu/Qianfan-OCR?",
    ),
    "Qwen2VLForConditionalGeneration": ("Qwen2VLImageProcessor", "Qwen2VLVideoProcessor", "Qwen/Qwen2-VL-7B-Instruct"),
    "Qwen2_5_VLForConditionalGeneration": (
        "Qwen2VLImageProcessor",
        "Qwen2VLVideoProcessor",
        "Qwen/Qwen2.5-VL-7B-Instruct",
    ),
    "Qwen2_5OmniModel": ("Qwen2VLImageProcessor", "Qwen2VLVideoProcessor", "Qwen/Qwen2.5-Omni-7B"),
    "Qwen2_5OmniForConditionalGeneration": ("Qwen2VLImageProcessor", "Qwen2VLVideoProcessor", "Qwen/Qwen2.5-Omni-7B"),
    "Qwen3OmniMoeForConditionalGeneration": (
        "Qwen2VLImageProcessor",
        "Qwen2VLVideoProcessor",
        "Qwen/Qwen3-Omni-30B-A3B-Instruct",
    ),
    "Qwen3VLForConditionalGeneration": ("Qwen2VLImageProcessor", "Qwen3VLVideoProcessor", "Qwen/Qwen3-VL-8B-Instruct"),
    "Qwen3VLMoeForConditionalGeneration": (
        "Qwen2VLImageProcessor",
        "Qwen3VLVideoProcessor",
        "Qwen/Qwen3-VL-30B-A3B-Instruct",
    ),
    "Qwen3_5ForConditionalGeneration": ("Qwen2VLImageProcessor", "Qwen3VLVideoProcessor", "Qwen/Qwen3.5?"),
    "Qwen3_5MoeForConditionalGeneration": ("Qwen2VLImageProcessor", "Qwen3VLVideoProcessor", "Qwen/Qwen3.5 MoE?"),
    "Qwen4ExpForConditionalGeneration": ("Qwen2VLImageProcessor", "Qwen3VLVideoProcessor", "Qwen/Qwen4-Exp?"),
    "RForConditionalGeneration": ("remote:?", "remote:?", "R-VL?"),
    "SkyworkR1VChatModel": ("vllm:InternVLChatImageProcessor", None, "Skywork/Skywork-R1V-38B"),
    "SmolVLMForConditionalGeneration": ("SmolVLMImageProcessor", None, "HuggingFaceTB/SmolVLM2-2.2B-Instruct"),
    "StepVLForConditionalGeneration": ("vllm:Step3VLImageProcessor", None, "stepfun-ai/Step-VL?"),
    "Step3VLForConditionalGeneration": ("vllm:Step3VLImageProcessor", None, "stepfun-ai/step3"),
    "Step3p7ForConditionalGeneration": ("vllm:Step3VLImageProcessor", None, "stepfun-ai/Step-3.7?"),
    "Step5ForConditionalGeneration": ("vllm:Step3VLImageProcessor", None, "stepfun-ai/Step-5?"),
    "NemotronParseForConditionalGeneration": ("remote:?", None, "nvidia/NVIDIA-Nemotron-Parse-v1.1"),
    "RadioMBartPrefixForCausalLM": ("remote:?", None, "nvidia/Nemotron-3.5-Parse"),
}


def model_module_name(module: str) -> str:
    """The registry's module entry as an importable name (most are relative to MODELS_PACKAGE)."""
    return module if module.startswith("vllm.") else f"{MODELS_PACKAGE}.{module}"


def _constants(source: str, functions: tuple[str, ...]) -> set[str]:
    """The media names ("image", "video", "audio") written as string constants inside `functions` of `source`."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name in functions:
            found |= {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in MEDIA}
    return found


def _source_files(name: str) -> list[str]:
    """The module's file, or every file of the package (vllm/models/<model>/ spreads a model over several)."""
    spec = importlib.util.find_spec(name)
    if not spec.submodule_search_locations:
        return [spec.origin]
    return sorted(str(p) for d in spec.submodule_search_locations for p in pathlib.Path(d).rglob("*.py"))


def _source(obj: object) -> str:
    try:
        return inspect.cleandoc("\n" + inspect.getsource(obj))
    except (OSError, TypeError):
        return ""


def _builds(info: type) -> str:
    """The source of the processing info's get_hf_processor, with every super().get_hf_processor it calls (up
    its MRO): where the processor is built, and from which class."""
    sources = []
    for cls in info.__mro__:
        if "get_hf_processor" in vars(cls):
            sources.append(_source(vars(cls)["get_hf_processor"]))
            if "super().get_hf_processor(" not in sources[-1]:
                break
    return "\n".join(sources)


def read_model(module: str, cls: str) -> dict:
    """What vLLM's own code says of one architecture: the media it takes, whether its processor is built through
    cached_processor_from_config, and the processing info class (None where the module cannot be imported
    here: then the media are read from its source)."""
    name = model_module_name(module)
    try:
        model = getattr(importlib.import_module(name), cls)
    except Exception as e:  # a GPU-only or optional dependency: the source still says what it takes
        media = set()
        for path in _source_files(name):
            with open(path) as f:
                media |= _constants(f.read(), ("get_supported_mm_limits", "get_placeholder_str"))
        return {"media": media, "hook": None, "asks": [], "info": None, "import_error": f"{type(e).__name__}: {e}"}
    media = set()
    for medium in MEDIA:
        try:
            if model.get_placeholder_str(medium, 1) is not None:
                media.add(medium)
        except Exception:
            pass
    factory = getattr(model, "_processor_factory", None)
    info = getattr(factory, "info", None)
    builds = ""
    if isinstance(info, type):
        # What the processing info accepts (its get_supported_mm_limits and those it overrides, up its classes)
        # bounds what the model class has placeholders for: H2OVL's model is InternVL's, with a video
        # placeholder, but its processing info takes images only.
        limits = set()
        for klass in info.__mro__:
            if "get_supported_mm_limits" in vars(klass):
                limits |= _constants(_source(vars(klass)["get_supported_mm_limits"]), ("get_supported_mm_limits",))
        media = media & limits if media and limits else media | limits
        builds = _builds(info)
    elif info is not None:  # a function choosing the info class (LLaVA's): read the model module instead
        builds = _source(sys.modules[name])
    hook = "ctx.get_hf_processor(" in builds if builds else None
    # The processor class it asks for: ctx.get_hf_processor(X, ...), ctx.init_processor(X, ...) or X(...) returned.
    asks = re.findall(r"(?:get_hf_processor|init_processor)\(\s*([A-Z]\w*)", builds)
    asks += re.findall(r"return ([A-Z]\w*Processor)\(", builds)
    info_name = getattr(info, "__name__", None)
    return {"media": media, "hook": hook, "asks": sorted(set(asks)), "info": info_name, "import_error": None}


def plugin_modules() -> dict[str, dict[str, str]]:
    """Per modality ("images", "videos"): vLLM processor class -> the fused_input_norm module that serves it in
    place (each vllm_* module's CLASS or IMAGE_CLASSES for images, its VIDEO_CLASS or VIDEO_CLASSES for videos)."""
    served = {"images": {}, "videos": {}}
    for found, module in _vllm_modules():
        for name in (getattr(module, "CLASS", None), *getattr(module, "IMAGE_CLASSES", ())):
            if isinstance(name, str):
                served["images"][name] = found.name
        for name in (getattr(module, "VIDEO_CLASS", None), *getattr(module, "VIDEO_CLASSES", ())):
            if isinstance(name, str):
                served["videos"][name] = found.name
    return served


def _vllm_modules():
    """(found, module) for each fused_input_norm.vllm_* module."""
    import fused_input_norm

    for found in pkgutil.iter_modules(fused_input_norm.__path__):
        if found.name.startswith("vllm_"):
            yield found, importlib.import_module(f"fused_input_norm.{found.name}")


@functools.cache
def plugin_video_reasons() -> dict[str, str]:
    """vLLM processor class -> why a vllm_* module that serves its images leaves its videos to vLLM (the module's
    VIDEOS_UNSERVED)."""
    reasons = {}
    for found, module in _vllm_modules():
        why = getattr(module, "VIDEOS_UNSERVED", None)
        for name in getattr(module, "IMAGE_CLASSES", ()) if why else ():
            reasons[name] = f"{found.name} leaves them to vLLM: {why}"
    return reasons


TESTS = pathlib.Path(__file__).resolve().parent.parent / "tests"


def generic_tested() -> dict[str, dict[str, str]]:
    """Per modality ("images", "videos"): the architectures tests/test_vllm_generic.py compares in vLLM with the
    generic path serving -> "" (served), or -> why it does not count them served (the test's UNSERVED /
    VIDEO_UNSERVED; the videos it does not compare, NO_VIDEOS)."""
    sys.path.insert(0, str(TESTS))
    try:
        import test_vllm_generic as tested
    finally:
        sys.path.remove(str(TESTS))
    out = {"images": {}, "videos": {}}
    for model, spec in tested.MODELS.items():  # (where a family has landed, the family's row wins anyway)
        for medium, unserved in (("images", tested.UNSERVED), ("videos", tested.VIDEO_UNSERVED)):
            if medium == "videos" and "video" not in spec:
                continue
            why = unserved.get(model, "")
            if why:
                why = f"the generic path stands in, but its resize never runs ({why})"
            if medium == "videos" and model in tested.NO_VIDEOS:
                why = f"its vLLM test does not compare videos: {tested.NO_VIDEOS[model]}"
            out[medium][spec["arch"]] = why
    return out


def built_elsewhere() -> set[str]:
    """The vLLM model modules whose processing builds its transformers processor itself, where the plugin
    reaches it (vllm_plugin.BUILT_ELSEWHERE)."""
    from fused_input_norm import vllm_plugin

    return set(vllm_plugin.BUILT_ELSEWHERE)


def elsewhere_tested() -> set[str]:
    """The architectures tests/test_vllm_copies.py runs through vLLM plugin on vs off (those of BUILT_ELSEWHERE
    among them count as served)."""
    return {architecture for architecture, *_ in _copies_test().MODELS.values()}


def generic_copies() -> dict[str, dict[str, str]]:
    """The architectures whose vLLM-defined image processor (on a transformers backend, no family) the generic path
    serves in tests/test_vllm_copies.py (its GENERIC) -> {"module": the class's module, "videos": why their videos
    are not served ("": served, compared there: its VIDEOS)}."""
    tested = _copies_test()
    return {
        tested.MODELS[model][0]: {
            "module": module,
            "videos": tested.VIDEO_UNSERVED.get(model, "" if model in tested.VIDEOS else "its videos are not compared"),
        }
        for model, module in tested.GENERIC.items()
    }


def uncompared_videos() -> dict[str, str]:
    """The architectures whose videos the plugin serves by a family but tests/test_vllm_copies.py does not compare
    (its NO_VIDEOS) -> why: their rows are "partly"."""
    tested = _copies_test()
    return {tested.MODELS[model][0]: why for model, why in tested.NO_VIDEOS.items()}


def _copies_test():
    sys.path.insert(0, str(TESTS))
    try:
        import test_vllm_copies as tested
    finally:
        sys.path.remove(str(TESTS))
    return tested


def _generic(cls: str, module: str = "transformers") -> bool:
    """Whether class `cls` of `module` (transformers, or the vLLM model module that names vLLM's own class) is one
    the generic path stands in for: on transformers' TorchvisionBackend or PilBackend (the plugin's own test,
    hf_adapter.unsupported_generic, also needs an instance)."""
    from fused_input_norm.hf_primitives import backend_of

    try:
        found = getattr(importlib.import_module(module), cls)
    except (AttributeError, ImportError):
        return False
    return isinstance(found, type) and backend_of(found) is not None


def _medium(
    name: str | None, video: bool, model: Mapping, served_in_place: Mapping[str, str], generic: Mapping[str, str]
) -> tuple[str, str]:
    """(what serves it, why not) for one modality's processor `name` as CHECKPOINTS writes it, in the model
    read_model read; `generic`: this modality's architectures test_vllm_generic checks -> why not served ("":
    served)."""
    from fused_input_norm import config

    if name is None:
        return "unknown", "no processor class in the table"
    kind, _, cls = name.rpartition(":")
    if kind == "remote" and cls == "?":
        return "unknown", "remote code: unknown"
    if kind == "vllm":
        if cls in served_in_place:
            return served_in_place[cls], ""
        tested = generic_copies().get(model["architecture"])
        reached = model["hook"] is not False or model["module"] in built_elsewhere()
        if tested is not None and reached and _generic(cls, tested["module"]):
            if not video or not tested["videos"]:
                return "generic", ""
            return "vLLM", f"vLLM's own processor ({cls}); the generic path stands in, but {tested['videos']}"
        if model["module"] in built_elsewhere() and _generic(cls, model["module"]):
            return (
                "vLLM",
                f"vLLM's own processor ({cls}); the generic path stands in (BUILT_ELSEWHERE), with no vLLM test",
            )
        why = plugin_video_reasons().get(cls) if video else None
        if why:
            return "vLLM", f"vLLM's own processor ({cls}); {why}"
        return "vLLM", f"vLLM's own processor ({cls})"
    if kind == "frames":  # a video whose frames go through a transformers image processor, one call each
        kind, video = "", False
    if kind == "mistral_common":
        # vLLM wraps the encoder in its MistralCommonImageProcessor; vllm_mistral serves that class (its test:
        # tests/test_vllm_mistral.py), Intel IPP on or off.
        server = served_in_place.get("MistralCommonImageProcessor")
        if server is None:
            return "mistral_common", f"Mistral format: mistral_common's {cls}"
        return server, ""
    family = (
        config.video_kind_of({"video_processor_type": cls}) if video else config.kind_of({"image_processor_type": cls})
    )
    what = "video processor" if video else "image processor"
    if family is None and kind == "" and model["hook"] is not False and _generic(cls):
        if model["architecture"] not in generic:
            return "transformers", f"{what} {cls} has no family; the generic path stands in, with no vLLM test"
        why = generic[model["architecture"]]
        return ("transformers", f"{what} {cls} has no family; {why}") if why else ("generic", "")
    if family is None:
        origin = "remote code " if kind == "remote" else ""
        return "transformers", f"{origin}{what} {cls} has no family"
    wrapped = [served_in_place[a] for a in model["asks"] if a in served_in_place]
    if model["hook"] is False and wrapped:  # a processor vLLM builds itself, served at class level
        return wrapped[0], ""
    if model["hook"] is False and model["module"] in built_elsewhere():
        if model["architecture"] in elsewhere_tested():
            return family, ""
        return "transformers", f"{cls} ({family}), reached where vLLM builds it (BUILT_ELSEWHERE), with no vLLM test"
    if model["hook"] is False:
        return "transformers", f"{cls} ({family}) but vLLM builds its processor outside cached_processor_from_config"
    return family, ""


def row(
    arch: str, module: str, cls: str, served_in_place: Mapping[str, Mapping[str, str]], generic: Mapping | None = None
) -> dict:
    """One architecture's row: media, what serves images and videos, the status and why (`generic`:
    generic_tested(), by default none checked)."""
    generic = generic or {"images": {}, "videos": {}}
    model = read_model(module, cls) | {"architecture": arch, "module": model_module_name(module)}
    media = model["media"]
    entry = {"architecture": arch, "module": model_module_name(module), "media": sorted(media)}
    hook = {True: "cached_processor_from_config", False: "elsewhere", None: "?"}[model["hook"]]
    entry |= {"vllm_asks_for": ", ".join(model["asks"]), "built": hook, "info": model["info"]}
    entry |= {"images": "", "videos": "", "status": "", "why": "", "checkpoint": "", "table": ""}
    if model["import_error"]:
        entry["note"] = f"not importable here ({model['import_error'][:120]}); media read from its source"
    if not media & {"image", "video"}:
        return entry | {"status": "no images", "why": "takes " + (", ".join(sorted(media)) or "no media it names")}
    if arch not in CHECKPOINTS:
        return entry | {"status": "unknown", "why": "unknown (not in the table)"}
    images, videos, checkpoint = CHECKPOINTS[arch]
    entry |= {"checkpoint": checkpoint, "table": " / ".join(n for n in (images, videos) if n)}
    whys = []
    statuses = []
    for medium, name, video in (("images", images, False), ("videos", videos, True)):
        if medium[:-1] not in media:
            entry[medium] = "-"
            continue
        server, why = _medium(name, video, model, served_in_place.get(medium, {}), generic[medium])
        if video and not why:  # served, but its vLLM test compares no video: partly
            why = uncompared_videos().get(arch, "")
        entry[medium] = server
        if why:
            whys.append(f"{medium}: {why}")
        if server == "unknown":
            statuses.append("unknown")
        elif server in ("transformers", "vLLM", "mistral_common"):
            statuses.append("not")
        else:
            statuses.append("partly" if why else "served")
    if "unknown" in statuses:
        status = "unknown"
    elif all(s == "served" for s in statuses):
        status = "served"
    elif all(s == "not" for s in statuses):
        status = "not"
    else:
        status = "partly"
    return entry | {"status": status, "why": "; ".join(whys)}


def reach(models: Mapping[str, tuple[str, str]] | None = None) -> list[dict]:
    """The rows of every architecture of `models` (vLLM's _MULTIMODAL_MODELS by default)."""
    if models is None:
        from vllm.model_executor.models import registry

        models = registry._MULTIMODAL_MODELS
    served_in_place = plugin_modules()
    generic = generic_tested()
    return [row(arch, module, cls, served_in_place, generic) for arch, (module, cls) in models.items()]


def counts(rows: list[dict]) -> dict:
    tally = {status: sum(r["status"] == status for r in rows) for status in STATUSES}
    return tally | {"image_capable": sum(tally.values()), "architectures": len(rows)}


def vllm_version() -> str:
    from importlib.metadata import version

    return version("vllm")


def summary_line(rows: list[dict]) -> str:
    c = counts(rows)
    return (
        f"vllm {vllm_version()}: {c['architectures']} multimodal architectures, {c['image_capable']} take images or "
        f"videos: **{c['served']} served, {c['partly']} partly, {c['not']} not, {c['unknown']} unknown**"
    )


def summary(rows: list[dict]) -> str:
    """The lines the README embeds between <!-- reach:begin --> and <!-- reach:end -->."""
    served = sorted(r["architecture"] for r in rows if r["status"] == "served")
    partly = sorted(r["architecture"] for r in rows if r["status"] == "partly")
    lines = [
        f"- {summary_line(rows)} (`scripts/vllm_reach.py`; the table: [docs/reach.md](docs/reach.md)).",
        f"- Served: {', '.join(served)}.",
    ]
    if partly:  # no line where none is
        lines.append(f"- Partly: {', '.join(partly)}.")
    return "\n".join(lines)


def markdown(rows: list[dict]) -> str:
    lines = [
        "# Reach: which vLLM architectures fused_input_norm serves",
        "",
        "Generated by `scripts/vllm_reach.py` (`.venv-vllm/bin/python scripts/vllm_reach.py > docs/reach.md`);",
        "do not edit by hand. For the installed vLLM, every multimodal architecture of its registry: what serves",
        "its images and videos (a fused_input_norm family, a `fused_input_norm.vllm_*` module, the generic path,",
        "or vLLM / transformers / mistral_common: not served) and why not; the generic path counts as served",
        "where `tests/test_vllm_generic.py` checks the architecture in vLLM. The processor classes come from the script's",
        "one table (CHECKPOINTS: the example checkpoint each row stands for); everything else is read from the",
        'installed vLLM and fused_input_norm. "vLLM asks for": the processor class its processing info builds',
        "or asks for, and whether through `cached_processor_from_config` (the plugin's hook) or elsewhere. A",
        'checkpoint ending in "?" is the model\'s name, not a repository id checked (the table was written offline).',
        "",
        summary_line(rows) + ".",
        "",
        "| Architecture | Media | Images | Videos | Status | Why not | vLLM asks for (built) | Processors (table) |"
        " Example checkpoint |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [r["architecture"], ", ".join(r["media"]), r["images"], r["videos"], r["status"], r["why"]]
        cells += [f"{r['vllm_asks_for']} ({r['built']})", r["table"], r["checkpoint"]]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="the rows and counts as JSON")
    parser.add_argument("--summary", action="store_true", help="the README's few lines")
    args = parser.parse_args(argv)
    rows = reach()
    if args.json:
        print(json.dumps({"vllm": vllm_version(), "counts": counts(rows), "rows": rows}, indent=1))
    elif args.summary:
        print(summary(rows))
    else:
        print(markdown(rows), end="")


if __name__ == "__main__":
    main()
