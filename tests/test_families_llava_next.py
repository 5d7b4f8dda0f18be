"""LLaVA-NeXT (LlavaNextImageProcessor: LLaVA-NeXT 1.6, LLaVA-NeXT-Video's images, Granite Vision) against
transformers 5's own processor, both backends: FusedHFImageProcessor(upstream) against upstream itself,
strict (a call handed back to transformers fails), and FusedImageProcessor.from_preprocessor_config against
the class built from the same config. Configs as the checkpoints ship them (LLaVA-v1.6's 336 patches and five
pinpoints, Granite Vision's 384 patches and 27 pinpoints), the class defaults (224 patches cut from 336-based
pinpoints: partial patches at the canvas's edges, resized and cropped again), and odd ones (a crop smaller
than size, a height x width size, no center crop); real photos of several sizes and aspect ratios, a 17 x 29
crop, a 1 x 40 strip, a 12 MP image; per-call kwargs; return_tensors set and unset: every key, container type,
shape and dtype the same, float32 within 1e-6, uint8 (do_rescale = do_normalize = False) byte-equal."""

import importlib.util

import numpy as np
import pytest
import torch
from conftest import RecordOps
from family_checks import GRANITE_VISION, LLAVA_NEXT_V16, as_input, assert_same, forbid_upstream, photo

from fused_input_norm import FusedImageProcessor
from fused_input_norm.hf_adapter import FusedHFImageProcessor

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")

BACKENDS = {"torchvision": transformers.LlavaNextImageProcessor, "pil": transformers.LlavaNextImageProcessorPil}


def photos() -> dict[str, np.ndarray]:
    """Real photos: wide, tall (a wide one turned), square, tiny, a one-pixel-high strip."""
    return {
        "wide-coffee": photo("coffee"),  # 400 x 600
        "tall-rocket": np.ascontiguousarray(photo("rocket").transpose(1, 0, 2)),  # 640 x 427
        "square-astronaut": photo("astronaut"),  # 512 x 512
        "tiny": photo("chelsea")[100:117, 200:229].copy(),  # 17 x 29
        "strip": photo("chelsea")[50:51, 10:50].copy(),  # 1 x 40
    }


def twelve_mp() -> np.ndarray:
    """A 3024 x 4032 photo mosaic (12 MP, a phone camera's): real content, every tile different."""
    tiles = [photo(name)[:300, :300] for name in ("astronaut", "coffee", "chelsea", "rocket")]
    row = np.concatenate([np.concatenate(tiles, axis=1)] * 4, axis=1)[:, :4032]
    grid = np.concatenate([row, row[::-1], row[:, ::-1], row[::-1, ::-1]] * 3, axis=0)[:3024]
    return np.ascontiguousarray(grid)


# (config of the wrapped class, call kwargs)
CASES = {
    "v16": (LLAVA_NEXT_V16, {}),
    "v16-uint8": (LLAVA_NEXT_V16, {"do_rescale": False, "do_normalize": False}),
    "granite-vision": (GRANITE_VISION, {}),
    "class-defaults": ({}, {}),  # 224 patches of 336-based canvases: partial patches, resized and cropped
    "crop-smaller-than-size": ({**LLAVA_NEXT_V16, "size": {"shortest_edge": 400}}, {}),
    "height-width-no-crop": ({**LLAVA_NEXT_V16, "size": {"height": 336, "width": 336}, "do_center_crop": False}, {}),
    "pinpoints-per-call": (LLAVA_NEXT_V16, {"image_grid_pinpoints": [[336, 336], [672, 1008], [1008, 672]]}),
    "per-call": (
        LLAVA_NEXT_V16,
        {
            "size": {"shortest_edge": 300},
            "crop_size": {"height": 280, "width": 280},
            "resample": 2,
            "image_mean": [0.1, 0.2, 0.3],
            "image_std": 0.5,
        },
    ),
}


UNSET_CASES = ("v16", "v16-uint8", "class-defaults")  # also checked with return_tensors unset


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("case", list(CASES))
def test_adapter_on_a_batch_of_mixed_photos_equals_transformers(monkeypatch, case, backend):
    config, kwargs = CASES[case]
    batch = [as_input(backend, hwc) for hwc in photos().values()]
    ours = FusedHFImageProcessor(BACKENDS[backend](**config))
    forbid_upstream(monkeypatch, ours)
    expected = BACKENDS[backend](**config)(batch, return_tensors="pt", **kwargs)
    assert_same(ours(batch, return_tensors="pt", **kwargs), expected, f"llava-next {case} {backend} batch")
    if case not in UNSET_CASES:
        return
    # with return_tensors unset: transformers' lists (one [views, C, h, w] per image, image_sizes as tuples)
    expected = BACKENDS[backend](**config)(batch, **kwargs)
    got = ours(batch, **kwargs)
    assert set(got) == set(expected)
    assert got["image_sizes"] == expected["image_sizes"]
    assert [type(size) for size in got["image_sizes"]] == [type(size) for size in expected["image_sizes"]]
    assert type(got["pixel_values"]) is type(expected["pixel_values"])
    for have, want in zip(got["pixel_values"], expected["pixel_values"], strict=True):
        assert type(have) is type(want), (type(have), type(want))
        have, want = torch.as_tensor(have), torch.as_tensor(want)
        assert have.shape == want.shape and have.dtype == want.dtype, (have.shape, want.shape)
        assert (have.double() - want.double()).abs().max() <= (1e-6 if want.is_floating_point() else 0)


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("config", [LLAVA_NEXT_V16, GRANITE_VISION], ids=["v16", "granite-vision"])
def test_adapter_on_a_12_mp_photo_equals_transformers(monkeypatch, config, backend):
    image = as_input(backend, twelve_mp())
    ours = FusedHFImageProcessor(BACKENDS[backend](**config))
    forbid_upstream(monkeypatch, ours)
    expected = BACKENDS[backend](**config)(image, return_tensors="pt")
    assert_same(ours(image, return_tensors="pt"), expected, f"llava-next 12 MP {backend}")


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_without_do_pad_images_of_one_view_count_are_served(monkeypatch, backend):
    """do_pad off: images giving as many views stack (a wide and a square photo: 2 x 1 patches... each 3 views
    here: 336 x 672 and 672 x 336 canvases), and are served."""
    batch = [as_input(backend, hwc) for hwc in (photo("coffee"), photo("coffee")[::-1, ::-1].copy())]
    ours = FusedHFImageProcessor(BACKENDS[backend](**LLAVA_NEXT_V16))
    forbid_upstream(monkeypatch, ours)
    expected = BACKENDS[backend](**LLAVA_NEXT_V16)(batch, return_tensors="pt", do_pad=False)
    assert_same(ours(batch, return_tensors="pt", do_pad=False), expected, f"llava-next no pad {backend}")


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_nested_lists_of_images_are_served(monkeypatch, backend):
    """vLLM and LlavaNextProcessor may pass a list per prompt: transformers flattens it; so does the adapter."""
    hwcs = list(photos().values())
    nested = [[as_input(backend, hwcs[0]), as_input(backend, hwcs[1])], [as_input(backend, hwcs[3])]]
    ours = FusedHFImageProcessor(BACKENDS[backend](**LLAVA_NEXT_V16))
    forbid_upstream(monkeypatch, ours)
    expected = BACKENDS[backend](**LLAVA_NEXT_V16)(nested, return_tensors="pt")
    assert_same(ours(nested, return_tensors="pt"), expected, f"llava-next nested {backend}")


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_calls_it_does_not_reproduce_go_to_transformers(backend):
    """A crop larger than the resized view (transformers pads it first) and do_pad off with images of
    different view counts (transformers' stack fails on them, return_tensors unset lists them)."""
    batch = [as_input(backend, hwc) for hwc in (photo("coffee"), photo("astronaut"))]
    ours = FusedHFImageProcessor(BACKENDS[backend](**LLAVA_NEXT_V16))
    got = ours(batch, return_tensors="pt", crop_size={"height": 400, "width": 400})
    expected = BACKENDS[backend](**LLAVA_NEXT_V16)(batch, return_tensors="pt", crop_size={"height": 400, "width": 400})
    assert "smaller than crop_size" in " ".join(str(reason) for reason in ours._logged)
    assert_same(got, expected, f"llava-next handed back {backend}")
    got, expected = ours(batch, do_pad=False), BACKENDS[backend](**LLAVA_NEXT_V16)(batch, do_pad=False)
    assert [v.shape for v in got["pixel_values"]] == [v.shape for v in expected["pixel_values"]]


@pytest.mark.parametrize("reference", list(BACKENDS))
@pytest.mark.parametrize(
    ("type_keys", "config"),
    [
        ({"image_processor_type": "LlavaNextImageProcessor", "processor_class": "LlavaNextProcessor"}, LLAVA_NEXT_V16),
        ({"image_processor_type": "LlavaNextImageProcessorFast"}, GRANITE_VISION),
        ({"processor_class": "LlavaNextProcessor"}, {}),
    ],
    ids=["v16", "granite-fast", "processor-class-defaults"],
)
def test_from_preprocessor_config_equals_the_class_built_from_it(type_keys, config, reference):
    from PIL import Image

    if reference == "torchvision" and importlib.util.find_spec("torchvision") is None:
        pytest.skip("without torchvision, transformers' LlavaNextImageProcessor is its Pil backend's class")
    processor = FusedImageProcessor.from_preprocessor_config({**config, **type_keys}, device="cpu", reference=reference)
    hwcs = [photos()[name] for name in ("wide-coffee", "tiny", "tall-rocket")]
    expected = BACKENDS[reference](**config)([as_input(reference, p) for p in hwcs], return_tensors="pt")
    got = processor([Image.fromarray(p) for p in hwcs] if reference == "pil" else hwcs)
    assert_same(got, expected, f"llava-next from config {reference} {type_keys}")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"image_grid_pinpoints": []}, r"image_grid_pinpoints must be a non-empty list"),
        ({"image_grid_pinpoints": [[336, "672"]]}, r"image_grid_pinpoints\[0\] must be \[height, width\] ints"),
        ({"image_grid_pinpoints": [[0, 336]]}, r"image_grid_pinpoints\[0\] must be an int >= 1, got 0"),
        ({"size": {"longest_edge": 336}}, r"size must be \{'shortest_edge'\} or \{'height', 'width'\}"),
        ({"crop_size": {"height": 336}}, r"crop_size must be an int or \{'height', 'width'\}"),
    ],
    ids=["no-pinpoints", "pinpoint-str", "pinpoint-0", "longest-edge", "crop-height-only"],
)
def test_bad_configs_are_refused_by_name(config, message):
    with pytest.raises(ValueError, match="FusedImageProcessor: " + message):
        FusedImageProcessor.from_preprocessor_config({"image_processor_type": "LlavaNextImageProcessor", **config})


def test_a_view_smaller_than_the_crop_is_refused_before_any_kernel_runs():
    processor = FusedImageProcessor.from_preprocessor_config(
        {
            **LLAVA_NEXT_V16,
            "image_processor_type": "LlavaNextImageProcessor",
            "crop_size": {"height": 400, "width": 400},
        },
        device="cpu",
    )
    with (
        RecordOps() as recorded,
        pytest.raises(ValueError, match=r"base view is 336x336, smaller than crop_size 400x400"),
    ):
        processor([photo("coffee")])
    assert not any("fused_input_norm" in str(op) for op in recorded.ops())
