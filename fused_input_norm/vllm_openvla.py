"""vLLM's own OpenVLA image processor served by the fused resize op.

OpenVLA (OpenVLAForActionPrediction) is preprocessed by vllm/transformers_utils/processors/openvla.py:
OpenVLAImageProcessor.__call__ runs preprocess_openvla_image on each image: to_rgb_image (a PIL image
converted to RGB; arrays and tensors made into one), Pillow's bicubic resize to image_size x image_size,
then the pixels as float32 / 255 normalized twice, with DINOv2's (ImageNet) and SigLIP's mean and std, the two
[3, S, S] results concatenated into [6, S, S]; the images stacked.

`serve` wraps OpenVLAImageProcessor.__call__: vLLM's own to_rgb_image still makes each RGB image, the resize
is the engine's (reference "pil": the installed Pillow's bicubic, bit for bit), and the float32 steps run in
NumPy's order (/ 255, - mean, / std, each correctly rounded as NumPy rounds it): the same tensor, bit for bit,
from one pass over the source pixels instead of Pillow's two.

vLLM's code is only served as this module knows it: the sources of the functions it reproduces must be vllm
0.34.0's (their SHA-256 below); where they moved, `serve` changes nothing and says why. A call it does not
reproduce (no images, a subclass, means that are not three values) runs vLLM's own code, and the first call of
each kind logs why. vllm is imported only inside `serve`.
"""

import logging
from collections.abc import Sequence

import numpy as np
import torch

from . import resize
from .images import pil_to_chw
from .vllm_internvl import unwrapped_class, wrap_bound

MODULE = "vllm.transformers_utils.processors.openvla"
CLASS = "OpenVLAImageProcessor"
# What this reproduces: these functions of MODULE, as vllm 0.34.0 writes them.
REPRODUCED = {
    "to_rgb_image": "030cf2f7a5a3067791c68502c18b60f23ae8ec538c5dc9ca67b7bf6917f806c8",
    "preprocess_openvla_image": "ce761f85cad0f4361130ac38cd544140965dc0891c8b0f1ee3ba05661ba12634",
    f"{CLASS}.__call__": "775711c34037d83bb9ba60450a997769c0357b7fa7236d258134c8f30871e1a0",
}
# The towers' normalizations, in the order preprocess_openvla_image concatenates them: MODULE's constants.
TOWERS = (("IMAGENET_MEAN", "IMAGENET_STD"), ("SIGLIP_MEAN", "SIGLIP_STD"))
_PLANS = resize.PlanCache()


def serve(log: logging.Logger) -> str:
    """Makes the fused resize op serve vLLM's OpenVLAImageProcessor; returns the sentence to log."""
    served = (
        f"the fused resize op (reference 'pil') serves vLLM's {CLASS} in place of its Pillow resize and NumPy normalize"
    )
    module, cls, stop = unwrapped_class(MODULE, CLASS, "__call__", REPRODUCED, served)
    if stop is not None:
        return stop
    wrap_bound(cls, "__call__", lambda upstream, call: _served(module, upstream, call), log)
    return served


def _served(module, upstream, call: dict) -> dict | str:
    """What vLLM's OpenVLAImageProcessor.__call__ returns for these arguments, or why this call goes to its
    code."""
    images = call["images"]
    if images is None:
        return "no images"
    if not isinstance(images, Sequence) or isinstance(images, str | bytes):
        images = [images]
    if len(images) == 0:
        return "no images"
    towers = []
    for mean_name, std_name in TOWERS:
        mean, std = (np.asarray(getattr(module, name, None), dtype=np.float32) for name in (mean_name, std_name))
        if mean.shape != (3,) or std.shape != (3,):
            return f"{mean_name} or {std_name} is not 3 values"
        towers.append((torch.from_numpy(mean)[:, None, None], torch.from_numpy(std)[:, None, None]))
    side = upstream.image_size
    out = torch.empty((len(images), 3, side, side), dtype=torch.float32)
    weight, bias = resize.identity_affine()  # x * 1 + 0: Pillow's resized bytes themselves, as float32
    for i, image in enumerate(images):
        pixels = pil_to_chw(module.to_rgb_image(image))  # vLLM's own RGB image of whatever the request holds
        resize.resize_into(
            out[i : i + 1], pixels[None], weight, bias, (side, side), (0, 0, side, side), "bicubic", "pil", _PLANS
        )
    raw = out.div_(255.0)  # a float32 tensor by a Python float: float32 division, as NumPy's
    return {"pixel_values": torch.cat([(raw - mean).div_(std) for mean, std in towers], dim=1)}
