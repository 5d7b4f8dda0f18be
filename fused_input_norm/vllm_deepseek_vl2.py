"""vLLM's own DeepSeek-VL2 processor served by FusedImageProcessor.

deepseek-vl2-tiny, -small and deepseek-vl2 (DeepseekVLV2ForCausalLM) are not preprocessed by transformers but
by vllm/transformers_utils/processors/deepseek_vl2.py (DeepseekVLV2Processor): its tokenize_with_images builds
the prompt's tokens and, image by image, a global view (ImageOps.pad to image_size with the grey of the mean)
and a local view (ImageOps.pad to the candidate resolution select_best_resolution picks, or image_size where
cropping is off) cut into image_size tiles, each view and tile through ToTensor + Normalize. `serve` wraps
DeepseekVLV2Processor.tokenize_with_images: vLLM's own code still builds every token, run on a copy of the
processor given each image's size alone (its ImageOps.pad and crops of a stand-in cost nothing, its transform
gives placeholders), and the families.deepseek_vl2 plan writes the views (reference "pil": the installed
Pillow's bicubic resize; float32). The tile grids vLLM chose are checked against the plan's.

vLLM's code is only served as this module knows it: the sources of the functions it reproduces must be those
of vllm 0.34.0 (their SHA-256 below); where they moved, `serve` changes nothing and says why. A call it does not
reproduce (an image that is not an RGB PIL image, a subclass, a mean that is not one grey) runs vLLM's own code,
and the first call of each kind logs why.

vllm is imported only inside `serve`.
"""

import copy
import inspect
import logging
import types

import torch

from .vllm_deepseek_ocr import Shape
from .vllm_internvl import HandedBack, bound_arguments, pil_images, processor, unwrapped_class, wrap_method

MODULE = "vllm.transformers_utils.processors.deepseek_vl2"
CLASS = "DeepseekVLV2Processor"
# What this reproduces: these functions of MODULE (and the class's methods), as vllm 0.34.0 writes them.
REPRODUCED = {
    "ImageTransform.__init__": "4ef82a7e2d42483832614391b382bd02b361ec80883b9fbe37568c3c073e181a",
    "ImageTransform.__call__": "60f3cfc1e9b588320971f88241b01cc363d68d97bace940d36411ab42798a216",
    f"{CLASS}.__init__": "21eb9071fe8305210090c7da8eb68f5f952bdd4470a48354fe63dedabcd24cb4",
    f"{CLASS}.select_best_resolution": "87fc622a76fd370accc8a144beac02d2fd762001a902d36d7fc5c89bc8db1795",
    f"{CLASS}.tokenize_with_images": "6c701ea22896ce5ae16fe6d24517cdbea0645f9f2686bbd3b530c77c071ed0d7",
}
# The vLLM classes whose images this module serves (scripts/vllm_reach.py reads it).
IMAGE_CLASSES = (CLASS,)


class _Pad:
    """The ImageOps vLLM's tokenize_with_images sees when it runs on shapes: a pad gives the canvas's shape."""

    @staticmethod
    def pad(image, size, *args, **kwargs) -> Shape:
        return Shape(tuple(size))


class _Placeholders:
    """The image_transform of the processor's copy: its mean (the pad's color), and an empty tensor per view."""

    def __init__(self, mean):
        self.mean = mean

    def __call__(self, image) -> torch.Tensor:
        return torch.empty(0)


def serve(log: logging.Logger) -> str:
    """Makes FusedImageProcessor serve vLLM's DeepseekVLV2Processor; returns the sentence to log."""
    served = f"FusedImageProcessor (reference 'pil') serves vLLM's {CLASS} in place of its Pillow pad, ToTensor and Normalize"
    module, cls, stop = unwrapped_class(MODULE, CLASS, "tokenize_with_images", REPRODUCED, served)
    if stop is not None:
        return stop
    original = cls.tokenize_with_images
    # vLLM's own tokenize_with_images, its ImageOps the stand-in: the tokens of the images' sizes alone.
    on_shapes = types.FunctionType(
        original.__code__, {**vars(module), "ImageOps": _Pad}, original.__name__, original.__defaults__
    )
    signature = inspect.signature(original)

    def serve_call(upstream, args: tuple, kwargs: dict) -> tuple | str:
        call = bound_arguments(cls, "tokenize_with_images", signature, upstream, args, kwargs)
        return call if isinstance(call, str) else _served(on_shapes, upstream, call)

    wrap_method(cls, "tokenize_with_images", serve_call, HandedBack(log))
    return served


def _served(on_shapes, upstream, call: dict) -> tuple | str:
    """vLLM's tokenize_with_images' outputs for this call, its views FusedImageProcessor's, or why the call goes
    to vLLM's code."""
    images = pil_images(call["images"], ("RGB",), "vLLM pads it in its own mode")
    if isinstance(images, str):
        return images
    transform = upstream.image_transform
    fills = {int(x * 255) for x in transform.mean}
    if len(transform.mean) != 3 or len(fills) != 1:
        return f"the mean {tuple(transform.mean)} pads with a color that is not one grey"
    stand_in = copy.copy(upstream)
    stand_in.image_transform = _Placeholders(transform.mean)
    shapes = [Shape(image.size) for image in images]
    ids, views, mask, spatial, counts = on_shapes(
        stand_in, call["conversation"], shapes, bos=call["bos"], eos=call["eos"], cropping=call["cropping"]
    )
    config = {
        "image_processor_type": CLASS,
        "size": upstream.image_size,
        "candidate_resolutions": tuple(tuple(c) for c in upstream.candidate_resolutions),
        "cropping": bool(call["cropping"]),
        "fill": fills.pop(),
        "resample": 3,  # ImageOps.pad's default filter: bicubic
        "do_normalize": bool(transform.normalize),
        "image_mean": tuple(transform.mean),
        "image_std": tuple(transform.std),
    }
    try:
        out = processor(tuple(sorted(config.items())), "pil")(images)
    except (TypeError, ValueError) as e:
        return str(e)
    if out["images_spatial_crop"].tolist() != spatial or out["pixel_values"].shape[0] != len(views):
        return f"vLLM's tile grids {spatial} are not the plan's {out['images_spatial_crop'].tolist()}"
    return ids, list(out["pixel_values"]), mask, spatial, counts
