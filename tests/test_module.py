"""FusedInputNorm: construction without device syncs, state, forward layouts, identity, errors."""

import pytest
import torch
from conftest import CLIP_MEAN, CLIP_STD, DEVICES, HAS_CUDA, NO_CUDA_REASON, RecordOps, assert_affine_close

from fused_input_norm import FusedInputNorm

CONSTRUCTION_DEVICES = ["meta", pytest.param("cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON))]
IDENTITY = ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], 1.0)
NON_IDENTITY = ([0.5, 0.5, 0.5], [0.25, 0.25, 0.25], 1 / 255)


@pytest.fixture
def allclose_rejects_device_tensors(monkeypatch):
    """The in-tree bug: torch.allclose on device tensors synced the GPU during model construction."""
    real_allclose = torch.allclose

    def cpu_only_allclose(a, b, *args, **kwargs):
        for t in (a, b):
            if isinstance(t, torch.Tensor) and t.device.type != "cpu":
                raise AssertionError(f"torch.allclose called on a {t.device} tensor: that synchronizes the device")
        return real_allclose(a, b, *args, **kwargs)

    monkeypatch.setattr(torch, "allclose", cpu_only_allclose)


@pytest.mark.usefixtures("allclose_rejects_device_tensors")
@pytest.mark.parametrize("device", CONSTRUCTION_DEVICES)
@pytest.mark.parametrize("config,identity", [(IDENTITY, True), (NON_IDENTITY, False)])
def test_construction_under_device_context(device, config, identity):
    with torch.device(device):
        norm = FusedInputNorm(*config)
    assert norm.is_identity is identity
    if identity:
        assert norm.weight is None and norm.bias is None
    else:
        assert norm.weight.device.type == device and norm.bias.device.type == device
        assert norm.weight.dtype == torch.float32


def test_buffers_follow_set_default_device():
    previous = torch.get_default_device()
    torch.set_default_device("meta")
    try:
        norm = FusedInputNorm(*NON_IDENTITY)
    finally:
        torch.set_default_device(previous)
    assert norm.weight.device.type == "meta"


def test_constants_are_folded_on_the_cpu():
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    expected_w = torch.tensor([(1 / 255) / s for s in CLIP_STD], dtype=torch.float64)
    expected_b = torch.tensor([-m / s for m, s in zip(CLIP_MEAN, CLIP_STD, strict=True)], dtype=torch.float64)
    torch.testing.assert_close(norm.weight.double(), expected_w, rtol=1e-7, atol=0)
    torch.testing.assert_close(norm.bias.double(), expected_b, rtol=1e-7, atol=0)


def test_buffers_are_not_state():
    """Derived from the processor config, not weights: loaders must neither overwrite nor demand them."""
    norm = FusedInputNorm(*NON_IDENTITY)
    assert norm.state_dict() == {}
    assert [name for name, _ in norm.named_buffers()] == ["weight", "bias"]
    moved = norm.to("meta")
    assert moved.weight.device.type == "meta" and moved.bias.device.type == "meta"
    norm.load_state_dict({})  # strict: nothing is missing
    identity = FusedInputNorm.identity()
    assert identity.state_dict() == {} and list(identity.named_buffers()) == []


def clip_constants():
    """CLIP's weight/bias in float32, folded independently of the module."""
    weight = torch.tensor([(1 / 255) / s for s in CLIP_STD], dtype=torch.float64).float()
    bias = torch.tensor([-m / s for m, s in zip(CLIP_MEAN, CLIP_STD, strict=True)], dtype=torch.float64).float()
    return weight, bias


@pytest.mark.parametrize("cast", [torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_casting_the_model_keeps_the_constants_in_float32(cast):
    """model.half() / model.to(torch.bfloat16) cast every floating buffer; the op reads float32 constants,
    so the module must keep (not round) them, and still normalize."""
    weight, bias = clip_constants()
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255).to(cast)
    assert norm.weight.dtype == torch.float32 and norm.bias.dtype == torch.float32
    torch.testing.assert_close(norm.weight, weight, rtol=0, atol=0)
    torch.testing.assert_close(norm.bias, bias, rtol=0, atol=0)
    x = torch.randint(0, 256, (4, 3 * 14 * 14), dtype=torch.uint8)
    y = norm(x, torch.bfloat16)
    assert_affine_close(y.view(4, 3, -1), x.view(4, 3, -1), weight, bias, 1)


def test_to_empty_after_meta_construction_restores_the_constants():
    """Deferred init (build on meta, materialize with to_empty): the buffers are not in the state_dict, so no
    load would ever fill them; they must come back from the config, not as uninitialized memory."""
    weight, bias = clip_constants()
    with torch.device("meta"):
        norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    norm.to_empty(device="cpu")
    torch.testing.assert_close(norm.weight, weight, rtol=0, atol=0)
    torch.testing.assert_close(norm.bias, bias, rtol=0, atol=0)


def test_input_dtype():
    assert FusedInputNorm(*NON_IDENTITY).input_dtype == torch.uint8
    assert FusedInputNorm.identity().input_dtype is None


@pytest.mark.parametrize(
    "rescale,mean",
    [
        (1.0, 0.0),
        (1 + 1e-5, 0.0),  # |w - 1| = 1e-5: inside rtol 1e-5 + atol 1e-8
        (1 - 1.0009e-5, 0.0),
        (1 + 1.002e-5, 0.0),  # just outside
        (1 + 1e-6, 5e-9),  # |b| = 5e-9 <= atol
        (1.0, 2e-8),  # |b| = 2e-8 > atol
        (1.0, -1e-6),
        (1 / 255, 0.0),
    ],
)
def test_identity_is_decided_as_torch_allclose(rescale, mean):
    """The reference: torch.allclose with its default tolerances on the folded constants, in float64."""
    norm = FusedInputNorm([mean] * 3, [1.0] * 3, rescale)
    weight = torch.full((3,), rescale / 1.0, dtype=torch.float64)
    bias = torch.full((3,), -mean / 1.0, dtype=torch.float64)
    expected = torch.allclose(weight, torch.ones_like(weight)) and torch.allclose(bias, torch.zeros_like(bias))
    assert norm.is_identity is expected
    assert (norm.weight is None) is expected


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32, torch.bfloat16], ids=str)
def test_identity_passthrough_only_casts(device, dtype):
    norm = FusedInputNorm.identity(3).to(device)
    assert norm.is_identity
    x = torch.randint(0, 256, (6, 3 * 2 * 14 * 14), dtype=torch.int32).to(dtype).to(device)
    for visual in (torch.float32, torch.bfloat16, torch.float16):
        y = norm(x, visual)
        assert y.dtype == visual
        assert torch.equal(y, x.to(visual))
    assert "identity" in repr(norm)


@pytest.mark.parametrize("device", DEVICES)
def test_layouts_agree(device):
    """The same image as patches, NCHW and NHWC gives the same normalized values."""
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255).to(device)
    nchw = torch.randint(0, 256, (2, 3, 14, 14), dtype=torch.uint8, device=device)
    patches = nchw.reshape(2, 3 * 14 * 14)
    nhwc = nchw.permute(0, 2, 3, 1).contiguous()
    y_nchw = norm(nchw, torch.float32)
    torch.testing.assert_close(norm(patches, torch.float32).view(2, 3, 14, 14), y_nchw, rtol=0, atol=0)
    torch.testing.assert_close(norm(nhwc, torch.float32, channel_dim=-1).permute(0, 3, 1, 2), y_nchw, rtol=0, atol=0)
    mean = torch.tensor(CLIP_MEAN, device=device).view(3, 1, 1)
    std = torch.tensor(CLIP_STD, device=device).view(3, 1, 1)
    torch.testing.assert_close(y_nchw, (nchw.float() / 255 - mean) / std, rtol=1e-5, atol=1e-5)


def test_scalar_mean_std_apply_to_every_channel():
    norm = FusedInputNorm(0.5, 0.5, 1 / 255, channel=4)
    assert norm.weight.tolist() == pytest.approx([2 / 255] * 4)
    assert norm.bias.tolist() == pytest.approx([-1.0] * 4)


def test_extra_repr_shows_constants():
    text = repr(FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255))
    assert "rescale_factor=0.00392157" in text and "0.481455" in text and "0.26863" in text
    # Six significant digits, not six decimals: a tiny std printed as 0.0 looked like a division by zero.
    assert "std=[1e-07, 2.5e-10, 0.5]" in repr(FusedInputNorm([0.0] * 3, [1e-7, 2.5e-10, 0.5], 1e-9))


@pytest.mark.parametrize(
    "args,match",
    [
        # Finite configs whose float32 weight or bias is not finite: forward returned inf/NaN, no error.
        (([0.0] * 3, [1e-39] * 3, 1.0), r"image_std\[0\] \(1e-39\) is out of range: weight = rescale_factor / "),
        (([0.0] * 3, [0.5, 1e-320, 0.5], 1.0), r"image_std\[1\] \(9.99989e-321\) is out of range: weight"),
        (([0.0] * 3, [0.5] * 3, 1e300), r"rescale_factor \(1e\+300\) is out of range: weight = rescale_factor"),
        (([0.0, 0.0, 1e300], [0.5] * 3, 1.0), r"image_mean\[2\] \(1e\+300\) is out of range: bias = -image_mean\[2\]"),
        (([0.5] * 3, [1e-39] * 3, 1e-30), r"image_std\[0\] \(1e-39\) is out of range: bias"),
    ],
)
def test_constants_that_overflow_float32_are_rejected(args, match):
    with pytest.raises(ValueError, match=match + ".*not a finite float32"):
        FusedInputNorm(*args)


def test_largest_finite_float32_constants_are_accepted():
    norm = FusedInputNorm([0.0] * 3, [1e-38] * 3, 1.0)  # weight 1e38 < float32 max 3.4e38
    assert bool(torch.isfinite(norm.weight).all())


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"channel": True}, r"channel must be a positive int, got bool"),  # was accepted as channel=1
        ({"channel": 3.0}, r"channel must be a positive int, got float"),
        ({"rescale_factor": "x"}, r"rescale_factor must be a number, got str"),
        ({"rescale_factor": None}, r"rescale_factor must be a number, got NoneType"),
        ({"rescale_factor": True}, r"rescale_factor must be a number, got bool"),
        ({"image_mean": None}, r"image_mean must be a number, a sequence of numbers or a CPU tensor, got NoneType"),
        ({"image_std": None}, r"image_std must be a number, a sequence of numbers or a CPU tensor, got NoneType"),
        ({"image_mean": "0.5"}, r"image_mean must be a number, .*got str"),
        ({"image_mean": {"r": 0.5}}, r"image_mean must be a number, .*got dict"),
        ({"image_mean": [0.5, None, 0.5]}, r"image_mean\[1\] must be a number, got NoneType"),
        ({"image_std": [0.5, "0.5", 0.5]}, r"image_std\[1\] must be a number, got str"),
        ({"image_std": [0.5, True, 0.5]}, r"image_std\[1\] must be a number, got bool"),
        ({"image_mean": torch.tensor([True, False, True])}, r"image_mean must hold real numbers, got a torch.bool"),
    ],
)
def test_bad_construction_types_are_named(kwargs, match):
    args = {"image_mean": [0.5] * 3, "image_std": [0.5] * 3, "rescale_factor": 1 / 255, "channel": 3} | kwargs
    with pytest.raises(TypeError, match="FusedInputNorm: " + match):
        FusedInputNorm(**args)


def test_numpy_numbers_are_numbers():
    np = pytest.importorskip("numpy")
    expected = FusedInputNorm([0.5] * 3, [0.25] * 3, 1 / 255)
    for mean, std, rescale in [
        (np.float32(0.5), np.float64(0.25), np.float32(1 / 255)),
        (np.array([0.5] * 3), np.array([0.25] * 3, dtype=np.float32), 1 / 255),
        (np.array(0.5), [np.float32(0.25)] * 3, np.float64(1 / 255)),
    ]:
        norm = FusedInputNorm(mean, std, rescale)
        torch.testing.assert_close(norm.weight, expected.weight, rtol=1e-6, atol=0)
        torch.testing.assert_close(norm.bias, expected.bias, rtol=0, atol=0)


@pytest.mark.parametrize("channel_dim,got", [(1.0, "float"), (True, "bool"), ("-3", "str")])
def test_channel_dim_of_a_wrong_type_is_named(channel_dim, got):
    """1.0 failed with "tuple indices must be integers", True with an error naming the op's `dim`."""
    for norm in (FusedInputNorm(*NON_IDENTITY), FusedInputNorm.identity()):
        with pytest.raises(TypeError, match=rf"FusedInputNorm: channel_dim must be an int or None, got {got}"):
            norm(torch.zeros(2, 3, 4, 4, dtype=torch.uint8), torch.bfloat16, channel_dim=channel_dim)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"image_mean": [0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}, "image_mean must have one value per channel"),
        ({"image_mean": [0.5] * 3, "image_std": [0.5] * 4}, "image_std must have one value per channel"),
        ({"image_mean": [0.5] * 4, "image_std": [0.5] * 4}, "image_mean must have one value per channel \\(3\\)"),
        ({"channel": 0}, "channel must be a positive int"),
        ({"image_std": [0.5, 0.0, 0.5]}, "image_std must be > 0"),
        ({"image_std": [0.5, -0.1, 0.5]}, "image_std must be > 0"),
        ({"rescale_factor": 0.0}, "rescale_factor must be finite and > 0"),
        ({"rescale_factor": -1.0}, "rescale_factor must be finite and > 0"),
        ({"rescale_factor": float("inf")}, "rescale_factor must be finite"),
        ({"image_mean": [0.5, float("nan"), 0.5]}, "image_mean must be finite"),
        ({"image_std": [0.5, float("inf"), 0.5]}, "image_std must be finite"),
        ({"dtype": torch.bfloat16}, "dtype must be torch.float32"),
    ],
)
def test_bad_construction(kwargs, match):
    args = {"image_mean": [0.5] * 3, "image_std": [0.5] * 3, "rescale_factor": 1 / 255, "channel": 3} | kwargs
    with pytest.raises(ValueError, match=match):
        FusedInputNorm(**args)


@pytest.mark.parametrize(
    "shape,kwargs,error,match",
    [
        ((4, 1177), {}, ValueError, "1177 elements does not split into 3 channels"),
        ((1176,), {}, ValueError, "must be 2-D patches"),
        ((2, 4, 8, 8), {}, ValueError, "has 4 channels on axis -3"),
        ((2, 8, 8, 4), {"channel_dim": -1}, ValueError, "has 4 channels on axis -1"),
        ((2, 3, 8, 8), {"channel_dim": 4}, IndexError, "channel_dim 4 is out of range"),
        # 2-D input is patches, whose channels are not one of its axes: an explicit channel_dim was ignored
        # (a [C, N] tensor with channel_dim=0 was normalized as patch rows, silently wrong).
        ((3, 6), {"channel_dim": 0}, ValueError, r"channel_dim is for images of rank >= 3; 2-D pixel_values"),
        ((5, 3), {"channel_dim": -1}, ValueError, r"channel_dim is for images of rank >= 3"),
    ],
)
def test_bad_forward_input(shape, kwargs, error, match):
    norm = FusedInputNorm(*NON_IDENTITY)
    with pytest.raises(error, match=match):
        norm(torch.zeros(shape, dtype=torch.uint8), torch.bfloat16, **kwargs)


def test_constructor_has_its_own_docstring():
    """help(FusedInputNorm.__init__) documents the arguments, not nn.Module's inherited __init__."""
    doc = FusedInputNorm.__init__.__doc__
    assert doc and doc != torch.nn.Module.__init__.__doc__
    for argument in ("image_mean, image_std:", "rescale_factor:", "channel:", "layout:", "dtype:", "Raises:"):
        assert argument in doc, argument


def test_channels_last_images_without_channel_dim_get_a_hint():
    """NHWC images (how PIL, OpenCV and NumPy decode) with the default channel_dim (-3) are refused; when the
    last axis has the channel count, the message says channel_dim=-1, which is the call that works."""
    norm = FusedInputNorm(*NON_IDENTITY)
    nhwc = torch.zeros(2, 8, 8, 3, dtype=torch.uint8)
    hint = r"has 8 channels on axis -3 \(shape \(2, 8, 8, 3\)\), expected 3; channels-last images \(\[\.\.\., H, W, C\]\) need channel_dim=-1"
    for module in (norm, FusedInputNorm.identity()):
        with pytest.raises(ValueError, match=hint):
            module(nhwc, torch.bfloat16)
        assert module(nhwc, torch.bfloat16, channel_dim=-1).shape == nhwc.shape
    # No hint where channel_dim=-1 would not fit either, nor where the caller chose the axis or the layout.
    for pixels, kwargs, module in [
        (torch.zeros(2, 8, 8, 4, dtype=torch.uint8), {}, norm),
        (torch.zeros(2, 8, 3, 8, dtype=torch.uint8), {"channel_dim": 1}, norm),
        (nhwc, {}, FusedInputNorm(*NON_IDENTITY, layout="bchw")),
    ]:
        with pytest.raises(ValueError, match="channels on axis") as info:
            module(pixels, torch.bfloat16, **kwargs)
        assert "channel_dim=-1" not in str(info.value)


@pytest.mark.parametrize("visual_dtype", [torch.float64, torch.int32, torch.uint8, torch.bool, "bfloat16"])
def test_bad_visual_dtype_is_named(visual_dtype):
    for norm in (FusedInputNorm(*NON_IDENTITY), FusedInputNorm.identity()):
        with pytest.raises(TypeError, match=r"FusedInputNorm: visual_dtype must be one of torch\.float16, "):
            norm(torch.zeros(2, 3, 4, 4, dtype=torch.uint8), visual_dtype)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float64, torch.bool], ids=str)
def test_bad_pixel_dtype_is_named(dtype):
    for norm in (FusedInputNorm(*NON_IDENTITY), FusedInputNorm.identity()):
        with pytest.raises(
            TypeError, match=r"FusedInputNorm: pixel_values must have one of the dtypes .*got " + str(dtype)
        ):
            norm(torch.zeros(2, 3, 4, 4, dtype=dtype), torch.bfloat16)
    with pytest.raises(TypeError, match=r"pixel_values must be a torch\.Tensor, got list"):
        FusedInputNorm(*NON_IDENTITY)([[0] * 3], torch.bfloat16)


def test_pixels_on_another_device_than_the_module():
    norm = FusedInputNorm(*NON_IDENTITY)
    with pytest.raises(
        RuntimeError, match=r"pixel_values is on meta but the module's buffers are on cpu: move the module"
    ):
        norm(torch.zeros(2, 3, 4, 4, dtype=torch.uint8, device="meta"), torch.bfloat16)


def test_upstream_constructor_and_call():
    """vLLM's FusedMMInputNorm(image_mean, image_std, rescale_factor, channel, layout), called positionally."""
    images = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)
    bchw = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255, 3, "bchw")
    pcl = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255, 3, layout="pcl")
    assert (bchw.layout, pcl.layout) == ("bchw", "pcl")
    mean = torch.tensor(CLIP_MEAN, dtype=torch.float64).view(3, 1, 1)
    std = torch.tensor(CLIP_STD, dtype=torch.float64).view(3, 1, 1)
    expected = (images.double() / 255 - mean) / std
    torch.testing.assert_close(bchw(images, torch.float32).double(), expected, rtol=2e-6, atol=2e-6)
    patches = images.reshape(2, 3 * 64)
    torch.testing.assert_close(pcl(patches, torch.float32).double(), expected.reshape(2, -1), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize(
    "layout,shape,kwargs,match",
    [
        (
            "pcl",
            (2, 3, 8, 8),
            {},
            r"layout='pcl' takes 2-D pixel_values \[num_patches, 3 \* patch_elems\], got shape \(2, 3, 8, 8\)",
        ),
        ("pcl", (4, 1177), {}, "1177 elements does not split into 3 channels"),
        ("bchw", (2, 3 * 64), {}, r"layout='bchw' takes 4-D pixel_values \[B, C, H, W\], got shape \(2, 192\)"),
        ("bchw", (3, 8, 8), {}, "layout='bchw' takes 4-D"),
        ("bchw", (2, 8, 8, 3), {}, "has 8 channels on axis 1"),
        ("bchw", (2, 3, 8, 8), {"channel_dim": -1}, "channel_dim is for layout=None; layout='bchw' fixes"),
    ],
)
def test_layout_is_enforced(layout, shape, kwargs, match):
    for norm in (FusedInputNorm(*NON_IDENTITY, layout=layout), FusedInputNorm.identity(layout=layout)):
        with pytest.raises(ValueError, match=match):
            norm(torch.zeros(shape, dtype=torch.uint8), torch.bfloat16, **kwargs)


def test_bad_layout():
    with pytest.raises(ValueError, match="layout must be 'pcl', 'bchw' or None, got 'nhwc'"):
        FusedInputNorm(*NON_IDENTITY, layout="nhwc")


@pytest.mark.parametrize("layout", [None, "pcl", "bchw"])
def test_strided_input_reaches_the_op_without_a_copy(layout):
    """No .contiguous() on the way: the op receives a view of the caller's strided storage."""
    wide = torch.randint(0, 256, (5, 2 * 3 * 16), dtype=torch.uint8)
    if layout == "bchw":
        x = wide.view(5, 2, 3, 4, 4)[:, 1]  # every other image of a batch: [5, 3, 4, 4], not contiguous
    else:
        x = wide[:, 3 * 16 :]  # the second half of each row: [5, 48], not contiguous
    assert not x.is_contiguous()
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255, layout=layout)
    with RecordOps() as record:
        y = norm(x, torch.float32)
    ops = record.ops()
    assert torch.ops.fused_input_norm.affine.default in ops
    assert not {torch.ops.aten.clone.default, torch.ops.aten.copy_.default, torch.ops.aten._to_copy.default} & set(ops)
    (received,) = [args[0] for func, args in record.calls if func == torch.ops.fused_input_norm.affine.default]
    assert received.untyped_storage().data_ptr() == wide.untyped_storage().data_ptr() and not received.is_contiguous()
    assert_affine_close(y.view(received.shape), x.reshape(received.shape), norm.weight, norm.bias, 1)
