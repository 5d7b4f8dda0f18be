"""OpenCV's cubic through the package against Mistral's way of doing it: cv2.resize of the image as float32
(INTER_CUBIC) then NumPy's /255 and CLIP mean/std, IPP on and off, against FusedInputNorm.resize with
resample="cv2_cubic_f32" (the same values, normalized and laid out as CHW) and against what the vLLM plugin runs for
Mistral-format checkpoints (vllm_mistral: the raw cv2_cubic_f32 resize, then NumPy's three float32 steps). 1
thread each, medians of 7 alternated rounds in one process; prints the max |difference| of each to the IPP-off
reference after normalization, and how far IPP's resize is from OpenCV's own (why vllm_mistral calls cv2.resize
itself under IPP). With mistral_common installed, its ImageEncoder against vllm_mistral, IPP off and on.

    .venv/bin/python scripts/bench_cv2_cubic.py   (needs opencv-python-headless and scikit-image)
"""

import statistics
import time

import cv2
import numpy as np
import skimage.data
import torch

from fused_input_norm import FusedInputNorm
from fused_input_norm.vllm_mistral import _transformed

MEAN = np.array([0.48145466, 0.4578275, 0.40821073], np.float32)
STD = np.array([0.26862954, 0.26130258, 0.27577711], np.float32)
CASES = [
    ((1080, 1920), (576, 1024)),
    ((3024, 4032), (768, 1024)),
    ((300, 700), (304, 704)),
]  # the last: a slight upscale


def mistral(image: np.ndarray, size: tuple[int, int], ipp: bool) -> np.ndarray:
    """Mistral's ImageEncoder's arithmetic: cv2.resize of the image as float32, then /255 and mean/std."""
    cv2.ipp.setUseIPP(ipp)
    resized = cv2.resize(image.astype(np.float32), (size[1], size[0]), interpolation=cv2.INTER_CUBIC)
    return np.ascontiguousarray(((resized / 255.0 - MEAN) / STD).transpose(2, 0, 1))


def served_without_ipp(chw: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """vllm_mistral's path where OpenCV runs its own INTER_CUBIC: the engine's cv2_cubic_f32 filter."""
    cv2.ipp.setUseIPP(False)
    return _transformed(chw, size, MEAN, STD, cv2)


def main() -> None:
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    module = FusedInputNorm(MEAN.tolist(), STD.tolist(), 1 / 255)
    tile = skimage.data.astronaut()
    for (height, width), size in CASES:
        image = np.ascontiguousarray(np.tile(tile, (height // 512 + 1, width // 512 + 1, 1))[:height, :width])
        chw = torch.from_numpy(image).permute(2, 0, 1)
        calls = {
            "cv2+numpy, IPP on": (mistral, image, size, True),
            "cv2+numpy, IPP off": (mistral, image, size, False),
            "fused cv2_cubic_f32": (module.resize, chw, torch.float32, size),
            "vllm_mistral": (served_without_ipp, chw, size),
        }
        times = {name: [] for name in calls}
        for _ in range(7):
            for name, (call, *args) in calls.items():
                kwargs = {"resample": "cv2_cubic_f32"} if call == module.resize else {}
                start = time.perf_counter()
                call(*args, **kwargs)
                times[name].append(time.perf_counter() - start)
        medians = ", ".join(f"{name} {statistics.median(t) * 1e3:.1f} ms" for name, t in times.items())
        print(f"{height}x{width} -> {size[0]}x{size[1]}: {medians}")
        fused = module.resize(chw, torch.float32, size, resample="cv2_cubic_f32").numpy()
        reference = mistral(image, size, False)
        served = served_without_ipp(chw, size).numpy()
        print(
            f"  max |fused - IPP-off reference| = {np.abs(reference - fused).max():.3g}, "
            f"vllm_mistral: {np.abs(reference - served).max():.3g} ({np.mean(reference == served):.2%} bit-equal)"
        )
        raw = {}
        for ipp in (True, False):
            cv2.ipp.setUseIPP(ipp)
            raw[ipp] = cv2.resize(image.astype(np.float32), (size[1], size[0]), interpolation=cv2.INTER_CUBIC)
        ulps = np.abs(raw[True] - raw[False]) / np.spacing(np.maximum(np.abs(raw[False]), np.float32(1)))
        print(
            f"  IPP on vs off: resize up to {np.abs(raw[True] - raw[False]).max():.3g} ({ulps.max():.0f} units in the "
            f"last place of values >= 1, {np.mean(raw[True] == raw[False]):.1%} equal); after normalization up to "
            f"{np.abs(mistral(image, size, True) - reference).max():.3g}"
        )
    cv2.ipp.setUseIPP(True)
    encoder_rows(tile)


def encoder_rows(tile: np.ndarray) -> None:
    """With mistral_common installed: its ImageEncoder on a PIL image (IPP on and off), as vLLM's
    MistralCommonImageProcessor calls it, against vllm_mistral's served path for the same image (its token grid,
    the PIL image read into a tensor, the fused resize and normalize)."""
    try:
        from mistral_common.protocol.instruct.chunk import ImageChunk
        from mistral_common.tokens.tokenizers.image import ImageConfig, ImageEncoder, SpecialImageIDs
    except ImportError:
        print("mistral_common is not installed: no encoder rows")
        return
    from PIL import Image

    from fused_input_norm.images import pil_to_chw
    from fused_input_norm.vllm_plugin import raise_pillow_block_size

    raise_pillow_block_size()  # as the plugin does in vLLM: photos in one block, read in place

    # Mistral Small 3.1's vision settings (params.json's vision_encoder)
    encoder = ImageEncoder(ImageConfig(16, 1024, 2), SpecialImageIDs(img=10, img_break=12, img_end=13))

    def served(image, ipp):
        cv2.ipp.setUseIPP(ipp)
        width, height = encoder._image_to_num_tokens(image)
        return _transformed(pil_to_chw(image), (height * 32, width * 32), MEAN, STD, cv2)

    def stock(image, ipp):
        cv2.ipp.setUseIPP(ipp)
        return encoder(ImageChunk(image=image)).image

    for height, width in [(1080, 1920), (3024, 4032)]:
        image = Image.fromarray(
            np.ascontiguousarray(np.tile(tile, (height // 512 + 1, width // 512 + 1, 1))[:height, :width])
        )
        calls = {
            "ImageEncoder, IPP on": (stock, True),
            "ImageEncoder, IPP off": (stock, False),
            "vllm_mistral, IPP on": (served, True),
            "vllm_mistral, IPP off": (served, False),
        }
        times = {name: [] for name in calls}
        for _ in range(7):
            for name, (call, *args) in calls.items():
                start = time.perf_counter()
                call(image, *args)
                times[name].append(time.perf_counter() - start)
        medians = {name: statistics.median(t) for name, t in times.items()}
        equal = [np.array_equal(stock(image, ipp), served(image, ipp).numpy()) for ipp in (False, True)]
        print(
            f"encoder {height}x{width}: "
            + ", ".join(f"{name} {t * 1e3:.1f} ms" for name, t in medians.items())
            + f"; vllm_mistral {medians['ImageEncoder, IPP off'] / medians['vllm_mistral, IPP off']:.2f}x IPP off, "
            f"{medians['ImageEncoder, IPP on'] / medians['vllm_mistral, IPP on']:.2f}x IPP on; bit-equal: IPP off "
            f"{equal[0]}, IPP on {equal[1]}"
        )
    cv2.ipp.setUseIPP(True)


if __name__ == "__main__":
    main()
