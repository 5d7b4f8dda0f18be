"""Image intake: every form a user hands a processor, as uint8 [C, H, W] pixels on the device.

PIL images (pixels as stored), uint8 NumPy arrays and tensors (CHW/HWC inferred as transformers infers
it), nested lists and 4-D batches flattened as transformers flattens them, and encoded bytes. Then
transformers' convert_to_rgb, on the device, as it does for each input type.

Encoded bytes `b` mean `ImageOps.exif_transpose(Image.open(io.BytesIO(b)))`, the PIL image transformers'
and vLLM's loaders start from, whatever the format and mode: Pillow decodes them, except where
torchvision's CPU decoder gives the same pixels faster (8-bit JPEG in RGB or L: the same libjpeg-turbo). nvJPEG is a different decoder
(its chroma upsampling differs: 10.3% of a 12 MP photo's values, up to 14 levels, on an H200): it serves
only when asked for (decoder="nvjpeg").
"""

import ctypes
import importlib.util
import io
import warnings
from typing import Any

import torch

from .checks import image_name

_JPEG_MAGIC = b"\xff\xd8\xff"


def as_list(images: Any, where: str) -> list:
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
        raise ValueError(f"{where}: images holds no image")
    return images


DECODERS = ("exact", "nvjpeg")


def decode_all(
    items: list, device: torch.device, convert_rgb: bool, channel: int, where: str, decoder: str = "exact"
) -> list[tuple[torch.Tensor, str]]:
    """Each item as (uint8 [C, H, W], its alpha source: "pil" or "tensor"), not yet on the device (nvJPEG's
    already are). Bytes are decoded as Pillow opens them, upright (or by nvJPEG for decoder="nvjpeg" on
    CUDA); the channel count is checked (1-4 to be converted to RGB, else `channel`), naming the item."""
    decoded = [None] * len(items)
    jpegs = []  # (index, bytes, orientation): decoded on the device in one nvJPEG call
    for i, item in enumerate(items):
        name = image_name(i, len(items))
        if isinstance(item, bytes | bytearray | memoryview):
            data = bytes(item)
            if decoder == "nvjpeg" and device.type == "cuda" and data.startswith(_JPEG_MAGIC) and has_torchvision():
                jpegs.append((i, data, exif_orientation(data) or 1))
            else:
                decoded[i] = decode(data, name, where, convert_rgb)
        else:
            decoded[i] = _to_chw(item, name, convert_rgb, where)
    if jpegs:
        on_device = _decode_jpegs([data for _, data, _ in jpegs], device)
        for (i, data, orientation), image in zip(jpegs, on_device or [None] * len(jpegs), strict=True):
            # nvJPEG's batch decode ignores the EXIF orientation: applied here, on the device. Where it refused the
            # batch (a corrupt JPEG, a format it lacks, a build without it), the CPU decoder takes each and names
            # the one at fault.
            if image is None:
                decoded[i] = decode(data, image_name(i, len(items)), where, convert_rgb)
            else:
                decoded[i] = (orient(image, orientation), "pil")
    for i, (image, _) in enumerate(decoded):
        name = image_name(i, len(items))
        channels, height, width = image.shape
        if height < 1 or width < 1:
            raise ValueError(f"{where}: {name} is empty (shape {tuple(image.shape)})")
        allowed = (1, 2, 3, 4) if convert_rgb else (channel,)
        if channels not in allowed:
            what = "1 (gray), 3 (RGB) or 4 (RGBA)" if convert_rgb else str(channel)
            raise ValueError(
                f"{where}: {name} has {channels} channels (shape {tuple(image.shape)}), expected {what}"
                + ("" if convert_rgb else " (do_convert_rgb is off)")
            )
    return decoded


def to_device_rgb(
    image: torch.Tensor, source: str, device: torch.device, convert_rgb: bool, reference: str
) -> torch.Tensor:
    """The image on `device`, RGB-converted there when `convert_rgb`."""
    # Non-blocking only host to GPU (stream-ordered before the kernels); a copy to the host must land before
    # the CPU kernels read it.
    if source == "pil" and image.device != device and image.stride(0) == 1 and image.stride(2) > image.shape[0]:
        # Pillow's memory read in place (RGB as RGBX): its dense [H, W, 4] block crosses in one copy, where a
        # copy of the padded view would first gather it into a contiguous one on the host.
        step = image.stride(2)
        dense = image.as_strided((image.shape[1], image.shape[2], step), (image.stride(1), step, 1))
        image = dense.to(device, non_blocking=True)[:, :, : image.shape[0]].permute(2, 0, 1)
    else:
        image = image.to(device, non_blocking=image.device.type == "cpu")
    return to_rgb(image, source, reference) if convert_rgb else image


def _to_chw(item: Any, name: str, convert_rgb: bool, where: str) -> tuple[torch.Tensor, str]:
    """A PIL image, array or tensor as uint8 [C, H, W] (a view where possible) and how it composites alpha."""
    if _is_pil(item):
        return pil_to_chw(item, convert_rgb), "pil"
    if type(item).__module__ == "numpy" and hasattr(item, "dtype"):
        import numpy as np

        if item.dtype != np.uint8:
            raise TypeError(f"{where}: {name} must be uint8 pixels, got a NumPy array of {item.dtype}")
        item = _from_numpy(np.ascontiguousarray(item) if item.strides and min(item.strides) < 0 else item)
    elif not isinstance(item, torch.Tensor):
        raise TypeError(
            f"{where}: {name} is a {type(item).__name__}; expected a PIL.Image, a uint8 NumPy array or tensor, "
            f"or encoded image bytes"
        )
    if item.dtype != torch.uint8:
        raise TypeError(f"{where}: {name} must be uint8 pixels, got a tensor of {item.dtype}")
    if item.dim() == 2:
        return item.unsqueeze(0), "tensor"
    if item.dim() != 3:
        raise ValueError(f"{where}: {name} must be [H, W], [C, H, W] or [H, W, C], got shape {tuple(item.shape)}")
    # transformers' infer_channel_dimension_format with 1, 3 or 4 channels: first axis if it fits, else last.
    if item.shape[0] in (1, 3, 4):
        return item, "tensor"
    if item.shape[-1] in (1, 3, 4):
        return item.permute(2, 0, 1), "tensor"
    raise ValueError(
        f"{where}: {name} of shape {tuple(item.shape)} has no channel axis of 1, 3 or 4 first or last "
        f"(expected [C, H, W] or [H, W, C])"
    )


def _is_pil(item: Any) -> bool:
    try:
        from PIL import Image
    except ImportError:
        return False
    return isinstance(item, Image.Image)


def pil_to_chw(image, convert_rgb: bool = True) -> torch.Tensor:
    """A PIL image's pixels: L, RGB and RGBA as stored; other modes through Pillow's own conversion to RGB or
    RGBA (a colour conversion, no resampling), as transformers' convert_to_rgb does first (without
    do_convert_rgb, transformers takes np.array(image) as it is)."""
    try:
        import numpy as np
    except ImportError:
        raise ImportError("reading a PIL image's pixels needs numpy (pip install numpy)") from None

    has_alpha = "A" in image.getbands() or image.info.get("transparency") is not None
    if convert_rgb and (image.mode not in ("L", "RGB", "RGBA") or (has_alpha and image.mode != "RGBA")):
        image = image.convert("RGBA" if has_alpha else "RGB")
    shared = _pil_memory(image)
    if shared is not None:
        return shared.permute(2, 0, 1)
    array = np.asarray(image)  # a fresh copy, which Pillow marks read-only
    return _from_numpy(array if array.ndim == 3 else array[:, :, None]).permute(2, 0, 1)


# ----- a PIL image's pixels without a copy -----
# np.asarray(image) goes through Pillow's encoder in 64 KiB chunks: 50 ms for a 12 MP RGB photo, more than the
# fused resize itself. Pillow 11.2+ exports its memory through the Arrow C data interface instead (a
# standard ABI, not Pillow's internals), zero-copy, when the image is one block of memory (Pillow's block
# size, 16 MiB by default; the vLLM plugin raises it). RGB is stored as RGBX: 4 bytes a pixel, read in place
# with a pixel stride of 4, which the kernels take as any other stride.
class _ArrowArray(ctypes.Structure):
    pass


_ArrowArray._fields_ = [
    ("length", ctypes.c_int64),
    ("null_count", ctypes.c_int64),
    ("offset", ctypes.c_int64),
    ("n_buffers", ctypes.c_int64),
    ("n_children", ctypes.c_int64),
    ("buffers", ctypes.POINTER(ctypes.c_void_p)),
    ("children", ctypes.POINTER(ctypes.POINTER(_ArrowArray))),
    ("dictionary", ctypes.c_void_p),
    ("release", ctypes.c_void_p),
    ("private_data", ctypes.c_void_p),
]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_STORED_BYTES = {"L": 1, "RGB": 4, "RGBA": 4}  # bytes per pixel in Pillow's memory
_STORED_CHANNELS = {"L": 1, "RGB": 3, "RGBA": 4}


def _pil_memory(image) -> torch.Tensor | None:
    """uint8 [H, W, C] viewing an L, RGB or RGBA image's own memory (kept alive by the view), or None where
    Pillow cannot export it in one piece (an older Pillow, an image in several blocks)."""
    if image.mode not in _STORED_BYTES or not hasattr(image, "__arrow_c_array__"):
        return None
    image.load()
    try:
        schema, array = image.__arrow_c_array__()
    except ValueError:  # "Image rows are not contiguous in memory": several blocks
        return None
    exported = _ArrowArray.from_address(_capsule_pointer(array, b"arrow_array"))
    data = exported.children[0].contents if exported.n_children else exported
    per_pixel, (width, height) = _STORED_BYTES[image.mode], image.size
    if data.n_buffers != 2 or data.offset != 0 or data.length != width * height * per_pixel:
        return None  # not the layout this reader knows
    memory = (ctypes.c_uint8 * data.length).from_address(data.buffers[1])
    memory.exported = (schema, array)  # the capsules release Pillow's memory when the view is gone
    pixels = torch.frombuffer(memory, dtype=torch.uint8).view(height, width, per_pixel)
    return pixels[:, :, : _STORED_CHANNELS[image.mode]]


def _from_numpy(array) -> torch.Tensor:
    """torch.from_numpy without the warning for a read-only array (np.asarray of a PIL image is one): nothing
    here writes to the input."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
        return torch.from_numpy(array)


def has_torchvision() -> bool:
    return importlib.util.find_spec("torchvision") is not None


def decode(data: bytes, name: str, where: str, convert_rgb: bool = True) -> tuple[torch.Tensor, str]:
    """Encoded bytes as the PIL image Pillow opens, upright, in the PIL path's layout: (uint8 [C, H, W] on the
    CPU, "pil"). torchvision's decoder serves where it gives the same pixels; Pillow otherwise, and names
    what it cannot decode."""
    try:
        from PIL import Image, ImageOps, UnidentifiedImageError
    except ImportError:
        raise ImportError(
            f"{where}: {name} is encoded bytes, and decoding them needs Pillow (pip install pillow)"
        ) from None
    if not data:
        raise ValueError(f"{where}: {name} is empty bytes; expected an encoded image")
    try:
        image = Image.open(io.BytesIO(data))  # the header only
    except (UnidentifiedImageError, OSError, ValueError) as error:
        raise ValueError(f"{where}: {name} ({len(data)} bytes) is not an image Pillow can decode: {error}") from None
    if has_torchvision() and _torchvision_decodes_as_pillow(image):
        pixels = _decode_with_torchvision(data)
        if pixels is not None:
            return pixels, "pil"
    try:
        image = ImageOps.exif_transpose(image)  # the first frame of an animation, as Image.open gives it
        image.load()
    except (OSError, ValueError, SyntaxError, EOFError) as error:
        raise ValueError(f"{where}: {name} ({len(data)} bytes) is not an image Pillow can decode: {error}") from None
    return pil_to_chw(image, convert_rgb), "pil"


def _torchvision_decodes_as_pillow(image) -> bool:
    """Whether torchvision's CPU decoder gives Pillow's pixels for this opened image, faster: 8-bit JPEG in RGB or
    L (both libjpeg-turbo, the same upsampling; the tests check it, damaged files included). Not PNG, though
    lossless: torchvision 0.29's PNG decoder crashed the process (a segmentation fault) on a PNG with a
    corrupted body in the tests' fuzz, where Pillow names the fault."""
    return image.format == "JPEG" and image.mode in ("RGB", "L")


def _decode_with_torchvision(data: bytes) -> torch.Tensor | None:
    """uint8 [C, H, W], upright; None where torchvision refuses the bytes or gives other than 8 bits (Pillow then
    decodes them, or names the fault)."""
    from torchvision.io import ImageReadMode, decode_image

    encoded = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    try:
        with warnings.catch_warnings():  # torchvision 0.29 deprecates its decoders for TorchCodec's
            warnings.simplefilter("ignore")
            image = decode_image(encoded, mode=ImageReadMode.UNCHANGED, apply_exif_orientation=True)
    except RuntimeError:
        return None
    return image if image.dim() == 3 and image.dtype == torch.uint8 else None


def exif_orientation(data: bytes) -> int | None:
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


def orient(image: torch.Tensor, orientation: int) -> torch.Tensor:
    """The [C, H, W] image turned upright for an EXIF orientation (1-8)."""
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


def to_rgb(image: torch.Tensor, source: str, reference: str) -> torch.Tensor:
    """transformers' convert_to_rgb on the device: gray repeated (a stride-0 view), alpha composited on white,
    in the arithmetic of the path that image would take through transformers (`source` "pil": a PIL image;
    "tensor": arrays, tensors and decoded bytes, blended as `reference`'s backend blends)."""
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
