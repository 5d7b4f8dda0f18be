"""The image processor families FusedImageProcessor reproduces, one module each (see base.py for what a
module gives), and the one registry that the config reader, the processors, the adapters and the vLLM
plugin all read."""

from types import ModuleType

from . import (
    blip,
    clip,
    cohere2_vision,
    cosmos3_edge,
    deepseek_ocr,
    deepseek_v4,
    deepseek_vl2,
    ernie4_5_vl,
    gemma3,
    gemma4,
    gemma4_unified,
    glm4v,
    glm5_next,
    got_ocr2,
    h2ovl,
    idefics3,
    internvl_chat,
    lfm2_vl,
    llama4,
    llava_next,
    llava_onevision,
    minicpmv4_6,
    moondream3,
    nemotron_vl,
    paddleocr_vl,
    pixtral,
    qwen2_vl,
    siglip,
)
from .base import Job, Plan

FAMILIES: dict[str, ModuleType] = {
    module.KIND: module
    for module in (
        qwen2_vl,
        clip,
        siglip,
        blip,
        glm4v,
        gemma3,
        internvl_chat,
        h2ovl,
        nemotron_vl,
        got_ocr2,
        llava_onevision,
        llava_next,
        pixtral,
        llama4,
        idefics3,
        ernie4_5_vl,
        cosmos3_edge,
        glm5_next,
        paddleocr_vl,
        deepseek_ocr,
        deepseek_v4,
        deepseek_vl2,
        moondream3,
        gemma4,
        gemma4_unified,
        lfm2_vl,
        minicpmv4_6,
        cohere2_vision,
    )
}
# image_processor_type (without its Fast / Pil suffix) -> kind; processor_class -> kind, for configs that
# name only that.
TYPES = {name: module.KIND for module in FAMILIES.values() for name in module.TYPES}
PROCESSOR_CLASSES = {name: module.KIND for module in FAMILIES.values() for name in module.PROCESSOR_CLASSES}

__all__ = ["FAMILIES", "PROCESSOR_CLASSES", "TYPES", "Job", "Plan"]
