"""Shared test helpers: the independent float64 reference, tolerances, constants, and device params."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import fused_input_norm  # noqa: F401  (loads the ops)

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
# Qwen2-VL's preprocessor_config.json as its checkpoints ship it, less the processor type keys each test names.
QWEN2_VL_CHECKPOINT = {
    "min_pixels": 3136,
    "max_pixels": 12845056,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
}
INPUT_DTYPES = [torch.uint8, torch.uint16, torch.float16, torch.bfloat16, torch.float32]
OUTPUT_DTYPES = [torch.float16, torch.bfloat16, torch.float32]

HAS_CUDA = torch.cuda.is_available()
NO_CUDA_REASON = "needs a CUDA/ROCm GPU: torch.cuda.is_available() is False on this machine"
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)
DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]


def random_input(shape, dtype, device="cpu", generator=None):
    """Random pixels: the full uint8/uint16 range, or floats spread over a few units with both signs."""
    if dtype == torch.uint8:
        x = torch.randint(0, 256, shape, generator=generator, dtype=torch.int32)
    elif dtype == torch.uint16:
        x = torch.randint(0, 65536, shape, generator=generator, dtype=torch.int32)
    else:
        x = torch.randn(shape, generator=generator) * 3
    return x.to(dtype).to(device)


def random_affine(channels, generator=None):
    weight = torch.rand(channels, generator=generator) * 4 - 2
    bias = torch.rand(channels, generator=generator) * 4 - 2
    return weight, bias


def reference(x, weight, bias, dim):
    """(x * weight[c] + bias[c]) in float64 on the CPU: independent of the code under test."""
    shape = [1] * x.dim()
    shape[dim] = -1
    w = weight.double().cpu().view(shape)
    b = bias.double().cpu().view(shape)
    return x.cpu().double() * w + b


# Unit roundoff (half an ulp at 1.0) of each output dtype.
_ROUNDOFF = {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-9, torch.float16: 2.0**-11}
# float16's smallest subnormal spacing: absolute error floor when rounding tiny values.
_ABS_FLOOR = {torch.float32: 2.0**-149, torch.bfloat16: 2.0**-133, torch.float16: 2.0**-24}


def assert_affine_close(y, x, weight, bias, dim, ref=None):
    """y must equal the float64 reference up to fp32 math plus one rounding to y's dtype.

    fp32 math (one FMA, or a multiply and an add) errs by at most ~2 fp32 roundoffs of |x*w| + |b|;
    the final rounding adds half an ulp of y's dtype. NaN and Inf must match exactly.
    """
    if ref is None:
        ref = reference(x, weight, bias, dim)
    assert y.shape == ref.shape
    y64 = y.cpu().double()
    shape = [1] * x.dim()
    shape[dim] = -1
    magnitude = x.cpu().double().abs() * weight.double().cpu().abs().view(shape) + bias.double().cpu().abs().view(shape)
    # The reference rounded to the output dtype is what `Tensor.to` would give from exact math.
    expected = ref.to(y.dtype).double()
    finite = torch.isfinite(expected)
    tol = 2 * _ROUNDOFF[y.dtype] * expected.abs() + 3 * 2.0**-24 * magnitude + _ABS_FLOOR[y.dtype]
    err = (y64 - expected).abs()
    bad = finite & ~(err <= tol)
    assert not bad.any(), (
        f"{int(bad.sum())} of {y.numel()} elements off; worst at {tuple(torch.nonzero(bad)[0].tolist())}: "
        f"got {y64[bad][0].item()!r}, expected {expected[bad][0].item()!r}"
    )
    torch.testing.assert_close(y64[~finite], expected[~finite], rtol=0, atol=0, equal_nan=True)


class RecordOps(TorchDispatchMode):
    """Records every op dispatched while active, with its arguments (to check what ran, and on what)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append((func, args))
        return func(*args, **(kwargs or {}))

    def ops(self):
        return [func for func, _ in self.calls]


def _plain(value):
    """A recorded property as plain Python: NumPy and torch scalars as numbers, containers element-wise."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    return value


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # pytest-xdist (CI runs the suites with -n 2) sends each report to the controller through execnet, which
    # refuses NumPy scalars: the figures tests record (record_property) travel as plain numbers.
    outcome = yield
    report = outcome.get_result()
    report.user_properties = [(name, _plain(value)) for name, value in report.user_properties]
