"""vLLM's own MiMo-V2-Omni image preprocessing served by the fused resize op.

MiMo-V2-Omni (MiMoV2OmniForCausalLM) is preprocessed by vllm/transformers_utils/processors/mimo_v2_omni.py: for
each image, MiMoVLProcessor.process_image calls _transform_single, which converts the PIL image to RGB and to a
float32 [3, H, W] tensor (channels-last strides), sizes it with _smart_resize (multiples of patch * merge within
the pixel budget), resizes it with torch's F.interpolate(mode="bilinear", antialias=False) and standardizes it
(_standardize: - mean, / std, on the 0-255 values); _flatten_visual then cuts the patch rows.

`serve` replaces _transform_single: the engine's float32 bilinear (the filter torch_float_bilinear names for the
call: torch picks its kernel by thread count and output size) reads the image's bytes directly, with no float32
copy of the input, and vLLM's own _smart_resize and _standardize still run, so the values are vLLM's bit for bit.
It also wraps MiMoVLProcessor._flatten_visual: the patchify op writes Qwen-VL's patch rows (the image repeated
temporal_patch_size times, or a video's frames) in one pass, where vLLM repeats the image and copies it twice.
torch's float kernels compute so only on x86 at CPU capability AVX2 and above (resize.torch_float_fma_kernel):
elsewhere every call is handed back. Videos (_transform_batch) stay vLLM's: vLLM converts their frames to float32
before this module sees them.

The module is served only as this file knows it: the source of the function it replaces must be vllm 0.34.0's
(its SHA-256 below); where it moved, `serve` changes nothing and says why. A call it does not reproduce (a tensor
rather than a PIL image, another device) runs vLLM's own function, and the first call of each kind logs why.
vllm's module is imported only by vLLM itself (as it loads the model class): the plugin serves it once vLLM has
(vllm_plugin.serve_imported).
"""

import logging
import sys

import torch

from . import resize
from .checks import is_int
from .images import pil_to_chw
from .module import FusedInputNorm
from .vllm_internvl import replace_functions, wrap_bound

MODULE = "vllm.transformers_utils.processors.mimo_v2_omni"
# What this replaces (and, for _flatten_visual, wraps): these functions of MODULE, as vllm 0.34.0 writes them.
REPRODUCED = {
    "_transform_single": "2f811c39177f2b523a5e900cac4439749ea2a91d02c6f78d32e5a5be2daa7576",
    "MiMoVLProcessor._flatten_visual": "63028b26e970d0fd700ea65d998df2e54f45bd330bfd5716402a841f2d430743",
}
# How scripts/vllm_reach.py names MiMo's image preprocessing (module functions, called by this class).
IMAGE_CLASSES = ("MiMoVLProcessor",)
# Why its videos stay vLLM's (scripts/vllm_reach.py's row says so).
VIDEOS_UNSERVED = (
    "vLLM converts the frames to float32 before _transform_batch sees them, and the engine resizes bytes (reading "
    "them back from float32 would be one more pass over every frame, with a check that they are bytes)"
)
_PLANS = resize.PlanCache()
_COPY = FusedInputNorm.identity(3)  # patchify with weight 1, bias 0: the values themselves, laid out


def serve(log: logging.Logger) -> str:
    """Makes the fused resize op serve MiMo-V2-Omni's image resize; returns the sentence to log."""
    served = (
        "the fused resize op (torch's float32 bilinear) serves vLLM's MiMo-V2-Omni image preprocessing in place of "
        "its float32 conversion, torch interpolate and patch flattening"
    )
    calls = {"_transform_single": _image}
    said = replace_functions(MODULE, calls, REPRODUCED, served, "MiMo-V2-Omni image preprocessing", log)
    if said == served:
        wrap_bound(sys.modules[MODULE].MiMoVLProcessor, "_flatten_visual", _flattened, log)
    return said


def _image(img, factor: int, min_px: int, max_px: int, device=None) -> tuple | str:
    """What _transform_single returns ((standardized float32 [3, h, w], w, h)), or why this call goes to its code."""
    module = sys.modules[MODULE]  # vLLM's own _smart_resize and _standardize
    if not resize.torch_float_fma_kernel():
        return "torch's float32 bilinear here is not the one the engine reproduces (x86 at AVX2 and above)"
    if device is not None and torch.device(device).type != "cpu":
        return f"device {device}"
    if isinstance(img, torch.Tensor) or not hasattr(img, "convert"):
        return f"a {type(img).__name__}, not a PIL image"
    img = img.convert("RGB")
    width, height = img.size
    h_bar, w_bar = module._smart_resize(height, width, factor, min_px, max_px)
    pixels = pil_to_chw(img)  # uint8 [3, H, W], channels-last strides, as vLLM's float32 copy has them
    size = (h_bar, w_bar)
    out = torch.empty((1, 3, h_bar, w_bar), dtype=torch.float32)
    weight, bias = resize.identity_affine()
    kernel = resize.torch_float_bilinear(3, size, channels_last=True)
    resize.resize_into(out, pixels[None], weight, bias, size, (0, 0, *size), kernel, "pil", _PLANS)
    return module._standardize(out).squeeze(0), w_bar, h_bar


def _flattened(processor, call: dict) -> tuple | str:
    """What _flatten_visual returns (Qwen-VL's patch rows of the image repeated temporal_patch_size times, or of the
    frames, and the int32 grid), written by the patchify op in one pass instead of vLLM's repeat and two copies, or
    why this call goes to its code."""
    visual, kind = call["visual"], call["kind"]  # bound by wrap_bound, which hands subclasses back
    patch, merge, temporal = processor.patch_size, processor.merge_size, processor.temporal_patch_size
    if not (isinstance(visual, torch.Tensor) and visual.dtype == torch.float32 and visual.device.type == "cpu"):
        return "a visual that is not a float32 CPU tensor"
    if not all(is_int(v) and v >= 1 for v in (patch, merge, temporal)) or processor.temporal_compression_ratio != 1:
        return "a patch geometry the patchify op does not take"
    if (kind, visual.dim()) not in (("image", 3), ("video", 4)) or visual.shape[-3] != 3:
        return f"a {kind} visual of shape {tuple(visual.shape)}"
    height, width = visual.shape[-2:]
    frames = visual.shape[0] if kind == "video" else temporal
    if frames < 1 or height % (patch * merge) or width % (patch * merge) or frames % temporal:
        return f"a {kind} of {frames} x {height} x {width}, not whole merged patches and temporal groups"
    rows, _ = _COPY.patchify(visual, torch.float32, patch_size=patch, temporal_patch_size=temporal, merge_size=merge)
    grid = torch.tensor([frames // temporal, height // patch, width // patch], dtype=torch.int32)
    return rows, grid
