"""Typed Python entry points for torch.ops.fused_input_norm.* and their fake (meta) kernels.

The C++ kernels check every argument in eager mode. They are built on the LibTorch stable ABI, which can
raise only RuntimeError, so a failed check's message starts with the Python exception it stands for
("[ValueError] fused_input_norm.affine: ..."): the wrappers below raise that type with the rest of the
message. The fake kernels run instead whenever any argument is a fake or meta tensor (torch.compile,
torch.export, FakeTensorMode, a meta tensor mixed with real ones), so they repeat the checks that can be
decided from metadata, raising the same exception types directly.
"""

import re

import torch
from torch import Tensor

INPUT_DTYPES = (torch.uint8, torch.uint16, torch.float16, torch.bfloat16, torch.float32)
OUTPUT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# Looked up once: resolving torch.ops.<namespace>.<op>.default costs ~0.2 us on every call.
_AFFINE = torch.ops.fused_input_norm.affine.default
_AFFINE_OUT = torch.ops.fused_input_norm.affine_out.default


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


def _check_types(op: str, dim: object, **tensors: object) -> None:
    # The dispatcher would reject these too, but as a RuntimeError; a wrong Python type is a TypeError.
    for name, value in tensors.items():
        if not isinstance(value, Tensor):
            raise TypeError(f"fused_input_norm.{op}: {name} must be a torch.Tensor, got {type(value).__name__}")
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"fused_input_norm.{op}: dim must be an int, got {type(dim).__name__}")


_TAGGED = re.compile(r"\[(ValueError|TypeError|IndexError)\] (.*)", re.DOTALL)
_TAGGED_TYPES = {"ValueError": ValueError, "TypeError": TypeError, "IndexError": IndexError}


def _typed(error: RuntimeError) -> Exception:
    """The exception a C++ check's tag names, with the tag removed; `error` itself when it has no tag."""
    tagged = _TAGGED.match(str(error))
    return _TAGGED_TYPES[tagged[1]](tagged[2]) if tagged else error


def _names(dtypes) -> str:
    return ", ".join(str(d) for d in dtypes)


def _check_args(op: str, input: Tensor, weight: Tensor, bias: Tensor, dim: int) -> None:
    _check_types(op, input=input, weight=weight, bias=bias, dim=dim)
    if input.dtype not in INPUT_DTYPES:
        raise TypeError(
            f"fused_input_norm.{op}: input must have one of the dtypes {_names(INPUT_DTYPES)}, got {input.dtype}"
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
        raise TypeError(f"fused_input_norm.affine: out_dtype must be one of {_names(OUTPUT_DTYPES)}, got {out_dtype}")
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
            f"fused_input_norm.affine_out: out must have one of the dtypes {_names(OUTPUT_DTYPES)}, got {out.dtype}"
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
