"""SGLang 0.5.23's own multimodal path with the plugin serving images (FusedHFImageProcessor) against the same
SGLang with transformers' processor: `bash scripts/test_sglang.sh` runs this file in .venv-sglang.

Each side runs in its own process, as SGLang's tokenizer process would: its real TokenizerManager
(init_model_config + init_tokenizer_and_processor, under `publish(ServerArgs(...), role="tokenizer")`) builds
the model's multimodal processor, and its `process_mm_data_async` serves each request. Sides:
  plugin: the entry point (load_plugins, as SGLang's processes run it);
  env: SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE=fused_input_norm.sglang_processors, no load_plugins (the route of
    multi-tokenizer workers);
  off: load_plugins with FUSED_INPUT_NORM_SGLANG_PROCESSOR=0: transformers' processor, the reference.
Each has a variant with `--mm-process-config` overrides (SGLang's image config, passed on every call).
The tiny model directories are the vLLM tests' (test_vllm_processor.write_model, test_vllm_families.WRITERS).
SGLang's device resolver is patched to "cpu" in every side (this host has no accelerator), which is how the
device handed to the adapter is checked. transformers is SGLang's pin, 5.19.0: alpha is dropped there, and the
RGBA / LA / palette requests check the adapter follows it.
Compared for every request: input_ids, every item's offsets and model data (grids), M-RoPE positions exactly,
features within 1e-6; the plugin's sides must hold the adapter, have served every call (counted), and say so.
"""

import asyncio
import importlib.util
import io
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HAS_SGLANG = importlib.util.find_spec("sglang") is not None
pytestmark = pytest.mark.skipif(
    not HAS_SGLANG,
    reason="needs sglang: `bash scripts/test_sglang.sh` installs sglang 0.5.23 in .venv-sglang and runs this file",
)

QWEN_IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"
# model -> (the prompt's image placeholder, the image processor its directory holds)
MODELS = {
    "qwen2_vl": (QWEN_IMAGE, "Qwen2VLImageProcessor"),
    "qwen2_5_vl": (QWEN_IMAGE, "Qwen2VLImageProcessor"),
    "qwen3_vl": (QWEN_IMAGE, "Qwen2VLImageProcessor"),
    "gemma3": ("<start_of_image>", "Gemma3ImageProcessor"),
    # SGLang's other processors for families the package serves: glm4v.py, llava.py (LLaVA's CLIP tower; a
    # Pixtral tower, Mistral 3 and Pixtral-12B in transformers' format, goes on to pixtral.py), mllama4.py.
    "glm4v": ("<|begin_of_image|><|image|><|end_of_image|>", "Glm4vImageProcessor"),
    "llava": ("<image>", "CLIPImageProcessor"),
    "mistral3": ("[IMG]", "PixtralImageProcessor"),
    "pixtral_llava": ("[IMG]", "PixtralImageProcessor"),
    "llama4": ("<|image|>", "Llama4ImageProcessor"),
}
# The models of the first round run every request and the --mm-process-config variant; the others (added
# for SGLang's other processors) a few requests that reach each code path (sizes, alpha, PIL, a batch),
# which keeps CI's time.
FEW_REQUESTS = {"jpeg-480x640", "jpeg-57x29", "jpeg-40x900", "png-rgba", "pil-palette", "batch"}
FULL = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "gemma3")
# Models whose SGLang processor turns nvJPEG off itself (llava.py's and pixtral.py's gpu_image_decode = False).
PILLOW_ALREADY = {"llava", "mistral3", "pixtral_llava"}
SIDES = {
    "plugin": {"FUSED_INPUT_NORM_SGLANG_PROCESSOR": "1"},
    "env": {
        "FUSED_INPUT_NORM_SGLANG_PROCESSOR": "1",
        "SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE": "fused_input_norm.sglang_processors",
    },
    "off": {"FUSED_INPUT_NORM_SGLANG_PROCESSOR": "0"},
}
# SGLang's --mm-process-config: its image settings go to every call (a smaller pixel budget for the Qwen
# processors; Gemma 3's pan and scan). Run for these models only.
MM_PROCESS_CONFIG = {
    "qwen2_vl": {"image": {"max_pixels": 200704}},
    "qwen2_5_vl": {"image": {"max_pixels": 200704}},
    "qwen3_vl": {"image": {"max_pixels": 200704}},
    "gemma3": {"image": {"do_pan_and_scan": True}},
}
# Keys that hash the features, or the processor fingerprint (which names fused_input_norm on the plugin's
# side, by design: the two processors' artifacts never share a cache key): not compared. Qwen3-VL's
# padded_input_ids are input_ids (compared) with such hashed pad values in the image positions.
HASHED = {"hash", "pad_value", "pad_values", "identity", "padded_input_ids"}


def write_models(root: str) -> None:
    from test_vllm_families import WRITERS
    from test_vllm_processor import write_model

    for model in MODELS:
        path = os.path.join(root, model)
        if model in WRITERS:
            WRITERS[model](path)
        else:
            write_model(path, model)


def requests(placeholder: str) -> list[tuple[str, str, list]]:
    """(name, prompt, images as SGLang receives them): JPEG bytes of several sizes (a 12 MP photo down to 57x29,
    elongated), PNG bytes of gray, RGBA, LA and palette-with-transparency images, PIL images, a batch of two."""
    import numpy as np
    from PIL import Image
    from test_vllm_processor import photo

    def encoded(image, kind: str) -> bytes:
        out = io.BytesIO()
        image.save(out, format=kind, **({"quality": 90} if kind == "JPEG" else {}))
        return out.getvalue()

    out = []
    for i, (h, w) in enumerate([(3024, 4032), (480, 640), (57, 29), (40, 900)]):
        out.append((f"jpeg-{h}x{w}", f"{placeholder} describe", [encoded(Image.fromarray(photo(h, w, i)), "JPEG")]))
    rgb = photo(300, 400, 10)
    alpha = (photo(300, 400, 11)[..., 0] // 2 + 64).astype(np.uint8)
    rgba = Image.fromarray(np.dstack([rgb, alpha]), "RGBA")
    la = Image.fromarray(np.dstack([rgb[..., 1], alpha]), "LA")
    palette = Image.fromarray(rgb).quantize(16)
    palette.info["transparency"] = 3
    for name, image in (("gray", Image.fromarray(rgb[..., 1])), ("rgba", rgba), ("la", la), ("palette", palette)):
        out.append((f"png-{name}", f"{placeholder} describe", [encoded(image, "PNG")]))
        out.append((f"pil-{name}", f"{placeholder} describe", [image]))
    batch = [
        encoded(Image.fromarray(photo(h, w, 20 + i)), "JPEG") for i, (h, w) in enumerate([(480, 640), (1080, 1920)])
    ]
    out.append(("batch", f"{placeholder} and {placeholder} compare them", batch))
    return out


# The requests the --mm-process-config run repeats (the overrides reach every call: a few suffice).
CONFIG_REQUESTS = {"jpeg-480x640", "png-rgba", "batch"}


def plain(value):
    """SGLang's output as tensors, lists and numbers (MultimodalDataItem's fields and attributes by name)."""
    import msgspec
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, msgspec.Struct):
        fields = msgspec.structs.asdict(value) | dict(getattr(value, "__dict__", {}))
        return {k: plain(v) for k, v in fields.items() if k not in HASHED}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if k not in HASHED}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value if isinstance(value, int | float | str | bool | type(None)) else repr(value)


def start_sglang() -> None:
    """What SGLang's tokenizer process runs before it builds processors: load_plugins (not where the
    side-effect package is the route: multi-tokenizer workers never run it). SGLang's device resolver is
    patched to "cpu": this host has no accelerator, and it would name CUDA's device."""
    if os.environ.get("SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE") is None:
        from sglang.srt.plugins import load_plugins

        load_plugins()
    from sglang.srt.multimodal.processors import base_processor

    base_processor.BaseMultimodalProcessor._fast_image_processor_device = lambda self, processor: "cpu"


def sglang_manager(model_dir: str, mm_process_config: dict, **server_args):
    """SGLang's real TokenizerManager for `model_dir`, as its tokenizer process builds one (config published,
    model config read, tokenizer and multimodal processor built), without its IPC channels."""
    from sglang.srt.managers.tokenizer_manager import TokenizerManager
    from sglang.srt.runtime_context import publish
    from sglang.srt.server_args import ServerArgs

    args = ServerArgs(
        model_path=model_dir, device="cpu", enable_multimodal=True, mm_process_config=mm_process_config, **server_args
    )
    publish(args, role="tokenizer")
    manager = TokenizerManager.__new__(TokenizerManager)
    manager.server_args = args
    manager.init_model_config()
    manager.init_tokenizer_and_processor()
    return manager


def process(mm, prompt: str, images: list) -> dict:
    """One request through SGLang's process_mm_data_async."""
    from sglang.srt.managers.io_struct import GenerateReqInput

    request = GenerateReqInput(text=prompt, image_data=images)
    return asyncio.run(
        mm.process_mm_data_async(image_data=images, audio_data=None, input_text=prompt, request_obj=request)
    )


# The OpenAI chat request: the model, and SGLang's own conversation template for it (the tiny directories
# ship no Jinja template; `--chat-template qwen2-vl` is how a server names this one).
CHAT = ("qwen2_vl", "qwen2-vl")


def chat(manager, model_dir: str, template: str) -> dict:
    """One OpenAI chat request (a data-URL JPEG and a question) through SGLang's OpenAIServingChat, which
    renders the messages and loads the image, then the tokenizer manager's _tokenize_one_request, which runs
    the multimodal processor: what it hands to _create_tokenized_object (the prompt, input_ids and the
    processor's output). That last step needs the server's request state (none here), so it is stopped there."""
    import base64

    from PIL import Image
    from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest
    from sglang.srt.entrypoints.openai.serving_chat import OpenAIServingChat
    from sglang.srt.parser.template_manager import TemplateManager
    from sglang.srt.runtime_context import get_serving
    from test_vllm_processor import photo

    # What TokenizerManager.__init__ sets that the chat layer reads (sglang_manager builds it without its IPC).
    manager.preferred_sampling_params = get_serving().preferred_sampling_params
    manager.init_disaggregation(start_pd_bootstrap_service=False)
    templates = TemplateManager()
    templates.initialize_templates(tokenizer_manager=manager, model_path=model_dir, chat_template=template)
    serving = OpenAIServingChat(manager, templates)
    out = io.BytesIO()
    Image.fromarray(photo(480, 640, 30)).save(out, format="JPEG", quality=90)
    url = "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode()
    content = [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "describe"}]
    request = ChatCompletionRequest(model=model_dir, messages=[{"role": "user", "content": content}], max_tokens=1)
    generate, _ = serving._convert_to_internal_request(request)
    tokenized = {}

    def create(obj, input_text, input_ids, input_embeds=None, mm_inputs=None, token_type_ids=None):
        tokenized.update(text=input_text, input_ids=input_ids, mm_inputs=mm_inputs)

    manager._create_tokenized_object = create
    asyncio.run(manager._tokenize_one_request(generate))
    return tokenized


def worker(root: str, out_path: str, configs: str) -> None:
    """One side: every model's requests (FEW_REQUESTS outside FULL) through SGLang's TokenizerManager and
    process_mm_data_async, for each of `configs` ("default": no --mm-process-config, "config":
    MM_PROCESS_CONFIG), then the OpenAI chat request, in this one process."""
    import logging

    import torch
    from transformers import BaseImageProcessor

    from fused_input_norm.hf_adapter import FusedHFImageProcessor

    logging.basicConfig(level=logging.INFO)  # as SGLang's server configures it: the plugin's lines are INFO
    start_sglang()
    # served / handed_back: the adapter's calls; upstream: transformers' processor's calls where it holds the
    # processor (a side without the adapter), which the adapter's served calls must match one for one. Noted
    # in a file, one line a call: SGLang's LLaVA processor calls the image processor in its forked worker
    # processes (cpu_executor), which inherit these wrappers but not this process's memory.
    noted = f"{out_path}.calls"

    def note(kind: str, device: object = None) -> None:
        with open(noted, "a") as f:
            f.write(f"{kind} {device}\n")

    def calls() -> dict:
        """The calls noted since the last look, by kind, and the devices the adapter was given."""
        with open(noted, "a+") as f:
            f.seek(0)
            lines = [line.split() for line in f.read().splitlines()]
            f.truncate(0)
        counts = {kind: sum(1 for k, _ in lines if k == kind) for kind in ("served", "handed_back", "upstream")}
        return counts | {"devices": [device for kind, device in lines if kind != "upstream"]}

    serve = FusedHFImageProcessor._serve

    def counted(self, images, args, kwargs):
        result = serve(self, images, args, kwargs)
        note("handed_back" if isinstance(result, str) else "served", kwargs.get("device"))
        return result

    FusedHFImageProcessor._serve = counted

    def count_upstream(cls: type) -> None:
        preprocess = cls.preprocess  # transformers' __call__ calls it; SGLang calls one or the other
        if getattr(preprocess, "counted", False):
            return

        def counted_preprocess(self, *args, **kwargs):
            note("upstream")
            return preprocess(self, *args, **kwargs)

        counted_preprocess.counted = True
        cls.preprocess = counted_preprocess

    results = {}
    for config in configs.split(","):
        for model, (placeholder, _) in MODELS.items():
            if config == "config" and model not in MM_PROCESS_CONFIG:
                continue
            mm_config = MM_PROCESS_CONFIG[model] if config == "config" else {}
            mm = sglang_manager(os.path.join(root, model), mm_config).mm_processor
            # SGLang's LLaVA processor wraps the processor for the model's vision tower (`inner`)
            built = getattr(mm, "inner", mm)
            image_processor = built._processor.image_processor
            if not isinstance(image_processor, FusedHFImageProcessor):
                count_upstream(type(image_processor))
            calls()  # from here on
            few = config == "config" or model not in FULL
            chosen = [
                r
                for r in requests(placeholder)
                if not few or r[0] in (CONFIG_REQUESTS if config == "config" else FEW_REQUESTS)
            ]
            outputs = {name: plain(process(mm, prompt, images)) for name, prompt, images in chosen}
            results[(config, model)] = {
                "outputs": outputs,
                "image_processor": type(image_processor).__name__,
                "adapter": isinstance(image_processor, FusedHFImageProcessor),
                # SGLang passes device= only to a transformers BaseImageProcessor (base_processor.process_mm_data)
                "base_image_processor": isinstance(image_processor, BaseImageProcessor),
                "gpu_image_decode": type(built).gpu_image_decode,
                "fingerprint": built.processor_fingerprint,
                "calls": calls(),
            }
    model, template = CHAT
    manager = sglang_manager(os.path.join(root, model), {})
    calls()
    results[("chat", model)] = {"outputs": plain(chat(manager, os.path.join(root, model), template)), "calls": calls()}
    torch.save(results, out_path)


# side -> the configs it runs: the --mm-process-config overrides through the entry point only (both routes
# install the same hook).
RUNS = {"plugin": "default,config", "env": "default", "off": "default,config"}


def run_sides(root) -> dict:
    """The sides' workers, run at once (each its own process, as SGLang's tokenizer processes are): their
    results by (side, config, model), and each side's log lines that name the plugin."""
    import torch

    started = {}
    for side, configs in RUNS.items():
        env = {**os.environ, **SIDES[side], "OMP_NUM_THREADS": "1"}
        if side != "env":
            env.pop("SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE", None)
        out = root / f"{side}.pt"
        command = [sys.executable, __file__, str(root), str(out), configs]
        # cwd /: the installed package, not the source tree
        started[side] = (
            out,
            subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/"),
        )
    results, logs = {}, {}
    for side, (out, run) in started.items():
        output, _ = run.communicate(timeout=900)
        assert run.returncode == 0, output[-4000:]
        for (config, model), result in torch.load(out, weights_only=False).items():
            results[(side, config, model)] = result
        out.unlink()  # ~0.8 GB a side
        logs[side] = [line for line in output.splitlines() if "fused_input_norm:" in line]
    return {"results": results, "logs": logs}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    path = tmp_path_factory.mktemp("sglang-models")
    write_models(str(path))
    return path


@pytest.fixture(scope="module")
def sides(root):
    return run_sides(root)


def assert_same(ours, theirs, where: str) -> None:
    import torch

    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, torch.Tensor), where
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (where, ours.shape, theirs.shape)
        if theirs.dtype.is_floating_point:
            torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=0, msg=where)
        else:
            assert torch.equal(ours, theirs), where
    elif isinstance(theirs, dict):
        assert ours.keys() == theirs.keys(), (where, sorted(ours), sorted(theirs))
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}.{key}")
    elif isinstance(theirs, list):
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs, (where, ours, theirs)


@pytest.mark.parametrize(
    "model, side, config",
    [(model, side, "default") for model in MODELS for side in ("plugin", "env")]
    + [(model, "plugin", "config") for model in MM_PROCESS_CONFIG],
)
def test_same_outputs_as_transformers(sides, model, side, config):
    ours, theirs = sides["results"][(side, config, model)], sides["results"][("off", config, model)]
    assert not theirs["adapter"] and theirs["image_processor"] == MODELS[model][1]
    assert ours["adapter"], ours["image_processor"]
    assert ours["outputs"].keys() == theirs["outputs"].keys()
    for name in theirs["outputs"]:
        assert_same(ours["outputs"][name], theirs["outputs"][name], f"{model}/{name}")
    # Every call transformers' processor made was one the adapter served (none handed back), with the device
    # SGLang resolved where SGLang passes one: to a transformers BaseImageProcessor (the adapter must be one, as
    # upstream is) through its process_mm_data, which LLaVA's CLIP path does not use (it calls the image
    # processor itself, without device=).
    assert theirs["calls"]["upstream"] >= len(theirs["outputs"]), theirs["calls"]
    assert ours["calls"]["served"] == theirs["calls"]["upstream"] and ours["calls"]["handed_back"] == 0, ours["calls"]
    assert ours["base_image_processor"] and theirs["base_image_processor"]
    assert set(ours["calls"]["devices"]) == ({"None"} if model == "llava" else {"cpu"}), ours["calls"]["devices"]


@pytest.mark.parametrize("side", ["plugin", "env"])
def test_openai_chat_request(sides, side):
    """One OpenAI chat request through SGLang's chat layer and tokenizer manager: the same prompt, input_ids
    and processor output as with transformers' processor, its one image served by the adapter."""
    ours, theirs = sides["results"][(side, "chat", CHAT[0])], sides["results"][("off", "chat", CHAT[0])]
    assert "<|image_pad|>" in theirs["outputs"]["text"] and theirs["calls"]["upstream"] == 1, theirs
    assert_same(ours["outputs"], theirs["outputs"], "chat")
    assert ours["calls"]["served"] == 1 and ours["calls"]["handed_back"] == 0, ours["calls"]


@pytest.mark.parametrize("model", MODELS)
def test_served_classes_decode_with_pillow_and_key_their_cache_apart(sides, model):
    ours, theirs = sides["results"][("plugin", "default", model)], sides["results"][("off", "default", model)]
    # SGLang's LLaVA and Pixtral processors decode with Pillow already (their class sets gpu_image_decode off)
    assert ours["gpu_image_decode"] is False and theirs["gpu_image_decode"] is (model not in PILLOW_ALREADY)
    if theirs["fingerprint"] is not None:
        assert ours["fingerprint"] != theirs["fingerprint"]


@pytest.mark.parametrize("switch, decoded_on_gpu", [("1", True), ("0", False), (None, False)])
def test_nvjpeg_switch(monkeypatch, switch, decoded_on_gpu):
    """FUSED_INPUT_NORM_SGLANG_NVJPEG=1 keeps SGLang's nvJPEG decode for a served class; unset or 0 turns it off
    (on a subclass of SGLang's own Qwen-VL processor, so SGLang's class keeps its attribute)."""
    from sglang.srt.multimodal.processors.qwen_vl import QwenVLImageProcessor

    from fused_input_norm import sglang_plugin

    served = type("Served", (QwenVLImageProcessor,), {})
    assert served.gpu_image_decode is True  # SGLang's default
    if switch is None:
        monkeypatch.delenv(sglang_plugin.NVJPEG_SWITCH, raising=False)
    else:
        monkeypatch.setenv(sglang_plugin.NVJPEG_SWITCH, switch)
    said = sglang_plugin._decode_with_pillow(served)
    assert served.gpu_image_decode is decoded_on_gpu, said
    assert QwenVLImageProcessor.gpu_image_decode is True


def test_log_says_what_serves_images(sides):
    for side in ("plugin", "env"):
        log = "\n".join(sides["logs"][side])
        for model, (_, name) in MODELS.items():
            assert f"in place of transformers' {name}" in log, (side, model, log)
        assert "on device 'cpu'" in log and "decoded by Pillow" in log, log
    off = "\n".join(sides["logs"]["off"])
    assert "images stay with transformers' processor (FUSED_INPUT_NORM_SGLANG_PROCESSOR=0)" in off, off


if __name__ == "__main__":
    worker(*sys.argv[1:4])
