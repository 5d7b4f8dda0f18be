"""What the family tests (test_families_*.py) share: real photos, each transformers backend's native input,
the guard that fails a call handed back to transformers, and the comparison of a whole output with
transformers' own."""

import numpy as np
import torch

FP32_ATOL = 1e-6


def photo(name: str) -> np.ndarray:
    """One of scikit-image's photos, HWC uint8 (the caller has importorskip'ed skimage)."""
    from skimage import data

    return np.ascontiguousarray(getattr(data, name)())


def as_input(backend: str, hwc: np.ndarray):
    """Each backend's native input: a PIL image for the Pil class, a CPU uint8 [C, H, W] tensor otherwise."""
    if backend == "pil":
        from PIL import Image

        return Image.fromarray(hwc)
    return torch.from_numpy(hwc).permute(2, 0, 1).contiguous()


def forbid_upstream(monkeypatch, adapter) -> None:
    """A call handed back to transformers fails the test, instead of passing on transformers' own answer."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"handed back to transformers: {sorted(adapter._logged)}")

    monkeypatch.setattr(adapter.upstream, "preprocess", refuse)
    monkeypatch.setattr(adapter.upstream, "_preprocess", refuse)


def assert_same(got, expected, label: str) -> str:
    """Every key transformers returns, with its type, shape and dtype; float32 tensors within 1e-6, every other
    output (uint8 or bfloat16 pixels, integer sizes and counts, lists) equal. Prints and returns the equality
    table's cell for the pixels: their max |diff|, or "equal"."""
    assert set(got) == set(expected), (label, set(got), set(expected))
    cell = "equal"
    for key, want in expected.items():
        have = got[key]
        if not isinstance(want, torch.Tensor):
            assert have == want, (label, key, have, want)
            continue
        assert isinstance(have, torch.Tensor), (label, key, type(have))
        have = have.cpu()
        assert have.dtype == want.dtype and have.shape == want.shape, (label, key, have.dtype, have.shape, want.shape)
        if want.dtype == torch.float32:
            diff = float((have.double() - want.double()).abs().max()) if want.numel() else 0.0
            assert diff <= FP32_ATOL, (label, key, diff)
            if key.startswith("pixel_values") and diff:
                cell = f"{diff:.3g}"
        else:
            assert torch.equal(have, want), (label, key, int((have != want).sum()))
    pixels = next((key for key in expected if key.startswith("pixel_values")), None)
    shape = tuple(expected[pixels].shape) if pixels else ()
    print(f"EQUALITY {label}: {cell} {shape} {expected[pixels].dtype if pixels else ''}")
    return cell
