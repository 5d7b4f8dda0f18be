"""vLLM's own Step3-VL image processor served in its class.

Step3VLForConditionalGeneration and the models built on it (StepVLForConditionalGeneration,
Step3p7ForConditionalGeneration, Step5ForConditionalGeneration) are preprocessed by
vllm/transformers_utils/processors/step3_vl.py, image by image: a zero square pad for tiny images of extreme
aspect, Pillow's bilinear resize to at most 3024 a side, then a global view (ToTensor, Normalize, then
torchvision's antialiased bilinear Resize of the normalized floats to image_size) and, for images large or
long enough, sliding windows cut from a second Pillow bilinear resize to a multiple of the window (each
ToTensor, Normalize, and resized to patch_size where the window is smaller).

`serve` replaces Step3VLImageProcessor's `__call__` with one that runs the uint8 steps (the pad, Pillow's
bilinear resizes, the windows cut as tiles, ToTensor + Normalize) in the package's fused resize op, reference
"pil" (one call for all of an image's windows; the global view normalized in bands of rows); the float resizes of normalized views (the global view to image_size, a
window smaller than patch_size) are torch's antialiased bilinear `interpolate`, the very call torchvision
makes. Windows, newline masks and sizes come from vLLM's own ImagePatcher (arithmetic only), so the output
is the same pixel_values, num_patches, patch_pixel_values and patch_newline_mask.

vLLM's code is only served as this module knows it: the sources of the functions it reproduces must be those
of vllm 0.34.0 (their SHA-256 below); where they moved, `serve` changes nothing and says why. A call it does not
reproduce (an image that is not an RGB PIL image, return_tensors other than None or "pt", a subclass) runs
vLLM's own code, and the first call of each kind logs why.

vllm is imported only inside `serve`.
"""

import functools
import logging

import torch

from . import resize
from .images import pil_to_chw
from .vllm_internvl import pil_images, unwrapped_class, wrap_bound

MODULE = "vllm.transformers_utils.processors.step3_vl"
CLASS = "Step3VLImageProcessor"
# What this reproduces: these functions of MODULE, as vllm 0.34.0 writes them.
REPRODUCED = {
    "Step3VisionProcessor.__init__": "452ebf4b51ff74ac1289b616766d2027d8b7fee7b5c1a1b8be8bdf244b0dc844",
    "Step3VisionProcessor.__call__": "96c8c42c23462388555768a2c803e1d9b9b311949758d9c1287f3e2e87235285",
    "ImagePatcher.determine_window_size": "951b0276b28c16b89c1add310ba0c53394ea8be43eff6c4ce4e5ebf81ef39d47",
    "ImagePatcher.slide_window": "07e61498dcf193dcf6abac4d5aba0e1a5c59f87c1397761e052e1a044a8f2e95",
    "ImagePatcher.square_pad": "30c683331d71f9e5f20baec88a21663791be0a499279e893034dd4fc7c57b581",
    "ImagePatcher.get_image_size_for_padding": "de92a8bec0e1da2678c8608901091e13b01022a0a41c6958de54c2bc25068f67",
    "ImagePatcher.get_image_size_for_preprocess": "4b94dfb35abf2634e843fd9d0a2d617ce338304f6269c6e38cd5437f6728e83d",
    "ImagePatcher.get_image_size_for_crop": "41c0f6916a53d3c43a4211025210c2135ff29e564975f65a30c5edae3c8cabc4",
    "ImagePatcher.patch_crop": "521bc94f90ac26bad8e682b14c916520ad529eec941204e141e43a7df67e4b74",
    "ImagePatcher.__call__": "b3517a6d886f7b6d54bc1b1a4009d57e0cd42e880915b042c29f012e7fc63de0",
    f"{CLASS}.__init__": "10966d5342b4348a46e19b1a86806f17f6dc0403b57fe1626fa8e3dc66ed9aa6",
    f"{CLASS}._split_images": "45475ac32bcfc72307ce57bc1f639d52e1c9689c9152abe0d0c8467adc7b8699",
    f"{CLASS}._convert_images_to_pixel_values": "8aa0ebf1e1814523d3973fdc9b4c02b181a61dcb059a6e9e418571606083baff",
    f"{CLASS}.__call__": "ce50fe992802114694e9e5604ac58270206c9656aa71bcbaea1cc3e512a20d4f",
}
MAX_IMAGE_SIZE = 3024  # vLLM's MODULE.MAX_IMAGE_SIZE (checked by serve)
MEAN = (0.48145466, 0.4578275, 0.40821073)  # Step3VisionProcessor's, in its __init__ (checked by its digest)
STD = (0.26862954, 0.26130258, 0.27577711)

# The global view's rows normalized at a time (3 x 128 x 3024 floats: 4.5 MiB at the 3024 cap), each band's
# width pass run while it is near: normalizing the whole image first (82 MiB at the cap) made the 12 MP global
# view 2.2x slower (251 -> 112 ms, in process, loaded machine; 32 rows: 114 ms; 1080p: 48 -> 46 ms).
GLOBAL_BAND_ROWS = 128
_PLANS = resize.PlanCache()


def serve(log: logging.Logger) -> str:
    """Makes FusedImageProcessor's resize op serve vLLM's Step3VLImageProcessor; returns the sentence to log."""
    served = (
        f"the fused resize op (reference 'pil') serves vLLM's {CLASS} in place of its Pillow resizes, crops, "
        "ToTensor and Normalize"
    )
    module, cls, stop = unwrapped_class(MODULE, CLASS, "__call__", REPRODUCED, served)
    if stop is not None:
        return stop
    if getattr(module, "MAX_IMAGE_SIZE", None) != MAX_IMAGE_SIZE:
        return f"vLLM's {CLASS} serves: its MAX_IMAGE_SIZE is not {MAX_IMAGE_SIZE}"
    wrap_bound(cls, "__call__", lambda upstream, call: _served(upstream, call["images"], call["return_tensors"]), log)
    return served


def _served(upstream, images, return_tensors) -> object:
    """The BatchFeature vLLM's Step3VLImageProcessor returns, or why this call goes to vLLM's code."""
    if return_tensors not in (None, "pt"):
        return f"return_tensors={return_tensors!r} (only 'pt' is served)"
    images = pil_images(images, ("RGB",), "vLLM's Normalize fails on other than 3 channels")
    if isinstance(images, str):
        return images
    views = [_views(upstream, image) for image in images]
    for view in views:
        if isinstance(view, str):
            return view
    from transformers import BatchFeature

    patch_size = upstream.patch_size
    pixel_values = torch.cat([view[0] for view in views])
    windows = [view[1] for view in views if len(view[1])]
    data = {
        "pixel_values": pixel_values,
        "num_patches": [len(view[1]) for view in views],
        "patch_pixel_values": torch.cat(windows) if windows else pixel_values.new_empty((0, 3, patch_size, patch_size)),
        "patch_newline_mask": torch.tensor([m for view in views for m in view[2]], dtype=torch.bool),
    }
    return BatchFeature(data, tensor_type=return_tensors)


def _views(upstream, image) -> tuple[torch.Tensor, torch.Tensor, list[bool]] | str:
    """One image's global view [1, 3, S, S], windows [N, 3, P, P] and newline mask, as vLLM's ImagePatcher
    and Step3VisionProcessor make them; or why not."""
    patcher = upstream.patcher
    pixels = pil_to_chw(image)[None]  # [1, 3, H, W] uint8
    width, height = image.size
    if patcher.get_image_size_for_padding(width, height) != (width, height):
        side = max(width, height)  # square_pad: the image at the top left of a black square
        pixels = _uint8(pixels, (height, width), pad=(side, side, 0, 0, 0))
        width = height = side
    capped_w, capped_h = patcher.get_image_size_for_preprocess(width, height)
    if (capped_w, capped_h) != (width, height):
        pixels = _uint8(pixels, (capped_h, capped_w))
    global_view = _global_view(pixels, upstream.image_size)
    window = patcher.determine_window_size(max(capped_w, capped_h), min(capped_w, capped_h))
    if window == 0 or not patcher.enable_patch:
        return global_view, global_view.new_empty((0, 3, upstream.patch_size, upstream.patch_size)), []
    crop_w, crop_h = patcher.get_image_size_for_crop(capped_w, capped_h, window)
    if (crop_w, crop_h) == (width, height) and (capped_w, capped_h) != (width, height):
        # vLLM then crops the capped image at the original's size (its comparison is with the original's)
        return "a crop size equal to the image's size before the 3024 cap"
    boxes, (columns, _) = patcher.slide_window(crop_w, crop_h, [(window, window)], [(window, window)])
    rows = len(boxes) // columns
    grid = [(c * window, r * window, window, window) for r in range(rows) for c in range(columns)]
    if boxes != grid:  # the crop size is a multiple of the window on each side at least as long
        return "windows that do not tile a grid"
    # The windows of a side shorter than the window reach past the image: Pillow's crop fills that with 0.
    canvas = (rows * window, columns * window, 0, 0, 0)
    windows = torch.empty((rows * columns, 3 * window * window), dtype=torch.float32)
    _resize_into(windows, pixels, (crop_h, crop_w), pad=canvas, patches=(1, window, 1))
    windows = _float_resize(windows.view(-1, 3, window, window), upstream.patch_size)
    newlines = [(i + 1) % columns == 0 for i in range(len(boxes))]
    if newlines and newlines[-1]:
        newlines[-1] = False  # vLLM pops the last newline
    return global_view, windows, newlines


@functools.cache
def _affine_constants() -> tuple[torch.Tensor, torch.Tensor]:
    """ToTensor then Normalize as one affine: x / 255 / std - mean / std."""
    std = torch.tensor(STD, dtype=torch.float64)
    mean = torch.tensor(MEAN, dtype=torch.float64)
    return (1 / (255 * std)).float(), (-mean / std).float()


def _resize_into(out, pixels, size, pad=(), patches=(), weights=None) -> None:
    weight, bias = weights if weights is not None else _affine_constants()
    crop = (0, 0, *size)
    resize.resize_into(out, pixels, weight, bias, size, crop, "bilinear", "pil", _PLANS, patches=patches, pad=pad)


def _uint8(pixels: torch.Tensor, size: tuple[int, int], pad=()) -> torch.Tensor:
    """Pillow's bilinear resize of the uint8 image to `size` (h, w), or its placing on a black canvas."""
    shape = (1, 3, pad[0], pad[1]) if pad else (1, 3, *size)
    out = torch.empty(shape, dtype=torch.uint8)
    _resize_into(out, pixels, size, pad=pad, weights=resize.identity_affine())
    return out


def _global_view(pixels: torch.Tensor, side: int) -> torch.Tensor:
    """ToTensor, Normalize, then torchvision's Resize((side, side), BILINEAR, antialias=True), as the same
    floats: torch's antialiased resize runs the width pass, then the height pass, so the width pass runs here a
    band of rows at a time on the band just normalized (still in cache), and the height pass once after."""
    height, width = pixels.shape[-2:]
    if (height, width) == (side, side):  # torchvision returns the normalized image itself
        out = torch.empty((1, 3, side, side), dtype=torch.float32)
        _resize_into(out, pixels, (side, side))
        return out
    weight, bias = _affine_constants()
    narrowed = torch.empty((1, 3, height, side), dtype=torch.float32)
    band = torch.empty(3 * min(height, GLOBAL_BAND_ROWS) * width, dtype=torch.float32)
    for top in range(0, height, GLOBAL_BAND_ROWS):
        rows = min(GLOBAL_BAND_ROWS, height - top)
        normalized = band[: 3 * rows * width].view(1, 3, rows, width)  # the op writes contiguous outputs
        crop = (top, 0, rows, width)
        resize.resize_into(normalized, pixels, weight, bias, (height, width), crop, "bilinear", "pil", _PLANS)
        narrowed[:, :, top : top + rows] = normalized if width == side else _interpolate(normalized, (rows, side))
    return narrowed if height == side else _interpolate(narrowed, (side, side))


def _float_resize(views: torch.Tensor, side: int) -> torch.Tensor:
    """torchvision's Resize((side, side), BILINEAR, antialias=True) of float views: the same interpolate call,
    and none where the size does not change (torchvision returns the tensor itself)."""
    if views.shape[-2:] == (side, side):
        return views
    return _interpolate(views, (side, side))


def _interpolate(views: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    return torch.nn.functional.interpolate(views, size=list(size), mode="bilinear", align_corners=False, antialias=True)
