"""SGLang plugin: serves images through FusedImageProcessor in SGLang's multimodal processors.

SGLang calls `register` in its processes through the `sglang.srt.plugins` entry point (see pyproject.toml;
`SGLANG_PLUGINS` filters plugins by name). It adds an AFTER hook (SGLang's HookRegistry) on
BaseMultimodalProcessor.__init__: once SGLang has built a model's multimodal processor, the transformers
processor it holds (`_processor`) gets a FusedHFImageProcessor as its image_processor wherever that reproduces
the one held (a family of fused_input_norm.families, whatever the architecture), and a FusedHFVideoProcessor
where it holds a Qwen-VL / GLM-4V / SmolVLM video processor. For a served class this hook also:
- resolves SGLang's target device for the fast image processor BEFORE the swap (SGLang's resolver may patch
  the processor it is given, on NPU) and keeps that answer for the adapter's calls, so SGLang passes it as
  `device=` exactly as it would to transformers' processor;
- turns SGLang's nvJPEG decode off (`gpu_image_decode`): nvJPEG's pixels are not Pillow's, and transformers'
  processors, which the adapter reproduces bit for bit, are defined on Pillow's. FUSED_INPUT_NORM_SGLANG_NVJPEG=1
  keeps nvJPEG (faster decode, pixels that differ from Pillow's as they do with transformers' processor);
- rebuilds the processor fingerprint (SGLang's preprocess-cache key) with an entry naming this package and its
  version, so artifacts of transformers' processor and of this one never share a key.
One log line per model says what serves its images, and why where it is transformers'.

FUSED_INPUT_NORM_SGLANG_PROCESSOR=1 (the default) turns this on, 0 off.

SGLang's multi-tokenizer workers (`--tokenizer-worker-num > 1`) never run load_plugins; there, set
SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE=fused_input_norm.sglang_processors: importing that package installs this
same hook and registers no processor class.

sglang is imported only inside `register` (and the hook): importing this module, or fused_input_norm, never
imports it.
"""

import importlib
import logging
import os

from .hf_adapter import (
    FusedHFGenericImageProcessor,
    FusedHFGenericVideoProcessor,
    FusedHFImageProcessor,
    FusedHFVideoProcessor,
    stand_in,
    unsupported,
    unsupported_video,
)

# A child of SGLang's logger: our lines appear in SGLang's log, in its format and at its level.
logger = logging.getLogger("sglang.srt.plugins.fused_input_norm")

PROCESSOR_SWITCH = "FUSED_INPUT_NORM_SGLANG_PROCESSOR"
NVJPEG_SWITCH = "FUSED_INPUT_NORM_SGLANG_NVJPEG"
BASE_MODULE = "sglang.srt.multimodal.processors.base_processor"
HOOK_TARGET = f"{BASE_MODULE}.BaseMultimodalProcessor.__init__"


def register() -> bool:
    """The entry point. Never raises: what this cannot serve stays SGLang's and transformers', and the log says
    why. Whether the hook is registered (now or before)."""
    if not _switched_on():
        return False
    try:
        from sglang.srt.plugins.hook_registry import HookRegistry, HookType
    except ImportError as e:
        logger.warning("fused_input_norm: images stay with transformers' processor: no SGLang HookRegistry (%s)", e)
        return False
    if not any(hook is after_init for _, hook, _ in HookRegistry._hooks.get(HOOK_TARGET, [])):
        HookRegistry.register(HOOK_TARGET, after_init, HookType.AFTER)  # once: both routes may run in a process
    return True


def install() -> None:
    """The side-effect package's route (no load_plugins runs there): registers the hook and applies it now."""
    if not register():
        return
    from sglang.srt.plugins.hook_registry import HookRegistry

    base = importlib.import_module(BASE_MODULE).BaseMultimodalProcessor
    if HOOK_TARGET in HookRegistry._patched and not _hooked(base.__init__):
        # Another plugin patched it first: apply_hooks skips a patched target, so the hook is added here.
        from sglang.srt.plugins.hook_registry import HookType, _wrap_fn

        base.__init__ = _wrap_fn(base.__init__, after_init, HookType.AFTER)
        return
    HookRegistry.apply_hooks()


def _hooked(function: object) -> bool:
    """Whether `function` (a chain of SGLang's hook wrappers) already runs after_init."""
    while function is not None:
        if getattr(function, "__closure__", None) and any(
            getattr(cell, "cell_contents", None) is after_init for cell in function.__closure__
        ):
            return True
        function = getattr(function, "__wrapped__", None)
    return False


def _switched_on() -> bool:
    switch = os.environ.get(PROCESSOR_SWITCH, "1")
    if switch == "1":
        return True
    if switch != "0":
        logger.warning(
            "fused_input_norm: %s must be 1 or 0, got %r: images stay with transformers", PROCESSOR_SWITCH, switch
        )
    else:
        logger.info("fused_input_norm: images stay with transformers' processor (%s=0)", PROCESSOR_SWITCH)
    return False


_said: set[tuple] = set()


def after_init(result: object, mm_processor: object, *args: object, **kwargs: object) -> None:
    """SGLang's AFTER hook on BaseMultimodalProcessor.__init__ (`result` is __init__'s None). Never raises:
    a failure leaves transformers' processor serving, and says why."""
    try:
        said = serve_images(mm_processor)
    except Exception as e:  # never an error in SGLang's start-up: transformers' keeps serving
        said = f"transformers' processor serves images: serving them failed ({type(e).__name__}: {e})"
    if said:
        architectures = list(getattr(getattr(mm_processor, "hf_config", None), "architectures", None) or [])
        key = (type(mm_processor).__name__, tuple(architectures), said)
        if key not in _said:
            _said.add(key)
            logger.info("fused_input_norm: %s for %s: %s", type(mm_processor).__name__, architectures, said)


def serve_images(mm_processor: object) -> str | None:
    """Puts the adapters in `mm_processor._processor` where they reproduce what it holds; what serves its images
    and videos, in words (None: it holds no image or video processor)."""
    processor = getattr(mm_processor, "_processor", None)
    images = getattr(processor, "image_processor", None)
    videos = getattr(processor, "video_processor", None)
    if images is None and videos is None:
        return None
    if isinstance(images, FusedHFImageProcessor | FusedHFGenericImageProcessor) or isinstance(
        videos, FusedHFVideoProcessor | FusedHFGenericVideoProcessor
    ):
        return None  # served already (one transformers processor shared by two SGLang processors)
    device = _target_device(mm_processor, processor)  # before the swap: the resolver sees transformers' processor
    said = [
        stand_in(processor, "image_processor", "images", FusedHFImageProcessor, unsupported, logger),
        stand_in(processor, "video_processor", "videos", FusedHFVideoProcessor, unsupported_video, logger),
    ]
    said = [s for s in said if s]
    if isinstance(getattr(processor, "image_processor", None), FusedHFImageProcessor):
        if device is not None:
            # SGLang asks this for each call's device=; it gets the answer resolved above.
            mm_processor._fast_image_processor_device = lambda _processor, device=device: device
            said.append(f"on device {device!r}")
        said.append(_decode_with_pillow(type(mm_processor)))
        _refingerprint(mm_processor)
    return "; ".join(said)


def _target_device(mm_processor: object, processor: object) -> str | None:
    """The device SGLang would give transformers' fast image processor (its own rule: a BaseImageProcessor, the
    fast processor not turned off), or None where it gives none."""
    from transformers import BaseImageProcessor

    if getattr(mm_processor, "disable_fast_image_processor", False):
        return None
    if not isinstance(getattr(processor, "image_processor", None), BaseImageProcessor):
        return None
    resolve = getattr(mm_processor, "_fast_image_processor_device", None)
    return resolve(processor) if callable(resolve) else None


def _decode_with_pillow(cls: type) -> str:
    """Turns nvJPEG off for SGLang processor class `cls` (a class attribute SGLang's loaders read), unless the
    user keeps it; says which decoder runs."""
    if os.environ.get(NVJPEG_SWITCH, "0") == "1":
        return f"JPEGs decoded as SGLang decodes them ({NVJPEG_SWITCH}=1)"
    if cls.gpu_image_decode:
        cls.gpu_image_decode = False
    return f"JPEGs decoded by Pillow, as transformers' processor is defined on ({NVJPEG_SWITCH}=1 keeps nvJPEG)"


def _refingerprint(mm_processor: object) -> None:
    """Rebuilds SGLang's processor fingerprint (computed in __init__, before this hook) with this package's
    entry, and the decode setting as it is now."""
    if getattr(mm_processor, "processor_fingerprint", None) is None:
        return  # SGLang keeps no artifacts for this processor: no key to scope
    from sglang.srt.multimodal.cache.identity import build_processor_fingerprint

    import fused_input_norm

    entry = {"image_processor": f"fused_input_norm {fused_input_norm.__version__}"}
    mm_processor.processor_fingerprint = build_processor_fingerprint(mm_processor, mm_processor.hf_config, extra=entry)
