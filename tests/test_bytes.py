"""Encoded bytes mean what PIL.Image.open gives: `ImageOps.exif_transpose(Image.open(io.BytesIO(b)))` handed to
the processor. On a corpus the test encodes from a real photo, every format x mode a user sends: the result
from the bytes equals the result from that PIL image bit for bit (with and without torchvision), and
transformers' processors given that PIL image within fp32 rounding, both references. Then random, empty,
truncated and corrupted bytes: a named error before any kernel, exactly where Pillow fails, never a crash.
"""

import io

import numpy as np
import pytest
import torch
from conftest import RecordOps, requires_cuda

from fused_input_norm import FusedImageProcessor
from fused_input_norm import images as intake

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
from PIL import ImageOps  # noqa: E402

CONFIG = {"image_processor_type": "Qwen2VLImageProcessor", "max_pixels": 200_000}
HF_CLASSES = {"pil": transformers.Qwen2VLImageProcessorPil, "torchvision": transformers.Qwen2VLImageProcessor}
FP32_ATOL = 1e-6


def photo_rgb() -> Image.Image:
    return Image.fromarray(np.ascontiguousarray(skimage_data.chelsea()[:200, :260]))


def photo_rgba() -> Image.Image:
    """The photo with a partial alpha: a gradient from transparent to opaque, and a fully transparent band."""
    rgb = np.asarray(photo_rgb())
    height, width = rgb.shape[:2]
    alpha = np.tile(np.linspace(0, 255, width).astype(np.uint8), (height, 1))
    alpha[:20] = 0
    return Image.fromarray(np.dstack([rgb, alpha]))


def save(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def with_transparency(image: Image.Image, key) -> Image.Image:
    image = image.copy()
    image.info["transparency"] = key
    return image


def animated(fmt: str) -> bytes:
    frames = [photo_rgb(), photo_rgb().transpose(Image.Transpose.FLIP_LEFT_RIGHT)]
    options = {"lossless": True} if fmt == "WEBP" else {}
    return save(frames[0], fmt, save_all=True, append_images=frames[1:], duration=100, loop=0, **options)


def exif_rotated(fmt: str, orientation: int) -> bytes:
    image = photo_rgb()
    exif = image.getexif()
    exif[0x0112] = orientation
    return save(image, fmt, exif=exif.tobytes(), **({"quality": 90} if fmt == "JPEG" else {}))


def sixteen_bit() -> Image.Image:
    gray = np.asarray(photo_rgb().convert("L")).astype(np.uint16) * 257 + 3
    return Image.fromarray(gray)  # mode I;16


# (format, mode as the user has it, the bytes)
CORPUS = {
    "JPEG RGB": lambda: save(photo_rgb(), "JPEG", quality=90),
    "JPEG RGB progressive": lambda: save(photo_rgb(), "JPEG", quality=90, progressive=True),
    "JPEG RGB 4:4:4": lambda: save(photo_rgb(), "JPEG", quality=95, subsampling=0),
    "JPEG L": lambda: save(photo_rgb().convert("L"), "JPEG", quality=90),
    "JPEG CMYK": lambda: save(photo_rgb().convert("CMYK"), "JPEG", quality=90),
    "JPEG RGB EXIF 6": lambda: exif_rotated("JPEG", 6),
    "JPEG RGB EXIF 3": lambda: exif_rotated("JPEG", 3),
    "PNG RGB": lambda: save(photo_rgb(), "PNG"),
    "PNG RGBA partial alpha": lambda: save(photo_rgba(), "PNG"),
    "PNG L": lambda: save(photo_rgb().convert("L"), "PNG"),
    "PNG LA": lambda: save(photo_rgba().convert("LA"), "PNG"),
    "PNG P": lambda: save(photo_rgb().convert("P", palette=Image.Palette.ADAPTIVE), "PNG"),
    "PNG P + tRNS": lambda: save(with_transparency(photo_rgb().convert("P", palette=Image.Palette.ADAPTIVE), 0), "PNG"),
    "PNG RGB + tRNS key": lambda: save(with_transparency(photo_rgb(), (0, 0, 0)), "PNG"),
    "PNG L + tRNS key": lambda: save(with_transparency(photo_rgb().convert("L"), 128), "PNG"),
    "PNG 1-bit": lambda: save(photo_rgb().convert("1"), "PNG"),
    "PNG I;16": lambda: save(sixteen_bit(), "PNG"),
    "PNG RGB EXIF 8": lambda: exif_rotated("PNG", 8),
    "WEBP RGB lossy": lambda: save(photo_rgb(), "WEBP", quality=80),
    "WEBP RGBA lossless": lambda: save(photo_rgba(), "WEBP", lossless=True),
    "WEBP RGBA lossy": lambda: save(photo_rgba(), "WEBP", quality=80),
    "WEBP animated": lambda: animated("WEBP"),
    "GIF P": lambda: save(photo_rgb(), "GIF"),
    "GIF P + transparency": lambda: save(with_transparency(photo_rgb().convert("P"), 3), "GIF"),
    "GIF animated": lambda: animated("GIF"),
    "BMP RGB": lambda: save(photo_rgb(), "BMP"),
    "BMP P": lambda: save(photo_rgb().convert("P"), "BMP"),
    "BMP RGBA": lambda: save(photo_rgba(), "BMP"),
    "TIFF RGB": lambda: save(photo_rgb(), "TIFF"),
    "TIFF RGBA": lambda: save(photo_rgba(), "TIFF"),
    "TIFF CMYK": lambda: save(photo_rgb().convert("CMYK"), "TIFF"),
    "TIFF I;16": lambda: save(sixteen_bit(), "TIFF"),
}


def opened(data: bytes) -> Image.Image:
    """The definition: the PIL image transformers' and vLLM's loaders start from."""
    image = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
    image.load()
    return image


@pytest.fixture(scope="module")
def corpus() -> dict[str, bytes]:
    return {name: make() for name, make in CORPUS.items()}


@pytest.mark.parametrize("reference", ["pil", "torchvision"])
@pytest.mark.parametrize("case", list(CORPUS))
def test_bytes_mean_the_image_pil_opens(case, reference, corpus, monkeypatch, record_property):
    if reference == "torchvision" and not intake.has_torchvision():
        pytest.skip("transformers' default (torchvision) processor needs torchvision, which is not installed")
    data = corpus[case]
    image = opened(data)
    processor = FusedImageProcessor.from_preprocessor_config(CONFIG, device="cpu", reference=reference)
    from_bytes = processor(data)
    from_image = processor(image)
    assert torch.equal(from_bytes["pixel_values"], from_image["pixel_values"]), case
    assert torch.equal(from_bytes["image_grid_thw"], from_image["image_grid_thw"]), case
    monkeypatch.setattr(intake, "has_torchvision", lambda: False)
    assert torch.equal(processor(data)["pixel_values"], from_bytes["pixel_values"]), f"{case}: without torchvision"
    monkeypatch.undo()
    # transformers' processor given that PIL image, as its loaders hand it over.
    keys = {k: v for k, v in CONFIG.items() if k != "image_processor_type"}
    expected = HF_CLASSES[reference].from_dict(keys)(image, return_tensors="pt")
    assert torch.equal(from_bytes["image_grid_thw"], expected["image_grid_thw"]), case
    diff = (from_bytes["pixel_values"] - expected["pixel_values"]).abs().max().item()
    record_property("max_abs_diff", diff)
    print(f"| {case} | {image.mode} | {reference} | {diff:.2g} |")
    assert diff <= FP32_ATOL, f"{case} {reference}: max |diff| {diff}"


@requires_cuda
@pytest.mark.parametrize("reference", ["pil", "torchvision"])
def test_the_corpus_gives_one_answer_on_cpu_and_cuda(reference, corpus):
    cpu = FusedImageProcessor.from_preprocessor_config(CONFIG, device="cpu", reference=reference)
    cuda = FusedImageProcessor.from_preprocessor_config(CONFIG, device="cuda", reference=reference)
    for case, data in corpus.items():
        assert torch.equal(cpu(data)["pixel_values"], cuda(data)["pixel_values"].cpu()), case


def pillow_verdict(data: bytes):
    """The PIL image the definition gives, or None where Pillow refuses the bytes."""
    try:
        return opened(data)
    except Exception:
        return None


def damaged(corpus: dict[str, bytes]) -> list[tuple[str, bytes]]:
    """Random bytes, bytes behind a real header, truncations of every corpus file, and files with a corrupted
    body (their header intact): seeded, so a failure reproduces."""
    rng = np.random.default_rng(24)
    cases = [("random", rng.integers(0, 256, n, dtype=np.uint8).tobytes()) for n in (1, 7, 100, 5000)]
    cases += [("JPEG magic + noise", b"\xff\xd8\xff\xe0" + rng.integers(0, 256, 3000, dtype=np.uint8).tobytes())]
    cases += [("PNG magic only", b"\x89PNG\r\n\x1a\n")]
    for name, data in corpus.items():
        for fraction in (0.02, 0.3, 0.9):
            cases.append((f"{name} cut at {fraction:.0%}", data[: int(len(data) * fraction)]))
        body = bytearray(data)
        start = min(len(body) - 1, 400)
        flips = rng.integers(start, len(body), 16)
        for i in flips:
            body[i] ^= 0x5A
        cases.append((f"{name} corrupted body", bytes(body)))
    return cases


def test_damaged_bytes_fail_exactly_where_pillow_fails_and_are_named(corpus):
    """Every damaged input: where Pillow's Image.open + load refuses it, a ValueError naming images[1] and no
    kernel; where Pillow decodes it anyway, the same result as Pillow's image. Never another exception."""
    processor = FusedImageProcessor.from_preprocessor_config(CONFIG, device="cpu")
    good = np.asarray(photo_rgb())
    refused = served = 0
    for label, data in damaged(corpus):
        image = pillow_verdict(data)
        if image is None:
            with RecordOps() as recorded, pytest.raises(ValueError) as raised:
                processor([good, data])
            assert "images[1]" in str(raised.value) and "bytes" in str(raised.value), (label, str(raised.value))
            assert not any("fused_input_norm" in str(op) for op in recorded.ops()), label
            refused += 1
        else:
            try:
                got = processor(data)
            except ValueError as error:  # what Pillow decodes, the processor may still refuse as an image
                assert "images" in str(error), (label, str(error))
                continue
            assert torch.equal(got["pixel_values"], processor(image)["pixel_values"]), label
            served += 1
    print(f"damaged inputs: {refused} refused as Pillow refuses them, {served} decoded as Pillow decodes them")
    assert refused > 50


def test_decoder_option_is_checked():
    with pytest.raises(ValueError, match="decoder must be one of 'exact', 'nvjpeg', got 'fast'"):
        FusedImageProcessor.from_preprocessor_config(CONFIG, decoder="fast")
