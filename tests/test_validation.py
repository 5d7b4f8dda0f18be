"""Bad input: a Python exception of the right kind naming the argument, raised before any kernel runs,
and nothing written into `out` (checked with a sentinel fill)."""

import contextlib
import re

import pytest
import torch
from conftest import DEVICES
from torch._subclasses.fake_tensor import FakeTensorMode

from fused_input_norm import affine, affine_out

SENTINEL = 1234.5


def good(device):
    """A valid call's arguments: input [2, 3, 5] uint8, weight/bias [3], dim=1, out float32."""
    return {
        "input": torch.randint(0, 256, (2, 3, 5), dtype=torch.uint8, device=device),
        "weight": torch.rand(3, device=device),
        "bias": torch.rand(3, device=device),
        "dim": 1,
    }


def replace(**changes):
    """A case that alters the good call: each value is a function of the device."""
    return lambda device: good(device) | {k: fn(device) for k, fn in changes.items()}


# (name, arguments, exception, message) for both affine and affine_out.
BAD_ARGS = [
    (
        "weight-too-long",
        replace(weight=lambda d: torch.rand(4, device=d)),
        ValueError,
        r"weight must have one value per channel: length input.size\(1\) = 3, got 4",
    ),
    (
        "weight-too-short",
        replace(weight=lambda d: torch.rand(2, device=d)),
        ValueError,
        r"weight must have one value per channel.*got 2",
    ),
    (
        "bias-too-long",
        replace(bias=lambda d: torch.rand(5, device=d)),
        ValueError,
        r"bias must have one value per channel.*got 5",
    ),
    (
        "bias-too-short",
        replace(bias=lambda d: torch.rand(1, device=d)),
        ValueError,
        r"bias must have one value per channel.*got 1",
    ),
    ("weight-2d", replace(weight=lambda d: torch.rand(3, 1, device=d)), ValueError, r"weight must be 1-D .*got 2-D"),
    ("bias-0d", replace(bias=lambda d: torch.tensor(1.0, device=d)), ValueError, r"bias must be 1-D .*got 0-D"),
    (
        "weight-int64",
        replace(weight=lambda d: torch.ones(3, dtype=torch.int64, device=d)),
        TypeError,
        r"weight must be a float32 tensor, got torch\.int64",
    ),
    (
        "weight-float64",
        replace(weight=lambda d: torch.ones(3, dtype=torch.float64, device=d)),
        TypeError,
        r"weight must be a float32 tensor, got torch\.float64",
    ),
    (
        "bias-float16",
        replace(bias=lambda d: torch.ones(3, dtype=torch.float16, device=d)),
        TypeError,
        r"bias must be a float32 tensor, got torch\.float16",
    ),
    (
        "weight-non-contiguous",
        replace(weight=lambda d: torch.rand(6, device=d)[::2]),
        ValueError,
        r"weight must be contiguous",
    ),
    ("weight-list", replace(weight=lambda d: [1.0, 1.0, 1.0]), TypeError, r"weight must be a torch\.Tensor, got list"),
    ("bias-none", replace(bias=lambda d: None), TypeError, r"bias must be a torch\.Tensor, got NoneType"),
    (
        "weight-on-meta",
        replace(weight=lambda d: torch.rand(3, device="meta")),
        RuntimeError,
        r"weight must be on input's device",
    ),
    (
        "bias-on-meta",
        replace(bias=lambda d: torch.rand(3, device="meta")),
        RuntimeError,
        r"bias must be on input's device",
    ),
    ("dim-too-large", replace(dim=lambda d: 3), IndexError, r"dim must be in \[-3, 2\] for a 3-D input, got 3"),
    ("dim-too-negative", replace(dim=lambda d: -4), IndexError, r"dim must be in \[-3, 2\] for a 3-D input, got -4"),
    ("dim-float", replace(dim=lambda d: 1.0), TypeError, r"dim must be an int, got float"),
    (
        "input-bool",
        replace(input=lambda d: torch.zeros(2, 3, 5, dtype=torch.bool, device=d)),
        TypeError,
        r"input must have one of the dtypes torch\.uint8, torch\.uint16, torch\.float16, torch\.bfloat16, torch\.float32, got torch\.bool",
    ),
    (
        "input-int64",
        replace(input=lambda d: torch.zeros(2, 3, 5, dtype=torch.int64, device=d)),
        TypeError,
        r"input must have one of the dtypes .*got torch\.int64",
    ),
    (
        "input-int8",
        replace(input=lambda d: torch.zeros(2, 3, 5, dtype=torch.int8, device=d)),
        TypeError,
        r"got torch\.int8",
    ),
    (
        "input-float64",
        replace(input=lambda d: torch.zeros(2, 3, 5, dtype=torch.float64, device=d)),
        TypeError,
        r"got torch\.float64",
    ),
    (
        "input-complex",
        replace(input=lambda d: torch.zeros(2, 3, 5, dtype=torch.complex64, device=d)),
        TypeError,
        r"got torch\.complex64",
    ),
    (
        "input-0d",
        replace(input=lambda d: torch.tensor(7, dtype=torch.uint8, device=d), dim=lambda d: 0),
        ValueError,
        r"input must have at least 1 dimension",
    ),
    (
        "input-on-meta",
        replace(input=lambda d: torch.zeros(2, 3, 5, dtype=torch.uint8, device="meta")),
        RuntimeError,
        r"must be on input's device meta",
    ),
]


def call_affine(args, out_dtype=torch.float32):
    return affine(args["input"], args["weight"], args["bias"], args["dim"], out_dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("make_args,error,match", [pytest.param(*case[1:], id=case[0]) for case in BAD_ARGS])
def test_affine_rejects(device, make_args, error, match):
    with pytest.raises(error, match=match):
        call_affine(make_args(device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("make_args,error,match", [pytest.param(*case[1:], id=case[0]) for case in BAD_ARGS])
def test_affine_out_rejects_and_leaves_out_untouched(device, make_args, error, match):
    args = make_args(device)
    shape = args["input"].shape if isinstance(args["input"], torch.Tensor) else (2, 3, 5)
    out = torch.full(shape, SENTINEL, dtype=torch.float32, device=device)
    with pytest.raises(error, match=match.replace("affine", "affine_out")):
        affine_out(out, args["input"], args["weight"], args["bias"], args["dim"])
    assert bool((out == SENTINEL).all()), "a rejected call wrote into out"


def reaches_the_kernel(args):
    """True when a direct torch.ops call with these arguments runs the C++ checks: tensors and an int dim,
    none on the meta device (a meta tensor sends the call to the fake kernel)."""
    tensors = [args["input"], args["weight"], args["bias"]]
    return all(isinstance(t, torch.Tensor) and t.device.type != "meta" for t in tensors) and type(args["dim"]) is int


DIRECT_CASES = [case for case in BAD_ARGS if reaches_the_kernel(case[1]("cpu"))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("make_args,error,match", [pytest.param(*case[1:], id=case[0]) for case in DIRECT_CASES])
def test_direct_op_call_raises_runtime_error_led_by_the_api_type(device, make_args, error, match):
    """The stable ABI raises only RuntimeError: a direct call gets the same message, led by "[ValueError] "
    (the type the Python API raises), and no C++ backtrace."""
    args = make_args(device)
    out = torch.full(args["input"].shape, SENTINEL, device=device)
    calls = {
        "affine": lambda: torch.ops.fused_input_norm.affine(
            args["input"], args["weight"], args["bias"], args["dim"], torch.float32
        ),
        "affine_out": lambda: torch.ops.fused_input_norm.affine_out(
            out, args["input"], args["weight"], args["bias"], args["dim"]
        ),
    }
    for op, call in calls.items():
        with pytest.raises(RuntimeError) as info:
            call()
        message = str(info.value)
        assert type(info.value) is RuntimeError, type(info.value)
        assert re.match(rf"\[{error.__name__}\] fused_input_norm\.{op}: ", message), message
        assert re.search(match.replace("affine", op), message), message
        assert "\n" not in message and "Exception raised from" not in message, message
    assert bool((out == SENTINEL).all()), "a rejected call wrote into out"


@pytest.mark.parametrize("make_args,error,match", [pytest.param(*case[1:], id=case[0]) for case in DIRECT_CASES])
def test_fake_kernel_rejects_like_the_kernel(make_args, error, match):
    """torch.compile/export and meta tensors run the fake kernels: each check they can decide from metadata
    must reject as the C++ checks do (same type, same message), not pass a call the real op then refuses."""
    args = make_args("cpu")
    with FakeTensorMode() as mode:
        fake = {k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for k, v in args.items()}
        out = torch.empty(fake["input"].shape)
        with pytest.raises(error, match=match):
            call_affine(fake)
        with pytest.raises(error, match=match.replace("affine", "affine_out")):
            affine_out(out, fake["input"], fake["weight"], fake["bias"], fake["dim"])


def test_api_error_carries_no_tag_and_no_chained_runtime_error():
    args = good("cpu") | {"weight": torch.rand(4)}
    with pytest.raises(ValueError) as info:
        call_affine(args)
    assert str(info.value).startswith("fused_input_norm.affine: weight must have one value per channel")
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("out_dtype", [torch.int32, torch.uint8, torch.bool, torch.float64, torch.complex64], ids=str)
def test_bad_out_dtype(device, out_dtype):
    with pytest.raises(
        TypeError, match=r"out_dtype must be one of torch\.float16, torch\.bfloat16, torch\.float32, got"
    ):
        call_affine(good(device), out_dtype)


@pytest.mark.parametrize("out_dtype", ["bfloat16", 5, torch.zeros(1)], ids=["str", "int", "tensor"])
def test_out_dtype_of_a_wrong_python_type_is_a_type_error(out_dtype):
    """As for dim: a wrong Python type is a TypeError naming out_dtype, not the dispatcher's RuntimeError
    (nor, for an int, a silent cast to whichever dtype that enum value happens to be)."""
    with pytest.raises(TypeError, match=r"fused_input_norm\.affine: out_dtype must be a torch\.dtype or None, got "):
        call_affine(good("cpu"), out_dtype)


def bad_out_cases(device):
    """(name, out, input, error, message): `out` itself is wrong; weight/bias/dim are fine."""
    x = torch.randint(0, 256, (2, 3, 5), dtype=torch.uint8, device=device)
    storage = torch.full((64,), SENTINEL, device=device)
    xf = storage[0:30].view(2, 3, 5)
    return [
        (
            "shape",
            torch.full((2, 3, 6), SENTINEL, device=device),
            x,
            ValueError,
            r"out must have input's shape \[2, 3, 5\], got \[2, 3, 6\]",
        ),
        ("rank", torch.full((6, 5), SENTINEL, device=device), x, ValueError, r"out must have input's shape"),
        (
            "dtype-int32",
            torch.full((2, 3, 5), 77, dtype=torch.int32, device=device),
            x,
            TypeError,
            r"out must have one of the dtypes .*got torch\.int32",
        ),
        (
            "dtype-float64",
            torch.full((2, 3, 5), SENTINEL, dtype=torch.float64, device=device),
            x,
            TypeError,
            r"got torch\.float64",
        ),
        (
            "non-contiguous",
            torch.full((2, 5, 3), SENTINEL, device=device).transpose(1, 2),
            x,
            ValueError,
            r"out must be contiguous",
        ),
        ("device-meta", torch.empty((2, 3, 5), device="meta"), x, RuntimeError, r"out must be on input's device"),
        ("partial-overlap", storage[4:34].view(2, 3, 5), xf, ValueError, r"out partially overlaps input"),
        ("same-storage-shifted-by-one", storage[1:31].view(2, 3, 5), xf, ValueError, r"partially overlaps"),
    ]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "case",
    range(8),
    ids=lambda i: [
        "shape",
        "rank",
        "dtype-int32",
        "dtype-float64",
        "non-contiguous",
        "device-meta",
        "partial-overlap",
        "shifted-by-one",
    ][i],
)
def test_bad_out(device, case):
    name, out, x, error, match = bad_out_cases(device)[case]
    before = out.clone() if out.device.type != "meta" else None
    input_before = x.clone()
    with pytest.raises(error, match=match):
        affine_out(out, x, torch.rand(3, device=device), torch.rand(3, device=device), 1)
    if before is not None:
        assert torch.equal(out, before), f"{name}: a rejected call wrote into out"
    assert torch.equal(x, input_before)


@pytest.mark.parametrize("name,out,x,error,match", bad_out_cases("cpu"))
def test_fake_kernel_rejects_bad_out_like_the_kernel(name, out, x, error, match):
    """Every check on out, overlap included: fake tensors have no addresses, but views of one tensor share
    its fake storage, and offsets and strides decide the overlap as addresses do."""
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake_out = out if out.device.type == "meta" else mode.from_tensor(out)
        with pytest.raises(error, match=match):
            affine_out(fake_out, mode.from_tensor(x), torch.rand(3), torch.rand(3), 1)


@pytest.mark.parametrize("name", ["weight", "bias"])
@pytest.mark.parametrize("fake", [True, False], ids=["fake", "meta"])
def test_fake_kernel_rejects_out_overlapping_weight_or_bias(name, fake):
    """torch.compile traces with these: out sharing bytes with weight or bias is refused as in eager, and a
    disjoint part of the same storage is accepted."""
    storage = torch.zeros(16, device="cpu" if fake else "meta")
    tensors = {
        "out": storage[:6].view(2, 3),
        "input": torch.zeros(2, 3, dtype=torch.uint8, device=storage.device),
        "weight": torch.ones(3, device=storage.device),
        "bias": torch.zeros(3, device=storage.device),
        "overlapping": storage[4:7],
        "disjoint": storage[8:11],
    }
    with FakeTensorMode() if fake else contextlib.nullcontext() as mode:
        t = {k: mode.from_tensor(v) for k, v in tensors.items()} if fake else tensors
        for part, error in (("overlapping", True), ("disjoint", False)):
            args = {"weight": t["weight"], "bias": t["bias"]} | {name: t[part]}
            with (
                pytest.raises(ValueError, match=rf"affine_out: out overlaps {name}; pass a separate")
                if error
                else (contextlib.nullcontext())
            ):
                affine_out(t["out"], t["input"], args["weight"], args["bias"], 1)


@pytest.mark.parametrize("grad", [True, False], ids=["autograd", "inference_mode"])
@pytest.mark.parametrize(
    "op,position,name",
    [
        ("affine", 0, "input"),
        ("affine", 1, "weight"),
        ("affine", 2, "bias"),
        ("affine_out", 0, "out"),
        ("affine_out", 1, "input"),
        ("affine_out", 2, "weight"),
        ("affine_out", 3, "bias"),
    ],
)
def test_direct_op_call_with_none_for_a_tensor(op, position, name, grad, capfd):
    """The schema takes Tensor, but a direct torch.ops call can pass None: the op's tagged RuntimeError naming
    the argument, from the Python autograd kernel or the C++ checks alike, and no C++ backtrace on stderr."""
    x = torch.zeros(2, 3, 5, dtype=torch.uint8)
    args = (
        [x, torch.ones(3), torch.zeros(3)]
        if op == "affine"
        else [torch.zeros(2, 3, 5), x, torch.ones(3), torch.zeros(3)]
    )
    args[position] = None
    call = getattr(torch.ops.fused_input_norm, op)
    extra = (1, None) if op == "affine" else (1,)
    with torch.inference_mode(not grad), pytest.raises(RuntimeError) as info:
        call(*args, *extra)
    assert type(info.value) is RuntimeError
    assert str(info.value) == f"[TypeError] fused_input_norm.{op}: {name} must be a torch.Tensor, got None"
    captured = capfd.readouterr()
    assert "Exception raised from" not in captured.err and "frame #" not in captured.err, captured.err[-2000:]


@pytest.mark.parametrize("device", DEVICES)
def test_exact_alias_is_in_place_not_an_error(device):
    x = torch.arange(30, dtype=torch.float32, device=device).view(2, 3, 5)
    affine_out(x, x, torch.full((3,), 2.0, device=device), torch.full((3,), 1.0, device=device), 1)
    assert torch.equal(x, torch.arange(30, dtype=torch.float32, device=device).view(2, 3, 5) * 2 + 1)


@pytest.mark.parametrize("device", DEVICES)
def test_exact_alias_with_other_strides_on_size_one_dims_is_in_place(device):
    """Strides of size-1 dims address nothing: the same elements viewed with other such strides alias exactly."""
    x = torch.arange(15, dtype=torch.float32, device=device).view(1, 3, 5)
    same = x.as_strided((1, 3, 5), (1, 5, 1))  # x's strides are (15, 5, 1)
    affine_out(x, same, torch.full((3,), 2.0, device=device), torch.full((3,), 1.0, device=device), 1)
    assert torch.equal(x, torch.arange(15, dtype=torch.float32, device=device).view(1, 3, 5) * 2 + 1)


def test_at_least_30_distinct_bad_inputs():
    """The battery's size, counted from the tables above and the module's (tests/test_module.py)."""
    import test_module

    op_cases = len(BAD_ARGS) + 5 + len(bad_out_cases("cpu"))
    module_cases = len(test_module.test_bad_construction.pytestmark[0].args[1]) + len(
        test_module.test_bad_forward_input.pytestmark[0].args[1]
    )
    assert op_cases + module_cases >= 30


@pytest.mark.parametrize(
    "size", [(40, 36), (97, 60), (14, 90), (61, 83)], ids=["shrink", "grow", "tall-shrink", "kept"]
)
def test_padded_pixels_whose_last_padding_lies_past_the_tensor(size):
    """Interleaved pixels 4 bytes apart with 3 channels (Pillow's RGBX, read in place) where the storage ends at
    the last pixel's third byte: the resize reads no byte past it (the sanitizer build would report one) and
    gives the contiguous copy's result, on every pass order and with no pass."""
    from fused_input_norm import FusedInputNorm

    height, width = 61, 83
    rgbx = torch.randint(
        0, 256, (height * width * 4 - 1,), dtype=torch.uint8, generator=torch.Generator().manual_seed(3)
    )
    padded = rgbx.as_strided((height, width, 3), (4 * width, 4, 1))
    norm = FusedInputNorm.identity()
    for reference in ("pil", "torchvision"):
        got = norm.resize(padded, torch.float32, size, reference=reference, channel_dim=-1)
        expected = norm.resize(padded.contiguous(), torch.float32, size, reference=reference, channel_dim=-1)
        assert torch.equal(got, expected), reference
