"""The resize's GPU per-thread code, run on the host by tests/cpp/resize_emulation.cpp (the first pass's
threads, then the strided walker with the resampled source, over an emulated grid, both index widths),
compared bit for bit with Pillow and torchvision themselves: until a GPU is lent, the GPU kernels' proof.
The same program's --cpu mode runs the CPU op's resampling kernels alone, torch-free, at each capability the
machine has; scripts/check_aarch64.sh runs those tests with the program cross-built for aarch64 under
qemu-aarch64 (FUSED_INPUT_NORM_RESIZE_EMULATOR, FUSED_INPUT_NORM_RESIZE_RUNNER): the NEON kernels' proof."""

import os
import pathlib
import shlex
import shutil
import subprocess

import numpy as np
import pytest
import torch
from test_resize import TORCH_LANCZOS
from test_resize_cv2 import opencv

from fused_input_norm.checks import OWN_ORDER_FILTERS
from fused_input_norm.resize import (
    pil_rule,
    torch_float_bilinear,
    torch_float_fma_kernel,
    torch_uint8_kernel,
    vertical_first,
)

PIL = pytest.importorskip("PIL.Image")
tvF = pytest.importorskip("torchvision.transforms.v2.functional")
skimage_data = pytest.importorskip("skimage.data")

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMPILER = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
# A program built elsewhere (cross-built for aarch64), and the command that runs it (qemu-aarch64 -L SYSROOT).
PREBUILT = os.environ.get("FUSED_INPUT_NORM_RESIZE_EMULATOR")
RUNNER = shlex.split(os.environ.get("FUSED_INPUT_NORM_RESIZE_RUNNER", ""))
# slow (15 s of CPU a run) and torch-free (the program compiles csrc/ alone): CI runs it in step 1, and the
# aarch64 step under qemu, not again against each torch build.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        COMPILER is None and not PREBUILT, reason="needs a C++17 host compiler (g++, c++ or clang++) on PATH"
    ),
]

FILTERS = {"bicubic": 1, "bilinear": 0, "lanczos": 2, "cv2_cubic": 3, "cv2_cubic_f32": 4, "bilinear_no_antialias": 5,
           "bilinear_no_antialias_f32": 6, "bilinear_no_antialias_f32_cl": 7, "bilinear_f32": 8,
           "bicubic_f32": 9}  # fmt: skip
PIL_FILTERS = {"bicubic": 3, "bilinear": 2, "lanczos": 1}  # PIL.Image.Resampling values
TV_FILTERS = {"bicubic": "BICUBIC", "bilinear": "BILINEAR", "lanczos": "LANCZOS"}


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    if PREBUILT:
        return pathlib.Path(PREBUILT)
    binary = tmp_path_factory.mktemp("emulation") / "resize_emulation"
    source = ROOT / "tests" / "cpp" / "resize_emulation.cpp"
    # -Wno-maybe-uninitialized: GCC 12's own AVX-512 intrinsics headers trip it (the CPU kernels' avx512 clones)
    flags = ["-std=c++17", "-O2", "-Wall", "-Werror", "-Wno-maybe-uninitialized", f"-I{ROOT / 'csrc'}"]
    subprocess.run(
        [COMPILER, *flags, str(source), str(ROOT / "csrc" / "cpu_capability.cpp"), "-o", str(binary)], check=True
    )
    return binary


def emulate(
    emulator,
    tmp_path,
    image_hwc,
    size,
    resample,
    reference,
    crop=None,
    patches=(0, 0, 0),
    threads=37,
    pad=(),
    cpu=None,
    planar=False,
    layout=0,
):  # image_hwc: uint8, or float32 for the float32 filters (--float-input)
    """The emulated kernels' output for an HWC uint8 image: [C, h, w] float32 (the canvas's sides with `pad`
    = (canvas_h, canvas_w, top, left, fill)), or patch rows. `cpu`: a CPU capability; the CPU op's kernels at
    that capability instead, in bands of `threads` rows. `planar`: the image handed over as [C, H, W].
    `layout`: the op's layout of patch rows, 1 [T, P, P, C], 2 strips [C, P, patches * P]."""
    height, width, channels = image_hwc.shape
    crop = crop or (0, 0, *size)
    rule = pil_rule(reference)
    # OpenCV's and torch's own filters: across first, always
    first = resample not in OWN_ORDER_FILTERS and vertical_first(rule, height, width, *size)
    image_file, out_file = tmp_path / "in.bin", tmp_path / "out.bin"
    image_file.write_bytes(np.ascontiguousarray(image_hwc.transpose(2, 0, 1) if planar else image_hwc).tobytes())
    args = [channels, height, width, int(not planar), *size, FILTERS[resample], int(reference == "torchvision")]
    args += [int(first), *crop, *patches, threads, *pad]
    flags = (["--cpu"] if cpu else []) + (["--float-input"] if image_hwc.dtype == np.float32 else [])
    flags += {0: [], 1: ["--channels-last"], 2: ["--strips"]}[layout]
    command = [*RUNNER, str(emulator), *flags, str(image_file), *map(str, args), str(out_file)]
    env = {**os.environ, "FUSED_INPUT_NORM_CPU_CAPABILITY": cpu} if cpu else None
    subprocess.run(command, check=True, timeout=300, env=env)
    values = np.fromfile(out_file, dtype=np.float32)
    if patches[1]:
        if layout == 2:
            return values.reshape(channels, patches[1], -1)
        return values.reshape(-1, channels * patches[0] * patches[1] ** 2)
    return values.reshape(channels, *(pad[:2] if pad else crop[2:]))


def pillow(image_hwc, size, resample):
    # 4 channels as RGBX: Pillow resizes RGBA premultiplied by its alpha, RGBX as four plain bands.
    height, width, channels = image_hwc.shape
    mode = {1: "L", 3: "RGB", 4: "RGBX"}[channels]
    image = PIL.frombytes(mode, (width, height), np.ascontiguousarray(image_hwc).tobytes())
    resized = image.resize((size[1], size[0]), PIL_FILTERS[resample])
    return np.asarray(resized).reshape(*size, channels).transpose(2, 0, 1).astype(np.float32)


def torch_no_antialias(image_hwc, size):
    x = torch.from_numpy(np.ascontiguousarray(image_hwc)).permute(2, 0, 1)[None]
    resized = torch.nn.functional.interpolate(x, size=tuple(size), mode="bilinear", antialias=False)
    return resized[0].numpy().astype(np.float32)


def torch_float(image_hwc, size):
    """torch's float32 bilinear of the image (channels-last strides, as MiMo converts it; a float32 image as it is)."""
    x = torch.from_numpy(np.ascontiguousarray(image_hwc)).permute(2, 0, 1).float()[None]
    resized = torch.nn.functional.interpolate(x, size=tuple(size), mode="bilinear", antialias=False)
    return resized[0].numpy()


def torchvision(image_hwc, size, resample):
    x = torch.from_numpy(np.ascontiguousarray(image_hwc)).permute(2, 0, 1)
    mode = getattr(tvF.InterpolationMode, TV_FILTERS[resample])
    return tvF.resize(x, list(size), interpolation=mode, antialias=True).numpy().astype(np.float32)


PHOTOS = {"astronaut": skimage_data.astronaut(), "coffee": skimage_data.coffee()}
# (size) per case: downscale to Qwen2-VL's size and to 224, upscale, one axis, Pillow 13's vertical-first
# branch, 1-pixel and odd sizes.
SIZES = [(224, 224), (364, 532), (700, 901), (512, 301), (97, 600), (100, 500), (1, 1), (1, 37), (53, 1), (333, 77)]


@pytest.mark.parametrize("resample", ["bicubic", "bilinear", "lanczos"])
@pytest.mark.parametrize("photo", list(PHOTOS))
def test_emulated_kernels_equal_pillow_and_torchvision(emulator, tmp_path, photo, resample):
    image = PHOTOS[photo]
    differing = {}
    for size in SIZES:
        if tuple(size) == image.shape[:2]:
            continue
        got = emulate(emulator, tmp_path, image, size, resample, "pil")
        differing[("pil", size)] = int((got != pillow(image, size, resample)).sum())
        if resample == "lanczos" and not TORCH_LANCZOS:  # torch 2.11: no torchvision LANCZOS to compare with
            continue
        got = emulate(emulator, tmp_path, image, size, resample, "torchvision")
        differing[("torchvision", size)] = int((got != torchvision(image, size, resample)).sum())
    assert not any(differing.values()), {k: v for k, v in differing.items() if v}


def test_emulated_vertical_first_order_is_pillow_13s(emulator, tmp_path):
    image = PHOTOS["astronaut"]  # 512 x 512
    size = (100, 500)
    assert vertical_first("13", 512, 512, *size)
    reference = pillow(image, size, "bicubic")
    assert (emulate(emulator, tmp_path, image, size, "bicubic", "pil-13") == reference).all()
    assert (emulate(emulator, tmp_path, image, size, "bicubic", "pil-12.1") != reference).any()


def test_emulated_crop_and_patch_rows(emulator, tmp_path):
    image = PHOTOS["coffee"]  # 400 x 600
    size, crop = (308, 448), (28, 56, 224, 336)
    full = pillow(image, size, "bicubic")
    top, left, h, w = crop
    got = emulate(emulator, tmp_path, image, size, "bicubic", "pil", crop=crop)
    assert (got == full[:, top : top + h, left : left + w]).all()
    # Qwen2-VL patch rows of the whole resized image: the processor's view of the reference pixels.
    patch, temporal, merge = 14, 2, 2
    rows = emulate(emulator, tmp_path, image, size, "bicubic", "pil", patches=(temporal, patch, merge), threads=5)
    frames = torch.from_numpy(full).unsqueeze(0).expand(temporal, -1, -1, -1)
    gh, gw = size[0] // (patch * merge), size[1] // (patch * merge)
    expected = frames.reshape(1, temporal, 3, gh, merge, patch, gw, merge, patch).permute(0, 3, 6, 4, 7, 2, 1, 5, 8)
    assert (rows == expected.reshape(rows.shape).numpy()).all()
    # The same rows laid out [T, P, P, C] (Gemma 4's, LFM2-VL's): the layout's other order, from the same threads.
    geometry = (temporal, patch, merge)
    rows = emulate(emulator, tmp_path, image, size, "bicubic", "pil", patches=geometry, threads=5, layout=1)
    expected = frames.reshape(1, temporal, 3, gh, merge, patch, gw, merge, patch).permute(0, 3, 6, 4, 7, 1, 5, 8, 2)
    assert (rows == expected.reshape(rows.shape).numpy()).all()
    # MiniCPM-V's strips of the crop (single patches): channel c's row y holds row y of every patch, in raster order.
    strips = emulate(emulator, tmp_path, image, size, "bicubic", "pil", crop, (1, patch, 1), threads=5, layout=2)
    top, left, h, w = crop
    patches = torch.from_numpy(full[:, top : top + h, left : left + w]).reshape(3, h // patch, patch, w // patch, patch)
    expected = patches.permute(0, 2, 1, 3, 4).reshape(3, patch, -1)
    assert (strips == expected.numpy()).all()


def padded(pixels: np.ndarray, pad) -> np.ndarray:
    """numpy's pad of a [C, h, w] image to pad's canvas with its fill."""
    canvas_h, canvas_w, top, left, fill = pad
    _, h, w = pixels.shape
    return np.pad(pixels, ((0, 0), (top, canvas_h - h - top), (left, canvas_w - w - left)), constant_values=fill)


@pytest.mark.parametrize("resample", ["bicubic", "bilinear", "lanczos"])
def test_emulated_padding_is_the_padded_reference(emulator, tmp_path, resample):
    """ResampledSource's fill outside the crop's box (both index widths, an emulated grid), against Pillow's and
    torchvision's resize padded by numpy: every side and none, fill 0 and 255, crop and pad together, each pass
    shape, planar, Qwen2-VL patch rows and tiles."""
    image = PHOTOS["coffee"][:123, :171]
    cases = [  # size, crop, pad, patches
        ((224, 224), (0, 0, 224, 224), (230, 240, 3, 9, 0), (0, 0, 0)),
        ((97, 160), (5, 7, 80, 150), (96, 150, 16, 0, 255), (0, 0, 0)),
        ((123, 90), (0, 0, 123, 90), (123, 100, 0, 10, 0), (0, 0, 0)),  # width only
        ((60, 171), (0, 0, 60, 171), (70, 171, 0, 0, 255), (0, 0, 0)),  # height only
        ((123, 171), (3, 1, 100, 160), (112, 168, 5, 4, 128), (0, 0, 0)),  # no pass
        ((1, 1), (0, 0, 1, 1), (2, 3, 1, 2, 255), (0, 0, 0)),
        ((50, 75), (0, 0, 50, 75), (56, 84, 3, 4, 0), (2, 14, 2)),
        ((50, 75), (0, 0, 50, 75), (84, 84, 30, 6, 255), (1, 14, 1)),
        ((50, 75), (1, 2, 48, 70), (48, 70, 0, 0, 0), (0, 0, 0)),  # a canvas the size of the crop
    ]
    differing = {}
    for size, crop, pad, patches in cases:
        top, left, h, w = crop
        for reference, resize in (("pil", pillow), ("torchvision", torchvision)):
            if reference == "torchvision" and resample == "lanczos" and not TORCH_LANCZOS:
                continue  # torch 2.11: no torchvision LANCZOS to compare with
            expected = padded(resize(image, size, resample)[:, top : top + h, left : left + w], pad)
            if patches[1]:
                t, p, m = patches
                frames = torch.from_numpy(expected).unsqueeze(0).expand(t, -1, -1, -1)
                gh, gw = pad[0] // (p * m), pad[1] // (p * m)
                rows = frames.reshape(1, t, 3, gh, m, p, gw, m, p).permute(0, 3, 6, 4, 7, 2, 1, 5, 8)
                expected = rows.reshape(-1, 3 * t * p * p).numpy()
            got = emulate(emulator, tmp_path, image, size, resample, reference, crop, patches, threads=29, pad=pad)
            differing[(reference, size, pad)] = int((got != expected).sum())
    assert not any(differing.values()), {k: v for k, v in differing.items() if v}


def capabilities(emulator) -> list[str]:
    found = subprocess.run([*RUNNER, str(emulator), "--capabilities"], check=True, capture_output=True, text=True)
    return found.stdout.split()


@pytest.mark.parametrize("resample", ["bicubic", "bilinear", "lanczos"])
def test_cpu_kernels_equal_pillow_and_torchvision(emulator, tmp_path, resample):
    """The CPU op's resampling kernels (resample_cpu_kernels.h), at every capability the machine has (default,
    avx2, avx512 here; neon and default under qemu-aarch64), against Pillow and torchvision themselves: both
    photos down and up, one axis, 1 pixel; gray, RGB and 4-channel pixels, interleaved and planar; bands of 32
    and of 7 rows; a seeded fuzz of sizes; a crop placed on a padded canvas. 0 differing values."""
    astronaut = PHOTOS["astronaut"]
    cases = [  # image, size, planar, band rows
        (PHOTOS["coffee"], (224, 224), False, 32),
        (PHOTOS["coffee"], (700, 901), False, 32),
        (astronaut, (97, 600), False, 7),
        (astronaut, (512, 301), True, 32),
        (astronaut, (1, 1), False, 32),
        (astronaut[:, :, :1], (333, 77), False, 32),
        (astronaut[:, :, :1], (160, 160), True, 7),
        (np.dstack([astronaut, astronaut[:, ::-1, 1]]), (200, 364), False, 32),
        (np.dstack([astronaut, astronaut[::-1, :, 2]]), (53, 999), True, 7),
    ]
    # A seeded fuzz: noise images of 1..300 px a side to 1..2000 px a side (down and up, each axis on its own).
    rng = np.random.default_rng(37)
    for _ in range(6):
        source = (int(rng.integers(1, 301)), int(rng.integers(1, 301)))
        size = (int(rng.integers(1, 2001)), int(rng.integers(1, 2001)))
        size = (size[0], max(1, min(size[1], 300_000 // size[0])))  # at most 300k pixels out
        noise = rng.integers(0, 256, (*source, int(rng.choice([1, 3, 4]))), dtype=np.uint8)
        cases.append((noise, size, bool(rng.integers(2)), int(rng.choice([7, 32]))))
    references = ["pil", "torchvision"] if resample != "lanczos" or TORCH_LANCZOS else ["pil"]
    differing = {}
    for cap in capabilities(emulator):
        for i, (image, size, planar, band) in enumerate(cases):
            for reference in references:
                expected = (pillow if reference == "pil" else torchvision)(image, size, resample)
                got = emulate(
                    emulator, tmp_path, image, size, resample, reference, threads=band, cpu=cap, planar=planar
                )
                differing[(cap, i, reference)] = int((got != expected).sum())
        # A crop of the resize on a canvas of the fill byte, as the processor's padding runs.
        image, size, crop, pad = PHOTOS["coffee"], (150, 200), (10, 20, 120, 170), (140, 180, 4, 6, 255)
        got = emulate(emulator, tmp_path, image, size, resample, "pil", crop=crop, threads=32, pad=pad, cpu=cap)
        top, left, h, w = crop
        expected = padded(pillow(image, size, resample)[:, top : top + h, left : left + w], pad)
        differing[(cap, "pad", "pil")] = int((got != expected).sum())
    assert len(differing) >= len(cases) + 1
    assert not any(differing.values()), {k: v for k, v in differing.items() if v}


@pytest.mark.parametrize("resample", ["cv2_cubic", "cv2_cubic_f32"])
def test_emulated_and_cpu_kernels_equal_opencv(emulator, tmp_path, resample):
    """OpenCV's INTER_CUBIC (resample_kernel.h's cv2 functions): the GPU per-thread code (the float32 first pass,
    then the walker's vertical pass, both index widths) and the CPU op's band code at each capability, against
    cv2.resize itself: photos down, up, one axis, 1 pixel, extreme ratios; 1, 3 and 4 channels, planar and
    interleaved; a seeded fuzz of sizes; a crop on a padded canvas. 0 differing values (float32 bits equal)."""
    astronaut = PHOTOS["astronaut"]
    cases = [  # image, size, planar
        (PHOTOS["coffee"], (224, 224), False),
        (PHOTOS["coffee"], (700, 901), True),
        (astronaut, (97, 600), False),
        (astronaut, (512, 301), False),  # width only
        (astronaut, (1, 1), False),
        (astronaut, (5, 1500), True),
        (astronaut[:, :, :1], (333, 77), False),
        (np.dstack([astronaut, astronaut[:, ::-1, 1]]), (53, 999), True),
    ]
    rng = np.random.default_rng(41)
    for _ in range(6):
        source = (int(rng.integers(1, 200)), int(rng.integers(1, 200)))
        size = (int(rng.integers(1, 400)), int(rng.integers(1, 400)))
        noise = rng.integers(0, 256, (*source, int(rng.choice([1, 3, 4]))), dtype=np.uint8)
        cases.append((noise, size, bool(rng.integers(2))))
    differing = {}
    for cap in [None, *capabilities(emulator)]:  # None: the GPU per-thread code
        for i, (image, size, planar) in enumerate(cases):
            got = emulate(emulator, tmp_path, image, size, resample, "pil", threads=7 if cap else 37, cpu=cap,
                          planar=planar)  # fmt: skip
            differing[(cap, i)] = int((got != opencv(image, size, resample).numpy()).sum())
        image, size, crop, pad = PHOTOS["coffee"], (150, 200), (10, 20, 120, 170), (140, 180, 4, 6, 255)
        got = emulate(emulator, tmp_path, image, size, resample, "pil", crop=crop, threads=32, pad=pad, cpu=cap)
        top, left, h, w = crop
        differing[(cap, "pad")] = int(
            (got != padded(opencv(image, size, resample).numpy()[:, top : top + h, left : left + w], pad)).sum()
        )
    assert not any(differing.values()), {k: v for k, v in differing.items() if v}


@pytest.mark.skipif(not torch_uint8_kernel(), reason="torch resizes uint8 with its integer kernel only at AVX2+")
def test_emulated_and_cpu_kernels_equal_torch_no_antialias(emulator, tmp_path):
    """resample="bilinear_no_antialias" (tests/test_resize_no_antialias.py): the GPU per-thread code (run on the
    host) and the CPU band code at each capability against torch's F.interpolate(antialias=False) itself."""
    astronaut = PHOTOS["astronaut"]
    cases = [
        (PHOTOS["coffee"], (224, 224), False),
        (astronaut, (97, 600), True),
        (astronaut, (512, 301), False),
        (astronaut[:, :, :1], (333, 77), False),
        (np.dstack([astronaut, astronaut[:, ::-1, 1]]), (53, 999), True),
    ]
    differing = {}
    for cap in [None, *capabilities(emulator)]:  # None: the GPU per-thread code
        for i, (image, size, planar) in enumerate(cases):
            got = emulate(emulator, tmp_path, image, size, "bilinear_no_antialias", "pil", threads=7 if cap else 37,
                          cpu=cap, planar=planar)  # fmt: skip
            differing[(cap, i)] = int((got != torch_no_antialias(image, size)).sum())
    assert len(differing) >= 2 * len(cases)
    assert not any(differing.values()), {k: v for k, v in differing.items() if v}


@pytest.mark.skipif(not torch_float_fma_kernel(), reason="torch's float bilinear has FMAs only on x86 at AVX2+")
@pytest.mark.parametrize("threads", [1, 2])
def test_emulated_and_cpu_kernels_equal_torch_float_bilinear(emulator, tmp_path, threads):
    """The float32 filters (tests/test_resize_no_antialias.py): the GPU per-thread code and the CPU band code at
    each capability against torch's F.interpolate of the image as float32, at 1 and 2 torch threads (the filter
    torch_float_bilinear names for the call: with 3 channels and 1 thread, the channels-last kernel)."""
    astronaut = PHOTOS["astronaut"]
    cases = [
        (PHOTOS["coffee"], (224, 224), False),
        (astronaut, (97, 600), True),
        (astronaut, (512, 301), False),
        (astronaut, (40, 50), False),  # out_h + out_w <= 128: the channels-last kernel at any thread count
        (astronaut[:, :, :1], (333, 77), False),
        (np.dstack([astronaut, astronaut[:, ::-1, 1]]), (53, 999), False),
        # float32 inputs of any values (the op reads them as it reads bytes): a normal spread, in both layouts
        (np.random.default_rng(1).normal(0, 100, (61, 83, 3)).astype(np.float32), (200, 41), True),
        (np.random.default_rng(2).normal(0, 1e6, (90, 70, 4)).astype(np.float32), (33, 160), False),
    ]
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        expected = [torch_float(image, size) for image, size, _ in cases]
        filters = [torch_float_bilinear(image.shape[2], size, channels_last=True) for image, size, _ in cases]
    finally:
        torch.set_num_threads(before)
    assert len(set(filters)) == 2  # both kernels run, at either thread count
    differing = {}
    for cap in [None, *capabilities(emulator)]:  # None: the GPU per-thread code
        for i, (image, size, planar) in enumerate(cases):
            got = emulate(emulator, tmp_path, image, size, filters[i], "pil", threads=7 if cap else 37, cpu=cap,
                          planar=planar)  # fmt: skip
            differing[(cap, i)] = int((got != expected[i]).sum())
    assert len(differing) >= 2 * len(cases)
    assert not any(differing.values()), {k: v for k, v in differing.items() if v}


@pytest.mark.skipif(not torch_float_fma_kernel(), reason="torch's float filters have FMAs only on x86 at AVX2+")
@pytest.mark.parametrize("resample", ["bilinear_f32", "bicubic_f32"])
def test_emulated_and_cpu_kernels_equal_torch_float_antialiased(emulator, tmp_path, resample):
    """torch's float32 antialiased filters (tests/test_resize_antialias_f32.py): the GPU per-thread code (the float32
    first pass, then the vertical sums) and the CPU band code at each capability against torch's
    F.interpolate(antialias=True) of the image as float32: photos as bytes, float32 inputs of any values, both
    layouts, one axis or both, a crop on a padded canvas. float32 bits equal."""
    astronaut = PHOTOS["astronaut"]
    cases = [  # image, size, planar, crop, pad
        (PHOTOS["coffee"], (224, 224), False, None, ()),
        (astronaut, (97, 600), True, None, ()),
        (astronaut, (512, 301), False, None, ()),  # width only
        (astronaut, (13, 512), False, None, ()),  # height only, 40x down: windows of 161 taps
        (astronaut[:, :, :1], (700, 77), False, (100, 3, 500, 70), (520, 80, 10, 6, 255)),
        (np.random.default_rng(1).normal(0, 100, (61, 83, 3)).astype(np.float32), (200, 41), True, None, ()),
        (np.random.default_rng(2).normal(0, 1e6, (90, 70, 4)).astype(np.float32), (33, 160), False, None, ()),
        (np.random.default_rng(3).normal(0, 1, (50, 40, 3)).astype(np.float32), (50, 91), True, None, ()),  # width only
        (
            np.random.default_rng(4).normal(0, 1, (50, 40, 3)).astype(np.float32),
            (7, 40),
            False,
            None,
            (),
        ),  # height only
    ]
    mode = {"bilinear_f32": "bilinear", "bicubic_f32": "bicubic"}[resample]
    expected = []
    for image, size, _, crop, pad in cases:
        x = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).float()[None]
        full = torch.nn.functional.interpolate(x, size=size, mode=mode, antialias=True)[0].numpy()
        top, left, h, w = crop or (0, 0, *size)
        box = full[:, top : top + h, left : left + w]
        if pad:
            canvas = np.full((image.shape[2], pad[0], pad[1]), float(pad[4]), np.float32)
            canvas[:, pad[2] : pad[2] + h, pad[3] : pad[3] + w] = box
            box = canvas
        expected.append(box)
    differing = {}
    for cap in [None, *capabilities(emulator)]:  # None: the GPU per-thread code
        for i, (image, size, planar, crop, pad) in enumerate(cases):
            got = emulate(emulator, tmp_path, image, size, resample, "pil", crop=crop, pad=pad,
                          threads=7 if cap else 37, cpu=cap, planar=planar)  # fmt: skip
            differing[(cap, i)] = int((got.view(np.int32) != expected[i].view(np.int32)).sum())
    assert len(differing) >= 2 * len(cases)
    assert not any(differing.values()), {k: v for k, v in differing.items() if v}
