"""Hugging Face image and video processor configs: read from a model directory, a JSON file or a dict, and
resolved against ONE table of transformers' class defaults per processor, for every reader
(FusedInputNorm.from_preprocessor_config, FusedImageProcessor.from_preprocessor_config and
FusedVideoProcessor.from_preprocessor_config alike).
"""

import dataclasses
import json
import os
from collections.abc import Mapping

from . import families
from .checks import is_int, is_number, positive_int
from .families import gemma4, idefics3, qwen2_vl
from .families.base import CLIP_MEAN, CLIP_STD, COMMON_KEYS, NORMALIZE_DEFAULTS
from .geometry import QWEN_VIDEO_MAX_PIXELS, QWEN_VIDEO_MIN_PIXELS

# Where a model directory keeps the keys, in the order vLLM's loader reads: transformers 5 saves one
# processor_config.json nesting "image_processor"; older checkpoints have a flat preprocessor_config.json.
CONFIG_FILES = ("processor_config.json", "preprocessor_config.json")
NORMALIZE_KEYS = ("do_rescale", "rescale_factor", "do_normalize", "image_mean", "image_std")
# PIL.Image.Resampling's values, as configs store them; the kernels implement three of them.
RESAMPLE_CODES = {1: "lanczos", 2: "bilinear", 3: "bicubic"}
_UNIMPLEMENTED_RESAMPLE = {0: "nearest", 4: "box", 5: "hamming"}

# What a config that leaves a key out (or sets it to null) means, per kind: its family's class defaults; any
# other processor type has BaseImageProcessor's rescale and the standard mean/std most classes default to
# (only FusedInputNorm reads those; FusedImageProcessor refuses a type it does not implement).
DEFAULTS = {None: NORMALIZE_DEFAULTS, **{kind: family.DEFAULTS for kind, family in families.FAMILIES.items()}}
TYPES = families.TYPES
PROCESSOR_CLASSES = families.PROCESSOR_CLASSES


@dataclasses.dataclass(frozen=True)
class Normalization:
    """The affine a config asks for, before folding: y = (x * rescale_factor - mean) / std."""

    image_mean: object  # a number or one per channel, as the config gives them
    image_std: object
    rescale_factor: float  # 1.0 without do_rescale
    channel: int  # the length of image_mean (else image_std, else 3)


@dataclasses.dataclass(frozen=True)
class ProcessorSettings:
    """A config resolved against its processor's defaults: what the processor will do, key by key."""

    kind: str  # a key of families.FAMILIES
    do_resize: bool
    size: dict  # as the family reads it: Qwen's {"shortest_edge", "longest_edge"} are min/max pixels
    resample: str
    do_convert_rgb: bool
    normalization: Normalization
    do_center_crop: bool = False
    crop_size: tuple[int, int] | None = None
    patch_size: int | None = None
    temporal_patch_size: int | None = None
    merge_size: int | None = None
    options: Mapping = dataclasses.field(default_factory=dict)  # the family's own keys, as it checked them


def read(config: Mapping | str | os.PathLike, where: str) -> Mapping:
    """The image processor's keys from a dict, a JSON file or a model directory. A processor config that nests
    them under "image_processor" (transformers 5) is unwrapped, as vLLM's loader does."""
    if not isinstance(config, Mapping):
        _check_path(config, where)
        if os.path.isdir(config):
            found = [os.path.join(config, name) for name in CONFIG_FILES if os.path.isfile(os.path.join(config, name))]
            if not found:
                raise FileNotFoundError(f"{where}: directory {os.fspath(config)!r} has no {' or '.join(CONFIG_FILES)}")
            candidates = [read(path, where) for path in found]
            # A processor_config.json may describe only the tokenizer's side; then the flat file holds the keys.
            return next((c for c in candidates if any(k in c for k in NORMALIZE_KEYS)), candidates[-1])
        with open(config, encoding="utf-8") as f:
            config = _mapping(json.load(f), f"{where}: {os.fspath(config)!r}")
    nested = config.get("image_processor")
    return nested if isinstance(nested, Mapping) else config


def _check_path(config: object, where: str) -> None:
    if not isinstance(config, str | os.PathLike):
        raise TypeError(
            f"{where}: config must be a mapping (a dict of the processor's keys), a JSON file's path or a model "
            f"directory, got {type(config).__name__}"
        )


def _mapping(value: object, what: str) -> Mapping:
    """A JSON file's content, which must be an object of keys (not a list, null or a bare value)."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must hold a JSON object (the processor's keys), got {type(value).__name__}")
    return value


def kind_of(config: Mapping) -> str | None:
    """The family's kind from image_processor_type (or an older checkpoint's feature_extractor_type,
    as AutoImageProcessor maps it, or processor_class); None for any other processor."""
    name = config.get("image_processor_type")
    if name is None and isinstance(config.get("feature_extractor_type"), str):
        name = config["feature_extractor_type"].replace("FeatureExtractor", "ImageProcessor")
    if isinstance(name, str):
        return TYPES.get(name.removesuffix("Fast").removesuffix("Pil"))
    if name is None:
        return PROCESSOR_CLASSES.get(config.get("processor_class"))
    return None


def _getter(config: Mapping, kind: str | None, where: str, table: Mapping = DEFAULTS):
    defaults = table[kind]

    def get(key):
        value = config.get(key)
        value = defaults[key] if value is None else value
        if key.startswith("do_") and not isinstance(value, bool):
            raise ValueError(f"{where}: {key} must be true or false, got {value!r}")
        return value

    return get


def normalization(config: Mapping, where: str, kind: str | None = None, table: Mapping = DEFAULTS) -> Normalization:
    """The rescale and normalize of any image processor config, its class's defaults filling what it omits
    (a video processor's: its kind and VIDEO_DEFAULTS)."""
    get = _getter(config, kind_of(config) if table is DEFAULTS else kind, where, table)
    mean, std, factor = get("image_mean"), get("image_std"), get("rescale_factor")
    # Checked whether or not they are used: a string or a bool where a number belongs is a broken config
    # (float("0.5") or float(True) would otherwise quietly pass).
    if not is_number(factor):
        raise TypeError(f"{where}: rescale_factor must be a number (not a string or a bool), got {factor!r}")
    for key, value in (("image_mean", mean), ("image_std", std)):
        _check_numbers(where, key, value)
    sized = [v for v in (mean, std) if not is_number(v)]
    channel = len(sized[0]) if sized else 3
    rescale = float(factor) if get("do_rescale") else 1.0
    if not get("do_normalize"):
        mean, std = 0.0, 1.0
    return Normalization(mean, std, rescale, channel)


def _check_numbers(where: str, key: str, value: object) -> None:
    """A number or a list of numbers (a config's mean or std); bool and strings are not numbers here."""
    if is_number(value):
        return
    if not isinstance(value, list | tuple) or not value:
        raise TypeError(f"{where}: {key} must be a number or a non-empty list of numbers, got {value!r}")
    for i, v in enumerate(value):
        if not is_number(v):
            raise TypeError(f"{where}: {key}[{i}] must be a number (not a string or a bool), got {v!r}")


def resolve(config: Mapping, where: str) -> ProcessorSettings:
    """Everything a supported processor does with this config; an unsupported type or a contradiction refused."""
    config = _mapping(config, f"{where}: config")
    kind = kind_of(config)
    if kind is None:
        supported = ", ".join(f"{t}(Fast/Pil)" for t in TYPES)
        name = config.get("image_processor_type")
        got = (
            name if name is not None else f"no image_processor_type (processor_class {config.get('processor_class')!r})"
        )
        raise ValueError(f"{where}: unsupported image processor {got!r}; supported: {supported}")
    family = families.FAMILIES[kind]
    get = _getter(config, kind, where)
    if "do_pad" not in family.KEYS and config.get("do_pad"):
        raise ValueError(f"{where}: do_pad is not implemented for {kind} (its processor does not pad by default)")
    return ProcessorSettings(
        kind=kind,
        do_resize=get("do_resize"),
        resample=_resample(get("resample"), where),
        do_convert_rgb=get("do_convert_rgb"),
        normalization=normalization(config, where),
        **family.settings(config, get, where),
    )


def call_keys(kind: str) -> tuple[str, ...]:
    """The keys a call (or a config) of this kind's processor sets that FusedImageProcessor reads."""
    return COMMON_KEYS + families.FAMILIES[kind].KEYS


def _resample(value: object, where: str) -> str:
    code = getattr(value, "value", value)  # a PIL.Image.Resampling member
    if is_int(code) and code in RESAMPLE_CODES:
        return RESAMPLE_CODES[code]
    if isinstance(value, str) and value.lower() in RESAMPLE_CODES.values():
        return value.lower()
    supported = ", ".join(f"{c} ({n})" for c, n in RESAMPLE_CODES.items())
    known = f" ({_UNIMPLEMENTED_RESAMPLE[code]})" if code in _UNIMPLEMENTED_RESAMPLE else ""
    raise ValueError(f"{where}: resample {value!r}{known} is not implemented; supported: {supported}")


# ---- video processors ----------------------------------------------------------------------------------
# Where a model directory keeps a video processor's keys, in transformers' order: processor_config.json's
# nested "video_processor", else video_preprocessor_config.json, else the image processor's
# preprocessor_config.json (AutoVideoProcessor falls back to it).
VIDEO_CONFIG_FILES = ("video_preprocessor_config.json", "preprocessor_config.json")
VIDEO_TYPES = {
    "Qwen2VLVideoProcessor": "qwen2_vl",
    "Qwen3VLVideoProcessor": "qwen3_vl",
    # Qwen3-VL's code with the names changed, class defaults included (transformers 5.22 and 5.25)
    "CohereCompassVideoProcessor": "qwen3_vl",
    "Glm4vVideoProcessor": "glm4v",
    "SmolVLMVideoProcessor": "smolvlm",
    "LlavaOnevisionVideoProcessor": "llava_onevision",
    "InternVLVideoProcessor": "internvl",
    "LlavaNextVideoVideoProcessor": "llava_next_video",
    "Gemma4VideoProcessor": "gemma4",
    "Gemma4UnifiedVideoProcessor": "gemma4_unified",
}
# The video kinds whose _preprocess is BaseVideoProcessor's: each frame resized (and center-cropped) as CLIP's
# image processor does an image, rescaled and normalized; one [T, C, h, w] per video.
FRAMEWISE_VIDEO_KINDS = ("llava_onevision", "internvl", "llava_next_video")
# The video kinds whose every frame is an image of their image family (Gemma 4's: the budget resize, the
# channel-last patch rows padded to the budget), all frames of a call one batch, concatenated along frames.
BUDGET_VIDEO_KINDS = ("gemma4", "gemma4_unified")
VIDEO_PROCESSOR_CLASSES = {
    "Qwen2VLProcessor": "qwen2_vl",
    "Qwen2_5_VLProcessor": "qwen2_vl",
    "Qwen3VLProcessor": "qwen3_vl",
    "CohereCompassProcessor": "qwen3_vl",
    "Glm4vProcessor": "glm4v",
    "SmolVLMProcessor": "smolvlm",
    "LlavaOnevisionProcessor": "llava_onevision",
    "InternVLProcessor": "internvl",
    "LlavaNextVideoProcessor": "llava_next_video",
    "Gemma4Processor": "gemma4",
    "Gemma4UnifiedProcessor": "gemma4_unified",
}
_VIDEO_COMMON = {
    **NORMALIZE_DEFAULTS,
    "do_resize": True,
    "resample": 3,
    "do_convert_rgb": True,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "min_frames": 4,
    "max_frames": 768,
    "num_frames": None,
    "cap_pixels_per_frame": None,  # transformers: None means off (with a warning that the default will change)
}
# transformers 5's Qwen2VLVideoProcessor, Qwen3VLVideoProcessor and Glm4vVideoProcessor class attributes.
VIDEO_DEFAULTS = {
    "qwen2_vl": {
        **_VIDEO_COMMON,
        "size": {"shortest_edge": QWEN_VIDEO_MIN_PIXELS, "longest_edge": QWEN_VIDEO_MAX_PIXELS},
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
        "patch_size": 14,
        "do_sample_frames": False,
        "fps": None,
        "max_video_tokens": 128000,
    },
    "qwen3_vl": {
        **_VIDEO_COMMON,
        "size": {"shortest_edge": 128 * 32 * 32, "longest_edge": 32 * 32 * 768},
        "patch_size": 16,
        "do_sample_frames": True,
        "fps": 2,
        "max_video_tokens": 768,
    },
    "glm4v": {
        **_VIDEO_COMMON,  # its min_frames, max_frames, max_video_tokens: GLM-4V has none, and reads none
        "size": {"shortest_edge": 112 * 112, "longest_edge": 28 * 28 * 2 * 30000},
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
        "patch_size": 14,
        "do_sample_frames": True,
        "fps": 2,
        "num_frames": 16,  # read by no step of GLM-4V's: its sampling is by fps alone
        "max_duration": 300,
        "max_video_tokens": 128000,
    },
    # SmolVLMVideoProcessor (SmolVLM2): Idefics3's image defaults, no sampling, fps and num_frames unset.
    "smolvlm": {
        **{key: idefics3.DEFAULTS[key] for key in (*NORMALIZE_DEFAULTS, "do_resize", "resample", "do_convert_rgb")},
        "size": idefics3.DEFAULTS["size"],
        "max_image_size": idefics3.DEFAULTS["max_image_size"],
        "do_pad": True,
        "do_sample_frames": False,
        "fps": None,
        "num_frames": None,
    },
    # LlavaOnevisionVideoProcessor's class attributes (BaseVideoProcessor's where it sets none).
    "llava_onevision": {
        **NORMALIZE_DEFAULTS,
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
        "size": {"height": 384, "width": 384},
        "do_resize": True,
        "resample": 3,
        "do_convert_rgb": True,
        "do_center_crop": False,
        "crop_size": None,
        "default_to_square": False,
        "do_sample_frames": False,
        "fps": None,
        "num_frames": None,
    },
}
# InternVLVideoProcessor's: LLaVA-OneVision's but BaseVideoProcessor's default_to_square (an int size is a square).
VIDEO_DEFAULTS["internvl"] = {**VIDEO_DEFAULTS["llava_onevision"], "default_to_square": True}
# LlavaNextVideoVideoProcessor's: CLIP's resize and center crop.
VIDEO_DEFAULTS["llava_next_video"] = {
    **VIDEO_DEFAULTS["llava_onevision"],
    "size": {"shortest_edge": 224},
    "do_center_crop": True,
    "crop_size": {"height": 224, "width": 224},
}
# Gemma4VideoProcessor's class attributes (Gemma4UnifiedVideoProcessor's are the same): its image processor's
# geometry keys, a smaller budget, and normalize on (mean 0, std 1: transformers then divides by 255).
VIDEO_DEFAULTS["gemma4"] = {
    **gemma4.DEFAULTS,
    "do_normalize": True,
    "max_soft_tokens": 70,
    "do_sample_frames": True,
    "fps": None,
    "num_frames": 32,
}
VIDEO_DEFAULTS["gemma4_unified"] = VIDEO_DEFAULTS["gemma4"]


@dataclasses.dataclass(frozen=True)
class VideoSettings:
    """A video processor config resolved against its class's defaults: what the processor will do, key by key."""

    kind: str  # "qwen2_vl" (Qwen2-VL, Qwen2.5-VL), "qwen3_vl", "glm4v" (GLM-4.1V, GLM-4.5V) or "smolvlm"
    do_resize: bool
    size: dict  # {"shortest_edge", "longest_edge"}: min / max pixels (Qwen3-VL: of the whole clip); SmolVLM's: frames'
    resample: str
    do_convert_rgb: bool
    do_sample_frames: bool
    fps: float | None
    num_frames: int | None
    normalization: Normalization
    # The Qwen-VL and GLM-4V classes' patch rows and frame bounds (None for SmolVLM).
    patch_size: int | None = None
    temporal_patch_size: int | None = None
    merge_size: int | None = None
    min_frames: int | None = None
    max_frames: int | None = None
    cap_pixels_per_frame: bool = False
    max_video_tokens: int | None = None
    max_duration: int | None = None  # GLM-4V: the seconds its sampling spreads the frames over, at most
    # SmolVLM: each video's sampled frames are one sample of Idefics3 images, without splitting: these settings.
    frames: ProcessorSettings | None = None


def read_video(config: Mapping | str | os.PathLike, where: str) -> Mapping:
    """The video processor's keys from a dict, a JSON file or a model directory, found where transformers'
    AutoVideoProcessor finds them; a processor config nesting them under "video_processor" is unwrapped."""
    if not isinstance(config, Mapping):
        _check_path(config, where)
        if os.path.isdir(config):
            nested = os.path.join(config, "processor_config.json")
            if os.path.isfile(nested):
                with open(nested, encoding="utf-8") as f:
                    processor = _mapping(json.load(f), f"{where}: {nested!r}")
                if isinstance(processor.get("video_processor"), Mapping):
                    return processor["video_processor"]
            found = [os.path.join(config, n) for n in VIDEO_CONFIG_FILES if os.path.isfile(os.path.join(config, n))]
            if not found:
                raise FileNotFoundError(
                    f"{where}: directory {os.fspath(config)!r} has no {' or '.join(VIDEO_CONFIG_FILES)} (and no "
                    f"processor_config.json with a video_processor)"
                )
            config = found[0]
        with open(config, encoding="utf-8") as f:
            config = _mapping(json.load(f), f"{where}: {os.fspath(config)!r}")
    nested = config.get("video_processor")
    return nested if isinstance(nested, Mapping) else config


def video_kind_of(config: Mapping) -> str | None:
    """ "qwen2_vl", "qwen3_vl" or "glm4v" from video_processor_type (its Fast spelling too), else
    processor_class, else an image config's image_processor_type read as AutoVideoProcessor reads it
    (Qwen2VLImageProcessor: Qwen2VLVideoProcessor); None for anything else."""
    name = config.get("video_processor_type")
    if isinstance(name, str):
        return VIDEO_TYPES.get(name.removesuffix("Fast"))
    if name is None and config.get("processor_class") in VIDEO_PROCESSOR_CLASSES:
        return VIDEO_PROCESSOR_CLASSES[config["processor_class"]]
    image = config.get("image_processor_type")
    if name is None and isinstance(image, str):
        # AutoVideoProcessor's fallback: the image processor's class name with "Video" for "Image"
        inferred = image.removesuffix("Fast").removesuffix("Pil").replace("ImageProcessor", "VideoProcessor")
        return VIDEO_TYPES.get(inferred)
    return None


def resolve_video(config: Mapping, where: str) -> VideoSettings:
    """Everything a supported video processor does with this config; an unsupported type or a bad value
    refused, before any video is read."""
    config = _mapping(config, f"{where}: config")
    kind = video_kind_of(config)
    if kind is None:
        supported = ", ".join(f"{t}(Fast)" for t in VIDEO_TYPES)
        name = config.get("video_processor_type")
        got = (
            name if name is not None else f"no video_processor_type (processor_class {config.get('processor_class')!r})"
        )
        raise ValueError(f"{where}: unsupported video processor {got!r}; supported: {supported}")
    if kind == "smolvlm":
        return _resolve_smolvlm(config, where)
    if kind in FRAMEWISE_VIDEO_KINDS:
        return _resolve_framewise(config, kind, where)
    if kind in BUDGET_VIDEO_KINDS:
        return _resolve_budget(config, kind, where)
    get = _getter(config, kind, where, VIDEO_DEFAULTS)
    if config.get("do_pad"):
        raise ValueError(f"{where}: do_pad is not implemented (the Qwen-VL video processors do not pad)")
    patches = qwen2_vl.patch_sizes(where, get)
    frames = {k: positive_int(where, k, get(k)) for k in ("min_frames", "max_frames", "max_video_tokens")}
    fps, num_frames = _sampling(get, where)
    max_duration = positive_int(where, "max_duration", get("max_duration")) if kind == "glm4v" else None
    cap = get("cap_pixels_per_frame")
    if cap is not None and not isinstance(cap, bool):
        raise ValueError(f"{where}: cap_pixels_per_frame must be true, false or null, got {cap!r}")
    return VideoSettings(
        kind=kind,
        do_resize=get("do_resize"),
        size=qwen2_vl.pixel_bounds(
            config.get("size"), VIDEO_DEFAULTS[kind]["size"], config if kind == "qwen2_vl" else None, where
        ),
        resample=_resample(get("resample"), where),
        do_convert_rgb=get("do_convert_rgb"),
        do_sample_frames=get("do_sample_frames"),
        fps=fps,
        num_frames=num_frames,
        cap_pixels_per_frame=bool(cap),
        normalization=normalization(config, where, kind, VIDEO_DEFAULTS),
        max_duration=max_duration,
        **patches,
        **frames,
    )


def _sampling(get, where: str) -> tuple[float | None, int | None]:
    """A config's fps and num_frames, checked."""
    fps = get("fps")
    if fps is not None and (not isinstance(fps, int | float) or isinstance(fps, bool) or not fps > 0):
        raise ValueError(f"{where}: fps must be a number > 0 or None, got {fps!r}")
    num_frames = get("num_frames")
    if num_frames is not None:
        positive_int(where, "num_frames", num_frames)
    return fps, num_frames


def settle_video(config: Mapping, where: str) -> Mapping:
    """A config as its class's __init__ settles it, where that moves keys: SmolVLM's older "video_sampling"
    gives fps (its fps), num_frames (its max_frames) and size (its video_size, unless the config has a size),
    over the config's own fps and num_frames. Other configs as they are."""
    sampling = config.get("video_sampling")
    if video_kind_of(config) != "smolvlm" or sampling is None:
        return config
    keys = ("fps", "max_frames", "video_size")
    if not isinstance(sampling, Mapping) or any(key not in sampling for key in keys):
        raise ValueError(f"{where}: video_sampling must be a mapping with keys {', '.join(keys)}, got {sampling!r}")
    settled = {key: value for key, value in config.items() if key != "video_sampling"}
    settled |= {"fps": sampling["fps"], "num_frames": sampling["max_frames"]}
    if "size" not in config:
        settled["size"] = sampling["video_size"]
    return settled


def _resolve_framewise(config: Mapping, kind: str, where: str) -> VideoSettings:
    """LLaVA-OneVision's and InternVL's video processors (BaseVideoProcessor's _preprocess): every frame resized
    to size and center-cropped as CLIP's image processor does an image; their frames are planned as CLIP images
    (frames.kind "clip"). Their own frame sampling (InternVL's initial_shift) is not reproduced: the adapter
    has upstream sample, and a direct call with do_sample_frames is refused."""
    get = _getter(config, kind, where, VIDEO_DEFAULTS)
    size = get("size")
    if is_int(size):  # get_size_dict: a square, or a shortest edge where default_to_square is off
        size = {"height": size, "width": size} if get("default_to_square") else {"shortest_edge": size}
    if get("do_center_crop") and get("crop_size") is None:
        raise ValueError(f"{where}: do_center_crop needs a crop_size (the config gives none)")
    image = {key: get(key) for key in COMMON_KEYS}
    image |= {"image_processor_type": "CLIPImageProcessor", "size": size}
    image |= {"do_center_crop": get("do_center_crop"), "crop_size": get("crop_size")}
    return _frames_as_images(kind, image, get, where)


def _resolve_budget(config: Mapping, kind: str, where: str) -> VideoSettings:
    """Gemma 4's (and Gemma 4 Unified's) video processors: every frame resized to the budget, rescaled and
    patchified as their image processor does an image (frames.kind "gemma4" / "gemma4_unified"); the video
    class's own defaults (its budget, normalize on) filling what the config omits. Their sampling (num_frames
    or fps, uniform: BaseVideoProcessor's) is not reproduced: the adapter has upstream sample."""
    get = _getter(config, kind, where, VIDEO_DEFAULTS)
    image = {key: get(key) for key in (*COMMON_KEYS, *families.FAMILIES[kind].KEYS)}
    image["image_processor_type"] = families.FAMILIES[kind].TYPES[0]
    return _frames_as_images(kind, image, get, where)


def _resolve_smolvlm(config: Mapping, where: str) -> VideoSettings:
    """SmolVLMVideoProcessor: every frame resized to size (its longest edge at most 4096) and then to the square
    max_image_size, as Idefics3's image processor does an image without splitting; the videos padded to the most
    frames. Its frames are planned as Idefics3 images (frames.kind "idefics3")."""
    config = settle_video(config, where)
    get = _getter(config, "smolvlm", where, VIDEO_DEFAULTS)
    for key in ("do_resize", "do_pad"):  # off: frames of their own sizes, or a list of tensors
        if not get(key):
            raise ValueError(f"{where}: {key} off is not implemented for SmolVLMVideoProcessor")
    size = get("size")
    if isinstance(size, Mapping) and is_int(size.get("longest_edge")):
        # The video's size function bounds the longest edge to 4096 first, where the image's bounds its result;
        # with an edge of at most 4096 the image's gives the video's sizes (no side then exceeds 4096).
        size = {"longest_edge": min(size["longest_edge"], idefics3.MAX_IMAGE_SIZE)}
    image = {key: config.get(key) for key in (*COMMON_KEYS, "max_image_size")}
    image |= {"image_processor_type": "SmolVLMImageProcessor", "size": size, "do_image_splitting": False}
    return _frames_as_images("smolvlm", image, get, where)


def _frames_as_images(kind: str, image: Mapping, get, where: str) -> VideoSettings:
    """A video processor whose frames are planned as images of the image config `image` (None values left to
    its family's defaults); its own sampling keys read with `get`."""
    fps, num_frames = _sampling(get, where)
    frames = resolve({key: value for key, value in image.items() if value is not None}, where)
    return VideoSettings(
        kind=kind,
        do_resize=frames.do_resize,
        size=frames.size,
        resample=frames.resample,
        do_convert_rgb=frames.do_convert_rgb,
        do_sample_frames=get("do_sample_frames"),
        fps=fps,
        num_frames=num_frames,
        normalization=frames.normalization,
        frames=frames,
    )
