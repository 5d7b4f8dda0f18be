"""LFM2-VL (Lfm2VlImageProcessor, torchvision only) against transformers 5's own processor:
FusedHFImageProcessor(upstream) against upstream itself on real photos of several sizes and aspect ratios (one
view scaled down, a tiny one scaled up, 1080p and a tall image cut into tiles with a thumbnail, a thin strip)
and a batch of them all, float32 within 1e-6 and the resized bytes (rescale and normalize off) equal, every key
with transformers' container types (return_tensors "pt" and unset, with and without return_row_col_info);
per-call token bounds, tile limits, tile size, splitting and thumbnail off; gray and RGBA; FusedImageProcessor
from the config as the class saves it; the grid, size and split rules against transformers' own methods over
many shapes; what it refuses, named. Strict: a call handed back fails (family_checks.forbid_upstream).

The EQUALITY lines printed (pytest -s) are the equality table: case, max abs diff."""

import logging

import numpy as np
import pytest
import torch
from conftest import requires_cuda
from family_checks import FP32_ATOL, as_input, assert_same, forbid_upstream, photo

from fused_input_norm import FusedImageProcessor
from fused_input_norm.families import internvl_chat, lfm2_vl
from fused_input_norm.hf_adapter import FusedHFImageProcessor

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
# its only backend is torchvision's: without torchvision transformers cannot import the class
Lfm2 = pytest.importorskip("transformers.models.lfm2_vl.image_processing_lfm2_vl").Lfm2VlImageProcessor


def shapes_photos() -> dict[str, np.ndarray]:
    rocket, coffee, chelsea, astronaut = (photo(n) for n in ("rocket", "coffee", "chelsea", "astronaut"))
    wide_1080p = np.array(Image.fromarray(np.concatenate([rocket[:400], coffee], axis=1)).resize((1920, 1080)))
    return {
        "one-view": rocket,  # 427x640: scaled down to its token bound, no tiles
        "tiny": np.ascontiguousarray(chelsea[100:117, 200:229]),  # 17x29: scaled up to min_image_tokens
        "1080p": wide_1080p,  # tiles (4x2: ties 2x1, and its area is over half the 4x2 grid's) and a thumbnail
        "tall": np.ascontiguousarray(np.concatenate([astronaut] * 4, axis=0)[:, 100:460]),  # 2048x360: 1 column
        "strip": np.ascontiguousarray(np.concatenate([coffee, coffee, coffee], axis=1)[:20]),  # 20x1800
    }


PHOTOS = shapes_photos()
CASES = [*PHOTOS, "batch"]


def case_images(case: str) -> list[torch.Tensor]:
    photos = [*PHOTOS.values(), PHOTOS["one-view"]] if case == "batch" else [PHOTOS[case]]
    return [as_input("torchvision", hwc) for hwc in photos]


def check(monkeypatch, case: str, kwargs: dict, config: dict | None = None, label: str = ""):
    """The adapter over Lfm2VlImageProcessor against the class itself, strict, return_tensors "pt"."""
    images = case_images(case)
    expected = Lfm2(**(config or {}))(images, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(Lfm2(**(config or {})))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(images, return_tensors="pt", **kwargs), expected, f"lfm2_vl {case} {label or kwargs}")
    return expected


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("case", CASES)
def test_adapter_matches_transformers(monkeypatch, case, dtype):
    kwargs = {"return_row_col_info": True}
    if dtype == "uint8":
        kwargs |= {"do_rescale": False, "do_normalize": False}
    expected = check(monkeypatch, case, kwargs, label=dtype)
    if case == "1080p":  # the case is what it says: 2 rows x 4 columns of 512 tiles and a thumbnail
        assert (expected["image_rows"].tolist(), expected["image_cols"].tolist()) == ([2], [4])
        assert expected["pixel_values"].shape[0] == 9
    if case == "tall":
        assert expected["image_cols"].tolist() == [1] and expected["image_rows"].tolist()[0] > 1


PER_CALL = {
    "tokens": {"max_image_tokens": 64, "min_image_tokens": 16},
    "tiles-1-4": {"min_tiles": 1, "max_tiles": 4},
    "tiles-4-6": {"min_tiles": 4, "max_tiles": 6, "max_pixels_tolerance": 0.5},
    "tile-256": {"tile_size": 256},
    "no-split": {"do_image_splitting": False},
    "no-thumbnail": {"use_thumbnail": False},
    "downsample-1": {"downsample_factor": 1, "max_image_tokens": 512},
    "patch-14": {"encoder_patch_size": 14, "tile_size": 448},
    "bicubic": {"resample": 3},
}


@pytest.mark.parametrize("name", PER_CALL)
def test_per_call_settings(monkeypatch, name):
    check(monkeypatch, "batch", PER_CALL[name] | {"return_row_col_info": True}, label=name)


def test_settings_in_the_config(monkeypatch):
    config = {"max_image_tokens": 128, "min_tiles": 1, "max_tiles": 6, "tile_size": 384}
    check(monkeypatch, "batch", {}, config, label="config")


def test_gray_and_rgba_are_converted_as_transformers_does(monkeypatch):
    """With do_convert_rgb (None in the class, as vLLM converts them itself): converted as transformers does."""
    rgb = PHOTOS["1080p"]
    alpha = np.linspace(0, 255, rgb.shape[1], dtype=np.uint8)[None, :].repeat(rgb.shape[0], 0)
    images = [Image.fromarray(rgb).convert("L"), Image.fromarray(np.dstack([rgb, alpha]))]
    expected = Lfm2()(images, return_tensors="pt", do_convert_rgb=True)
    ours = FusedHFImageProcessor(Lfm2())
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(images, return_tensors="pt", do_convert_rgb=True), expected, "lfm2_vl gray-rgba")


def test_gray_without_do_convert_rgb_fails_as_transformers_does():
    """Left unconverted (the class's default), a gray image meets three means: transformers raises, and so does
    the adapter, whose call goes through transformers' own code (the generic path)."""
    gray = [Image.fromarray(PHOTOS["one-view"]).convert("L")]
    with pytest.raises(RuntimeError) as theirs:
        Lfm2()(gray, return_tensors="pt")
    with pytest.raises(RuntimeError) as ours:
        FusedHFImageProcessor(Lfm2())(gray, return_tensors="pt")
    assert str(ours.value) == str(theirs.value)
    # FusedImageProcessor from the class's saved config (do_convert_rgb null) refuses it by name, unconverted
    processor = FusedImageProcessor.from_preprocessor_config(Lfm2().to_dict(), device="cpu", reference="torchvision")
    with pytest.raises(ValueError, match=r"images has 1 channels .* expected 3 \(do_convert_rgb is off\)"):
        processor([torch.from_numpy(PHOTOS["one-view"][None, ..., 0].copy())])


@pytest.mark.parametrize("row_col", [False, True])
def test_return_tensors_unset_gives_transformers_containers(monkeypatch, row_col):
    """Unset: transformers returns pixel_values, pixel_attention_mask and spatial_shapes as tensors and, with
    return_row_col_info, image_rows / image_cols as lists of ints and image_sizes as lists of [h, w]."""
    images = case_images("batch")
    expected = Lfm2()(images, return_row_col_info=row_col)
    ours = FusedHFImageProcessor(Lfm2())
    forbid_upstream(monkeypatch, ours)
    got = ours(images, return_row_col_info=row_col)
    assert set(got) == set(expected) and ("image_sizes" in got) == row_col
    for key, want in expected.items():
        assert type(got[key]) is type(want), (key, type(got[key]), type(want))
        if isinstance(want, list):
            assert got[key] == want, key
            assert all(type(v) is type(w) for v, w in zip(got[key], want, strict=True)), key
            continue
        assert got[key].dtype == want.dtype and got[key].shape == want.shape, key
        assert float((got[key].double() - want.double()).abs().max()) <= FP32_ATOL, key


def test_processor_from_the_saved_config():
    """FusedImageProcessor from the config as the class saves it (preprocessor_config.json)."""
    config = Lfm2().to_dict()
    processor = FusedImageProcessor.from_preprocessor_config(config, device="cpu", reference="torchvision")
    assert processor.settings.kind == "lfm2_vl"
    photos = [*PHOTOS.values()]
    expected = Lfm2()([as_input("torchvision", p) for p in photos], return_tensors="pt")
    assert_same(processor(photos), expected, "lfm2_vl from-config")


@requires_cuda
def test_cuda_calls_equal_the_same_calls_on_the_cpu():
    """device="cuda": the same outputs as on the CPU, bit for bit, the pixels left on the device, served."""
    ours = FusedHFImageProcessor(Lfm2())
    images = case_images("batch")
    on_cpu = ours(images, return_tensors="pt")
    on_gpu = ours(images, return_tensors="pt", device="cuda")
    assert not ours._logged, ours._logged
    assert on_gpu["pixel_values"].device.type == "cuda"
    assert set(on_gpu) == set(on_cpu)
    for key in on_cpu:
        assert torch.equal(on_gpu[key].cpu(), on_cpu[key]), key


def test_grid_size_and_split_rules_are_transformers():
    """The grid (internvl_chat.tile_grid, the same rule), lfm2_vl's smart_size and too_large against the class's
    own _get_grid_layout, smart_resize and
    _is_image_too_large over thousands of shapes (extreme ratios included), for several settings."""
    upstream = Lfm2()
    rng = np.random.default_rng(0)
    shapes = [(int(h), int(w)) for h, w in rng.integers(1, 6000, size=(1500, 2))]
    shapes += [(1, 1), (1, 5000), (5000, 1), (512, 512), (1080, 1920), (1920, 1080), (3024, 4032), (1024, 1536)]
    grids_seen = set()
    for min_tiles, max_tiles, tile, factor, tokens, tolerance in [
        (2, 10, 512, 2, 256, 2.0),
        (1, 4, 384, 2, 128, 1.0),
        (4, 12, 256, 1, 64, 0.5),
    ]:
        o = {"downsample_factor": factor, "max_image_tokens": tokens, "min_image_tokens": 16, "tolerance": tolerance}
        for h, w in shapes:
            want = upstream._get_grid_layout(h, w, min_tiles=min_tiles, max_tiles=max_tiles, tile_size=tile)[:2]
            assert internvl_chat.tile_grid(h, w, tile, min_tiles, max_tiles) == want, (h, w, min_tiles, max_tiles)
            grids_seen.add(want)
            want_w, want_h = upstream.smart_resize(h, w, factor, 16, tokens, 16)
            assert lfm2_vl.smart_size(h, w, o, 16) == (want_h, want_w), (h, w, factor, tokens)
            assert lfm2_vl.too_large(h, w, o, 16) == upstream._is_image_too_large(h, w, tokens, 16, factor, tolerance)
    assert len(grids_seen) > 20, grids_seen


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"do_pad": False}, "do_pad off is not implemented"),
        ({"min_tiles": 5, "max_tiles": 2}, "min_tiles must be less than or equal to max_tiles"),
        ({"tile_size": 500}, r"tile_size \(500\) must be a multiple of encoder_patch_size \(16\)"),
        ({"max_image_tokens": 0}, "max_image_tokens must be an int >= 1"),
        ({"max_pixels_tolerance": "2"}, "max_pixels_tolerance must be a finite number"),
        ({"use_thumbnail": 1}, "use_thumbnail must be true or false"),
    ],
    ids=["no-pad", "tiles", "tile-size", "tokens", "tolerance", "thumbnail"],
)
def test_refusals_name_the_argument(config, match):
    with pytest.raises(ValueError, match=match):
        FusedImageProcessor.from_preprocessor_config(Lfm2().to_dict() | config, device="cpu", reference="torchvision")


def test_a_thumbnail_over_the_budget_is_refused_and_the_adapter_hands_the_call_on(caplog):
    """min_image_tokens' ceil can give a thumbnail more patches than the budget, which transformers does not
    pad: refused by name, and the adapter's call goes to the generic path, equal to transformers."""
    config = {"min_image_tokens": 250, "max_image_tokens": 256, "do_image_splitting": False}
    strip = [as_input("torchvision", PHOTOS["strip"])]
    processor = FusedImageProcessor.from_preprocessor_config(
        Lfm2().to_dict() | config, device="cpu", reference="torchvision"
    )
    with pytest.raises(ValueError, match=r"images is 20x1800: resized to 64x4800 it has 1200 patches, over the budget"):
        processor(strip)
    expected = Lfm2(**config)(strip, return_tensors="pt")
    with caplog.at_level(logging.INFO):
        got = FusedHFImageProcessor(Lfm2(**config))(strip, return_tensors="pt")
    said = [r.getMessage() for r in caplog.records if "serves this call" in r.getMessage()]
    assert len(said) == 1 and "the generic path serves this call" in said[0] and "over the budget" in said[0], said
    assert set(got) == set(expected) and expected["pixel_values"].shape[1] == 1200  # transformers' unpadded rows
    for key in expected:
        assert torch.equal(got[key], expected[key]), key
