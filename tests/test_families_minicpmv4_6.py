"""MiniCPM-V 4.6 (MiniCPMV4_6ImageProcessor, both backends; MiniCPM-V 4.7 holds it too) against transformers
5's own processors: FusedHFImageProcessor(upstream) against upstream itself on real photos of several sizes and
aspect ratios (a small one scaled up, one source view scaled down, 1080p and 12 MP-ish ones with slices, a tall
one, a thin strip) and a batch of them all, float32 within 1e-6 and the resized bytes (rescale and normalize
off) equal, every key with transformers' container types (return_tensors "pt" and unset); per-call slice
limits, resolution, patch size, downsample mode and slices off; gray and RGBA; FusedImageProcessor from the
config as the class saves it; the grid and size rules against the class's own methods over many shapes; what
it refuses, named. Strict: a call handed back fails (family_checks.forbid_upstream).

The EQUALITY lines printed (pytest -s) are the equality table: backend, case, max abs diff."""

import importlib.util

import numpy as np
import pytest
import torch
from conftest import requires_cuda
from family_checks import FP32_ATOL, as_input, assert_same, forbid_upstream, photo

from fused_input_norm import FusedImageProcessor
from fused_input_norm.families import minicpmv4_6
from fused_input_norm.hf_adapter import FusedHFImageProcessor

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
if not hasattr(transformers, "MiniCPMV4_6ImageProcessor"):
    pytest.skip("transformers has no MiniCPM-V 4.6 (added in 5.22)", allow_module_level=True)

# Without torchvision, transformers' MiniCPMV4_6ImageProcessor name is its Pil class: the torchvision one only
# where torchvision imports.
CLASSES = {"pil": (transformers.MiniCPMV4_6ImageProcessorPil, "pil")}
if importlib.util.find_spec("torchvision") is not None:
    CLASSES["torchvision"] = (transformers.MiniCPMV4_6ImageProcessor, "torchvision")


def shapes_photos() -> dict[str, np.ndarray]:
    rocket, coffee, chelsea, astronaut = (photo(n) for n in ("rocket", "coffee", "chelsea", "astronaut"))
    wide = np.concatenate([rocket[:400], coffee], axis=1)
    return {
        "small": np.ascontiguousarray(chelsea[100:300, 150:400]),  # 200x250: one view, scaled up
        "one-view": np.ascontiguousarray(coffee[:, :500]),  # 400x500: scaled down, no slices
        "1080p": np.array(Image.fromarray(wide).resize((1920, 1080))),
        "12mp": np.array(Image.fromarray(wide).resize((4032, 3024))),
        "tall": np.ascontiguousarray(np.concatenate([astronaut] * 4, axis=0)[:, 100:460]),  # 2048x360
        "strip": np.ascontiguousarray(np.concatenate([coffee, coffee, coffee], axis=1)[:20]),  # 20x1800
    }


PHOTOS = shapes_photos()
CASES = [*PHOTOS, "batch"]


def case_images(case: str, backend: str) -> list:
    photos = [PHOTOS[k] for k in PHOTOS if k != "12mp"] + [PHOTOS["small"]] if case == "batch" else [PHOTOS[case]]
    return [as_input(backend, hwc) for hwc in photos]


def check(monkeypatch, name: str, case: str, kwargs: dict, config: dict | None = None, label: str = ""):
    """The adapter over `name`'s class against the class itself, strict, return_tensors "pt"."""
    cls, backend = CLASSES[name]
    images = case_images(case, backend)
    expected = cls(**(config or {}))(images, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(cls(**(config or {})))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(images, return_tensors="pt", **kwargs), expected, f"minicpmv4_6 {name} {case} {label or kwargs}")
    return expected


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", CLASSES)
def test_adapter_matches_transformers(monkeypatch, name, case, dtype):
    kwargs = {"do_rescale": False, "do_normalize": False} if dtype == "uint8" else {}
    expected = check(monkeypatch, name, case, kwargs, label=dtype)
    if case == "1080p":  # the case is what it says: a source view and slices
        assert expected["grids"][0] != [0, 0] and expected["num_patches_per_image"][0] > 2, expected["grids"]
    if case == "small":
        assert expected["grids"] == [[0, 0]] and expected["num_patches_per_image"] == [1]


PER_CALL = {
    "slices-4": {"max_slice_nums": 4},
    "resolution-336": {"scale_resolution": 336},
    "patch-16": {"patch_size": 16},
    "4x": {"downsample_mode": "4x"},
    "no-slices": {"slice_mode": False},
    "bilinear": {"resample": 2},
}


@pytest.mark.parametrize("kwargs", PER_CALL)
@pytest.mark.parametrize("name", CLASSES)
def test_per_call_settings(monkeypatch, name, kwargs):
    check(monkeypatch, name, "batch", PER_CALL[kwargs], label=kwargs)


@pytest.mark.parametrize("name", CLASSES)
def test_settings_in_the_config(monkeypatch, name):
    config = {"max_slice_nums": 6, "scale_resolution": 392, "downsample_mode": "4x"}
    check(monkeypatch, name, "batch", {}, config, label="config")


@pytest.mark.parametrize("name", CLASSES)
def test_gray_and_rgba_are_converted_as_transformers_does(monkeypatch, name):
    cls, _ = CLASSES[name]
    rgb = PHOTOS["1080p"]
    alpha = np.linspace(0, 255, rgb.shape[1], dtype=np.uint8)[None, :].repeat(rgb.shape[0], 0)
    images = [Image.fromarray(rgb).convert("L"), Image.fromarray(np.dstack([rgb, alpha]))]
    expected = cls()(images, return_tensors="pt")
    ours = FusedHFImageProcessor(cls())
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(images, return_tensors="pt"), expected, f"minicpmv4_6 {name} gray-rgba")


@pytest.mark.parametrize("name", CLASSES)
def test_return_tensors_unset_gives_transformers_containers(monkeypatch, name):
    """Unset: pixel_values and target_sizes as tensors (NumPy arrays on the Pil backend), grids and
    num_patches_per_image as Python lists (as with "pt": transformers skips their conversion)."""
    cls, backend = CLASSES[name]
    images = case_images("batch", backend)
    expected, with_pt = cls()(images), cls()(images, return_tensors="pt")
    ours = FusedHFImageProcessor(cls())
    forbid_upstream(monkeypatch, ours)
    got = ours(images)
    assert set(got) == set(expected)
    for key, want in expected.items():
        assert type(got[key]) is type(want), (key, type(got[key]), type(want))
        if isinstance(want, list):
            assert got[key] == want == with_pt[key], key
            continue
        have, want = torch.as_tensor(got[key]), torch.as_tensor(want)
        assert have.dtype == want.dtype and have.shape == want.shape, key
        assert float((have.double() - want.double()).abs().max()) <= FP32_ATOL, key


@pytest.mark.parametrize("name", CLASSES)
def test_processor_from_the_saved_config(name):
    """FusedImageProcessor from the config as the class saves it (preprocessor_config.json)."""
    cls, backend = CLASSES[name]
    processor = FusedImageProcessor.from_preprocessor_config(cls().to_dict(), device="cpu", reference=backend)
    assert processor.settings.kind == "minicpmv4_6"
    photos = [PHOTOS["small"], PHOTOS["1080p"], PHOTOS["tall"]]
    expected = cls()([as_input(backend, p) for p in photos], return_tensors="pt")
    got = processor([Image.fromarray(p) for p in photos] if backend == "pil" else photos)
    assert_same(got, expected, f"minicpmv4_6 {name} from-config")


@requires_cuda
def test_cuda_calls_equal_the_same_calls_on_the_cpu():
    """device="cuda": the same outputs as on the CPU, bit for bit, the pixels left on the device, served."""
    ours = FusedHFImageProcessor(transformers.MiniCPMV4_6ImageProcessor())
    images = case_images("batch", "torchvision")
    on_cpu = ours(images, return_tensors="pt")
    on_gpu = ours(images, return_tensors="pt", device="cuda")
    assert not ours._logged, ours._logged
    assert on_gpu["pixel_values"].device.type == "cuda"
    assert set(on_gpu) == set(on_cpu)
    for key, value in on_cpu.items():
        assert torch.equal(on_gpu[key].cpu(), value) if isinstance(value, torch.Tensor) else on_gpu[key] == value


def test_grid_and_size_rules_are_transformers():
    """minicpmv4_6's sliced_grid, best_resize and refine_size against the class's own get_sliced_grid,
    find_best_resize and get_refine_size over thousands of shapes (extreme ratios included), for several
    settings."""
    upstream = transformers.MiniCPMV4_6ImageProcessor()
    rng = np.random.default_rng(0)
    shapes = [(int(h), int(w)) for h, w in rng.integers(1, 6000, size=(1500, 2))]
    shapes += [(1, 1), (1, 5000), (5000, 1), (448, 448), (1080, 1920), (1920, 1080), (3024, 4032), (449, 448)]
    grids = set()
    for slices, scale, patch, mode in [(9, 448, 14, "16x"), (4, 336, 16, "4x"), (12, 512, 14, "16x")]:
        block = patch * (2 if mode == "4x" else 4)
        for h, w in shapes:
            want = upstream.get_sliced_grid((h, w), slices, scale)
            grid = minicpmv4_6.sliced_grid(h, w, slices, scale)
            assert grid == (None if want is None else tuple(want)), (h, w, slices, scale)
            grids.add(grid)
            for upscale in (False, True):
                want = upstream.find_best_resize((h, w), scale, patch, mode, allow_upscale=upscale)
                assert minicpmv4_6.best_resize(h, w, scale, block, upscale) == tuple(want), (h, w, upscale)
            if grid is not None:
                want = upstream.get_refine_size((h, w), list(grid), scale, patch, mode, allow_upscale=True)
                assert minicpmv4_6.refine_size(h, w, grid, scale, block) == tuple(want), (h, w, grid)
    assert len(grids) > 15, grids


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"do_resize": False}, "do_resize off is not implemented"),
        ({"max_slice_nums": 0}, "max_slice_nums must be an int >= 1"),
        ({"slice_mode": "yes"}, "slice_mode must be true or false"),
        ({"downsample_mode": 4}, "downsample_mode must be a string"),
        ({"patch_size": 0}, "patch_size must be an int >= 1"),
    ],
    ids=["no-resize", "slices", "slice-mode", "mode", "patch"],
)
def test_refusals_name_the_argument(config, match):
    config = transformers.MiniCPMV4_6ImageProcessor().to_dict() | config
    with pytest.raises(ValueError, match=match):
        FusedImageProcessor.from_preprocessor_config(config, device="cpu", reference="torchvision")


def test_a_strips_plan_with_zero_slots_is_refused():
    """The core has no slot view of strips to zero (base.Plan): such a plan is refused when it is made, by name."""
    from fused_input_norm.families.base import Plan

    Plan(shape=(4, 3, 14, 14), jobs=[], strips=True)
    with pytest.raises(ValueError, match="NaViT strips has no zero slots"):
        Plan(shape=(4, 3, 14, 14), jobs=[], strips=True, zero=[(0, 1)])
