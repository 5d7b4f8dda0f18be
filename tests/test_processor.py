"""FusedImageProcessor against transformers 5's own processors, built from the same config: Qwen2-VL, Qwen2.5-VL
and Qwen3-VL checkpoints' configs, CLIP, SigLIP; reference="pil" against the *Pil classes (fed PIL images),
reference="torchvision" against the default classes (fed CPU tensors). On real photos, one at a time, as a
batch of mixed sizes, from PNG bytes and from JPEG bytes; RGB conversion per input type; the config's
defaults against the classes'; and every kind of bad input.
"""

import contextlib
import gc
import io
import json

import numpy as np
import pytest
import torch
from conftest import DEVICES, QWEN2_VL_CHECKPOINT, RecordOps, requires_cuda

from fused_input_norm import FusedImageProcessor, output_pool
from fused_input_norm import config as configs
from fused_input_norm import images as intake

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
torchvision = pytest.importorskip(
    "torchvision", reason="the processor decodes with torchvision, and transformers' default backend is it"
)
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
from torchvision.io import ImageReadMode, decode_image  # noqa: E402

PHOTOS = ["astronaut", "coffee", "chelsea", "rocket"]
FP32_ATOL = 1e-6  # fp32 rounding: the processor's (x * r - m) / s against the kernel's one FMA
# Configs as the checkpoints ship them (preprocessor_config.json), plus the bare class defaults.
CONFIGS = {
    "qwen2-vl": {
        **QWEN2_VL_CHECKPOINT,
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2VLProcessor",
    },
    "qwen3-vl": {
        "size": {"longest_edge": 16777216, "shortest_edge": 65536},
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "processor_class": "Qwen3VLProcessor",
        "image_processor_type": "Qwen2VLImageProcessorFast",
    },
    "qwen2-vl-defaults": {"image_processor_type": "Qwen2VLImageProcessor"},
    "clip": {
        "crop_size": 224,
        "do_center_crop": True,
        "do_normalize": True,
        "do_resize": True,
        "feature_extractor_type": "CLIPFeatureExtractor",
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "resample": 3,
        "size": 224,
    },
    "siglip-384": {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_processor_type": "SiglipImageProcessor",
        "image_std": [0.5, 0.5, 0.5],
        "processor_class": "SiglipProcessor",
        "resample": 3,
        "rescale_factor": 0.00392156862745098,
        "size": {"height": 384, "width": 384},
    },
    "siglip-bilinear": {"image_processor_type": "SiglipImageProcessorPil", "resample": 2},
}
# openai/clip-vit-*'s config as shipped names only its feature extractor (AutoImageProcessor maps it).
CONFIGS["siglip-crop"] = {"image_processor_type": "SiglipImageProcessor", "size": 256, "do_center_crop": True}
CONFIGS["siglip-crop"] |= {"crop_size": [224, 200]}
CONFIGS["clip-unnormalized"] = {"image_processor_type": "CLIPImageProcessor", "do_normalize": False, "size": [256, 300]}
# Qwen2.5-VL's checkpoints ship Qwen2-VL's config under their own processor class.
CONFIGS["qwen2.5-vl"] = {**CONFIGS["qwen2-vl"], "processor_class": "Qwen2_5_VLProcessor"}
# The transformers classes each config is for, written here, not taken from the code under test (which
# reads the config's type itself): a config routed to the wrong kind must fail the parity tests.
QWEN2_VL = (transformers.Qwen2VLImageProcessorPil, transformers.Qwen2VLImageProcessor)
CLIP = (transformers.CLIPImageProcessorPil, transformers.CLIPImageProcessor)
SIGLIP = (transformers.SiglipImageProcessorPil, transformers.SiglipImageProcessor)
CLASSES = {
    "qwen2-vl": QWEN2_VL,
    "qwen3-vl": QWEN2_VL,
    "qwen2-vl-defaults": QWEN2_VL,
    "clip": CLIP,
    "siglip-384": SIGLIP,
    "siglip-bilinear": SIGLIP,
    "siglip-crop": SIGLIP,
    "clip-unnormalized": CLIP,
    "qwen2.5-vl": QWEN2_VL,
}
REFERENCES = ["pil", "torchvision"]


def photo(name: str) -> np.ndarray:
    return np.ascontiguousarray(getattr(skimage_data, name)())


def resolve_config(config: dict) -> configs.ProcessorSettings:
    return configs.resolve(config, "FusedImageProcessor")


def hf_processor(config: dict, reference: str, classes: tuple | None = None):
    """transformers' own processor from the same config: the Pil class for "pil", the default for "torchvision";
    the classes are CLASSES' for one of CONFIGS, else given."""
    if classes is None:
        classes = CLASSES[next(name for name, c in CONFIGS.items() if c == config)]
    pil_class, tv_class = classes
    keys = {k: v for k, v in config.items() if k not in ("image_processor_type", "processor_class")}
    return (pil_class if reference == "pil" else tv_class).from_dict(keys)


def hf_input(reference: str, hwc: np.ndarray):
    """Each backend's native input: a PIL image for the Pil classes, a CPU uint8 [C, H, W] tensor otherwise."""
    if reference == "pil":
        return Image.fromarray(hwc)
    return torch.from_numpy(hwc).permute(2, 0, 1).contiguous()


def encode(hwc: np.ndarray, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(hwc).save(buffer, fmt, **options)
    return buffer.getvalue()


def assert_matches(got: dict, expected, record_property, label: str) -> None:
    assert set(got) == set(expected.keys()), (set(got), set(expected.keys()))
    if "image_grid_thw" in expected:
        assert got["image_grid_thw"].dtype == torch.int64 and got["image_grid_thw"].device.type == "cpu"
        assert torch.equal(got["image_grid_thw"], expected["image_grid_thw"])
    want, have = expected["pixel_values"], got["pixel_values"].cpu()
    assert have.dtype == torch.float32 and have.shape == want.shape, (have.shape, want.shape)
    diff = (have - want).abs().max().item()
    record_property("max_abs_diff", diff)
    print(f"{label} {tuple(want.shape)}: max |diff| {diff:.3g}")
    assert diff <= FP32_ATOL, f"{label}: max |diff| {diff}"


# ----- parity with transformers, per config and reference -----


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("config", list(CONFIGS))
def test_batch_of_mixed_sizes_matches_transformers(config, reference, record_property):
    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS[config], device="cpu", reference=reference)
    photos = [photo(n) for n in PHOTOS]
    assert len({p.shape for p in photos}) == len(photos)
    expected = hf_processor(CONFIGS[config], reference)([hf_input(reference, p) for p in photos], return_tensors="pt")
    got = processor([Image.fromarray(p) for p in photos] if reference == "pil" else photos)
    assert_matches(got, expected, record_property, f"{config} {reference} batch")


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("config", ["qwen2-vl", "qwen3-vl", "clip", "siglip-384"])
@pytest.mark.parametrize("name", PHOTOS)
def test_one_photo_matches_transformers(name, config, reference, record_property):
    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS[config], device="cpu", reference=reference)
    hwc = photo(name)
    expected = hf_processor(CONFIGS[config], reference)(hf_input(reference, hwc), return_tensors="pt")
    # A tensor [C, H, W] here: every input form takes the same path (test_input_forms_agree).
    got = processor(torch.from_numpy(hwc).permute(2, 0, 1))
    assert_matches(got, expected, record_property, f"{config} {reference} {name}")


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("config", ["qwen2-vl", "clip"])
def test_png_bytes_match_transformers(config, reference, record_property):
    """PNG is lossless: the bytes decode to the photo's own pixels, so the processor's result on the photo."""
    photos = [photo(n) for n in PHOTOS]
    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS[config], device="cpu", reference=reference)
    got = processor([encode(p, "PNG") for p in photos])
    expected = hf_processor(CONFIGS[config], reference)([hf_input(reference, p) for p in photos], return_tensors="pt")
    assert_matches(got, expected, record_property, f"{config} {reference} PNG bytes")


@pytest.mark.parametrize("reference", REFERENCES)
def test_jpeg_bytes_match_transformers_given_the_same_decode(reference, record_property):
    """JPEG bytes mean Pillow's decode (test_bytes.py). The processor decodes 8-bit RGB/L JPEGs with torchvision
    because its libjpeg-turbo gives Pillow's pixels: asserted here on the photos, with the result against
    transformers fed either decoder's pixels."""
    config = CONFIGS["qwen2-vl"]
    photos = [photo(n) for n in PHOTOS]
    jpegs = [encode(p, "JPEG", quality=90) for p in photos]
    processor = FusedImageProcessor.from_preprocessor_config(config, device="cpu", reference=reference)
    got = processor(jpegs)
    # torchvision 0.29 deprecates its decoders (the processor hides it); 0.26, the lent GPU machine's, does not
    deprecated = tuple(int(v) for v in torchvision.__version__.split("+")[0].split(".")[:2]) >= (0, 29)
    with pytest.warns(DeprecationWarning) if deprecated else contextlib.nullcontext():
        torchvision_decoded = [
            decode_image(torch.frombuffer(bytearray(j), dtype=torch.uint8), ImageReadMode.RGB).permute(1, 2, 0).numpy()
            for j in jpegs
        ]
    hf = hf_processor(config, reference)
    feed = [hf_input(reference, hwc) for hwc in torchvision_decoded]
    assert_matches(got, hf(feed, return_tensors="pt"), record_property, f"JPEG {reference} (torchvision's decode)")
    # The decoders: Pillow's decode of the same bytes, pixel by pixel, and what it makes of pixel_values.
    pillow_decoded = [np.asarray(Image.open(io.BytesIO(j)).convert("RGB")) for j in jpegs]
    pairs = list(zip(torchvision_decoded, pillow_decoded, strict=True))
    levels = max(np.abs(a.astype(int) - b).max() for a, b in pairs)
    share = sum((a != b).sum() for a, b in pairs) / sum(b.size for b in pillow_decoded)
    via_pillow = hf([hf_input(reference, hwc) for hwc in pillow_decoded], return_tensors="pt")
    effect = (got["pixel_values"] - via_pillow["pixel_values"]).abs().max().item()
    record_property("decoders_max_levels", levels)
    record_property("decoders_share_differing", share)
    record_property("pixel_values_vs_pillow_decode", effect)
    print(
        f"JPEG q90, torchvision vs Pillow decode: max {levels} levels, {share:.2%} of values differ; "
        f"pixel_values vs the processor on Pillow's decode: max |diff| {effect:.3g}"
    )
    assert all(a.shape == b.shape for a, b in pairs)
    assert levels == 0 and share == 0, "torchvision's JPEG decode is no longer Pillow's: bytes would change meaning"
    assert effect <= FP32_ATOL, f"pixel_values vs the processor on Pillow's decode: max |diff| {effect}"


@pytest.mark.parametrize("reference", REFERENCES)
def test_input_forms_agree(reference):
    """A PIL image, HWC and CHW arrays, HWC and CHW tensors, a 4-D batch and PNG bytes of one photo: one result."""
    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS["qwen2-vl"], device="cpu", reference=reference)
    hwc = photo("chelsea")
    chw = np.ascontiguousarray(hwc.transpose(2, 0, 1))
    first = processor(Image.fromarray(hwc))
    for form in (hwc, chw, torch.from_numpy(hwc), torch.from_numpy(chw), encode(hwc, "PNG"), [hwc], hwc[None]):
        other = processor(form)
        assert torch.equal(other["pixel_values"], first["pixel_values"])
        assert torch.equal(other["image_grid_thw"], first["image_grid_thw"])


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("config", ["qwen2-vl", "clip"])
def test_pil_pixels_read_in_place_give_the_copys_result(config, reference):
    """Pillow's memory read in place (RGB as RGBX, 4 bytes a pixel) and through np.asarray (a copy, the path
    of an image Pillow keeps in several blocks: over its block size) give one result, for every path of
    the kernels: horizontal first, vertical first (a tall photo shrunk in height), no resample (a size
    Qwen's smart_resize keeps), RGB, RGBA and L, float32 and uint8."""
    settings = CONFIGS[config] | ({"max_pixels": 100000} if config == "qwen2-vl" else {})
    processor = FusedImageProcessor.from_preprocessor_config(settings, device="cpu", reference=reference)
    hwc = photo("chelsea")
    rgba = np.concatenate([hwc, hwc[:, :, :1]], axis=2)
    tall = np.ascontiguousarray(np.tile(hwc[:, :240], (4, 1, 1)))  # 1200x240: the height shrinks most
    sources = [hwc, hwc[:252, :392], tall, rgba, hwc[:, :, 1]]
    in_place = [Image.fromarray(s) for s in sources]
    assert intake.pil_to_chw(in_place[0]).stride() == (1, 4 * hwc.shape[1], 4), "RGB not read in place"
    block_size = Image.core.get_block_size()
    try:
        Image.core.set_block_size(1 << 16)  # the same images in several blocks each: np.asarray's copy
        copied = [Image.fromarray(s) for s in sources]
    finally:
        Image.core.set_block_size(block_size)
    assert intake.pil_to_chw(copied[0]).stride() == (1, 3 * hwc.shape[1], 3), "not the copy path"
    for visual_dtype in (torch.float32, torch.uint8):
        got = processor(in_place, visual_dtype)["pixel_values"]
        assert torch.equal(got, processor(copied, visual_dtype)["pixel_values"]), visual_dtype


def test_pil_pixels_read_in_place_outlive_the_image():
    image = Image.fromarray(photo("coffee"))
    expected = torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1)
    pixels = intake.pil_to_chw(image)
    del image
    gc.collect()
    _ = [Image.fromarray(photo("rocket")) for _ in range(4)]  # reuse of freed memory would show
    assert torch.equal(pixels, expected)


@pytest.mark.parametrize("visual_dtype", [torch.bfloat16, torch.float16])
def test_visual_dtype_is_the_float32_result_rounded(visual_dtype):
    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS["clip"], device="cpu")
    photos = [photo(n) for n in PHOTOS]
    fp32 = processor(photos)["pixel_values"]
    low = processor(photos, visual_dtype)["pixel_values"]
    assert low.dtype == visual_dtype
    assert torch.equal(low, fp32.to(visual_dtype))


# ----- RGB conversion, as transformers' convert_to_rgb does it for each input type -----


def rgba_photo() -> np.ndarray:
    hwc = photo("coffee")[:200, :300]
    alpha = np.random.default_rng(0).integers(0, 256, hwc.shape[:2], dtype=np.uint8)
    alpha[:20] = 0
    alpha[20:40] = 255
    return np.ascontiguousarray(np.dstack([hwc, alpha]))


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("form", ["pil", "numpy", "tensor"])
def test_rgba_is_composited_as_transformers_does(form, reference, record_property):
    rgba = rgba_photo()
    image = {"pil": Image.fromarray(rgba), "numpy": rgba, "tensor": torch.from_numpy(rgba).permute(2, 0, 1)}[form]
    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS["siglip-384"], device="cpu", reference=reference)
    expected = hf_processor(CONFIGS["siglip-384"], reference)(image, return_tensors="pt")
    assert_matches(processor(image), expected, record_property, f"RGBA {form} {reference}")


def test_pillow_composite_is_pillows():
    """The integer formula against Pillow's alpha_composite itself, on every (color, alpha) pair."""
    color, alpha = np.meshgrid(np.arange(256, dtype=np.uint8), np.arange(256, dtype=np.uint8))
    rgba = np.dstack([color, color[:, ::-1], color // 2, alpha])
    white = Image.new("RGBA", (256, 256), (255, 255, 255, 255))
    expected = np.asarray(Image.alpha_composite(white, Image.fromarray(rgba)).convert("RGB"))
    got = intake.to_rgb(torch.from_numpy(rgba).permute(2, 0, 1), "pil", "pil").permute(1, 2, 0).numpy()
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("reference", REFERENCES)
def test_gray_and_palette_and_gray_alpha_match_transformers(reference, record_property):
    hwc = photo("astronaut")[::2, ::2]
    gray = Image.fromarray(hwc).convert("L")
    palette = Image.fromarray(hwc).convert("P")
    gray_alpha = Image.fromarray(rgba_photo()).convert("LA")
    config = CONFIGS["qwen2-vl"]
    processor = FusedImageProcessor.from_preprocessor_config(config, device="cpu", reference=reference)
    hf = hf_processor(config, reference)
    for label, image in (("L", gray), ("P", palette), ("LA", gray_alpha)):
        assert_matches(processor(image), hf(image, return_tensors="pt"), record_property, f"{label} {reference}")
    # A 2-D array (transformers takes it as [1, H, W]): gray, repeated.
    flat = np.asarray(gray)
    assert_matches(processor(flat), hf(flat[None], return_tensors="pt"), record_property, f"2-D array {reference}")
    # Gray + alpha PNG bytes mean the PIL image Pillow opens from them: composited as that image is.
    png = encode(np.asarray(gray_alpha), "PNG")
    expected = hf(Image.open(io.BytesIO(png)), return_tensors="pt")
    assert_matches(processor(png), expected, record_property, f"LA PNG {reference}")


# ----- the config: what is read, the defaults, what is refused -----


@pytest.mark.parametrize("config", list(CONFIGS))
def test_resolved_config_equals_transformers_processor(config):
    """Every setting the processor acts on, as transformers resolves the same config (its class defaults
    filling what the config leaves out)."""
    settings = resolve_config(CONFIGS[config])
    norm = settings.normalization
    for reference in REFERENCES:
        hf = hf_processor(CONFIGS[config], reference)
        assert settings.do_resize == hf.do_resize and settings.do_convert_rgb == hf.do_convert_rgb
        assert settings.resample == {2: "bilinear", 3: "bicubic"}[int(hf.resample)]
        size = {k: v for k, v in dict(hf.size).items() if v is not None and k not in ("min_pixels", "max_pixels")}
        assert settings.size == size
        assert settings.do_center_crop == bool(getattr(hf, "do_center_crop", False))
        if settings.do_center_crop:
            assert settings.crop_size == (hf.crop_size.height, hf.crop_size.width)
        for key in ("patch_size", "temporal_patch_size", "merge_size"):
            assert getattr(settings, key) == getattr(hf, key, None)
        assert norm.rescale_factor == (hf.rescale_factor if hf.do_rescale else 1.0)
        if hf.do_normalize:
            assert (list(norm.image_mean), list(norm.image_std)) == (list(hf.image_mean), list(hf.image_std))
        else:
            assert (norm.image_mean, norm.image_std) == (0.0, 1.0)


def test_config_from_a_model_directory_and_a_file(tmp_path):
    """transformers 5 nests the image processor's keys in processor_config.json; older checkpoints have a flat
    preprocessor_config.json: both read as the dict itself."""
    nested = tmp_path / "nested"
    nested.mkdir()
    (nested / "processor_config.json").write_text(json.dumps({"image_processor": CONFIGS["qwen3-vl"]}))
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "preprocessor_config.json").write_text(json.dumps(CONFIGS["qwen3-vl"]))
    image = photo("rocket")
    want = FusedImageProcessor.from_preprocessor_config(CONFIGS["qwen3-vl"], device="cpu")(image)
    for source in (nested, flat, flat / "preprocessor_config.json", str(flat)):
        processor = FusedImageProcessor.from_preprocessor_config(source, device="cpu")
        assert processor.settings.patch_size == 16
        got = processor(image)
        assert torch.equal(got["pixel_values"], want["pixel_values"])
        assert torch.equal(got["image_grid_thw"], want["image_grid_thw"])


@pytest.mark.parametrize(
    "spelling",
    ["Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast", "Qwen2VLImageProcessorPil", None],
)
def test_type_spellings(spelling):
    config = {"processor_class": "Qwen2_5_VLProcessor"}
    if spelling:
        config["image_processor_type"] = spelling
    assert resolve_config(config).kind == "qwen2_vl"


def test_min_max_pixels_override_size_as_in_transformers():
    config = {"image_processor_type": "Qwen2VLImageProcessor", "size": {"shortest_edge": 1, "longest_edge": 2}}
    config |= {"min_pixels": 28 * 28 * 4, "max_pixels": 28 * 28 * 64}
    settings = resolve_config(config)
    hf = transformers.Qwen2VLImageProcessor.from_dict({k: v for k, v in config.items() if k != "image_processor_type"})
    assert settings.size == {"shortest_edge": hf.size.shortest_edge, "longest_edge": hf.size.longest_edge}
    assert settings.size == {"shortest_edge": 28 * 28 * 4, "longest_edge": 28 * 28 * 64}


@pytest.mark.parametrize(
    "config,message",
    [
        ({"image_processor_type": "NoSuchImageProcessor"}, "unsupported image processor 'NoSuchImageProcessor'"),
        (
            {"processor_class": "MuseGlimmerProcessor"},
            "supported: Qwen2VLImageProcessor(Fast/Pil), CohereCompassImageProcessor(Fast/Pil), CLIPImageProcessor",
        ),
        ({"image_processor_type": "CLIPImageProcessor", "resample": 4}, "resample 4 (box) is not implemented"),
        (
            {"image_processor_type": "CLIPImageProcessor", "resample": 0},
            "supported: 1 (lanczos), 2 (bilinear), 3 (bicubic)",
        ),
        (
            {"image_processor_type": "SiglipImageProcessor", "size": {"height": 100, "width": 300}},
            None,
        ),
        (
            {"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 1000, "max_pixels": 999},
            "min_pixels (1000) > max_pixels (999)",
        ),
        ({"image_processor_type": "Qwen2VLImageProcessor", "patch_size": 0}, "patch_size must be an int >= 1"),
        ({"image_processor_type": "SiglipImageProcessor", "size": {"longest_edge": 5}}, "size must be"),
        ({"image_processor_type": "CLIPImageProcessor", "do_resize": "yes"}, "do_resize must be true or false"),
    ],
)
def test_bad_configs_are_refused(config, message):
    if message is None:  # a well-formed config, for contrast
        resolve_config(config)
        return
    with pytest.raises(ValueError, match="FusedImageProcessor: ") as error:
        FusedImageProcessor.from_preprocessor_config(config, device="cpu")
    assert message in str(error.value)


def test_unknown_reference_is_refused():
    with pytest.raises(ValueError, match="reference must be one of 'pil'"):
        FusedImageProcessor.from_preprocessor_config(CONFIGS["clip"], reference="opencv")


# ----- bad input: a named error before any kernel runs -----


def good() -> np.ndarray:
    return photo("chelsea")[:100, :120]


@pytest.mark.parametrize(
    "bad,error,message",
    [
        (b"not an image at all", ValueError, "images[1] (19 bytes) is not an image Pillow can decode"),
        (np.zeros((40, 50, 2), np.uint8), ValueError, "images[1] of shape (40, 50, 2) has no channel axis"),
        (np.zeros((5, 40, 50), np.uint8), ValueError, "images[1] of shape (5, 40, 50) has no channel axis"),
        (np.zeros((0, 50, 3), np.uint8), ValueError, "images[1] is empty"),
        (np.zeros((40, 50, 3), np.float32), TypeError, "images[1] must be uint8 pixels, got a NumPy array of float32"),
        (torch.zeros(3, 40, 50), TypeError, "images[1] must be uint8 pixels, got a tensor of torch.float32"),
        ("photo.jpg", TypeError, "images[1] is a str; expected a PIL.Image"),
        (None, TypeError, "images[1] is a NoneType"),
        (np.zeros((2, 3, 4, 5, 6), np.uint8), ValueError, "images[1] must be [H, W], [C, H, W] or [H, W, C]"),
        (np.zeros((2, 500, 3), np.uint8), ValueError, "images[1] of size 2x500 has an aspect ratio over 200"),
        (b"", ValueError, "images[1] is empty bytes; expected an encoded image"),
    ],
    ids=[
        "bytes",
        "2-channels",
        "5-channels",
        "empty",
        "float-array",
        "float-tensor",
        "str",
        "none",
        "5-d",
        "ratio",
        "empty-bytes",
    ],
)
def test_bad_image_is_named_before_any_kernel(bad, error, message):
    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS["qwen2-vl"], device="cpu")
    with RecordOps() as recorded, pytest.raises(error) as raised:
        processor([good(), bad, good()])
    assert message in str(raised.value), str(raised.value)
    assert not any("fused_input_norm" in str(op) for op in recorded.ops())


def encode16(gray: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(gray).save(buffer, "PNG")  # mode I;16
    return buffer.getvalue()


def test_empty_list_and_unstackable_sizes_are_refused():
    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS["qwen2-vl"], device="cpu")
    for empty in ([], [[]], np.zeros((0, 56, 56, 3), np.uint8)):
        with pytest.raises(ValueError, match="images holds no image"):
            processor(empty)
    # CLIP without a crop: shortest edge 224 gives each aspect ratio its own size.
    no_crop = FusedImageProcessor.from_preprocessor_config(
        {"image_processor_type": "CLIPImageProcessor", "do_center_crop": False}, device="cpu"
    )
    with pytest.raises(ValueError, match=r"different sizes \(images\[0\]: 224x335, images\[1\]: 224x224\)"):
        no_crop([photo("rocket"), photo("astronaut")])
    assert no_crop(photo("rocket"))["pixel_values"].shape == (1, 3, 224, 335)


def test_without_resize_sizes_must_patchify_or_crop():
    qwen = FusedImageProcessor.from_preprocessor_config(
        {"image_processor_type": "Qwen2VLImageProcessor", "do_resize": False}, device="cpu"
    )
    with pytest.raises(ValueError, match=r"images\[1\] is 100x120; without do_resize, H and W must be multiples of"):
        qwen([np.zeros((56, 56, 3), np.uint8), good()])
    assert qwen(np.zeros((56, 112, 3), np.uint8))["image_grid_thw"].tolist() == [[1, 4, 8]]
    # CLIP without do_resize: an image smaller than crop_size is padded with zeros before the crop, as
    # transformers' Pil backend pads it (the reference FusedImageProcessor defaults to)
    clip = FusedImageProcessor.from_preprocessor_config(
        {"image_processor_type": "CLIPImageProcessor", "do_resize": False}, device="cpu"
    )
    transformers_clip = pytest.importorskip("transformers.models.clip")
    expected = transformers_clip.CLIPImageProcessorPil(do_resize=False)(good(), return_tensors="pt")["pixel_values"]
    got = clip(good())["pixel_values"]
    assert got.shape == expected.shape == (1, 3, 224, 224)
    assert float((got - expected).abs().max()) <= 1e-6


def test_one_output_and_a_call_count_that_does_not_grow_with_pixels(monkeypatch):
    monkeypatch.setattr(output_pool, "pool", output_pool.OutputPool(0))  # every output a torch.empty, counted below
    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS["clip"], device="cpu")

    def ops_for(images):
        processor(images)  # plans each size pair once (test_resize checks the cache)
        with RecordOps() as recorded:
            processor(images)
        return recorded.ops()

    small = ops_for([photo("chelsea")[:200, :300], photo("coffee")[:250, :200]])
    large = ops_for([photo("astronaut"), photo("rocket")])
    assert [str(op) for op in small] == [str(op) for op in large]
    names = [str(op) for op in large]
    assert names.count("fused_input_norm.resize_affine_out.default") == 2
    assert sum(name.startswith("aten.empty") for name in names) == 1, names


# ----- the device -----


@pytest.mark.parametrize("device", DEVICES)
def test_device_and_default_device(device):
    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS["siglip-384"], device=device)
    assert processor.device == torch.device(device) or processor.device.type == device
    out = processor([photo("coffee"), encode(photo("chelsea"), "JPEG")])["pixel_values"]
    assert out.device.type == device and out.shape == (2, 3, 384, 384)
    default = FusedImageProcessor.from_preprocessor_config(CONFIGS["clip"])
    assert default.device.type == ("cuda" if torch.cuda.is_available() else "cpu")


@requires_cuda
@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("config", ["qwen2-vl", "clip"])
def test_cuda_equals_cpu_bit_for_bit(config, reference, record_property):
    """The same integer resize and one FMA per value, and by default the same decoder (bytes mean what
    PIL.Image.open gives): CUDA's pixel_values equal the CPU's bit for bit, from arrays, PNG bytes and JPEG
    bytes (one with an EXIF rotation). decoder="nvjpeg" decodes JPEGs with nvJPEG instead: its pixels are
    measured against the CPU decoder's (record_property), given the same decoded pixels the two devices agree bit
    for bit (either way round), and from the bytes the two differ no more than that measured difference allows."""
    photos = [photo(n) for n in PHOTOS]
    cpu = FusedImageProcessor.from_preprocessor_config(CONFIGS[config], device="cpu", reference=reference)
    cuda = FusedImageProcessor.from_preprocessor_config(CONFIGS[config], device="cuda", reference=reference)
    jpegs = [encode(p, "JPEG", quality=90) for p in photos] + [with_orientation(photos[3], "JPEG", 6, quality=90)]
    for images in (photos, [encode(p, "PNG") for p in photos], jpegs):
        a, b = cpu(images), cuda(images)
        assert b["pixel_values"].device.type == "cuda"
        assert torch.equal(a["pixel_values"], b["pixel_values"].cpu())
        if "image_grid_thw" in a:
            assert torch.equal(a["image_grid_thw"], b["image_grid_thw"])
    # The opt-in GPU decoder: what it changes, measured against torchvision's CPU decoder (libjpeg-turbo, what the
    # default path decodes with, read here from torchvision itself, not from the code under test).
    from torchvision.io import decode_jpeg

    encoded = [torch.frombuffer(bytearray(j), dtype=torch.uint8) for j in jpegs[:4]]
    on_gpu = [g.cpu() for g in decode_jpeg(encoded, device="cuda")]
    on_cpu = [decode_jpeg(e) for e in encoded]
    assert all(torch.equal(intake.decode(j, "jpeg", "test")[0], c) for j, c in zip(jpegs[:4], on_cpu, strict=True))
    assert [g.shape for g in on_gpu] == [c.shape for c in on_cpu]
    differing = sum((g != c).sum().item() for g, c in zip(on_gpu, on_cpu, strict=True))
    max_levels = max((g.int() - c.int()).abs().max().item() for g, c in zip(on_gpu, on_cpu, strict=True))
    record_property("nvjpeg_differing_values", differing)
    record_property("nvjpeg_max_levels", max_levels)
    nvjpeg = FusedImageProcessor.from_preprocessor_config(
        CONFIGS[config], device="cuda", reference=reference, decoder="nvjpeg"
    )
    from_nvjpeg = nvjpeg(jpegs[:4])["pixel_values"]
    # Given the SAME decoded pixels, the devices agree bit for bit, either way round.
    assert torch.equal(from_nvjpeg, cuda(on_gpu)["pixel_values"])
    assert torch.equal(cpu(on_gpu)["pixel_values"], from_nvjpeg.cpu())
    assert torch.equal(cuda(on_cpu)["pixel_values"].cpu(), cpu(jpegs[:4])["pixel_values"])
    # Bytes to pixel_values, nvJPEG against the CPU decoder: no further apart than the measured decode difference
    # allows. Per resize pass a bicubic weight row sums to at most 1.25 in absolute value, and the pass rounds
    # to uint8 (one more level); then one level is rescale / std.
    levels = (max_levels * 1.25 + 1) * 1.25 + 1
    settings = resolve_config(CONFIGS[config]).normalization
    bound = levels * settings.rescale_factor / min(np.atleast_1d(settings.image_std)) + FP32_ATOL
    apart = (from_nvjpeg.cpu() - cpu(jpegs[:4])["pixel_values"]).abs().max().item()
    record_property("nvjpeg_pixel_values_max_diff", apart)
    assert apart <= bound, (apart, bound, max_levels)


def test_read_only_array_is_taken_without_a_warning(recwarn):
    """np.asarray(PIL image) is read-only: it is read, never written, so torch's not-writable warning is noise."""
    array = np.asarray(Image.fromarray(good()))
    assert not array.flags.writeable
    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS["clip"], device="cpu")
    processor(array)
    assert not [w for w in recwarn if "not writable" in str(w.message)]


def test_without_torchvision_pillow_decodes_the_same_pixels(monkeypatch):
    """PyPI's CPU-only torch has no torchvision beside it: there Pillow decodes the bytes, to the same pixels
    (PNG is lossless; JPEG through the same libjpeg-turbo here) and the same errors."""
    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS["qwen2-vl"], device="cpu")
    rgba = Image.fromarray(rgba_photo())
    images = [
        encode(photo("coffee"), "PNG"),
        encode(photo("rocket"), "JPEG", quality=90),
        encode(np.asarray(rgba.convert("LA")), "PNG"),
        encode(np.asarray(rgba.convert("L")), "PNG"),
        encode(rgba_photo(), "WEBP", lossless=True),
    ]
    with_torchvision = processor(images)
    monkeypatch.setattr(intake, "has_torchvision", lambda: False)
    with_pillow = processor(images)
    assert torch.equal(with_pillow["pixel_values"], with_torchvision["pixel_values"])
    assert torch.equal(with_pillow["image_grid_thw"], with_torchvision["image_grid_thw"])
    with pytest.raises(ValueError, match=r"images\[1\] \(5 bytes\) is not an image Pillow can decode"):
        processor([images[0], b"\x00\x01abc"])
    # A 16-bit PNG is what Pillow opens (I;16, clipped to 8 bits by its conversion), with either installed.
    sixteen = [encode16(np.full((40, 50), 40000, np.uint16))]
    monkeypatch.setattr(intake, "has_torchvision", lambda: True)
    assert torch.equal(
        processor(sixteen)["pixel_values"], processor([Image.open(io.BytesIO(sixteen[0]))])["pixel_values"]
    )


@pytest.mark.parametrize("reference", REFERENCES)
def test_nested_lists_flatten_as_in_transformers(reference, record_property):
    """make_flat_list_of_images: a list of lists, or of 4-D batches, is one flat list of images."""
    a, b, c = (photo(n)[:300, :400] for n in ("astronaut", "coffee", "chelsea"))
    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS["qwen2-vl"], device="cpu", reference=reference)
    expected = hf_processor(CONFIGS["qwen2-vl"], reference)([[a, b], [c]], return_tensors="pt")
    assert expected["image_grid_thw"].shape[0] == 3
    assert_matches(processor([[a, b], [c]]), expected, record_property, f"nested {reference}")
    assert torch.equal(processor([np.stack([a, b]), c])["pixel_values"], processor([a, b, c])["pixel_values"])


def test_pil_transparency_without_convert_rgb_is_taken_as_stored(record_property):
    """do_convert_rgb off: transformers takes np.array(image) as it is, an RGB image with a transparency key
    stays 3 channels."""
    config = {**CONFIGS["siglip-384"], "do_convert_rgb": False}
    image = Image.fromarray(photo("coffee"))
    image.info["transparency"] = (0, 0, 0)
    processor = FusedImageProcessor.from_preprocessor_config(config, device="cpu")
    expected = hf_processor(config, "pil", SIGLIP)(image, return_tensors="pt")
    assert_matches(processor(image), expected, record_property, "RGB + transparency key, convert off")


def test_rgba_without_convert_rgb_is_refused_for_pillow_and_served_for_torchvision():
    """Pillow resizes RGBA premultiplied by alpha (transformers' PIL backend too); torchvision per channel."""
    config = {**CONFIGS["siglip-384"], "do_convert_rgb": False, "image_mean": [0.5] * 4, "image_std": [0.5] * 4}
    rgba = np.random.default_rng(7).integers(0, 256, (60, 80, 4), dtype=np.uint8)
    pil = FusedImageProcessor.from_preprocessor_config(config, device="cpu", reference="pil")
    with pytest.raises(ValueError, match="premultiplied by their alpha"):
        pil(rgba)
    ours = FusedImageProcessor.from_preprocessor_config(config, device="cpu", reference="torchvision")(rgba)
    expected = hf_processor(config, "torchvision", SIGLIP)(rgba, return_tensors="pt")
    assert float((ours["pixel_values"] - expected["pixel_values"]).abs().max()) <= 1e-6


def test_unimplemented_keys_are_refused():
    with pytest.raises(ValueError, match="do_pad is not implemented"):
        FusedImageProcessor.from_preprocessor_config({**CONFIGS["siglip-384"], "do_pad": True})
    with pytest.raises(ValueError, match="a Qwen-VL size needs shortest_edge and longest_edge, got 224"):
        FusedImageProcessor.from_preprocessor_config({"image_processor_type": "Qwen2VLImageProcessor", "size": 224})


def with_orientation(hwc: np.ndarray, fmt: str, orientation: int, **options) -> bytes:
    image = Image.fromarray(hwc)
    exif = image.getexif()
    exif[0x0112] = orientation
    buffer = io.BytesIO()
    image.save(buffer, fmt, exif=exif.tobytes(), **options)
    return buffer.getvalue()


@pytest.mark.parametrize("fmt,options", [("JPEG", {"quality": 95}), ("PNG", {}), ("WEBP", {"lossless": True})])
def test_bytes_are_decoded_upright_as_load_image_does(fmt, options, monkeypatch):
    """Every EXIF orientation, as transformers' load_image (PIL.ImageOps.exif_transpose) turns the image, with
    torchvision's decoder (which orients JPEG and PNG but not WebP) and with Pillow's."""
    from PIL import ImageOps

    processor = FusedImageProcessor.from_preprocessor_config(CONFIGS["qwen2-vl"], device="cpu")
    hwc = photo("rocket")[:120, :200]
    datas = [with_orientation(hwc, fmt, o, **options) for o in range(1, 9)]
    upright = [np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(d))).convert("RGB")) for d in datas]
    assert len({u.shape for u in upright}) == 2  # the tag does turn some
    expected = processor(upright)
    for decoder in ("torchvision", "pillow"):
        if decoder == "pillow":
            monkeypatch.setattr(intake, "has_torchvision", lambda: False)
        got = processor(datas)
        assert torch.equal(got["image_grid_thw"], expected["image_grid_thw"]), decoder
        assert torch.equal(got["pixel_values"], expected["pixel_values"]), decoder


@pytest.mark.parametrize("orientation", range(1, 9))
def test_orientation_views_are_pillows_transposes(orientation):
    """The device-side orientation (applied after nvJPEG, which ignores the tag) against Pillow's own transposes."""
    from PIL import ImageOps

    hwc = np.random.default_rng(orientation).integers(0, 256, (7, 11, 3), dtype=np.uint8)
    image = Image.fromarray(hwc)
    image.getexif()[0x0112] = orientation
    expected = np.asarray(ImageOps.exif_transpose(image))
    got = intake.orient(torch.from_numpy(hwc).permute(2, 0, 1), orientation).permute(1, 2, 0).numpy()
    assert np.array_equal(got, expected)
