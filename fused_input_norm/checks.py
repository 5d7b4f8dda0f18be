"""The argument checks every layer shares, and the dtypes and filters the ops accept.

Each check raises before any kernel runs, with the caller's name (`where`) and the argument's, so a
mistake reads as the user's call, not as an op deep inside it. Imports nothing from the package.
"""

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence

import torch

INPUT_DTYPES = (torch.uint8, torch.uint16, torch.float16, torch.bfloat16, torch.float32)
OUTPUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# The resize op also writes uint8: the resampled bytes (weight 1, bias 0), which an engine normalizes later.
RESIZE_OUTPUT_DTYPES = (torch.uint8, *OUTPUT_DTYPES)
# cv2_cubic / cv2_cubic_f32: OpenCV's cv2.resize(..., interpolation=cv2.INTER_CUBIC) of the uint8 image, and of
# the image as float32 (Mistral's ImageEncoder); bilinear_no_antialias: torch's F.interpolate(mode="bilinear",
# antialias=False) of the uint8 image on x86; bilinear_no_antialias_f32 / _f32_cl: of the image as float32 (MiMo's
# and Molmo2's resize), torch's generic / channels-last kernel, on x86 at AVX2 and above; bilinear_f32 /
# bicubic_f32: torch's F.interpolate(antialias=True) of the image as float32 (torchvision's resize of a float32
# tensor: MiniMax-M3's video frames), on x86 at AVX2 and above. The reference argument does not apply to these.
RESAMPLE_FILTERS = (
    "bilinear",
    "bicubic",
    "lanczos",
    "cv2_cubic",
    "cv2_cubic_f32",
    "bilinear_no_antialias",
    "bilinear_no_antialias_f32",
    "bilinear_no_antialias_f32_cl",
    "bilinear_f32",
    "bicubic_f32",
)
FLOAT_BILINEAR_FILTERS = ("bilinear_no_antialias_f32", "bilinear_no_antialias_f32_cl")
ANTIALIAS_FLOAT_FILTERS = ("bilinear_f32", "bicubic_f32")
# The filters that read a float32 input as well as uint8 (torch's float32 interpolates).
FLOAT_INPUT_FILTERS = (*FLOAT_BILINEAR_FILTERS, *ANTIALIAS_FLOAT_FILTERS)
CV2_FILTERS = ("cv2_cubic", "cv2_cubic_f32")
# The filters whose result is one library's whatever the reference: their pass order is that library's own.
OWN_ORDER_FILTERS = (*CV2_FILTERS, "bilinear_no_antialias", *FLOAT_INPUT_FILTERS)
_FILTER_LIST = ", ".join(map(repr, RESAMPLE_FILTERS[:-1])) + f" or {RESAMPLE_FILTERS[-1]!r}"
FILTER_ERROR = f"resample must be {_FILTER_LIST}"  # the C++ ops' words (resample.cpp parse_filter)
CHANNEL_DIMS = (-3, -1)  # channels first ([..., C, H, W]) or last ([..., H, W, C])
# The most bytes one processor call may allocate for its output (64 GiB: more than any one accelerator or
# host this serves holds for a single batch). A config or a call asking for more (a patch_size or min_pixels
# in the millions) is refused by name before anything is allocated, not by the allocator.
MAX_OUTPUT_BYTES = 1 << 36


def is_int(value: object) -> bool:
    """A Python int; bool is a flag, not a count, here."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """Python and NumPy ints and floats; bool is a flag, not a number, here."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def image_name(i: int, count: int) -> str:
    """How an error names the i-th of `count` images: as the user's argument."""
    return f"images[{i}]" if count > 1 else "images"


def positive_int(where: str, name: str, value: object) -> int:
    if not is_int(value) or value < 1:
        raise ValueError(f"{where}: {name} must be an int >= 1, got {value!r}")
    return value


def check_output_size(where: str, name: str, shape: Sequence[int], dtype: torch.dtype) -> None:
    """Refuses an output over MAX_OUTPUT_BYTES, before it is allocated."""
    size = math.prod(shape) * dtype.itemsize
    if size > MAX_OUTPUT_BYTES:
        raise ValueError(
            f"{where}: {name} would be {list(shape)} {dtype} ({size / 2**30:.1f} GiB), over the "
            f"{MAX_OUTPUT_BYTES >> 30} GiB one call may allocate (MAX_OUTPUT_BYTES): lower the config's or the "
            f"call's size (max_pixels), patch_size or merge_size, or send fewer images per call"
        )


def check_strided(where: str, name: str, tensor: torch.Tensor) -> None:
    """A dense tensor with data: sparse, mkldnn and nested layouts have no strided pixels to read, and a meta
    tensor has no pixels at all."""
    if tensor.layout != torch.strided:
        raise TypeError(f"{where}: {name} must be a dense (strided) tensor, got layout {tensor.layout}")
    if tensor.is_nested:
        raise TypeError(f"{where}: {name} must be a dense (strided) tensor, got a nested tensor")
    if tensor.device.type == "meta":
        raise ValueError(f"{where}: {name} is a meta tensor: it has a shape but no pixels to process")


def dtype_names(dtypes: Iterable[torch.dtype]) -> str:
    return ", ".join(str(d) for d in dtypes)


def check_visual_dtype(where: str, visual_dtype: object) -> None:
    if visual_dtype not in OUTPUT_DTYPES:
        raise TypeError(f"{where}: visual_dtype must be one of {dtype_names(OUTPUT_DTYPES)}, got {visual_dtype!r}")


def check_channel_dim(where: str, channel_dim: object) -> int:
    if not is_int(channel_dim):
        raise TypeError(f"{where}: channel_dim must be -3 or -1, got {type(channel_dim).__name__}")
    if channel_dim not in CHANNEL_DIMS:
        raise ValueError(f"{where}: channel_dim must be -3 (channels first) or -1 (channels last), got {channel_dim!r}")
    return channel_dim


def check_ints(where: str, name: str, value: object, length: int) -> tuple[int, ...]:
    """A sequence of `length` ints, as a tuple."""
    if not isinstance(value, Sequence) or len(value) != length or not all(is_int(v) for v in value):
        raise ValueError(f"{where}: {name} must be a sequence of {length} ints, got {value!r}")
    return tuple(value)


def per_channel(where: str, name: str, value: object, channel: int) -> list[float]:
    """One finite float per channel from a number, a sequence of numbers, a 0-d NumPy array or a CPU tensor
    (a device tensor is refused: reading it would synchronize the device)."""
    if isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            raise ValueError(
                f"{where}: {name} must be given on the CPU (a list, a float or a CPU tensor), "
                f"got a tensor on {value.device}: reading it would synchronize the device"
            )
        if value.dtype == torch.bool or value.is_complex():
            raise TypeError(f"{where}: {name} must hold real numbers, got a {value.dtype} tensor")
        value = value.flatten().tolist()
    if not is_number(value) and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()  # a 0-d NumPy array
    if is_number(value):
        values = [float(value)] * channel
    elif isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise TypeError(
            f"{where}: {name} must be a number, a sequence of numbers or a CPU tensor, got {type(value).__name__}"
        )
    else:
        for i, v in enumerate(value):
            if not is_number(v):
                raise TypeError(f"{where}: {name}[{i}] must be a number, got {type(v).__name__}")
        values = [float(v) for v in value]
    if len(values) != channel:
        raise ValueError(f"{where}: {name} must have one value per channel ({channel}), got {len(values)}")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"{where}: {name} must be finite, got {values}")
    return values
