"""The vLLM plugin against the real vllm package: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in
.venv-vllm and runs this file. Without vllm, only the checks that need no vllm run.

The reference is vLLM's own eager FusedMMInputNorm.forward_native, called on the same instance."""

import importlib.metadata
import importlib.util
import logging
import os
import subprocess
import sys

import pytest
import torch
from conftest import CLIP_MEAN, CLIP_STD, RecordOps, requires_cuda
from torch import nn

from fused_input_norm import FusedInputNorm, vllm_plugin

HAS_VLLM = importlib.util.find_spec("vllm") is not None
requires_vllm = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)
AFFINE = torch.ops.fused_input_norm.affine.default
COPIES = {torch.ops.aten.clone.default, torch.ops.aten.copy_.default, torch.ops.aten._to_copy.default}
SHAPES = {"pcl": (1000, 3 * 2 * 14 * 14), "bchw": (2, 3, 64, 48)}  # Qwen2-VL patches; gemma3-style images


@pytest.fixture(scope="module")
def upstream():
    """vLLM's FusedMMInputNorm class, with the plugins loaded the way vLLM loads them, in a CPU config."""
    from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
    from vllm.model_executor.custom_op import op_registry_oot
    from vllm.model_executor.layers.fusion.mm_input_norm import FusedMMInputNorm
    from vllm.plugins import load_general_plugins

    assert "FusedMMInputNorm" not in op_registry_oot, "registered before vLLM loaded its plugins"
    load_general_plugins()
    with set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu"))):
        yield FusedMMInputNorm


def bf16_ulps(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How many bfloat16 values lie between a and b, elementwise (the bits as ordered integers)."""

    def ordered(t):
        bits = t.view(torch.int16).int()
        return torch.where(bits < 0, -(bits & 0x7FFF), bits)

    return (ordered(a) - ordered(b)).abs()


def operand_magnitude(norm, x):
    """|x| * |w[c]| + |b[c]| in float64, elementwise: the scale of the fp32 rounding errors."""
    channels = x.unflatten(1, (norm.channel, -1)) if x.dim() == 2 else x
    shape = [1, -1] + [1] * (channels.dim() - 2)
    magnitude = channels.double().abs() * norm.weight.double().abs().view(shape) + norm.bias.double().abs().view(shape)
    return magnitude.reshape(x.shape)


@requires_vllm
@requires_cuda
@pytest.mark.parametrize("layout", ["pcl", "bchw"])
@pytest.mark.parametrize("in_dtype", [torch.uint8, torch.float32], ids=str)
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("method", ["forward", "forward_cuda"])
def test_forward_cuda_on_cuda_tensors(upstream, layout, in_dtype, out_dtype, method):
    """The path a GPU server runs: the module and the pixels on the GPU, forward_cuda (what forward dispatches
    to there) through this package's CUDA kernel, against vLLM's eager forward_native on the same tensors."""
    gen = torch.Generator().manual_seed(7 + len(layout))
    norm = upstream(CLIP_MEAN, CLIP_STD, 1 / 255, 3, layout=layout).to("cuda")
    x = pixels(layout, in_dtype, gen).to("cuda")
    with RecordOps() as record:
        got = getattr(norm, method)(x, out_dtype)
    assert record.ops().count(AFFINE) == 1, "did not run torch.ops.fused_input_norm.affine"
    assert got.device.type == "cuda" and got.dtype == out_dtype and got.shape == x.shape
    expected = upstream.forward_native(norm, x, out_dtype)
    if out_dtype == torch.bfloat16:
        assert_within_one_bf16_ulp(got.cpu(), expected.cpu(), operand_magnitude(norm, x).cpu())
    else:
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)


def assert_within_one_bf16_ulp(got, expected, magnitude):
    """1 bf16 ulp apart, except where x * w and b cancel to a tiny result: there vLLM's multiply-then-add
    and our one FMA differ by up to an fp32 rounding of the operands (2^-24 * magnitude each), which is
    many bf16 ulps of a result near zero. Returns the largest ulp distance and how many elements needed
    the cancellation allowance."""
    ulps = bf16_ulps(got, expected)
    diff = (got.double() - expected.double()).abs()
    cancelled = (ulps > 1) & (diff <= 2.0**-23 * magnitude + 2.0**-8 * expected.double().abs())
    bad = (ulps > 1) & ~cancelled
    assert not bad.any(), f"{int(bad.sum())} elements more than 1 bf16 ulp apart, up to {int(ulps.max())}"
    return int(ulps[~cancelled].max()) if (~cancelled).any() else 0, int(cancelled.sum())


def pixels(layout, dtype, gen):
    x = torch.randint(0, 256, SHAPES[layout], generator=gen, dtype=torch.int32)
    return x.to(dtype) if dtype == torch.uint8 else (x + torch.rand(x.shape, generator=gen)).to(dtype)


def test_entry_point_is_declared():
    try:
        importlib.metadata.distribution("fused_input_norm")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("fused_input_norm is imported from a source tree, not installed: no entry points to read")
    (entry,) = [
        e for e in importlib.metadata.entry_points(group="vllm.general_plugins") if e.name == "fused_input_norm"
    ]
    assert entry.value == "fused_input_norm.vllm_plugin:register"
    assert entry.load() is vllm_plugin.register


def test_importing_the_package_never_imports_vllm():
    code = "import sys, fused_input_norm, fused_input_norm.vllm_plugin; print(sorted(m for m in sys.modules if m.split('.')[0] == 'vllm'))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


@pytest.fixture
def plugin_log():
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    vllm_plugin.logger.addHandler(handler)
    yield records
    vllm_plugin.logger.removeHandler(handler)


@pytest.mark.skipif(HAS_VLLM, reason="checks the plugin where vllm is not installed")
def test_register_without_vllm_logs_and_returns(plugin_log):
    vllm_plugin.register()
    assert [r.getMessage() for r in plugin_log] == [
        "fused_input_norm: images stay with transformers' processor: this vLLM has no "
        "vllm.multimodal.processing.context.cached_processor_from_config (No module named 'vllm')",
        "fused_input_norm: not registering: vLLM's CustomOp registry cannot be imported (No module named 'vllm')",
    ]


@requires_vllm
def test_register_against_a_vllm_without_the_class_logs_and_returns(monkeypatch, plugin_log):
    from vllm.model_executor.custom_op import op_registry_oot

    monkeypatch.setitem(sys.modules, vllm_plugin.UPSTREAM_MODULE, None)  # what an older vLLM looks like
    before = dict(op_registry_oot)
    vllm_plugin.register()
    assert op_registry_oot == before
    (record,) = plugin_log
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(
        "fused_input_norm: not registering: this vLLM has no "
        "vllm.model_executor.layers.fusion.mm_input_norm.FusedMMInputNorm to replace"
    )


@requires_vllm
def test_load_general_plugins_registers_our_subclass(upstream):
    from vllm.model_executor.custom_op import op_registry_oot

    ours = op_registry_oot["FusedMMInputNorm"]
    assert ours.__module__ == "fused_input_norm.vllm_plugin" and issubclass(ours, upstream) and ours is not upstream
    vllm_plugin.register()  # vLLM may load plugins again in the same process: a no-op, no duplicate error
    assert op_registry_oot["FusedMMInputNorm"] is ours


@requires_vllm
def test_vllm_plugins_env_turns_it_off():
    code = (
        "from vllm.plugins import load_general_plugins; load_general_plugins(); "
        "from vllm.model_executor.custom_op import op_registry_oot; print('FusedMMInputNorm' in op_registry_oot)"
    )
    env = os.environ | {"VLLM_PLUGINS": ""}
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env).stdout
    assert out.strip().splitlines()[-1] == "False"


@requires_vllm
@pytest.mark.parametrize("layout", ["pcl", "bchw"])
def test_constructed_as_upstream(upstream, layout):
    norm = upstream(CLIP_MEAN, CLIP_STD, 1 / 255, 3, layout=layout)
    assert type(norm).__module__ == "fused_input_norm.vllm_plugin" and isinstance(norm, upstream)
    assert norm.layout == layout and norm.channel == 3
    assert norm.input_dtype == torch.uint8
    assert norm.state_dict() == {}
    std = torch.tensor(CLIP_STD, dtype=torch.float64)
    torch.testing.assert_close(norm.weight.double(), (1 / 255) / std, rtol=1e-7, atol=0)
    torch.testing.assert_close(
        norm.bias.double(), -torch.tensor(CLIP_MEAN, dtype=torch.float64) / std, rtol=1e-7, atol=0
    )


@requires_vllm
@pytest.mark.parametrize("layout", ["pcl", "bchw"])
@pytest.mark.parametrize("in_dtype", [torch.uint8, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("method", ["forward", "forward_cuda", "forward_hip", "forward_native", "forward_oot"])
def test_matches_upstream_forward_native(upstream, layout, in_dtype, out_dtype, method, record_property):
    """forward dispatches to forward_cuda here (vLLM's platform resolves to CUDA even without a GPU)."""
    gen = torch.Generator().manual_seed(len(layout) + in_dtype.itemsize)
    norm = upstream(CLIP_MEAN, CLIP_STD, 1 / 255, 3, layout=layout)
    x = pixels(layout, in_dtype, gen)
    with RecordOps() as record:
        got = getattr(norm, method)(x, out_dtype)  # positional, as Qwen2-VL calls it
    assert record.ops().count(AFFINE) == 1, "did not run torch.ops.fused_input_norm.affine"
    expected = upstream.forward_native(norm, x, out_dtype)  # vLLM's eager code on the same instance
    assert got.dtype == out_dtype and got.shape == x.shape == expected.shape
    if out_dtype == torch.bfloat16:
        ulps, cancelled = assert_within_one_bf16_ulp(got, expected, operand_magnitude(norm, x))
        record_property("max_bf16_ulps", ulps)
        record_property("elements_past_one_ulp_by_cancellation", cancelled)
    else:
        record_property("max_abs_diff", float((got - expected).abs().max()))
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)


@requires_vllm
@pytest.mark.parametrize("method", ["forward_native", "forward_oot"])
def test_inputs_without_a_kernel_fall_back_to_upstream(upstream, method):
    """float64 pixels: upstream's own method runs. (forward_cuda falls back to upstream's Triton kernel,
    which needs a GPU.)"""
    norm = upstream(CLIP_MEAN, CLIP_STD, 1 / 255, 3)
    x = torch.rand(10, 3 * 16, dtype=torch.float64) * 255
    with RecordOps() as record:
        got = getattr(norm, method)(x, torch.float32)
    assert AFFINE not in record.ops()
    torch.testing.assert_close(got, upstream.forward_native(norm, x, torch.float32), rtol=0, atol=0)


@requires_vllm
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_buffers_cast_with_the_model_still_normalize(upstream, dtype):
    """A model-wide `.to(dtype)` casts upstream's fp32 weight/bias buffers too; upstream's Triton kernel
    widens them to fp32 and runs, so must this. Reference: the float64 formula on the cast buffers."""
    norm = upstream(CLIP_MEAN, CLIP_STD, 1 / 255, 3).to(dtype)
    assert norm.weight.dtype == dtype
    x = pixels("pcl", torch.uint8, torch.Generator().manual_seed(7))
    with RecordOps() as record:
        got = norm(x, torch.bfloat16)
    assert record.ops().count(AFFINE) == 1, "did not run torch.ops.fused_input_norm.affine"
    channels = x.unflatten(1, (3, -1)).double()
    expected = channels * norm.weight.double().view(1, 3, 1) + norm.bias.double().view(1, 3, 1)
    assert_within_one_bf16_ulp(got, expected.reshape(x.shape).to(torch.bfloat16), operand_magnitude(norm, x))


@requires_vllm
def test_identity_config_keeps_upstream_buffers(upstream):
    """Upstream's tests expect FusedMMInputNorm built from an identity config to hold ones and zeros."""
    norm = upstream([0.0] * 3, [1.0] * 3, 1.0)
    assert norm.weight.tolist() == [1.0] * 3 and norm.bias.tolist() == [0.0] * 3
    x = torch.randint(0, 256, (4, 3 * 16), dtype=torch.uint8)
    assert torch.equal(norm(x, torch.bfloat16), x.to(torch.bfloat16))


@requires_vllm
def test_dummy_weights_leave_the_output_unchanged(upstream):
    from vllm.config.load import LoadConfig
    from vllm.model_executor.model_loader.dummy_loader import DummyModelLoader

    model = nn.Module()
    model.input_norm = upstream(CLIP_MEAN, CLIP_STD, 1 / 255)
    model.standalone_norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    model.proj = nn.Linear(4, 4)
    x = torch.randint(0, 256, SHAPES["pcl"], dtype=torch.uint8)
    before = {name: getattr(model, name)(x, torch.bfloat16) for name in ("input_norm", "standalone_norm")}
    proj_before = model.proj.weight.detach().clone()
    # load_weights reads model_config only for online-quantized layers; building one needs a model download.
    DummyModelLoader(LoadConfig(load_format="dummy")).load_weights(model, model_config=None)
    assert not torch.equal(model.proj.weight, proj_before), "the dummy loader did not run"
    for name, y in before.items():
        assert torch.equal(getattr(model, name)(x, torch.bfloat16), y), name


@requires_vllm
@pytest.mark.parametrize("identity", [False, True])
def test_construction_under_meta_touches_no_device_tensor(upstream, identity):
    """Every op run while building reads CPU tensors only; the buffers are then copied to the device."""
    config = ([0.0] * 3, [1.0] * 3, 1.0) if identity else (CLIP_MEAN, CLIP_STD, 1 / 255)
    for build in (lambda: upstream(*config), lambda: FusedInputNorm(*config)):
        with RecordOps() as record, torch.device("meta"):
            norm = build()
        for func, args in record.calls:
            inputs = [a for a in args if isinstance(a, torch.Tensor)]
            assert all(t.device.type == "cpu" for t in inputs), f"{func} read a {[t.device for t in inputs]} tensor"
        for buffer in norm.buffers():
            assert buffer.device.type == "meta"


@requires_vllm
@pytest.mark.parametrize("layout", ["pcl", "bchw"])
def test_strided_input_is_normalized_without_a_copy(upstream, layout):
    wide = torch.randint(0, 256, (6, 2, *SHAPES["bchw"][1:]), dtype=torch.uint8)
    x = wide[:, 1] if layout == "bchw" else wide.flatten(1)[:, : SHAPES["pcl"][1]]  # rows/images of a bigger batch
    assert not x.is_contiguous()
    norm = upstream(CLIP_MEAN, CLIP_STD, 1 / 255, 3, layout=layout)
    with RecordOps() as record:
        got = norm(x, torch.bfloat16)
    assert not COPIES & set(record.ops()), [str(f) for f in record.ops()]
    (received,) = [args[0] for func, args in record.calls if func == AFFINE]
    assert received.untyped_storage().data_ptr() == wide.untyped_storage().data_ptr() and not received.is_contiguous()
    assert_within_one_bf16_ulp(got, upstream.forward_native(norm, x, torch.bfloat16), operand_magnitude(norm, x))
