"""What the family tests (test_families_*.py) share: real photos, each transformers backend's native input,
the guard that fails a call handed back to transformers, and the comparison of a whole output with
transformers' own."""

import numpy as np
import torch

FP32_ATOL = 1e-6
# llava-hf/llava-v1.6-mistral-7b-hf's preprocessor_config.json, less its type keys; llava-v1.6-vicuna-7b-hf,
# -vicuna-13b-hf and -34b-hf ship the same keys and values, and LLaVA-NeXT-Video-7B-hf's image processor too.
LLAVA_NEXT_V16 = {
    "aspect_ratio_setting": "anyres",
    "crop_size": {"height": 336, "width": 336},
    "do_center_crop": True,
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_grid_pinpoints": [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]],
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "resample": 3,
    "rescale_factor": 0.00392156862745098,
    "size": {"shortest_edge": 336},
}
# Granite Vision's (ibm-granite/granite-vision-3.x; Granite 4 Vision loads the same class): SigLIP's mean and
# std, 384 patches, 27 grids of 1 to 10 patches, in the config's order (it breaks ties).
GRANITE_VISION = {
    **LLAVA_NEXT_V16,
    "crop_size": {"height": 384, "width": 384},
    "size": {"shortest_edge": 384},
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "image_grid_pinpoints": [[384, 384 * c] for c in range(1, 11)]
    + [[768, 384 * c] for c in range(1, 6)]
    + [[1152, 384 * c] for c in range(1, 4)]
    + [[1536, 384], [1536, 768], [1920, 384], [1920, 768]]
    + [[384 * r, 384] for r in range(6, 11)],
}


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


def forbid_backend_resize(monkeypatch) -> None:
    """transformers' backends resizing fails the test: every resize of a call on the generic path (upstream's own
    code) is then the package's primitive."""
    from transformers.image_processing_backends import PilBackend, TorchvisionBackend

    def refuse(*args, **kwargs):
        raise AssertionError("transformers' backend resized: the generic path handed a resize back")

    for backend in (TorchvisionBackend, PilBackend):
        monkeypatch.setattr(backend, "resize", refuse)


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
