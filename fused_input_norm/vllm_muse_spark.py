"""vLLM's own Muse Spark preprocessing served by the fused resize op.

Muse Spark (MuseSparkForConditionalGeneration) is preprocessed by vllm/models/muse_spark/common/processor.py,
with no Hugging Face processor: preprocess_image composites each image on white (_to_rgb), finds the patch grid
(find_resize_target), resizes with Pillow's LANCZOS (_resize: a uint8 [C, H, W] view of the HWC array) and
normalizes; preprocess_video samples and aligns the frames, then resizes each with Pillow's LANCZOS
(_resize_frames: the frames' [T, C, H, W] stack) and normalizes them.

`serve` replaces the module's two resize functions, the only Pillow work: the engine's "lanczos" filter with
reference "pil" (the installed Pillow's, bit for bit) returns the same bytes in the same layout, a video's frames
in one call. vLLM's own code still does everything else (RGB, grids, sampling, normalization, the prompt).

The module is served only as this file knows it: the sources of the functions it replaces must be vllm 0.34.0's
(their SHA-256 below); where they moved, `serve` changes nothing and says why. A call it does not reproduce
(an image that is not RGB, frames that are not 3-channel uint8) runs vLLM's own function, and the first call of
each kind logs why. vllm's module is imported only by vLLM itself (it registers a video loader as it loads): the
plugin serves it once vLLM has (vllm_plugin.serve_imported).
"""

import logging

import torch

from . import resize
from .images import pil_to_chw
from .vllm_internvl import replace_functions

MODULE = "vllm.models.muse_spark.common.processor"
# What this replaces: these functions of MODULE, as vllm 0.34.0 writes them.
REPRODUCED = {
    "_resize": "c3eb5e14d39440b0e81f5bcf8943e484d93dced72745991cdf051a99574b9e7c",
    "_resize_frames": "8f062d44206dce75d0a526749b75f6040c073fa8c09369c24e35c24de5de8ccf",
}
# How scripts/vllm_reach.py names Muse Spark's image and video preprocessing (no classes: module functions).
IMAGE_CLASSES = ("MuseSparkProcessor",)
VIDEO_CLASSES = ("MuseSparkVideoProcessor",)
_PLANS = resize.PlanCache()


def serve(log: logging.Logger) -> str:
    """Makes the fused resize op serve Muse Spark's Pillow resizes; returns the sentence to log."""
    served = (
        "the fused resize op (reference 'pil') serves vLLM's Muse Spark preprocessing in place of its Pillow "
        "LANCZOS resizes (images and video frames)"
    )
    calls = {"_resize": _image, "_resize_frames": _frames}
    return replace_functions(MODULE, calls, REPRODUCED, served, "Muse Spark preprocessing", log)


def _resized(pixels: torch.Tensor, target_h: int, target_w: int) -> torch.Tensor:
    """uint8 [B, 3, target_h, target_w]: Pillow's LANCZOS of each [3, H, W] image of `pixels` (any strides)."""
    out = torch.empty((pixels.shape[0], 3, target_h, target_w), dtype=torch.uint8)
    weight, bias = resize.identity_affine()
    box = (0, 0, target_h, target_w)
    resize.resize_into(out, pixels, weight, bias, (target_h, target_w), box, "lanczos", "pil", _PLANS)
    return out


def _image(image, target_h, target_w) -> torch.Tensor | str:
    """What _resize returns (a [C, H, W] view of HWC bytes), or why this call goes to its code."""
    if getattr(image, "mode", None) != "RGB":  # preprocess_image hands it an RGB image
        return f"an image in mode {getattr(image, 'mode', type(image).__name__)!r}, not RGB"
    chw = _resized(pil_to_chw(image)[None], target_h, target_w)[0]
    return chw.permute(1, 2, 0).contiguous().permute(2, 0, 1)


def _frames(frames, target_h, target_w) -> torch.Tensor | str:
    """What _resize_frames returns (the resized frames' contiguous [T, C, H, W] stack), or why this call goes to
    its code."""
    if not isinstance(frames, torch.Tensor) or frames.dtype != torch.uint8 or frames.dim() != 4:
        return "frames that are not a uint8 [T, C, H, W] tensor"
    if frames.shape[1] != 3 or frames.shape[0] == 0:
        return f"{frames.shape[0]} frames of {frames.shape[1]} channels, not RGB"
    return _resized(frames, target_h, target_w)
