"""resample="bilinear_no_antialias" against torch itself: F.interpolate(mode="bilinear", antialias=False,
align_corners=False) of a uint8 CPU tensor, the resize vLLM's Isaac processor runs. Bytes equal (the identity
module's float32 values are torch's bytes) on photos and a fuzz of sizes, both layouts, 1/3/4 channels (the GPU
kernels' per-thread code and the CPU kernels at each capability: tests/test_resize_emulation.py). torch
runs its integer kernel only at CPU capability AVX2 and above: elsewhere these tests skip, and vllm_isaac hands
its calls back."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_resize import PHOTOS, photo, to_chw
from test_resize_cv2 import SIZE_CASES, coffee_crop

from fused_input_norm import FusedInputNorm, ops
from fused_input_norm.resize import torch_uint8_kernel

pytestmark = pytest.mark.skipif(
    not torch_uint8_kernel(), reason="torch resizes uint8 with its integer kernel only at CPU capability AVX2+"
)
FILTER = "bilinear_no_antialias"
# torch 2.14's kernel fails an internal assert for a 1x1 output ("num_channels == unpacked_output.size(0)").
CASES = [case for case in SIZE_CASES if case != "1x1"]


def torch_resize(chw: torch.Tensor, size) -> torch.Tensor:
    """torch's own resize of a uint8 [C, H, W] (any strides) to `size`: uint8 [C, h, w]."""
    out = F.interpolate(chw[None], size=tuple(size), mode="bilinear", align_corners=False, antialias=False)
    assert out.dtype == torch.uint8
    return out[0]


def resized_bytes(hwc: np.ndarray, size, channels_last=False) -> torch.Tensor:
    module = FusedInputNorm.identity(hwc.shape[2])
    if channels_last:
        return module.resize(torch.from_numpy(hwc), torch.float32, size, resample=FILTER, channel_dim=-1)
    return module.resize(to_chw(hwc), torch.float32, size, resample=FILTER)


def assert_same_bytes(got: torch.Tensor, expected: torch.Tensor, label: str) -> None:
    assert got.dtype == torch.float32 and got.shape == expected.shape, (label, got.shape, expected.shape)
    n = int((got != expected.float()).sum())
    assert n == 0, f"{label}: {n} of {got.numel()} bytes differ from torch's"


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", PHOTOS)
def test_equal_to_torch_on_photos(name, case):
    hwc = photo(name)
    size = SIZE_CASES[case](*hwc.shape[:2])
    assert_same_bytes(resized_bytes(hwc, size), torch_resize(to_chw(hwc), size), f"{name} -> {size}")


@settings(max_examples=60, deadline=None, derandomize=True, print_blob=True)
@given(
    top=st.integers(0, 200),
    left=st.integers(0, 300),
    in_h=st.integers(1, 120),
    in_w=st.integers(1, 160),
    out_h=st.integers(2, 300),
    out_w=st.integers(2, 300),
    channels=st.sampled_from([1, 3, 4]),
    channels_last=st.booleans(),
)
@example(top=0, left=0, in_h=1, in_w=1, out_h=200, out_w=3, channels=3, channels_last=False)
@example(top=0, left=0, in_h=120, in_w=160, out_h=2, out_w=159, channels=4, channels_last=True)
@example(top=3, left=5, in_h=117, in_w=2, out_h=117, out_w=5, channels=1, channels_last=False)
def test_random_sizes_equal_to_torch(top, left, in_h, in_w, out_h, out_w, channels, channels_last):
    hwc = coffee_crop(top, left, in_h, in_w, channels)
    size = (out_h, out_w)
    source = torch.from_numpy(hwc).permute(2, 0, 1)  # torch's channels-last input, as Isaac hands it over
    expected = torch_resize(source if channels_last else source.contiguous(), size)
    assert_same_bytes(resized_bytes(hwc, size, channels_last), expected, f"{hwc.shape} -> {size}")


def test_downscale_reads_two_taps_not_the_antialiased_window():
    """The filter is not the antialiased one: on a 4x downscale the two differ, and only the new one is torch's."""
    hwc = photo("astronaut")
    size = (128, 128)
    antialiased = FusedInputNorm.identity().resize(to_chw(hwc), torch.float32, size, resample="bilinear",
                                                   reference="torchvision")  # fmt: skip
    expected = torch_resize(to_chw(hwc), size)
    assert int((antialiased != expected.float()).sum()) > 1000
    assert_same_bytes(resized_bytes(hwc, size), expected, "astronaut 4x down")


@pytest.mark.parametrize("in_size, out_size", [(1920, 448), (448, 1920), (7, 7), (1, 9), (3000, 2)])
def test_plan_size_as_the_fake_op_computes_it(in_size, out_size):
    """torch.compile's fake op sizes the plan without running the planner: the same numel (3 taps at any
    downscale: the triangle keeps its support)."""
    plan = ops.resample_plan(in_size, out_size, FILTER, "pil")
    assert plan.numel() == ops._plan_numel(in_size, out_size, FILTER) == 4 + out_size * (2 + 3)
