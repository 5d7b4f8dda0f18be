"""Typed Python entry points for torch.ops.fused_input_norm.* and their fake (meta) kernels.

The C++ kernels check every argument in eager mode. They are built on the LibTorch stable ABI, which can
raise only RuntimeError, so a failed check's message starts with the Python exception it stands for
("[ValueError] fused_input_norm.affine: ..."): the wrappers below raise that type with the rest of the
message. The fake kernels run instead whenever any argument is a fake or meta tensor (torch.compile,
torch.export, FakeTensorMode, a meta tensor mixed with real ones), so they repeat the checks that can be
decided from metadata, raising the same exception types directly.
"""

import math
import re
import struct
from collections.abc import Sequence

import torch
from torch import Tensor

from .checks import (
    ANTIALIAS_FLOAT_FILTERS,
    CV2_FILTERS,
    FILTER_ERROR,
    FLOAT_BILINEAR_FILTERS,
    FLOAT_INPUT_FILTERS,
    INPUT_DTYPES,
    OUTPUT_DTYPES,
    RESAMPLE_FILTERS,
    RESIZE_OUTPUT_DTYPES,
    dtype_names,
    is_int,
)
from .geometry import MAX_SIDE

# Looked up once: resolving torch.ops.<namespace>.<op>.default costs ~0.2 us on every call.
_AFFINE = torch.ops.fused_input_norm.affine.default
_AFFINE_OUT = torch.ops.fused_input_norm.affine_out.default
_RESAMPLE_PLAN = torch.ops.fused_input_norm.resample_plan.default
_RESIZE_AFFINE_OUT = torch.ops.fused_input_norm.resize_affine_out.default


def affine(input: Tensor, weight: Tensor, bias: Tensor, dim: int = 1, out_dtype: torch.dtype | None = None) -> Tensor:
    """Returns `input * weight[c] + bias[c]` (c: index along `dim`), computed in fp32, as `out_dtype`.

    out_dtype defaults to float32 for integer input and to input's dtype for floating input. The result
    is contiguous, with input's shape.
    """
    _check_types("affine", input=input, weight=weight, bias=bias, dim=dim)
    if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
        # The schema's ScalarType? also takes an int (the enum value) and refuses anything else as a RuntimeError.
        raise TypeError(
            f"fused_input_norm.affine: out_dtype must be a torch.dtype or None, got {type(out_dtype).__name__}"
        )
    try:
        return _AFFINE(input, weight, bias, dim, out_dtype)
    except RuntimeError as error:
        raise _typed(error) from None


def affine_out(out: Tensor, input: Tensor, weight: Tensor, bias: Tensor, dim: int = 1) -> None:
    """Writes `input * weight[c] + bias[c]` into `out` (contiguous, input's shape); `out` may be `input`."""
    _check_types("affine_out", out=out, input=input, weight=weight, bias=bias, dim=dim)
    try:
        _AFFINE_OUT(out, input, weight, bias, dim)
    except RuntimeError as error:
        raise _typed(error) from None


def resample_plan(in_size: int, out_size: int, resample: str = "bicubic", reference: str = "pil") -> Tensor:
    """The fixed-point coefficients of one axis resampled from in_size to out_size, as the reference computes
    them (`reference` "pil" or "torchvision"): an int32 CPU tensor for resize_affine_out (move it to the
    device once and reuse it; FusedInputNorm caches them)."""
    try:
        return _RESAMPLE_PLAN(in_size, out_size, resample, reference)
    except RuntimeError as error:
        raise _typed(error) from None


def resize_affine_out(
    out: Tensor,
    input: Tensor,
    weight: Tensor,
    bias: Tensor,
    row_plan: Tensor | None,
    col_plan: Tensor | None,
    size: Sequence[int],
    crop: Sequence[int],
    resample: str,
    vertical_first: bool,
    patches: Sequence[int] = (),
    clip: bool = False,
    pad: Sequence[int] = (),
) -> None:
    """Resamples the uint8 images `input` [B, C, H, W] to `size` (the plans of the axes that change, from
    resample_plan), crops (top, left, height, width), and writes `input * weight[c] + bias[c]` into `out`:
    [B, C, height, width], or Qwen-VL patch rows when `patches` = (temporal_patch_size, patch_size,
    merge_size): each image's rows [B * gh * gw, C * T * P * P], its one frame repeated T times, or with
    `clip=True` the B images are frames of clips and each T consecutive ones form one temporal patch
    ([B / T * gh * gw, C * T * P * P]; B must be a multiple of T). A fourth value of `patches` is the layout:
    0 (the default) rows [C, T, P, P]; 1 rows [T, P, P, C] (Gemma 4's and LFM2-VL's patches); 2 MiniCPM-V's
    NaViT strips [C, P, B * gh * gw * P] (T and merge_size 1), row (c, y) row y of every patch's channel c in
    raster order, where `out` may also be a window of wider strips (strides (P * pitch, pitch, 1)).
    `vertical_first` is the reference's pass order (fused_input_norm.resize.vertical_first).
    `pad` = (canvas_height, canvas_width, top, left, fill) places the crop at (top, left) on a canvas of the
    byte `fill` (0-255, every channel), which goes through the same affine (as transformers pads the uint8
    image before it normalizes); `out` then has the canvas's shape (height, width above: the canvas's).
    A uint8 `out` holds the result rounded (ties to even) and clamped to [0, 255]: with weight 1 and bias 0,
    the resampled bytes themselves in the layout, for an engine that normalizes later (vLLM's
    mm_device_do_normalize)."""
    _check_types(
        "resize_affine_out", 1, out=out, input=input, weight=weight, bias=bias, row_plan=row_plan, col_plan=col_plan
    )
    try:
        _RESIZE_AFFINE_OUT(
            out,
            input,
            weight,
            bias,
            row_plan,
            col_plan,
            list(size),
            list(crop),
            resample,
            vertical_first,
            list(patches),
            clip,
            list(pad),
        )
    except RuntimeError as error:
        raise _typed(error) from None


_OPTIONAL = ("row_plan", "col_plan")  # resize_affine_out's plans: None for an axis that keeps its size


def _check_types(op: str, dim: object, **tensors: object) -> None:
    # The dispatcher would reject these too, but as a RuntimeError (a wrong Python type) or a
    # NotImplementedError from inside (a sparse or mkldnn layout, which no kernel is registered for).
    for name, value in tensors.items():
        if value is None and name in _OPTIONAL:
            continue
        if not isinstance(value, Tensor):
            raise TypeError(f"fused_input_norm.{op}: {name} must be a torch.Tensor, got {type(value).__name__}")
        if value.layout != torch.strided or value.is_nested:
            layout = "nested" if value.is_nested else str(value.layout)
            raise TypeError(f"fused_input_norm.{op}: {name} must be a dense (strided) tensor, got layout {layout}")
    if not is_int(dim):
        raise TypeError(f"fused_input_norm.{op}: dim must be an int, got {type(dim).__name__}")


_TAGGED = re.compile(r"\[(ValueError|TypeError|IndexError)\] (.*)", re.DOTALL)
_TAGGED_TYPES = {"ValueError": ValueError, "TypeError": TypeError, "IndexError": IndexError}


def _typed(error: RuntimeError) -> Exception:
    """The exception a C++ check's tag names, with the tag removed; `error` itself when it has no tag."""
    tagged = _TAGGED.match(str(error))
    return _TAGGED_TYPES[tagged[1]](tagged[2]) if tagged else error


def _check_args(op: str, input: Tensor, weight: Tensor, bias: Tensor, dim: int) -> None:
    _check_types(op, input=input, weight=weight, bias=bias, dim=dim)
    if input.dtype not in INPUT_DTYPES:
        raise TypeError(
            f"fused_input_norm.{op}: input must have one of the dtypes {dtype_names(INPUT_DTYPES)}, got {input.dtype}"
        )
    if input.dim() < 1:
        raise ValueError(
            f"fused_input_norm.{op}: input must have at least 1 dimension (the channel axis), got a 0-d tensor"
        )
    if not -input.dim() <= dim < input.dim():
        raise IndexError(
            f"fused_input_norm.{op}: dim must be in [{-input.dim()}, {input.dim() - 1}] for a {input.dim()}-D input, got {dim}"
        )
    channels = input.shape[dim]
    for name, t in (("weight", weight), ("bias", bias)):
        if t.device != input.device:
            raise RuntimeError(
                f"fused_input_norm.{op}: {name} must be on input's device {input.device}, got {t.device}"
            )
        if t.dtype != torch.float32:
            raise TypeError(f"fused_input_norm.{op}: {name} must be a float32 tensor, got {t.dtype}")
        if t.dim() != 1:
            raise ValueError(
                f"fused_input_norm.{op}: {name} must be 1-D (one value per channel), got {t.dim()}-D shape "
                f"{list(t.shape)}"
            )
        if t.shape[0] != channels:
            raise ValueError(
                f"fused_input_norm.{op}: {name} must have one value per channel: length input.size({dim}) = {channels}, "
                f"got {t.shape[0]}"
            )
        if not t.is_contiguous():
            raise ValueError(f"fused_input_norm.{op}: {name} must be contiguous, got stride {list(t.stride())}")


@torch.library.register_fake("fused_input_norm::affine")
def _affine_fake(input, weight, bias, dim=1, out_dtype=None):
    _check_args("affine", input, weight, bias, dim)
    if out_dtype is None:
        out_dtype = input.dtype if input.dtype.is_floating_point else torch.float32
    elif out_dtype not in OUTPUT_DTYPES:
        raise TypeError(
            f"fused_input_norm.affine: out_dtype must be one of {dtype_names(OUTPUT_DTYPES)}, got {out_dtype}"
        )
    return torch.empty(input.shape, dtype=out_dtype, device=input.device)


@torch.library.register_fake("fused_input_norm::affine_out")
def _affine_out_fake(out, input, weight, bias, dim=1):
    _check_args("affine_out", input, weight, bias, dim)
    if out.device != input.device:
        raise RuntimeError(
            f"fused_input_norm.affine_out: out must be on input's device {input.device}, got {out.device}"
        )
    if out.dtype not in OUTPUT_DTYPES:
        raise TypeError(
            f"fused_input_norm.affine_out: out must have one of the dtypes {dtype_names(OUTPUT_DTYPES)}, got {out.dtype}"
        )
    if out.shape != input.shape:
        raise ValueError(
            f"fused_input_norm.affine_out: out must have input's shape {list(input.shape)}, got {list(out.shape)}"
        )
    if not out.is_contiguous():
        raise ValueError(f"fused_input_norm.affine_out: out must be contiguous, got stride {list(out.stride())}")
    # The kernel's overlap checks compare addresses; fake and meta tensors have none, but views of one
    # tensor share its (fake) storage, which decides the same question from offsets and strides.
    if _shares_memory_partially(out, input):
        raise ValueError(
            "fused_input_norm.affine_out: out partially overlaps input; pass out=input exactly to normalize in place, "
            "or a separate buffer"
        )
    for name, t in (("weight", weight), ("bias", bias)):
        if _may_overlap(out, t):
            raise ValueError(f"fused_input_norm.affine_out: out overlaps {name}; pass a separate output buffer")


def _byte_range(t: Tensor) -> tuple[int, int]:
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))
    begin = t.storage_offset() * t.element_size()
    return begin, begin + (last + 1) * t.element_size()


def _may_overlap(a: Tensor, b: Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0 or not torch._C._is_alias_of(a, b):  # different storages
        return False
    a_begin, a_end = _byte_range(a)
    b_begin, b_end = _byte_range(b)
    return a_begin < b_end and b_begin < a_end


def _shares_memory_partially(out: Tensor, input: Tensor) -> bool:
    """As the kernel decides it (csrc/ops.cpp): overlapping bytes that are not exactly the same elements."""
    if not _may_overlap(out, input):
        return False
    if out.storage_offset() * out.element_size() != input.storage_offset() * input.element_size():
        return True
    if out.element_size() != input.element_size():
        return True
    return any(size > 1 and a != b for size, a, b in zip(out.shape, out.stride(), input.stride(), strict=True))


_PLAN_OP = "fused_input_norm.resample_plan"


@torch.library.register_fake("fused_input_norm::resample_plan")
def _resample_plan_fake(in_size, out_size, resample="bicubic", reference="pil"):
    # The C++ planner's checks, in its order and words (resample.cpp).
    if not (1 <= in_size < MAX_SIDE and 1 <= out_size < MAX_SIDE):
        raise ValueError(f"{_PLAN_OP}: in_size and out_size must be in [1, 2^24), got {in_size} and {out_size}")
    if reference not in ("pil", "torchvision"):
        raise ValueError(f"{_PLAN_OP}: reference must be 'pil' or 'torchvision', got '{reference}'")
    if resample not in RESAMPLE_FILTERS:
        raise ValueError(f"{_PLAN_OP}: {FILTER_ERROR}, got '{resample}'")
    return torch.empty(_plan_numel(in_size, out_size, resample), dtype=torch.int32, device="cpu")


_FILTER_SUPPORT = {"bilinear": 1.0, "bicubic": 2.0, "lanczos": 3.0, "bilinear_no_antialias": 1.0}  # filter_support


def _plan_numel(in_size: int, out_size: int, resample: str) -> int:
    # resample_kernel.h: a 4-value header, then (first, count) and `taps` coefficients per output index.
    if resample in CV2_FILTERS:
        return 4 + out_size * (2 + 4)  # OpenCV's cubic: 4 taps at any scale
    if resample in FLOAT_BILINEAR_FILTERS:
        return 4 + out_size * (2 + 2)  # torch's float bilinear: i0 and i0 + 1
    if resample in ANTIALIAS_FLOAT_FILTERS:  # torch's float32 support: ceil(float(h * float(in / out))) * 2 + 1
        scale = _float32(in_size / out_size)  # one rounding of the exact quotient, as float32 division
        half = 2.0 if resample == "bicubic_f32" else 1.0
        return 4 + out_size * (2 + math.ceil(_float32(half * scale) if scale >= 1.0 else half) * 2 + 1)
    scale = in_size / out_size
    support = _FILTER_SUPPORT[resample] * (1.0 if resample == "bilinear_no_antialias" else max(scale, 1.0))
    return 4 + out_size * (2 + math.ceil(support) * 2 + 1)


def _float32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


_RESIZE_OP = "fused_input_norm.resize_affine_out"
_FLOAT_INPUT_NOTE = " (torch.float32 only with the filters " + ", ".join(map(repr, FLOAT_INPUT_FILTERS)) + ")"


@torch.library.register_fake("fused_input_norm::resize_affine_out")
def _resize_affine_out_fake(
    out, input, weight, bias, row_plan, col_plan, size, crop, resample, vertical_first, patches, clip=False, pad=()
) -> None:
    # The checks metadata decides, in the C++ op's order and words (resample.cpp).
    reads_float = resample in FLOAT_INPUT_FILTERS
    if input.dtype != torch.uint8 and not (input.dtype == torch.float32 and reads_float):
        either = " or a torch.float32 one" if reads_float else _FLOAT_INPUT_NOTE
        raise TypeError(f"{_RESIZE_OP}: input must be a torch.uint8 image{either}, got {input.dtype}")
    if input.dim() != 4:
        raise ValueError(f"{_RESIZE_OP}: input must be 4-D [B, C, H, W], got shape {list(input.shape)}")
    batch, channels, in_h, in_w = input.shape
    if in_h < 1 or in_w < 1:
        raise ValueError(f"{_RESIZE_OP}: input must have H, W >= 1, got shape {list(input.shape)}")
    _check_args("resize_affine_out", input, weight, bias, 1)
    if resample not in RESAMPLE_FILTERS:
        raise ValueError(f"{_RESIZE_OP}: {FILTER_ERROR}, got '{resample}'")
    if len(size) != 2 or size[0] < 1 or size[1] < 1:
        raise ValueError(f"{_RESIZE_OP}: size must be (height, width) >= 1, got {list(size)}")
    if max(in_h, in_w, *size) >= MAX_SIDE:
        raise ValueError(f"{_RESIZE_OP}: image sides must be below 2^24")
    cv2, resized = resample in CV2_FILTERS, (in_h, in_w) != tuple(size)
    for name, plan, n_in, n_out in (("row_plan", row_plan, in_h, size[0]), ("col_plan", col_plan, in_w, size[1])):
        if cv2 and resized and plan is None:
            raise ValueError(f"{_RESIZE_OP}: {name} is required: cv2 filters resample both axes")
        if cv2 and not resized and plan is not None:
            raise ValueError(f"{_RESIZE_OP}: {name} must be None: the image keeps its size")
        if not cv2 and n_in != n_out and plan is None:
            raise ValueError(f"{_RESIZE_OP}: {name} is required: the axis is resampled from {n_in} to {n_out}")
        if not cv2 and n_in == n_out and plan is not None:
            raise ValueError(f"{_RESIZE_OP}: {name} must be None: the axis keeps its size {n_in}")
        if plan is not None:
            if plan.device != input.device:
                raise RuntimeError(f"{_RESIZE_OP}: {name} must be on input's device {input.device}, got {plan.device}")
            if plan.dtype != torch.int32:
                raise TypeError(
                    f"{_RESIZE_OP}: {name} must be an int32 tensor from fused_input_norm.resample_plan, got {plan.dtype}"
                )
            expected = _plan_numel(n_in, n_out, resample)
            if plan.dim() != 1 or plan.numel() != expected or not plan.is_contiguous():
                raise ValueError(
                    f"{_RESIZE_OP}: {name} must be the contiguous 1-D plan of resample_plan({n_in}, {n_out}) "
                    f"({expected} values), got shape {list(plan.shape)}"
                )
    if cv2 and vertical_first:
        raise ValueError(f"{_RESIZE_OP}: vertical_first must be False: OpenCV resamples across first")
    if resample in FLOAT_BILINEAR_FILTERS and vertical_first:
        raise ValueError(f"{_RESIZE_OP}: vertical_first must be False: the float32 bilinear has one pass")
    if resample in ANTIALIAS_FLOAT_FILTERS and vertical_first:
        raise ValueError(f"{_RESIZE_OP}: vertical_first must be False: torch resamples across first")
    if len(crop) != 4:
        raise ValueError(f"{_RESIZE_OP}: crop must be (top, left, height, width), got {list(crop)}")
    top, left, h, w = crop
    if top < 0 or left < 0 or h < 1 or w < 1 or top + h > size[0] or left + w > size[1]:
        raise ValueError(  # Python ints do not wrap: the C++ check is written not to either
            f"{_RESIZE_OP}: crop (top, left, height, width) = {list(crop)} must lie inside the resampled image of "
            f"size {list(size)}"
        )
    h, w = _check_pad(pad, h, w)
    if len(patches) == 0:
        if clip:
            raise ValueError(
                f"{_RESIZE_OP}: clip needs patches (temporal_patch_size, patch_size, merge_size): it groups frames "
                "into temporal patches"
            )
        shape = [batch, channels, h, w]
    else:
        if len(patches) not in (3, 4) or min(patches[:3]) < 1 or list(patches[3:]) not in ([], [0], [1], [2]):
            raise ValueError(
                f"{_RESIZE_OP}: patches must be empty or (temporal_patch_size, patch_size, merge_size) >= 1 and "
                f"optionally a layout, 0 (channels first), 1 (channels last) or 2 (strips), got {list(patches)}"
            )
        t, p, m = patches[:3]
        strips = list(patches[3:]) == [2]
        if strips and (t != 1 or m != 1 or clip):
            raise ValueError(
                f"{_RESIZE_OP}: strips (layout 2) are of single patches: temporal_patch_size and merge_size must be "
                f"1 and clip False, got patches {list(patches)}{' and clip True' if clip else ''}"
            )
        if max(p * m, channels * t * p * p) >= 1 << 63:
            raise ValueError(f"{_RESIZE_OP}: patches {list(patches)} overflow the output's row length")
        if h % (p * m) or w % (p * m):
            raise ValueError(
                f"{_RESIZE_OP}: the {'padded canvas' if pad else 'cropped image'} {h}x{w} must be a multiple of patch_size * merge_size = {p * m} on "
                "both sides"
            )
        if clip and batch % t:
            raise ValueError(
                f"{_RESIZE_OP}: clip: the {batch} input frames must be whole groups of temporal_patch_size {t} (pad "
                "the clip with its last frame)"
            )
        groups = batch // t if clip else batch
        if strips:
            shape = [channels, p, batch * (h // p) * (w // p) * p]
        else:
            shape = [groups * (h // p) * (w // p), channels * t * p * p]
    if out.device != input.device:
        raise RuntimeError(f"{_RESIZE_OP}: out must be on input's device {input.device}, got {out.device}")
    if out.dtype not in RESIZE_OUTPUT_DTYPES:
        raise TypeError(
            f"{_RESIZE_OP}: out must have one of the dtypes {dtype_names(RESIZE_OUTPUT_DTYPES)}, got {out.dtype}"
        )
    if list(out.shape) != shape:
        raise ValueError(f"{_RESIZE_OP}: out must have shape {shape}, got {list(out.shape)}")
    if len(patches) == 4 and patches[3] == 2 and not out.is_contiguous():
        pitch = out.stride(1)
        if out.stride(2) != 1 or pitch < shape[2] or out.stride(0) != shape[1] * pitch:
            raise ValueError(
                f"{_RESIZE_OP}: out must be contiguous, or for strips a window of wider strips (strides "
                f"({shape[1]} * pitch, pitch, 1), pitch >= {shape[2]}), got stride {list(out.stride())}"
            )
    elif not out.is_contiguous():
        raise ValueError(f"{_RESIZE_OP}: out must be contiguous, got stride {list(out.stride())}")
    if any(t is not None and _may_overlap(out, t) for t in (input, weight, bias, row_plan, col_plan)):
        raise ValueError(
            f"{_RESIZE_OP}: out overlaps an input of the call (input, weight, bias or a plan); pass a separate output "
            "buffer"
        )


def _check_pad(pad, crop_h: int, crop_w: int) -> tuple[int, int]:
    """The canvas's sides (the crop's without padding), after the C++ op's checks of `pad`, in its words."""
    if len(pad) == 0:
        return crop_h, crop_w
    if len(pad) != 5:
        raise ValueError(
            f"{_RESIZE_OP}: pad must be empty or (canvas_height, canvas_width, top, left, fill), got {list(pad)}"
        )
    canvas_h, canvas_w, top, left, fill = pad
    if canvas_h < crop_h or canvas_w < crop_w or max(canvas_h, canvas_w) >= MAX_SIDE:
        raise ValueError(
            f"{_RESIZE_OP}: pad's canvas {canvas_h}x{canvas_w} must hold the cropped image {crop_h}x{crop_w} and "
            "have sides below 2^24"
        )
    if top < 0 or left < 0 or top + crop_h > canvas_h or left + crop_w > canvas_w:
        raise ValueError(
            f"{_RESIZE_OP}: pad's (top, left) = ({top}, {left}) must put the cropped image {crop_h}x{crop_w} inside "
            f"the canvas {canvas_h}x{canvas_w}"
        )
    if not 0 <= fill <= 255:
        raise ValueError(f"{_RESIZE_OP}: pad's fill must be a byte in [0, 255], got {fill}")
    return canvas_h, canvas_w


# Autograd. Engines run under torch.inference_mode, which skips these kernels; anyone differentiating
# gets exact gradients from `affine` and a clear refusal from `affine_out`, never a silent None.


def _along(t: Tensor, dim: int, ndim: int) -> Tensor:
    """A [C] tensor viewed to broadcast along `dim` of an `ndim`-D tensor."""
    shape = [1] * ndim
    shape[dim] = -1
    return t.view(shape)


def _affine_setup_context(ctx, inputs, output) -> None:
    input, weight, _bias, dim, _out_dtype = inputs
    ctx.dim = dim % input.dim()
    ctx.save_for_backward(input, weight)


def _affine_backward(ctx, grad: Tensor):
    # y = x * w[c] + b[c] in fp32, then rounded to out_dtype; the rounding passes gradients through as
    # Tensor.to does. Backward is not a hot path: plain fp32 eager ops.
    input, weight = ctx.saved_tensors
    g = grad.float()
    others = [d for d in range(g.dim()) if d != ctx.dim]

    def per_channel(t: Tensor) -> Tensor:
        return t.sum(others) if others else t  # sum([]) would reduce every dim

    grad_input = (g * _along(weight, ctx.dim, g.dim())).to(input.dtype) if ctx.needs_input_grad[0] else None
    grad_weight = per_channel(g * input.float()) if ctx.needs_input_grad[1] else None
    grad_bias = per_channel(g) if ctx.needs_input_grad[2] else None
    return grad_input, grad_weight, grad_bias, None, None


torch.library.register_autograd("fused_input_norm::affine", _affine_backward, setup_context=_affine_setup_context)

# Out variants cannot carry an autograd formula (torch.library refuses them): without this kernel, writing
# into `out` would silently drop the graph. It refuses when a gradient is wanted and otherwise passes through.
_autograd_lib = torch.library.Library("fused_input_norm", "FRAGMENT")


def _affine_out_autograd(keyset, out, input, weight, bias, dim=1):  # the dispatcher drops default arguments
    for name, t in (("out", out), ("input", input), ("weight", weight), ("bias", bias)):
        if not isinstance(t, Tensor):  # a direct torch.ops call with None: the kernel's tagged error, as for affine
            raise RuntimeError(
                f"[TypeError] fused_input_norm.affine_out: {name} must be a torch.Tensor, got "
                f"{'None' if t is None else type(t).__name__}"
            )
    if torch.is_grad_enabled() and any(t.requires_grad for t in (out, input, weight, bias)):
        raise RuntimeError(
            "fused_input_norm.affine_out: no gradients flow through an out= call, and an argument requires grad; "
            "use fused_input_norm.affine (differentiable in input, weight and bias), or call under torch.no_grad()"
        )
    return _AFFINE_OUT.redispatch(keyset & torch._C._after_autograd_keyset, out, input, weight, bias, dim)


_autograd_lib.impl("affine_out", _affine_out_autograd, "Autograd", with_keyset=True)
