"""The resize on the GPU, timed against what engines do there today: torch's float antialiased interpolate
(the only CUDA path torchvision has for uint8) followed by this package's normalize (and patchify for
Qwen2-VL). CUDA events, medians of interleaved rounds; the CUDA output is also checked bit-equal to the CPU
op's, which the tests check against Pillow and torchvision. Run by scripts/gpu_check.sh.

    python scripts/gpu_resize_timing.py [--reps N]
"""

import argparse
import io
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

from fused_input_norm import FusedImageProcessor, FusedInputNorm, smart_resize

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def median_ms(fns: dict, reps: int) -> dict:
    times = {name: [] for name in fns}
    for _ in range(2):
        for fn in fns.values():
            fn()
    for _ in range(reps):
        for name, fn in fns.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end))
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    device = torch.device("cuda")
    norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255).to(device)
    rng = np.random.default_rng(0)
    for h, w in [(3024, 4032), (1080, 1920), (600, 800)]:
        # A smooth synthetic photo (noise would be unfair to no one, but photos are smooth).
        base = rng.integers(0, 256, (h // 8, w // 8, 3), dtype=np.uint8)
        hwc = torch.from_numpy(base).permute(2, 0, 1)[None].float()
        image = F.interpolate(hwc, size=(h, w), mode="bilinear")[0].round().clamp(0, 255).to(torch.uint8)
        image = image.to(device).contiguous()
        size = smart_resize(h, w)
        for reference in ("torchvision", "pil"):
            got, _ = norm.patchify(image, torch.bfloat16, max_pixels=28 * 28 * 1280, reference=reference)
            cpu, _ = norm.to("cpu").patchify(
                image.cpu(), torch.bfloat16, max_pixels=28 * 28 * 1280, reference=reference
            )
            norm.to(device)
            differing = int((got.cpu().view(torch.int16) != cpu.view(torch.int16)).sum())
            print(f"{w}x{h} -> {size[1]}x{size[0]} {reference}: CUDA vs CPU op, differing values: {differing}")

        def ours(image=image):
            return norm.patchify(image, torch.bfloat16, max_pixels=28 * 28 * 1280, reference="torchvision")

        def float_path(
            image=image, size=size
        ):  # what a CUDA tensor gets today: cast, interpolate, round, clamp, then normalize
            resized = F.interpolate(image[None].float(), size=size, mode="bicubic", antialias=True)[0]
            resized = resized.round_().clamp_(0, 255).to(torch.uint8)
            return norm.patchify(resized, torch.bfloat16)

        times = median_ms({"ours (exact, one op)": ours, "torch float interpolate + patchify": float_path}, args.reps)
        moved = image.numel() + size[0] * size[1] * 3 * 2 * 2
        for name, ms in times.items():
            print(f"  {name:<40}{ms * 1e3:9.1f} us   {moved / ms / 1e6:8.1f} GB/s (native image read + rows written)")
    clip = torch.randint(0, 256, (3, 1080, 1920), dtype=torch.uint8, device=device)
    times = median_ms(
        {
            "CLIP 224 ours": lambda: norm.resize(clip, torch.bfloat16, (224, 398), crop=(0, 87, 224, 224)),
            "CLIP 224 float path": lambda: norm(
                F.interpolate(clip[None].float(), size=(224, 398), mode="bicubic", antialias=True)[..., 87:311]
                .round_()
                .clamp_(0, 255)
                .to(torch.uint8),
                torch.bfloat16,
            ),
        },
        args.reps,
    )
    for name, ms in times.items():
        print(f"  {name:<40}{ms * 1e3:9.1f} us")
    processor_from_jpeg(args.reps)


def processor_from_jpeg(reps: int) -> None:
    """FusedImageProcessor from JPEG bytes: nvJPEG + the fused resize on the GPU against the same processor
    on the CPU (torchvision's decoder + the CPU kernels), host wall time per call, synchronized."""
    from PIL import Image

    config = {"image_processor_type": "Qwen2VLImageProcessor"}
    on_gpu = FusedImageProcessor.from_preprocessor_config(config, device="cuda", decoder="nvjpeg")
    on_cpu = FusedImageProcessor.from_preprocessor_config(config, device="cpu")
    rng = np.random.default_rng(1)
    for h, w in [(3024, 4032), (1080, 1920)]:
        base = torch.from_numpy(rng.integers(0, 256, (3, h // 8, w // 8), dtype=np.uint8))[None].float()
        hwc = F.interpolate(base, size=(h, w), mode="bilinear")[0].round().clamp(0, 255).to(torch.uint8)
        buffer = io.BytesIO()
        Image.fromarray(hwc.permute(1, 2, 0).contiguous().numpy()).save(buffer, "JPEG", quality=90)
        data = buffer.getvalue()
        gpu_values = on_gpu(data)["pixel_values"]
        differing = int((gpu_values.cpu() != on_cpu(data)["pixel_values"]).sum())
        print(f"processor {w}x{h} JPEG ({len(data) / 1e6:.2f} MB): nvJPEG vs CPU decode, differing values {differing}")
        for name, run in (("GPU (nvJPEG + fused)", on_gpu), ("CPU (same processor)", on_cpu)):
            times = []
            for _ in range(reps):
                start = time.perf_counter()
                run(data)
                torch.cuda.synchronize()
                times.append((time.perf_counter() - start) * 1e3)
            print(f"  {name:<40}{statistics.median(times):9.2f} ms per image, from bytes")


if __name__ == "__main__":
    main()
