"""Mistral's image encoder, as vLLM runs Mistral-format checkpoints, served in vLLM's class.

vLLM loads a repository in the Mistral format (params.json and consolidated*.safetensors: Pixtral, Mistral
Small 3.1 / 3.2, Magistral, Devstral, Ministral 3, Mistral Large 3) as PixtralForConditionalGeneration with
`tokenizer_mode=mistral`. Its images then go through vllm/transformers_utils/processors/pixtral.py's
MistralCommonImageProcessor, which hands each one to mistral_common's ImageEncoder: the image converted to RGB
(RGBA composited on white), resized to the patch grid (`_image_to_num_tokens`, which rounds where transformers'
Pixtral floors) with cv2.resize(float32 image, INTER_CUBIC), divided by 255, minus the CLIP mean, over the CLIP
std, in float32, channels first.

`serve` replaces MistralCommonImageProcessor.__call__ with one that runs the resize as the engine's
"cv2_cubic_f32" filter (OpenCV's own INTER_CUBIC of the image as float32, bit for bit: tests/test_resize_cv2.py)
straight from the uint8 pixels, then the three float32 steps in NumPy's order (each correctly rounded, as
NumPy's): the same tensors, bit for bit. Under Intel IPP the resize is cv2.resize itself (below). The RGB
conversion, the token grid and the chunk handling stay mistral_common's own (its _convert_to_rgb,
_image_to_num_tokens and image_from_chunk run unchanged).

OpenCV itself decides which INTER_CUBIC runs: x86 wheels of opencv-python run it through Intel IPP
(`cv2.ipp.useIPP()` True by default there), whose float32 coefficients and sums are not OpenCV's own code's: 1.4e-6
apart after normalization for a 12 MP photo, 6e-5 for 300x700 upscaled to 304x704 (scripts/bench_cv2_cubic.py),
2.7e-4 for a 1080p photo at Mistral Small 3.1's 1540 cap (tests/test_vllm_mistral.py). IPP is closed code: its
weights, read back from impulse images, are within ~1e-7 of the a = -0.75 kernel's but equal to no float
evaluation of it tried, so the engine does not reproduce it. Under IPP the resize is therefore OpenCV's own call,
cv2.resize of the same float32 image (the same function on the same bytes: the same values), and the rest is
this module's: the uint8 pixels read once into pooled float32 memory (NumPy's np.array(image, float32) goes
through Pillow's encoder and fresh pages), and the three float32 steps writing the channels-first output
directly (mistral_common's three passes, then vLLM's torch.tensor copy of the transposed array). Where
OpenCV runs its own code (aarch64 wheels, builds without IPP, or cv2.ipp.setUseIPP(False)), the engine's
"cv2_cubic_f32" filter resizes straight from the uint8 pixels. The check is per call.

The code is only served as this module knows it: the sources of the functions it reproduces must be vllm
0.34.0's and mistral_common 1.13's (their SHA-256 below); where they moved, `serve` changes nothing and says
why. A call it does not reproduce (an image that is not a PIL image, an encoder that is not mistral_common's
ImageEncoder itself, return_tensors other than None or "pt", a subclass) runs the original code, and the
first call of each kind logs why.

vllm and mistral_common are imported only inside `serve`.
"""

import importlib
import logging

import numpy as np
import torch

from . import output_pool, resize
from .images import pil_to_chw
from .vllm_internvl import moved, unwrapped_class, wrap_bound

MODULE = "vllm.transformers_utils.processors.pixtral"
CLASS = "MistralCommonImageProcessor"
ENCODER_MODULE = "mistral_common.tokens.tokenizers.image"
# What this reproduces: vLLM's __call__ (vllm 0.34.0) and mistral_common's encoding (1.13).
REPRODUCED = {f"{CLASS}.__call__": "f76b6c30fef2cecd6977e25d2af73fc1be47ccaada47803c870206f654f7367c"}
ENCODER_REPRODUCED = {
    "ImageEncoder.__call__": "dfe8cca6bce2f0d86d9ebfa6015fcf10c25eec4c6378f4bedc425e9d60c4e0f0",
    "transform_image": "55ae425490b7f9ae0f93ddcaef381bf67ace9b90ccf3915519aa1ffb2339b24d",
    "normalize": "2a819d4182192c11b29d58db3e8f91ed0fbc43c4946b80b34ed36c086d2acf34",
}
# The bytes packed to RGB at a time before torch widens them to float32 (1 MiB: in cache, and few enough calls).
BAND_BYTES = 1 << 20
_PLANS = resize.PlanCache()


def serve(log: logging.Logger) -> str:
    """Makes the fused resize op serve vLLM's MistralCommonImageProcessor; returns the sentence to log."""
    served = (
        f"the fused resize op (filter 'cv2_cubic_f32') serves vLLM's {CLASS} (Mistral-format checkpoints) in "
        "place of mistral_common's cv2.resize and normalize (under Intel IPP: cv2.resize itself, then the fused "
        "normalize)"
    )
    label = "Mistral's image encoder (the Mistral-format path)"
    _, cls, stop = unwrapped_class(MODULE, CLASS, "__call__", REPRODUCED, served, label)
    if stop is not None:
        return stop
    try:
        encoder_module = importlib.import_module(ENCODER_MODULE)
    except ImportError as e:
        return f"{label} stays mistral_common's: {ENCODER_MODULE} cannot be imported ({e})"
    reason = moved(encoder_module, ENCODER_REPRODUCED, "mistral_common 1.13")
    if reason is not None:
        return f"{label} stays mistral_common's: {reason}"
    wrap_bound(cls, "__call__", lambda upstream, call: _served(encoder_module, upstream, call), log)
    return served


def _served(encoder_module, upstream, call: dict) -> object:
    """The BatchFeature vLLM's MistralCommonImageProcessor returns for these arguments, or why this call goes to
    its code."""
    images, return_tensors = call["images"], call["return_tensors"]
    if return_tensors not in (None, "pt"):
        return f"return_tensors={return_tensors!r} (only None and 'pt' are served)"
    encoder = upstream.mm_encoder
    if type(encoder) is not encoder_module.ImageEncoder:
        return f"an encoder that is not mistral_common's ImageEncoder ({type(encoder).__name__})"
    cv2 = getattr(encoder_module, "cv2", None)
    if cv2 is None:
        return "mistral_common finds no OpenCV (its own code says so)"
    from mistral_common.protocol.instruct.chunk import ImageChunk
    from PIL import Image
    from transformers import BatchFeature

    images = [images] if not isinstance(images, list) else images
    for image in images:
        if not isinstance(image, Image.Image):
            return f"an image that is not a PIL image ({type(image).__name__})"
    mean = np.asarray(encoder_module.DATASET_MEAN, dtype=np.float32)
    std = np.asarray(encoder_module.DATASET_STD, dtype=np.float32)
    if mean.shape != (3,) or std.shape != (3,):
        return "a DATASET_MEAN or DATASET_STD that is not 3 values"
    processed = []
    for image in images:
        # As ImageEncoder.__call__: the chunk's image, its token grid, the grid's size in pixels.
        image = encoder_module.image_from_chunk(ImageChunk(image=image))
        width_tokens, height_tokens = encoder._image_to_num_tokens(image)
        side = encoder.image_config.image_patch_size * encoder.image_config.spatial_merge_size
        rgb = encoder_module._convert_to_rgb(image)
        size = (height_tokens * side, width_tokens * side)
        processed.append(_transformed(pil_to_chw(rgb), size, mean, std, cv2))
    return BatchFeature({"images": processed}, tensor_type=return_tensors)


def _transformed(pixels: torch.Tensor, size: tuple[int, int], mean: np.ndarray, std: np.ndarray, cv2) -> torch.Tensor:
    """mistral_common's transform_image of a [3, H, W] uint8 image to `size` (h, w): cv2.resize of it as
    float32 (INTER_CUBIC), then / 255, - mean, / std, each rounded to float32 as NumPy rounds it."""
    out = output_pool.empty((3, *size), torch.float32)
    if cv2.ipp.useIPP():  # IPP's own resize, of the float32 image NumPy would make: the same bytes in, the same out
        source = _float32_pixels(pixels, cv2)
        resized = output_pool.empty((*size, 3), torch.float32)  # pooled too: fresh pages fault on first touch
        target = resized.numpy()
        result = cv2.resize(source.numpy(), size[::-1], dst=target, interpolation=cv2.INTER_CUBIC)
        if result.ctypes.data != target.ctypes.data:  # OpenCV silently makes its own array for a dst it cannot use
            target[...] = result
        del source  # back to the pool
        values = resized.permute(2, 0, 1)
    else:
        weight, bias = resize.identity_affine()  # x * 1 + 0: the resized floats themselves
        resize.resize_into(out[None], pixels[None], weight, bias, size, (0, 0, *size), "cv2_cubic_f32", "pil", _PLANS)
        values = out
    mean, std = (torch.from_numpy(v)[:, None, None] for v in (mean, std))
    # A float32 tensor by a Python float: float32 division, as np.divide(x, np.float32(255)); in place where the
    # values are the output already. Whole-image passes: bands of rows measured slower here (their calls' cost).
    torch.div(values, 255.0, out=out).sub_(mean).div_(std)
    return out


def _float32_pixels(pixels: torch.Tensor, cv2) -> torch.Tensor:
    """np.array(image, dtype=np.float32) of a [3, H, W] uint8 view, as [H, W, 3] float32 in pooled memory: each
    value the byte itself. Pillow's RGBX memory (read in place, 4 bytes a pixel) goes a band of rows at a time
    through cv2.cvtColor, which drops the fourth byte, then torch widens the packed bytes, in cache. Measured at
    1 thread: ~6.5 ms for a 1080p photo, ~40 ms for 12 MP, against NumPy's 8 and 65 (through Pillow's encoder,
    then a strided cast); most of it is writing the float32 values."""
    height, width = pixels.shape[1:]
    source = output_pool.empty((height, width, 3), torch.float32)
    hwc = pixels.permute(1, 2, 0)
    in_place = (
        hwc.stride() == (4 * width, 4, 1)
        and hwc.untyped_storage().nbytes() >= hwc.storage_offset() + hwc.numel() // 3 * 4
    )
    if not in_place:  # not Pillow's memory: one strided copy
        source.copy_(hwc)
        return source
    rgbx = hwc.as_strided((height, width, 4), (4 * width, 4, 1)).numpy()
    band = max(1, BAND_BYTES // (3 * width))
    packed = torch.empty((band, width, 3), dtype=torch.uint8)
    packed_array = packed.numpy()
    for start in range(0, height, band):
        rows = min(band, height - start)
        cv2.cvtColor(rgbx[start : start + rows], cv2.COLOR_RGBA2RGB, dst=packed_array[:rows])
        source[start : start + rows].copy_(packed[:rows])
    return source
