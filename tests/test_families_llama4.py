"""Llama 4 (Llama4ImageProcessor; transformers has only its torchvision backend) against transformers 5's own
processor: the sizes (the canvases of whole tiles, the best canvas, the size the image is resized to inside it)
against transformers' own functions and its _preprocess over many shapes; then FusedHFImageProcessor(upstream)
against upstream itself and FusedImageProcessor.from_preprocessor_config(reference="torchvision") against the
class built from the same config, on real photos (wide, tall, tiny, elongated, 1080p, exactly one and 2 x 3
tiles) one at a time and as one batch: every key, shape and dtype the same; pixel_values, which transformers
rescales and normalizes in bfloat16 step by step, equal to the bit; the resized bytes (do_rescale and
do_normalize off) equal; aspect_ratios equal. Then what it refuses, by name.

The EQUALITY lines printed (pytest -s) are the equality table: case, max abs diff, shape, dtype."""

import itertools
import logging

import numpy as np
import pytest
import torch
from family_checks import as_input, assert_same, forbid_upstream, photo

from fused_input_norm import FusedImageProcessor
from fused_input_norm.families import llama4
from fused_input_norm.hf_adapter import FusedHFImageProcessor

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
hf_llama4 = pytest.importorskip(
    "transformers.models.llama4.image_processing_llama4", reason="transformers' Llama 4 needs torchvision"
)

HF = hf_llama4.Llama4ImageProcessor
# meta-llama/Llama-4-Scout-17B-16E-Instruct's preprocessor_config.json, less its type keys.
LLAMA4_CHECKPOINT = {
    "crop_size": None,
    "data_format": "channels_first",
    "default_to_square": True,
    "do_center_crop": None,
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "max_patches": 16,
    "resample": 2,
    "rescale_factor": 0.00392156862745098,
    "resize_to_max_canvas": False,
    "size": {"height": 336, "width": 336},
}
TYPE_KEYS = {"image_processor_type": "Llama4ImageProcessorFast", "processor_class": "Llama4Processor"}
UINT8 = {"do_rescale": False, "do_normalize": False}


def photos() -> dict[str, np.ndarray]:
    """Real photos in the shapes that take each branch: downscaled onto a canvas (wide, tall, 1080p), upscaled
    (tiny, square), elongated (one row of tiles), exactly one tile (no global tile) and exactly 2 x 3 tiles."""
    coffee, rocket, chelsea, astronaut = (photo(n) for n in ("coffee", "rocket", "chelsea", "astronaut"))
    tile = astronaut[:336, :336]
    return {
        "wide-coffee": coffee,  # 400 x 600
        "tall-rocket": np.ascontiguousarray(rocket.transpose(1, 0, 2)),  # 640 x 427
        "square-astronaut": astronaut,  # 512 x 512
        "tiny": np.ascontiguousarray(chelsea[100:117, 200:229]),  # 17 x 29: upscaled to 336 at most
        "elongated": np.ascontiguousarray(np.concatenate([chelsea, coffee[:300]], axis=1)),  # 300 x 1051
        "column": np.ascontiguousarray(coffee[:, 100:140]),  # 400 x 40
        "1080p": np.array(Image.fromarray(coffee).resize((1920, 1080), Image.Resampling.BICUBIC)),
        "tile-336": tile.copy(),
        "tiles-672x1008": np.pad(tile, ((168, 168), (336, 336), (0, 0)), mode="reflect"),
    }


PHOTOS = photos()


# ----- the sizes, against transformers' own functions -----


@pytest.mark.parametrize("tile", [336, 224, 17])
def test_canvases_are_transformers_supported_resolutions(tile):
    for max_patches in [*range(1, 41), 64, 100]:
        size = transformers.image_utils.SizeDict(height=tile, width=tile)
        assert llama4.canvases(max_patches, tile) == tuple(hf_llama4.find_supported_resolutions(max_patches, size))


class _Stop(Exception):
    pass


def transformers_fitted_size(upstream, height: int, width: int, **kwargs) -> tuple[int, int]:
    """The size transformers' _preprocess resizes an image to (its first resize), read off the call on a
    stride-0 image (no memory), stopped there."""
    seen = []

    def record(images, size, **_):
        seen.append((int(size.height), int(size.width)))
        raise _Stop

    upstream.resize = record
    image = torch.zeros(1, 1, 1, dtype=torch.uint8).expand(3, height, width)
    settings = {**upstream._standardize_kwargs(**{**upstream.to_dict(), **kwargs}), "disable_grouping": True}
    args = {key: settings.get(key) for key in ("size", "resample", "do_rescale", "rescale_factor", "do_normalize")}
    with pytest.raises(_Stop):
        upstream._preprocess(
            [image],
            do_resize=True,
            image_mean=None,
            image_std=None,
            max_patches=settings["max_patches"],
            resize_to_max_canvas=settings["resize_to_max_canvas"],
            disable_grouping=True,
            return_tensors=None,
            **args,
        )
    return seen[0]


def shapes() -> list[tuple[int, int]]:
    sides = [1, 2, 17, 100, 335, 336, 337, 500, 671, 672, 673, 1000, 1008, 1080, 1344, 1920, 3024, 4032, 5376]
    rng = np.random.default_rng(37)
    return list(itertools.product(sides, sides)) + [tuple(int(v) for v in rng.integers(1, 6000, 2)) for _ in range(120)]


@pytest.mark.parametrize("to_max", [False, True], ids=["smallest-upscale", "resize_to_max_canvas"])
@pytest.mark.parametrize(("tile", "max_patches"), [(336, 16), (336, 4), (336, 1), (224, 40)])
def test_canvas_and_fitted_size_are_transformers_over_many_shapes(tile, max_patches, to_max):
    """best_canvas against get_best_fit; the resized size against the size _preprocess resizes to (its upscale
    bound, its float32 and float64 scales); the aspect ratios and tile counts against
    get_number_of_image_patches."""
    upstream = HF(size={"height": tile, "width": tile}, max_patches=max_patches, resize_to_max_canvas=to_max)
    processor = FusedImageProcessor.from_preprocessor_config(
        {"image_processor_type": "Llama4ImageProcessor", "size": tile, "max_patches": max_patches}
        | {"resize_to_max_canvas": to_max},
        device="cpu",
        reference="torchvision",
    )
    s = processor.settings
    resolutions = torch.tensor(hf_llama4.find_supported_resolutions(max_patches, upstream.size))
    cases = shapes()
    for height, width in cases:
        canvas, fitted = llama4.layout(height, width, s)
        expected = hf_llama4.get_best_fit((height, width), resolutions, resize_to_max_canvas=to_max)
        assert canvas == tuple(expected.tolist()), (height, width)
        assert fitted == transformers_fitted_size(upstream, height, width), (height, width, canvas)
    plan = llama4.plan(s, cases, "test")
    counts = [upstream.get_number_of_image_patches(h, w) for h, w in cases]
    assert plan.shape[0] == sum(counts)
    assert [r * c + (r * c > 1) for r, c in plan.extras["aspect_ratios"].tolist()] == counts


# ----- FusedHFImageProcessor against the class it wraps -----


@pytest.mark.parametrize(
    ("name", "dtype"), [*((name, "bfloat16") for name in PHOTOS), ("batch", "bfloat16"), ("batch", "uint8")]
)
def test_adapter_on_each_photo_and_a_batch_equals_transformers(monkeypatch, name, dtype):
    """Each photo alone, then all of them (and one twice) in one call; the bytes on the batch."""
    kwargs = UINT8 if dtype == "uint8" else {}
    hwcs = [*PHOTOS.values(), PHOTOS["wide-coffee"]] if name == "batch" else [PHOTOS[name]]
    images = [as_input("torchvision", hwc) for hwc in hwcs]
    expected = HF(**LLAMA4_CHECKPOINT)(images, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(HF(**LLAMA4_CHECKPOINT))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(images, return_tensors="pt", **kwargs), expected, f"{name} {dtype}")


# (config of the wrapped class, call kwargs): per-call tile limits, the largest canvas, another tile size,
# bicubic, the class defaults.
CASES = {
    "max_patches-4": (LLAMA4_CHECKPOINT, {"max_patches": 4}),
    "max_patches-1": (LLAMA4_CHECKPOINT, {"max_patches": 1}),
    "resize_to_max_canvas": (LLAMA4_CHECKPOINT, {"resize_to_max_canvas": True, "max_patches": 6}),
    "resize_to_max_canvas-uint8": (LLAMA4_CHECKPOINT, {"resize_to_max_canvas": True, **UINT8}),
    "size-224-per-call": (LLAMA4_CHECKPOINT, {"size": {"height": 224, "width": 224}, "max_patches": 9}),
    "bicubic-uint8": (LLAMA4_CHECKPOINT, {"resample": 3, **UINT8}),
    "config-max_patches-6-clip-mean": (
        {**LLAMA4_CHECKPOINT, "max_patches": 6, "image_mean": [0.48145466, 0.4578275, 0.40821073]},
        {"image_std": [0.26862954, 0.26130258, 0.27577711]},
    ),
    # stds that are powers of two (one subtraction after the kernel) but differ per channel, as do the means
    "pow2-stds-per-channel": (LLAMA4_CHECKPOINT, {"image_mean": [0.4, 0.5, 0.6], "image_std": [0.25, 0.5, 1.0]}),
    "defaults": ({}, {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_adapter_with_other_settings_equals_transformers(monkeypatch, case):
    """A batch of a downscaled, an upscaled and an exactly tiled photo."""
    config, kwargs = CASES[case]
    images = [as_input("torchvision", PHOTOS[name]) for name in ("wide-coffee", "tiny", "tiles-672x1008")]
    expected = HF(**config)(images, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(HF(**config))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(images, return_tensors="pt", **kwargs), expected, f"{case} batch")


def test_calls_it_does_not_reproduce_go_to_transformers(caplog):
    """Rescale without normalize (transformers returns float32 then: x * factor), normalize without rescale
    (transformers fails on the bytes) and do_resize off (transformers refuses it): handed to transformers,
    each logged once; the first gives transformers' answer."""
    image = [as_input("torchvision", PHOTOS["wide-coffee"])]
    ours = FusedHFImageProcessor(HF(**LLAMA4_CHECKPOINT))
    with caplog.at_level(logging.INFO):
        got = ours(image, return_tensors="pt", do_normalize=False)
        assert torch.equal(
            got["pixel_values"], HF(**LLAMA4_CHECKPOINT)(image, return_tensors="pt", do_normalize=False)["pixel_values"]
        )
        with pytest.raises(TypeError):
            ours(image, return_tensors="pt", do_rescale=False)
        with pytest.raises(ValueError, match="do_resize=False"):
            ours(image, return_tensors="pt", do_resize=False)
    said = [r.getMessage() for r in caplog.records if "serves this call" in r.getMessage()]
    assert len(said) == 3, said
    assert "do_rescale and do_normalize differ" in said[0] and "do_resize=False is refused" in said[2], said


# ----- FusedImageProcessor from a config dict -----


@pytest.mark.parametrize(
    "type_keys",
    [TYPE_KEYS, {"image_processor_type": "Llama4ImageProcessor"}, {"processor_class": "Llama4Processor"}],
    ids=["fast", "plain", "processor-class"],
)
def test_every_spelling_of_the_type_is_the_family(type_keys):
    processor = FusedImageProcessor.from_preprocessor_config(
        {**LLAMA4_CHECKPOINT, **type_keys}, device="cpu", reference="torchvision"
    )
    upstream = HF(**LLAMA4_CHECKPOINT)
    assert processor.settings.kind == "llama4" and processor.transformers_dtype == torch.bfloat16
    assert processor.settings.size == dict(upstream.size) and processor.settings.resample == "bilinear"
    assert tuple(map(tuple, processor.settings.options["canvases"].tolist())) == tuple(
        hf_llama4.find_supported_resolutions(upstream.max_patches, upstream.size)
    )


@pytest.mark.parametrize("visual_dtype", [torch.float32, torch.bfloat16, torch.uint8], ids=str)
def test_from_preprocessor_config_equals_the_class_built_from_it(visual_dtype):
    """PIL images, arrays and encoded PNG bytes in; float32 out holds transformers' bfloat16 values exactly."""
    import io

    processor = FusedImageProcessor.from_preprocessor_config(
        {**LLAMA4_CHECKPOINT, **TYPE_KEYS}, device="cpu", reference="torchvision"
    )
    hwcs = [PHOTOS[name] for name in ("wide-coffee", "tiny", "tiles-672x1008", "column")]
    encoded = io.BytesIO()
    Image.fromarray(hwcs[3]).save(encoded, format="PNG")
    kwargs = UINT8 if visual_dtype == torch.uint8 else {}
    expected = HF(**LLAMA4_CHECKPOINT)([as_input("torchvision", p) for p in hwcs], return_tensors="pt", **kwargs)
    if visual_dtype == torch.float32:
        expected["pixel_values"] = expected["pixel_values"].float()
    got = processor([Image.fromarray(hwcs[0]), hwcs[1], hwcs[2], encoded.getvalue()], visual_dtype)
    assert got["aspect_ratios"].device.type == "cpu"
    assert_same(got, expected, f"from config {visual_dtype}")


def test_reference_pil_is_refused_by_name():
    with pytest.raises(ValueError, match="reference 'pil': transformers has only a torchvision backend for the llama4"):
        FusedImageProcessor.from_preprocessor_config({**LLAMA4_CHECKPOINT, **TYPE_KEYS}, device="cpu")
    with pytest.raises(ValueError, match="reference 'pil-13'"):
        FusedImageProcessor.from_preprocessor_config({**LLAMA4_CHECKPOINT, **TYPE_KEYS}, reference="pil-13")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"do_resize": False}, r"do_resize=False is refused"),
        ({"do_rescale": False}, r"do_normalize without do_rescale is refused"),
        ({"size": {"height": 336, "width": 224}}, r"size must be square \(its tiles are\), got 336x224"),
        ({"size": {"shortest_edge": 336}}, r"size must be an int or \{'height', 'width'\}"),
        ({"max_patches": 0}, r"max_patches must be an int >= 1, got 0"),
        ({"max_patches": 2.5}, r"max_patches must be an int >= 1, got 2.5"),
        ({"max_patches": 60000}, r"max_patches 60000 x size 336 must be below 16777216"),
        ({"resize_to_max_canvas": "yes"}, r"resize_to_max_canvas must be true or false, got 'yes'"),
        ({"resample": 4}, r"resample 4 \(box\) is not implemented"),
        ({"do_pad": True}, r"do_pad is not implemented for llama4"),
    ],
    ids=[
        *("unresized", "normalize-bytes", "not-square", "shortest-edge", "max-0", "max-float", "max-huge"),
        *("to-max", "box", "do_pad"),
    ],
)
def test_bad_configs_are_refused_by_name(config, message):
    with pytest.raises(ValueError, match="FusedImageProcessor: .*" + message):
        FusedImageProcessor.from_preprocessor_config(
            {**LLAMA4_CHECKPOINT, **TYPE_KEYS, **config}, device="cpu", reference="torchvision"
        )
