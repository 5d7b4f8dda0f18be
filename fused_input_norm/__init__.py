"""fused_input_norm: exact image and video preprocessing for VLM serving, with vLLM and SGLang plugins.

A model's processor config and encoded images or videos in, transformers' outputs out (FusedImageProcessor,
FusedVideoProcessor): the resize, rescale, normalize and layout as one fused kernel per image, on the CPU or
a GPU. `import fused_input_norm` loads the compiled ops (torch.ops.fused_input_norm.*) and their fake
kernels, the FusedInputNorm module and the processors; it never imports vllm or sglang (their plugins,
vllm_plugin.py and sglang_plugin.py, are loaded by the engines through their entry points).
"""

import json
import os

import torch

# FUSED_INPUT_NORM_LIBRARY names a libfused_input_norm.so built by CMake (the same ops) to load instead of
# the package's own extension: scripts/check_rocm.sh runs the op tests through its HIP build that way.
if os.environ.get("FUSED_INPUT_NORM_LIBRARY"):
    torch.ops.load_library(os.environ["FUSED_INPUT_NORM_LIBRARY"])
else:
    from . import _C  # noqa: F401  (registers torch.ops.fused_input_norm.*)
from .geometry import smart_resize
from .module import FusedInputNorm
from .ops import affine, affine_out, resample_plan, resize_affine_out
from .processor import FusedImageProcessor
from .video import FusedVideoProcessor

__all__ = [
    "FusedImageProcessor",
    "FusedInputNorm",
    "FusedVideoProcessor",
    "affine",
    "affine_out",
    "build_info",
    "resample_plan",
    "resize_affine_out",
    "smart_resize",
]
__version__ = "0.1.0"


def build_info() -> dict:
    """What was compiled, and the CPU kernels this process runs: {"backends": ["cpu", "cuda"], "cuda_version":
    "13.0", "archs": ["sm_80", ...], "cpu_capability": "avx2", "torch": ...}."""
    info = json.loads(torch.ops.fused_input_norm.build_info())
    info["torch"] = torch.__version__
    return info
