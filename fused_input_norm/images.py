"""Image intake: every form a user hands a processor, as uint8 [C, H, W] pixels on the device.

PIL images (pixels as stored), uint8 NumPy arrays and tensors (CHW/HWC inferred as transformers infers
it), nested lists and 4-D batches flattened as transformers flattens them, and encoded bytes. Then
transformers' convert_to_rgb, on the device, as it does for each input type.

Encoded bytes `b` mean `ImageOps.exif_transpose(Image.open(io.BytesIO(b)))`, the PIL image transformers'
and vLLM's loaders start from, whatever the format and mode: Pillow decodes them, except where
torchvision's CPU decoder gives the same pixels faster (8-bit JPEG in RGB or L: the same libjpeg-turbo).
nvJPEG is a different decoder (its chroma upsampling differs: 10.3% of a 12 MP photo's values, up to 14
levels, on an H200): it serves only when asked for (decoder="nvjpeg"). Whatever decodes them, Pillow opens
the bytes first (their header): its decompression-bomb check, and the EXIF orientation as exif_transpose
reads it, hold for every decoder.
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


def samples(images: Any, where: str) -> list[int]:
    """How many of the images as_list makes of `images` each sample holds, as transformers'
    make_nested_list_of_images groups them: one sample per inner list of a list of lists (empty ones too) and
    per 4-D batch of a list of them; one sample for a flat list, a 4-D batch or one image. A list mixing 4-D
    batches with single images (which transformers cuts up as if all were batches) is refused."""
    if getattr(images, "ndim", None) == 4:
        return [len(images)]
    if not isinstance(images, list | tuple):
        return [1]
    if images and all(isinstance(group, list | tuple) for group in images):
        return [len(group) for group in images]
    batches = [getattr(item, "ndim", None) == 4 for item in images]
    if all(batches):
        return [len(batch) for batch in images]
    if any(batches):
        raise ValueError(f"{where}: images mixes 4-D batches with single images, which transformers does not group")
    return [len(images)]


DECODERS = ("exact", "nvjpeg")


def decode_all(
    items: list, device: torch.device, convert_rgb: bool, channel: int, where: str, decoder: str = "exact"
) -> list[tuple[torch.Tensor, str]]:
    """Each item as (uint8 [C, H, W], its alpha source: "pil" or "tensor"), not yet on the device (nvJPEG's
    already are). Bytes are decoded as Pillow opens them, upright (or by nvJPEG for decoder="nvjpeg" on
    CUDA, once Pillow has opened their header: a bomb is named before nvJPEG is asked for anything); the
    channel count is checked (1-4 to be converted to RGB, else `channel`), naming the item."""
    decoded = [None] * len(items)
    jpegs = []  # (index, bytes, orientation): decoded on the device in one nvJPEG call
    for i, item in enumerate(items):
        name = image_name(i, len(items))
        if isinstance(item, bytes | bytearray | memoryview):
            data = bytes(item)
            orientation = None
            if decoder == "nvjpeg" and device.type == "cuda" and data.startswith(_JPEG_MAGIC) and has_torchvision():
                orientation = _nvjpeg_orientation(open_encoded(data, name, where))
            if orientation is None:
                decoded[i] = decode(data, name, where, convert_rgb)
            else:
                jpegs.append((i, data, orientation))
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
    if is_pil(item):
        return pil_to_chw(item, convert_rgb), "pil"
    if type(item).__module__ == "numpy" and hasattr(item, "dtype"):
        import numpy as np

        if getattr(item, "ndim", 0) == 0:  # a 0-d array, or a NumPy scalar (np.uint8(7)): one number, no pixels
            raise TypeError(
                f"{where}: {name} is a 0-d NumPy array ({type(item).__name__} {item!r}); expected an image: uint8 "
                f"pixels [H, W], [C, H, W] or [H, W, C]"
            )
        if item.dtype != np.uint8:
            raise TypeError(f"{where}: {name} must be uint8 pixels, got a NumPy array of {item.dtype}")
        item = from_numpy(np.ascontiguousarray(item) if item.strides and min(item.strides) < 0 else item)
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


def is_pil(item: Any) -> bool:
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
    return from_numpy(array if array.ndim == 3 else array[:, :, None]).permute(2, 0, 1)


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


def from_numpy(array) -> torch.Tensor:
    """torch.from_numpy without the warning for a read-only array (np.asarray of a PIL image is one): nothing
    here writes to the input."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
        return torch.from_numpy(array)


def has_torchvision() -> bool:
    return importlib.util.find_spec("torchvision") is not None


def open_encoded(data: bytes, name: str, where: str):
    """Pillow's Image.open of the bytes: the header only, no pixels decoded, with Image.open's own
    decompression-bomb check (over Image.MAX_IMAGE_PIXELS it warns, DecompressionBombWarning, as Image.open
    does; over twice that, a ValueError naming the image). Every decoder, nvJPEG included, starts here."""
    try:
        from PIL import Image
    except ImportError:
        raise ImportError(
            f"{where}: {name} is encoded bytes, and decoding them needs Pillow (pip install pillow)"
        ) from None
    if not data:
        raise ValueError(f"{where}: {name} is empty bytes; expected an encoded image")
    try:
        return Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as error:
        raise ValueError(_bomb_message(data, name, where, error)) from None
    except MemoryError:
        raise
    except Exception as error:  # UnidentifiedImageError, OSError, SyntaxError, struct.error, ...: see _undecodable
        raise _undecodable(data, name, where, error) from None


def _undecodable(data: bytes, name: str, where: str, error: Exception) -> ValueError:
    """The named error for bytes Pillow refuses. Pillow raises more than OSError on hostile bytes: malformed
    EXIF makes exif_transpose's rewrite of it raise struct.error or AttributeError (a fuzz of
    mutated EXIF found each), and the definition of bytes (exif_transpose(Image.open(b))) fails there too."""
    return ValueError(
        f"{where}: {name} ({len(data)} bytes) is not an image Pillow can decode: {type(error).__name__}: {error}"
    )


def _bomb_message(data: bytes, name: str, where: str, error: Exception) -> str:
    from PIL import Image

    return (
        f"{where}: {name} ({len(data)} bytes) is refused as a decompression bomb: {error} "
        f"(Pillow's PIL.Image.MAX_IMAGE_PIXELS = {Image.MAX_IMAGE_PIXELS}; twice that is refused)"
    )


def decode(data: bytes, name: str, where: str, convert_rgb: bool = True) -> tuple[torch.Tensor, str]:
    """Encoded bytes as the PIL image Pillow opens, upright, in the PIL path's layout: (uint8 [C, H, W] on the
    CPU, "pil"). torchvision's decoder serves where it gives the same pixels, turned upright by Pillow's own
    reading of the EXIF orientation; Pillow otherwise, and names what it cannot decode."""
    image = open_encoded(data, name, where)  # first: it names a missing Pillow
    from PIL import Image, ImageOps

    if has_torchvision() and _plain_jpeg(image):
        orientation = pillow_orientation(image)
        if orientation is not None:
            pixels = _decode_with_torchvision(data)
            if pixels is not None:
                return orient(pixels, orientation), "pil"
    try:
        # In place: exif_transpose would otherwise copy an upright image whole (its pixels are the same).
        ImageOps.exif_transpose(image, in_place=True)  # the first frame of an animation, as Image.open gives it
        image.load()
    except Image.DecompressionBombError as error:  # a size found only while loading (a TIFF tile, a GIF frame)
        raise ValueError(_bomb_message(data, name, where, error)) from None
    except MemoryError:
        raise
    except Exception as error:
        raise _undecodable(data, name, where, error) from None
    return pil_to_chw(image, convert_rgb), "pil"


def _plain_jpeg(image) -> bool:
    """An opened 8-bit JPEG in RGB or L: what torchvision's CPU decoder gives Pillow's pixels for, faster (both
    libjpeg-turbo, the same upsampling; the tests check it, damaged files included), and what nvJPEG serves
    (CMYK and other modes: Pillow converts them). Not PNG, though lossless: torchvision 0.29's PNG decoder
    crashed the process (a segmentation fault) on a PNG with a corrupted body in the tests' fuzz, where
    Pillow names the fault."""
    return image.format == "JPEG" and image.mode in ("RGB", "L")


def _decode_with_torchvision(data: bytes) -> torch.Tensor | None:
    """uint8 [C, H, W] as stored (not turned upright); None where torchvision refuses the bytes or gives other
    than 8 bits (Pillow then decodes them, or names the fault)."""
    from torchvision.io import ImageReadMode, decode_image

    encoded = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    try:
        with warnings.catch_warnings():  # torchvision 0.29 deprecates its decoders for TorchCodec's
            warnings.simplefilter("ignore")
            # The pixels as stored: torchvision's own EXIF reader disagrees with Pillow's on malformed EXIF (a
            # doubled header, a second APP1, odd tag types), so the orientation is Pillow's (pillow_orientation).
            image = decode_image(encoded, mode=ImageReadMode.UNCHANGED, apply_exif_orientation=False)
    except RuntimeError:
        return None
    return image if image.dim() == 3 and image.dtype == torch.uint8 else None


def pillow_orientation(image) -> int | None:
    """The orientation (1-8) ImageOps.exif_transpose gives this opened image, without decoding its pixels:
    exif_transpose itself runs on a 2x3 stand-in carrying the image's metadata (`info`: a JPEG's EXIF and XMP
    are all there).
    So it is Pillow's answer by construction: its parse (the EXIF tag, else an XMP one, two APP1 segments
    joined), its lookup (2-8 turn the image, 6.0 and a rational 6/1 too; any other value leaves it: 1), and
    its rewrite of the EXIF without the tag, which fails on some malformed EXIF: None where exif_transpose
    fails (the Pillow path then names the fault)."""
    from PIL import Image, ImageOps

    stand_in = Image.frombytes("L", (3, 2), bytes(range(6)))
    stand_in.info = dict(image.info)
    try:
        turned = ImageOps.exif_transpose(stand_in)
    except Exception:  # whatever exif_transpose raises, the Pillow path raises it again on the image itself
        return None
    return _ORIENTATION_OF[(turned.size, turned.tobytes())]


def _nvjpeg_orientation(image) -> int | None:
    """The orientation nvJPEG's pixels get for an opened JPEG; None where nvJPEG does not serve it: not a plain
    JPEG (_plain_jpeg), or EXIF that exif_transpose fails on (the CPU path names it)."""
    if not _plain_jpeg(image):
        return None
    return pillow_orientation(image)


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


# The 2x3 stand-in as each orientation's view leaves it (PIL size, bytes) -> that orientation: the eight are
# distinct, so the stand-in exif_transpose turned says which view turns the pixels the same way.
_ORIENTATION_OF = {
    ((view.shape[-1], view.shape[-2]), bytes(view.flatten().tolist())): orientation
    for orientation, turn in _ORIENT.items()
    for view in [turn(torch.arange(6, dtype=torch.uint8).view(1, 2, 3))]
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


# Alpha is composited a block of rows at a time, into the uint8 result: the blends' int32 / float temporaries
# then hold one block, not the image (the whole-image blend took 3.4 GB more for an 81 MP RGBA image). Every
# blend is elementwise, so the blocks give the whole image's values bit for bit. On the CPU, 1M pixels: ~30 MB
# of temporaries; a 12 MP Pillow blend in 0.19 s of CPU time on one thread (the whole image's: 0.70 s).
# Smaller blocks are faster still on one thread (64K: 0.12 s), but each op is an OpenMP region, and on a loaded
# machine (load 5-10 on 2 cores) 64K blocks took 20 s for 81 MP where 1M took 5.5 s and the whole image 7.5 s.
# On a GPU, 4M pixels: few kernel launches (3 blocks for a 12 MP photo).
BLEND_BLOCK_PIXELS = 1 << 20
BLEND_BLOCK_PIXELS_ACCELERATOR = 1 << 22


def to_rgb(image: torch.Tensor, source: str, reference: str) -> torch.Tensor:
    """transformers' convert_to_rgb on the device: gray repeated (a stride-0 view), alpha composited on white,
    in the arithmetic of the path that image would take through transformers (`source` "pil": a PIL image;
    "tensor": arrays, tensors and decoded bytes, blended as `reference`'s backend blends)."""
    channels, height, width = image.shape
    if channels == 1:
        return image.expand(3, -1, -1)
    if channels == 3:
        return image
    # gray + alpha (a decoded PNG): the gray repeated as a view, not copied
    color = image[:1].expand(3, -1, -1) if channels == 2 else image[:3]
    alpha = image[-1:]
    blend = _blend_like_pillow if source == "pil" else _BLENDS[reference]
    out = torch.empty((3, height, width), dtype=torch.uint8, device=image.device)
    block_pixels = BLEND_BLOCK_PIXELS if image.device.type == "cpu" else BLEND_BLOCK_PIXELS_ACCELERATOR
    rows = max(1, block_pixels // width)
    for top in range(0, height, rows):
        block = slice(top, top + rows)
        out[:, block] = blend(color[:, block], alpha[:, block])
    return out


def _blend_like_pillow(color: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Pillow's alpha_composite onto opaque white, in its integer arithmetic: with a background alpha of 255, its
    coefficients are a * 128 and (255 - a) * 128 (7 fraction bits), and it divides by 255 with the shift trick,
    rounding: m = c * (a * 128) + 255 * ((255 - a) * 128) + (0x80 << 7), then (((m >> 8) + m) >> 8) >> 7.
    Computed in place in one int32 block: m = (a * (c - 255) + 255 * 255) * 128 + (0x80 << 7) (the same
    integer), and two right shifts of a non-negative integer are one (>> 15)."""
    a = alpha.to(torch.int32)
    m = color.to(torch.int32).sub_(255).mul_(a).add_(255 * 255).mul_(128).add_(0x80 << 7)
    return m.add_(m >> 8).bitwise_right_shift_(15).to(torch.uint8)


def _blend_like_torchvision(color: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """The torchvision backend: to float32 in [0, 1] (x * (1/255)), blend (c * a + (1 - a)), back with
    tvF.to_dtype's scaling; in place, the same float32 operations in the same order."""
    c, a = color.to(torch.float32).mul_(1.0 / 255), alpha.to(torch.float32).mul_(1.0 / 255)
    return c.mul_(a).add_(1 - a).mul_(255 + 1.0 - 1e-3).to(torch.uint8)


def _blend_like_pil_backend(color: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """The Pil backend on an array: float64 alpha, blend on 255 (a * c + (1 - a) * 255), round half to even; in
    place, the same float64 operations in the same order."""
    a = alpha.to(torch.float64).div_(255)
    return color.to(torch.float64).mul_(a).add_((1 - a).mul_(255)).round_().to(torch.uint8)


_BLENDS = {"torchvision": _blend_like_torchvision, "pil": _blend_like_pil_backend}
