"""resample="bilinear_f32" / "bicubic_f32" against torch itself: F.interpolate(mode="bilinear" / "bicubic",
antialias=True, align_corners=False) of a float32 CPU tensor (torchvision's resize of float32 frames: vLLM's
MiniMax-M3 video processor), at 1 and 2 torch threads. float32 values equal, bit for bit, on photos (as bytes
converted to float32) and a fuzz of sizes, crops, both layouts, 1/3/4 channels, float32 inputs of any values, and
a padded canvas (the GPU kernels' per-thread code and the CPU kernels at each capability:
tests/test_resize_emulation.py). torch compiles these kernels with FMAs and a vectorized reduction only at CPU
capability AVX2 and above on x86 (resample_kernel.h says how they sum): elsewhere these tests skip, and the generic
path hands such calls back."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_resize import photo, to_chw
from test_resize_cv2 import SIZE_CASES, coffee_crop

from fused_input_norm import FusedInputNorm, ops
from fused_input_norm import resize as resizing
from fused_input_norm.resize import torch_float_fma_kernel

pytestmark = pytest.mark.skipif(
    not torch_float_fma_kernel(), reason="torch compiles its float32 antialiased filters with FMAs only on x86 at AVX2+"
)
FILTERS = ["bilinear_f32", "bicubic_f32"]
MODES = {"bilinear_f32": "bilinear", "bicubic_f32": "bicubic"}


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


def torch_resize(image: torch.Tensor, size, resample: str) -> torch.Tensor:
    """torch's own: F.interpolate of image.float() ([N, C, H, W], any strides), antialiased."""
    return F.interpolate(image.float(), size=tuple(size), mode=MODES[resample], align_corners=False, antialias=True)


def assert_same_values(got: torch.Tensor, expected: torch.Tensor, label: str) -> None:
    assert got.dtype == torch.float32 and got.shape == expected.shape, (label, got.shape, expected.shape)
    n = int((got.view(torch.int32) != expected.view(torch.int32)).sum())  # bits: -0.0 and NaN too
    assert n == 0, f"{label}: {n} of {got.numel()} values differ from torch's"


def engine_resize(image, size, resample, crop=None, weight=None, bias=None, pad=()) -> torch.Tensor:
    """The op itself on a [N, C, H, W] uint8 or float32 tensor: resize_into with the identity affine (or the one
    given), out float32."""
    n, channels = image.shape[:2]
    crop = crop or (0, 0, *size)
    shape = (n, channels, *(pad[:2] if pad else crop[2:]))
    out = torch.full(shape, float("nan"))
    weight = torch.ones(channels) if weight is None else weight
    bias = torch.zeros(channels) if bias is None else bias
    resizing.resize_into(out, image, weight, bias, size, crop, resample, "torchvision", resizing.PlanCache(), pad=pad)
    return out


@pytest.mark.parametrize("resample", FILTERS)
@pytest.mark.parametrize("case", list(SIZE_CASES))
@pytest.mark.parametrize("name", ["coffee", "chelsea"])
def test_equal_to_torch_on_photos(name, case, resample, threads):
    """The identity module's resize of the uint8 photo (read as float32) is torch's interpolate of photo.float()."""
    hwc = photo(name)
    size = SIZE_CASES[case](*hwc.shape[:2])
    if size[1] == 1 and size[0] not in (1, hwc.shape[0]):
        pytest.skip("torch's width-1 quirk: test_torch_gives_every_row_the_first_rows_value_at_width_1")
    got = FusedInputNorm.identity().resize(to_chw(hwc), torch.float32, size, resample=resample)
    assert_same_values(got, torch_resize(to_chw(hwc)[None], size, resample)[0], f"{name} -> {size}")


@pytest.mark.parametrize("resample", FILTERS)
# The threads fixture is set once for all examples, as intended.
@settings(
    max_examples=40,
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
    out_h=st.integers(1, 300),
    out_w=st.integers(2, 300),  # width 1: test_torch_gives_every_row_the_first_rows_value_at_width_1
    channels=st.sampled_from([1, 3, 4]),
    channels_last=st.booleans(),
    spread=st.sampled_from([0.0, 1.0, 1e6]),
    crop=st.booleans(),
)
@example(top=0, left=0, in_h=1, in_w=1, out_h=200, out_w=3, channels=3, channels_last=False, spread=0.0, crop=False)
@example(top=0, left=0, in_h=120, in_w=160, out_h=1, out_w=2, channels=4, channels_last=True, spread=1.0, crop=False)
@example(top=0, left=0, in_h=1, in_w=160, out_h=1, out_w=2, channels=3, channels_last=False, spread=0.0, crop=False)
@example(top=3, left=5, in_h=117, in_w=2, out_h=117, out_w=5, channels=1, channels_last=False, spread=1e6, crop=True)
def test_random_sizes_equal_to_torch(
    top, left, in_h, in_w, out_h, out_w, channels, channels_last, spread, crop, resample, threads
):
    """A crop of the coffee photo (spread 0: its bytes; else float32 values of that spread around them), either
    layout, to any size (downscales of up to 160x: windows of hundreds of taps), and a crop of the result."""
    hwc = coffee_crop(top, left, in_h, in_w, channels)
    image = torch.from_numpy(hwc).permute(2, 0, 1)[None]  # channels-last strides
    if spread:
        noise = np.random.default_rng(top * 1000 + left).normal(0, spread, image.shape).astype(np.float32)
        image = image.float() + torch.from_numpy(noise)
        image = image.contiguous(memory_format=torch.channels_last) if channels_last else image.contiguous()
    elif not channels_last:
        image = image.contiguous()
    size = (out_h, out_w)
    box = (out_h // 3, out_w // 4, out_h - out_h // 3, out_w - out_w // 4) if crop else (0, 0, *size)
    expected = torch_resize(image, size, resample)[:, :, box[0] : box[0] + box[2], box[1] : box[1] + box[3]]
    label = f"{image.dtype} {tuple(image.shape)} -> {size}, crop {box}"
    assert_same_values(engine_resize(image, size, resample, crop=box), expected, label)


@pytest.mark.parametrize("resample", FILTERS)
def test_sums_as_torchs_vectorized_loop_not_one_fma_chain(resample):
    """A 5x downscale has windows of 11 (bilinear) and 21 (bicubic) taps, summed in torch's blocks of rounded
    products: the same window summed as one chain of FMAs (torch's scalar loop) differs in many values, so
    equality with torch tests the order (the filter is torch's: the values differ by an ulp or so, not more)."""
    image = torch.from_numpy(np.random.default_rng(5).normal(0, 100, (1, 1, 40, 1000)).astype(np.float32))
    got = engine_resize(image, (40, 200), resample)
    expected = torch_resize(image, (40, 200), resample)
    assert_same_values(got, expected, "5x across")
    plan = ops.resample_plan(1000, 200, resample, "torchvision")
    taps = int(plan[2])
    bounds = plan[4 : 4 + 2 * 200].view(200, 2).long()
    weights = plan[4 + 2 * 200 :].view(torch.float32).view(200, taps)
    chain = torch.empty(40, 200)
    row = image[0, 0].double()
    for x in range(200):
        first, count = (int(v) for v in bounds[x])
        acc = (row[:, first] * float(weights[x, 0])).float()  # rounded, as torch's first product
        for j in range(1, count):  # fma: the exact product plus the sum, rounded once
            acc = (row[:, first + j] * float(weights[x, j]) + acc.double()).float()
        chain[:, x] = acc
    differ = int((chain != expected[0, 0]).sum())
    assert differ > chain.numel() // 20, differ
    assert float((chain - expected[0, 0]).abs().max()) < 1e-3


@pytest.mark.parametrize("resample", FILTERS)
def test_a_padded_canvas_is_torchs_resize_of_the_crop_padded(resample, threads):
    """A canvas with padding (top and bottom, one side, none), a crop and an affine (weights powers of two: x * w + b
    rounds once however torch computes it): torch's resize, cropped, times w plus b, on a canvas of the fill through
    the same affine. Bytes and a float32 input."""
    rng = np.random.default_rng(threads)
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
            resized_crop = torch_resize(image, size, resample)[0, :, top : top + h, left : left + w]
            box = torch.addcmul(bias.view(3, 1, 1), resized_crop, weight.view(3, 1, 1))
            expected = (
                torch.full((3, canvas_h, canvas_w), float(fill)).mul(weight.view(3, 1, 1)).add(bias.view(3, 1, 1))
            )
            expected[:, pad_top : pad_top + h, pad_left : pad_left + w] = box
            got = engine_resize(image, size, resample, crop=crop, weight=weight, bias=bias, pad=pad)
            assert_same_values(got[0], expected, f"{image.dtype} {size} {crop} {pad}")


@pytest.mark.parametrize("resample", FILTERS)
@pytest.mark.parametrize("in_size, out_size", [(1920, 448), (448, 1920), (7, 7), (1, 9), (3000, 2), (1000, 3)])
def test_plan_size_as_the_fake_op_computes_it(in_size, out_size, resample):
    """torch.compile's fake op sizes the plan without running the planner: the same numel (torch's float32
    support, ceil(support) * 2 + 1 taps)."""
    plan = ops.resample_plan(in_size, out_size, resample, "torchvision")
    assert plan.numel() == ops._plan_numel(in_size, out_size, resample)
    scale = np.float32(in_size) / np.float32(out_size)
    support = np.float32((2.0 if resample == "bicubic_f32" else 1.0) * max(float(scale), 1.0))
    assert int(plan[2]) == int(np.ceil(support)) * 2 + 1


@pytest.mark.parametrize("resample", FILTERS)
def test_torch_gives_every_row_the_first_rows_value_at_width_1(resample):
    """torch's quirk, which the engine does not reproduce: to an output width of 1, its vertical pass walks the rows
    as its innermost loop and reads the first row's taps for each, so every row is row 0. The engine computes each
    row (row 0 equal to torch's, the others to torch's resize of the transposed image within rounding), and the
    generic path hands such a call back to torch (the next test). If torch changes this, the first assert fails:
    serve width 1 then."""
    image = torch.from_numpy(np.random.default_rng(0).normal(0, 100, (1, 3, 51, 158)).astype(np.float32))
    expected = torch_resize(image, (39, 1), resample)
    assert bool((expected == expected[:, :, :1]).all())
    got = engine_resize(image, (39, 1), resample)
    assert_same_values(got[:, :, :1], expected[:, :, :1], "row 0")
    # torch on the transposed image (its rows the columns: no width 1), which sums in the other order of passes
    transposed = torch_resize(image.transpose(-1, -2), (1, 39), resample).transpose(-1, -2)
    assert float((got - transposed).abs().max()) < 1e-3
    assert int((got != expected).sum()) > 100


@pytest.mark.parametrize("resample", FILTERS)
def test_the_generic_path_hands_a_width_1_resize_back(resample):
    """TorchvisionBackend.resize of float32 frames to width 1, antialiased: torch's own (its quirk above), said why."""
    pytest.importorskip("torchvision", reason="transformers' TorchvisionBackend needs torchvision")
    image_utils = pytest.importorskip("transformers.image_utils")
    from fused_input_norm import hf_primitives

    image = torch.zeros(3, 51, 158)
    filter = getattr(image_utils.PILImageResampling, MODES[resample].upper())
    reason = hf_primitives.torchvision_resize(image, image_utils.SizeDict(height=39, width=1), filter, True)
    assert isinstance(reason, str) and "width 1" in reason, reason
