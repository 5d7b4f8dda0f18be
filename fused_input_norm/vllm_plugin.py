"""vLLM plugin: serves images through FusedImageProcessor and runs vLLM's FusedMMInputNorm through
torch.ops.fused_input_norm.

vLLM calls `register` in each of its processes through the `vllm.general_plugins` entry point (see
pyproject.toml; `VLLM_PLUGINS` filters plugins by name). It does two independent things.

Images (FUSED_INPUT_NORM_VLLM_PROCESSOR=1, the default; 0 turns it off): wherever the transformers processor
vLLM loads for a model, whatever its architecture, holds an image processor that FusedImageProcessor
reproduces (a family of fused_input_norm.families: Qwen2-VL's, CLIP's, SigLIP's, ...), it gets a
FusedHFImageProcessor as its image_processor, with transformers' call signature and the same outputs (uint8
rows on vLLM's mm_device_do_normalize path, float32 otherwise), faster; where it holds a Qwen-VL video
processor, a FusedHFVideoProcessor (transformers' own frame sampling, FusedVideoProcessor's resize and patch
rows). An image or video processor no family reproduces, on transformers' TorchvisionBackend or PilBackend,
gets the generic path instead (FusedHFGenericImageProcessor / FusedHFGenericVideoProcessor: its own code with
the package's exact image reading and resize primitives; its normalize stays transformers'). The hook wraps
`cached_processor_from_config` where vLLM's processing context calls it (imported by
name into that module, so that is the name to wrap). Other processors, and calls these do not reproduce,
stay with transformers; one log line per model says which processor serves its images and videos, and why
where it is transformers'. The models whose vLLM processing builds its transformers processor itself (OpenCUA,
LLaVA-OneVision-2, BAGEL, GLM-4V-9B: BUILT_ELSEWHERE) are reached by wrapping their processing info class's
get_hf_processor when vLLM imports their module. vLLM's own InternVL image processor (InternVLChatModel's, not transformers') is
served by vllm_internvl, vLLM's own DeepSeek-OCR processor (DeepSeek-OCR, -2, Unlimited-OCR) by
vllm_deepseek_ocr, DeepSeek-VL2's (DeepseekVLV2Processor) by vllm_deepseek_vl2, Moondream 3's (Moondream3Processor) by vllm_moondream3, Step3-VL's (Step3VLImageProcessor) by
vllm_step3, DeepSeek-V4 / V4.1's (DeepseekV4VLImageProcessor) by vllm_deepseek_v4, Mistral-format checkpoints'
(MistralCommonImageProcessor around mistral_common's ImageEncoder) by vllm_mistral where OpenCV runs its own
INTER_CUBIC, OpenVLA's (OpenVLAImageProcessor) by vllm_openvla, Isaac's (IsaacImageProcessor) by vllm_isaac
(where torch resizes uint8 with its AVX2 kernel), and, once vLLM has imported their modules (LAZILY_SERVED), Kimi-K2.5 / K3's
(KimiK25FusedVisionProcessor) by vllm_kimi, Muse Spark's Pillow resizes by vllm_muse_spark and MiMo-V2-Omni's image resize
by vllm_mimo (where torch's float bilinear is the engine's) and dots3.note's (Dots3NoteImageProcessor) by
vllm_dots3_note, each with its own log line.

FusedMMInputNorm: it registers a subclass of vLLM's own
FusedMMInputNorm as its out-of-tree replacement, so every model that builds that class gets this one:
constructed, configured and stored exactly as upstream's (its __init__, buffers and input_dtype), with
forward_cuda, forward_hip, forward_native and forward_oot running this package's op: no 2^31-element limit,
no contiguous copy of strided input, the vectorized multi-threaded CPU kernel instead of eager ops.
Inputs the op has no kernel for (another device, float64 pixels) and the XPU path stay upstream's.

vllm is imported only inside `register`: importing this module, or fused_input_norm, never imports it.
"""

import functools
import importlib
import logging
import os

import torch

from . import (
    build_info,
    ops,
    vllm_deepseek_ocr,
    vllm_deepseek_v4,
    vllm_deepseek_vl2,
    vllm_dots3_note,
    vllm_internvl,
    vllm_isaac,
    vllm_kimi,
    vllm_mimo,
    vllm_mistral,
    vllm_moondream3,
    vllm_muse_spark,
    vllm_openvla,
    vllm_step3,
)
from .hf_adapter import (
    FusedHFGenericImageProcessor,
    FusedHFGenericVideoProcessor,
    FusedHFImageProcessor,
    FusedHFVideoProcessor,
    stand_in,
    unsupported,
    unsupported_video,
)
from .module import channel_view

# A child of vLLM's logger: our lines appear in vLLM's log, in its format and at its level.
logger = logging.getLogger("vllm.plugins.fused_input_norm")

UPSTREAM_MODULE = "vllm.model_executor.layers.fusion.mm_input_norm"
UPSTREAM_CLASS = "FusedMMInputNorm"


PROCESSOR_SWITCH = "FUSED_INPUT_NORM_VLLM_PROCESSOR"
CONTEXT_MODULE = "vllm.multimodal.processing.context"
# Where vLLM builds a video processor on its own (InternVL-hf's and Intern-S1's processing info replaces the
# processor's video_processor with this function's on every get_hf_processor), and the model modules that
# import it by name (wrapped there too where vLLM imported them before the plugin loaded).
VIDEO_PROCESSOR_MODULE = "vllm.transformers_utils.processor"
VIDEO_PROCESSOR_USERS = ("vllm.model_executor.models.interns1",)
# The models whose vLLM processing builds its transformers processor itself, never through
# cached_processor_from_config: model module -> its processing info class, whose get_hf_processor is wrapped
# once vLLM imports the module (vLLM imports a model's module when it first needs that model).
BUILT_ELSEWHERE = {
    # OpenCUAProcessor.__init__: Qwen2VLImageProcessor(**preprocessor_config.json), a new one per call
    "vllm.model_executor.models.opencua": "OpenCUAProcessingInfo",
    # _load_ov2_processor: Qwen2VLImageProcessor.from_pretrained beside the checkpoint's remote-code processor
    "vllm.model_executor.models.llava_onevision2": "LlavaOnevision2ProcessingInfo",
    # cached_get_image_processor (AutoImageProcessor: SiglipImageProcessor) in vLLM's own BagelProcessor
    "vllm.model_executor.models.bagel": "BagelProcessingInfo",
    # GLM4VProcessingInfo.get_image_processor: vLLM's own GLM4VImageProcessorFast (a TorchvisionBackend with class
    # attributes only: the generic path's), a new one per call
    "vllm.model_executor.models.glm4v": "GLM4VProcessingInfo",
}
REGISTRY_MODULE = "vllm.model_executor.models.registry"
# vLLM's modules served only once vLLM imports them: module -> (its log key, the vllm_* serve function)
LAZILY_SERVED = {
    vllm_kimi.MODULE: ("kimi", vllm_kimi.serve),
    vllm_muse_spark.MODULE: ("muse_spark", vllm_muse_spark.serve),
    vllm_mimo.MODULE: ("mimo", vllm_mimo.serve),
    vllm_dots3_note.MODULE: ("dots3_note", vllm_dots3_note.serve),
}


def register() -> None:
    """The entry point. Never raises: what this cannot serve stays vLLM's and transformers', and the log says
    why."""
    register_image_processor()
    register_input_norm()


def register_image_processor() -> None:
    """Wraps vLLM's cached_processor_from_config so that the processors it returns hold a FusedHFImageProcessor
    (and FusedHFVideoProcessor) wherever those reproduce the processor they hold."""
    switch = os.environ.get(PROCESSOR_SWITCH, "1")
    if switch != "1":
        if switch != "0":
            logger.warning(
                "fused_input_norm: %s must be 1 or 0, got %r: images stay with transformers", PROCESSOR_SWITCH, switch
            )
        else:
            logger.info("fused_input_norm: images stay with transformers' processor (%s=0)", PROCESSOR_SWITCH)
        return
    try:
        context = importlib.import_module(CONTEXT_MODULE)
        original = context.cached_processor_from_config
    except (ImportError, AttributeError) as e:
        logger.warning(
            "fused_input_norm: images stay with transformers' processor: this vLLM has no %s.cached_processor_from_config (%s)",
            CONTEXT_MODULE,
            e,
        )
        return
    if getattr(original, "fused_input_norm_wrapped", None) is not None:  # vLLM may load plugins more than once
        return
    _say_once(("internvl",), "fused_input_norm: %s", vllm_internvl.serve(logger))
    _say_once(("deepseek_ocr",), "fused_input_norm: %s", vllm_deepseek_ocr.serve(logger))
    _say_once(("deepseek_vl2",), "fused_input_norm: %s", vllm_deepseek_vl2.serve(logger))
    _say_once(("moondream3",), "fused_input_norm: %s", vllm_moondream3.serve(logger))
    _say_once(("step3",), "fused_input_norm: %s", vllm_step3.serve(logger))
    _say_once(("deepseek_v4",), "fused_input_norm: %s", vllm_deepseek_v4.serve(logger))
    _say_once(("mistral",), "fused_input_norm: %s", vllm_mistral.serve(logger))
    _say_once(("openvla",), "fused_input_norm: %s", vllm_openvla.serve(logger))
    _say_once(("isaac",), "fused_input_norm: %s", vllm_isaac.serve(logger))

    @functools.wraps(original)
    def cached_processor_from_config(model_config, *args, **kwargs):
        processor = original(model_config, *args, **kwargs)
        serve_images(model_config, processor)
        return processor

    cached_processor_from_config.fused_input_norm_wrapped = original
    context.cached_processor_from_config = cached_processor_from_config
    register_video_processor()
    register_built_elsewhere()
    raise_pillow_block_size()
    keep_freed_pillow_blocks()


def register_video_processor() -> None:
    """Wraps vLLM's cached_video_processor_from_config (in its module, and in the model modules already holding
    it by name) so that a video processor FusedVideoProcessor reproduces comes back as a FusedHFVideoProcessor:
    InternVL-hf's and Intern-S1's processing info puts that function's processor in place of the one
    cached_processor_from_config's processor held."""
    import sys

    try:
        source = importlib.import_module(VIDEO_PROCESSOR_MODULE)
        original = source.cached_video_processor_from_config
    except (ImportError, AttributeError) as e:
        logger.info("fused_input_norm: vLLM's own video processors stay transformers' (%s)", e)
        return
    if getattr(original, "fused_input_norm_wrapped", None) is not None:
        return
    adapters: dict[int, tuple] = {}  # id(upstream) -> (upstream, its adapter): one adapter per processor

    @functools.wraps(original)
    def cached_video_processor_from_config(model_config, *args, **kwargs):
        upstream = original(model_config, *args, **kwargs)
        entry = adapters.get(id(upstream))
        if entry is not None and entry[0] is upstream:
            return entry[1]
        name = type(upstream).__name__
        reason = unsupported_video(upstream)
        if reason is None:
            try:
                entry = (upstream, FusedHFVideoProcessor(upstream, logger))
            except Exception as e:  # never an error in vLLM's path: transformers' keeps serving
                reason = str(e)
        if reason is not None:
            _say_once(("video", name), "fused_input_norm: transformers' %s serves videos: %s", name, reason)
            return upstream
        _say_once(
            ("video", name), "fused_input_norm: FusedVideoProcessor serves videos in place of transformers' %s", name
        )
        if len(adapters) >= 16:  # vLLM's cache of video processors is bounded; so is this
            adapters.pop(next(iter(adapters)))
        adapters[id(upstream)] = entry
        return entry[1]

    cached_video_processor_from_config.fused_input_norm_wrapped = original
    source.cached_video_processor_from_config = cached_video_processor_from_config
    for name in VIDEO_PROCESSOR_USERS:
        module = sys.modules.get(name)
        if getattr(module, "cached_video_processor_from_config", None) is original:
            module.cached_video_processor_from_config = cached_video_processor_from_config


def register_built_elsewhere() -> None:
    """Wraps get_hf_processor of the BUILT_ELSEWHERE models' processing info classes, in the modules vLLM has
    imported and, through its model registry's lazy loader, in those it imports later."""
    import sys

    for name in BUILT_ELSEWHERE:
        if name in sys.modules:
            serve_processing_info(sys.modules[name])
    serve_imported()
    try:
        lazy = importlib.import_module(REGISTRY_MODULE)._LazyRegisteredModel
        original = lazy.load_model_cls
    except (ImportError, AttributeError) as e:
        logger.info(
            "fused_input_norm: the processors vLLM builds outside its processor cache stay transformers' (%s)", e
        )
        return
    if getattr(original, "fused_input_norm_wrapped", None) is not None:
        return

    @functools.wraps(original)
    def load_model_cls(self):
        model_cls = original(self)
        module = sys.modules.get(getattr(self, "module_name", None) or "")
        if module is not None and module.__name__ in BUILT_ELSEWHERE:
            serve_processing_info(module)
        serve_imported()
        return model_cls

    load_model_cls.fused_input_norm_wrapped = original
    lazy.load_model_cls = load_model_cls


def serve_imported() -> None:
    """The LAZILY_SERVED modules serve their vLLM module once vLLM has imported it (a model class's module
    imports it): importing it here would import numba (Kimi's) or register a video loader (Muse Spark's) in every
    vLLM process, whatever its model."""
    import sys

    for module, (key, serve) in LAZILY_SERVED.items():
        if module in sys.modules:
            _say_once((key,), "fused_input_norm: %s", serve(logger))


def serve_processing_info(module: object) -> None:
    """Makes `module`'s processing info class (BUILT_ELSEWHERE) put the adapters in the processor its
    get_hf_processor builds, as serve_images does for cached_processor_from_config's; one adapter per upstream
    image processor where vLLM keeps that one (Bagel's, LLaVA-OneVision-2's), a new one where vLLM builds a new
    one per call (OpenCUA's)."""
    info = getattr(module, BUILT_ELSEWHERE[module.__name__], None)
    original = getattr(info, "get_hf_processor", None)
    if original is None:
        _say_once(
            ("elsewhere", module.__name__),
            "fused_input_norm: %s has no %s: its processor stays transformers'",
            module.__name__,
            BUILT_ELSEWHERE[module.__name__],
        )
        return
    if getattr(original, "fused_input_norm_wrapped", None) is not None:
        return
    adapters: dict[int, tuple] = {}  # id(upstream) -> (upstream, its adapter)

    @functools.wraps(original)
    def get_hf_processor(self, **kwargs):
        processor = original(self, **kwargs)
        upstream = getattr(processor, "image_processor", None)
        entry = adapters.get(id(upstream))
        if entry is not None and entry[0] is upstream:
            processor.image_processor = entry[1]
            return processor
        serve_images(self.ctx.model_config, processor)
        served = getattr(processor, "image_processor", None)
        if isinstance(served, FusedHFImageProcessor) and served.upstream is upstream:
            if len(adapters) >= 16:  # bounded, as vLLM's own caches are
                adapters.pop(next(iter(adapters)))
            adapters[id(upstream)] = (upstream, served)
        return processor

    get_hf_processor.fused_input_norm_wrapped = original
    info.get_hf_processor = get_hf_processor


# Pillow keeps an image larger than its block size (16 MiB by default: a 4 MP photo, RGB being stored as 4
# bytes a pixel) in several blocks, which it cannot hand over in place: FusedImageProcessor then copies the
# pixels out (np.asarray, 50 ms of a 12 MP photo's request). With this size, the images vLLM decodes from
# then on are one block up to 64 MP and are read where they lie. Pillow's own PILLOW_BLOCK_SIZE wins.
PILLOW_BLOCK_SIZE = 256 << 20


def raise_pillow_block_size() -> None:
    if _raise_pillow_setting("block_size", "PILLOW_BLOCK_SIZE", PILLOW_BLOCK_SIZE):
        logger.info(
            "fused_input_norm: Pillow's block size raised to %d MiB: photos are read in place", PILLOW_BLOCK_SIZE >> 20
        )


def _raise_pillow_setting(setting: str, env: str, value: int) -> bool:
    """Raises Pillow's `setting` ("block_size", "blocks_max") to `value`, unless the user set it through `env`,
    this Pillow lacks it, or it is already that high; whether it was raised."""
    try:
        from PIL import Image
    except ImportError:
        return False
    setter = getattr(Image.core, f"set_{setting}", None)
    if env in os.environ or not callable(setter) or getattr(Image.core, f"get_{setting}")() >= value:
        return False
    setter(value)
    return True


# Pillow frees an image's blocks when the image dies; a block over glibc's mmap threshold (32 MiB at most:
# any photo over 8 MP at the block size above) goes back to the system, and the next decode faults its pages
# in anew, zeroed (~12,000 faults for a 12 MP photo). Pillow can keep freed blocks for the next images (0 by
# default; each kept block is at most its block size, resized to each new image's need). Two blocks: the
# previous request's image, alive while the next one decodes, and that one; at most 2 x 256 MiB = 512 MiB,
# under the 683 MiB one vLLM request may decode anyway (VLLM_MAX_MEDIA_REQUEST_DECODE_BYTES), 2 x 48 MB for
# 12 MP photos. Pillow's own PILLOW_BLOCKS_MAX wins.
PILLOW_BLOCKS_MAX = 2


def keep_freed_pillow_blocks() -> None:
    if _raise_pillow_setting("blocks_max", "PILLOW_BLOCKS_MAX", PILLOW_BLOCKS_MAX):
        from PIL import Image

        core = Image.core
        logger.info(
            "fused_input_norm: Pillow keeps up to %d freed image blocks for the next decodes (at most %d x %d MiB "
            "= %d MiB held): decoded photos land on pages already touched",
            PILLOW_BLOCKS_MAX,
            PILLOW_BLOCKS_MAX,
            core.get_block_size() >> 20,
            PILLOW_BLOCKS_MAX * core.get_block_size() >> 20,
        )


_said: set[tuple] = set()


def _say_once(key: tuple, message: str, *args: object) -> None:
    if key not in _said:
        _said.add(key)
        logger.info(message, *args)


def serve_images(model_config: object, processor: object) -> None:
    """Puts a FusedHFImageProcessor in `processor` (a transformers processor vLLM loaded for the model, whatever
    its architecture) where it holds an image processor that FusedImageProcessor reproduces, and a
    FusedHFVideoProcessor where it holds such a video processor; logs once per model which processors serve
    its images and videos, and why where it is transformers'."""
    images = getattr(processor, "image_processor", None)
    videos = getattr(processor, "video_processor", None)
    if images is None and videos is None:
        return
    if isinstance(images, FusedHFImageProcessor | FusedHFGenericImageProcessor) or isinstance(
        videos, FusedHFVideoProcessor | FusedHFGenericVideoProcessor
    ):
        return  # served when vLLM first built this processor
    architectures = list(getattr(model_config, "architectures", None) or [])
    said = [
        stand_in(
            processor, "image_processor", f"images for {architectures}", FusedHFImageProcessor, unsupported, logger
        ),
        stand_in(processor, "video_processor", "videos", FusedHFVideoProcessor, unsupported_video, logger),
    ]
    key = (getattr(model_config, "model", None), type(images).__name__, type(videos).__name__)
    _say_once(key, "fused_input_norm: %s", "; ".join(s for s in said if s))


def register_input_norm() -> None:
    """Registers the FusedMMInputNorm replacement."""
    try:
        from vllm.model_executor.custom_op import CustomOp, op_registry_oot
    except ImportError as e:
        logger.warning("fused_input_norm: not registering: vLLM's CustomOp registry cannot be imported (%s)", e)
        return
    try:
        upstream = getattr(importlib.import_module(UPSTREAM_MODULE), UPSTREAM_CLASS)
    except (ImportError, AttributeError) as e:
        logger.warning(
            "fused_input_norm: not registering: this vLLM has no %s.%s to replace (%s)",
            UPSTREAM_MODULE,
            UPSTREAM_CLASS,
            e,
        )
        return
    registered = op_registry_oot.get(UPSTREAM_CLASS)
    if registered is not None:  # vLLM may load plugins more than once in a process
        if getattr(registered, "__module__", None) != __name__:
            logger.warning(
                "fused_input_norm: not registering: %s is already replaced by %s", UPSTREAM_CLASS, registered
            )
        return
    try:
        CustomOp.register_oot(replacement_for(upstream), name=UPSTREAM_CLASS)
    except Exception:
        logger.exception("fused_input_norm: registering the %s replacement failed; vLLM keeps its own", UPSTREAM_CLASS)
        return
    logger.info("fused_input_norm: %s now runs torch.ops.fused_input_norm", UPSTREAM_CLASS)


def replacement_for(upstream: type) -> type:
    """The subclass of vLLM's FusedMMInputNorm class `upstream` that CustomOp instantiates in its place."""
    backends = {"cuda" if name == "hip" else name for name in build_info()["backends"]}  # ROCm devices are "cuda"

    def fused_or(upstream_forward):
        def forward(self, pixel_values: torch.Tensor, visual_dtype: torch.dtype) -> torch.Tensor:
            if (
                pixel_values.device.type not in backends
                or pixel_values.dtype not in ops.INPUT_DTYPES
                or visual_dtype not in ops.OUTPUT_DTYPES
            ):
                return upstream_forward(self, pixel_values, visual_dtype)
            x, dim = channel_view(pixel_values, self.channel, self.layout)
            weight, bias = self.weight, self.bias
            if weight.dtype != torch.float32:  # a model-wide cast (.to(bf16)): upstream's kernels widen them too
                weight, bias = weight.float(), bias.float()
            return ops.affine(x, weight, bias, dim, visual_dtype).view(pixel_values.shape)

        forward.__name__ = forward.__qualname__ = upstream_forward.__name__
        forward.__doc__ = f"torch.ops.fused_input_norm.affine, or upstream's {upstream_forward.__name__} for inputs it has no kernel for."
        return forward

    class FusedMMInputNorm(upstream):
        __doc__ = f"vLLM's {UPSTREAM_CLASS} (constructor, buffers, input_dtype), normalizing through torch.ops.fused_input_norm."
        forward_cuda = fused_or(upstream.forward_cuda)
        forward_hip = fused_or(upstream.forward_hip)
        forward_native = fused_or(upstream.forward_native)
        forward_oot = fused_or(upstream.forward_oot)

    FusedMMInputNorm.__qualname__ = UPSTREAM_CLASS
    return FusedMMInputNorm
