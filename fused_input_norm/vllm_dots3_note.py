"""vLLM's own dots3.note image preprocessing served in its class.

Dots3NoteForCausalLM is preprocessed by vllm/models/dots3_note/common/processor.py: Dots3NoteImageProcessor.preprocess
takes one PIL image (each image of a prompt, and each sampled frame of a video, JPEG-roundtripped by vLLM's video
code), composites RGBA on white (other modes converted to RGB), sizes it with resized_size (multiples of
patch_size * merge_size within the pixel budget of the call's detail), resizes it with Pillow's BICUBIC, then in
NumPy float32: / 255, - mean, / std; the image is repeated temporal_patch_size times and cut into Qwen-VL's patch
rows [C, T, P, P] (in merge blocks with pre_pixel_shuffle, raster order without).

`serve` replaces that method: vLLM's own mode conversion and resized_size still run (Pillow's and vLLM's code), the
fused resize op (reference "pil", the installed Pillow's bicubic bit for bit) writes the resized bytes as patch
rows, and the three float32 steps run after it in vLLM's order, each rounded as NumPy rounds it (x / 255 is not
x * (1 / 255) rounded once, so no single affine gives vLLM's values), a band of rows at a time while it is in
cache, the last step writing the temporal_patch_size copies. vLLM's values bit for bit, without its Pillow image,
its float32 copies, tile and transposes; the rows are the package's pooled output memory (output_pool).

vLLM's code is only served as this module knows it: the sources of the functions it reproduces must be those
of vllm 0.34.0 (their SHA-256 below); where they moved, `serve` changes nothing and says why. A call it does not
reproduce (not a PIL image, a mean or std that is not 3 float32 values, a patch geometry whose sizes are not whole
merged patches) runs vLLM's own code, and the first call of each kind logs why. vllm's module is imported only by
vLLM itself (as it loads the model class): the plugin serves it once vLLM has (vllm_plugin.serve_imported).
"""

import logging

import numpy as np
import torch

from . import output_pool, resize
from .checks import is_int
from .images import pil_to_chw
from .vllm_internvl import unwrapped_class, wrap_bound

MODULE = "vllm.models.dots3_note.common.processor"
CLASS = "Dots3NoteImageProcessor"
# What this reproduces: these functions of MODULE, as vllm 0.34.0 writes them (resized_size is called, not
# reproduced: vLLM's own sizes).
REPRODUCED = {
    f"{CLASS}.__init__": "28f0c9f8f1aeb12d269139545dd616e09c00714bf9d9800e08e95a5a2bf60333",
    f"{CLASS}.preprocess": "fb6a8ecf610bf74cd8940428f2226b139044771a2959e6fc44c447ec86b633a5",
}
# How scripts/vllm_reach.py names dots3.note's image and video preprocessing (a video's frames go through the
# same method, one by one).
IMAGE_CLASSES = (CLASS,)
VIDEO_CLASSES = IMAGE_CLASSES
SIZES = ("min_pixels", "max_pixels", "target_height", "target_width")
# The values normalized at a time (256 KiB of float32): the three steps each read them from cache, not memory
# (12 MP, loaded machine: 231 -> 182 ms against a float32 resize and three passes over all of it).
BAND_VALUES = 1 << 16
_PLANS = resize.PlanCache()


def serve(log: logging.Logger) -> str:
    """Makes the fused resize op serve vLLM's Dots3NoteImageProcessor; returns the sentence to log."""
    served = (
        f"the fused resize op (reference 'pil') serves vLLM's {CLASS} in place of its Pillow bicubic resize, NumPy "
        "normalization and patch rows"
    )
    _, cls, stop = unwrapped_class(MODULE, CLASS, "preprocess", REPRODUCED, served)
    if stop is not None:
        return stop
    wrap_bound(cls, "preprocess", _served, log)
    return served


def _served(upstream, call: dict) -> tuple | str:
    """What preprocess returns (float32 patch rows, the int64 grid), or why this call goes to vLLM's code."""
    from PIL import Image

    image = call["image"]
    if not isinstance(image, Image.Image):  # vLLM raises its TypeError
        return f"a {type(image).__name__}, not a PIL image"
    patch, merge, temporal = upstream.patch_size, upstream.merge_size, upstream.temporal_patch_size
    if not all(is_int(v) and v >= 1 for v in (patch, merge, temporal)):
        return f"patch_size {patch!r}, merge_size {merge!r}, temporal_patch_size {temporal!r}"
    mean_std = [getattr(upstream, name) for name in ("image_mean", "image_std")]
    if not all(isinstance(v, np.ndarray) and v.dtype == np.float32 and v.shape == (3,) for v in mean_std):
        return "an image_mean or image_std that is not 3 float32 values"
    # vLLM's own steps before its resize, as preprocess takes them (Pillow's composite and conversion).
    if image.mode == "RGBA":
        background = Image.new("RGB", image.size, (255, 255, 255))
        background.paste(image, mask=image.getchannel("A"))
        image = background
    elif image.mode != "RGB":
        image = image.convert("RGB")
    sizes = {key: call[key] for key in SIZES}
    height, width = upstream.resized_size(*image.size, detail=call["detail"], **sizes)
    merged = merge if upstream.pre_pixel_shuffle else 1  # raster order without the pixel shuffle
    if height % (patch * merged) or width % (patch * merged) or min(height, width) < 1:
        return f"a {height}x{width} resize, not whole {patch * merged}-pixel blocks"
    rows, area = (height // patch) * (width // patch), patch * patch
    # The resized bytes as patch rows of one temporal copy; then vLLM's float32 steps in its order (/ 255, - mean,
    # / std, the last writing the temporal copies), a band of rows at a time, in cache.
    resized = output_pool.empty((rows, 3 * area), torch.uint8)
    weight, bias = resize.identity_affine()
    pixels, box = pil_to_chw(image)[None], (0, 0, height, width)
    resize.resize_into(resized, pixels, weight, bias, box[2:], box, "bicubic", "pil", _PLANS, (1, patch, merged))
    mean, std = (torch.from_numpy(v).view(1, 3, 1, 1) for v in mean_std)
    out = output_pool.empty((rows, 3 * temporal * area), torch.float32)
    band = max(1, BAND_VALUES // (3 * area))
    scaled = torch.empty((band, 3, 1, area), dtype=torch.float32)
    for start in range(0, rows, band):
        values = resized[start : start + band].view(-1, 3, 1, area)
        centered = torch.div(values, 255, out=scaled[: len(values)]).sub_(mean)  # uint8 / 255: a float32 division
        copies = out[start : start + band].view(-1, 3, temporal, area)
        torch.div(centered.expand(copies.shape), std, out=copies)
    return out, torch.tensor([1, height // patch, width // patch], dtype=torch.long)
