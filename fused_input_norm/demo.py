"""Demo: normalize real photos (scikit-image's samples) the way a Qwen2-VL engine does, through the op.

    python -m fused_input_norm.demo [--device cpu|cuda] [--patches N]

Each photo is cropped to whole 28x28 blocks and flattened into Qwen2-VL patch rows [N, 3*2*14*14]
(uint8, channel-major in each row, the frame repeated twice as the processor does for still images).
The rows go through FusedInputNorm into bf16; the demo prints what came out, checks it against the eager
formula, and times the op against the eager multiply-add on a batch of those patches.
"""

import argparse

import torch

from .bench import CLIP_MEAN, CLIP_STD, Timer, time_interleaved
from .module import FusedInputNorm

PATCH, TEMPORAL, MERGE = 14, 2, 2


def photos() -> dict[str, torch.Tensor]:
    from skimage import data  # the demo's only extra dependency: pip install scikit-image

    return {name: torch.from_numpy(getattr(data, name)()) for name in ("astronaut", "coffee", "chelsea", "rocket")}


def to_patches(hwc: torch.Tensor) -> torch.Tensor:
    """uint8 [H, W, 3] -> uint8 [num_patches, 3 * 2 * 14 * 14], Qwen2-VL's order."""
    block = PATCH * MERGE
    h, w = hwc.shape[0] // block * block, hwc.shape[1] // block * block
    chw = hwc[:h, :w].permute(2, 0, 1)
    frames = chw.unsqueeze(0).expand(TEMPORAL, -1, -1, -1)  # [T, C, H, W]
    gh, gw = h // PATCH, w // PATCH
    x = frames.reshape(TEMPORAL, 3, gh // MERGE, MERGE, PATCH, gw // MERGE, MERGE, PATCH)
    x = x.permute(2, 5, 3, 6, 1, 0, 4, 7)  # [gh/2, gw/2, 2, 2, C, T, P, P]
    return x.reshape(gh * gw, 3 * TEMPORAL * PATCH * PATCH).contiguous()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--patches", type=int, default=70000, help="batch size for the throughput comparison")
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args(argv)
    device = torch.device(args.device)

    with torch.device(device):
        norm = FusedInputNorm(CLIP_MEAN, CLIP_STD, 1 / 255)
    print(f"FusedInputNorm({norm.extra_repr()}) on {device}")
    mean = torch.tensor(CLIP_MEAN, device=device).repeat_interleave(TEMPORAL * PATCH * PATCH)
    std = torch.tensor(CLIP_STD, device=device).repeat_interleave(TEMPORAL * PATCH * PATCH)

    all_patches = []
    print(f"\n{'photo':<10}{'size':>11}{'patches':>9}   per-channel mean / std of the bf16 output   max |op - eager|")
    for name, image in photos().items():
        patches = to_patches(image).to(device)
        all_patches.append(patches)
        y = norm(patches, torch.bfloat16)
        eager = ((patches.float() / 255 - mean) / std).to(torch.bfloat16)
        by_channel = y.float().view(-1, 3, TEMPORAL * PATCH * PATCH).transpose(0, 1).reshape(3, -1)
        stats = "  ".join(
            f"{m:+.2f}/{s:.2f}" for m, s in zip(by_channel.mean(1).tolist(), by_channel.std(1).tolist(), strict=True)
        )
        diff = (y.float() - eager.float()).abs().max().item()
        print(f"{name:<10}{'x'.join(map(str, image.shape[:2])):>11}{patches.shape[0]:>9}   {stats:<42}{diff:.4f}")

    batch = torch.cat(all_patches)
    batch = batch.repeat((args.patches + batch.shape[0] - 1) // batch.shape[0], 1)[: args.patches].contiguous()
    out = torch.empty(batch.shape, dtype=torch.bfloat16, device=device)
    w, b = norm.weight.view(3, 1), norm.bias.view(3, 1)
    view = batch.view(-1, 3, TEMPORAL * PATCH * PATCH)
    times = time_interleaved(
        {
            "FusedInputNorm": lambda: norm(batch, torch.bfloat16),
            "op into a preallocated out": lambda: torch.ops.fused_input_norm.affine_out(
                out.view(view.shape), view, norm.weight, norm.bias, 1
            ),
            "eager mul-add (in-tree)": lambda: (view.to(torch.float32) * w + b).to(torch.bfloat16),
        },
        Timer(device),
        args.reps,
    )
    moved = batch.numel() * 3  # uint8 in, bf16 out
    print(
        f"\n{args.patches} patches of those photos, uint8 -> bf16, {torch.get_num_threads()} threads, median of {args.reps}:"
    )
    eager_ms = times["eager mul-add (in-tree)"]
    for name, ms in times.items():
        print(f"  {name:<28}{ms:9.2f} ms {moved / ms / 1e6:8.1f} GB/s   {eager_ms / ms:5.1f}x eager")


if __name__ == "__main__":
    main()
