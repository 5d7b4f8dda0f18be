"""Hostile images: bytes whose EXIF is malformed, decompression bombs, huge alpha images, scalars.

- EXIF: encoded bytes mean `ImageOps.exif_transpose(Image.open(io.BytesIO(b)))`, whatever their EXIF holds. JPEGs
  with APP1 segments written here by hand (a doubled `Exif\\0\\0` header, two APP1 segments in both orders, odd
  tag types, out-of-range orientations, an `Exif\\xa0\\x00` header, an XMP orientation), then a fuzz of JPEGs
  whose EXIF bytes are mutated: each gives, bit for bit, what the processor gives for Pillow's upright image,
  or a named ValueError where Pillow refuses the bytes. FUSED_INPUT_NORM_LONG_PROBES=1 runs a longer fuzz.
- Decompression bombs: over Pillow's Image.MAX_IMAGE_PIXELS, warned as Image.open warns; over twice that, a
  ValueError naming the image before any decoder runs (nvJPEG's path included, checked here on the CPU).
- Alpha: composited on white a block of rows at a time, equal to the whole-image blend and to Pillow's and
  transformers' own; its peak memory on RGBA, LA and P + tRNS PNGs (20 MP; 81 MP with the long probes) no
  more than transformers'.
"""

import ctypes
import io
import os
import struct
import warnings

import numpy as np
import pytest
import torch
from conftest import RecordOps

from fused_input_norm import FusedImageProcessor
from fused_input_norm import images as intake

skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
from PIL import ImageOps  # noqa: E402

LONG_PROBES = os.environ.get("FUSED_INPUT_NORM_LONG_PROBES") == "1"
CONFIG = {"image_processor_type": "Qwen2VLImageProcessor", "max_pixels": 200_000}
WHERE = "FusedImageProcessor"


@pytest.fixture(scope="module")
def processor():
    return FusedImageProcessor.from_preprocessor_config(CONFIG, device="cpu")


def photo_jpeg() -> bytes:
    """A real photo, not square (a turn shows in the shape), as a JPEG without metadata."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(skimage_data.chelsea()[:48, :72])).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


# ----- EXIF written by hand -----
# TIFF field types: (code, struct format of one value)
SHORT, LONG, RATIONAL, BYTE, ASCII, UNDEFINED, SSHORT, SLONG, FLOAT, DOUBLE = 3, 4, 5, 1, 2, 7, 8, 9, 11, 12
TYPE_FORMATS = {BYTE: "B", ASCII: "c", SHORT: "H", LONG: "L", RATIONAL: "LL", UNDEFINED: "B", SSHORT: "h"}
TYPE_FORMATS |= {SLONG: "l", FLOAT: "f", DOUBLE: "d"}


def tiff(entries: list[tuple[int, int, tuple]], order: str = "<") -> bytes:
    """A TIFF header and one IFD of (tag, type, values); values longer than 4 bytes go after the IFD."""
    header = (b"II" if order == "<" else b"MM") + struct.pack(order + "HL", 42, 8)
    data_at = 8 + 2 + 12 * len(entries) + 4
    ifd, data = struct.pack(order + "H", len(entries)), b""
    for tag, kind, values in entries:
        fmt = TYPE_FORMATS[kind]
        raw = b"".join(struct.pack(order + fmt, *(v if isinstance(v, tuple) else (v,))) for v in values)
        count = len(values)
        if len(raw) <= 4:
            ifd += struct.pack(order + "HHL", tag, kind, count) + raw.ljust(4, b"\0")
        else:
            ifd += struct.pack(order + "HHLL", tag, kind, count, data_at + len(data))
            data += raw
    return header + ifd + struct.pack(order + "L", 0) + data


def orientation_ifd(value, kind: int = SHORT, order: str = "<") -> bytes:
    return tiff([(0x010F, ASCII, tuple(b"Canon\0"[i : i + 1] for i in range(6))), (0x0112, kind, (value,))], order)


def app1(payload: bytes) -> bytes:
    return b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload


def with_segments(jpeg: bytes, *segments: bytes) -> bytes:
    """The JPEG with these segments right after its SOI marker."""
    assert jpeg[:2] == b"\xff\xd8"
    return jpeg[:2] + b"".join(segments) + jpeg[2:]


def xmp(orientation: int) -> bytes:
    packet = f'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:Description tiff:Orientation="{orientation}"/></x:xmpmeta>'
    return b"http://ns.adobe.com/xap/1.0/\x00" + packet.encode()


EXIF = b"Exif\0\0"
HAND_BUILT = {
    **{f"orientation {o}": [app1(EXIF + orientation_ifd(o))] for o in range(1, 9)},
    "orientation 6 big-endian": [app1(EXIF + orientation_ifd(6, order=">"))],
    "orientation 0": [app1(EXIF + orientation_ifd(0))],
    "orientation 9": [app1(EXIF + orientation_ifd(9))],
    "orientation 65535": [app1(EXIF + orientation_ifd(65535))],
    "doubled header, orientation 6": [app1(EXIF + EXIF + orientation_ifd(6))],
    "doubled header, orientation 8": [app1(EXIF + EXIF + orientation_ifd(8))],
    "doubled header, big-endian 6": [app1(EXIF + EXIF + orientation_ifd(6, order=">"))],
    "Exif\\xa0\\x00 header, orientation 6": [app1(b"Exif\xa0\x00" + orientation_ifd(6))],
    "two APP1: 6 then 8": [app1(EXIF + orientation_ifd(6)), app1(EXIF + orientation_ifd(8))],
    "two APP1: 8 then 6": [app1(EXIF + orientation_ifd(8)), app1(EXIF + orientation_ifd(6))],
    "two APP1: bad header then 6": [app1(b"Exif\xa0\x00" + orientation_ifd(8)), app1(EXIF + orientation_ifd(6))],
    "LONG 6": [app1(EXIF + orientation_ifd(6, LONG))],
    "SLONG 8": [app1(EXIF + orientation_ifd(8, SLONG))],
    "SSHORT 3": [app1(EXIF + orientation_ifd(3, SSHORT))],
    "BYTE 6": [app1(EXIF + orientation_ifd(6, BYTE))],
    "UNDEFINED 6": [app1(EXIF + orientation_ifd(6, UNDEFINED))],
    "RATIONAL 6/1": [app1(EXIF + orientation_ifd((6, 1), RATIONAL))],
    "RATIONAL 6/0": [app1(EXIF + orientation_ifd((6, 0), RATIONAL))],
    "FLOAT 6.0": [app1(EXIF + orientation_ifd(6.0, FLOAT))],
    "DOUBLE 8.0": [app1(EXIF + orientation_ifd(8.0, DOUBLE))],
    "ASCII 6": [app1(EXIF + tiff([(0x0112, ASCII, (b"6", b"\0"))]))],
    "SHORT x2 (6, 3)": [app1(EXIF + tiff([(0x0112, SHORT, (6, 3))]))],
    "unknown type 13": [app1(EXIF + tiff([(0x0112, SHORT, (6,))])[:12] + b"\x0d" + tiff([(0x0112, SHORT, (6,))])[13:])],
    "IFD count past the end": [app1(EXIF + orientation_ifd(6)[:8] + b"\x40\x00" + orientation_ifd(6)[10:])],
    "IFD offset past the end": [app1(EXIF + b"II*\x00\xff\xff\x00\x00" + orientation_ifd(6)[8:])],
    "XMP orientation 6 only": [app1(xmp(6))],
    "XMP 6, EXIF 1": [app1(EXIF + orientation_ifd(1)), app1(xmp(6))],
    "XMP 8, EXIF without orientation": [app1(EXIF + tiff([(0x0110, ASCII, (b"X", b"\0"))])), app1(xmp(8))],
}


def pillow_image(data: bytes):
    """The definition: the PIL image transformers' and vLLM's loaders start from; None where Pillow refuses."""
    try:
        image = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
        image.load()
        return image
    except Exception:
        return None


def one_answer(processor, data: bytes, label: str, good: np.ndarray) -> str:
    """Checks that the bytes give what Pillow's upright image gives (bit for bit), or a named ValueError with no
    kernel run where Pillow refuses them. Returns "served" or "refused"."""
    image = pillow_image(data)
    if image is None:
        with RecordOps() as recorded, pytest.raises(ValueError) as raised:
            processor([good, data])
        assert "images[1]" in str(raised.value), (label, str(raised.value))
        assert not any("fused_input_norm" in str(op) for op in recorded.ops()), label
        return "refused"
    got, expected = processor(data), processor(image)
    assert torch.equal(got["image_grid_thw"], expected["image_grid_thw"]), (label, image.size)
    assert torch.equal(got["pixel_values"], expected["pixel_values"]), label
    return "served"


@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow warns of the malformed EXIF it skips: expected
@pytest.mark.parametrize("case", list(HAND_BUILT))
def test_hand_built_exif_gives_what_exif_transpose_gives(case, processor):
    data = with_segments(photo_jpeg(), *HAND_BUILT[case])
    one_answer(processor, data, case, np.zeros((8, 8, 3), np.uint8))
    if intake.has_torchvision():  # the torchvision path serves it: the disagreement was its own EXIF reader's
        assert intake._plain_jpeg(Image.open(io.BytesIO(data))), case


def test_the_hand_built_cases_turn_the_image():
    """The cases are not vacuous: Pillow turns the doubled header's, the rational's and the XMP's image, and
    torchvision's own EXIF reader disagrees with Pillow's on the doubled header (the bug this guards)."""
    jpeg = photo_jpeg()
    for case in ("doubled header, orientation 6", "RATIONAL 6/1", "XMP orientation 6 only", "two APP1: 6 then 8"):
        assert pillow_image(with_segments(jpeg, *HAND_BUILT[case])).size == (48, 72), case
    tv = pytest.importorskip("torchvision.io")
    data = with_segments(jpeg, *HAND_BUILT["doubled header, orientation 6"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = tv.decode_image(torch.frombuffer(bytearray(data), dtype=torch.uint8), apply_exif_orientation=True)
    assert tuple(theirs.shape[1:]) == (48, 72)  # torchvision: upright as stored, where Pillow turns it


def camera_exif_jpeg() -> bytes:
    """A real photo with the EXIF a camera writes (make, model, times, an Exif sub-IFD with rationals, an
    orientation), written by Pillow: the seed the fuzz mutates."""
    image = Image.fromarray(np.ascontiguousarray(skimage_data.chelsea()[:48, :72]))
    exif = image.getexif()
    exif[0x010F], exif[0x0110], exif[0x0112], exif[0x0132] = "Canon", "EOS 5D", 6, "2024:01:02 03:04:05"
    sub = exif.get_ifd(0x8769)
    sub[0x9003], sub[0x829A], sub[0x8827], sub[0x920A] = "2024:01:02 03:04:05", (1, 250), 400, (50, 1)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=90, exif=exif.tobytes())
    return buffer.getvalue()


def app1_span(data: bytes) -> tuple[int, int]:
    """Where the first APP1 segment's bytes lie (its marker's length field to its end)."""
    at = data.index(b"\xff\xe1")
    return at + 2, at + 2 + struct.unpack(">H", data[at + 2 : at + 4])[0]


def mutated(seed_jpeg: bytes, rng: np.random.Generator) -> bytes:
    """1-4 bytes of the APP1 (EXIF) segment overwritten: random values, or the ones that matter (0, 0xff, the
    orientations, the TIFF byte orders)."""
    start, end = app1_span(seed_jpeg)
    data = bytearray(seed_jpeg)
    for _ in range(rng.integers(1, 5)):
        at = int(rng.integers(start, end))
        data[at] = int(rng.choice([rng.integers(0, 256), 0, 0xFF, *range(1, 10), ord("I"), ord("M")]))
    return bytes(data)


@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow warns of the malformed EXIF it skips: expected
@pytest.mark.parametrize("count", [2000 if LONG_PROBES else 200])
def test_fuzzed_exif_gives_what_exif_transpose_gives(count, processor, record_property):
    """Mutated EXIF bytes of a photo: 0 disagreements with exif_transpose(Image.open(b)), served or refused."""
    seed = camera_exif_jpeg()
    assert pillow_image(seed).size == (48, 72)  # the seed's own orientation 6 turns it
    rng = np.random.default_rng(38)
    good = np.zeros((8, 8, 3), np.uint8)
    verdicts = [one_answer(processor, mutated(seed, rng), f"mutation {i}", good) for i in range(count)]
    served = verdicts.count("served")
    record_property("exif_fuzz_served", served)
    print(f"EXIF fuzz: {count} mutated JPEGs, {served} served as Pillow's image, {count - served} refused")
    assert served > count // 2


# ----- decompression bombs -----
def sof_claims(jpeg: bytes, height: int, width: int) -> bytes:
    """The JPEG with its frame header claiming another size: a few hundred bytes that say 'decode me big'."""
    at = jpeg.index(b"\xff\xc0")
    return jpeg[: at + 5] + struct.pack(">HH", height, width) + jpeg[at + 9 :]


def test_a_jpeg_claiming_65535_squared_is_named_before_any_decoder(processor):
    bomb = sof_claims(photo_jpeg(), 65535, 65535)
    with pytest.raises(Image.DecompressionBombError):
        Image.open(io.BytesIO(bomb))
    good = np.zeros((8, 8, 3), np.uint8)
    with RecordOps() as recorded, pytest.raises(ValueError, match=r"images\[1\].*decompression bomb") as raised:
        processor([good, bomb])
    assert "MAX_IMAGE_PIXELS" in str(raised.value)
    assert not any("fused_input_norm" in str(op) for op in recorded.ops())


def test_nvjpeg_path_checks_the_bomb_before_decoding(monkeypatch):
    """decode_all on a CUDA device with decoder="nvjpeg" (nvJPEG replaced: none runs here): the bomb is named by
    Pillow's header check before nvJPEG is asked for anything; a JPEG with an EXIF orientation Pillow reads
    from a doubled header comes out as Pillow's upright image."""
    tv = pytest.importorskip("torchvision.io")
    asked = []

    def fake_nvjpeg(datas, device):  # the CPU decoder's pixels, as stored: what nvJPEG hands back
        asked.append(len(datas))
        with warnings.catch_warnings():  # torchvision 0.29 deprecates its decoders
            warnings.simplefilter("ignore", DeprecationWarning)
            return [tv.decode_jpeg(torch.frombuffer(bytearray(d), dtype=torch.uint8)) for d in datas]

    monkeypatch.setattr(intake, "_decode_jpegs", fake_nvjpeg)
    cuda = torch.device("cuda")
    good = np.zeros((8, 8, 3), np.uint8)
    bomb = sof_claims(photo_jpeg(), 65535, 65535)
    with pytest.raises(ValueError, match=r"images\[1\].*decompression bomb"):
        intake.decode_all([good, bomb], cuda, True, 3, WHERE, "nvjpeg")
    assert asked == []
    turned = with_segments(photo_jpeg(), *HAND_BUILT["doubled header, orientation 6"])
    cmyk = io.BytesIO()
    Image.open(io.BytesIO(photo_jpeg())).convert("CMYK").save(cmyk, "JPEG")
    (got, _), (cmyk_got, _) = intake.decode_all([turned, cmyk.getvalue()], cuda, True, 3, WHERE, "nvjpeg")
    assert asked == [1]  # the CMYK JPEG went to Pillow, which converts it
    assert torch.equal(got, torch.from_numpy(np.array(pillow_image(turned))).permute(2, 0, 1))
    assert cmyk_got.shape[0] == 3


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_bombs_are_warned_as_image_open_warns_and_refused_by_name(fmt, processor, monkeypatch):
    """Over MAX_IMAGE_PIXELS (lowered here so a small image crosses it): the DecompressionBombWarning
    Image.open gives, and the image served; over twice that, a ValueError naming images[1]."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(skimage_data.chelsea()[:60, :100])).save(buffer, fmt)
    data = buffer.getvalue()
    good = np.zeros((8, 8, 3), np.uint8)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 4000)  # 6,000 pixels: between the limit and twice it
    with pytest.warns(Image.DecompressionBombWarning):
        expected = processor(pillow_image(data))
    with pytest.warns(Image.DecompressionBombWarning):
        got = processor(data)
    assert torch.equal(got["pixel_values"], expected["pixel_values"])
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 2999)  # 6,000 pixels: over twice the limit
    with pytest.raises(ValueError, match=r"images\[1\] \(\d+ bytes\) is refused as a decompression bomb"):
        processor([good, data])


# ----- NumPy scalars -----
@pytest.mark.parametrize("scalar", [np.array(7, dtype=np.uint8), np.uint8(7)], ids=["0-d array", "NumPy scalar"])
def test_a_numpy_scalar_is_named(scalar, processor):
    with pytest.raises(TypeError, match=r"images\[1\] is a 0-d NumPy array.*expected"):
        processor([np.zeros((8, 8, 3), np.uint8), scalar])


# ----- alpha composited a block at a time -----
@pytest.mark.parametrize("reference", ["pil", "torchvision"])
@pytest.mark.parametrize("source", ["pil", "tensor"])
@pytest.mark.parametrize("channels", [2, 4])
def test_blocked_blend_equals_the_whole_image_blend(channels, source, reference, monkeypatch):
    """An odd-size image over several blocks (the last one short) against the same blend in one block, and the
    PIL source against Pillow's alpha_composite itself, the tensor sources against transformers' convert_to_rgb."""
    rng = np.random.default_rng(7)
    height, width = 517, 383
    pixels = rng.integers(0, 256, (height, width, channels), dtype=np.uint8)
    pixels[..., -1][::7] = 0
    pixels[..., -1][1::7] = 255
    image = torch.from_numpy(pixels).permute(2, 0, 1)
    monkeypatch.setattr(intake, "BLEND_BLOCK_PIXELS", 10 * width + 11)  # 10 rows a block, 52 blocks
    blocked = intake.to_rgb(image, source, reference)
    monkeypatch.setattr(intake, "BLEND_BLOCK_PIXELS", height * width)
    assert torch.equal(blocked, intake.to_rgb(image, source, reference))
    rgba = pixels if channels == 4 else np.dstack([pixels[..., :1].repeat(3, 2), pixels[..., 1:]])
    if source == "pil":  # Pillow's own alpha_composite on the PIL image (LA converted to RGBA by Pillow)
        pil = Image.fromarray(rgba, "RGBA") if channels == 4 else Image.fromarray(pixels, "LA").convert("RGBA")
        white = Image.new("RGBA", pil.size, (255, 255, 255, 255))
        expected = np.asarray(Image.alpha_composite(white, pil).convert("RGB"))
    else:  # transformers' backends on the array / tensor, as the processors call them
        backends = pytest.importorskip("transformers.image_processing_backends")
        chw = np.ascontiguousarray(rgba.transpose(2, 0, 1))
        if reference == "pil":
            expected = np.asarray(backends.PilBackend().convert_to_rgb(chw)).transpose(1, 2, 0)
        else:
            pytest.importorskip("torchvision")
            expected = backends.TorchvisionBackend().convert_to_rgb(torch.from_numpy(chw)).permute(1, 2, 0).numpy()
    assert np.array_equal(blocked.permute(1, 2, 0).numpy(), expected)


def rss_mb(key: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith(key))


def settle_malloc() -> None:
    """Makes a peak measured in this process independent of what ran before it. glibc raises its mmap threshold
    each time a large mmapped block is freed (up to 32 MB), after which large blocks come from the heap and stay
    resident once freed, so a run measured after another reused that memory and counted less (CI once saw
    Pillow's processor at 57 MB after ours at 77 MB; measured alone it adds 372 MB). A fixed threshold keeps large
    blocks mmapped, and malloc_trim returns what the heap holds free."""
    libc = ctypes.CDLL(None)
    if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim"):  # glibc; elsewhere the measurement stands as is
        libc.mallopt(-3, 128 << 10)  # M_MMAP_THRESHOLD = 128 KiB, glibc's default, no longer raised by frees
        libc.malloc_trim(0)


def peak_mb(run) -> int:
    """The peak resident memory `run()` adds to the process (MB): Linux's high-water mark (VmHWM), reset to the
    current size first (clear_refs 5), after settle_malloc."""
    settle_malloc()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    start = rss_mb("VmRSS")
    run()
    return rss_mb("VmHWM") - start


def flat_png(side: int, mode: str) -> bytes:
    """A side x side PNG with transparency that compresses small: flat, with a noisy corner and a gradient band in
    the alpha; RGBA, LA, or P with a transparent palette entry (tRNS)."""
    rgba = np.empty((side, side, 4), np.uint8)
    rgba[...] = (200, 120, 40, 128)
    rgba[:300, :300] = np.random.default_rng(0).integers(0, 256, (300, 300, 4), dtype=np.uint8)
    rgba[side // 2 : side // 2 + 50, :, 3] = np.linspace(0, 255, side).astype(np.uint8)
    image = Image.fromarray(rgba)
    if mode == "LA":
        image = image.convert("LA")
    elif mode == "P":
        image = image.convert("RGB").quantize(16)
        image.info["transparency"] = 0
    buffer = io.BytesIO()
    image.save(buffer, "PNG", compress_level=1)
    return buffer.getvalue()


@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK), reason="needs Linux's /proc/self/clear_refs")
@pytest.mark.parametrize("mode", ["RGBA", "LA", "P"])
def test_alpha_peak_memory_is_no_more_than_transformers(mode, record_property):
    """A PNG with alpha (20 MP; 81 MP with FUSED_INPUT_NORM_LONG_PROBES=1) from its bytes through the Qwen2-VL
    processor: the peak memory it adds is no more than transformers' processors (the default and the Pil
    one) add from the PIL image the same bytes open to. Before the blend went block by block it was twice theirs
    (81 MP RGBA: 3.4 GB against 1.7 GB)."""
    transformers = pytest.importorskip("transformers")
    data = flat_png(9000 if LONG_PROBES else 4500, mode)
    ours = FusedImageProcessor.from_preprocessor_config({"image_processor_type": "Qwen2VLImageProcessor"})
    theirs = {"default": transformers.Qwen2VLImageProcessor(), "pil": transformers.Qwen2VLImageProcessorPil()}
    small = flat_png(400, mode)  # first calls, so lazy imports and caches are not counted as the image's
    ours(small)
    for processor in theirs.values():
        processor(Image.open(io.BytesIO(small)), return_tensors="pt")
    peaks = {"ours": peak_mb(lambda: ours(data))}
    for name, processor in theirs.items():
        peaks[name] = peak_mb(lambda p=processor: p(Image.open(io.BytesIO(data)), return_tensors="pt"))
    record_property("alpha_peak_mb", peaks)
    print(f"alpha peak above the start, {mode} {len(data) >> 10} KB PNG: {peaks} MB")
    assert peaks["ours"] <= min(peaks["default"], peaks["pil"]), peaks
