"""vLLM's own DeepSeek-V4 / V4.1 vision preprocessing served by FusedImageProcessor.

DeepseekV4ForConditionalGeneration and DeepseekV41ForCausalLM are not preprocessed by transformers but by
vllm/models/deepseek_v4/common/mm_preprocess.py and vllm/models/deepseek_v41/common/mm_preprocess.py: their
DeepseekV4VLProcessor (built by vLLM's get_hf_processor, not through cached_processor_from_config) calls a
DeepseekV4VLImageProcessor per image, whose load_image sizes a canvas of whole patches to the token budget,
pads the image onto it with Pillow's ImageOps.pad (bicubic, grey 127; a plain bicubic resize past
max_wh_ratio), normalizes in float32, casts to bfloat16 and cuts patches. `serve` replaces that class's
__call__ with the families.deepseek_v4 plan (reference "pil": the installed Pillow's bicubic), one fused pass
from the uint8 image to the bfloat16 patches; vLLM's own code still builds every token from the grids.

Those modules import the whole model (tens of seconds), so they are not imported here: `serve` wraps vLLM's
MultiModalRegistry._create_processing_ctx, which runs after vLLM has imported the model class, and serves each
module the first time it is found loaded (one log line per model).

vLLM's code is only served as this module knows it: the sources of the functions it reproduces must be those
of vllm 0.34.0 (their SHA-256 below); where they moved, nothing changes and the log says why. A call it does not
reproduce (an image that is not an RGB or gray PIL image, a subclass, a canvas the plan refuses) runs vLLM's own
code, and the first call of each kind logs why.

vllm is imported only inside `serve`.
"""

import functools
import importlib
import inspect
import logging
import sys
import threading

import torch

from .vllm_internvl import HandedBack, moved, pil_images, processor, wrap_method

REGISTRY_MODULE = "vllm.multimodal.registry"
CLASS = "DeepseekV4VLImageProcessor"
# The SHA-256 of the functions both modules share, as vllm 0.34.0 writes them.
SHARED = {
    "load_image": "61394665bfd3b858b2f0395aa1d41d0d130865714f5f5dfdbd09552c8913ac3e",
    f"{CLASS}.__call__": "cf542895c8d46cf2aa8d8c2a133c5ce27d4c2d3d93140494e024aceca0f67f04",
}
# Per module: its model, how it shrinks a canvas (families.deepseek_v4's budget), and its own functions' SHA-256.
MODULES = {
    "vllm.models.deepseek_v4.common.mm_preprocess": (
        "DeepSeek-V4",
        "v4",
        {
            "grid_tokens": "69c040b4a995c64013e3fa95d2f740028c2684b8741c1509163d697d950934a4",
            "solve_resize_ratio": "d104e052230e9cf26a8f9a3a473a3f65b26b76d40308106a778aca5c9c012a02",
            "safe_resize": "2923a145de711ab779eb44dbdca171a5e67fb3a1654e0a82cc9ff08e270d5e5c",
            f"{CLASS}.__init__": "7224cbf4757b8e3b166d448870910f1da5ce38fb83ff31a98d87b1cf26935f18",
        },
    ),
    "vllm.models.deepseek_v41.common.mm_preprocess": (
        "DeepSeek-V4.1",
        "v4.1",
        {
            "llm_grid": "e1be01f197e72cfe140d2138a39eee0bf27ec5c4aa4ea44e8b0081cb1dd3c623",
            "num_image_tokens": "f5ddabad6ea4979181b45eb7cf9a7bc81f1299bc3fc9a337a575884d1fabab9f",
            "solve_resize_ratio": "752df8cf9ea63c0300e2fc462ab96ebc103de42b0c7745926bcc0d4ba049abaf",
            "safe_resize": "21f83807a574b66589d036e4e605533949de7cea697dc711c890a18c49a02e6a",
            f"{CLASS}.__init__": "21e260982827778ef36f1a68662af58899a1fa5d129e16933f3b0a29f72b2cb2",
        },
    ),
}
SETTINGS = ("patch_size", "downsample_ratio", "max_n_token", "min_pixels", "max_wh_ratio")


def serve(log: logging.Logger) -> str:
    """Makes FusedImageProcessor serve vLLM's DeepseekV4VLImageProcessor (V4 and V4.1) once vLLM loads either;
    returns the sentence to log now."""
    try:
        registry = importlib.import_module(REGISTRY_MODULE).MultiModalRegistry
        original = registry._create_processing_ctx
    except (ImportError, AttributeError) as e:
        return (
            f"vLLM's {CLASS} serves: this vLLM has no {REGISTRY_MODULE}.MultiModalRegistry._create_processing_ctx ({e})"
        )
    later = f"vLLM's {CLASS} (DeepSeek-V4 / V4.1): said when vLLM first loads one"
    if getattr(original, "fused_input_norm_wrapped", None) is not None:  # vLLM may load plugins more than once
        return later
    handed_back = HandedBack(log)
    lock, seen = threading.Lock(), set()

    def serve_loaded() -> None:
        for name, (model, budget, own) in MODULES.items():
            module = sys.modules.get(name)
            if module is None or name in seen:
                continue
            with lock:
                if name in seen:
                    continue
                seen.add(name)
                log.info("fused_input_norm: %s", _serve_module(module, model, budget, own, handed_back))

    @functools.wraps(original)
    def _create_processing_ctx(self, *args, **kwargs):
        serve_loaded()
        return original(self, *args, **kwargs)

    _create_processing_ctx.fused_input_norm_wrapped = original
    registry._create_processing_ctx = _create_processing_ctx
    serve_loaded()
    return later


def _serve_module(module, model: str, budget: str, own: dict, handed_back) -> str:
    """Wraps `module`'s DeepseekV4VLImageProcessor.__call__ where its code is vllm 0.34.0's; says so or why not."""
    reason = moved(module, {**SHARED, **own})
    if reason is not None:
        return f"vLLM's {CLASS} of {model} serves: {reason}"
    cls = getattr(module, CLASS)
    signature = inspect.signature(cls.__call__)

    def serve_call(upstream, args: tuple, kwargs: dict) -> tuple | str:
        return _served(cls, signature, budget, upstream, args, kwargs)

    wrap_method(cls, "__call__", serve_call, handed_back)
    return (
        f"FusedImageProcessor (reference 'pil') serves vLLM's {CLASS} of {model} in place of its Pillow pad / "
        "resize, float32 normalize, bfloat16 cast and patch cut"
    )


def _served(cls, signature: inspect.Signature, budget: str, upstream, args: tuple, kwargs: dict) -> tuple | str:
    """load_image's (patches, n_vit_h, n_vit_w, n_llm_h, n_llm_w) for this call, or why it goes to vLLM's code."""
    if type(upstream) is not cls:
        return f"{type(upstream).__name__} is a subclass of {cls.__name__} with preprocessing of its own"
    try:
        call = signature.bind(upstream, *args, **kwargs).arguments
    except TypeError as e:
        return f"arguments __call__ does not take ({e})"
    # vLLM converts to RGB before it resizes: for gray that is the 3 channels the processor makes too
    images = pil_images(call["image"], ("RGB", "L"), "vLLM converts it to RGB first")
    if isinstance(images, str):
        return images
    config = {"image_processor_type": CLASS, "budget": budget}
    config |= {key: getattr(upstream, key) for key in SETTINGS}
    try:
        out = processor(tuple(sorted(config.items())), "pil")(images, torch.bfloat16)
    except (TypeError, ValueError) as e:
        return str(e)
    (n_vit_h, n_vit_w), (n_llm_h, n_llm_w) = out["vit_grid"][0].tolist(), out["llm_grid"][0].tolist()
    return out["pixel_values"], n_vit_h, n_vit_w, n_llm_h, n_llm_w
