"""The benchmark's plumbing on tiny shapes: every layout case builds the view it names, and the report has
every method, floor and ratio. No timing is asserted."""

import importlib.util
import math

import pytest
import torch

from fused_input_norm import bench

TINY = [
    bench.Case("patches u8->bf16", (5, 3, 392), torch.uint8, torch.bfloat16, 1),
    bench.Case("NHWC u8->bf16", (2, 8, 8, 3), torch.uint8, torch.bfloat16, -1),
    bench.Case("HWC->CHW u8->f32", (2, 8, 8, 3), torch.uint8, torch.float32, 1, bench.nhwc_as_nchw),
    bench.Case("patchify video", (4, 3, 56, 84), torch.uint8, torch.bfloat16, 5, bench.qwen2vl_patch_view),
    bench.Case("patchify image", (1, 3, 28, 56), torch.uint8, torch.bfloat16, 5, bench.image_as_two_frames),
    bench.Case("patches[1:]", (4, 1176), torch.uint8, torch.bfloat16, 1, bench.rows_after_first),
    bench.Case("broadcast", (3, 8, 8), torch.uint8, torch.bfloat16, 1, bench.batch_of_32),
]


def test_patch_view_is_qwen2vl_pixel_values():
    """The 9-D view, made contiguous, is the processor's row layout: channel-major rows of T*P*P pixels,
    built here independently by cutting each 2x2 merge group of 14x14 patches out of the frames."""
    frames = torch.randint(0, 256, (4, 3, 56, 84), dtype=torch.uint8)
    rows = bench.qwen2vl_patch_view(frames).contiguous().view(-1, 3 * 2 * 14 * 14)
    expected = []
    for t in range(0, 4, 2):
        for bh in range(56 // 28):
            for bw in range(84 // 28):
                for mh in range(2):
                    for mw in range(2):
                        h, w = (bh * 2 + mh) * 14, (bw * 2 + mw) * 14
                        expected.append(frames[t : t + 2, :, h : h + 14, w : w + 14].transpose(0, 1).reshape(-1))
    assert torch.equal(rows, torch.stack(expected))
    assert bench.qwen2vl_patch_view(frames).data_ptr() == frames.data_ptr()  # a view, no copy


def test_case_views_are_the_layouts_they_name():
    _, hwc = bench.make_input(TINY[2], torch.device("cpu"))
    assert hwc.shape == (2, 3, 8, 8) and hwc.stride(1) == 1
    stored, image = bench.make_input(TINY[4], torch.device("cpu"))
    assert image.stride(6) == 0 and image.shape[6] == 2  # the temporal axis repeats one frame
    stored, rows = bench.make_input(TINY[5], torch.device("cpu"))
    assert rows.is_contiguous() and (rows.data_ptr() - stored.data_ptr()) == 1176
    _, batch = bench.make_input(TINY[6], torch.device("cpu"))
    assert batch.shape == (32, 3, 8, 8) and batch.stride(0) == 0


def test_report_structure():
    report = bench.run(torch.device("cpu"), reps=1, with_compile=False, cases=TINY)
    assert [r["case"] for r in report["results"]] == [c.name for c in TINY]
    for case, r in zip(TINY, report["results"], strict=True):
        expected = {bench.OP_OUT, bench.OP_ALLOC, bench.EAGER, bench.COPY_VIEW, bench.COPY_CONTIG}
        if case.dim == 1:
            expected.add(bench.BATCH_NORM)
        assert set(r["times_ms"]) == expected
        assert all(math.isfinite(ms) and ms > 0 for ms in r["times_ms"].values())
        assert set(r["min_ms"]) == expected and all(r["min_ms"][k] <= r["times_ms"][k] for k in expected)
        assert set(r["ratios"]) == {"op/copy_(view)", "op/contiguous floor", "alloc/out=", "eager/op"}
        assert r["ratios"]["alloc/out="] == r["times_ms"][bench.OP_ALLOC] / r["times_ms"][bench.OP_OUT]
        assert r["reps"] == 1
        element_bytes = 1 + torch.empty(0, dtype=case.out_dtype).element_size()
        _, x = bench.make_input(case, torch.device("cpu"))
        assert r["bytes"] == x.numel() * element_bytes
    text = bench.format_report(report)
    assert all(c.name in text for c in TINY) and "| case |" in text


def test_check_op_catches_a_wrong_result(monkeypatch):
    case = TINY[2]
    _, x = bench.make_input(case, torch.device("cpu"))
    norm = bench.clip_norm(torch.device("cpu"))
    bench.check_op(case, x, norm)
    monkeypatch.setattr(bench, "affine", lambda x, w, b, dim, dtype: torch.zeros(x.shape, dtype=dtype))
    with pytest.raises(AssertionError):
        bench.check_op(case, x, norm)


def test_failing_method_is_reported_not_timed():
    def broken():
        raise RuntimeError("CUDNN_STATUS_INTERNAL_ERROR")

    methods = {"fine": lambda: None, "broken": broken}
    assert bench.drop_failing(methods) == {"broken": "RuntimeError: CUDNN_STATUS_INTERNAL_ERROR"}
    assert list(methods) == ["fine"]


def test_plot_without_matplotlib_fails_before_timing(monkeypatch, capsys):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "matplotlib" else real_find_spec(name)
    )
    monkeypatch.setattr(bench, "run", lambda *a, **k: pytest.fail("timed before checking for matplotlib"))
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--plot", "x.png", "--no-compile"])
    assert exit_info.value.code == 2
    assert "pip install matplotlib" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib (the [plot] extra)")
def test_plot_writes_a_png(tmp_path):
    report = bench.run(torch.device("cpu"), reps=1, with_compile=False, cases=TINY[:3])
    path = tmp_path / "bench.png"
    bench.plot(report, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_cases_are_rejected(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--cases", "no such case", "--no-compile"])
    assert "matches none" in capsys.readouterr().err


@pytest.mark.slow
def test_compiled_code_is_timed_in_a_subprocess_beside_the_op():
    """The smallest real case end to end: torch.compile runs in the subprocess, which re-times op (out=)."""
    case = bench.CASES[bench.SMALL_CASE]
    report = bench.run(torch.device("cpu"), reps=1, cases=[case])
    (r,) = report["results"]
    assert "compile_error" not in report
    assert {bench.COMPILED, bench.OP_OUT_COMPILE_RUN} <= set(r["times_ms"]) and r["compile_s"] > 0
    assert r["ratios"]["compiled/op"] == r["times_ms"][bench.COMPILED] / r["times_ms"][bench.OP_OUT_COMPILE_RUN]


def test_compile_needs_a_case_the_subprocess_knows():
    with pytest.raises(ValueError, match=r"only knows bench\.CASES"):
        bench.run(torch.device("cpu"), reps=1, cases=TINY[:1])
