"""vLLM's own MiMo-V2-Omni image preprocessing served by the fused resize op.

MiMo-V2-Omni (MiMoV2OmniForCausalLM) is preprocessed by vllm/transformers_utils/processors/mimo_v2_omni.py: for
each image, MiMoVLProcessor.process_image calls _transform_single, which converts the PIL image to RGB and to a
float32 [3, H, W] tensor (channels-last strides), sizes it with _smart_resize (multiples of patch * merge within
the pixel budget), resizes it with torch's F.interpolate(mode="bilinear", antialias=False) and standardizes it
(_standardize: - mean, / std, on the 0-255 values); _flatten_visual then cuts the patch rows.

`serve` replaces _transform_single: the engine's float32 bilinear (the filter torch_float_bilinear names for the
call: torch picks its kernel by thread count and output size) reads the image's bytes directly, with no float32
copy of the input, and vLLM's own _smart_resize still runs. _standardize's subtraction is the resize's own affine
(x * 1 - mean: one rounding, as x - mean), and its division one in-place pass: vLLM's values bit for bit, without
its two new tensors (allocating them was most of its time). Videos: vLLM's model file converts the frames to
float32 (THWC bytes permuted to TCHW: channels-last strides), and _transform_batch resizes them all in one
F.interpolate call and standardizes them. `serve` replaces it too: the same filter reads the float32 frames
themselves, of any values, in either layout.
It also wraps MiMoVLProcessor._flatten_visual: the patchify op writes Qwen-VL's patch rows (the image repeated
temporal_patch_size times, or a video's frames) in one pass, where vLLM repeats the image and copies it twice.
torch's float kernels compute so only on x86 at CPU capability AVX2 and above (resize.torch_float_fma_kernel):
elsewhere every call is handed back.

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
    "_transform_batch": "ef524a58735b403c8b8001aac10cb78e5c5fbebebb1854fba8098deb7baac5ef",
    "_standardize": "11ea6013b4ed02bc939d58d6010ce8b1ea6330553def601e980bf98b2b3fc04b",
    "MiMoVLProcessor._flatten_visual": "63028b26e970d0fd700ea65d998df2e54f45bd330bfd5716402a841f2d430743",
}
# How scripts/vllm_reach.py names MiMo's image and video preprocessing (module functions, called by this class).
IMAGE_CLASSES = ("MiMoVLProcessor",)
VIDEO_CLASSES = IMAGE_CLASSES
_PLANS = resize.PlanCache()
_COPY = FusedInputNorm.identity(3)  # patchify with weight 1, bias 0: the values themselves, laid out


def serve(log: logging.Logger) -> str:
    """Makes the fused resize op serve MiMo-V2-Omni's image resize; returns the sentence to log."""
    served = (
        "the fused resize op (torch's float32 bilinear) serves vLLM's MiMo-V2-Omni preprocessing (images and videos) "
        "in place of its torch interpolate (for images, its float32 conversion too) and patch flattening"
    )
    calls = {"_transform_single": _image, "_transform_batch": _frames}
    said = replace_functions(MODULE, calls, REPRODUCED, served, "MiMo-V2-Omni preprocessing", log)
    if said == served:
        wrap_bound(sys.modules[MODULE].MiMoVLProcessor, "_flatten_visual", _flattened, log)
    return said


def _unserved(device) -> str | None:
    """Why no call of this module is served here and now, or None."""
    if not resize.torch_float_fma_kernel():
        return "torch's float32 bilinear here is not the one the engine reproduces (x86 at AVX2 and above)"
    if device is not None and torch.device(device).type != "cpu":
        return f"device {device}"
    return None


def _standardized(pixels: torch.Tensor, size: tuple[int, int], channels_last: bool) -> torch.Tensor | str:
    """_standardize(F.interpolate(pixels.float(), size, mode="bilinear", align_corners=False)) of uint8 or float32
    [N, 3, H, W] `pixels`, by the filter torch runs for that layout now, or why it is vLLM's to compute."""
    module = sys.modules[MODULE]
    if "cpu" not in module._mean_std_cache:  # as _standardize makes them (the process's default dtype), kept
        mean = torch.tensor(module._PIXEL_MEAN).view(1, -1, 1, 1)
        module._mean_std_cache["cpu"] = (mean, torch.tensor(module._PIXEL_STD).view(1, -1, 1, 1))
    mean, std = module._mean_std_cache["cpu"]
    if not all(t.dtype == torch.float32 and t.shape == (1, 3, 1, 1) for t in (mean, std)):
        return f"a mean and std of {mean.dtype} {tuple(mean.shape)} (served: float32, 3 channels)"
    out = torch.empty((pixels.shape[0], 3, *size), dtype=torch.float32)
    kernel = resize.torch_float_bilinear(3, size, channels_last=channels_last)
    subtract = (torch.ones(3), -mean.flatten())  # x * 1 + (-mean): x - mean, rounded once
    resize.resize_into(out, pixels, *subtract, size, (0, 0, *size), kernel, "pil", _PLANS)
    return out.div_(std)


def _image(img, factor: int, min_px: int, max_px: int, device=None) -> tuple | str:
    """What _transform_single returns ((standardized float32 [3, h, w], w, h)), or why this call goes to its code."""
    module = sys.modules[MODULE]  # vLLM's own _smart_resize
    unserved = _unserved(device)
    if unserved is not None:
        return unserved
    if isinstance(img, torch.Tensor) or not hasattr(img, "convert"):
        return f"a {type(img).__name__}, not a PIL image"
    img = img.convert("RGB")
    width, height = img.size
    h_bar, w_bar = module._smart_resize(height, width, factor, min_px, max_px)
    pixels = pil_to_chw(img)  # uint8 [3, H, W], channels-last strides, as vLLM's float32 copy has them
    out = _standardized(pixels[None], (h_bar, w_bar), channels_last=True)
    return out if isinstance(out, str) else (out.squeeze(0), w_bar, h_bar)


def _frames(frames, factor: int, min_px: int, max_px: int, device=None) -> tuple | str:
    """What _transform_batch returns ((standardized float32 [T, 3, h, w], w, h)), or why this call goes to its
    code."""
    module = sys.modules[MODULE]
    unserved = _unserved(device)
    if unserved is not None:
        return unserved
    if not isinstance(frames, torch.Tensor) or frames.dtype not in (torch.float32, torch.uint8):
        return f"frames that are not a float32 or uint8 tensor ({getattr(frames, 'dtype', type(frames).__name__)})"
    if frames.dim() != 4 or frames.shape[1] != 3 or 0 in frames.shape or frames.device.type != "cpu":
        return f"frames of shape {tuple(frames.shape)} on {frames.device} (served: [T, 3, H, W] on the CPU)"
    channels_last = frames.is_contiguous(memory_format=torch.channels_last)
    if not (frames.is_contiguous() or channels_last) or (frames.is_contiguous() and channels_last):
        # neither layout, or both (H = W = 1): which kernel torch takes then is not what was tested
        return f"frames of shape {tuple(frames.shape)} and strides {frames.stride()}"
    h_bar, w_bar = module._smart_resize(*frames.shape[2:], factor, min_px, max_px)
    out = _standardized(frames, (h_bar, w_bar), channels_last)
    return out if isinstance(out, str) else (out, w_bar, h_bar)


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
