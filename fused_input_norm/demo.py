"""Demo: an engine's image path end to end, from the JPEG bytes a request carries to pixel_values on the device.

    python -m fused_input_norm.demo [--device cpu|cuda] [--reps N] [--threads N] [--models qwen2vl,clip]
                                    [--plot FILE.png | --plot '']

Real photos (scikit-image's astronaut, coffee, chelsea, rocket, plus a 1920x1080 and a 4032x3024 (12 MP) photo
made from coffee as the benchmark's resize cases make them), each encoded once to JPEG (Pillow, quality 90),
go through three paths, per image:

(a) what engines run today: PIL.Image.open(bytes).convert("RGB") decodes, then transformers' default
    processor (Qwen2VLImageProcessor, torchvision backend) resizes, normalizes and patchifies on the CPU;
    the float32 pixel_values cross PCIe.
(b) device normalize (vLLM's --mm-device-do-normalize): the same decode and processor with do_rescale=False
    and do_normalize=False, so it emits uint8 patch rows; those cross PCIe and FusedInputNorm normalizes
    them on the device.
(c) fused_input_norm.FusedImageProcessor(reference="torchvision") on the device: the encoded bytes cross
    PCIe and are decoded there (nvJPEG) when the device is CUDA; on a CPU they are decoded on the CPU
    (torchvision.io) and the decoded uint8 image is what would cross. Then RGB, the resize (bit for bit
    the processor's), normalize and layout in one op call.

Printed per photo as it is done: the bytes each path puts on PCIe (on a CPU run: would ship to a GPU), the
host time per image (median of interleaved rounds, synchronized) and the max |difference| from (a); on CUDA,
where (c) decodes with nvJPEG (not Pillow's decoder), also (c) on PIL's decoded pixels and the decoders' own
difference, which separate the arithmetic's part from the decoders'. Then a Markdown table and a plot (with
matplotlib): the speed-up over (a), the bytes each path ships, and the differences.

Then a video (--no-video skips it): a 32-frame 1280x720 clip (a window moving across coffee), an H.264 MP4
where torchcodec can decode (else its decoded frames), to pixel_values_videos: transformers'
Qwen2VLVideoProcessor given the file's path (it decodes with torchcodec) against FusedVideoProcessor given its
bytes, decode included; the time, frames per second and max |difference|.

Needs scikit-image and transformers (scripts/demo.sh installs them), and torchvision for what is above.
Without torchvision (beside the CPU-only torch, which has no matching torchvision wheel: scripts/demo.sh on a
machine without a GPU), the processors are transformers' *Pil ones, (c) reproduces their resize
(reference="pil") and Pillow decodes for (c) too.
"""

import argparse
import importlib.util
import io
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from .bench.common import Timer, sample_interleaved
from .bench.resize import resize_photo
from .module import FusedInputNorm

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket")
BIG_PHOTOS = {"coffee 1920x1080": (1080, 1920), "coffee 4032x3024 (12 MP)": (3024, 4032)}  # (height, width)
JPEG_QUALITY = 90
MODELS = {"qwen2vl": "Qwen2VLImageProcessor", "clip": "CLIPImageProcessor"}
PATHS = {
    "a": "(a) PIL decode + processor on the CPU, fp32 to the device",
    "b": "(b) PIL decode + processor (normalize off), uint8 patches to the device, FusedInputNorm",
    "c": "(c) FusedImageProcessor: bytes to the device, decode + resize + normalize there",
}


def photos() -> dict[str, np.ndarray]:
    """The sample photos and the two big ones, as decoded: uint8 [H, W, 3]."""
    from skimage import data

    out = {name: np.ascontiguousarray(getattr(data, name)()) for name in PHOTOS}
    for name, (height, width) in BIG_PHOTOS.items():
        out[name] = resize_photo(height, width).numpy()
    return out


def encode_jpeg(hwc: np.ndarray, quality: int = JPEG_QUALITY) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(hwc).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def pil_decode(data: bytes):
    """What engines do with an image request today: PIL opens the bytes, convert("RGB") decodes."""
    from PIL import Image

    return Image.open(io.BytesIO(data)).convert("RGB")


def has_torchvision() -> bool:
    return importlib.util.find_spec("torchvision") is not None


def decoder_name(device: torch.device) -> str:
    """What device_decode runs, as printed."""
    if not has_torchvision():
        return "PIL (no torchvision)"
    return "nvJPEG" if device.type == "cuda" else "torchvision.io.decode_image"


def reference() -> str:
    """Whose resize (c) reproduces: the processors' backend, torchvision's, or the *Pil processors' without it."""
    return "torchvision" if has_torchvision() else "pil"


def device_decode(data: bytes, device: torch.device) -> torch.Tensor:
    """The decoder path (c) uses: nvJPEG on a CUDA device, torchvision's CPU decoders otherwise; Pillow where
    torchvision is not installed, as FusedImageProcessor does then. uint8 [3, H, W]."""
    if not has_torchvision():
        return torch.from_numpy(np.array(pil_decode(data))).permute(2, 0, 1)
    from torchvision.io import ImageReadMode, decode_image, decode_jpeg

    encoded = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    with warnings.catch_warnings():  # torchvision 0.29 deprecates its decoders for TorchCodec's
        warnings.simplefilter("ignore")
        if device.type == "cuda":
            return decode_jpeg(encoded, mode=ImageReadMode.RGB, device=device).cpu()
        return decode_image(encoded, mode=ImageReadMode.RGB)


def processor_config(processor) -> dict:
    return {
        k: getattr(processor, k) for k in ("do_rescale", "rescale_factor", "do_normalize", "image_mean", "image_std")
    }


def fused_image_processor():
    """fused_input_norm.FusedImageProcessor, or None where this checkout has none yet."""
    try:
        from . import FusedImageProcessor
    except ImportError:
        return None
    return FusedImageProcessor


@dataclass
class PhotoResult:
    name: str
    size: tuple[int, int]  # (height, width) decoded
    jpeg_bytes: int
    out_shape: tuple[int, ...]
    resized: str  # what the processor resized to
    pcie_bytes: dict[str, int]
    times_ms: dict[str, float]
    reps: int
    diffs: dict[str, float]  # max |x - (a)|
    same_pixels_diff: float | None  # max |(c) on PIL's decoded pixels - (a)|
    decoder_max: int | None  # max |PIL decode - (c)'s decoder| in uint8 levels
    decoder_frac: float | None  # the fraction of values that differ
    errors: dict[str, str] = field(default_factory=dict)


def sync(device: torch.device, result):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return result


def make_paths(model: str, device: torch.device, fused_cls) -> tuple[dict[str, Callable[[bytes], torch.Tensor]], dict]:
    """The paths, each a function of the JPEG bytes returning pixel_values on `device`; and (c)'s processor
    (None when FusedImageProcessor is missing)."""
    import transformers

    config = {"image_processor_type": MODELS[model]}
    # The class's defaults: what the checkpoints configure. Without torchvision, its *Pil class (asked for by
    # name: transformers' own fallback warns on each construction).
    name = MODELS[model] if has_torchvision() else f"{MODELS[model]}Pil"
    processor = getattr(transformers, name, None) or getattr(transformers, MODELS[model])
    processor = processor()
    with torch.device(device):
        norm = FusedInputNorm.from_preprocessor_config(processor_config(processor))

    def path_a(data: bytes) -> torch.Tensor:
        pixel_values = processor(pil_decode(data), return_tensors="pt")["pixel_values"]
        return sync(device, pixel_values.to(device))

    def path_b(data: bytes) -> torch.Tensor:
        raw = processor(pil_decode(data), do_rescale=False, do_normalize=False, return_tensors="pt")["pixel_values"]
        return sync(device, norm(raw.to(device), torch.float32))

    paths = {"a": path_a, "b": path_b}
    fused = None
    if fused_cls is not None:
        # On CUDA the demo shows the engine path that ships only JPEG bytes: nvJPEG, an opt-in that is not
        # Pillow's decoder (the same-pixels column separates the decoders' difference from the arithmetic's).
        decoder = "nvjpeg" if device.type == "cuda" else "exact"
        fused = fused_cls.from_preprocessor_config(config, device=device, reference=reference(), decoder=decoder)

        def path_c(data: bytes) -> torch.Tensor:
            return sync(device, fused(data, visual_dtype=torch.float32)["pixel_values"])

        paths["c"] = path_c
    return paths, {"processor": processor, "fused": fused}


def run_photo(
    model: str,
    name: str,
    hwc: np.ndarray,
    data: bytes,
    paths: dict,
    extra: dict,
    device: torch.device,
    reps: int,
    budget_s: float,
) -> PhotoResult:
    processor, fused = extra["processor"], extra["fused"]
    a = paths["a"](data).cpu()
    raw = processor(pil_decode(data), do_rescale=False, do_normalize=False, return_tensors="pt")
    if model == "qwen2vl":
        _, gh, gw = raw["image_grid_thw"][0].tolist()
        resized = f"{gw * processor.patch_size}x{gh * processor.patch_size}"
    else:
        resized = "x".join(map(str, raw["pixel_values"].shape[-1:-3:-1]))
    decoded_bytes = hwc.shape[0] * hwc.shape[1] * 3
    pcie = {"a": a.numel() * 4, "b": raw["pixel_values"].numel()}
    diffs = {"b": (paths["b"](data).cpu() - a).abs().max().item()}
    same_pixels = decoder_max = decoder_frac = None
    if "c" in paths:
        pcie["c"] = len(data) if device.type == "cuda" else decoded_bytes
        c = paths["c"](data).cpu()
        if c.shape != a.shape:
            raise AssertionError(
                f"{model} {name}: FusedImageProcessor gave {tuple(c.shape)}, the processor {tuple(a.shape)}"
            )
        diffs["c"] = (c - a).abs().max().item()
        if fused.decoder != "exact":  # nvJPEG: not Pillow's decoder, so what the decoders change is reported apart
            pil_pixels = np.array(pil_decode(data))  # writable: torch.from_numpy warns on a read-only array
            same = fused(pil_pixels, visual_dtype=torch.float32)["pixel_values"].cpu()
            same_pixels = (same - a).abs().max().item()
            theirs = device_decode(data, device).permute(1, 2, 0).to(torch.int16)
            levels = (theirs - torch.from_numpy(pil_pixels).to(torch.int16)).abs()
            decoder_max, decoder_frac = levels.max().item(), (levels > 0).double().mean().item()
    methods = {key: (lambda fn=fn: fn(data)) for key, fn in paths.items()}
    samples = sample_interleaved(methods, Timer(torch.device("cpu")), reps, budget_s=budget_s)
    return PhotoResult(
        name=name,
        size=hwc.shape[:2],
        jpeg_bytes=len(data),
        out_shape=tuple(a.shape),
        resized=resized,
        pcie_bytes=pcie,
        times_ms={key: statistics.median(s) for key, s in samples.items()},
        reps=len(samples["a"]),
        diffs=diffs,
        same_pixels_diff=same_pixels,
        decoder_max=decoder_max,
        decoder_frac=decoder_frac,
    )


VIDEO_CLIP = (32, 720, 1280)  # frames, height, width


def run_video(device: torch.device, reps: int, budget_s: float) -> dict[str, float]:
    """The video case (the module's docstring): prints it, returns its figures (ms, max |diff|)."""
    from .bench.video import encode_mp4, make_clip, mp4_unavailable
    from .video import FusedVideoProcessor

    frames, height, width = VIDEO_CLIP
    clip = make_clip(frames, height, width)
    config = {"video_processor_type": "Qwen2VLVideoProcessor"}
    call = {"do_sample_frames": False, "cap_pixels_per_frame": False}  # as vLLM calls it
    why_not_mp4 = mp4_unavailable()
    if why_not_mp4 is None:
        data, path = encode_mp4(clip)
        form = f"an H.264 MP4 of {len(data) / 1e6:.1f} MB, decode included"
    else:
        data = path = clip
        form = f"its decoded frames ({why_not_mp4})"
    print(f"\n=== Video: {frames} frames of {width}x{height}, {form}, to pixel_values_videos on {device} ===")
    fused = FusedVideoProcessor.from_preprocessor_config(config, device=device)
    methods = {"c": lambda: sync(device, fused(data, **call)["pixel_values_videos"])}
    if has_torchvision():
        import transformers

        processor = transformers.Qwen2VLVideoProcessor(**config)
        methods["a"] = lambda: sync(
            device, processor(path, return_tensors="pt", **call)["pixel_values_videos"].to(device)
        )
    else:
        print("(a) is missing: transformers' video processors need torchvision, which is not installed here.")
    results = {"c": methods["c"]().cpu()}
    if "a" in methods:
        results["a"] = methods["a"]().cpu()
    samples = sample_interleaved(methods, Timer(torch.device("cpu")), reps, budget_s=budget_s, min_reps=3)
    figures = {f"{key} ms": statistics.median(s) for key, s in samples.items()}
    names = {"a": "transformers' Qwen2VLVideoProcessor (CPU)", "c": "FusedVideoProcessor"}
    for key in ("a", "c"):
        if key in samples:
            ms = figures[f"{key} ms"]
            print(f"  ({key}) {names[key]:<42} {_ms(ms):>9}  {frames / ms * 1e3:6.0f} frames/s")
    print(f"  pixel_values_videos {tuple(results['c'].shape)}")
    if "a" in results:
        figures["max |diff|"] = (results["c"] - results["a"]).abs().max().item()
        print(f"  (a) / (c): {figures['a ms'] / figures['c ms']:.2f}x, max |(c) - (a)| {figures['max |diff|']:.1e}")
    return figures


def _threads() -> str:
    n = torch.get_num_threads()
    return f"{n} torch thread{'s' if n > 1 else ''}"


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


def _ms(ms: float) -> str:
    return f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms"


def _diff(x: float | None) -> str:
    return "-" if x is None else "0" if x == 0 else f"{x:.1e}"


def print_photo(r: PhotoResult, device: torch.device) -> None:
    h, w = r.size
    print(
        f"\n{r.name}: {w}x{h}, JPEG {_mb(r.jpeg_bytes)} -> {r.resized}, pixel_values {list(r.out_shape)}, median of {r.reps}"
    )
    ships = "on PCIe" if device.type == "cuda" else "would ship"
    for key, label in PATHS.items():
        if key not in r.times_ms:
            continue
        diff = "" if key == "a" else f"   max |x - (a)| {_diff(r.diffs[key])}"
        print(f"  {label:<88}{_mb(r.pcie_bytes[key]):>9} {ships} {_ms(r.times_ms[key]):>9}{diff}", flush=True)
    if r.decoder_max is not None:
        print(
            f"  (c) on PIL's decoded pixels vs (a): max {_diff(r.same_pixels_diff)} (the arithmetic); "
            f"PIL vs {decoder_name(device)} decode: max {r.decoder_max} levels, {100 * r.decoder_frac:.2f}% of values "
            "differ",
            flush=True,
        )


def _photo_label(r: PhotoResult) -> str:
    size = f"{r.size[1]}x{r.size[0]}"
    return r.name if size in r.name else f"{r.name} {size}"


def markdown_table(model: str, results: list[PhotoResult]) -> str:
    has_c = all("c" in r.times_ms for r in results)
    head = ["photo", "JPEG", "resized", "PCIe (a) fp32", "PCIe (b) u8 patches"]
    head += ["PCIe (c)", "(a) ms", "(b) ms", "(c) ms", "(a)/(c)", "max diff (b)", "max diff (c)"]
    decoders = any(r.decoder_max is not None for r in results)
    if decoders:
        head += ["(c) same pixels", "decoders max / % differ"]
    if not has_c:
        head = [*head[:5], "(a) ms", "(b) ms", "max diff (b)"]
    rows = [f"| {' | '.join(head)} |", "|" + "---|" * len(head)]
    for r in results:
        cells = [_photo_label(r), _mb(r.jpeg_bytes), r.resized]
        cells += [_mb(r.pcie_bytes["a"]), _mb(r.pcie_bytes["b"])]
        if has_c:
            cells += [_mb(r.pcie_bytes["c"]), _ms(r.times_ms["a"]), _ms(r.times_ms["b"]), _ms(r.times_ms["c"])]
            cells += [f"{r.times_ms['a'] / r.times_ms['c']:.2f}x", _diff(r.diffs["b"]), _diff(r.diffs["c"])]
            if decoders:
                cells += [_diff(r.same_pixels_diff), f"{r.decoder_max} / {100 * (r.decoder_frac or 0):.2f}%"]
        else:
            cells += [_ms(r.times_ms["a"]), _ms(r.times_ms["b"]), _diff(r.diffs["b"])]
        rows.append(f"| {' | '.join(cells)} |")
    return "\n".join(rows)


_COLORS = {"a": "tab:gray", "b": "tab:blue", "c": "tab:green"}


def _bars(ax, results: list[PhotoResult], keys: list[str], value, fmt, rotation: int = 0) -> None:
    """Grouped bars, one group per photo and one bar per path, each labelled with its value."""
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        xs = [n + (i - (len(keys) - 1) / 2) * width for n in range(len(results))]
        ys = [value(r, key) for r in results]
        drawn = ax.bar(xs, ys, width, label=PATHS[key][:3], color=_COLORS[key], edgecolor="black", linewidth=0.5)
        ax.bar_label(drawn, [fmt(y) for y in ys], fontsize=9, padding=2, rotation=rotation)
    ax.set_xticks(
        range(len(results)), [_photo_label(r).replace(" (", "\n(").replace(" ", "\n", 1) for r in results], fontsize=9
    )
    ax.legend(fontsize=9, loc="upper left")


def plot(all_results: dict[str, list[PhotoResult]], classes: dict[str, str], path: str, title: str, ships: str) -> None:
    """One row per model, three panels: the speed-up of (b) and (c) over (a) per photo (linear), the bytes each
    path ships to the device, and the largest difference from (a)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10})
    fig, axes = plt.subplots(
        len(all_results), 3, figsize=(17, 4.8 * len(all_results)), squeeze=False, layout="constrained"
    )
    for row, (model, results) in zip(axes, all_results.items(), strict=True):
        keys = [k for k in PATHS if all(k in r.times_ms for r in results)]
        speed, ship, diff = row

        faster = [k for k in keys if k != "a"]
        _bars(speed, results, faster, lambda r, k: r.times_ms["a"] / r.times_ms[k], lambda y: f"{y:.1f}x")
        speed.axhline(1.0, color="black", linewidth=0.8)
        speed.set_ylabel("speed-up over (a), per image")
        speed.set_title(f"{classes[model]}: time per image, (a) / path")
        _bars(ship, results, keys, lambda r, k: r.pcie_bytes[k] / 1e6, lambda y: f"{y:.1f}")
        ship.set_ylabel(f"MB per image ({ships})")
        ship.set_title(f"bytes each path {ships} to the device")
        _bars(diff, results, faster, lambda r, k: max(r.diffs[k], 1e-9), lambda y: f"{y:.1e}", rotation=90)
        diff.set_yscale("log")
        diff.set_ylim(1e-9, 1e-3)
        diff.set_ylabel("max |pixel_values - (a)| (log)")
        diff.set_title("difference from (a) (fp32 rounding is ~5e-7)")
        for ax in (speed, ship):
            ax.margins(y=0.2)
    legend = "; ".join(PATHS.values())
    fig.suptitle(f"{title}\n{legend}", fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, list[PhotoResult]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reps", type=int, default=10, help="interleaved rounds per photo (fewer for a slow one)")
    parser.add_argument("--budget-s", type=float, default=5.0, help="about this many seconds of rounds per photo")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch threads (default: torch's)")
    parser.add_argument("--models", default="qwen2vl", help=f"comma-separated, of: {', '.join(MODELS)}")
    parser.add_argument("--video", action=argparse.BooleanOptionalAction, default=True, help="the video case")
    parser.add_argument(
        "--plot",
        default=os.path.join(tempfile.gettempdir(), "fused_input_norm_demo.png"),
        metavar="FILE.png",
        help="where the plot goes ('' for none; needs matplotlib)",
    )
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not models or any(m not in MODELS for m in models):
        parser.error(f"--models takes a comma-separated list of {', '.join(MODELS)}, got {args.models!r}")
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    fused_cls = fused_image_processor()

    import transformers

    load = os.getloadavg()[0]
    print(
        f"An engine's image path, JPEG bytes -> pixel_values on {device}: torch {torch.__version__}, transformers "
        f"{transformers.__version__}, {_threads()}, 1-min load average {load:.2f} at the "
        f"start. One run's figures, medians of interleaved rounds ((a) (b) (c) (a) (b) (c) ...), host clock per "
        "image, synchronized; pixel_values in fp32 (engines take bf16) so the differences are the arithmetic's."
    )
    if device.type == "cpu":
        print(
            "THIS RUN IS ON THE CPU (no GPU here): (c) decodes, resizes and normalizes on the CPU, and nothing crosses "
            "PCIe; 'would ship' says what each path would send to a GPU, for (c) the decoded uint8 image (with a GPU "
            "and decoder='nvjpeg', nvJPEG decodes there and only the JPEG bytes cross)."
        )
    if fused_cls is None:
        print("(c) is missing: this checkout has no fused_input_norm.FusedImageProcessor; only (a) and (b) run.")

    t0 = time.perf_counter()
    encoded = {name: (hwc, encode_jpeg(hwc)) for name, hwc in photos().items()}
    print(
        f"Encoded {len(encoded)} photos to JPEG (Pillow, quality {JPEG_QUALITY}) in {time.perf_counter() - t0:.1f} s."
    )
    all_results, classes = {}, {}
    for model in models:
        paths, extra = make_paths(model, device, fused_cls)
        classes[model] = type(extra["processor"]).__name__
        print(
            f"\n=== {classes[model]} (transformers' defaults; (c): FusedImageProcessor reference={reference()!r}) ==="
        )
        results = []
        for name, (hwc, data) in encoded.items():
            results.append(run_photo(model, name, hwc, data, paths, extra, device, args.reps, args.budget_s))
            print_photo(results[-1], device)
        all_results[model] = results
    if args.video:
        run_video(device, args.reps, args.budget_s)
    end_load = os.getloadavg()[0]
    print(f"\n1-min load average {load:.2f} at the start, {end_load:.2f} at the end; {_threads()}.")
    for model, results in all_results.items():
        print(f"\nMarkdown ({classes[model]}, {device}, {_threads()}, load {load:.1f}-{end_load:.1f}):\n")
        print(markdown_table(model, results))
    if args.plot:
        if importlib.util.find_spec("matplotlib") is None:
            print("\nNo plot: matplotlib is not installed (pip install matplotlib, or the package's [plot] extra).")
        else:
            title = (
                f"JPEG bytes -> pixel_values, {device}, {_threads()}, torch {torch.__version__}, "
                f"load {load:.1f}-{end_load:.1f}, one run, medians"
            )
            plot(all_results, classes, args.plot, title, "ships" if device.type == "cuda" else "would ship")
            print(f"\nPlot: {args.plot}")
    return all_results


if __name__ == "__main__":
    main()
