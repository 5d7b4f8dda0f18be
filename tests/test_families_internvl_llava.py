"""InternVL3 in transformers format (GotOcr2ImageProcessor with crop_to_patches) and LLaVA-OneVision
(LlavaOnevisionImageProcessor) against transformers 5's own processors, both backends: the sizes (tile grid,
best resolution, aspect-preserving fit) against transformers' own functions over many shapes, then
FusedHFImageProcessor(upstream) against upstream itself and FusedImageProcessor.from_preprocessor_config
against the class built from the same config, on real photos of several sizes and aspect ratios (wide,
tall, tiny, exactly a tile multiple) one at a time and as one batch of mixed sizes: every key, shape and
dtype the same, float32 within 1e-6, uint8 (do_rescale = do_normalize = False) byte-equal; bad configs named.
"""

import itertools

import numpy as np
import pytest
import torch
from conftest import RecordOps
from family_checks import as_input, assert_same, forbid_backend_resize, forbid_upstream, photo

from fused_input_norm import FusedImageProcessor
from fused_input_norm.families import got_ocr2, llava_onevision
from fused_input_norm.hf_adapter import FusedHFImageProcessor

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
got_tv = pytest.importorskip("transformers.models.got_ocr2.image_processing_got_ocr2")
hf_utils = pytest.importorskip("transformers.image_processing_utils")

BACKENDS = {"torchvision": transformers.GotOcr2ImageProcessor, "pil": transformers.GotOcr2ImageProcessorPil}
# An InternVL3 "-hf" checkpoint's preprocessor_config.json as transformers saves it (its processor passes
# crop_to_patches=True on every call; the config itself leaves it off).
INTERNVL3_HF = {
    "crop_size": None,
    "crop_to_patches": False,
    "data_format": "channels_first",
    "default_to_square": True,
    "do_center_crop": None,
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.485, 0.456, 0.406],
    "image_std": [0.229, 0.224, 0.225],
    "max_patches": 12,
    "min_patches": 1,
    "resample": 3,
    "rescale_factor": 0.00392156862745098,
    "size": {"height": 448, "width": 448},
}


def photos() -> dict[str, np.ndarray]:
    """Real photos: wide, tall (a wide one turned), square, tiny, exactly 1 x 1 and 2 x 1 tiles of 448."""
    astronaut = photo("astronaut")  # 512 x 512
    tile = astronaut[:448, :448]
    return {
        "wide-coffee": photo("coffee"),  # 400 x 600
        "tall-rocket": np.ascontiguousarray(photo("rocket").transpose(1, 0, 2)),  # 640 x 427
        "chelsea": photo("chelsea"),  # 300 x 451
        "square-astronaut": astronaut,
        "tiny": photo("chelsea")[100:117, 200:229].copy(),  # 17 x 29
        "tile-448": tile.copy(),
        "tiles-896x448": np.ascontiguousarray(np.concatenate([tile, tile[::-1]], axis=0)),
    }


# ----- the tile grid and the count of tiles, against transformers' own functions -----


def test_tile_grid_is_transformers_choice_over_many_shapes():
    sides = [1, 2, 3, 17, 100, 223, 224, 300, 447, 448, 449, 500, 640, 895, 896, 1000, 1344, 1920, 4032]
    limits = [(1, 1), (1, 2), (1, 6), (1, 12), (2, 4), (3, 9), (1, 40), (12, 12)]
    # (448, 224): a 448 x 896 image's area is exactly half of its tied 4 x 2 grid's, where the rule's ">" counts
    tiles = [(448, 448), (384, 384), (224, 160), (448, 224)]
    rng = np.random.default_rng(5)
    shapes = list(itertools.product(sides, sides)) + [tuple(rng.integers(1, 5000, 2)) for _ in range(300)]
    checked = 0
    for (h, w), (low, high), tile in itertools.product(shapes, limits, tiles):
        h, w = int(h), int(w)
        assert got_ocr2.tile_grid(h, w, tile, low, high) == got_tv.get_optimal_tiled_canvas((h, w), tile, low, high)
        checked += 1
    assert checked > 10000


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_num_patches_is_transformers_count(backend):
    """The plan's tiles per image (tiles + thumbnail) against the class's get_number_of_image_patches."""
    upstream = BACKENDS[backend](**INTERNVL3_HF)
    processor = FusedImageProcessor.from_preprocessor_config(
        {**INTERNVL3_HF, "image_processor_type": "GotOcr2ImageProcessor", "crop_to_patches": True}, device="cpu"
    )
    shapes = [(h, w) for h in (10, 300, 448, 800, 1080, 3024) for w in (10, 448, 600, 1920, 4032)]
    plan = got_ocr2.plan(processor.settings, shapes, "test")
    counts = [upstream.get_number_of_image_patches(h, w, {"crop_to_patches": True}) for h, w in shapes]
    assert plan.extras["num_patches"].tolist() == counts
    assert plan.shape[0] == sum(counts)


# ----- FusedHFImageProcessor against the class it wraps -----

# (config of the wrapped class, call kwargs): InternVL3's config and call, its uint8 variant, per-call limits,
# another tile size (a non-square one: one run per tile), and the class defaults without crop_to_patches.
CASES = {
    "internvl3": (INTERNVL3_HF, {"crop_to_patches": True}),
    "internvl3-uint8": (INTERNVL3_HF, {"crop_to_patches": True, "do_rescale": False, "do_normalize": False}),
    "max_patches-6": (INTERNVL3_HF, {"crop_to_patches": True, "max_patches": 6}),
    "min2-max4": (INTERNVL3_HF, {"crop_to_patches": True, "min_patches": 2, "max_patches": 4}),
    "config-crop": ({**INTERNVL3_HF, "crop_to_patches": True, "max_patches": 4}, {}),
    "tile-224x160-uint8": (
        {"crop_to_patches": True, "size": {"height": 224, "width": 160}},
        {"do_rescale": False, "do_normalize": False},
    ),
    "bilinear-uint8": (
        INTERNVL3_HF,
        {"crop_to_patches": True, "resample": 2, "do_rescale": False, "do_normalize": False},
    ),
    "defaults": ({}, {}),
    "no-crop-448": (INTERNVL3_HF, {}),
}


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("case", list(CASES))
def test_adapter_on_a_batch_of_mixed_photos_equals_transformers(monkeypatch, case, backend):
    config, kwargs = CASES[case]
    upstream = BACKENDS[backend](**config)
    batch = [as_input(backend, hwc) for hwc in photos().values()]
    expected = upstream(batch, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(BACKENDS[backend](**config))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(batch, return_tensors="pt", **kwargs), expected, f"{case} {backend} batch")


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("uint8", [False, True], ids=["float32", "uint8"])
@pytest.mark.parametrize("name", list(photos()))
def test_adapter_on_each_photo_equals_transformers(monkeypatch, name, uint8, backend):
    kwargs = {"crop_to_patches": True} | ({"do_rescale": False, "do_normalize": False} if uint8 else {})
    image = as_input(backend, photos()[name])
    expected = BACKENDS[backend](**INTERNVL3_HF)(image, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(BACKENDS[backend](**INTERNVL3_HF))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(image, return_tensors="pt", **kwargs), expected, f"{name} {backend}")


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_calls_it_refuses_go_to_transformers(backend):
    """min_patches 0, min_patches over max_patches, max_patches 1 without do_resize: transformers computes
    them; the adapter hands them to it (FusedImageProcessor refuses them by name, below). Two photos of one
    size: the Pil backend passes them unresized in the last case."""
    batch = [as_input(backend, hwc) for hwc in (photo("coffee"), photo("coffee")[::-1].copy())]
    for kwargs in (
        {"crop_to_patches": True, "min_patches": 0},
        {"crop_to_patches": True, "min_patches": 5, "max_patches": 2},
        {"crop_to_patches": True, "max_patches": 1, "do_resize": False},
    ):
        ours = FusedHFImageProcessor(BACKENDS[backend](**INTERNVL3_HF))
        got = ours(batch, return_tensors="pt", **kwargs)
        expected = BACKENDS[backend](**INTERNVL3_HF)(batch, return_tensors="pt", **kwargs)
        assert ours._logged, kwargs
        assert torch.equal(got["pixel_values"], expected["pixel_values"])


# ----- FusedImageProcessor from a config dict -----


@pytest.mark.parametrize("reference", list(BACKENDS))
@pytest.mark.parametrize(
    ("type_keys", "keys"),
    [
        ({"image_processor_type": "GotOcr2ImageProcessor"}, {}),
        ({"image_processor_type": "GotOcr2ImageProcessorFast", "processor_class": "InternVLProcessor"}, {}),
        ({"image_processor_type": "GotOcr2ImageProcessorPil"}, {}),
        ({"processor_class": "InternVLProcessor"}, {}),
        # a bare int size is a square tile for GOT-OCR2 (its default_to_square), not a shortest edge
        ({"image_processor_type": "GotOcr2ImageProcessor"}, {"size": 224, "max_patches": 6}),
    ],
    ids=["plain", "fast", "pil", "processor-class", "size-int"],
)
def test_from_preprocessor_config_equals_the_class_built_from_it(type_keys, keys, reference):
    config = {**INTERNVL3_HF, "crop_to_patches": True, **keys}
    processor = FusedImageProcessor.from_preprocessor_config({**config, **type_keys}, device="cpu", reference=reference)
    hwcs = [photos()[name] for name in ("wide-coffee", "tiny", "tiles-896x448")]
    expected = BACKENDS[reference](**config)([as_input(reference, p) for p in hwcs], return_tensors="pt")
    got = processor([Image.fromarray(p) for p in hwcs] if reference == "pil" else hwcs)
    assert got["num_patches"].device.type == "cpu"
    assert_same(got, expected, f"from config {reference} {type_keys} {keys}")


def test_without_do_resize_same_sized_images_pass_through_and_mixed_ones_are_refused():
    config = {"image_processor_type": "GotOcr2ImageProcessor", "do_resize": False}
    processor = FusedImageProcessor.from_preprocessor_config(config, device="cpu", reference="torchvision")
    hwcs = [photo("coffee"), photo("coffee")[::-1].copy()]
    expected = transformers.GotOcr2ImageProcessor(do_resize=False)([as_input("torchvision", p) for p in hwcs])
    assert_same(processor(hwcs), transformers.BatchFeature(expected, tensor_type="pt"), "do_resize off")
    with (
        RecordOps() as recorded,
        pytest.raises(ValueError, match=r"different sizes \(images\[0\]: 400x600, images\[1\]: 300x451\)"),
    ):
        processor([photo("coffee"), photo("chelsea")])
    assert not any("fused_input_norm" in str(op) for op in recorded.ops())  # refused before any kernel ran


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"size": {"shortest_edge": 448}}, r"size must be an int or \{'height', 'width'\}, got \{'shortest_edge'"),
        ({"min_patches": 0}, r"min_patches must be an int >= 1, got 0"),
        ({"max_patches": 2.5}, r"max_patches must be an int >= 1, got 2.5"),
        ({"min_patches": 5, "max_patches": 2}, r"min_patches \(5\) > max_patches \(2\)"),
        ({"crop_to_patches": "yes"}, r"crop_to_patches must be true or false, got 'yes'"),
        (
            {"crop_to_patches": True, "max_patches": 1, "do_resize": False},
            r"crop_to_patches with max_patches 1 and do_resize off is not implemented",
        ),
        ({"do_pad": True}, r"do_pad is not implemented for got_ocr2"),
        ({"size": {"height": 0, "width": 448}}, r"size\['height'\] must be an int >= 1, got 0"),
    ],
    ids=["shortest-edge", "min-0", "max-float", "min-over-max", "crop-not-bool", "max1-unresized", "do_pad", "size-0"],
)
def test_bad_configs_are_refused_by_name(config, message):
    with pytest.raises(ValueError, match="FusedImageProcessor: " + message):
        FusedImageProcessor.from_preprocessor_config({"image_processor_type": "GotOcr2ImageProcessor", **config})


# ----- LLaVA-OneVision -----

LLAVA_BACKENDS = {
    "torchvision": transformers.LlavaOnevisionImageProcessor,
    "pil": transformers.LlavaOnevisionImageProcessorPil,
}
# llava-hf/llava-onevision-qwen2-*-hf's preprocessor_config.json (less its type keys): SigLIP's mean and std,
# the class's 384 tile and pinpoints.
LLAVA_OV_HF = {
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_pad": True,
    "do_rescale": True,
    "do_resize": True,
    "image_grid_pinpoints": [[384 * r, 384 * c] for r in range(1, 7) for c in range(1, 7)],
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "resample": 3,
    "rescale_factor": 0.00392156862745098,
    "size": {"height": 384, "width": 384},
}


def llava_photos() -> dict[str, np.ndarray]:
    """Real photos: wide, tall, tiny, exactly 1 x 1 and 1 x 2 tiles of 384."""
    tile = photo("astronaut")[:384, :384]
    return {
        "wide-coffee": photo("coffee"),  # 400 x 600
        "tall-rocket": np.ascontiguousarray(photo("rocket").transpose(1, 0, 2)),  # 640 x 427
        "tiny": photo("chelsea")[100:117, 200:229].copy(),  # 17 x 29
        "tile-384": tile.copy(),
        "tiles-384x768": np.ascontiguousarray(np.concatenate([tile, tile[:, ::-1]], axis=1)),
    }


def test_best_resolution_and_fit_are_transformers_over_many_shapes():
    sides = [1, 2, 17, 100, 383, 384, 385, 500, 640, 767, 768, 1000, 1152, 1920, 2304, 3024, 4032]
    rng = np.random.default_rng(11)
    shapes = list(itertools.product(sides, sides)) + [
        tuple(int(v) for v in rng.integers(1, 6000, 2)) for _ in range(400)
    ]
    grids = [
        LLAVA_OV_HF["image_grid_pinpoints"],
        [[384, 768], [768, 384], [768, 768], [384, 1152]],
        [[192 * r, 192 * c] for r in range(1, 4) for c in range(1, 4)],
    ]
    for (h, w), grid in itertools.product(shapes, grids):
        canvas = llava_onevision.best_resolution(h, w, [tuple(p) for p in grid])
        assert canvas == hf_utils.select_best_resolution((h, w), grid)
        image = np.broadcast_to(np.uint8(0), (3, h, w))  # a [C, H, W] shape without the memory
        assert llava_onevision.fit_size(h, w, canvas) == hf_utils.get_patch_output_size(image, canvas, "channels_first")
    for target in [(384, 384), (768, 384), (2304, 1152)] + [
        tuple(int(v) for v in rng.integers(1, 3000, 2)) for _ in range(50)
    ]:
        for h, w in shapes:
            image = np.broadcast_to(np.uint8(0), (3, h, w))
            assert llava_onevision.fit_size(h, w, target) == hf_utils.get_patch_output_size(
                image, target, "channels_first"
            )


# (config of the wrapped class, call kwargs).
LLAVA_CASES = {
    "checkpoint": (LLAVA_OV_HF, {}),
    "checkpoint-uint8": (LLAVA_OV_HF, {"do_rescale": False, "do_normalize": False}),
    "class-defaults": ({}, {}),
    "pinpoints-per-call": (LLAVA_OV_HF, {"image_grid_pinpoints": [[384, 768], [768, 384], [768, 768]]}),
    # transformers resizes the base image and the fitted canvas whatever do_resize says (the tiles are whole)
    "unresized-bilinear": (LLAVA_OV_HF, {"do_resize": False, "resample": 2}),
    "tile-192-uint8": (
        {
            "size": {"shortest_edge": 192},
            "image_grid_pinpoints": [[192 * r, 192 * c] for r in (1, 2, 3) for c in (1, 2)],
        },
        {"do_rescale": False, "do_normalize": False},
    ),
}


@pytest.mark.parametrize("backend", list(LLAVA_BACKENDS))
@pytest.mark.parametrize("case", list(LLAVA_CASES))
def test_llava_adapter_on_a_batch_of_mixed_photos_equals_transformers(monkeypatch, case, backend):
    """Mixed tile counts: the images with fewer tiles end on zero slots (do_pad), as transformers pads them."""
    config, kwargs = LLAVA_CASES[case]
    batch = [as_input(backend, hwc) for hwc in llava_photos().values()]
    expected = LLAVA_BACKENDS[backend](**config)(batch, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(LLAVA_BACKENDS[backend](**config))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(batch, return_tensors="pt", **kwargs), expected, f"llava {case} {backend} batch")


@pytest.mark.parametrize("backend", list(LLAVA_BACKENDS))
@pytest.mark.parametrize("uint8", [False, True], ids=["float32", "uint8"])
@pytest.mark.parametrize("name", list(llava_photos()))
def test_llava_adapter_on_each_photo_equals_transformers(monkeypatch, name, uint8, backend):
    """One image: its own tile count, without batch padding; do_pad off gives the same."""
    kwargs = {"do_rescale": False, "do_normalize": False} if uint8 else {}
    image = as_input(backend, llava_photos()[name])
    ours = FusedHFImageProcessor(LLAVA_BACKENDS[backend](**LLAVA_OV_HF))
    forbid_upstream(monkeypatch, ours)
    for do_pad in (True, False):
        expected = LLAVA_BACKENDS[backend](**LLAVA_OV_HF)(image, return_tensors="pt", do_pad=do_pad, **kwargs)
        got = ours(image, return_tensors="pt", do_pad=do_pad, **kwargs)
        assert_same(got, expected, f"llava {name} {backend} do_pad={do_pad}")


def multi_image_calls(backend: str) -> dict[str, list]:
    """Calls holding multi-image samples (nested lists): 2 and 3 images of mixed sizes (wide, tall, tiny,
    square: no padding), beside one-image samples that are tiled, and empty samples (a text-only one)."""
    p = {name: as_input(backend, hwc) for name, hwc in llava_photos().items()}
    gray = Image.fromarray(photo("camera")[::3, ::2].copy()) if backend == "pil" else None
    calls = {
        "two": [[p["wide-coffee"], p["tall-rocket"]]],
        "three-mixed": [[p["tiny"], p["tile-384"], p["tiles-384x768"]]],
        "with-singles": [[p["wide-coffee"], p["tiny"]], [p["tall-rocket"]], [], [p["tile-384"], p["tiles-384x768"]]],
        "batch-of-pairs": [[p["tiny"], p["wide-coffee"]], [p["tall-rocket"], p["tiny"]]],
    }
    if gray is not None:  # a gray PIL image, converted to RGB before it is padded
        calls["gray"] = [[gray, p["tiny"]]]
    return calls


# (config of the wrapped class, call kwargs) for multi-image samples: the checkpoint's mean (a padding byte of
# 127), the class's CLIP mean (122, 116, 104), the resized bytes, per-call resample, size and do_pad.
LLAVA_MULTI_CASES = {
    "checkpoint": (LLAVA_OV_HF, {}),
    "checkpoint-uint8": (LLAVA_OV_HF, {"do_rescale": False, "do_normalize": False}),
    "class-defaults": ({}, {}),
    "class-defaults-uint8": ({}, {"do_rescale": False, "do_normalize": False}),
    "bilinear-per-call": (LLAVA_OV_HF, {"resample": 2}),
    "tile-192-per-call": (
        LLAVA_OV_HF,
        {
            "size": {"height": 192, "width": 192},
            "image_grid_pinpoints": [[192 * r, 192 * c] for r in (1, 2) for c in (1, 2)],
        },
    ),
    "std-per-call": (LLAVA_OV_HF, {"image_std": [0.2, 0.3, 0.4]}),
}


@pytest.mark.parametrize("backend", list(LLAVA_BACKENDS))
@pytest.mark.parametrize("case", list(LLAVA_MULTI_CASES))
def test_llava_multi_image_samples_are_served_as_transformers(monkeypatch, case, backend):
    """Each image of a multi-image sample: padded to a square of the mean color, resized to one tile, one slot
    (padded with zero slots to the call's most tiles); strict: a call handed back fails."""
    config, kwargs = LLAVA_MULTI_CASES[case]
    ours = FusedHFImageProcessor(LLAVA_BACKENDS[backend](**config))
    forbid_upstream(monkeypatch, ours)
    for name, call in multi_image_calls(backend).items():
        expected = LLAVA_BACKENDS[backend](**config)(call, return_tensors="pt", **kwargs)
        assert_same(ours(call, return_tensors="pt", **kwargs), expected, f"llava multi {name} {case} {backend}")
        # with return_tensors unset: transformers' lists
        expected = LLAVA_BACKENDS[backend](**config)(call, **kwargs)
        got = ours(call, **kwargs)
        assert set(got) == set(expected)
        for key in expected:
            assert type(got[key]) is type(expected[key]), (key, type(got[key]), type(expected[key]))
        assert got["image_sizes"] == expected["image_sizes"] and got["batch_num_images"] == expected["batch_num_images"]
        for have, want in zip(got["pixel_values"], expected["pixel_values"], strict=True):
            have, want = torch.as_tensor(have), torch.as_tensor(want)
            assert have.shape == want.shape and have.dtype == want.dtype, (name, have.shape, want.shape)
            assert (have.double() - want.double()).abs().max() <= (1e-6 if want.is_floating_point() else 0), name


@pytest.mark.parametrize("backend", list(LLAVA_BACKENDS))
def test_llava_multi_image_samples_without_do_pad_are_served_when_they_stack(monkeypatch, backend):
    """Every image in a multi-image sample: one slot each, so do_pad off stacks as on."""
    call = multi_image_calls(backend)["batch-of-pairs"]
    ours = FusedHFImageProcessor(LLAVA_BACKENDS[backend](**LLAVA_OV_HF))
    forbid_upstream(monkeypatch, ours)
    expected = LLAVA_BACKENDS[backend](**LLAVA_OV_HF)(call, return_tensors="pt", do_pad=False)
    assert_same(ours(call, return_tensors="pt", do_pad=False), expected, f"llava multi no pad {backend}")


@pytest.mark.parametrize("backend", list(LLAVA_BACKENDS))
def test_llava_from_preprocessor_config_serves_multi_image_samples(backend):
    """FusedImageProcessor itself, from the checkpoint's config, on a nested call: transformers' values."""
    config = {**LLAVA_OV_HF, "image_processor_type": "LlavaOnevisionImageProcessor"}
    ours = FusedImageProcessor.from_preprocessor_config(config, device="cpu", reference=backend)
    call = multi_image_calls("torchvision")["with-singles"]
    images = [[x if backend == "torchvision" else Image.fromarray(x.permute(1, 2, 0).numpy()) for x in g] for g in call]
    expected = LLAVA_BACKENDS[backend](**LLAVA_OV_HF)(images, return_tensors="pt")
    got = ours(images)
    torch.testing.assert_close(got["pixel_values"], expected["pixel_values"], rtol=0, atol=1e-6)
    assert got["image_sizes"].tolist() == expected["image_sizes"].tolist()
    assert got["batch_num_images"].tolist() == expected["batch_num_images"].tolist() == [2, 1, 2]


@pytest.mark.parametrize("backend", list(LLAVA_BACKENDS))
def test_llava_nested_single_images_are_served(monkeypatch, backend):
    hwcs = list(llava_photos().values())
    single = [[as_input(backend, hwcs[0])], [], [as_input(backend, hwcs[2])]]
    expected = LLAVA_BACKENDS[backend](**LLAVA_OV_HF)(single, return_tensors="pt")
    ours = FusedHFImageProcessor(LLAVA_BACKENDS[backend](**LLAVA_OV_HF))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(single, return_tensors="pt"), expected, f"llava nested singles {backend}")


@pytest.mark.parametrize("backend", list(LLAVA_BACKENDS))
def test_llava_multi_image_calls_the_family_does_not_reproduce_go_to_the_generic_path(monkeypatch, backend):
    """A call's image_mean (the padding reads the instance's) and do_resize off (squares of several sizes): the
    family refuses them, and transformers' own code runs them with the package's resizes."""
    call = multi_image_calls(backend)["two"]
    ours = FusedHFImageProcessor(LLAVA_BACKENDS[backend](**LLAVA_OV_HF))
    expected = LLAVA_BACKENDS[backend](**LLAVA_OV_HF)(call, return_tensors="pt", image_mean=[0.1, 0.2, 0.3])
    no_resize = LLAVA_BACKENDS[backend](**LLAVA_OV_HF)(call, do_resize=False)
    forbid_backend_resize(monkeypatch)
    assert_same(ours(call, return_tensors="pt", image_mean=[0.1, 0.2, 0.3]), expected, "llava multi mean")
    assert any("a call's image_mean" in reason for reason in ours._logged)
    got = ours(call, do_resize=False)
    assert [np.asarray(v).shape for v in got["pixel_values"]] == [
        np.asarray(v).shape for v in no_resize["pixel_values"]
    ]
    for mine, theirs in zip(got["pixel_values"], no_resize["pixel_values"], strict=True):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(theirs), rtol=0, atol=1e-6)
    assert any("without do_resize" in reason for reason in ours._logged)


@pytest.mark.parametrize("uint8", [False, True], ids=["float32", "uint8"])
@pytest.mark.parametrize("backend", list(LLAVA_BACKENDS))
def test_llava_pinpoints_that_are_not_whole_tiles_are_served_by_the_generic_path(monkeypatch, backend, uint8):
    """Pinpoints that are not whole tiles of size (transformers resizes the partial edge tiles; the family's
    layout has no such tile): transformers' own code with the package's resizes, every value equal."""
    config = {**LLAVA_OV_HF, "size": {"height": 96, "width": 96}}
    config["image_grid_pinpoints"] = [[96, 144], [144, 96], [120, 120], [192, 240]]
    kwargs = {"return_tensors": "pt"} | ({"do_rescale": False, "do_normalize": False} if uint8 else {})
    call = [as_input(backend, hwc) for hwc in llava_photos().values()]
    expected = LLAVA_BACKENDS[backend](**config)(call, **kwargs)
    ours = FusedHFImageProcessor(LLAVA_BACKENDS[backend](**config))
    forbid_backend_resize(monkeypatch)
    assert_same(ours(call, **kwargs), expected, f"llava pinpoints not tiles {backend}")
    assert any("is not whole tiles of 96" in reason for reason in ours._logged), ours._logged


@pytest.mark.parametrize("backend", list(LLAVA_BACKENDS))
def test_llava_pinpoints_transformers_refuses_go_to_it(backend):
    """Tuples where transformers' call validation wants lists: handed back, and refused there."""
    image = as_input(backend, llava_photos()["tiny"])
    ours = FusedHFImageProcessor(LLAVA_BACKENDS[backend](**LLAVA_OV_HF))
    with pytest.raises(Exception, match="image_grid_pinpoints") as theirs:
        LLAVA_BACKENDS[backend](**LLAVA_OV_HF)(image, image_grid_pinpoints=[(384, 384)])
    with pytest.raises(type(theirs.value), match="image_grid_pinpoints"):
        ours(image, image_grid_pinpoints=[(384, 384)])
    # Handed back by transformers' own checks, which run first (issue 46), naming the argument.
    assert any("refuse" in reason and "image_grid_pinpoints" in reason for reason in ours._logged), ours._logged


@pytest.mark.parametrize("backend", list(LLAVA_BACKENDS))
def test_llava_a_4d_batch_goes_to_transformers_which_fails_on_it(backend):
    """transformers counts a 4-D batch as one sample of several images and fails on it: so does the adapter,
    by handing it over."""
    batch = torch.zeros(2, 3, 100, 120, dtype=torch.uint8)
    ours = FusedHFImageProcessor(LLAVA_BACKENDS[backend](**LLAVA_OV_HF))
    with pytest.raises(IndexError):
        LLAVA_BACKENDS[backend](**LLAVA_OV_HF)(batch, return_tensors="pt")
    with pytest.raises(IndexError):
        ours(batch, return_tensors="pt")
    assert any("4-D batches" in reason for reason in ours._logged)


@pytest.mark.parametrize("reference", list(LLAVA_BACKENDS))
@pytest.mark.parametrize(
    "type_keys",
    [
        {"image_processor_type": "LlavaOnevisionImageProcessor", "processor_class": "LlavaOnevisionProcessor"},
        {"image_processor_type": "LlavaOnevisionImageProcessorFast"},
        {"image_processor_type": "LlavaOnevisionImageProcessorPil"},
    ],
    ids=["plain", "fast", "pil"],
)
def test_llava_from_preprocessor_config_equals_the_class_built_from_it(type_keys, reference):
    processor = FusedImageProcessor.from_preprocessor_config(
        {**LLAVA_OV_HF, **type_keys}, device="cpu", reference=reference
    )
    hwcs = [llava_photos()[name] for name in ("wide-coffee", "tiny", "tiles-384x768")]
    expected = LLAVA_BACKENDS[reference](**LLAVA_OV_HF)([as_input(reference, p) for p in hwcs], return_tensors="pt")
    got = processor([Image.fromarray(p) for p in hwcs] if reference == "pil" else hwcs)
    assert got["image_sizes"].device.type == "cpu" and got["batch_num_images"].device.type == "cpu"
    assert_same(got, expected, f"llava from config {reference} {type_keys}")


def test_llava_without_do_pad_different_tile_counts_are_refused_by_name():
    config = {**LLAVA_OV_HF, "image_processor_type": "LlavaOnevisionImageProcessor", "do_pad": False}
    processor = FusedImageProcessor.from_preprocessor_config(config, device="cpu")
    hwcs = [photo("coffee"), photo("chelsea")[:20, :20].copy()]
    counts = []  # the base image and the tiles of transformers' best resolution
    for hwc in hwcs:
        h, w = hf_utils.select_best_resolution(hwc.shape[:2], LLAVA_OV_HF["image_grid_pinpoints"])
        counts.append(1 + h // 384 * w // 384)
    message = rf"different numbers of tiles \(images\[0\]: {counts[0]}, images\[1\]: {counts[1]}\)"
    with RecordOps() as recorded, pytest.raises(ValueError, match=message):
        processor(hwcs)
    assert not any("fused_input_norm" in str(op) for op in recorded.ops())  # refused before any kernel ran


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"size": {"height": 384, "width": 256}}, r"a non-square LLaVA-OneVision size is not implemented"),
        ({"image_grid_pinpoints": [[384, 500]]}, r"image_grid_pinpoints\[0\] = \[384, 500\] is not whole tiles of 384"),
        ({"image_grid_pinpoints": [[384]]}, r"image_grid_pinpoints\[0\] must be \[height, width\] ints"),
        ({"image_grid_pinpoints": []}, r"image_grid_pinpoints must be a non-empty list"),
        ({"image_grid_pinpoints": [(384, 384)]}, r"image_grid_pinpoints\[0\] must be \[height, width\] ints"),
        ({"image_grid_pinpoints": [[0, 384]]}, r"image_grid_pinpoints\[0\] must be an int >= 1, got 0"),
        ({"crop_size": {"height": 336, "width": 336}}, r"crop_size / do_center_crop are not implemented"),
        ({"do_center_crop": True}, r"crop_size / do_center_crop are not implemented"),
        ({"do_pad": "yes"}, r"do_pad must be true or false, got 'yes'"),
    ],
    ids=[
        "non-square",
        "partial-tiles",
        "pinpoint-pair",
        "no-pinpoints",
        "pinpoint-tuple",
        "pinpoint-0",
        "crop_size",
        "center-crop",
        "do_pad",
    ],
)
def test_llava_bad_configs_are_refused_by_name(config, message):
    with pytest.raises(ValueError, match="FusedImageProcessor: " + message):
        FusedImageProcessor.from_preprocessor_config({"image_processor_type": "LlavaOnevisionImageProcessor", **config})


# ----- a 1080p photo (InternVL3: 8 tiles + thumbnail; LLaVA-OneVision: the base image + 15 tiles) -----


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("uint8", [False, True], ids=["float32", "uint8"])
@pytest.mark.parametrize(
    ("family", "config", "kwargs"),
    [("internvl3", INTERNVL3_HF, {"crop_to_patches": True}), ("llava-ov", LLAVA_OV_HF, {})],
    ids=["internvl3", "llava-ov"],
)
def test_a_1080p_photo_equals_transformers(monkeypatch, family, config, kwargs, uint8, backend):
    hwc = np.array(Image.fromarray(photo("astronaut")).resize((1920, 1080), Image.Resampling.BICUBIC))
    classes = BACKENDS if family == "internvl3" else LLAVA_BACKENDS
    kwargs = kwargs | ({"do_rescale": False, "do_normalize": False} if uint8 else {})
    image = as_input(backend, hwc)
    expected = classes[backend](**config)(image, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(classes[backend](**config))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(image, return_tensors="pt", **kwargs), expected, f"{family} {backend} 1080p")
