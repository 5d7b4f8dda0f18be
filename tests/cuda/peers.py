"""The GPU check's Python side (tests/cuda/): real photos for it, and its peers on the same photos with the
machine's own torch. Needs torch (CUDA), numpy, Pillow, scikit-image; torchvision for the JPEG decode. Not
this package: it runs where the extension is not built.

    python tests/cuda/peers.py photos DIR        # NAME_HxW.rgb (uint8 HWC) + coffee_3024x4032.jpg
    python tests/cuda/peers.py pil-rule          # the installed Pillow's pass-order rule: 13, 12.2 or 12.1
    python tests/cuda/peers.py peers --photos DIR [--dumps DIR] [--results results.json] --json peers.json

peers: (1) the check's dumped resizes (identity affine: the uint8 values) against Pillow's Image.resize and
torch's CPU uint8 antialiased interpolate themselves: differing values, expected 0; (2) what a CUDA tensor
gets today, F.interpolate(float, antialias=True) + round + normalize + patchify, timed with CUDA events,
and its values' difference from Pillow's as counts of differing values (torch's CPU uint8 kernel too);
(3) torchvision.io.decode_jpeg(device="cuda") of a 12 MP JPEG, timed, against Pillow's decode.
"""

import argparse
import io
import json
import math
import pathlib
import statistics
import sys
import time

import numpy as np

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket")
SIZES = ((1080, 1920), (3024, 4032))  # plus each photo's own size
MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]


def smart_resize(h: int, w: int, factor: int = 28, min_px: int = 56 * 56, max_px: int = 28 * 28 * 1280):
    """transformers' Qwen2-VL smart_resize."""
    hb, wb = round(h / factor) * factor, round(w / factor) * factor
    if hb * wb > max_px:
        beta = math.sqrt(h * w / max_px)
        hb, wb = (
            max(factor, math.floor(h / beta / factor) * factor),
            max(factor, math.floor(w / beta / factor) * factor),
        )
    elif hb * wb < min_px:
        beta = math.sqrt(min_px / (h * w))
        hb, wb = math.ceil(h * beta / factor) * factor, math.ceil(w * beta / factor) * factor
    return hb, wb


def pil_rule() -> str:
    import PIL

    major, minor = (int(p) for p in PIL.__version__.split(".")[:2])
    return "13" if major >= 13 else "12.2" if (major, minor) >= (12, 2) else "12.1"


def make_photos(out: pathlib.Path) -> None:
    from PIL import Image
    from skimage import data

    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for name in PHOTOS:
        native = Image.fromarray(np.ascontiguousarray(getattr(data, name)())).convert("RGB")
        for h, w in ((native.height, native.width), *SIZES):
            image = (
                native if (h, w) == (native.height, native.width) else native.resize((w, h), Image.Resampling.BICUBIC)
            )
            (out / f"{name}_{h}x{w}.rgb").write_bytes(np.asarray(image).tobytes())
            if name == "coffee" and (h, w) == SIZES[-1]:
                image.save(out / f"{name}_{h}x{w}.jpg", "JPEG", quality=90)
    print(f"photos: {len(PHOTOS) * 3} in {out} ({time.perf_counter() - start:.1f} s)")


def load(path: pathlib.Path) -> np.ndarray:
    h, w = (int(v) for v in path.stem.rsplit("_", 1)[1].split("x"))
    return np.fromfile(path, dtype=np.uint8).reshape(h, w, 3)


def pil_resize(hwc: np.ndarray, size, resample: str) -> np.ndarray:
    from PIL import Image

    filt = Image.Resampling.BICUBIC if resample == "bicubic" else Image.Resampling.BILINEAR
    return np.asarray(Image.fromarray(hwc).resize((size[1], size[0]), filt)).transpose(2, 0, 1)


def torch_cpu_resize(hwc: np.ndarray, size, resample: str) -> np.ndarray:
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(hwc).permute(2, 0, 1)[None].contiguous()
    return F.interpolate(x, size=size, mode=resample, antialias=True)[0].numpy()


def differing(a: np.ndarray, b: np.ndarray) -> dict:
    d = np.abs(a.astype(np.int16) - b.astype(np.int16))
    return {"differing": int((d != 0).sum()), "of": int(d.size), "max_levels": int(d.max())}


def cuda_ms(fn, reps: int) -> float:
    import torch

    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def check_dumps(photos: pathlib.Path, dumps: pathlib.Path) -> list:
    """The check's uint8 resizes against Pillow ("pil") and torch's CPU uint8 kernel ("torchvision")."""
    rows = []
    for path in sorted(dumps.glob("*.u8")):
        name, size, ref, resample, out = path.stem.split("_")
        oh, ow = (int(v) for v in out.split("x"))
        hwc = load(photos / f"{name}_{size}.rgb")
        want = pil_resize(hwc, (oh, ow), resample) if ref == "pil" else torch_cpu_resize(hwc, (oh, ow), resample)
        got = np.fromfile(path, dtype=np.uint8).reshape(3, oh, ow)
        rows.append(
            {"dump": path.stem, "against": "Pillow" if ref == "pil" else "torch CPU uint8", **differing(got, want)}
        )
    bad = [r for r in rows if r["differing"]]
    print(f"the check's resizes vs Pillow / torch CPU: {len(rows) - len(bad)} of {len(rows)} bit-exact")
    for r in bad:
        print(f"  DIFFERS {r}")
    return rows


def float_path(photos: pathlib.Path, reps: int) -> list:
    """torch's CUDA float antialiased interpolate + round + normalize + patchify (Qwen rows, bf16)."""
    import torch
    import torch.nn.functional as F

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # cpu: to try the script without a GPU
    w = (1 / (255 * torch.tensor(STD))).view(3, 1, 1).to(dev)
    b = (-torch.tensor(MEAN) / torch.tensor(STD)).view(3, 1, 1).to(dev)
    rows = []
    for h, wd in SIZES:
        for name in PHOTOS:
            hwc = load(photos / f"{name}_{h}x{wd}.rgb")
            size = smart_resize(h, wd)
            image = torch.from_numpy(hwc).to(dev).permute(2, 0, 1)  # HWC on the device, as a decoder leaves it

            def resized(mode, image=image, size=size):
                x = F.interpolate(image[None].float(), size=size, mode=mode, antialias=True)[0]
                return x.round_().clamp_(0, 255).to(torch.uint8)

            def rows_bf16(image=image, size=size):
                x = resized("bicubic", image, size).float() * w + b
                gh, gw = size[0] // 28, size[1] // 28
                x = x[None].expand(2, -1, -1, -1).reshape(1, 2, 3, gh, 2, 14, gw, 2, 14)
                return x.permute(0, 3, 6, 4, 7, 2, 1, 5, 8).reshape(gh * gw * 4, 1176).to(torch.bfloat16)

            row = {"photo": f"{name} {wd}x{h}", "size": list(size)}
            for mode in ("bilinear", "bicubic"):
                pil = pil_resize(hwc, size, mode)
                row[f"cuda_float_{mode}_vs_pillow"] = differing(resized(mode).cpu().numpy(), pil)
                row[f"cpu_uint8_{mode}_vs_pillow"] = differing(torch_cpu_resize(hwc, size, mode), pil)
            if name == "coffee" and dev.type == "cuda":
                row["float_interpolate_bicubic_us"] = cuda_ms(lambda: resized("bicubic"), reps) * 1e3
                row["float_path_rows_bf16_us"] = cuda_ms(rows_bf16, reps) * 1e3
            rows.append(row)
            print(f"  {row}")
    return rows


def jpeg_decode(photos: pathlib.Path, reps: int) -> dict:
    import torch
    from PIL import Image
    from torchvision.io import decode_jpeg

    path = next(photos.glob("*.jpg"))
    data = torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8)
    gpu = decode_jpeg(data, device="cuda")
    wall = []
    for _ in range(reps):
        start = time.perf_counter()
        decode_jpeg(data, device="cuda")
        torch.cuda.synchronize()
        wall.append((time.perf_counter() - start) * 1e3)
    cpu_ms = []
    for _ in range(max(3, reps // 4)):
        start = time.perf_counter()
        cpu = decode_jpeg(data)
        cpu_ms.append((time.perf_counter() - start) * 1e3)
    pil = np.asarray(Image.open(io.BytesIO(path.read_bytes())).convert("RGB")).transpose(2, 0, 1)
    result = {
        "jpeg": path.name,
        "bytes": len(data),
        "cuda_decode_ms_wall_synced": statistics.median(wall),
        "cuda_decode_ms_events": cuda_ms(lambda: decode_jpeg(data, device="cuda"), reps),
        "cpu_decode_ms": statistics.median(cpu_ms),
        "cuda_vs_pillow": differing(gpu.cpu().numpy(), pil),
        "cpu_vs_pillow": differing(cpu.numpy(), pil),
    }
    print(f"decode_jpeg 12 MP: {result}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["photos", "pil-rule", "peers"])
    parser.add_argument("dir", nargs="?")
    parser.add_argument("--photos", type=pathlib.Path)
    parser.add_argument("--dumps", type=pathlib.Path)
    parser.add_argument("--results", type=pathlib.Path)
    parser.add_argument("--json", type=pathlib.Path)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    if args.command == "photos":
        make_photos(pathlib.Path(args.dir))
        return 0
    if args.command == "pil-rule":
        print(pil_rule())
        return 0
    import PIL
    import torch

    out = {"torch": torch.__version__, "pillow": PIL.__version__, "pil_rule": pil_rule()}
    out["device"] = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    status = 0
    steps = [("dumps_vs_references", lambda: check_dumps(args.photos, args.dumps))] if args.dumps else []
    steps += [("cuda_float_path", lambda: float_path(args.photos, args.reps))]
    steps += [("decode_jpeg", lambda: jpeg_decode(args.photos, args.reps))]
    for key, step in steps:
        try:
            out[key] = step()
        except Exception as error:  # one failing peer must not hide the others
            out[key] = {"error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"}
            print(f"{key} failed: {out[key]['error']}")
            status = 1
    dumps = out.get("dumps_vs_references")
    if isinstance(dumps, list) and any(r["differing"] for r in dumps):
        status = 1
    if args.results and args.results.exists():  # the check's timings beside the float path's
        ours = {t["case"]: t["us"] for t in json.loads(args.results.read_text()).get("timings", [])}
        out["check_timings_us"] = {k: v for k, v in ours.items() if k.startswith("resize")}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
