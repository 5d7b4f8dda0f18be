"""vLLM's own InternVL image (and video) processor served by FusedImageProcessor.

The remote-code InternVL checkpoints (`InternVLChatModel`: InternVL2.5 / 3 / 3.5; also the models whose vLLM
processing builds the same InternVLChatImageProcessor: Skywork-R1V, Eagle2.5-VL, Qianfan-OCR, NVLM-D) are not
preprocessed by transformers but by vllm/transformers_utils/processors/internvl.py: Pillow's default-filter
(bicubic) resize to the tile grid, 448 crops and a thumbnail, then torchvision's ToTensor + Normalize, image by
image (a video's frames: one tile each). `serve` replaces InternVLChatImageProcessor's and
InternVLChatVideoProcessor's `__call__` with ones that run the families.internvl_chat plan (the grid resize
written as tiles by one kernel call, a job per thumbnail) through FusedImageProcessor, reference "pil" (the
installed Pillow's resize), float32: the same pixel_values_flat and image_num_patches (pixel_values_flat_video
and video_num_patches).

vLLM's code is only served as this module knows it: the sources of the functions it reproduces must be those
of vllm 0.34.0 (their SHA-256 below); where they moved, `serve` changes nothing and says why. A call it does not
reproduce (an image that is not an RGB or gray PIL image, a video that is not a uint8 array, a subclass of the processor with preprocessing of its
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
VIDEO_CLASS = "InternVLChatVideoProcessor"
# What this reproduces: these functions of MODULE (and the classes' methods), as vllm 0.34.0 writes them.
IMAGES = {
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
# Videos: each frame through the images' path with one tile (no thumbnail), then these.
VIDEOS = {
    **IMAGES,
    "video_to_pixel_values_internvl": "fef61cd82e77e643dd73f53bd1be533e34b3b30b901334175eadff17906a8e24",
    f"{VIDEO_CLASS}._videos_to_pixel_values_lst": "6add2135226c32836514de1dd8afe0256f03daf54f947ec356d72e4b3704f184",
    f"{VIDEO_CLASS}.__call__": "3d987924dd76b038c69ad6affd6a6a08fa15a4c398e30d3d0d8524d402b4152b",
}
MAX_LOGGED_REASONS = 64
# vLLM resizes the image in its own mode, then converts it to RGB: for these modes that is the same as
# converting first (gray repeated to 3 channels), as FusedImageProcessor does.
SERVED_MODES = ("RGB", "L")


def digest(obj: object) -> str:
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()


def moved(module: object, reproduced: dict = IMAGES) -> str | None:
    """Why `module`'s InternVL preprocessing (the functions `reproduced` names) is not the one this reproduces;
    None when it is."""
    for name, expected in reproduced.items():
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
    """Makes FusedImageProcessor serve vLLM's InternVLChatImageProcessor and InternVLChatVideoProcessor; returns
    the sentence to log."""
    try:
        module = importlib.import_module(MODULE)
    except ImportError as e:
        return f"vLLM's InternVL processors stay vLLM's: this vLLM has no {MODULE} ({e})"
    handed_back = HandedBack(log)
    said = [
        _wrap(module, CLASS, "images", IMAGES, _serve_images, handed_back),
        _wrap(module, VIDEO_CLASS, "videos", VIDEOS, _serve_videos, handed_back),
    ]
    return "; ".join(said)


def _wrap(module, name: str, argument: str, reproduced: dict, serve_call, handed_back) -> str:
    """Replaces MODULE.<name>.__call__ (whose first argument, by position or by keyword, is `argument`) by one
    that runs `serve_call` and hands what it does not serve to the original; says which serves that class."""
    cls = getattr(module, name, None)
    if cls is None:
        return f"vLLM's InternVL processing stays vLLM's: this vLLM has no {MODULE}.{name}"
    served = f"FusedImageProcessor (reference 'pil') serves vLLM's {name} in place of its Pillow resize, ToTensor and Normalize"
    original = cls.__call__
    if getattr(original, "fused_input_norm_wrapped", None) is not None:  # vLLM may load plugins more than once
        return served
    reason = moved(module, reproduced)
    if reason is not None:
        return f"vLLM's {name} serves: {reason}"

    @functools.wraps(original)
    def __call__(self, *args, **kwargs):
        out = _served(module, cls, self, argument, args, kwargs, serve_call)
        if isinstance(out, str):
            handed_back(type(self).__name__, out)
            return original(self, *args, **kwargs)
        return out

    __call__.fused_input_norm_wrapped = original
    cls.__call__ = __call__
    return served


def _served(module, cls, upstream, argument: str, args: tuple, kwargs: dict, serve_call) -> object:
    """`serve_call`'s output for a call of `cls.__call__`, or why it goes to vLLM's code."""
    if type(upstream) is not cls:
        return f"{type(upstream).__name__} is a subclass of {cls.__name__} with preprocessing of its own"
    if len(args) + (argument in kwargs) != 1:
        return f"{argument} not given once (as the first argument or by name)"
    rest = {key: value for key, value in kwargs.items() if key != argument}
    return serve_call(module, upstream, args[0] if args else kwargs[argument], rest)


def _serve_images(module, upstream, images, kwargs: dict) -> object:
    """The BatchFeature vLLM's InternVLChatImageProcessor returns, or why this call goes to vLLM's code."""
    images = pil_images(images, SERVED_MODES, "vLLM resizes it in that mode, then converts it to RGB")
    if isinstance(images, str):
        return images
    bounds = {key: kwargs.get(key) for key in ("min_dynamic_patch", "max_dynamic_patch", "dynamic_image_size")}
    bounds = {key: getattr(upstream, key) if value is None else value for key, value in bounds.items()}
    out = _run(module, upstream, images, {**bounds, "use_thumbnail": upstream.use_thumbnail}, kwargs)
    if isinstance(out, str):
        return out
    return _batch({"pixel_values_flat": out["pixel_values"], "image_num_patches": out["num_patches"]}, kwargs)


def pil_images(images, modes: tuple, why: str) -> list | str:
    """The call's image or images as a list, or why they are not served: none, one that is not a PIL image, or
    one whose mode is not in `modes` (`why`: what vLLM does with those)."""
    images = images if isinstance(images, list) else [images]
    if not images:
        return "no images"
    from PIL import Image

    for image in images:
        if not isinstance(image, Image.Image):
            return f"an image that is not a PIL image ({type(image).__name__})"
        if image.mode not in modes:
            return f"a {image.mode} image ({why})"
    return images


def _serve_videos(module, upstream, videos, kwargs: dict) -> object:
    """The BatchFeature vLLM's InternVLChatVideoProcessor returns (each frame one tile, no thumbnail), or why
    this call goes to vLLM's code."""
    import numpy as np

    videos = videos if isinstance(videos, list) else [videos]
    if not videos:
        return "no videos"
    for video in videos:
        if not isinstance(video, np.ndarray) or video.dtype != np.uint8 or video.ndim != 4 or video.shape[-1] != 3:
            return "a video that is not a uint8 [frames, H, W, 3] array"
    frames = [frame for video in videos for frame in video]
    one_tile = {"min_dynamic_patch": 1, "max_dynamic_patch": 1, "dynamic_image_size": False, "use_thumbnail": False}
    out = _run(module, upstream, frames, one_tile, kwargs)
    if isinstance(out, str):
        return out
    counts = torch.tensor([len(video) for video in videos])
    return _batch({"pixel_values_flat_video": out["pixel_values"], "video_num_patches": counts}, kwargs)


def _run(module, upstream, images: list, tiles: dict, kwargs: dict) -> dict | str:
    """FusedImageProcessor's outputs for these images with these tile settings, or why not."""
    if kwargs.get("return_tensors") not in (None, "pt"):
        return f"return_tensors={kwargs['return_tensors']!r} (only 'pt' is served)"
    config = {
        "image_processor_type": CLASS,
        "size": upstream.image_size,
        **tiles,
        "resample": 3,  # Pillow's default filter for RGB and L images: bicubic
        "image_mean": list(module.IMAGENET_MEAN),
        "image_std": list(module.IMAGENET_STD),
    }
    try:
        items = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in config.items()))
        return _processor(items)(images)
    except (TypeError, ValueError) as e:
        return str(e)


def _batch(data: dict, kwargs: dict) -> object:
    from transformers import BatchFeature

    return BatchFeature(data, tensor_type=kwargs.get("return_tensors"))


@functools.lru_cache(maxsize=8)  # one per distinct config (per-request tile bounds), least recently used out
def _processor(items: tuple) -> FusedImageProcessor:
    config = {key: list(value) if isinstance(value, tuple) else value for key, value in items}
    return FusedImageProcessor.from_preprocessor_config(config, device=torch.device("cpu"), reference="pil")


class HandedBack:
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
