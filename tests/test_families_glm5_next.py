"""GLM-5 Next (Glm5NextImageProcessor, both backends) against transformers 5's own processor:
FusedHFImageProcessor(upstream) against upstream itself on real photos (a canvas the image fits unresized, one it
is scaled down onto, a tiny one scaled up to the token minimum, a 12 MP one cut to the budget by its binary search,
a thin strip) and a batch of them, float32 within 1e-6 and the resized bytes (rescale and normalize off) equal;
per-call token bounds, patch_expand_factor (which the Pil backend leaves out of its factor) and merge_size; do_resize off; FusedImageProcessor from the config as
the class saves it; the canvas rule against transformers' smart_resize and resize over thousands of shapes and
budgets. Strict: a call handed back fails (family_checks.forbid_upstream).

The EQUALITY lines printed (pytest -s) are the equality table: case, max abs diff."""

import math
import random

import numpy as np
import pytest
from family_checks import as_input, assert_same, forbid_upstream, photo

from fused_input_norm import FusedImageProcessor
from fused_input_norm import config as configs
from fused_input_norm.families import glm5_next
from fused_input_norm.hf_adapter import FusedHFImageProcessor

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
glm5_hf = pytest.importorskip("transformers.models.glm5_next.image_processing_glm5_next")


def shapes_photos() -> dict[str, np.ndarray]:
    rocket, coffee, chelsea, astronaut = (photo(n) for n in ("rocket", "coffee", "chelsea", "astronaut"))
    return {
        "fits": astronaut,  # 512x512: a 532x532 canvas it fits unresized
        "wide": rocket,  # 427x640
        "tiny": np.ascontiguousarray(chelsea[100:117, 200:229]),  # 17x29: scaled up to min_image_tokens
        "12mp": np.array(Image.fromarray(coffee).resize((4032, 3024))),  # cut to max_image_tokens
        "strip": np.ascontiguousarray(np.concatenate([coffee, coffee, coffee], axis=1)[:20]),  # 20x1800
    }


PHOTOS = shapes_photos()
CASES = [*PHOTOS, "batch"]
CALLS = {
    "defaults": {},
    "bounds": {"min_image_tokens": 64, "max_image_tokens": 300},
    "expand-merge": {"patch_expand_factor": 2, "merge_size": 1, "temporal_patch_size": 1},
}


def upstream(reference: str, **config):
    return (transformers.Glm5NextImageProcessorPil if reference == "pil" else transformers.Glm5NextImageProcessor)(
        **config
    )


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("reference", ["pil", "torchvision"])
def test_matches_transformers(monkeypatch, reference, call, dtype):
    kwargs = dict(CALLS[call])
    if dtype == "uint8":
        kwargs |= {"do_rescale": False, "do_normalize": False}
    for case in CASES:
        hwcs = [*PHOTOS.values()] if case == "batch" else [PHOTOS[case]]
        if case == "batch" and call == "defaults":
            hwcs = [h for h in hwcs if h.shape[0] < 3000]  # the 12 MP image alone is the budget's case
        images = [as_input(reference, hwc) for hwc in hwcs]
        expected = upstream(reference)(images, return_tensors="pt", **kwargs)
        ours = FusedHFImageProcessor(upstream(reference))
        forbid_upstream(monkeypatch, ours)
        assert_same(
            ours(images, return_tensors="pt", **kwargs), expected, f"glm5_next {reference} {case} {call} {dtype}"
        )
        monkeypatch.undo()


def test_unresized_multiples_of_the_factor_are_served(monkeypatch):
    hwc = np.ascontiguousarray(PHOTOS["wide"][:420, :588])  # multiples of 28
    for reference in ("pil", "torchvision"):
        image = as_input(reference, hwc)
        expected = upstream(reference)([image], return_tensors="pt", do_resize=False)
        ours = FusedHFImageProcessor(upstream(reference))
        forbid_upstream(monkeypatch, ours)
        assert_same(ours([image], return_tensors="pt", do_resize=False), expected, f"glm5_next {reference} unresized")
        monkeypatch.undo()


def test_processor_from_the_saved_config_matches_transformers():
    saved = upstream("torchvision").to_dict()  # as save_pretrained writes it (its null fields included)
    images = [as_input("torchvision", PHOTOS[name]) for name in ("fits", "wide", "tiny")]
    expected = upstream("torchvision")(images, return_tensors="pt")
    processor = FusedImageProcessor.from_preprocessor_config(saved, device="cpu", reference="torchvision")
    assert_same(processor(images), expected, "glm5_next FusedImageProcessor")


def transformers_canvas(height: int, width: int, t: int, factor: int, low: int, high: int):
    """transformers' own rule: its smart_resize, then the content size its resize computes (as written there)."""
    target_h, target_w = glm5_hf.smart_resize(
        num_frames=t, height=height, width=width, temporal_factor=t, factor=factor, min_pixels=low, max_pixels=high
    )
    scale = min(target_h / height, target_w / width)
    if t * height * width >= t * factor**2 * low:
        scale = min(1.0, scale)
    content = (max(1, min(target_h, math.floor(height * scale))), max(1, min(target_w, math.floor(width * scale))))
    return (target_h, target_w), content


def test_canvas_matches_transformers_rule():
    """The family's canvas and content sizes against transformers' smart_resize (and its resize's content rule)
    over thousands of shapes, budgets from a single token to the default, and errors raised alike."""
    rng = random.Random(45)
    for _ in range(3000):
        t, patch, merge, expand = rng.choice([1, 2]), rng.choice([14, 16]), rng.choice([1, 2]), rng.choice([1, 2])
        low = rng.choice([1, 4, 16, 200])
        high = max(low, rng.choice([1, 16, 300, 8000]))
        h, w = (rng.choice([rng.randint(1, 60), rng.randint(1, 5000)]) for _ in range(2))
        config = {
            "image_processor_type": "Glm5NextImageProcessor",
            "patch_size": patch,
            "merge_size": merge,
            "temporal_patch_size": t,
            "patch_expand_factor": expand,
            "min_image_tokens": low,
            "max_image_tokens": high,
        }
        s = configs.resolve(config, "test")
        # the torchvision backend's factor (patch * merge * expand), then the Pil backend's (no expand)
        for reference, factor in (("torchvision", patch * merge * expand), ("pil", patch * merge)):
            try:
                want = transformers_canvas(h, w, t, factor, low, high)
            except ValueError:
                with pytest.raises(ValueError, match="is too small"):
                    glm5_next.canvas(s, h, w, reference)
                continue
            assert glm5_next.canvas(s, h, w, reference) == want, (h, w, reference, config)
