"""Pixtral (PixtralImageProcessor: Mistral Small 3.1 / 3.2 and Pixtral-12B in transformers format) against
transformers 5's own processor, both backends: the resized size (fit in longest_edge or a box, sides rounded
up to patch multiples) against transformers' own function over thousands of shapes; FusedHFImageProcessor
(upstream) against upstream itself on real photos (wide, tall, tiny, thin, an exact multiple, 1080p) one at a
time and as batches of mixed sizes (padded to the largest with 0 after normalize), with the per-call
patch_size PixtralProcessor passes and per-call sizes: every key, shape and dtype the same, float32 within 1e-6,
the resized bytes (do_rescale = do_normalize = False) and image_sizes equal; FusedImageProcessor from the
configs as the checkpoints ship them, every spelling; what it refuses, named before any kernel runs.

The EQUALITY lines printed (pytest -s) are the equality table: case, backend, dtype, max abs diff."""

import itertools
import logging
import random

import numpy as np
import pytest
import torch
from conftest import RecordOps, requires_cuda
from family_checks import as_input, assert_same, forbid_upstream, photo

from fused_input_norm import FusedImageProcessor
from fused_input_norm import config as configs
from fused_input_norm.families import pixtral
from fused_input_norm.hf_adapter import FusedHFImageProcessor

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
pixtral_tv = pytest.importorskip("transformers.models.pixtral.image_processing_pixtral")
pixtral_pil = pytest.importorskip("transformers.models.pixtral.image_processing_pil_pixtral")

BACKENDS = {"torchvision": transformers.PixtralImageProcessor, "pil": transformers.PixtralImageProcessorPil}
# mistralai/Mistral-Small-3.1-24B-Instruct-2503's preprocessor_config.json (less its type keys): patch 14,
# longest edge 1540. Its PixtralProcessor (spatial_merge_size 2) passes patch_size=28 on every call.
MISTRAL_SMALL = {
    "crop_size": None,
    "do_center_crop": None,
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "patch_size": {"height": 14, "width": 14},
    "resample": 3,
    "rescale_factor": 0.00392156862745098,
    "size": {"longest_edge": 1540},
}
UINT8 = {"do_rescale": False, "do_normalize": False}


def photos() -> dict[str, np.ndarray]:
    """Real photos in the shapes that take every branch: smaller than the bound (rounded up only), larger
    (scaled down, then rounded up), tiny, thin, exactly patch multiples, 1080p."""
    astronaut, coffee = photo("astronaut"), photo("coffee")
    return {
        "wide-coffee": coffee,  # 400 x 600
        "tall-rocket": np.ascontiguousarray(photo("rocket").transpose(1, 0, 2)),  # 640 x 427
        "tiny": photo("chelsea")[100:117, 200:229].copy(),  # 17 x 29
        "thin": np.ascontiguousarray(coffee[:, 100:110]),  # 400 x 10
        "multiple-448x504": astronaut[:448, :504].copy(),  # multiples of 14 and 28: kept as it is
        "1080p": np.array(Image.fromarray(astronaut).resize((1920, 1080), Image.Resampling.BICUBIC)),
    }


PHOTOS = photos()


# ----- the resized size, against transformers' own function -----


def test_fit_size_is_transformers_over_many_shapes():
    """pixtral.fit_size against both backends' get_resize_output_image_size: sides log-uniform over 1..20000
    and every small pair, bounds square and not, patches square and not (a side floored to 0 included)."""
    rng = random.Random(37)
    shapes = [(round(2 ** rng.uniform(0, 14.3)), round(2 ** rng.uniform(0, 14.3))) for _ in range(1500)]
    shapes += list(itertools.product(range(1, 30), range(1, 30)))
    shapes += [(1080, 1920), (3024, 4032), (4032, 3024), (1540, 1540), (1541, 1540), (1, 5000)]
    boxes = [(1540, 1540), (1024, 1024), (512, 512), (300, 500), (1000, 37)]
    patches = [(14, 14), (16, 16), (28, 28), (14, 16), (1, 1)]
    zero = 0
    for (h, w), box, patch in itertools.product(shapes, boxes, patches):
        image = np.broadcast_to(np.uint8(0), (3, h, w))  # a [C, H, W] shape without the memory
        ours = pixtral.fit_size(h, w, box, patch)
        assert ours == pixtral_tv.get_resize_output_image_size(image, box, patch, "channels_first"), (h, w, box)
        assert ours == pixtral_pil.get_resize_output_image_size(image, box, patch, "channels_first"), (h, w, box)
        zero += 0 in ours
    assert zero > 0  # the sides floored to nothing were reached (and are refused by the plan, below)


# ----- FusedHFImageProcessor against the class it wraps -----

# (config of the wrapped class, call kwargs): Mistral Small 3.x as its PixtralProcessor calls it (patch 28),
# its image processor alone (patch 14), Pixtral-12B's (the class defaults: patch 16, longest edge 1024), a
# per-call longest edge, a square bound (an int), a height x width bound, a non-square patch, bilinear, and
# no resize (padding only).
CASES = {
    "mistral-small": (MISTRAL_SMALL, {"patch_size": 28}),
    "mistral-small-config": (MISTRAL_SMALL, {}),
    "pixtral-12b": ({}, {}),
    "longest-512": (MISTRAL_SMALL, {"patch_size": 28, "size": {"longest_edge": 512}}),
    "size-int-300": (MISTRAL_SMALL, {"size": 300}),
    "box-300x500": (MISTRAL_SMALL, {"size": {"height": 300, "width": 500}}),
    "patch-14x16": ({"patch_size": {"height": 14, "width": 16}}, {}),
    "bilinear": (MISTRAL_SMALL, {"patch_size": 28, "resample": 2}),
    "unresized": (MISTRAL_SMALL, {"do_resize": False}),
}


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("case", list(CASES))
def test_adapter_on_a_batch_of_mixed_photos_equals_transformers(monkeypatch, case, backend, dtype):
    """The photos in one call (one twice: the torchvision backend groups equal shapes), padded to the largest;
    the 1080p one in the checkpoint's call only (each case's time is mostly transformers' on it)."""
    config, kwargs = CASES[case]
    kwargs = kwargs | (UINT8 if dtype == "uint8" else {})
    names = [n for n in PHOTOS if n != "1080p" or case == "mistral-small"] + ["tiny"]
    batch = [as_input(backend, PHOTOS[name]) for name in names]
    expected = BACKENDS[backend](**config)(batch, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(BACKENDS[backend](**config))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(batch, return_tensors="pt", **kwargs), expected, f"{case} {backend} {dtype} batch")


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("name", list(PHOTOS))
def test_adapter_on_each_photo_equals_transformers(monkeypatch, name, dtype, backend):
    """One image (no padding), as Mistral Small's processor calls it."""
    image = as_input(backend, PHOTOS[name])
    kwargs = {"patch_size": 28} | (UINT8 if dtype == "uint8" else {})
    expected = BACKENDS[backend](**MISTRAL_SMALL)(image, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(BACKENDS[backend](**MISTRAL_SMALL))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(image, return_tensors="pt", **kwargs), expected, f"{name} {backend} {dtype}")


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_nested_gray_and_rgba_images_equal_transformers(monkeypatch, backend):
    """A nested call (transformers flattens it into one batch) of a gray, an RGBA and an RGB image."""
    rgb = PHOTOS["wide-coffee"]
    alpha = np.linspace(0, 255, rgb.shape[1], dtype=np.uint8)[None, :].repeat(rgb.shape[0], 0)
    images = [[Image.fromarray(rgb[..., 1])], [Image.fromarray(np.dstack([rgb, alpha])), Image.fromarray(rgb[:99])]]
    expected = BACKENDS[backend](**MISTRAL_SMALL)(images, return_tensors="pt", patch_size=28)
    ours = FusedHFImageProcessor(BACKENDS[backend](**MISTRAL_SMALL))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(images, return_tensors="pt", patch_size=28), expected, f"nested-gray-rgba {backend}")


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_without_do_pad_mixed_sizes_fail_as_in_transformers(backend, caplog):
    """Without do_pad, images of different sizes do not stack: transformers fails to make a tensor of them; the
    family's plan refuses them before any kernel and the call goes to the generic path (transformers' own code,
    the package's resizes), which fails as stock does (the same error); images of one size are served."""
    batch = [as_input(backend, PHOTOS[name]) for name in ("wide-coffee", "tiny")]
    message = "Unable to convert output 'pixel_values'"
    with pytest.raises(ValueError, match=message):
        BACKENDS[backend](**MISTRAL_SMALL)(batch, return_tensors="pt", do_pad=False)
    ours = FusedHFImageProcessor(BACKENDS[backend](**MISTRAL_SMALL))
    with caplog.at_level(logging.INFO), pytest.raises(ValueError, match=message):
        ours(batch, return_tensors="pt", do_pad=False, patch_size=14)
    said = [r.getMessage() for r in caplog.records if "serves this call" in r.getMessage()]
    assert len(said) == 1 and "the generic path serves this call" in said[0], said
    same = [batch[0], batch[0]]
    expected = BACKENDS[backend](**MISTRAL_SMALL)(same, return_tensors="pt", do_pad=False)
    assert_same(ours(same, return_tensors="pt", do_pad=False), expected, f"do_pad off, one size {backend}")


def test_calls_it_does_not_reproduce_go_to_the_generic_path(caplog):
    """A center crop, a size transformers' Pixtral cannot read and a bare longest_edge kwarg (size's key, not a
    kwarg of the processor) go to the generic path, transformers' own code: logged, its answer (or its error)."""
    theirs = BACKENDS["torchvision"](**MISTRAL_SMALL)
    ours = FusedHFImageProcessor(BACKENDS["torchvision"](**MISTRAL_SMALL))
    images = [as_input("torchvision", PHOTOS["wide-coffee"])]
    kwargs = {"do_center_crop": True, "crop_size": {"height": 200, "width": 200}}
    with caplog.at_level(logging.INFO):
        got, expected = ours(images, return_tensors="pt", **kwargs), theirs(images, return_tensors="pt", **kwargs)
        assert torch.equal(got["pixel_values"], expected["pixel_values"])
        with pytest.raises(ValueError, match="size must contain either 'longest_edge' or 'height' and 'width'"):
            ours(images, size={"shortest_edge": 64})
        with pytest.raises(TypeError, match="unexpected keyword argument 'longest_edge'"):
            theirs(images, longest_edge=512)
        with pytest.raises(TypeError, match="unexpected keyword argument 'longest_edge'"):
            ours(images, longest_edge=512)
    said = [r.getMessage() for r in caplog.records if "serves this call" in r.getMessage()]
    assert len(said) == 3 and "do_center_crop" in said[0] and "size must be {'longest_edge'}" in said[1], said
    assert all("the generic path serves this call" in line for line in said), said
    assert "kwargs ['longest_edge'] that the processor does not declare" in said[2], said


@requires_cuda
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_cuda_calls_equal_the_same_calls_on_the_cpu(dtype):
    """device="cuda": the same outputs as on the CPU, bit for bit (the zeroed margins included), served."""
    ours = FusedHFImageProcessor(BACKENDS["torchvision"](**MISTRAL_SMALL))
    images = [as_input("torchvision", hwc) for hwc in PHOTOS.values()]
    kwargs = {"patch_size": 28} | (UINT8 if dtype == "uint8" else {})
    on_cpu = ours(images, return_tensors="pt", **kwargs)
    on_gpu = ours(images, return_tensors="pt", device="cuda", **kwargs)
    assert not ours._logged, ours._logged
    assert on_gpu["pixel_values"].device.type == "cuda"
    for key in on_cpu:
        assert torch.equal(on_gpu[key].cpu(), on_cpu[key]), key


# ----- FusedImageProcessor from a config, every spelling -----


@pytest.mark.parametrize("reference", list(BACKENDS))
@pytest.mark.parametrize(
    ("type_keys", "keys"),
    [
        ({"image_processor_type": "PixtralImageProcessor", "processor_class": "PixtralProcessor"}, MISTRAL_SMALL),
        ({"image_processor_type": "PixtralImageProcessorFast"}, MISTRAL_SMALL),
        ({"image_processor_type": "PixtralImageProcessorPil"}, {}),
        ({"processor_class": "PixtralProcessor"}, MISTRAL_SMALL),
        ({"image_processor_type": "PixtralImageProcessor"}, {"size": 500, "patch_size": 28}),
    ],
    ids=["plain", "fast", "pil-defaults", "processor-class", "size-int"],
)
def test_from_preprocessor_config_equals_the_class_built_from_it(type_keys, keys, reference):
    processor = FusedImageProcessor.from_preprocessor_config({**keys, **type_keys}, device="cpu", reference=reference)
    assert processor.settings.kind == "pixtral"
    hwcs = [PHOTOS[name] for name in ("wide-coffee", "tiny", "1080p")]
    expected = BACKENDS[reference](**keys)([as_input(reference, p) for p in hwcs], return_tensors="pt")
    got = processor([Image.fromarray(p) for p in hwcs] if reference == "pil" else hwcs)
    assert got["image_sizes"].device.type == "cpu"
    assert_same(got, expected, f"from config {reference} {type_keys}")


@pytest.mark.parametrize(
    "config",
    [MISTRAL_SMALL, {}, {"size": 700, "patch_size": 28, "do_pad": False}, {"size": [300, 200], "resample": 2}],
    ids=["mistral-small", "defaults", "int-size", "pair-size"],
)
def test_resolved_config_is_what_transformers_resolves(config):
    """The bound, the patch and do_pad, as both transformers classes resolve the same config."""
    s = configs.resolve({**config, "image_processor_type": "PixtralImageProcessor"}, "test")
    for hf in (cls(**config) for cls in BACKENDS.values()):
        assert s.size == {k: v for k, v in dict(hf.size).items() if v is not None}
        patch = (
            hf.patch_size if isinstance(hf.patch_size, dict) else {"height": hf.patch_size} | {"width": hf.patch_size}
        )
        assert s.options["patch"] == (patch["height"], patch["width"])
        assert s.options["do_pad"] == hf.do_pad
        assert s.resample == {2: "bilinear", 3: "bicubic"}[int(hf.resample)]


# ----- refusals: named, before any kernel -----


def test_an_image_fitted_to_nothing_is_named_before_any_kernel():
    """A 2 x 5000 image fitted in 1540: 0 rows, which transformers fails to resize to, as the plan refuses it."""
    thin = np.zeros((2, 5000, 3), np.uint8)
    with pytest.raises(ValueError):
        BACKENDS["torchvision"](**MISTRAL_SMALL)(as_input("torchvision", thin))
    processor = FusedImageProcessor.from_preprocessor_config(
        {**MISTRAL_SMALL, "image_processor_type": "PixtralImageProcessor"}, device="cpu"
    )
    with RecordOps() as recorded, pytest.raises(ValueError) as raised:
        processor([PHOTOS["tiny"], thin])
    assert "images[1] is 2x5000: fitting it in 1540x1540 leaves a side of 0 pixels" in str(raised.value)
    assert not any("fused_input_norm" in str(op) for op in recorded.ops())


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"size": {"shortest_edge": 1024}}, "size must be {'longest_edge'} or {'height', 'width'}"),
        ({"size": {"longest_edge": 0}}, "size['longest_edge'] must be an int >= 1, got 0"),
        ({"size": {"height": 100, "width": -1}}, "size['width'] must be an int >= 1, got -1"),
        ({"patch_size": {"longest_edge": 14}}, "patch_size must be an int or {'height', 'width'}"),
        ({"patch_size": 0}, "patch_size['height'] must be an int >= 1, got 0"),
        ({"do_center_crop": True}, "crop_size / do_center_crop are not implemented for Pixtral"),
        ({"crop_size": {"height": 100, "width": 100}}, "crop_size / do_center_crop are not implemented for Pixtral"),
        ({"do_pad": "yes"}, "do_pad must be true or false, got 'yes'"),
        ({"resample": 0}, "resample 0 (nearest) is not implemented"),
    ],
    ids=[
        "shortest-edge",
        "longest-0",
        "width-neg",
        "patch-dict",
        "patch-0",
        "center-crop",
        "crop-size",
        "pad",
        "nearest",
    ],
)
def test_bad_configs_are_refused_by_name(config, message):
    with pytest.raises(ValueError, match="FusedImageProcessor: ") as error:
        FusedImageProcessor.from_preprocessor_config({"image_processor_type": "PixtralImageProcessor", **config})
    assert message in str(error.value), str(error.value)
