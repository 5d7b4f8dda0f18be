"""The classes served by the family they copy, against transformers itself, both backends: CohereCompass's
image processor (Qwen2-VL's code) and video processor (Qwen3-VL's), GLM-4.6V's / GLM-OCR's image processor
(GLM-4.1V's), ERNIE-4.5-VL's (the ernie4_5_vl family: Qwen2-VL's code, its own defaults), PaddleOCR-VL's (the
paddleocr_vl family: raster patches, its own smart_resize), Cosmos-3 Edge's (the cosmos3_edge family: Qwen2-VL's
plan with its own scale-up of small images, rows channel-last) and BLIP's (the blip family: SigLIP's steps, its own
defaults, an int size a square). FusedHFImageProcessor(upstream) against upstream on
real photos (wide, tall, thin, tiny, a batch), the class defaults, the checkpoints' configs and per-call kwargs,
float32 within 1e-6 and the resized bytes (do_rescale / do_normalize off) equal, strict: a call handed back to
transformers fails. FusedImageProcessor from each checkpoint's config, and PaddleOCR-VL's sizes against its
smart_resize over many shapes, Cosmos-3 Edge's likewise. The EQUALITY lines (pytest -s) are the equality table."""

import logging
import random

import numpy as np
import pytest
import torch
from family_checks import as_input, assert_same, forbid_upstream, photo
from test_families_glm_gemma import GLM_CHECKPOINT

from fused_input_norm import FusedImageProcessor
from fused_input_norm import config as configs
from fused_input_norm.families import cosmos3_edge, paddleocr_vl
from fused_input_norm.hf_adapter import FusedHFImageProcessor, FusedHFVideoProcessor

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
paddle_hf = pytest.importorskip("transformers.models.paddleocr_vl.image_processing_paddleocr_vl")
cosmos_hf = pytest.importorskip("transformers.models.cosmos3_edge.image_processing_cosmos3_edge")

CLIP = {"image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}
# The configs as the checkpoints ship them (preprocessor_config.json), less the type keys.
GLM_OCR = GLM_CHECKPOINT  # zai-org/GLM-OCR ships GLM-4.1V's values
PADDLE = {  # PaddlePaddle/PaddleOCR-VL
    "resample": 3,
    "rescale_factor": 0.00392156862745098,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "min_pixels": 147384,
    "max_pixels": 2822400,
    "patch_size": 14,
    "temporal_patch_size": 1,
    "merge_size": 2,
}
ERNIE = {"size": {"shortest_edge": 3136, "longest_edge": 4816894}, "patch_size": 14, "merge_size": 2, **CLIP}
# Salesforce/blip2-opt-2.7b
BLIP2 = {"do_convert_rgb": True, "resample": 3, "rescale_factor": 0.00392156862745098, **CLIP}
BLIP2 |= {"size": {"height": 224, "width": 224}, "do_normalize": True, "do_rescale": True, "do_resize": True}
# name -> (transformers' class name, its family's kind, the upstream's config, a call's kwargs)
COPIES = {
    "cohere_compass": ("CohereCompassImageProcessor", "qwen2_vl", {}, {}),
    "cohere_compass-call": (
        "CohereCompassImageProcessor",
        "qwen2_vl",
        {},
        {"size": {"shortest_edge": 3136, "longest_edge": 200704}, "patch_size": 16},
    ),
    "glm_ocr": ("Glm46VImageProcessor", "glm4v", GLM_OCR, {}),
    "glm46v-call": ("Glm46VImageProcessor", "glm4v", {}, {"size": {"shortest_edge": 3136, "longest_edge": 200704}}),
    "ernie": ("Ernie4_5_VLMoeImageProcessor", "ernie4_5_vl", {}, {}),
    "ernie-checkpoint": ("Ernie4_5_VLMoeImageProcessor", "ernie4_5_vl", ERNIE, {"temporal_patch_size": 2}),
    "paddleocr_vl": ("PaddleOCRVLImageProcessor", "paddleocr_vl", PADDLE, {}),
    "paddleocr_vl-call": (
        "PaddleOCRVLImageProcessor",
        "paddleocr_vl",
        {},
        {"size": {"shortest_edge": 3136, "longest_edge": 250000}, "merge_size": 1, "temporal_patch_size": 2},
    ),
    "cosmos3_edge": ("Cosmos3EdgeImageProcessor", "cosmos3_edge", {}, {}),
    "blip": ("BlipImageProcessor", "blip", {}, {}),
    "blip2-checkpoint": ("BlipImageProcessor", "blip", BLIP2, {}),
    "blip-call": ("BlipImageProcessor", "blip", {}, {"size": 200, "resample": 2}),
    "cosmos3_edge-call": (
        "Cosmos3EdgeImageProcessor",
        "cosmos3_edge",
        {},
        {"size": {"shortest_edge": 3136, "longest_edge": 150000}, "patch_size": 14, "merge_size": 1},
    ),
}
# The families with their own branch for a side under the factor (the others' rounding makes none of it).
THIN = ("paddleocr_vl", "cosmos3_edge")


def photos() -> dict[str, np.ndarray]:
    rocket, coffee, chelsea = (photo(n) for n in ("rocket", "coffee", "chelsea"))
    return {
        "wide": rocket,  # 427x640
        "tall": np.ascontiguousarray(chelsea.transpose(1, 0, 2)),  # 451x300
        "thin": np.ascontiguousarray(coffee[:, 100:120]),  # 400x20: PaddleOCR-VL stretches it to 28 wide first
        "tiny": np.ascontiguousarray(chelsea[100:117, 200:229]),  # 17x29
    }


PHOTOS = photos()


def upstream(name: str, reference: str, config: dict):
    return getattr(transformers, name + ("Pil" if reference == "pil" else ""))(**config)


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("reference", ["pil", "torchvision"])
@pytest.mark.parametrize("copy", COPIES)
def test_copies_match_transformers(monkeypatch, copy, reference, dtype):
    name, kind, config, kwargs = COPIES[copy]
    assert configs.kind_of({"image_processor_type": name + ("Pil" if reference == "pil" else "")}) == kind
    if dtype == "uint8":
        kwargs = {**kwargs, "do_rescale": False, "do_normalize": False}
    images = [as_input(reference, hwc) for hwc in [*PHOTOS.values(), PHOTOS["wide"]]]
    for case, batch in [*((c, [im]) for c, im in zip(PHOTOS, images, strict=False)), ("batch", images)]:
        if case in ("thin",) and kind not in THIN:
            continue  # ratio 20: in every family's bounds, but Qwen2-VL's rounding makes no new branch of it
        expected = upstream(name, reference, config)(batch, return_tensors="pt", **kwargs)
        ours = FusedHFImageProcessor(upstream(name, reference, config))
        forbid_upstream(monkeypatch, ours)
        assert_same(ours(batch, return_tensors="pt", **kwargs), expected, f"{copy} {reference} {case} {dtype}")
        monkeypatch.undo()


@pytest.mark.parametrize("copy", ["glm_ocr", "paddleocr_vl", "ernie-checkpoint", "cohere_compass", "blip2-checkpoint"])
def test_processor_from_the_checkpoint_config_matches_transformers(copy):
    name, _, config, _ = COPIES[copy]
    images = [as_input("torchvision", hwc) for hwc in PHOTOS.values()]
    expected = upstream(name, "torchvision", config)(images, return_tensors="pt")
    processor = FusedImageProcessor.from_preprocessor_config(
        {**config, "image_processor_type": name}, device="cpu", reference="torchvision"
    )
    got = processor(images)
    assert_same(got, expected, f"{copy} FusedImageProcessor")


def test_without_resize_paddle_needs_multiples_of_the_patch_alone(monkeypatch):
    """Raster patches: 14 divides 420x294 (28 does not divide 294), which PaddleOCR-VL takes unresized, served."""
    hwc = np.ascontiguousarray(PHOTOS["wide"][:420, :294])
    for reference in ("pil", "torchvision"):
        image = as_input(reference, hwc)
        expected = upstream("PaddleOCRVLImageProcessor", reference, {})([image], return_tensors="pt", do_resize=False)
        ours = FusedHFImageProcessor(upstream("PaddleOCRVLImageProcessor", reference, {}))
        forbid_upstream(monkeypatch, ours)
        assert_same(
            ours([image], return_tensors="pt", do_resize=False), expected, f"paddleocr_vl {reference} unresized"
        )
        monkeypatch.undo()


def test_paddle_sizes_match_its_smart_resize():
    """The family's sizes against transformers' PaddleOCR-VL smart_resize over thousands of shapes, thin ones
    (the stretch to the factor) and budgets at both ends included; refusals refused alike."""
    rng = random.Random(43)
    s = configs.resolve({"image_processor_type": "PaddleOCRVLImageProcessor"}, "test")
    for _ in range(4000):
        h, w = (
            rng.choice([rng.randint(1, 40), rng.randint(1, 3000)]),
            rng.choice([rng.randint(1, 40), rng.randint(1, 3000)]),
        )
        try:
            want = paddle_hf.smart_resize(h, w, 28, s.size["shortest_edge"], s.size["longest_edge"])
        except ValueError:
            with pytest.raises(ValueError, match="aspect ratio"):
                paddleocr_vl.smart_size(s, "image", h, w, "test")
            continue
        assert paddleocr_vl.smart_size(s, "image", h, w, "test") == want, (h, w)


def test_cosmos3_edge_sizes_match_its_smart_resize():
    """The family's sizes against transformers' Cosmos-3 Edge resize rule (its smart_resize after the scale-up of
    a side under the factor) over thousands of shapes, thin and tiny ones and both ends of a budget included."""
    rng = random.Random(44)
    s = configs.resolve({"image_processor_type": "Cosmos3EdgeImageProcessor", "patch_size": 14}, "test")
    low, high = s.size["shortest_edge"], s.size["longest_edge"]
    for _ in range(4000):
        h, w = (
            rng.choice([rng.randint(1, 40), rng.randint(1, 3000)]),
            rng.choice([rng.randint(1, 40), rng.randint(1, 3000)]),
        )
        try:
            want = cosmos_hf.smart_resize(1, h, w, 1, 28, low, high)
        except ValueError:
            with pytest.raises(ValueError, match="aspect ratio"):
                cosmos3_edge.smart_size(s, "image", h, w, "test")
            continue
        assert cosmos3_edge.smart_size(s, "image", h, w, "test") == want, (h, w)


def test_cosmos3_edge_with_temporal_patches_is_the_generic_paths(caplog):
    """temporal_patch_size 2 (each row value repeated twice in a row): no family move, so the generic path serves
    it (transformers' own code with the package's resize), says so, and equals transformers."""
    image = as_input("torchvision", PHOTOS["wide"])
    expected = transformers.Cosmos3EdgeImageProcessor(temporal_patch_size=2)([image], return_tensors="pt")
    with caplog.at_level(logging.INFO):
        ours = FusedHFImageProcessor(transformers.Cosmos3EdgeImageProcessor(temporal_patch_size=2))
        got = ours([image], return_tensors="pt")
    said = [r.getMessage() for r in caplog.records if "serves this call" in r.getMessage()]
    assert len(said) == 1 and "the generic path serves this call" in said[0], said
    assert "temporal_patch_size 2 is not implemented" in said[0], said
    assert isinstance(ours, transformers.Cosmos3EdgeImageProcessor)
    assert_same(got, expected, "cosmos3_edge temporal_patch_size 2")


def test_cohere_compass_video_matches_transformers(monkeypatch):
    """CohereCompassVideoProcessor is Qwen3-VL's, defaults included: served as qwen3_vl, frames already sampled."""
    assert configs.video_kind_of({"video_processor_type": "CohereCompassVideoProcessor"}) == "qwen3_vl"
    assert configs.video_kind_of({"image_processor_type": "CohereCompassImageProcessor"}) == "qwen3_vl"
    frames = np.stack([np.roll(PHOTOS["wide"], 9 * i, axis=1) for i in range(4)])
    video = torch.from_numpy(frames).permute(0, 3, 1, 2).contiguous()
    kwargs = {"do_sample_frames": False}
    theirs = transformers.CohereCompassVideoProcessor()
    expected = theirs([video], return_tensors="pt", **kwargs)
    ours = FusedHFVideoProcessor(transformers.CohereCompassVideoProcessor())
    forbid_upstream(monkeypatch, ours)
    assert_same(ours([video], return_tensors="pt", **kwargs), expected, "cohere_compass video")
