"""vLLM's own Isaac image processor served by the fused resize op.

Isaac (IsaacForConditionalGeneration) is preprocessed by vllm/transformers_utils/processors/isaac.py:
IsaacImageProcessor.__call__ takes each image through extract_image_pil (RGB, as a [H, W, 3] uint8 tensor, at
most MAX_PIXELS), then process_vision_for_patches: a size from get_image_size_for_max_num_patches (multiples of
patch_size * pixel_shuffle_scale, the patch count within [min, max]), torch's F.interpolate(mode="bilinear",
antialias=False) of the uint8 pixels, prepare_image_tensor's float32 steps (* VISION_SCALE, - mean, / std),
and patchify_vision's rows of channel-last [P, P, C] patches; the images' rows concatenated, with
image_grid_thw (1, rows, columns) per image.

`serve` wraps IsaacImageProcessor.__call__: vLLM's own extract_image_pil and size function still run, the resize
is the engine's "bilinear_no_antialias" filter (torch's integer kernel, bit for bit) written straight into the
patch rows, times VISION_SCALE (one float32 rounding, as prepare_image_tensor's multiply), and the mean and std
steps run in place in its order, so the rows are vLLM's bit for bit. torch runs that integer kernel only at CPU capability AVX2 and above (x86): elsewhere every call is handed
back (resize.torch_uint8_kernel).

vLLM's code is only served as this module knows it: the sources of the functions it reproduces must be vllm
0.34.0's (their SHA-256 below); where they moved, `serve` changes nothing and says why. A call it does not
reproduce (no images, a subclass, a 1-pixel side) runs vLLM's own code, and the first call of each kind logs
why. vllm is imported only inside `serve`.
"""

import inspect
import logging

import torch

from . import resize
from .checks import is_int
from .vllm_internvl import unwrapped_class, wrap_bound

MODULE = "vllm.transformers_utils.processors.isaac"
CLASS = "IsaacImageProcessor"
# What this reproduces: these functions of MODULE, as vllm 0.34.0 writes them.
REPRODUCED = {
    "process_vision_for_patches": "2de92c951555e83f6a37525be6d2f65906e36965b98872507fa15afde2342291",
    "prepare_image_tensor": "e137313632e29c8b6cb7ec22a119b9d79f489220298beaee337b56d1bf302f0c",
    "patchify_vision": "245827b2fb47853e5484579c743270eb2a8d103a7478b02b45ce07893cefb55d",
    f"{CLASS}.__call__": "960f5f77cab5471e7494097f75ad8341676da0e844a22afa97ec66d39fa6fc13",
}
# The call's keyword arguments __call__ reads, and the attribute each defaults to.
SETTINGS = {
    "patch_size": "patch_size",
    "max_num_patches": "vision_max_num_patches",
    "min_num_patches": "vision_min_num_patches",
    "pixel_shuffle_scale": "pixel_shuffle_scale",
}
FILTER = "bilinear_no_antialias"
_PLANS = resize.PlanCache()


def serve(log: logging.Logger) -> str:
    """Makes the fused resize op serve vLLM's IsaacImageProcessor; returns the sentence to log."""
    served = (
        f"the fused resize op (filter '{FILTER}') serves vLLM's {CLASS} in place of its torch interpolate, "
        "normalize and patchify"
    )
    module, cls, stop = unwrapped_class(MODULE, CLASS, "__call__", REPRODUCED, served)
    if stop is not None:
        return stop
    # prepare_image_tensor's multiplier: its `scale` default, bound when vLLM defined it (its source checked above)
    scale = inspect.signature(module.prepare_image_tensor).parameters["scale"].default
    wrap_bound(cls, "__call__", lambda upstream, call: _served(module, scale, upstream, call), log)
    return served


def _served(module, scale: float, upstream, call: dict) -> object:
    """What vLLM's IsaacImageProcessor.__call__ returns for these arguments, or why this call goes to its code."""
    if not resize.torch_uint8_kernel():
        return f"torch resizes uint8 with its float kernel at CPU capability {torch.backends.cpu.get_cpu_capability()}"
    images = call["images"]
    images = images if isinstance(images, list) else [images]
    if not images:
        return "no images"
    options = call["kwargs"]
    patch, most, least, shuffle = (options.get(key, getattr(upstream, name)) for key, name in SETTINGS.items())
    if not (is_int(patch) and is_int(shuffle)):  # vLLM's sizes are then floats, or its code raises: its own outcome
        return f"patch_size {patch!r} or pixel_shuffle_scale {shuffle!r} is not an int"
    pixels, sizes = [], []
    for image in images:  # every image checked and sized (vLLM's own functions) before the first kernel runs
        hwc = module.extract_image_pil(image)
        size = module.get_image_size_for_max_num_patches(
            hwc.shape[0], hwc.shape[1], patch, most, min_num_patches=least, pixel_shuffle_scale=shuffle
        )
        if min(size) < 2:  # torch's kernel fails an internal assert on some 1-pixel outputs: keep its behavior
            return f"a {size[0]}x{size[1]} resize"
        pixels.append(hwc)
        sizes.append(size)
    rows = [(height // patch) * (width // patch) for height, width in sizes]
    out = torch.empty((sum(rows), 3 * patch * patch), dtype=torch.float32)
    # prepare_image_tensor's first step in the kernel: byte * scale + 0 rounded once is float32's byte * scale.
    weight, bias = torch.full((3,), scale, dtype=torch.float32), torch.zeros(3)
    start = 0
    for hwc, size, count in zip(pixels, sizes, rows, strict=True):
        chw = hwc.permute(2, 0, 1)[None]  # the layout vLLM hands F.interpolate, any strides here
        # Patch rows (temporal 1, merge 1): raster order, each [C, P * P] as the kernel writes it.
        resize.resize_into(
            out[start : start + count], chw, weight, bias, size, (0, 0, *size), FILTER, "pil", _PLANS, (1, patch, 1)
        )
        start += count
    channels = out.view(-1, 3, patch * patch)  # its next two steps, in its order, on each channel
    channels.sub_(module._MEAN_TENSOR.view(3, 1)).div_(module._STD_TENSOR.view(3, 1))
    pixel_values = channels.transpose(1, 2).reshape(out.shape)  # rows of channel-last [P, P, C] patches
    grids = torch.tensor([[1, height // patch, width // patch] for height, width in sizes])
    return module.BatchFeature(
        data={"pixel_values": pixel_values, "image_grid_thw": grids}, tensor_type=call["return_tensors"]
    )
