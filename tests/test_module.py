"""FusedInputNorm: construction without device syncs, state, forward layouts, identity, errors."""

import pytest
import torch
from conftest import CLIP_MEAN, CLIP_STD, DEVICES, HAS_CUDA, NO_CUDA_REASON

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


def test_state_dict_holds_only_weight_and_bias():
    norm = FusedInputNorm(*NON_IDENTITY)
    assert list(norm.state_dict()) == ["weight", "bias"]
    other = FusedInputNorm(*NON_IDENTITY)
    other.load_state_dict(norm.state_dict())
    assert list(FusedInputNorm.identity().state_dict()) == []


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
    ],
)
def test_bad_forward_input(shape, kwargs, error, match):
    norm = FusedInputNorm(*NON_IDENTITY)
    with pytest.raises(error, match=match):
        norm(torch.zeros(shape, dtype=torch.uint8), torch.bfloat16, **kwargs)


@pytest.mark.parametrize("visual_dtype", [torch.int32, torch.uint8, torch.bool, "bfloat16"])
def test_non_floating_visual_dtype(visual_dtype):
    for norm in (FusedInputNorm(*NON_IDENTITY), FusedInputNorm.identity()):
        with pytest.raises(TypeError, match=r"visual_dtype must be a floating torch\.dtype"):
            norm(torch.zeros(2, 3, 4, 4, dtype=torch.uint8), visual_dtype)
