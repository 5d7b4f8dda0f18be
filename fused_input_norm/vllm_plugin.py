"""vLLM plugin: runs vLLM's FusedMMInputNorm through torch.ops.fused_input_norm.

vLLM calls `register` in each of its processes through the `vllm.general_plugins` entry point (see
pyproject.toml; `VLLM_PLUGINS` filters plugins by name). It registers a subclass of vLLM's own
FusedMMInputNorm as its out-of-tree replacement, so every model that builds that class gets this one:
constructed, configured and stored exactly as upstream's (its __init__, buffers and input_dtype), with
forward_cuda, forward_hip, forward_native and forward_oot running this package's op: no 2^31-element limit,
no contiguous copy of strided input, the vectorized multi-threaded CPU kernel instead of eager ops.
Inputs the op has no kernel for (another device, float64 pixels) and the XPU path stay upstream's.

vllm is imported only inside `register`: importing this module, or fused_input_norm, never imports it.
"""

import importlib
import logging

import torch

from . import build_info, ops
from .module import channel_view

# A child of vLLM's logger: our lines appear in vLLM's log, in its format and at its level.
logger = logging.getLogger("vllm.plugins.fused_input_norm")

UPSTREAM_MODULE = "vllm.model_executor.layers.fusion.mm_input_norm"
UPSTREAM_CLASS = "FusedMMInputNorm"


def register() -> None:
    """The entry point. Never raises: a vLLM this cannot serve keeps its own class, and the log says why."""
    try:
        from vllm.model_executor.custom_op import CustomOp, op_registry_oot
    except ImportError as e:
        logger.warning("fused_input_norm: not registering: vLLM's CustomOp registry cannot be imported (%s)", e)
        return
    try:
        upstream = getattr(importlib.import_module(UPSTREAM_MODULE), UPSTREAM_CLASS)
    except (ImportError, AttributeError) as e:
        logger.warning(
            "fused_input_norm: not registering: this vLLM has no %s.%s to replace (%s)",
            UPSTREAM_MODULE,
            UPSTREAM_CLASS,
            e,
        )
        return
    registered = op_registry_oot.get(UPSTREAM_CLASS)
    if registered is not None:  # vLLM may load plugins more than once in a process
        if getattr(registered, "__module__", None) != __name__:
            logger.warning(
                "fused_input_norm: not registering: %s is already replaced by %s", UPSTREAM_CLASS, registered
            )
        return
    try:
        CustomOp.register_oot(replacement_for(upstream), name=UPSTREAM_CLASS)
    except Exception:
        logger.exception("fused_input_norm: registering the %s replacement failed; vLLM keeps its own", UPSTREAM_CLASS)
        return
    logger.info("fused_input_norm: %s now runs torch.ops.fused_input_norm", UPSTREAM_CLASS)


def replacement_for(upstream: type) -> type:
    """The subclass of vLLM's FusedMMInputNorm class `upstream` that CustomOp instantiates in its place."""
    backends = {"cuda" if name == "hip" else name for name in build_info()["backends"]}  # ROCm devices are "cuda"

    def fused_or(upstream_forward):
        def forward(self, pixel_values: torch.Tensor, visual_dtype: torch.dtype) -> torch.Tensor:
            if (
                pixel_values.device.type not in backends
                or pixel_values.dtype not in ops.INPUT_DTYPES
                or visual_dtype not in ops.OUTPUT_DTYPES
            ):
                return upstream_forward(self, pixel_values, visual_dtype)
            x, dim = channel_view(pixel_values, self.channel, self.layout)
            weight, bias = self.weight, self.bias
            if weight.dtype != torch.float32:  # a model-wide cast (.to(bf16)): upstream's kernels widen them too
                weight, bias = weight.float(), bias.float()
            return ops.affine(x, weight, bias, dim, visual_dtype).view(pixel_values.shape)

        forward.__name__ = forward.__qualname__ = upstream_forward.__name__
        forward.__doc__ = f"torch.ops.fused_input_norm.affine, or upstream's {upstream_forward.__name__} for inputs it has no kernel for."
        return forward

    class FusedMMInputNorm(upstream):
        __doc__ = f"vLLM's {UPSTREAM_CLASS} (constructor, buffers, input_dtype), normalizing through torch.ops.fused_input_norm."
        forward_cuda = fused_or(upstream.forward_cuda)
        forward_hip = fused_or(upstream.forward_hip)
        forward_native = fused_or(upstream.forward_native)
        forward_oot = fused_or(upstream.forward_oot)

    FusedMMInputNorm.__qualname__ = UPSTREAM_CLASS
    return FusedMMInputNorm
