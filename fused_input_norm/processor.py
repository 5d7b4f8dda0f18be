"""FusedImageProcessor: a Hugging Face image processor's work on the device, from a preprocessor_config.json.

Decode (torchvision; nvJPEG on CUDA), RGB conversion, the exact resize, center crop, rescale, normalize and
the output layout, with transformers' outputs: `pixel_values` (+ `image_grid_thw` for Qwen-VL) equal to
its processors' given the same decoded pixels. The resize and everything after it is one kernel per
image (FusedInputNorm.patchify / FusedInputNorm.resize), writing into one output for the batch.
"""

import dataclasses
import importlib.util
import io
import os
import warnings
from collections.abc import Mapping
from typing import Any

import torch

from .module import FusedInputNorm, _check_visual_dtype, _image_processor_config
from .resize import REFERENCES, shortest_edge_size

_WHERE = "FusedImageProcessor"
# PIL.Image.Resampling's values, as configs store them; the kernels implement two of them.
_RESAMPLE_CODES = {2: "bilinear", 3: "bicubic"}
_RESAMPLE_NAMES = {0: "nearest", 1: "lanczos", 4: "box", 5: "hamming"}
_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
_COMMON = {
    "do_resize": True,
    "resample": 3,
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "do_convert_rgb": True,
    "do_center_crop": False,
    "crop_size": None,
}
# transformers 5's class defaults per processor (what a config that leaves a key out means).
_DEFAULTS = {
    "qwen2_vl": {
        **_COMMON,
        "size": {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280},
        "image_mean": _CLIP_MEAN,
        "image_std": _CLIP_STD,
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
    },
    "clip": {
        **_COMMON,
        "size": {"shortest_edge": 224},
        "do_center_crop": True,
        "crop_size": {"height": 224, "width": 224},
        "image_mean": _CLIP_MEAN,
        "image_std": _CLIP_STD,
    },
    "siglip": {**_COMMON, "size": {"height": 224, "width": 224}, "image_mean": [0.5] * 3, "image_std": [0.5] * 3},
}
# image_processor_type (its Fast and Pil spellings too) -> kind. Qwen2.5-VL and Qwen3-VL checkpoints configure
# Qwen2VLImageProcessor(Fast); processor_class is the fallback for configs that name only that.
_TYPES = {"Qwen2VLImageProcessor": "qwen2_vl", "CLIPImageProcessor": "clip", "SiglipImageProcessor": "siglip"}
_PROCESSOR_CLASSES = {
    "Qwen2VLProcessor": "qwen2_vl",
    "Qwen2_5_VLProcessor": "qwen2_vl",
    "Qwen3VLProcessor": "qwen2_vl",
    "CLIPProcessor": "clip",
    "SiglipProcessor": "siglip",
}
_JPEG_MAGIC = b"\xff\xd8\xff"


@dataclasses.dataclass(frozen=True)
class ProcessorSettings:
    """A config resolved against its processor's defaults: what the processor will do, key by key."""

    kind: str  # "qwen2_vl", "clip" or "siglip"
    do_resize: bool
    size: dict  # {"shortest_edge", "longest_edge"} (Qwen: min/max pixels), {"shortest_edge"} or {"height", "width"}
    resample: str
    do_center_crop: bool
    crop_size: tuple[int, int] | None
    do_convert_rgb: bool
    patch_size: int | None
    temporal_patch_size: int | None
    merge_size: int | None


class FusedImageProcessor:
    """A Hugging Face image processor (Qwen2-VL / Qwen2.5-VL / Qwen3-VL, CLIP, SigLIP) on the device.

    Build it with `from_preprocessor_config`; call it on images to get what the processor returns.
    """

    def __init__(self, settings: ProcessorSettings, norm: FusedInputNorm, device: torch.device, reference: str):
        self.settings = settings
        self.norm = norm
        self.device = device
        self.reference = reference

    @classmethod
    def from_preprocessor_config(
        cls,
        config: Mapping | str | os.PathLike,
        *,
        device: torch.device | str | None = None,
        reference: str = "pil",
    ) -> "FusedImageProcessor":
        """Reads a model's image processor config (a model directory, a JSON file or a dict; a directory is
        read as FusedInputNorm.from_preprocessor_config reads it, processor_config.json nesting included).

        `device`: where images are decoded and processed (default: CUDA if available, else the CPU).
        `reference`: whose resize to reproduce bit for bit: "pil" (transformers' *Pil processors; "pil-13",
        "pil-12.2", "pil-12.1" pin a Pillow release's pass order) or "torchvision" (the default processors of
        transformers 5, on CPU tensors).
        """
        if reference not in REFERENCES:
            raise ValueError(
                f"{_WHERE}: reference must be one of {', '.join(map(repr, REFERENCES))}, got {reference!r}"
            )
        raw = _image_processor_config(config)
        settings, constants = resolve_config(raw)
        device = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
        norm = FusedInputNorm.from_preprocessor_config(constants).to(device)
        return cls(settings, norm, device, reference)

    def __repr__(self) -> str:
        return (
            f"FusedImageProcessor({self.settings.kind}, device={str(self.device)!r}, reference={self.reference!r}, "
            f"{self.settings}, {self.norm.extra_repr()})"
        )

    def __call__(self, images: Any, visual_dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
        """Processes one image or a list of them.

        Each image is a PIL.Image (its pixels as they are: Pillow resamples nothing), a uint8 NumPy array or
        torch tensor ([H, W], or [C, H, W] / [H, W, C] inferred as transformers infers it; a 4-D array is a
        batch), or encoded bytes (JPEG, PNG, WebP; decoded upright, as transformers' load_image does, by
        torchvision, or by Pillow where torchvision is not installed).
        With do_convert_rgb, gray is repeated to 3 channels and RGBA is composited on white as transformers'
        convert_to_rgb does for that input: Pillow's integer alpha_composite for a PIL image; for arrays,
        tensors and decoded bytes, the Pil backend's rounding (reference "pil") or the torchvision backend's
        float32 blend (reference "torchvision").

        Returns Qwen-VL: {"pixel_values": [patches, C * T * P * P], "image_grid_thw": int64 [n, 3] on the CPU};
        CLIP / SigLIP: {"pixel_values": [n, C, h, w]}; pixel_values in `visual_dtype` on the processor's device.
        """
        _check_visual_dtype(_WHERE, visual_dtype)
        items = _as_list(images)
        pixels = self._load(items)
        if self.settings.kind == "qwen2_vl":
            return self._patches(pixels, visual_dtype)
        return self._images(pixels, visual_dtype)

    # ----- loading: every check before any kernel -----

    def _load(self, items: list) -> list[torch.Tensor]:
        """Each image as uint8 [C, H, W] on the device, RGB-converted; all checked first."""
        decoded = [None] * len(items)
        jpegs = []  # (index, bytes) decoded on the device in one nvJPEG call
        for i, item in enumerate(items):
            name = _name(i, len(items))
            if isinstance(item, bytes | bytearray | memoryview):
                data = bytes(item)
                orientation = _exif_orientation(data) if data.startswith(_JPEG_MAGIC) else None
                if self.device.type == "cuda" and orientation is not None and _has_torchvision():
                    jpegs.append((i, data, orientation))
                else:
                    decoded[i] = (_decode(data, name), "tensor")
            else:
                decoded[i] = _to_chw(item, name, self.settings.do_convert_rgb)
        if jpegs:
            on_device = _decode_jpegs([data for _, data, _ in jpegs], self.device)
            for (i, data, orientation), image in zip(jpegs, on_device or [None] * len(jpegs), strict=True):
                # nvJPEG's batch decode ignores the EXIF orientation: applied here, on the device. Where it refused
                # the batch (a corrupt JPEG, a format it lacks, a build without it), the CPU decoder takes each
                # and names the one at fault.
                image = _orient(image, orientation) if image is not None else _decode(data, _name(i, len(items)))
                decoded[i] = (image, "tensor")
        checked = []
        for i, (image, source) in enumerate(decoded):
            name = _name(i, len(items))
            channels, height, width = image.shape
            if height < 1 or width < 1:
                raise ValueError(f"{_WHERE}: {name} is empty (shape {tuple(image.shape)})")
            allowed = (1, 2, 3, 4) if self.settings.do_convert_rgb else (self.norm.channel,)
            if channels not in allowed:
                what = "1 (gray), 3 (RGB) or 4 (RGBA)" if self.settings.do_convert_rgb else str(self.norm.channel)
                raise ValueError(
                    f"{_WHERE}: {name} has {channels} channels (shape {tuple(image.shape)}), expected {what}"
                    + ("" if self.settings.do_convert_rgb else " (do_convert_rgb is off)")
                )
            checked.append((image, source))
        self._check_geometry([img.shape[-2:] for img, _ in checked], len(items))
        pixels = []
        for image, source in checked:
            # Non-blocking only host to GPU (stream-ordered before the kernels); a copy to the host must land
            # before the CPU kernels read it.
            image = image.to(self.device, non_blocking=image.device.type == "cpu")
            pixels.append(_to_rgb(image, source, self.reference) if self.settings.do_convert_rgb else image)
        return pixels

    def _check_geometry(self, sizes: list, count: int) -> None:
        """What the processor would refuse or pad, refused here before any work: images too elongated for
        smart_resize, and (without a resize) sizes that do not patchify or crop."""
        s = self.settings
        for i, (height, width) in enumerate(sizes):
            name = _name(i, count)
            if s.kind == "qwen2_vl":
                factor = s.patch_size * s.merge_size
                if s.do_resize and max(height, width) / min(height, width) > 200:
                    raise ValueError(
                        f"{_WHERE}: {name} of size {height}x{width} has an aspect ratio over 200, which Qwen-VL's "
                        f"smart_resize refuses"
                    )
                if not s.do_resize and (height % factor or width % factor):
                    raise ValueError(
                        f"{_WHERE}: {name} is {height}x{width}; without do_resize, H and W must be multiples of "
                        f"patch_size * merge_size = {factor}"
                    )
            elif s.do_center_crop and not s.do_resize:
                crop_h, crop_w = s.crop_size
                if crop_h > height or crop_w > width:
                    raise ValueError(
                        f"{_WHERE}: {name} is {height}x{width}, smaller than crop_size {crop_h}x{crop_w} (do_resize is off)"
                    )
        if s.kind != "qwen2_vl":
            shapes = [self._resize_and_crop(h, w)[1][2:] for h, w in sizes]
            if len(set(shapes)) > 1:
                listed = ", ".join(f"{_name(i, count)}: {h}x{w}" for i, (h, w) in enumerate(shapes))
                raise ValueError(
                    f"{_WHERE}: the images come out in different sizes ({listed}), which do not stack into one "
                    f"pixel_values; give a config with do_center_crop or a fixed size"
                )

    # ----- the two output layouts -----

    def _patches(self, pixels: list[torch.Tensor], visual_dtype: torch.dtype) -> dict[str, torch.Tensor]:
        s = self.settings
        geometry = {
            "patch_size": s.patch_size,
            "temporal_patch_size": s.temporal_patch_size,
            "merge_size": s.merge_size,
        }
        if s.do_resize:
            bounds = {"min_pixels": s.size["shortest_edge"], "max_pixels": s.size["longest_edge"]}
            extra = {"resample": s.resample, "reference": self.reference}
        else:
            bounds, extra = {}, {}
        pixel_values, grid_thw = self.norm.patchify(pixels, visual_dtype, **geometry, **bounds, **extra)
        return {"pixel_values": pixel_values, "image_grid_thw": grid_thw}

    def _images(self, pixels: list[torch.Tensor], visual_dtype: torch.dtype) -> dict[str, torch.Tensor]:
        boxes = [self._resize_and_crop(*image.shape[-2:]) for image in pixels]  # one crop size: _check_geometry
        height, width = boxes[0][1][2:]
        out = torch.empty(len(pixels), self.norm.channel, height, width, dtype=visual_dtype, device=self.device)
        for image, (size, crop), image_out in zip(pixels, boxes, out, strict=True):
            self.norm.resize(
                image,
                visual_dtype,
                size,
                resample=self.settings.resample,
                reference=self.reference,
                crop=crop,
                out=image_out,
            )
        return {"pixel_values": out}

    def _resize_and_crop(self, height: int, width: int) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
        """The resized size and the crop box in it, as transformers computes them."""
        s = self.settings
        if not s.do_resize:
            size = (height, width)
        elif "shortest_edge" in s.size:
            size = shortest_edge_size(height, width, s.size["shortest_edge"])
        else:
            size = (s.size["height"], s.size["width"])
        if not s.do_center_crop:
            return size, (0, 0, *size)
        crop_h, crop_w = s.crop_size
        # transformers' center_crop: top = int((H - crop) / 2.0), i.e. floor for a crop that fits.
        return size, ((size[0] - crop_h) // 2, (size[1] - crop_w) // 2, crop_h, crop_w)


def resolve_config(config: Mapping) -> tuple[ProcessorSettings, dict]:
    """The processor's settings and FusedInputNorm's constants from a config, transformers' defaults filling
    what it leaves out; contradictions refused."""
    kind = _kind(config)
    defaults = _DEFAULTS[kind]

    def get(key):
        value = config.get(key)
        return defaults[key] if value is None else value

    resample = _resample(get("resample"))
    size = _size(kind, config)
    for key in ("do_resize", "do_center_crop", "do_convert_rgb", "do_rescale", "do_normalize"):
        if not isinstance(get(key), bool):
            raise ValueError(f"{_WHERE}: {key} must be true or false, got {get(key)!r}")
    crop = None
    if config.get("do_pad"):
        raise ValueError(f"{_WHERE}: do_pad is not implemented (the supported processors do not pad by default)")
    do_center_crop = get("do_center_crop")
    if do_center_crop:
        crop = _crop_size(get("crop_size"))
        fits = (
            max(crop) <= size["shortest_edge"]
            if "shortest_edge" in size
            else crop[0] <= size["height"] and crop[1] <= size["width"]
        )
        if get("do_resize") and not fits:
            raise ValueError(
                f"{_WHERE}: crop_size {crop[0]}x{crop[1]} is larger than the resize gives (size {size}): the config "
                f"contradicts itself"
            )
    patches = {}
    if kind == "qwen2_vl":
        for key in ("patch_size", "temporal_patch_size", "merge_size"):
            patches[key] = _positive_int(key, get(key))
    settings = ProcessorSettings(
        kind=kind,
        do_resize=get("do_resize"),
        size=size,
        resample=resample,
        do_center_crop=do_center_crop,
        crop_size=crop,
        do_convert_rgb=get("do_convert_rgb"),
        patch_size=patches.get("patch_size"),
        temporal_patch_size=patches.get("temporal_patch_size"),
        merge_size=patches.get("merge_size"),
    )
    constants = {k: get(k) for k in ("do_rescale", "rescale_factor", "do_normalize", "image_mean", "image_std")}
    return settings, constants


def _kind(config: Mapping) -> str:
    name = config.get("image_processor_type")
    if name is None and isinstance(config.get("feature_extractor_type"), str):
        # Older checkpoints (openai/clip-vit-*) name only their feature extractor, as AutoImageProcessor maps it.
        name = config["feature_extractor_type"].replace("FeatureExtractor", "ImageProcessor")
    if isinstance(name, str):
        base = name.removesuffix("Fast").removesuffix("Pil")
        if base in _TYPES:
            return _TYPES[base]
    elif name is None and config.get("processor_class") in _PROCESSOR_CLASSES:
        return _PROCESSOR_CLASSES[config["processor_class"]]
    supported = ", ".join(f"{t}(Fast/Pil)" for t in _TYPES)
    got = name if name is not None else f"no image_processor_type (processor_class {config.get('processor_class')!r})"
    raise ValueError(f"{_WHERE}: unsupported image processor {got!r}; supported: {supported}")


def _resample(value: object) -> str:
    code = getattr(value, "value", value)  # a PIL.Image.Resampling member
    if isinstance(code, int) and not isinstance(code, bool) and code in _RESAMPLE_CODES:
        return _RESAMPLE_CODES[code]
    if isinstance(value, str) and value.lower() in _RESAMPLE_CODES.values():
        return value.lower()
    supported = ", ".join(f"{c} ({n})" for c, n in _RESAMPLE_CODES.items())
    known = f" ({_RESAMPLE_NAMES[code]})" if code in _RESAMPLE_NAMES else ""
    raise ValueError(f"{_WHERE}: resample {value!r}{known} is not implemented; supported: {supported}")


def _positive_int(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{_WHERE}: {name} must be an int >= 1, got {value!r}")
    return value


def _size(kind: str, config: Mapping) -> dict:
    size = config.get("size")
    if kind == "qwen2_vl":
        # transformers' Qwen2VLImageProcessor.__init__: min_pixels / max_pixels override size's edges.
        if size is not None and not isinstance(size, Mapping):
            raise ValueError(f"{_WHERE}: a Qwen-VL size needs shortest_edge and longest_edge, got {size!r}")
        size = dict(_DEFAULTS[kind]["size"] if size is None else size)
        for key, edge in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge")):
            if config.get(key) is not None:
                size[edge] = config[key]
        if set(size) - {"min_pixels", "max_pixels"} != {"shortest_edge", "longest_edge"}:
            raise ValueError(f"{_WHERE}: a Qwen-VL size needs shortest_edge and longest_edge, got {size}")
        low = _positive_int("size['shortest_edge'] (min_pixels)", size["shortest_edge"])
        high = _positive_int("size['longest_edge'] (max_pixels)", size["longest_edge"])
        if low > high:
            raise ValueError(f"{_WHERE}: min_pixels ({low}) > max_pixels ({high}): the config contradicts itself")
        return {"shortest_edge": low, "longest_edge": high}
    if size is None:
        return dict(_DEFAULTS[kind]["size"])
    if isinstance(size, int) and not isinstance(size, bool):
        # transformers 5 reads a bare int as the shortest edge (default_to_square is False for both).
        size = {"shortest_edge": size}
    elif isinstance(size, list | tuple) and len(size) == 2:  # get_size_dict: (height, width)
        size = {"height": size[0], "width": size[1]}
    if isinstance(size, Mapping) and set(size) == {"shortest_edge"}:
        return {"shortest_edge": _positive_int("size['shortest_edge']", size["shortest_edge"])}
    if isinstance(size, Mapping) and set(size) == {"height", "width"}:
        return {k: _positive_int(f"size[{k!r}]", size[k]) for k in ("height", "width")}
    raise ValueError(f"{_WHERE}: size must be {{'shortest_edge'}} or {{'height', 'width'}}, got {size!r}")


def _crop_size(value: object) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = {"height": value, "width": value}
    elif isinstance(value, list | tuple) and len(value) == 2:
        value = {"height": value[0], "width": value[1]}
    if not isinstance(value, Mapping) or set(value) != {"height", "width"}:
        raise ValueError(f"{_WHERE}: crop_size must be an int or {{'height', 'width'}}, got {value!r}")
    return tuple(_positive_int(f"crop_size[{k!r}]", value[k]) for k in ("height", "width"))


# ----- images in: every accepted form to uint8 [C, H, W] -----


def _name(i: int, count: int) -> str:
    return f"images[{i}]" if count > 1 else "images"


def _as_list(images: Any) -> list:
    """A flat list of images, as transformers' make_flat_list_of_images makes one: a list, a list of lists or
    of 4-D batches, or a 4-D batch."""
    if getattr(images, "ndim", None) == 4:  # a batch [B, ...] as transformers takes it
        images = list(images)
    elif isinstance(images, list | tuple):
        images = [
            image
            for item in images
            for image in (item if isinstance(item, list | tuple) or getattr(item, "ndim", None) == 4 else [item])
        ]
    else:
        images = [images]
    if not images:
        raise ValueError(f"{_WHERE}: images holds no image")
    return images


def _to_chw(item: Any, name: str, convert_rgb: bool = True) -> tuple[torch.Tensor, str]:
    """A PIL image, array or tensor as uint8 [C, H, W] (a view where possible) and how it composites alpha."""
    if _is_pil(item):
        return _pil_to_chw(item, convert_rgb), "pil"
    if type(item).__module__ == "numpy" and hasattr(item, "dtype"):
        import numpy as np

        if item.dtype != np.uint8:
            raise TypeError(f"{_WHERE}: {name} must be uint8 pixels, got a NumPy array of {item.dtype}")
        item = _from_numpy(np.ascontiguousarray(item) if item.strides and min(item.strides) < 0 else item)
    elif not isinstance(item, torch.Tensor):
        raise TypeError(
            f"{_WHERE}: {name} is a {type(item).__name__}; expected a PIL.Image, a uint8 NumPy array or tensor, "
            f"or encoded image bytes"
        )
    if item.dtype != torch.uint8:
        raise TypeError(f"{_WHERE}: {name} must be uint8 pixels, got a tensor of {item.dtype}")
    if item.dim() == 2:
        return item.unsqueeze(0), "tensor"
    if item.dim() != 3:
        raise ValueError(f"{_WHERE}: {name} must be [H, W], [C, H, W] or [H, W, C], got shape {tuple(item.shape)}")
    # transformers' infer_channel_dimension_format with 1, 3 or 4 channels: first axis if it fits, else last.
    if item.shape[0] in (1, 3, 4):
        return item, "tensor"
    if item.shape[-1] in (1, 3, 4):
        return item.permute(2, 0, 1), "tensor"
    raise ValueError(
        f"{_WHERE}: {name} of shape {tuple(item.shape)} has no channel axis of 1, 3 or 4 first or last "
        f"(expected [C, H, W] or [H, W, C])"
    )


def _is_pil(item: Any) -> bool:
    try:
        from PIL import Image
    except ImportError:
        return False
    return isinstance(item, Image.Image)


def _pil_to_chw(image, convert_rgb: bool = True) -> torch.Tensor:
    """A PIL image's pixels: L, RGB and RGBA as stored; other modes through Pillow's own conversion to RGB or
    RGBA (a colour conversion, no resampling), as transformers' convert_to_rgb does first (without
    do_convert_rgb, transformers takes np.array(image) as it is)."""
    import numpy as np

    has_alpha = "A" in image.getbands() or image.info.get("transparency") is not None
    if convert_rgb and (image.mode not in ("L", "RGB", "RGBA") or (has_alpha and image.mode != "RGBA")):
        image = image.convert("RGBA" if has_alpha else "RGB")
    array = np.asarray(image)  # a fresh copy, which Pillow marks read-only
    return _from_numpy(array if array.ndim == 3 else array[:, :, None]).permute(2, 0, 1)


def _from_numpy(array) -> torch.Tensor:
    """torch.from_numpy without the warning for a read-only array (np.asarray of a PIL image is one): nothing
    here writes to the input."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
        return torch.from_numpy(array)


def _has_torchvision() -> bool:
    return importlib.util.find_spec("torchvision") is not None


def _decode(data: bytes, name: str) -> torch.Tensor:
    if not _has_torchvision():
        return _decode_with_pillow(data, name)
    from torchvision.io import ImageReadMode, decode_image

    encoded = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    try:
        with warnings.catch_warnings():  # torchvision 0.29 deprecates its decoders for TorchCodec's
            warnings.simplefilter("ignore", DeprecationWarning)
            image = decode_image(encoded, mode=ImageReadMode.UNCHANGED, apply_exif_orientation=True)
    except RuntimeError as error:
        raise ValueError(
            f"{_WHERE}: {name} ({len(data)} bytes) is not an image torchvision can decode "
            f"(JPEG, PNG, WebP, GIF): {str(error).splitlines()[-1]}"
        ) from None
    if image.dim() != 3:
        raise ValueError(f"{_WHERE}: {name} decodes to {tuple(image.shape)}: animated images are not supported")
    if image.dtype != torch.uint8:
        raise TypeError(f"{_WHERE}: {name} decodes to {image.dtype} pixels (a 16-bit image); expected 8-bit")
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":  # torchvision orients JPEG and PNG only
        image = _orient(image, _exif_orientation(data) or 1)
    return image


def _decode_with_pillow(data: bytes, name: str) -> torch.Tensor:
    """Where torchvision is not installed (PyPI's CPU-only torch has no torchvision beside it): Pillow decodes,
    upright (EXIF orientation applied) as torchvision's decode_image(apply_exif_orientation=True) does."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
        if getattr(image, "n_frames", 1) > 1:
            raise ValueError(f"{_WHERE}: {name} has {image.n_frames} frames: animated images are not supported")
        image = ImageOps.exif_transpose(image)
        image.load()
    except (UnidentifiedImageError, OSError) as error:
        raise ValueError(f"{_WHERE}: {name} ({len(data)} bytes) is not an image Pillow can decode: {error}") from None
    if image.mode.startswith(("I", "F")):  # as torchvision's decoder gives uint16 for these: refused alike
        raise TypeError(f"{_WHERE}: {name} decodes to {image.mode} pixels (a 16-bit image); expected 8-bit")
    return _pil_to_chw(image)


def _exif_orientation(data: bytes) -> int | None:
    """The EXIF orientation tag (1-8; 1 when absent), read from the header only; None where Pillow is missing
    or cannot read the header (the image then goes to a decoder that applies it, or names the fault)."""
    try:
        from PIL import Image
    except ImportError:
        return None
    try:
        orientation = Image.open(io.BytesIO(data)).getexif().get(0x0112, 1)
    except Exception:
        return None
    return orientation if orientation in _ORIENT else 1  # out-of-range tags are ignored, as exif_transpose does


# EXIF orientation -> the view that makes a [C, H, W] image upright (PIL.ImageOps.exif_transpose's methods).
_ORIENT = {
    1: lambda x: x,
    2: lambda x: x.flip(-1),  # FLIP_LEFT_RIGHT
    3: lambda x: x.flip(-2, -1),  # ROTATE_180
    4: lambda x: x.flip(-2),  # FLIP_TOP_BOTTOM
    5: lambda x: x.transpose(-2, -1),  # TRANSPOSE
    6: lambda x: x.rot90(-1, (-2, -1)),  # ROTATE_270 (counterclockwise)
    7: lambda x: x.transpose(-2, -1).flip(-2, -1),  # TRANSVERSE
    8: lambda x: x.rot90(1, (-2, -1)),  # ROTATE_90
}


def _orient(image: torch.Tensor, orientation: int) -> torch.Tensor:
    return _ORIENT[orientation](image)


def _decode_jpegs(datas: list[bytes], device: torch.device) -> list[torch.Tensor] | None:
    """JPEGs decoded on the GPU, all in one nvJPEG call: only the encoded bytes cross PCIe. None where nvJPEG
    refuses them."""
    from torchvision.io import ImageReadMode, decode_jpeg

    encoded = [torch.frombuffer(bytearray(d), dtype=torch.uint8) for d in datas]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return decode_jpeg(encoded, mode=ImageReadMode.UNCHANGED, device=device)
        except RuntimeError:
            return None


def _to_rgb(image: torch.Tensor, source: str, reference: str) -> torch.Tensor:
    """transformers' convert_to_rgb on the device: gray repeated (a stride-0 view), alpha composited on white."""
    channels = image.shape[0]
    if channels == 1:
        return image.expand(3, -1, -1)
    if channels == 2:  # gray + alpha, from a decoded PNG
        image = torch.cat([image[:1].expand(3, -1, -1), image[1:]])
    if image.shape[0] == 3:
        return image
    color, alpha = image[:3], image[3:]
    if source == "pil":
        # Pillow's alpha_composite onto opaque white, in its integer arithmetic: with a background alpha of 255,
        # its coefficients are a * 128 and (255 - a) * 128 (7 fraction bits), and it divides by 255 with
        # the shift trick, rounding.
        a = alpha.to(torch.int32)
        mixed = color.to(torch.int32) * (a * 128) + 255 * ((255 - a) * 128) + (0x80 << 7)
        return ((((mixed >> 8) + mixed) >> 8) >> 7).to(torch.uint8)
    if reference == "torchvision":
        # The torchvision backend: to float32 in [0, 1] (x * (1/255)), blend, back with tvF.to_dtype's scaling.
        c, a = color.to(torch.float32).mul_(1.0 / 255), alpha.to(torch.float32).mul_(1.0 / 255)
        return (c * a + (1 - a)).mul(255 + 1.0 - 1e-3).to(torch.uint8)
    # The Pil backend on an array: float64 alpha, blend on 255, round half to even.
    a = alpha.to(torch.float64) / 255
    return torch.round(a * color.to(torch.float64) + (1 - a) * 255).to(torch.uint8)
