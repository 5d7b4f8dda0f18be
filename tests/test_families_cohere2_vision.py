"""Command A Vision (Cohere2VisionImageProcessor, torchvision only) against transformers 5's own processor:
FusedHFImageProcessor(upstream) against upstream itself on real photos (one tile, a wide and a tall one cut
into tiles with a thumbnail, a tiny one scaled up, 12 MP) and a batch of them all, float32 within 1e-6 and the
resized bytes equal, every key with transformers' container types (return_tensors "pt" and unset); per-call
tile limits (min_patches, which transformers reads nowhere, included) and crop_to_patches off; FusedImageProcessor
from the config as the class saves it; the grid rule against transformers' own get_optimal_tiled_canvas over
many shapes. Strict: a call handed back fails (family_checks.forbid_upstream).

The EQUALITY lines printed (pytest -s) are the equality table: case, max abs diff."""

import numpy as np
import pytest
import torch
from family_checks import FP32_ATOL, as_input, assert_same, forbid_upstream, photo

from fused_input_norm import FusedImageProcessor
from fused_input_norm.families import cohere2_vision
from fused_input_norm.hf_adapter import FusedHFImageProcessor

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
cohere_hf = pytest.importorskip("transformers.models.cohere2_vision.image_processing_cohere2_vision")
Cohere = cohere_hf.Cohere2VisionImageProcessor


def shapes_photos() -> dict[str, np.ndarray]:
    rocket, coffee, chelsea, astronaut = (photo(n) for n in ("rocket", "coffee", "chelsea", "astronaut"))
    wide = np.concatenate([rocket[:400], coffee], axis=1)
    return {
        "one-tile": astronaut,  # 512x512: its own tile, kept
        "wide": wide,  # 400x1240
        "tall": np.ascontiguousarray(np.concatenate([astronaut] * 3, axis=0)[:, 100:460]),  # 1536x360
        "tiny": np.ascontiguousarray(chelsea[100:117, 200:229]),  # 17x29
        "12mp": np.array(Image.fromarray(wide).resize((4032, 3024))),
    }


PHOTOS = shapes_photos()
CASES = [*PHOTOS, "batch"]


def case_images(case: str) -> list[torch.Tensor]:
    photos = [PHOTOS[k] for k in PHOTOS if k != "12mp"] if case == "batch" else [PHOTOS[case]]
    return [as_input("torchvision", hwc) for hwc in photos]


def check(monkeypatch, case: str, kwargs: dict, config: dict | None = None, label: str = ""):
    images = case_images(case)
    expected = Cohere(**(config or {}))(images, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(Cohere(**(config or {})))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(images, return_tensors="pt", **kwargs), expected, f"cohere2_vision {case} {label or kwargs}")
    return expected


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("case", CASES)
def test_adapter_matches_transformers(monkeypatch, case, dtype):
    kwargs = {"do_rescale": False, "do_normalize": False} if dtype == "uint8" else {}
    expected = check(monkeypatch, case, kwargs, label=dtype)
    if case == "wide":  # the case is what it says: tiles and a thumbnail
        assert expected["num_patches"].tolist()[0] > 2


PER_CALL = {
    "max-4": {"max_patches": 4},
    "max-1": {"max_patches": 1},
    "min-ignored": {"min_patches": 6, "max_patches": 4},
    "no-crop": {"crop_to_patches": False},
    "tile-336": {"size": {"height": 336, "width": 336}},
    "bilinear": {"resample": 2},
}


@pytest.mark.parametrize("name", PER_CALL)
def test_per_call_settings(monkeypatch, name):
    check(monkeypatch, "batch", PER_CALL[name], label=name)


def test_return_tensors_unset_gives_transformers_containers(monkeypatch):
    """Unset: pixel_values a list of [C, h, w] tensors, num_patches a list of ints, as transformers lists them."""
    images = case_images("batch")
    expected = Cohere()(images)
    ours = FusedHFImageProcessor(Cohere())
    forbid_upstream(monkeypatch, ours)
    got = ours(images)
    assert set(got) == set(expected)
    assert got["num_patches"] == expected["num_patches"] and all(type(n) is int for n in got["num_patches"])
    assert type(got["pixel_values"]) is type(expected["pixel_values"]) is list
    assert len(got["pixel_values"]) == len(expected["pixel_values"])
    for have, want in zip(got["pixel_values"], expected["pixel_values"], strict=True):
        assert have.shape == want.shape and float((have - want).abs().max()) <= FP32_ATOL


def test_processor_from_the_saved_config():
    processor = FusedImageProcessor.from_preprocessor_config(Cohere().to_dict(), device="cpu", reference="torchvision")
    assert processor.settings.kind == "cohere2_vision"
    photos = [PHOTOS[k] for k in ("wide", "tall", "tiny")]
    expected = Cohere()([as_input("torchvision", p) for p in photos], return_tensors="pt")
    assert_same(processor(photos), expected, "cohere2_vision from-config")


def test_grid_rule_is_transformers():
    """cohere2_vision.tile_grid against transformers' get_optimal_tiled_canvas over thousands of shapes, for
    several tile sizes and limits."""
    rng = np.random.default_rng(0)
    shapes = [(int(h), int(w)) for h, w in rng.integers(1, 6000, size=(1500, 2))]
    shapes += [(1, 1), (1, 5000), (5000, 1), (512, 512), (1080, 1920), (3024, 4032), (513, 1024)]
    grids = set()
    for tile, most in ((512, 12), (336, 6), (448, 1), (512, 30)):
        for h, w in shapes:
            want = tuple(cohere_hf.get_optimal_tiled_canvas((h, w), (tile, tile), 1, most))
            assert cohere2_vision.tile_grid(h, w, (tile, tile), most) == want, (h, w, tile, most)
            grids.add(want)
    assert len(grids) > 20, grids
