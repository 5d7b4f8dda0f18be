"""An image request as vLLM's OpenAI server handles it, end to end, with the plugin serving images and without
(FUSED_INPUT_NORM_VLLM_PROCESSOR=1 / 0, each in its own process, alternated), at 1 torch thread, on the
Qwen2-VL config: a base64 data URL (JPEG, and PNG) -> vLLM's MediaConnector.fetch_image (the code path of a
chat request's image_url: base64 decode, Pillow open, EXIF transpose, load, RGB) -> processor.apply() (which
hashes the item for vLLM's processor cache: the encoded bytes of a MediaWithBytes). Phases: decode, hash,
apply() without the hash, and end to end; beside them a warm Pillow decode alone (the floor an exact server
keeps). Steady state: the median of the requests after two warm-ups; first request: the first request of a
fresh process (JPEG only), one process per case. No processor cache: every request is a miss, processed.

    .venv-vllm/bin/python scripts/bench_vllm_server.py [--repeats N] [--rounds R] [--profile] [--quick]

Targets (issue 36): end to end at least 2.5x faster than plugin off at 1080p and 12 MP, both max_pixels; with
the plugin on, the whole request within 1.6x of a warm Pillow decode alone.
"""

import argparse
import base64
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_vllm import MAX_PIXELS, SIZES, vllm_processor  # the same processor, sizes and max_pixels
from test_vllm_processor import photo, write_model  # the tests' model directory and photos

CHECKPOINT_MAX_PIXELS = MAX_PIXELS[0]
FORMATS = {"jpeg": {"format": "JPEG", "quality": 90}, "png": {"format": "PNG", "compress_level": 6}}
PHASES = ("decode", "hash", "apply", "e2e")
WARMUPS = 2


def cases(sizes: list, formats: list) -> list[tuple]:
    return [(h, w, f, m) for h, w in sizes for f in formats for m in MAX_PIXELS]


def case_name(height: int, width: int, fmt: str, max_pixels: int) -> str:
    return f"{width}x{height} {fmt} @{max_pixels}"


def write_urls(root: str, sizes: list, formats: list) -> dict:
    """The data URL of each (size, format) in a file of its own; returns the paths."""
    from PIL import Image

    paths = {}
    for height, width in sizes:
        image = Image.fromarray(photo(height, width, 0))
        for fmt in formats:
            buffer = io.BytesIO()
            image.save(buffer, **FORMATS[fmt])
            path = os.path.join(root, f"{height}x{width}.{fmt}.url")
            with open(path, "w") as f:
                f.write(f"data:image/{fmt};base64," + base64.b64encode(buffer.getvalue()).decode())
            paths[f"{height}x{width}.{fmt}"] = (path, len(buffer.getvalue()))
    return paths


def read_url(urls: dict, height: int, width: int, fmt: str) -> str:
    with open(urls[f"{height}x{width}.{fmt}"][0]) as f:
        return f.read()


def clock() -> float:
    """The clock the phases are timed with (BENCH_CLOCK, set from --clock): wall time, or this thread's CPU
    time (user + system, page faults included; on a shared machine it leaves out the time others ran)."""
    return time.thread_time() if os.environ.get("BENCH_CLOCK") == "cpu" else time.perf_counter()


def request(processor, connector, prompt: list, url: str, max_pixels: int) -> dict:
    """One request through the server's path; returns the phases' times in ms, and the output (alive until the
    caller drops it, as vLLM keeps it until it is sent). vLLM's own hash timing is wall time: with the CPU
    clock the hash is timed again on this thread's clock, apart."""
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs

    kwargs = {} if max_pixels == CHECKPOINT_MAX_PIXELS else {"max_pixels": max_pixels}
    start = clock()
    item = connector.fetch_image(url)
    decoded = clock()
    inputs = ProcessorInputs(prompt, processor.info.parse_mm_data({"image": [item]}), None, kwargs)
    timing = TimingContext(enabled=True)
    output = processor.apply(inputs, timing)
    end = clock()
    hashing = sum(v for k, v in timing.stage_secs.items() if "hash" in k)
    if os.environ.get("BENCH_CLOCK") == "cpu":
        wall, hashing = hashing, clock()
        processor._get_mm_hashes(inputs)  # vLLM's hashing of the item, as apply() ran it
        hashing = min(clock() - hashing, wall)
    times = {"decode": decoded - start, "hash": hashing, "apply": end - decoded - hashing, "e2e": end - start}
    return {k: v * 1e3 for k, v in times.items()}, output


def steady_worker(model_dir: str, urls: dict, todo: list, repeats: int) -> dict:
    from vllm.multimodal.media import MediaConnector

    processor, prompt = vllm_processor(model_dir, True)
    connector = MediaConnector()
    results = {}
    for height, width, fmt, max_pixels in todo:
        url = read_url(urls, height, width, fmt)
        runs = {phase: [] for phase in PHASES}
        output = None
        for i in range(WARMUPS + repeats):
            times, output = request(processor, connector, prompt, url, max_pixels)
            if i >= WARMUPS:
                for phase in PHASES:
                    runs[phase].append(times[phase])
        del output
        results[case_name(height, width, fmt, max_pixels)] = runs
    return results


def first_worker(model_dir: str, urls: dict, case: tuple) -> dict:
    """The first request of a fresh process (after the processor is built, as a server's is at start-up)."""
    from vllm.multimodal.media import MediaConnector

    processor, prompt = vllm_processor(model_dir, True)
    height, width, fmt, max_pixels = case
    times, _ = request(processor, MediaConnector(), prompt, read_url(urls, height, width, fmt), max_pixels)
    return {case_name(*case): {phase: [times[phase]] for phase in PHASES}}


def floor_worker(urls: dict, todo: list, repeats: int) -> dict:
    """A warm Pillow decode alone (Pillow's defaults, no vLLM): Image.open + load + RGB of the encoded bytes."""
    from PIL import Image

    results = {}
    for height, width, fmt, _ in todo:
        name = f"{width}x{height} {fmt}"
        if name in results:
            continue
        url = read_url(urls, height, width, fmt)
        data = base64.b64decode(url.partition(",")[2])
        times, image = [], None
        for i in range(WARMUPS + repeats):
            start = clock()
            image = Image.open(io.BytesIO(data))
            image.load()
            image = image.convert("RGB")
            if i >= WARMUPS:
                times.append((clock() - start) * 1e3)
        results[name] = times
    return results


def profile_worker(model_dir: str, urls: dict, case: tuple) -> str:
    """cProfile of the first request of the process, then of one after two more: the functions that take
    the time."""
    import cProfile
    import pstats

    from vllm.multimodal.media import MediaConnector

    processor, prompt = vllm_processor(model_dir, True)
    connector = MediaConnector()
    url = read_url(urls, *case[:3])
    report = []
    for which in ("first", "steady"):
        if which == "steady":
            for _ in range(WARMUPS):
                request(processor, connector, prompt, url, case[3])
        profiler = cProfile.Profile()
        profiler.enable()
        times, _ = request(processor, connector, prompt, url, case[3])
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(14)
        phases = ", ".join(f"{k} {v:.1f} ms" for k, v in times.items())
        switch = os.environ.get("FUSED_INPUT_NORM_VLLM_PROCESSOR")
        report.append(f"{which} request, {case_name(*case)}, plugin {switch}: {phases}\n{out.getvalue()}")
    return "\n".join(report)


def run_worker(root: str, mode: str, switch: str, clock: str, payload: dict) -> object:
    """Runs a worker in a fresh process (the same PYTHONPATH, 1 thread); returns what it wrote."""
    spec, out = os.path.join(root, "spec.json"), os.path.join(root, "out.json")
    with open(spec, "w") as f:
        json.dump({"mode": mode, **payload}, f)
    env = {**os.environ, "FUSED_INPUT_NORM_VLLM_PROCESSOR": switch, "OMP_NUM_THREADS": "1", "BENCH_CLOCK": clock}
    subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", spec, out],
        env=env,
        check=True,
        cwd="/",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with open(out) as f:
        return json.load(f)


def worker_main(spec_path: str, out_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    todo = [tuple(case) for case in spec.get("todo", [])]
    if spec["mode"] == "steady":
        result = steady_worker(spec["model_dir"], spec["urls"], todo, spec["repeats"])
    elif spec["mode"] == "first":
        result = first_worker(spec["model_dir"], spec["urls"], todo[0])
    elif spec["mode"] == "floor":
        result = floor_worker(spec["urls"], todo, spec["repeats"])
    else:
        result = profile_worker(spec["model_dir"], spec["urls"], todo[0])
    with open(out_path, "w") as f:
        json.dump(result, f)


def pool_into(total: dict, result: dict) -> None:
    """Adds one process's lists of times to the run's, case by case."""
    for case, phases in result.items():
        if isinstance(phases, list):
            total.setdefault(case, []).extend(phases)
        else:
            for phase, times in phases.items():
                total.setdefault(case, {}).setdefault(phase, []).extend(times)


def median_table(sides: dict, floor: dict, todo: list, title: str) -> list[str]:
    lines = [
        title,
        "| image | max_pixels | decode on / off ms | hash on / off ms | apply() on / off ms | end to end on / off ms "
        "| speed-up | Pillow decode alone ms | on / Pillow |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for height, width, fmt, max_pixels in todo:
        name = case_name(height, width, fmt, max_pixels)
        if name not in sides["1"]:
            continue
        on = {p: statistics.median(sides["1"][name][p]) for p in PHASES}
        off = {p: statistics.median(sides["0"][name][p]) for p in PHASES}
        alone = statistics.median(floor[f"{width}x{height} {fmt}"])
        cells = " | ".join(f"{on[p]:.1f} / {off[p]:.1f}" for p in PHASES)
        lines.append(
            f"| {width}x{height} {fmt} | {max_pixels} | {cells} | {off['e2e'] / on['e2e']:.2f}x | {alone:.1f} "
            f"| {on['e2e'] / alone:.2f}x |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="timed requests per case, per process")
    parser.add_argument("--rounds", type=int, default=3, help="on/off process pairs, alternated (drift cancels)")
    parser.add_argument("--profile", action="store_true", help="also cProfile a 12 MP request, on and off")
    parser.add_argument("--formats", default="jpeg,png", help="encodings to send, of: jpeg, png")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time, or each request's CPU time (shared machine)",
    )
    parser.add_argument("--quick", action="store_true", help="one small JPEG, one round, one request (a test)")
    parser.add_argument("--worker", nargs=2, metavar=("SPEC", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(*args.worker)
        return
    formats = args.formats.split(",")
    if not formats or not set(formats) <= set(FORMATS):
        parser.error(f"--formats: a comma-separated list of {', '.join(FORMATS)}, got {args.formats!r}")
    sizes, formats = ([(240, 320)], ["jpeg"]) if args.quick else (SIZES, formats)
    repeats, rounds = (1, 1) if args.quick else (args.repeats, args.rounds)
    todo = cases(sizes, formats)
    first_todo = [case for case in todo if case[2] == "jpeg"][: 1 if args.quick else None]
    with tempfile.TemporaryDirectory() as root:
        model_dir = os.path.join(root, "qwen2_vl")
        write_model(model_dir, "qwen2_vl")
        urls = write_urls(root, sizes, formats)
        payload = {"model_dir": model_dir, "urls": urls, "repeats": repeats}
        steady, first, floor = {"1": {}, "0": {}}, {"1": {}, "0": {}}, {}
        for _ in range(rounds):
            pool_into(floor, run_worker(root, "floor", "0", args.clock, {**payload, "todo": todo}))
            for switch in ("1", "0"):
                pool_into(steady[switch], run_worker(root, "steady", switch, args.clock, {**payload, "todo": todo}))
            for case in first_todo:
                for switch in ("1", "0"):
                    pool_into(first[switch], run_worker(root, "first", switch, args.clock, {**payload, "todo": [case]}))
        profile = None
        if args.profile:
            big = (*max(sizes), "jpeg", CHECKPOINT_MAX_PIXELS)
            profile = "\n".join(
                run_worker(root, "profile", switch, args.clock, {**payload, "todo": [big]}) for switch in ("1", "0")
            )
    encoded = ", ".join(f"{key} {size / 1e6:.2f} MB" for key, (_, size) in urls.items())
    print(
        f"vLLM server path per request (data URL -> MediaConnector -> apply()), 1 thread, Qwen2-VL, uint8 "
        f"(mm_device_do_normalize), no processor cache, {args.clock} clock; on/off processes alternated, {rounds} "
        "round(s); "
        f"encoded: {encoded}"
    )
    print(*median_table(steady, floor, todo, f"Steady state: median of {rounds} x {repeats} after warm-up"), sep="\n")
    print(*median_table(first, floor, first_todo, f"First request of a fresh process: median of {rounds}"), sep="\n")
    if profile:
        print("Profiles (cProfile, by own time):\n" + profile)


if __name__ == "__main__":
    main()
