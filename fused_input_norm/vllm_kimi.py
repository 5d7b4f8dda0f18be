"""vLLM's own Kimi image (and video-chunk) preprocessing served in its class.

Kimi-K2.5 (`KimiK25ForConditionalGeneration`: images and video chunks, both as vLLM's "vision_chunk"
modality), Kimi-K3 and Kimi-K3.1 (`KimiK3ForConditionalGeneration`, `KimiK31ForConditionalGeneration`: images)
are preprocessed by vllm/transformers_utils/processors/kimi_k25_vision_fused.py, whatever their checkpoint ships:
KimiK25Processor and KimiK3Processor both call KimiK25FusedVisionProcessor.preprocess (K2.5 only where numba is
installed; without it vLLM runs the checkpoint's remote code, which this leaves alone). That preprocess resizes
each image (each frame of a chunk) with Pillow's bicubic to the NaViT size, then one numba kernel zero-pads it to
the merge grid (the pad put through the same table), normalizes through a float32 lookup table (the identity
table, uint8, on vLLM's mm_device_do_normalize path) and writes patches [N, 3, P, P].

`serve` replaces preprocess with one that runs the resize, pad, normalize and patch layout of each image (each
frame) as one call of the package's fused resize op, reference "pil" (the installed Pillow's bicubic): the same
pixel_values (uint8 bytes equal; float32 within 1.2e-7: the op's folded affine against vLLM's table) and
grid_thws. Sizes and token counts stay vLLM's own (its get_resize_config and media_tokens_calculator run
unchanged), as does turning each media into an RGB PIL image (its _ensure_media_type).

vLLM's code is only served as this module knows it: the sources of the functions it reproduces must be those
of vllm 0.34.0 (their SHA-256 below); where they moved, `serve` changes nothing and says why. A call it does not
reproduce (a media that is not an image or video-chunk dict, return_tensors other than None or "pt", do_rescale
unlike do_normalize, mean or std it cannot fold, a subclass) runs vLLM's own code, and the first call of each
kind logs why.

Importing MODULE imports numba (seconds): the plugin calls `serve` only once vLLM has imported MODULE itself
(loading a Kimi model class does), never to import it.
"""

import functools
import logging
import math

import torch

from . import resize
from .images import pil_to_chw
from .vllm_internvl import unwrapped_class, wrap_bound

MODULE = "vllm.transformers_utils.processors.kimi_k25_vision_fused"
CLASS = "KimiK25FusedVisionProcessor"
# The processors vLLM builds around CLASS (what vllm_reach reads): K2.5's images and video chunks, K3's images.
IMAGE_CLASSES = ("KimiK25Processor", "KimiK3Processor")
VIDEO_CLASS = "KimiK25Processor"
# What this reproduces: these functions of MODULE, as vllm 0.34.0 writes them.
REPRODUCED = {
    "_write_fused_patches": "3f74ef020109dafa59b9cbafbf2d9f3ac565a4a84a27070d31fb4125aeead02b",
    f"{CLASS}.__init__": "fcf52a0af45756f8fd85db8fae58262d5535d1e7a42069b2031fc63b09675deb",
    f"{CLASS}.resize_image": "605bb7062773fb35600163ab02be272ae6ab41c2f35b7e8b67a01f7e9d9c6c6b",
    f"{CLASS}.preprocess": "9ce0ecf0f066c43dadc4a99623e2c5f6d836199ffdd0418baf34db8813fb63a7",
}
_PLANS = resize.PlanCache()


def serve(log: logging.Logger) -> str:
    """Makes the fused resize op serve vLLM's KimiK25FusedVisionProcessor.preprocess; returns the sentence to
    log."""
    served = (
        f"the fused resize op (reference 'pil') serves vLLM's {CLASS} (Kimi-K2.5, K3, K3.1) in place of its "
        "Pillow bicubic resize and numba pad, normalize and patchify"
    )
    module, cls, stop = unwrapped_class(MODULE, CLASS, "preprocess", REPRODUCED, served)
    if stop is not None:
        return stop
    wrap_bound(cls, "preprocess", lambda upstream, call: _served(module, upstream, call), log)
    return served


def _served(module, upstream, call: dict) -> object:
    """The BatchFeature vLLM's preprocess returns for this call, or why it goes to vLLM's code."""
    normalize, rescale, return_tensors = call["do_normalize"], call["do_rescale"], call["return_tensors"]
    if not isinstance(normalize, bool) or rescale is not normalize:
        return f"do_rescale={rescale!r}, do_normalize={normalize!r} (vLLM asserts they are equal)"
    if return_tensors not in (None, "pt"):
        return f"return_tensors={return_tensors!r} (only 'pt' is served)"
    medias = call["medias"] if isinstance(call["medias"], list) else [call["medias"]]
    if not medias:
        return "no medias"
    for media in medias:
        if not isinstance(media, dict) or media.get("type") not in ("image", "video_chunk"):
            return "a media that is not an image or video_chunk dict"
        if media["type"] == "video_chunk" and not (isinstance(media.get("video_chunk"), list) and media["video_chunk"]):
            return "a video chunk that is not a non-empty list of frames"
    affine = _affine(upstream.media_proc_cfg) if normalize else _identity()
    if isinstance(affine, str):
        return affine
    patch = upstream.media_proc_cfg.get("patch_size")
    if type(patch) is not int or patch < 1:
        return f"patch_size={patch!r} (not a positive int)"
    jobs, grids = [], []
    for media in medias:
        media = module._ensure_media_type(media)  # vLLM's own: RGB PIL images, as its preprocess makes them
        frames = [media["image"]] if media["type"] == "image" else media["video_chunk"]
        size = upstream.get_resize_config(media)
        height, width = size["new_height"], size["new_width"]
        padded = (height + size["pad_height"], width + size["pad_width"])
        if padded[0] % patch or padded[1] % patch:
            return f"a padded size {padded} that is not a multiple of patch_size {patch}"
        jobs.append((frames, (height, width), padded))
        grids.append((len(frames), padded[0] // patch, padded[1] // patch))
    rows = sum(t * h * w for t, h, w in grids)
    out = torch.empty((rows, 3 * patch * patch), dtype=torch.float32 if normalize else torch.uint8)
    weight, bias = affine
    offset = 0
    for frames, size, padded in jobs:
        count = padded[0] // patch * (padded[1] // patch)
        for frame in frames:
            # The frame at the canvas's top left, the rest byte 0 (vLLM's kernel writes its table's row 0 there).
            pixels = pil_to_chw(frame, convert_rgb=False)[None]
            canvas = out[offset : offset + count]
            crop = (0, 0, *size)
            pad = (*padded, 0, 0, 0)
            resize.resize_into(
                canvas, pixels, weight, bias, size, crop, "bicubic", "pil", _PLANS, (1, patch, 1), pad=pad
            )
            offset += count
    from transformers import BatchFeature

    data = {
        "pixel_values": out.view(rows, 3, patch, patch),
        "grid_thws": torch.tensor(grids, dtype=torch.int64).view(len(grids), 3),
    }
    return BatchFeature(data=data, tensor_type=return_tensors)


def _affine(config: dict) -> tuple[torch.Tensor, torch.Tensor] | str:
    """vLLM's table (v / 255 - mean) / std as weight and bias, or why not."""
    try:
        mean, std = (tuple(float(v) for v in config[key]) for key in ("image_mean", "image_std"))
    except (KeyError, TypeError, ValueError) as e:
        return f"image_mean / image_std that are not lists of numbers ({e!r})"
    return _folded(mean, std)


@functools.lru_cache(maxsize=8)
def _folded(mean: tuple, std: tuple) -> tuple[torch.Tensor, torch.Tensor] | str:
    if len(mean) != 3 or len(std) != 3:
        return "image_mean / image_std not of 3 channels"
    if not all(math.isfinite(m) for m in mean) or not all(math.isfinite(s) and s != 0 for s in std):
        return "image_mean / image_std not finite, or a std of 0"
    weight = torch.tensor([1 / (255 * s) for s in std], dtype=torch.float64).float()
    bias = torch.tensor([-m / s for m, s in zip(mean, std, strict=True)], dtype=torch.float64).float()
    return weight, bias


@functools.cache
def _identity() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.ones(3), torch.zeros(3)
