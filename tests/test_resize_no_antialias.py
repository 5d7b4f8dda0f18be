"""resample="bilinear_no_antialias" and the float32 filters against torch itself: F.interpolate(mode="bilinear",
antialias=False, align_corners=False) of a uint8 CPU tensor (the resize vLLM's Isaac processor runs) and of the same
tensor as float32 (vLLM's MiMo processor, transformers' Molmo2), whose kernel torch picks per call
(resize.torch_float_bilinear: "bilinear_no_antialias_f32" or "_f32_cl"), at 1 and 2 torch threads. Bytes, and
float32 values, equal (the identity module's float32 values are torch's) on photos and a fuzz of sizes, both
layouts, 1/3/4 channels (the GPU kernels' per-thread code and the CPU kernels at each capability:
tests/test_resize_emulation.py). torch runs its integer kernel, and compiles its float one with FMAs, only at CPU
capability AVX2 and above: elsewhere these tests skip, and vllm_isaac / vllm_mimo hand their calls back."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_resize import PHOTOS, photo, to_chw
from test_resize_cv2 import SIZE_CASES, coffee_crop

from fused_input_norm import FusedInputNorm, ops
from fused_input_norm import resize as resizing
from fused_input_norm.resize import torch_float_bilinear, torch_float_fma_kernel, torch_uint8_kernel

FILTER, FLOAT_FILTER = "bilinear_no_antialias", "float32"  # float32: the filter torch_float_bilinear picks
FILTERS = [
    pytest.param(FILTER, marks=pytest.mark.skipif(not torch_uint8_kernel(), reason="torch resizes uint8 with its "
                                                  "integer kernel only at CPU capability AVX2+")),
    pytest.param(FLOAT_FILTER, marks=pytest.mark.skipif(not torch_float_fma_kernel(), reason="torch's float "
                                                        "bilinear fuses its products into FMAs only on x86 at AVX2+")),
]  # fmt: skip
# torch 2.14's uint8 kernel fails an internal assert for a 1x1 output ("num_channels == unpacked_output.size(0)").
CASES = {FILTER: [case for case in SIZE_CASES if case != "1x1"], FLOAT_FILTER: list(SIZE_CASES)}


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    """torch's thread count, which picks its float kernel (3 channels: the channels-last one with 1 thread)."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


def torch_resize(chw: torch.Tensor, size, resample=FILTER) -> torch.Tensor:
    """torch's own resize of a uint8 [C, H, W] (any strides) to `size`: uint8 [C, h, w], or float32 for the
    float filter (of chw.float(), which keeps chw's strides, as MiMo's processor converts)."""
    source = chw.float() if resample == FLOAT_FILTER else chw
    out = F.interpolate(source[None], size=tuple(size), mode="bilinear", align_corners=False, antialias=False)
    assert out.dtype == source.dtype
    return out[0]


def resized(hwc: np.ndarray, size, resample=FILTER, channels_last=False) -> torch.Tensor:
    """The identity module's resize; the float filter torch would run now on the same layout."""
    if resample == FLOAT_FILTER:
        resample = torch_float_bilinear(hwc.shape[2], size, channels_last)
    module = FusedInputNorm.identity(hwc.shape[2])
    if channels_last:
        return module.resize(torch.from_numpy(hwc), torch.float32, size, resample=resample, channel_dim=-1)
    return module.resize(to_chw(hwc), torch.float32, size, resample=resample)


def assert_same_values(got: torch.Tensor, expected: torch.Tensor, label: str) -> None:
    assert got.dtype == torch.float32 and got.shape == expected.shape, (label, got.shape, expected.shape)
    n = int((got != expected.float()).sum())
    assert n == 0, f"{label}: {n} of {got.numel()} values differ from torch's"


@pytest.mark.parametrize("resample", FILTERS)
@pytest.mark.parametrize("case", list(SIZE_CASES))
@pytest.mark.parametrize("name", PHOTOS)
def test_equal_to_torch_on_photos(name, case, resample, threads):
    if case not in CASES[resample]:
        pytest.skip("torch's uint8 kernel fails on a 1x1 output")
    hwc = photo(name)
    size = SIZE_CASES[case](*hwc.shape[:2])
    got = resized(hwc, size, resample)
    assert_same_values(got, torch_resize(to_chw(hwc), size, resample), f"{name} -> {size}")


@pytest.mark.parametrize("resample", FILTERS)
# The threads fixture is set once for all examples, as intended.
@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
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
def test_random_sizes_equal_to_torch(top, left, in_h, in_w, out_h, out_w, channels, channels_last, resample, threads):
    hwc = coffee_crop(top, left, in_h, in_w, channels)
    size = (out_h, out_w)
    source = torch.from_numpy(hwc).permute(2, 0, 1)  # torch's channels-last input, as Isaac and MiMo hand it over
    expected = torch_resize(source if channels_last else source.contiguous(), size, resample)
    assert_same_values(resized(hwc, size, resample, channels_last), expected, f"{hwc.shape} -> {size}")


@pytest.mark.parametrize("resample", FILTERS)
def test_downscale_reads_two_taps_not_the_antialiased_window(resample, threads):
    """The filter is not the antialiased one: on a 4x downscale the two differ, and only the new one is torch's."""
    hwc = photo("astronaut")
    size = (128, 128)
    antialiased = FusedInputNorm.identity().resize(to_chw(hwc), torch.float32, size, resample="bilinear",
                                                   reference="torchvision")  # fmt: skip
    expected = torch_resize(to_chw(hwc), size, resample)
    assert int((antialiased != expected.float()).sum()) > 1000
    assert_same_values(resized(hwc, size, resample), expected, "astronaut 4x down")


@pytest.mark.skipif(not torch_float_fma_kernel(), reason="torch's float bilinear has FMAs only on x86 at AVX2+")
@pytest.mark.parametrize(
    "channels, size, channels_last, threads, kernel",
    [
        (3, (301, 450), False, 2, "bilinear_no_antialias_f32"),  # the common case: generic
        (3, (301, 450), True, 1, "bilinear_no_antialias_f32_cl"),  # one thread, RGB
        (1, (301, 450), False, 1, "bilinear_no_antialias_f32"),  # one thread, not RGB
        (3, (61, 67), False, 2, "bilinear_no_antialias_f32_cl"),  # out_h + out_w <= 128
        (3, (61, 68), False, 2, "bilinear_no_antialias_f32"),
        (4, (301, 450), True, 2, "bilinear_no_antialias_f32_cl"),  # channels-last, more than 3 channels
        (4, (301, 450), False, 2, "bilinear_no_antialias_f32"),
    ],
)
def test_torch_float_bilinear_names_the_kernel_torch_runs(channels, size, channels_last, threads, kernel):
    """Each of torch's conditions, on both sides of it: the kernel torch_float_bilinear names equals torch, and
    the other one differs in many values (the two sum differently). Values are not bytes either."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert torch_float_bilinear(channels, size, channels_last) == kernel
        hwc = coffee_crop(10, 20, 200, 300, channels)
        source = torch.from_numpy(hwc).permute(2, 0, 1)
        expected = torch_resize(source if channels_last else source.contiguous(), size, FLOAT_FILTER)
        other = {"bilinear_no_antialias_f32": "bilinear_no_antialias_f32_cl"}.get(kernel, "bilinear_no_antialias_f32")
        got, wrong = (resized(hwc, size, name, channels_last) for name in (kernel, other))
    finally:
        torch.set_num_threads(before)
    assert_same_values(got, expected, f"{kernel} {size}")
    assert int((wrong != expected).sum()) > expected.numel() // 20
    assert int((got != got.round()).sum()) > got.numel() // 2


@pytest.mark.parametrize(
    "resample, taps", [(FILTER, 3), ("bilinear_no_antialias_f32", 2), ("bilinear_no_antialias_f32_cl", 2)]
)
@pytest.mark.parametrize("in_size, out_size", [(1920, 448), (448, 1920), (7, 7), (1, 9), (3000, 2)])
def test_plan_size_as_the_fake_op_computes_it(in_size, out_size, resample, taps):
    """torch.compile's fake op sizes the plan without running the planner: the same numel (bilinear_no_antialias:
    3 taps at any downscale, the triangle keeps its support; the float filter: i0 and i0 + 1)."""
    plan = ops.resample_plan(in_size, out_size, resample, "pil")
    assert plan.numel() == ops._plan_numel(in_size, out_size, resample) == 4 + out_size * (2 + taps)


@pytest.mark.skipif(not torch_float_fma_kernel(), reason="torch's float bilinear has FMAs only on x86 at AVX2+")
@pytest.mark.parametrize("values", ["bytes", "normal", "huge"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["planar", "channels-last"])
def test_a_float32_input_of_any_values_is_torchs_own_bits(values, channels_last, threads):
    """The float filters also read a float32 input (transformers' Molmo2 resizes image.float() through
    torchvision, vLLM's MiMo videos are float32 frames), of any values: bytes, a normal spread, 1e6 and beyond.
    torch's values, bit for bit, whichever kernel torch runs for the call."""
    rng = np.random.default_rng(threads)
    plans = resizing.PlanCache()
    for channels, in_size, size in [(3, (301, 301), (448, 448)), (1, (37, 53), (20, 90)), (4, (100, 80), (100, 33)),
                                    (3, (64, 64), (30, 40)), (3, (9, 700), (400, 12))]:  # fmt: skip
        shape = (2, channels, *in_size)
        if values == "bytes":
            image = torch.from_numpy(rng.integers(0, 256, shape).astype(np.float32))
        else:
            image = torch.from_numpy(rng.normal(0, 1e6 if values == "huge" else 1, shape).astype(np.float32))
        if channels_last:
            image = image.contiguous(memory_format=torch.channels_last)
        expected = F.interpolate(image, size=size, mode="bilinear", align_corners=False, antialias=False)
        out = torch.empty(2, channels, *size)
        name = torch_float_bilinear(channels, size, channels_last)
        ones, zeros = torch.ones(channels), torch.zeros(channels)
        resizing.resize_into(out, image, ones, zeros, size, (0, 0, *size), name, "torchvision", plans)
        assert_same_values(out, expected, f"{values} {tuple(image.shape)} -> {size} ({name})")


@pytest.mark.skipif(not torch_float_fma_kernel(), reason="torch's float bilinear has FMAs only on x86 at AVX2+")
def test_a_padded_canvas_is_torchs_resize_of_the_crop_padded(threads):
    """A canvas with padding (top and bottom, one side, none: the CPU fills a band only where it holds padding), a
    crop, and an affine (weights powers of two: x * w + b rounds once however torch computes it): torch's resize,
    cropped, times w plus b, on a canvas of the fill through the same affine. Bytes and a float32 input."""
    rng = np.random.default_rng(threads)
    plans = resizing.PlanCache()
    weight, bias = torch.tensor([0.5, 2.0, -1.0]), torch.tensor([1.0, -3.0, 0.25])
    for size, crop, pad in [
        ((97, 160), (5, 7, 80, 150), (96, 160, 16, 0, 255)),
        ((123, 90), (0, 0, 123, 90), (123, 100, 0, 10, 0)),  # width only
        ((60, 171), (0, 0, 60, 171), (70, 171, 0, 0, 255)),  # height only
        ((50, 75), (1, 2, 48, 70), (48, 70, 0, 0, 0)),  # a canvas the size of the crop
    ]:
        top, left, h, w = crop
        canvas_h, canvas_w, pad_top, pad_left, fill = pad
        for image in (
            torch.from_numpy(rng.integers(0, 256, (1, 3, 123, 171), dtype=np.uint8)),
            torch.from_numpy(rng.normal(0, 100, (1, 3, 123, 171)).astype(np.float32)),
        ):
            name = torch_float_bilinear(3, size)
            resized_crop = F.interpolate(image.float(), size=size, mode="bilinear", align_corners=False)
            box = torch.addcmul(
                bias.view(3, 1, 1), resized_crop[0, :, top : top + h, left : left + w], weight.view(3, 1, 1)
            )
            # the fill is a byte, through the affine too
            expected = (
                torch.full((3, canvas_h, canvas_w), float(fill)).mul(weight.view(3, 1, 1)).add(bias.view(3, 1, 1))
            )
            expected[:, pad_top : pad_top + h, pad_left : pad_left + w] = box
            out = torch.full((1, 3, canvas_h, canvas_w), float("nan"))
            resizing.resize_into(out, image, weight, bias, size, crop, name, "torchvision", plans, pad=pad)
            assert_same_values(out[0], expected, f"{image.dtype} {size} {crop} {pad} ({name})")


@pytest.mark.parametrize("resample", ["bilinear", "bilinear_no_antialias", "cv2_cubic_f32"])
def test_a_float32_input_is_refused_by_the_byte_filters_naming_it(resample):
    plans = resizing.PlanCache()
    out = torch.full((1, 3, 5, 6), 7.0)
    with pytest.raises(
        TypeError, match=r"input must be a torch.uint8 image \(torch.float32 only with the filters 'bil"
    ):
        resizing.resize_into(out, torch.zeros(1, 3, 9, 9), torch.ones(3), torch.zeros(3), (5, 6), (0, 0, 5, 6),
                             resample, "torchvision", plans)  # fmt: skip
    assert bool((out == 7.0).all())  # nothing written
