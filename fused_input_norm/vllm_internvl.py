"""vLLM's own InternVL image processor served by FusedImageProcessor.

The remote-code InternVL checkpoints (`InternVLChatModel`: InternVL2.5 / 3 / 3.5; also the models whose vLLM
processing builds the same InternVLChatImageProcessor: Skywork-R1V, Eagle2.5-VL, Qianfan-OCR, NVLM-D) are not
preprocessed by transformers but by vllm/transformers_utils/processors/internvl.py: Pillow's default-filter
(bicubic) resize to the tile grid, 448 crops and a thumbnail, then torchvision's ToTensor + Normalize, image by
image. `serve` replaces that class's `__call__` with one that runs the families.internvl_chat plan (the grid
resize written as tiles by one kernel call, a job per thumbnail) through FusedImageProcessor, reference "pil"
(the installed Pillow's resize), float32: the same pixel_values_flat and image_num_patches.

vLLM's code is only served as this module knows it: the sources of the functions it reproduces must be those
of vllm 0.34.0 (their SHA-256 below); where they moved, `serve` changes nothing and says why. A call it does not
reproduce (an image that is not an RGB or gray PIL image, a subclass of the processor with preprocessing of its
own: H2OVL, Nemotron-VL) runs vLLM's own code, and the first call of each kind logs why.

vllm is imported only inside `serve`.
"""

import functools
import hashlib
import importlib
import inspect
import logging
import threading

import torch

from .processor import FusedImageProcessor

MODULE = "vllm.transformers_utils.processors.internvl"
CLASS = "InternVLChatImageProcessor"
# What this reproduces: these functions of MODULE (and the class's methods), as vllm 0.34.0 writes them.
REPRODUCED = {
    "build_transform": "c1d7f0208d17afd6b019db5f2405599dbcadecf10c8f106cba3737e95b14926d",
    "find_closest_aspect_ratio": "977332f6419322fb80645634336b71152fd2acf6706baa4999fe9ddf719c953b",
    "resolve_internvl_min_max_num": "42b351b270f3ba5ff70c511c97ebf82f0e3e8caefa4db2a60fcc040fac237219",
    "get_internvl_target_ratios": "2b81aebfc3b7c57a069b30a4d8325b7f5c27a682bfcd343cb0c9970d61045d2f",
    "calculate_internvl_targets": "b81a1baeb80d7db216ed4ac2aee1a3682af152caed1dddbc7db446eaba3acff2",
    "dynamic_preprocess_internvl": "b7561d2416a8cd7bc98fdd20a4832ea85d79a9bf4669ee99de5ab1fb56845ad6",
    "image_to_pixel_values_internvl": "7e5a5d0f784544b2a249bd1647868b9d81f297045ae447a1c7f391a569209c1e",
    f"{CLASS}._images_to_pixel_values_lst": "c58a9f8ece855c1088d77b4f27f73aa686d6339b7d21479bd98dfd5868e8969e",
    f"{CLASS}.__call__": "e28d749febe3cb9aa37c1fabfbe7cf967d685da9a79b9446e9c5890805b7b944",
}
MAX_LOGGED_REASONS = 64
# vLLM resizes the image in its own mode, then converts it to RGB: for these modes that is the same as
# converting first (gray repeated to 3 channels), as FusedImageProcessor does.
SERVED_MODES = ("RGB", "L")


def digest(obj: object) -> str:
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()


def moved(module: object) -> str | None:
    """Why `module`'s InternVL preprocessing is not the one this reproduces; None when it is."""
    for name, expected in REPRODUCED.items():
        obj = module
        try:
            for part in name.split("."):
                obj = getattr(obj, part)
            found = digest(obj)
        except (AttributeError, OSError, TypeError) as e:
            return f"its {name} cannot be read ({e})"
        if found != expected:
            return f"its {name} is not vllm 0.34.0's (the one this reproduces)"
    return None


def serve(log: logging.Logger) -> str:
    """Makes FusedImageProcessor serve vLLM's InternVLChatImageProcessor; returns the sentence to log."""
    try:
        module = importlib.import_module(MODULE)
        cls = getattr(module, CLASS)
    except (ImportError, AttributeError) as e:
        return f"vLLM's InternVL image processor stays vLLM's: this vLLM has no {MODULE}.{CLASS} ({e})"
    original = cls.__call__
    if getattr(original, "fused_input_norm_wrapped", None) is not None:  # vLLM may load plugins more than once
        return f"FusedImageProcessor serves vLLM's {CLASS}"
    reason = moved(module)
    if reason is not None:
        return f"vLLM's {CLASS} serves InternVL images: {reason}"
    handed_back = _HandedBack(log)

    @functools.wraps(original)
    def __call__(self, images, *, min_dynamic_patch=None, max_dynamic_patch=None, dynamic_image_size=None, **kwargs):
        served = _serve(module, self, images, min_dynamic_patch, max_dynamic_patch, dynamic_image_size, kwargs)
        if isinstance(served, str):
            handed_back(type(self).__name__, served)
            return original(
                self,
                images,
                min_dynamic_patch=min_dynamic_patch,
                max_dynamic_patch=max_dynamic_patch,
                dynamic_image_size=dynamic_image_size,
                **kwargs,
            )
        return served

    __call__.fused_input_norm_wrapped = original
    cls.__call__ = __call__
    return (
        f"FusedImageProcessor (reference 'pil') serves vLLM's {CLASS} (InternVLChatModel and the models that "
        f"build it) in place of its Pillow resize, ToTensor and Normalize"
    )


def _serve(module, upstream, images, min_dynamic_patch, max_dynamic_patch, dynamic_image_size, kwargs) -> object:
    """The BatchFeature vLLM's __call__ returns, or why this call goes to vLLM's code."""
    cls = getattr(module, CLASS)
    if type(upstream) is not cls:
        return f"{type(upstream).__name__} is a subclass of {CLASS} with preprocessing of its own"
    return_tensors = kwargs.get("return_tensors")
    if return_tensors not in (None, "pt"):
        return f"return_tensors={return_tensors!r} (only 'pt' is served)"
    images = images if isinstance(images, list) else [images]
    if not images:
        return "no images"
    from PIL import Image

    for image in images:
        if not isinstance(image, Image.Image):
            return f"an image that is not a PIL image ({type(image).__name__})"
        if image.mode not in SERVED_MODES:
            return f"a {image.mode} image (vLLM resizes it in that mode, then converts it to RGB)"
    config = {
        "image_processor_type": CLASS,
        "size": upstream.image_size,
        "min_dynamic_patch": upstream.min_dynamic_patch if min_dynamic_patch is None else min_dynamic_patch,
        "max_dynamic_patch": upstream.max_dynamic_patch if max_dynamic_patch is None else max_dynamic_patch,
        "dynamic_image_size": upstream.dynamic_image_size if dynamic_image_size is None else dynamic_image_size,
        "use_thumbnail": upstream.use_thumbnail,
        "resample": 3,  # Pillow's default filter for RGB and L images: bicubic
        "image_mean": list(module.IMAGENET_MEAN),
        "image_std": list(module.IMAGENET_STD),
    }
    try:
        items = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in config.items()))
        out = _processor(items)(images)
    except (TypeError, ValueError) as e:
        return str(e)
    from transformers import BatchFeature

    data = {"pixel_values_flat": out["pixel_values"], "image_num_patches": out["num_patches"]}
    return BatchFeature(data, tensor_type=return_tensors)


@functools.lru_cache(maxsize=8)  # one per distinct config (per-request tile bounds), least recently used out
def _processor(items: tuple) -> FusedImageProcessor:
    config = {key: list(value) if isinstance(value, tuple) else value for key, value in items}
    return FusedImageProcessor.from_preprocessor_config(config, device=torch.device("cpu"), reference="pil")


class _HandedBack:
    """Logs why vLLM's code serves a call, once per reason (at most MAX_LOGGED_REASONS of them)."""

    def __init__(self, log: logging.Logger):
        self._log = log
        self._lock = threading.Lock()
        self._logged: set[str] = set()

    def __call__(self, name: str, reason: str) -> None:
        with self._lock:
            if reason in self._logged or len(self._logged) >= MAX_LOGGED_REASONS:
                return
            self._logged.add(reason)
        self._log.info("fused_input_norm: vLLM's %s serves this call: %s", name, reason)
