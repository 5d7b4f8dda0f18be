"""Demo: an engine's image path on real photos (scikit-image's samples), through FusedInputNorm.

    python -m fused_input_norm.demo [--device cpu|cuda] [--reps N] [--patches N] [--clip-batch N]

1. Qwen2-VL as an engine runs it. Hugging Face's Qwen2VLImageProcessor resizes each photo on the CPU
   (smart_resize); then either the processor patchifies and normalizes on the CPU (the classic path), or
   it ships uint8 patches and FusedInputNorm normalizes them on the device (engines today), or the resized
   uint8 image itself crosses PCIe and FusedInputNorm.patchify cuts and normalizes it in one pass.
   Printed: the bytes each would move, the time of each, the largest difference from the processor.
2. CLIP/SigLIP: decoded HWC uint8 images to NCHW bf16 in one call, the module on a permuted view.
3. Throughput on a batch of uint8 patches: the module, the op into a preallocated output, the eager code.
4. Native photos to pixel_values, the resize included: the processor (resize, normalize, patchify on the
   CPU) against FusedInputNorm.patchify(max_pixels=...), which resizes exactly as the processor does
   (reference="torchvision" for the default processor, "pil" for the Pil one) in the same pass. Printed:
   the largest difference from each processor and the times, one thread, for the photos and a 12 MP one.

Needs scikit-image and transformers (scripts/demo.sh installs them).
"""

import argparse
import textwrap

import numpy as np
import torch

from .bench import CLIP_MEAN, CLIP_STD, Timer, time_interleaved
from .module import FusedInputNorm

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket")


def photos() -> dict[str, torch.Tensor]:
    """The sample photos as decoded: uint8 [H, W, 3]."""
    from skimage import data

    return {name: torch.from_numpy(getattr(data, name)()) for name in PHOTOS}


def processor_config(processor) -> dict:
    return {
        k: getattr(processor, k) for k in ("do_rescale", "rescale_factor", "do_normalize", "image_mean", "image_std")
    }


def processor_resize(processor, hwc: torch.Tensor) -> torch.Tensor:
    """The processor's own resize (smart_resize to multiples of patch_size * merge_size, bicubic): uint8 [3, H, W]."""
    from transformers.image_processing_backends import PilBackend

    chw = hwc.permute(2, 0, 1)
    kwargs = {
        "size": processor.size,
        "resample": processor.resample,
        "factor": processor.patch_size * processor.merge_size,
    }
    if isinstance(processor, PilBackend):  # transformers' fallback where torchvision is missing: NumPy in and out
        return torch.from_numpy(processor.resize(chw.numpy(), **kwargs))
    return processor.resize(chw[None], **kwargs)[0]


def megabytes(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def qwen2vl_flow(device: torch.device, reps: int) -> None:
    from transformers import Qwen2VLImageProcessor

    processor = Qwen2VLImageProcessor()  # the checkpoints' config: CLIP constants, patch 14, merge 2, temporal 2
    with torch.device(device):
        norm = FusedInputNorm.from_preprocessor_config(processor_config(processor))
    print(f"1. Qwen2-VL on {device}: {type(processor).__name__}() resizes, FusedInputNorm({norm.extra_repr()})")
    print(
        f"\n{'photo':<10}{'decoded':>9}{'resized':>9}{'patches':>9}{'uint8 image':>13}{'uint8 patches':>15}"
        f"{'max |patchify - processor|':>28}"
    )
    resized, image_bytes, patch_bytes, fp32_bytes = [], 0, 0, 0
    for name, hwc in photos().items():
        image = processor_resize(processor, hwc)  # the uint8 image an engine holds
        resized.append(image)
        expected = processor(hwc.numpy(), return_tensors="pt")  # resize + normalize + patchify, all in the processor
        got, grid = norm.patchify(image.to(device), torch.float32)
        assert torch.equal(grid, expected["image_grid_thw"])
        diff = (got.cpu() - expected["pixel_values"]).abs().max().item()
        patches = expected["pixel_values"].numel()
        image_bytes, patch_bytes, fp32_bytes = (
            image_bytes + image.numel(),
            patch_bytes + patches,
            fp32_bytes + 4 * patches,
        )
        size = "x".join(map(str, hwc.shape[:2])), "x".join(map(str, image.shape[1:]))
        print(
            f"{name:<10}{size[0]:>9}{size[1]:>9}{grid.prod().item():>9}{megabytes(image.numel()):>13}"
            f"{megabytes(patches):>15}{diff:>28.2g}"
        )
    print(
        f"\nOver PCIe for the 4 photos: the uint8 images {megabytes(image_bytes)}, uint8 patches "
        f"{megabytes(patch_bytes)} ({patch_bytes / image_bytes:.1f}x: a still image is its frame twice), fp32 patches "
        f"{megabytes(fp32_bytes)} ({fp32_bytes / image_bytes:.1f}x)."
    )

    def sync(result):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return result

    # Each path from the resized uint8 images on the host to bf16 patch rows on the device, wall clock.
    patchify_path = "uint8 images to the device, FusedInputNorm.patchify"
    times = time_interleaved(
        {
            "processor normalizes + patchifies on the CPU, fp32 to the device": lambda: sync(
                processor(resized, do_resize=False, return_tensors="pt")["pixel_values"].to(device).to(torch.bfloat16)
            ),
            "processor patchifies on the CPU, uint8 patches to the device, FusedInputNorm": lambda: sync(
                norm(
                    processor(resized, do_resize=False, do_rescale=False, do_normalize=False, return_tensors="pt")[
                        "pixel_values"
                    ].to(device),
                    torch.bfloat16,
                )
            ),
            patchify_path: lambda: sync(norm.patchify([i.to(device) for i in resized], torch.bfloat16)),
        },
        Timer(torch.device("cpu")),
        reps,
    )
    print(f"Resized images -> bf16 patch rows on {device} (all 4 photos per call, median of {reps}, wall clock):")
    for name, ms in times.items():
        print(f"  {name:<80}{ms:8.2f} ms")
    if times[patchify_path] > min(times.values()):
        text = (
            "patchify was not the fastest path in this run. It reads the image through the op's strided engine: "
            "each 14-pixel patch row comes from another image row, gathered before it is normalized, which costs "
            "more per byte than a contiguous pass (PERF_NOTES.md); on a busy machine rerun with more --reps. "
            "What it removes regardless: half the bytes over PCIe and the processor's CPU patchify."
        )
        print(textwrap.fill(text, width=110))


def nchw_from_hwc(device: torch.device, batch: int, reps: int) -> None:
    with torch.device(device):
        norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    side = 224
    crops = [hwc[:side, :side] for hwc in photos().values()]
    images = torch.stack([crops[i % len(crops)] for i in range(batch)]).to(device)  # [B, H, W, 3], as decoded
    nchw = images.permute(0, 3, 1, 2)  # a view: no copy
    out = norm(nchw, torch.bfloat16)
    w, b = norm.weight.view(3, 1, 1), norm.bias.view(3, 1, 1)
    eager = (nchw.to(torch.float32) * w + b).to(torch.bfloat16)
    assert out.shape == (batch, 3, side, side) and out.is_contiguous()
    floor = torch.empty(out.shape, dtype=torch.bfloat16, device=device)
    times = time_interleaved(
        {
            "norm(images.permute(0, 3, 1, 2), torch.bfloat16)": lambda: norm(nchw, torch.bfloat16),
            "eager: permute, float, mul-add, bf16": lambda: (nchw.to(torch.float32) * w + b).to(torch.bfloat16),
            "floor: copy into NCHW bf16, no math": lambda: floor.copy_(nchw),
        },
        Timer(device),
        reps,
    )
    print(
        f"\n2. CLIP/SigLIP: {batch} HWC uint8 crops {side}x{side} -> NCHW bf16 on {device}, one call; "
        f"max |module - eager| {(out.float() - eager.float()).abs().max().item():.2g}, median of {reps}:"
    )
    for name, ms in times.items():
        print(f"  {name:<52}{ms:8.2f} ms")


def patch_throughput(device: torch.device, num_patches: int, reps: int) -> None:
    from transformers import Qwen2VLImageProcessor

    raw = Qwen2VLImageProcessor()(
        [p.numpy() for p in photos().values()], do_rescale=False, do_normalize=False, return_tensors="pt"
    )["pixel_values"]  # uint8 patch rows [N, 1176], what engines ship today
    batch = raw.repeat((num_patches + raw.shape[0] - 1) // raw.shape[0], 1)[:num_patches].contiguous().to(device)
    with torch.device(device):
        norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    view = batch.view(num_patches, 3, -1)
    out = torch.empty(view.shape, dtype=torch.bfloat16, device=device)
    w, b = norm.weight.view(3, 1), norm.bias.view(3, 1)
    timer = Timer(device)
    times = time_interleaved(
        {
            "FusedInputNorm (allocates)": lambda: norm(batch, torch.bfloat16),
            "op into a preallocated out": lambda: torch.ops.fused_input_norm.affine_out(
                out, view, norm.weight, norm.bias, 1
            ),
            "eager mul-add (in-tree)": lambda: (view.to(torch.float32) * w + b).to(torch.bfloat16),
        },
        timer,
        reps,
    )
    moved = batch.numel() * 3  # uint8 in, bf16 out
    print(
        f"\n3. {num_patches} patches of those photos, uint8 -> bf16 on {device}, {torch.get_num_threads()} threads, "
        f"median of {reps}:"
    )
    eager_ms = times["eager mul-add (in-tree)"]
    for name, ms in times.items():
        print(f"  {name:<28}{ms:9.2f} ms {moved / ms / 1e6:8.1f} GB/s   {eager_ms / ms:5.1f}x eager")

    allocating, preallocated = times["FusedInputNorm (allocates)"], times["op into a preallocated out"]
    if device.type == "cpu" and allocating > 1.2 * preallocated:
        explain_first_touch(out, allocating - preallocated, timer, reps)


def explain_first_touch(out: torch.Tensor, gap_ms: float, timer: Timer, reps: int) -> None:
    """Says why an allocating call is slower than out= on the CPU, with a measurement that isolates the cause."""
    fill = time_interleaved(
        {"fresh": lambda: torch.empty_like(out).fill_(0), "reused": lambda: out.fill_(0)}, timer, reps
    )
    size_mb = out.numel() * out.element_size() / 1e6
    if fill["fresh"] < 1.2 * fill["reused"]:
        print(
            f"\nThe allocating call was {gap_ms:.1f} ms slower, yet filling a fresh {size_mb:.0f} MB tensor was not slower "
            f"than a reused one ({fill['fresh']:.1f} vs {fill['reused']:.1f} ms): noise from a busy machine; rerun with more --reps."
        )
        return
    text = (
        f"Why the allocating call is {gap_ms:.1f} ms slower than out= on the CPU: its {size_mb:.0f} MB output is fresh "
        "memory. The CPU allocator hands large blocks back to the OS and maps new ones, so the first write to each "
        "page faults into the kernel, which zeroes and maps it. Filling a fresh tensor of that size takes "
        f"{fill['fresh']:.1f} ms here, a reused one {fill['reused']:.1f} ms. The op asks for 2 MiB transparent huge "
        "pages for an output this large before it writes (madvise; transparent huge pages here: "
        f"{thp_mode()}), which removes most of the faults but not the zeroing, nor the kernel's compaction when "
        "memory is fragmented. Preallocate and call affine_out to pay neither."
    )
    print("\n" + textwrap.fill(text, width=110))


def thp_mode() -> str:
    """The kernel's transparent huge page mode: [always], [madvise] (only where asked) or [never]."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return next(w for w in f.read().split() if w.startswith("["))
    except (OSError, StopIteration):
        return "unknown"


def native_flow(device: torch.device, reps: int) -> None:
    from PIL import Image
    from transformers import Qwen2VLImageProcessor

    try:
        from transformers import Qwen2VLImageProcessorPil
    except ImportError:  # a transformers without the Pil backend class
        Qwen2VLImageProcessorPil = None
    processor = Qwen2VLImageProcessor()
    with torch.device(device):
        norm = FusedInputNorm.from_preprocessor_config(processor_config(processor))
    max_pixels = processor.size["longest_edge"]
    min_pixels = processor.size["shortest_edge"]
    images = dict(photos())
    astronaut = images["astronaut"].numpy()
    images["12 MP (astronaut, upscaled)"] = torch.from_numpy(
        np.asarray(Image.fromarray(astronaut).resize((4032, 3024), Image.BICUBIC)).copy()
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    print(f"\n4. Native photos to Qwen2-VL pixel_values on {device}, the resize included (1 thread, median of {reps}):")
    print(
        f"{'photo':<28}{'decoded':>11}{'resized':>11}{'max |ours - processor|':>24}{'vs Pil processor':>18}"
        f"{'processor':>12}{'ours':>10}"
    )
    try:
        for name, hwc in images.items():
            chw = hwc.permute(2, 0, 1).contiguous()
            expected = processor(chw, return_tensors="pt")
            got, grid = norm.patchify(
                chw.to(device), torch.float32, min_pixels=min_pixels, max_pixels=max_pixels, reference="torchvision"
            )
            assert torch.equal(grid, expected["image_grid_thw"])
            diff = (got.cpu() - expected["pixel_values"]).abs().max().item()
            pil_diff = "-"
            if Qwen2VLImageProcessorPil is not None:
                pil_expected = Qwen2VLImageProcessorPil()(Image.fromarray(hwc.numpy()), return_tensors="pt")
                got_pil, _ = norm.patchify(
                    hwc.to(device), torch.float32, channel_dim=-1, min_pixels=min_pixels, max_pixels=max_pixels
                )
                pil_diff = f"{(got_pil.cpu() - pil_expected['pixel_values']).abs().max().item():.1e}"

            on_device = chw.to(device)

            def ours(image=on_device):
                rows, _ = norm.patchify(
                    image, torch.bfloat16, min_pixels=min_pixels, max_pixels=max_pixels, reference="torchvision"
                )
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                return rows

            times = time_interleaved(
                {"processor": lambda image=chw: processor(image, return_tensors="pt")["pixel_values"], "ours": ours},
                Timer(torch.device("cpu")),
                reps,
            )
            h, w = hwc.shape[:2]
            resized = f"{grid[0, 2].item() * 14}x{grid[0, 1].item() * 14}"
            print(
                f"{name:<28}{f'{w}x{h}':>11}{resized:>11}{diff:>24.1e}{pil_diff:>18}"
                f"{times['processor']:>9.1f} ms{times['ours']:>7.1f} ms"
            )
    finally:
        torch.set_num_threads(threads)
    text = (
        "ours: the uint8 image at its native size is resized, normalized and cut into patch rows in one op call, "
        "bit for bit the processor's resize (the differences above are fp32 rounding of the normalization). "
        "On a GPU the native image crosses PCIe instead of the resized one; decoding there (nvJPEG) would send "
        "only the encoded bytes."
    )
    print(textwrap.fill(text, width=110))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--patches", type=int, default=70000, help="batch size for the throughput comparison")
    parser.add_argument("--clip-batch", type=int, default=64, help="images in the HWC -> NCHW batch")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    qwen2vl_flow(device, args.reps)
    nchw_from_hwc(device, args.clip_batch, args.reps)
    patch_throughput(device, args.patches, args.reps)
    native_flow(device, args.reps)


if __name__ == "__main__":
    main()
