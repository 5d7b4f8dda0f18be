"""Per-request time of vLLM's multimodal processor apply() with the plugin serving images (FusedImageProcessor)
and with transformers' processor (FUSED_INPUT_NORM_VLLM_PROCESSOR=1 / 0, each in its own process), at 1
thread, for PIL images as vLLM's media loader gives them (the copy out of the PIL image is inside apply).
vLLM's own hashing of the image (its processor-cache key) is reported apart.

    .venv-vllm/bin/python scripts/bench_vllm.py [--models qwen2_vl,glm4v,...] [--repeats N] [--rounds R]

--models: qwen2_vl (the default; both max_pixels settings) and any model of tests/test_vllm_families.py
(its tiny model directories: the architectures the plugin serves by their image processor, LLaVA-NeXT's
llava_next and granite4_vision included) and of
tests/test_vllm_deepseek_ocr.py (deepseek_ocr, deepseek_ocr2, unlimited_ocr, unlimited_ocr2: vLLM's own
processor, served in its class) and deepseek_vl2 (tests/test_vllm_deepseek_vl2.py's directory: vLLM's own
DeepseekVLV2Processor, served in its class) and of tests/test_vllm_internvl_family.py (vLLM's own InternVL-style processors:
h2ovl, nemotron_vl, nano_nemotron_vl) and of tests/test_vllm_moondream3.py (moondream3: vLLM's own
Moondream3Processor, served in its class; bfloat16 pixel_values, whatever --float says), and gemma4 /
gemma4_unified / lfm2_vl / minicpmv4_6 / minicpmv4_7 / cohere2_vision / cosmos3_edge / glm5_next / blip2
(tests/test_vllm_generic.py's directories) and step3_vl (tests/test_vllm_step3.py's directory: vLLM's own
Step3VLImageProcessor, served in its class), kimi_k3 (tests/test_vllm_kimi.py: vLLM's own numba-fused
KimiK25FusedVisionProcessor, served in its class; numba at 1 thread too) and deepseek_v4 / deepseek_v41
(tests/test_vllm_deepseek_v4.py: vLLM's own DeepseekV4VLImageProcessor, served in its class; bfloat16 patches),
openvla, isaac, muse_spark and mimo (tests/test_vllm_own.py: vLLM's own OpenVLAImageProcessor and IsaacImageProcessor,
served in their classes, Muse Spark's preprocessing, its Pillow resizes served, and MiMo-V2-Omni's, its float32
resizes served; mimo_video: its videos, 8 frames of 480p and 1080p as THWC bytes), ovis2_5 / lfm3_vl /
minimax_m3 (tests/test_vllm_copies.py: vLLM's own processors holding a SiglipImageProcessor, a
Qwen2VLImageProcessor, vLLM's MiniMaxM3VLImageProcessor served by the generic path; minimax_m3_video: its
MiniMaxM3VLVideoProcessor's float32 antialiased bicubic served there too, 8 frames of 480p and 1080p),
mistral-small-3.1 / pixtral-12b (tests/test_vllm_mistral.py's Mistral-format directories: vLLM's
MistralCommonImageProcessor around mistral_common's encoder, served by vllm_mistral; both sides with OpenCV's
IPP off, and again with IPP on as x86 wheels run it: the "ipp-on" rows, cv2.resize itself on both sides), each
with its checkpoint's config. Targets: issue 25 (Qwen2-VL) and issue 35 (the other families): at least 3x at 12 MP
(4032x3024) and 2x at 1080p against transformers' processor; issue 37: 3x at 1080p too for the LANCZOS families.

Each side's page faults a request are printed with vLLM's stages. --malloc-tunables runs both sides with glibc's
malloc keeping large buffers in its heap (MALLOC_TUNABLES): without it, vLLM's hash of a 12 MP photo faults in
fresh pages on whichever side left no large free block in the heap (docs/performance.md).
"""

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from test_vllm_processor import IMAGE, photo, write_model  # the tests' model directories and photos

SIZES = [(1080, 1920), (3024, 4032)]
# Models timed on a video instead of an image: (frames, frame sizes).
VIDEOS = {"mimo_video": (8, [(480, 640), (1080, 1920)]), "minimax_m3_video": (8, [(480, 640), (1080, 1920)])}
LANCZOS_MODELS = ("idefics3", "smolvlm")  # issue 37's target: 3x at 1080p as well
MAX_PIXELS = [12845056, 1003520]  # the checkpoint's, and a common serving cap (a per-request kwarg)
# --malloc-tunables: glibc's malloc serves allocations under 64 MiB from its heap and keeps up to 256 MiB of it
# free, so that a 12 MP photo's buffers (vLLM's hash copies the pixels: 36 MB) reuse pages on both sides alike.
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=268435456"


def vllm_processor(
    model_dir: str, device_normalize: bool | None, placeholder: str = IMAGE, trust_remote_code: bool = False
) -> tuple:
    """vLLM's multimodal processor for the model, as its API server builds it (general plugins loaded first),
    at 1 torch thread, and a prompt holding one image (`placeholder`)."""
    import torch
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.plugins import load_general_plugins

    torch.set_num_threads(1)
    load_general_plugins()
    config = ModelConfig(
        model=model_dir,
        tokenizer=model_dir,
        dtype="bfloat16",
        mm_device_do_normalize=device_normalize,
        trust_remote_code=trust_remote_code,
    )
    processor = MULTIMODAL_REGISTRY.create_processor(config)
    return processor, processor.info.get_tokenizer().encode(placeholder + " describe")


def models() -> dict:
    """name -> (write(model_dir), image placeholder, device-normalize setting, trust_remote_code, per-request
    kwarg settings): Qwen2-VL with its two max_pixels, and every model of tests/test_vllm_families.py."""
    import test_vllm_deepseek_ocr as deepseek_ocr
    import test_vllm_families as families  # imports pytest: only where the bench runs

    table = {"qwen2_vl": (lambda d: write_model(d, "qwen2_vl"), IMAGE, True, False, MAX_PIXELS)}
    for name in families.RUN:  # the models whose family this tree has
        if name in families.VIDEO_MODELS:  # a directory for the videos' cases: its images are internvl_chat's
            continue
        _, placeholder, normalize, _ = families.MODELS[name]
        table[name] = (families.WRITERS[name], placeholder, normalize[0], name.startswith("internvl_chat"), [None])
    for name in deepseek_ocr.MODELS:  # vLLM's own DeepSeek-OCR processor (vllm_deepseek_ocr)
        table[name] = (lambda d, name=name: deepseek_ocr.write_model(d, name), "<image>", None, False, [None])
    import test_vllm_deepseek_vl2 as deepseek_vl2  # vLLM's own DeepseekVLV2Processor (vllm_deepseek_vl2)

    table["deepseek_vl2"] = (deepseek_vl2.write_model, "<image>", None, False, [None])
    import test_vllm_internvl_family as own  # vLLM's own InternVL-style processors, remote-code directories

    for name, (*_, normalize) in own.MODELS.items():
        table[name] = (own.WRITERS[name], "<image>", normalize[0], True, [None])
    import test_vllm_moondream3 as moondream3  # vLLM's own Moondream3Processor (vllm_moondream3)

    write = functools.partial(moondream3.write_moondream3, architecture="HfMoondream")
    table["moondream3"] = (write, "<|endoftext|><image>", None, False, [None])
    import test_vllm_generic as generic  # Gemma 4's, LFM2-VL's, MiniCPM-V 4.6's, Cohere2Vision's (families)

    served_by_families = {"gemma4": "<|image|>", "gemma4_unified": "<|image|>", "lfm2_vl": "<image>"}
    served_by_families |= {
        "minicpmv4_6": "<|image_pad|>",
        "minicpmv4_7": "<|image_pad|>",
        "cohere2_vision": "<|IMG_PATCH|>",
        "cosmos3_edge": "<|vision_start|><|image_pad|><|vision_end|>",
        "glm5_next": "<|begin_of_image|><|image|><|end_of_image|>",
        "blip2": "",  # vLLM's BLIP-2 names no placeholder: its query tokens go before the prompt
    }
    for name, placeholder in served_by_families.items():
        normalize = generic.MODELS[name].get("normalize", (None,))[0]
        table[name] = (lambda d, name=name: generic.write_model(d, name), placeholder, normalize, False, [None])
    import test_vllm_step3 as step3  # vLLM's own Step3VLImageProcessor (vllm_step3)

    table["step3_vl"] = (step3.write_step3_vl, step3.PLACEHOLDER, None, False, [None])
    import test_vllm_kimi as kimi  # vLLM's own KimiK25FusedVisionProcessor (vllm_kimi), here as Kimi-K3 builds it

    write = functools.partial(kimi.write_kimi, architecture="KimiK3ForConditionalGeneration", model_type="kimi_k3")
    table["kimi_k3"] = (write, kimi.K3_IMAGE, True, False, [None])
    import test_vllm_deepseek_v4 as deepseek_v4  # vLLM's own DeepseekV4VLImageProcessor (vllm_deepseek_v4)

    for name, write in deepseek_v4.WRITERS.items():
        table[name] = (write, deepseek_v4.PLACEHOLDER, None, False, [None])
    import test_vllm_copies as copies  # processors vLLM builds around a served class (Ovis2.5, LFM3-VL, MiniMax-M3)

    for name in ("ovis2_5", "lfm3_vl", "minimax_m3"):
        remote = name in copies.OVIS
        table[name] = (copies.WRITERS[name], copies.MODELS[name][1], None, remote, [None])
    table["minimax_m3_video"] = (copies.WRITERS["minimax_m3"], copies.VIDEOS["minimax_m3"], None, False, [None])
    import test_vllm_own as own_call  # vLLM's own OpenVLAImageProcessor (vllm_openvla), IsaacImageProcessor (vllm_isaac)

    table["openvla"] = (own_call.write_openvla, "<s>", None, False, [None])  # "<s>": after its BOS
    table["isaac"] = (own_call.write_isaac, "<image>", None, False, [None])
    table["muse_spark"] = (own_call.write_muse_spark, "<|patch|>", None, False, [None])  # vLLM's own preprocessing
    table["mimo"] = (own_call.write_mimo, own_call.MIMO_IMAGE, None, False, [None])  # vLLM's own, module functions
    table["mimo_video"] = (own_call.write_mimo, own_call.MIMO_VIDEO, None, False, [None])
    import test_vllm_mistral as mistral  # Mistral-format directories: mistral_common's encoder (vllm_mistral)

    for name in mistral.MODELS:
        write = functools.partial(mistral.write_mistral, model=name)
        table[name] = (write, MISTRAL, None, False, ["ipp-off", "ipp-on"])  # the settings: OpenCV's IPP
    return table


MISTRAL = "[IMG]"  # not a placeholder in a text prompt: Mistral-format prompts are token ids (mistral_prompt)


def mistral_prompt(processor, image) -> list[int]:
    """A chat request with `image`, encoded as vLLM's chat path encodes Mistral-format prompts (the image's
    tokens in it)."""
    from mistral_common.protocol.instruct.chunk import ImageChunk, TextChunk
    from mistral_common.protocol.instruct.messages import UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest

    chat = ChatCompletionRequest(messages=[UserMessage(content=[TextChunk(text="describe"), ImageChunk(image=image)])])
    return processor.info.get_tokenizer().mistral.encode_chat_completion(chat).tokens


def worker(model: str, model_dir: str, repeats: int, float_path: bool) -> dict:
    import numpy as np
    from PIL import Image
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs

    _, placeholder, normalize, remote, settings = models()[model]
    device_normalize = False if float_path and normalize else normalize
    processor, prompt = vllm_processor(model_dir, device_normalize, placeholder, remote)
    hf_processor = processor.info.get_hf_processor()
    # DeepSeek-OCR's, NanoNemotronVL's and Moondream 3's processors have no image processor apart
    image_processor = getattr(hf_processor, "image_processor", hf_processor)
    # The adapter's type carries transformers' class name (it stands in for it): its repr says it is the adapter.
    results = {
        "class": repr(image_processor) if hasattr(image_processor, "upstream") else type(image_processor).__name__
    }
    frames, sizes = VIDEOS.get(model, (0, SIZES))
    for height, width in sizes:
        image = Image.fromarray(photo(height, width, 0))
        # a video: THWC bytes, as vLLM's video loader gives them
        media = (
            {"video": [np.stack([photo(height, width, i) for i in range(frames)])]} if frames else {"image": [image]}
        )
        if placeholder == MISTRAL:
            prompt = mistral_prompt(processor, image)
        for max_pixels in settings:
            kwargs = {} if max_pixels in (None, 12845056) else {"max_pixels": max_pixels}
            if isinstance(max_pixels, str):  # Mistral's rows: OpenCV's IPP off or on, no kwarg
                import cv2

                cv2.ipp.setUseIPP(max_pixels == "ipp-on")
                kwargs = {}
            times, hashing, faults = [], [], []
            for i in range(repeats + 2):
                inputs = ProcessorInputs(prompt, processor.info.parse_mm_data(media), None, kwargs)
                timing = TimingContext(enabled=True)
                faulted = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                start = time.perf_counter()
                processor.apply(inputs, timing)
                elapsed = time.perf_counter() - start
                if i >= 2:  # two warm-ups: plans, allocator, lazy imports
                    times.append(elapsed)
                    hashing.append(sum(v for k, v in timing.stage_secs.items() if "hash" in k))
                    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faulted)
            results[f"{height}x{width}@{max_pixels}"] = {
                "apply_ms": [t * 1e3 for t in times],
                "hash_ms": [t * 1e3 for t in hashing],
                "stages": {k: round(v * 1e3, 2) for k, v in timing.stage_secs.items()},
                "page_faults": statistics.median(faults),  # fresh 4 KiB pages touched per request (minor faults)
            }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="qwen2_vl", help="comma-separated; 'all' for every model")
    parser.add_argument("--repeats", type=int, default=5, help="timed requests per size, per process")
    parser.add_argument("--rounds", type=int, default=3, help="on/off process pairs, alternated (drift cancels)")
    parser.add_argument("--float", action="store_true", help="mm_device_do_normalize off (float32 pixel_values)")
    parser.add_argument(
        "--malloc-tunables",
        action="store_true",
        help=f"both sides' processes with GLIBC_TUNABLES={MALLOC_TUNABLES} (docs/performance.md: vLLM's hash)",
    )
    parser.add_argument("--worker", nargs=3, metavar=("MODEL", "MODEL_DIR", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        model, model_dir, out = args.worker
        with open(out, "w") as f:
            json.dump(worker(model, model_dir, args.repeats, args.float), f)
        return
    table = models()
    names = list(table) if args.models == "all" else args.models.split(",")
    unknown = sorted(set(names) - set(table))
    if unknown:
        parser.error(f"--models: unknown {unknown}; known: {', '.join(table)}")
    path = "float32" if args.float else "uint8 where vLLM normalizes on the device"
    print(
        f"vLLM apply() per request, 1 thread, {path}; median of {args.rounds} x {args.repeats} (on and off "
        "processes alternated)"
    )
    print(
        "| model | image | max_pixels | transformers ms | fused ms | speed-up | target | vLLM hashing ms (on / off) "
        "| speed-up without the hashing |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    stages = []
    with tempfile.TemporaryDirectory() as root:
        for name in names:
            model_dir = os.path.join(root, name)
            table[name][0](model_dir)
            on, off = _sides(name, model_dir, root, args)
            stages.append((name, on, off))
            for height, width in VIDEOS.get(name, (0, SIZES))[1]:
                target = 3.0 if height * width > 10e6 or name in LANCZOS_MODELS else 2.0
                for max_pixels in table[name][4]:
                    key = f"{height}x{width}@{max_pixels}"
                    a, b = off[key], on[key]
                    ratio = a["apply_ms"] / b["apply_ms"]
                    # vLLM's own work, the same on both sides, apart (it varies most from run to run).
                    own = (a["apply_ms"] - a["hash_ms"]) / (b["apply_ms"] - b["hash_ms"])
                    verdict = "met" if ratio >= target else "NOT met"
                    print(
                        f"| {name} | {width}x{height} | {max_pixels or 'checkpoint'} | {a['apply_ms']:.1f} | "
                        f"{b['apply_ms']:.1f} | {ratio:.2f}x | >= {target:.0f}x {verdict} | "
                        f"{b['hash_ms']:.1f} / {a['hash_ms']:.1f} | {own:.2f}x |",
                        flush=True,
                    )
    print("image processors (on / off) and vLLM's stages (ms, the last run):")
    for name, on, off in stages:
        print(f"  {name}: {on['class']} / {off['class']}")
        for side, result in (("fused", on), ("transformers", off)):
            for key, value in result.items():
                if key != "class":
                    print(f"    {side} {key}: {value['stages']}, {value['page_faults']:.0f} page faults a request")


def _sides(name: str, model_dir: str, root: str, args) -> tuple[dict, dict]:
    """(plugin on, plugin off) for one model: rounds of alternated processes, times pooled, medians."""
    sides = {}
    for _ in range(args.rounds):
        for switch in ("1", "0"):
            out = os.path.join(root, f"{switch}.json")
            env = {**os.environ, "FUSED_INPUT_NORM_VLLM_PROCESSOR": switch, "OMP_NUM_THREADS": "1"}
            env["NUMBA_NUM_THREADS"] = "1"  # vLLM's Kimi kernel (numba's parallel loop) at 1 thread as well
            if args.malloc_tunables:
                env["GLIBC_TUNABLES"] = MALLOC_TUNABLES
            command = [sys.executable, os.path.abspath(__file__), "--worker", name, model_dir, out]
            command += ["--repeats", str(args.repeats)] + (["--float"] if args.float else [])
            subprocess.run(command, env=env, check=True, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(out) as f:
                result = json.load(f)
            side = sides.setdefault(switch, result)
            if side is not result:  # pool this round's times into the first round's
                for key, value in result.items():
                    if key != "class":
                        side[key]["apply_ms"] += value["apply_ms"]
                        side[key]["hash_ms"] += value["hash_ms"]
                        side[key]["stages"] = value["stages"]
    for side in sides.values():
        for key, value in side.items():
            if key != "class":
                value["apply_ms"] = statistics.median(value["apply_ms"])
                value["hash_ms"] = statistics.median(value["hash_ms"])
    return sides["1"], sides["0"]


if __name__ == "__main__":
    main()
