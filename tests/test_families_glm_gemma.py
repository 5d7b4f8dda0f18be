"""GLM-4.1V / GLM-4.5V (Glm4vImageProcessor) and Gemma 3 (Gemma3ImageProcessor, with and without pan and scan)
against transformers 5's own processors, both backends: FusedHFImageProcessor(upstream) against upstream
itself on real photos of several sizes and aspect ratios (tall, wide, tiny, exactly a multiple) and on a batch
of them all, float32 within 1e-6 and the resized bytes (do_rescale and do_normalize off) equal, every key
transformers returns equal in name, shape and dtype; FusedImageProcessor from the configs as the checkpoints
ship them, in every spelling; the families' sizes (GLM's smart_resize, Gemma 3's pan-and-scan crops) against
transformers' own functions over many shapes; and what either refuses, named before any kernel runs. Then
GLM-4V's video processor (Glm4vVideoProcessor) through FusedVideoProcessor and FusedHFVideoProcessor: clips,
its fps-only frame sampling (against its sample_frames over thousands of cases), an MP4, its refusals.

The EQUALITY lines printed (pytest -s) are the equality table: family, backend, case, max abs diff."""

import logging
import random

import numpy as np
import pytest
import torch
from conftest import RecordOps, requires_cuda
from family_checks import FP32_ATOL, as_input, assert_same, forbid_upstream, photo

from fused_input_norm import FusedImageProcessor
from fused_input_norm import config as configs
from fused_input_norm.families import gemma3, glm4v
from fused_input_norm.hf_adapter import FusedHFImageProcessor

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
glm_hf = pytest.importorskip("transformers.models.glm4v.image_processing_glm4v")

GLM = (transformers.Glm4vImageProcessorPil, transformers.Glm4vImageProcessor)
GEMMA3 = (transformers.Gemma3ImageProcessorPil, transformers.Gemma3ImageProcessor)
REFERENCES = ["pil", "torchvision"]
# The configs as the checkpoints ship them (preprocessor_config.json), less the type keys each test names.
GLM_CHECKPOINT = {  # zai-org/GLM-4.1V-9B-Thinking, GLM-4.5V
    "size": {"shortest_edge": 12544, "longest_edge": 9633792},
    "do_rescale": True,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
}
GEMMA3_CHECKPOINT = {  # google/gemma-3-4b-it and its siblings
    "do_convert_rgb": None,
    "do_normalize": True,
    "do_pan_and_scan": None,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "pan_and_scan_max_num_crops": None,
    "pan_and_scan_min_crop_size": None,
    "pan_and_scan_min_ratio_to_activate": None,
    "resample": 2,
    "rescale_factor": 0.00392156862745098,
    "size": {"height": 896, "width": 896},
}
# What Gemma3Processor passes its image processor on every call (its images_kwargs defaults), pan and scan on.
PAN_AND_SCAN = {
    "do_pan_and_scan": True,
    "pan_and_scan_min_crop_size": 256,
    "pan_and_scan_max_num_crops": 4,
    "pan_and_scan_min_ratio_to_activate": 1.2,
}


def shapes_photos() -> dict[str, np.ndarray]:
    """Real photos (and photos cut or joined) in the shapes that take each family's every branch."""
    rocket, coffee, chelsea, astronaut = (photo(n) for n in ("rocket", "coffee", "chelsea", "astronaut"))
    return {
        "wide": rocket,  # 427x640: ratio 1.5, two crops for pan and scan
        "tall": np.ascontiguousarray(rocket.transpose(1, 0, 2)),  # 640x427: crops stacked vertically
        "panorama": np.concatenate([chelsea, coffee[:300]], axis=1),  # 300x1051: four crops, the last shorter
        "column": np.ascontiguousarray(coffee[:, 100:140]),  # 400x40: ratio 10, too thin to crop
        "tiny": np.ascontiguousarray(chelsea[100:117, 200:229]),  # 17x29: GLM scales it up to 28 first
        "square": astronaut,  # 512x512: not elongated; GLM's exact multiples are not this
        "glm-multiple": np.ascontiguousarray(astronaut[:448, :504]),  # multiples of 28: GLM keeps the size
        "gemma-multiple": np.pad(astronaut, ((192, 192), (192, 1088), (0, 0)), mode="reflect"),  # 896x1792
    }


PHOTOS = shapes_photos()
CASES = [*PHOTOS, "batch"]
# family -> (the classes, the upstream's config, the call's kwargs)
FAMILIES = {
    "glm4v": (GLM, GLM_CHECKPOINT, {}),
    "glm4v-budget": (GLM, GLM_CHECKPOINT, {"size": {"shortest_edge": 3136, "longest_edge": 200704}}),
    "glm4v-patch16": (GLM, {}, {"patch_size": 16, "merge_size": 2}),
    "gemma3": (GEMMA3, GEMMA3_CHECKPOINT, {}),
    "gemma3-pas": (GEMMA3, GEMMA3_CHECKPOINT, PAN_AND_SCAN),
    # Pan and scan set in the config (other values), and a call that overrides one of them.
    "gemma3-pas-config": (
        GEMMA3,
        {**GEMMA3_CHECKPOINT, **PAN_AND_SCAN, "pan_and_scan_min_crop_size": 128, "pan_and_scan_max_num_crops": 3},
        {"pan_and_scan_min_ratio_to_activate": 1.05},
    ),
}


def case_images(case: str) -> list[np.ndarray]:
    if case == "batch":  # every shape, and one twice (transformers' torchvision backend groups equal shapes)
        return [*PHOTOS.values(), PHOTOS["wide"]]
    return [PHOTOS[case]]


def upstream(classes: tuple, reference: str, config: dict):
    pil_class, tv_class = classes
    return (pil_class if reference == "pil" else tv_class)(**config)


# ----- the adapter over transformers' processor, both backends -----


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize(
    ("family", "case"),
    # Each family on every shape but the other family's exact multiple (the batch holds that one too).
    [
        (family, case)
        for family in ("glm4v", "gemma3", "gemma3-pas")
        for case in CASES
        if case != ("gemma-multiple" if family == "glm4v" else "glm-multiple")
    ],
)
def test_adapter_matches_transformers(monkeypatch, family, case, reference, dtype):
    classes, config, kwargs = FAMILIES[family]
    _check_adapter(monkeypatch, family, classes, config, kwargs, case, reference, dtype)


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("family", ["glm4v-budget", "glm4v-patch16", "gemma3-pas-config"])
def test_adapter_matches_transformers_with_other_settings(monkeypatch, family, reference, dtype):
    """Per-call sizes and patch sizes (GLM), pan and scan from the config with a call's override (Gemma 3)."""
    classes, config, kwargs = FAMILIES[family]
    _check_adapter(monkeypatch, family, classes, config, kwargs, "batch", reference, dtype)


def _check_adapter(monkeypatch, family, classes, config, kwargs, case, reference, dtype):
    if dtype == "uint8":
        kwargs = {**kwargs, "do_rescale": False, "do_normalize": False}
    theirs = upstream(classes, reference, config)
    ours = FusedHFImageProcessor(upstream(classes, reference, config))
    images = [as_input(reference, hwc) for hwc in case_images(case)]
    expected = theirs(images, return_tensors="pt", **kwargs)
    forbid_upstream(monkeypatch, ours)
    got = ours(images, return_tensors="pt", **kwargs)
    if family.startswith("gemma3-pas") and case in ("wide", "tall", "panorama", "gemma-multiple", "batch"):
        assert expected["num_crops"].sum() > 0  # pan and scan did cut these
    if dtype == "uint8" and reference == "pil" and family.startswith("glm4v"):
        assert expected["pixel_values"].dtype == torch.float32  # its Pil backend's bytes as float32 values
    assert_same(got, expected, f"{family} {reference} {case} {dtype}")


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("family", ["glm4v", "gemma3-pas"])
def test_gray_palette_and_rgba_images_are_converted_as_transformers_does(monkeypatch, family, reference):
    """do_convert_rgb: gray repeated, a palette image expanded, RGBA composited on white, as each backend does.
    (Set here: Gemma 3's checkpoints ship "do_convert_rgb": null, which transformers 5.25 keeps as None, off.)"""
    classes, config, kwargs = FAMILIES[family]
    config = {**config, "do_convert_rgb": True}
    rgb = PHOTOS["panorama"]
    alpha = np.linspace(0, 255, rgb.shape[1], dtype=np.uint8)[None, :].repeat(rgb.shape[0], 0)
    images = [
        Image.fromarray(rgb).convert("L"),
        Image.fromarray(rgb).convert("P"),
        Image.fromarray(np.dstack([rgb, alpha])),
    ]
    expected = upstream(classes, reference, config)(images, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(upstream(classes, reference, config))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(images, return_tensors="pt", **kwargs), expected, f"{family} {reference} gray-palette-rgba")


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("classes", [GLM, GEMMA3], ids=["glm4v", "gemma3"])
def test_without_resize_matches_transformers(monkeypatch, classes, reference, dtype):
    """do_resize off: GLM-4V's rows of an image already a multiple of 28, Gemma 3's images of one size as
    they are (two of the same photo)."""
    kwargs = {"do_resize": False} | ({"do_rescale": False, "do_normalize": False} if dtype == "uint8" else {})
    images = [as_input(reference, PHOTOS["glm-multiple"])] * 2
    expected = upstream(classes, reference, {})(images, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(upstream(classes, reference, {}))
    forbid_upstream(monkeypatch, ours)
    got = ours(images, return_tensors="pt", **kwargs)
    assert_same(got, expected, f"{'glm4v' if classes is GLM else 'gemma3'} {reference} unresized {dtype}")


@requires_cuda
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("family", ["glm4v", "gemma3-pas"])
def test_cuda_calls_equal_the_same_calls_on_the_cpu(family, dtype):
    """device="cuda" (vLLM's --mm-processor-device): the same outputs as on the CPU, bit for bit, the pixels
    left on the device, served; pan and scan's crops are boxes of the image on the device."""
    classes, config, kwargs = FAMILIES[family]
    if dtype == "uint8":
        kwargs = {**kwargs, "do_rescale": False, "do_normalize": False}
    ours = FusedHFImageProcessor(upstream(classes, "torchvision", config))
    images = [as_input("torchvision", hwc) for hwc in case_images("batch")]
    on_cpu = ours(images, return_tensors="pt", **kwargs)
    on_gpu = ours(images, return_tensors="pt", device="cuda", **kwargs)
    assert not ours._logged, ours._logged
    assert on_gpu["pixel_values"].device.type == "cuda"
    assert set(on_gpu) == set(on_cpu)
    for key in on_cpu:
        assert torch.equal(on_gpu[key].cpu(), on_cpu[key]), key


def test_pil_backend_without_return_tensors_gives_transformers_lists_of_arrays(monkeypatch):
    """Without return_tensors transformers' Pil backend returns a list of NumPy arrays (one per image and crop)
    and num_crops as a list of ints: the adapter over it returns the same containers and values."""
    theirs = upstream(GEMMA3, "pil", GEMMA3_CHECKPOINT)
    ours = FusedHFImageProcessor(upstream(GEMMA3, "pil", GEMMA3_CHECKPOINT))
    images = [Image.fromarray(PHOTOS["wide"])]
    expected = theirs(images, **PAN_AND_SCAN)
    forbid_upstream(monkeypatch, ours)
    got = ours(images, **PAN_AND_SCAN)
    assert type(got["pixel_values"]) is type(expected["pixel_values"]) is list
    assert all(type(a) is np.ndarray for a in got["pixel_values"])
    assert got["num_crops"] == expected["num_crops"] == [2]
    assert len(got["pixel_values"]) == len(expected["pixel_values"]) == 3
    diff = max(float(np.abs(g - e).max()) for g, e in zip(got["pixel_values"], expected["pixel_values"], strict=True))
    assert diff <= FP32_ATOL


# ----- FusedImageProcessor from a config, every spelling -----


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize(
    ("classes", "config"),
    [
        (GLM, {**GLM_CHECKPOINT, "image_processor_type": "Glm4vImageProcessor", "processor_class": "Glm4vProcessor"}),
        (GLM, {**GLM_CHECKPOINT, "image_processor_type": "Glm4vImageProcessorFast"}),
        (GLM, {"image_processor_type": "Glm4vImageProcessorPil"}),
        (GLM, {**GLM_CHECKPOINT, "processor_class": "Glm4vProcessor"}),
        (GEMMA3, {**GEMMA3_CHECKPOINT, "image_processor_type": "Gemma3ImageProcessor"}),
        (GEMMA3, {**GEMMA3_CHECKPOINT, **PAN_AND_SCAN, "image_processor_type": "Gemma3ImageProcessorFast"}),
        (GEMMA3, {"image_processor_type": "Gemma3ImageProcessorPil", "size": 448}),
        (GEMMA3, {**GEMMA3_CHECKPOINT, **PAN_AND_SCAN, "processor_class": "Gemma3Processor"}),
    ],
    ids=["glm", "glm-fast", "glm-pil-defaults", "glm-class", "gemma3", "gemma3-fast-pas", "gemma3-pil", "gemma3-class"],
)
def test_processor_from_config_matches_transformers(classes, config, reference):
    processor = FusedImageProcessor.from_preprocessor_config(config, device="cpu", reference=reference)
    assert processor.settings.kind == ("glm4v" if classes is GLM else "gemma3")
    keys = {k: v for k, v in config.items() if k not in ("image_processor_type", "processor_class")}
    photos = case_images("batch")
    expected = upstream(classes, reference, keys)([as_input(reference, p) for p in photos], return_tensors="pt")
    got = processor([Image.fromarray(p) for p in photos] if reference == "pil" else photos)
    assert_same(
        got, expected, f"{processor.settings.kind} {reference} from-config {config.get('image_processor_type')}"
    )


@pytest.mark.parametrize(
    ("classes", "config"),
    [
        (GLM, GLM_CHECKPOINT),
        (GLM, {}),
        (GLM, {"size": {"shortest_edge": 100, "longest_edge": 5000}, "resample": 2, "do_normalize": False}),
        (GEMMA3, GEMMA3_CHECKPOINT),
        (GEMMA3, {**GEMMA3_CHECKPOINT, **PAN_AND_SCAN}),
        (GEMMA3, {"size": [300, 200], "do_rescale": False}),
        (GEMMA3, {}),
    ],
    ids=["glm", "glm-defaults", "glm-other", "gemma3", "gemma3-pas", "gemma3-pair", "gemma3-defaults"],
)
def test_resolved_config_is_what_transformers_resolves(classes, config):
    """Every setting the processor acts on, as both transformers classes resolve the same config."""
    kind = "glm4v" if classes is GLM else "gemma3"
    s = configs.resolve({**config, "image_processor_type": classes[1].__name__}, "test")
    for hf in (upstream(classes, reference, config) for reference in REFERENCES):
        assert s.do_resize == hf.do_resize and s.resample == {2: "bilinear", 3: "bicubic"}[int(hf.resample)]
        assert s.size == {k: v for k, v in dict(hf.size).items() if v is not None}
        # A config's explicit null do_convert_rgb (Gemma 3's checkpoints ship one) is read here as the class
        # default (on), as every family's null; transformers 5.25 keeps None (off). RGB images are the same
        # either way; a gray or RGBA one is converted here where transformers fails on it.
        assert s.do_convert_rgb == (hf.do_convert_rgb if hf.do_convert_rgb is not None else True)
        n = s.normalization
        assert n.rescale_factor == (hf.rescale_factor if hf.do_rescale else 1.0)
        if hf.do_normalize:
            assert (list(n.image_mean), list(n.image_std)) == (list(hf.image_mean), list(hf.image_std))
        if kind == "glm4v":
            assert (s.patch_size, s.temporal_patch_size, s.merge_size) == (
                hf.patch_size,
                hf.temporal_patch_size,
                hf.merge_size,
            )
        else:
            keys = gemma3.PAN_AND_SCAN_KEYS
            want = tuple(getattr(hf, k) for k in keys) if hf.do_pan_and_scan else None
            assert s.options["pan_and_scan"] == want


# ----- sizes: the families' pure functions against transformers' own -----


def _random_sides(rng: random.Random, count: int) -> list[tuple[int, int]]:
    """Sides log-uniform over 1..20000 (tiny, thin, huge), and every pair of small ones."""
    sides = [(round(2 ** rng.uniform(0, 14.3)), round(2 ** rng.uniform(0, 14.3))) for _ in range(count)]
    return sides + [(h, w) for h in range(1, 40) for w in range(1, 40)]


@pytest.mark.parametrize(
    "config",
    [
        {},
        GLM_CHECKPOINT,
        {"size": {"shortest_edge": 3136, "longest_edge": 200704}},
        {"patch_size": 16, "merge_size": 1, "temporal_patch_size": 3},
        {"size": {"shortest_edge": 1_000_000, "longest_edge": 2_000_000}},
    ],
    ids=["defaults", "checkpoint", "budget", "patch16-t3", "large-min"],
)
def test_glm_smart_resize_is_transformers(config):
    settings = configs.resolve({**config, "image_processor_type": "Glm4vImageProcessor"}, "test")
    t, factor = settings.temporal_patch_size, settings.patch_size * settings.merge_size
    low, high = settings.size["shortest_edge"], settings.size["longest_edge"]
    refused = 0
    for height, width in _random_sides(random.Random(35), 3000):
        try:
            want = glm_hf.smart_resize(t, height, width, t, factor, low, high)
        except ValueError:
            with pytest.raises(ValueError, match=rf"images\[0\] of size {height}x{width}: absolute aspect ratio"):
                glm4v.smart_size(settings, "images[0]", height, width, "test")
            refused += 1
            continue
        assert glm4v.smart_size(settings, "images[0]", height, width, "test") == want, (height, width)
    assert refused > 0  # the aspect-ratio refusals were reached


def _crop_boxes_by_transformers(height: int, width: int, settings: tuple) -> tuple[list, list]:
    """transformers' crops (both backends') as (top, left, height, width), "empty" for an empty one, read off
    index views: a crop of a view whose pixels are their own row (column) numbers starts at its first pixel."""
    keys = dict(zip(gemma3.PAN_AND_SCAN_KEYS, settings, strict=True))
    rows = torch.arange(height)[None, :, None].expand(1, height, width)  # stride-0 views: no memory
    cols = torch.arange(width)[None, None, :].expand(1, height, width)
    boxes = []
    for crop in (
        lambda image: GEMMA3[0].pan_and_scan(None, image.numpy(), **keys),
        lambda image: [c.numpy() for c in GEMMA3[1].pan_and_scan_batched(None, image, **keys)],
    ):
        boxes.append(
            [
                (int(r[0, 0, 0]), int(c[0, 0, 0]), *r.shape[-2:]) if r.size else "empty"
                for r, c in zip(crop(rows), crop(cols), strict=True)
            ]
        )
    return boxes[0], boxes[1]


@pytest.mark.parametrize(
    "settings",
    [(256, 4, 1.2), (1, 10, 1.0), (64, 2, 1.5), (100, 7, 0.5), (30, 3, 2.0)],
    ids=["gemma3-processor", "tiny-crops", "two", "always", "ratio-2"],
)
def test_gemma3_pan_and_scan_crops_are_transformers(settings):
    rng = random.Random(3)
    shapes = _random_sides(rng, 1500)
    for height, width in shapes:
        pil_boxes, tv_boxes = _crop_boxes_by_transformers(height, width, settings)
        assert pil_boxes == tv_boxes
        ours = gemma3.pan_and_scan_boxes(height, width, *settings)
        # a crop that starts past the edge is empty in transformers (and refused by the plan here)
        assert [box if min(box[2:]) > 0 else "empty" for box in ours] == pil_boxes, (height, width)


# ----- refusals: named, before any kernel -----


def test_an_image_glm_refuses_is_named_before_any_kernel():
    thin = photo("coffee")[:10, :]  # 10x600 scaled up to 28x1680: ratio 60, served
    too_thin = np.ascontiguousarray(np.tile(photo("coffee")[:10, :], (1, 5, 1)))  # 10x3000 -> ratio 300
    processor = FusedImageProcessor.from_preprocessor_config(
        {"image_processor_type": "Glm4vImageProcessor"}, device="cpu"
    )
    assert (
        processor([thin])["image_grid_thw"].tolist()
        == upstream(GLM, "pil", {})(Image.fromarray(thin))["image_grid_thw"].tolist()
    )
    with pytest.raises(ValueError, match="absolute aspect ratio"):
        upstream(GLM, "torchvision", {})([as_input("torchvision", too_thin)])
    with RecordOps() as recorded, pytest.raises(ValueError) as raised:
        processor([thin, too_thin])
    assert "FusedImageProcessor: images[1] of size 10x3000: absolute aspect ratio" in str(raised.value)
    assert not any("fused_input_norm" in str(op) for op in recorded.ops())


@pytest.mark.parametrize(
    ("config", "images", "message"),
    [
        (
            {"image_processor_type": "Glm4vImageProcessor", "do_resize": False},
            [np.zeros((56, 56, 3), np.uint8), np.zeros((56, 60, 3), np.uint8)],
            "images[1] is 56x60; without do_resize, H and W must be multiples of patch_size * merge_size = 28",
        ),
        (
            {"image_processor_type": "Gemma3ImageProcessor", "do_resize": False},
            [np.zeros((56, 56, 3), np.uint8), np.zeros((56, 60, 3), np.uint8)],
            "without do_resize the images must all be one size",
        ),
        (
            {"image_processor_type": "Gemma3ImageProcessor", **PAN_AND_SCAN, "pan_and_scan_min_crop_size": 1},
            [np.zeros((56, 56, 3), np.uint8), Image.fromarray(np.zeros((1, 5, 3), np.uint8))],
            "images[1] is 1x5: pan and scan (pan_and_scan_min_crop_size 1) would cut empty crops",
        ),
    ],
    ids=["glm-unresized", "gemma3-unresized", "gemma3-empty-crop"],
)
def test_images_refused_are_named_before_any_kernel(config, images, message):
    processor = FusedImageProcessor.from_preprocessor_config(config, device="cpu")
    with RecordOps() as recorded, pytest.raises(ValueError) as raised:
        processor(images)
    assert message in str(raised.value), str(raised.value)
    assert not any("fused_input_norm" in str(op) for op in recorded.ops())


def test_transformers_refuses_the_empty_crop_too():
    """The 1x5 image with crops of 1: the torchvision backend fails on the empty fifth crop."""
    image = torch.zeros(3, 1, 5, dtype=torch.uint8)
    with pytest.raises(RuntimeError):
        upstream(GEMMA3, "torchvision", {"size": 32})([image], **{**PAN_AND_SCAN, "pan_and_scan_min_crop_size": 1})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"image_processor_type": "Glm4vImageProcessor", "size": {"shortest_edge": 100}}, "needs shortest_edge and"),
        ({"image_processor_type": "Glm4vImageProcessor", "size": {"shortest_edge": 0, "longest_edge": 9}}, ">= 1"),
        ({"image_processor_type": "Glm4vImageProcessor", "patch_size": 0}, "patch_size must be an int >= 1"),
        ({"image_processor_type": "Glm4vImageProcessor", "resample": 5}, "resample 5 (hamming) is not implemented"),
        (
            {"image_processor_type": "Glm4vImageProcessor", "size": {"shortest_edge": 1000, "longest_edge": 999}},
            "min_pixels (1000) > max_pixels (999)",
        ),
        ({"image_processor_type": "Gemma3ImageProcessor", "size": {"shortest_edge": 896}}, "size must be an int or"),
        ({"image_processor_type": "Gemma3ImageProcessor", "size": {"height": 0, "width": 9}}, "size['height']"),
        (
            {"image_processor_type": "Gemma3ImageProcessor", "do_pan_and_scan": True},
            "pan_and_scan_min_crop_size (do_pan_and_scan needs it) must be an int >= 1, got None",
        ),
        (
            {"image_processor_type": "Gemma3ImageProcessor", **PAN_AND_SCAN, "pan_and_scan_max_num_crops": 0},
            "pan_and_scan_max_num_crops (do_pan_and_scan needs it) must be an int >= 1, got 0",
        ),
        (
            {"image_processor_type": "Gemma3ImageProcessor", **PAN_AND_SCAN, "pan_and_scan_min_ratio_to_activate": "2"},
            "pan_and_scan_min_ratio_to_activate (do_pan_and_scan needs it) must be a number, got '2'",
        ),
        (
            {"image_processor_type": "Gemma3ImageProcessor", **PAN_AND_SCAN, "do_resize": False},
            "do_pan_and_scan with do_resize off is not implemented",
        ),
        ({"image_processor_type": "Gemma3ImageProcessor", "do_pan_and_scan": 1}, "do_pan_and_scan must be true or"),
        ({"image_processor_type": "Gemma3ImageProcessor", "resample": 0}, "resample 0 (nearest) is not implemented"),
    ],
)
def test_bad_configs_are_refused(config, message):
    with pytest.raises(ValueError, match="FusedImageProcessor: ") as error:
        FusedImageProcessor.from_preprocessor_config(config, device="cpu")
    assert message in str(error.value), str(error.value)


def test_calls_it_does_not_reproduce_go_to_transformers(caplog):
    """Pan and scan without resizing (torchvision's backend resizes the crops anyway, its Pil one does not) and
    an aspect-preserving size go to transformers, logged; pan and scan without its settings fails there as
    in transformers."""
    theirs = upstream(GEMMA3, "torchvision", GEMMA3_CHECKPOINT)
    ours = FusedHFImageProcessor(upstream(GEMMA3, "torchvision", GEMMA3_CHECKPOINT))
    images = [as_input("torchvision", PHOTOS["tiny"])]
    with caplog.at_level(logging.INFO):
        for kwargs in ({**PAN_AND_SCAN, "do_resize": False}, {"size": {"shortest_edge": 64}}):
            got, expected = ours(images, return_tensors="pt", **kwargs), theirs(images, return_tensors="pt", **kwargs)
            assert torch.equal(got["pixel_values"], expected["pixel_values"])
        with pytest.raises(TypeError, match="not supported between"):
            ours(images, do_pan_and_scan=True)
    said = [r.getMessage() for r in caplog.records if "serves this call" in r.getMessage()]
    assert len(said) == 3, said
    assert "do_resize off" in said[0] and "size must be an int or" in said[1] and "do_pan_and_scan needs" in said[2]


# ----- GLM-4V's video processor (Glm4vVideoProcessor) through FusedVideoProcessor -----

GLM_VIDEO = {"video_processor_type": "Glm4vVideoProcessor"}


def _clip(frames: int, height: int = 200, width: int = 300, name: str = "astronaut", step=(5, 7)) -> np.ndarray:
    """uint8 [T, H, W, 3]: a window moving across a real photo, `step` pixels per frame."""
    whole = photo(name)
    dy, dx = step
    return np.stack([whole[t * dy : t * dy + height, t * dx : t * dx + width] for t in range(frames)])


def _glm_video(**config):
    return transformers.Glm4vVideoProcessor(**config)


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize(
    ("config", "kwargs", "metadata"),
    [
        ({}, {"do_sample_frames": False}, None),
        ({}, {}, [{"total_num_frames": 9, "fps": 3.0}, {"total_num_frames": 7, "fps": 2.5, "duration": 2.9}]),
        ({}, {"fps": 1.5, "max_duration": 1}, [{"total_num_frames": 9, "fps": 3.0}, {"total_num_frames": 7, "fps": 7}]),
        ({"max_duration": 2, "fps": 3}, {}, [{"total_num_frames": 9, "fps": 3.0}, {"total_num_frames": 7, "fps": 2.0}]),
        (
            {"size": {"shortest_edge": 3136, "longest_edge": 401408}},
            {"do_sample_frames": False, "patch_size": 16},
            None,
        ),
    ],
    ids=["all-frames", "sampled", "call-fps", "long-video", "size-patch16"],
)
def test_glm_video_matches_transformers(config, kwargs, metadata, dtype):
    """Clips of two sizes and odd frame counts in one call; sampling by fps (the config's, a call's; a call's
    max_duration is read by neither), a clip longer than max_duration, sizes and patch sizes."""
    from fused_input_norm import FusedVideoProcessor

    if dtype == "uint8":
        kwargs = {**kwargs, "do_rescale": False, "do_normalize": False}
    videos = [_clip(9), _clip(7, 190, 250, "coffee", (4, 3))]
    expected = _glm_video(**config)(videos, video_metadata=metadata, return_tensors="pt", **kwargs)
    processor = FusedVideoProcessor.from_preprocessor_config({**GLM_VIDEO, **config}, device="cpu")
    got = processor(videos, torch.uint8 if dtype == "uint8" else torch.float32, video_metadata=metadata, **kwargs)
    assert_same(got, expected, f"glm4v-video torchvision {'-'.join(map(str, kwargs))} {dtype}")


def test_glm_video_adapter_and_encoded_video_match_transformers(monkeypatch, tmp_path):
    """FusedHFVideoProcessor over Glm4vVideoProcessor (upstream samples, the adapter computes), served; and an
    MP4's bytes, sampled from the stream's own duration, against transformers given its path."""
    from fused_input_norm import FusedVideoProcessor
    from fused_input_norm.hf_adapter import FusedHFVideoProcessor

    videos = [_clip(9), _clip(7, 190, 250, "coffee", (4, 3))]
    metadata = [{"total_num_frames": 9, "fps": 3.0}, {"total_num_frames": 7, "fps": 2.5}]
    ours = FusedHFVideoProcessor(_glm_video())
    for kwargs in ({}, {"do_rescale": False, "do_normalize": False, "fps": 1}):
        expected = _glm_video()(videos, video_metadata=metadata, return_tensors="pt", **kwargs)
        monkeypatch.setattr(ours.upstream, "_preprocess", lambda *a, **k: pytest.fail("handed back"))
        got = ours(videos, video_metadata=metadata, return_tensors="pt", **kwargs)
        assert_same(got, expected, f"glm4v-video-adapter torchvision {'-'.join(map(str, kwargs))}")
    decode = pytest.importorskip("test_video_decode")
    if decode.TORCHCODEC_MISSING:
        pytest.skip(decode.TORCHCODEC_MISSING)
    data = decode.encode(_clip(40, 160, 240, "chelsea", (2, 3)), "mp4", 20.0)
    (tmp_path / "clip.mp4").write_bytes(data)
    expected = _glm_video()(str(tmp_path / "clip.mp4"), return_tensors="pt")
    got = FusedVideoProcessor.from_preprocessor_config(GLM_VIDEO, device="cpu")(data)
    assert_same(got, expected, "glm4v-video torchvision mp4")


def test_glm_frame_sampling_is_transformers():
    """glm4v_frame_indices against Glm4vVideoProcessor.sample_frames over frame counts, video fps, durations
    (given or not), sampling fps and max_duration (both branches: within it, and spread over a longer video)."""
    from transformers.video_utils import VideoMetadata

    from fused_input_norm.video import glm4v_frame_indices

    rng = random.Random(41)
    for _ in range(3000):
        total = rng.randint(1, 4000)
        video_fps = rng.choice([1, 2.5, 12, 23.976, 24, 25, 29.97, 30, 60, rng.uniform(0.2, 90)])
        duration = rng.choice([None, total / video_fps, rng.uniform(0.1, 400)])
        fps, max_duration = rng.choice([0.5, 1, 2, 3, rng.uniform(0.1, 8)]), rng.choice([1, 10, 60, 300])
        metadata = VideoMetadata(total_num_frames=total, fps=video_fps, duration=duration)
        want = _glm_video(max_duration=max_duration).sample_frames(metadata, fps=fps).tolist()
        assert glm4v_frame_indices(total, video_fps, duration, fps, max_duration) == want, (total, video_fps, duration)


def test_glm_video_refusals_are_transformers_and_named_before_any_kernel():
    from fused_input_norm import FusedVideoProcessor

    processor = FusedVideoProcessor.from_preprocessor_config(GLM_VIDEO, device="cpu")
    for call, message in (
        ({}, "GLM-4V samples frames per second from the video's fps: pass video_metadata"),
        ({"do_sample_frames": False, "videos": [_clip(4), _clip(1)]}, "videos[1] of 1 frames of 200x300: t:1"),
    ):
        videos = call.pop("videos", [_clip(4)])
        with pytest.raises(ValueError):
            _glm_video()(videos, return_tensors="pt", **call)
        with RecordOps() as recorded, pytest.raises(ValueError) as raised:
            processor(videos, **call)
        assert message in str(raised.value), str(raised.value)
        assert not any("fused_input_norm" in str(op) for op in recorded.ops())
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) min_frames"):
        processor([_clip(4)], do_sample_frames=False, min_frames=2)  # GLM-4V takes no min_frames


@pytest.mark.parametrize(
    "config",
    [GLM_VIDEO, {"processor_class": "Glm4vProcessor"}, {**GLM_VIDEO, "max_duration": 60, "fps": 1}],
    ids=["type", "processor-class", "checkpoint-like"],
)
def test_glm_video_config_is_the_class(config):
    from fused_input_norm import FusedVideoProcessor

    s = FusedVideoProcessor.from_preprocessor_config(config, device="cpu").settings
    hf = _glm_video(**{k: v for k, v in config.items() if k not in ("video_processor_type", "processor_class")})
    assert s.kind == "glm4v"
    assert s.size == {"shortest_edge": hf.size.shortest_edge, "longest_edge": hf.size.longest_edge}
    assert (s.patch_size, s.temporal_patch_size, s.merge_size) == (hf.patch_size, hf.temporal_patch_size, hf.merge_size)
    assert (s.do_sample_frames, s.fps, s.max_duration) == (hf.do_sample_frames, hf.fps, hf.max_duration)
    assert list(s.normalization.image_mean) == list(hf.image_mean)
