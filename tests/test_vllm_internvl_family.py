"""vLLM's own subclasses of its InternVL image processor, served in their class by vllm_internvl: vLLM 0.34.0's
`apply()` with the plugin on (FUSED_INPUT_NORM_VLLM_PROCESSOR=1) against off (=0), each side in its own process
(`bash scripts/test_vllm.sh` runs it), on tiny local model directories written as the checkpoints ship them
(remote-code config classes written into the directory, a `tokenizers` tokenizer, no weights):
  H2OVL (H2OVLChatModel): H2OVLImageProcessor, MSAC on (a call of one image: two tile grids), 448 tiles;
  Llama-Nemotron-Nano-VL (Llama_Nemotron_Nano_VL): LlamaNemotronNanoVLImageProcessor, built by vLLM from the
    checkpoint's remote-code image processor (its image_size, max_num_tiles, use_thumbnail), 512 tiles, no
    Normalize;
  Nemotron Nano VL v2 (NemotronH_Nano_VL_V2, the class the NemotronH *Omni* architectures share):
    NanoNemotronVLProcessor, built through InputProcessingContext.init_processor, 512 tiles with torch's
    antialiased bicubic: served on vLLM's device-normalize path (uint8, bytes equal); its float path (a float32
    resize) is vLLM's on both sides, and the plugin's log must say so.
Compared, for every request (several sizes alone, gray, a batch, per-request tile bounds): prompt_token_ids,
mm_placeholders, mm_hashes and every tensor (float32 within 1e-6, integers exactly). Strict: on the plugin's
side the class's __call__ must be the package's and no call may be handed back to vLLM's code (its log says
so when one is); off, it must be vLLM's own.

In this process: the families' tile grids against vLLM's own functions, over many shapes and bounds.
"""

import importlib.util
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import (
    INTERNVL_CONFIG_CODE,
    TEXT,
    assert_same_results,
    create_processor,
    dump,
    outputs,
    tokenizer,
)
from test_vllm_processor import both_sides, photo

HAS_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)
H2OVL_MODULE = "vllm.transformers_utils.processors.h2ovl"
NEMOTRON_VL_MODULE = "vllm.transformers_utils.processors.nemotron_vl"
NANO_MODULE = "vllm.transformers_utils.processors.nano_nemotron_vl"
# model -> (architecture, vLLM's class that preprocesses its images, the device-normalize settings it runs)
MODELS = {
    "h2ovl": ("H2OVLChatModel", f"{H2OVL_MODULE}.H2OVLImageProcessor", (None,)),
    "nemotron_vl": ("Llama_Nemotron_Nano_VL", f"{NEMOTRON_VL_MODULE}.LlamaNemotronNanoVLImageProcessor", (None,)),
    # the embedding model (pooling): SigLIP's Normalize, or PILToTensor's bytes on the device-normalize path
    "nemotron_vl_embed": (
        "LlamaNemotronVLModel",
        f"{NEMOTRON_VL_MODULE}.LlamaNemotronVLEmbedImageProcessor",
        (True, False),
    ),
    "nano_nemotron_vl": ("NemotronH_Nano_VL_V2", f"{NANO_MODULE}.NanoNemotronVLProcessor", (True, False)),
    # the same, its video frames sized by a patch budget (videos only)
    "nano_nemotron_vl_patches": ("NemotronH_Nano_VL_V2", f"{NANO_MODULE}.NanoNemotronVLProcessor", (True, False)),
}
# Models whose videos are compared too (NanoNemotronVLProcessor's: every frame resized to one size), and those
# whose images are not (the same processor as another model's, only its video size differs).
VIDEO_MODELS = ("nano_nemotron_vl", "nano_nemotron_vl_patches")
VIDEO_ONLY = ("nano_nemotron_vl_patches",)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>", "<image>"]


def write_remote(path: str, code: dict, config: dict) -> None:
    """A model directory: the tokenizer, the remote code files (name -> source) and config.json."""
    os.makedirs(path, exist_ok=True)
    tokenizer(path, SPECIAL, "<|im_start|>", "<|im_end|>")
    for name, source in code.items():
        with open(os.path.join(path, name), "w") as f:
            f.write(source)
    dump(path, "config.json", config)


def write_h2ovl(path: str) -> None:
    """An H2OVL-Mississippi checkpoint's layout: its config class as remote code (InternVL's, under H2OVL's
    names), 448 tiles of patch 14 at downsample 0.5, 1 to 6 tiles, a thumbnail, MSAC on."""
    code = INTERNVL_CONFIG_CODE.replace("InternVLChatConfig", "H2OVLChatConfig").replace(
        '"internvl_chat"', '"h2ovl_chat"'
    )
    config = {
        "architectures": ["H2OVLChatModel"],
        "model_type": "h2ovl_chat",
        "auto_map": {"AutoConfig": "configuration_h2ovl_chat.H2OVLChatConfig"},
        "vision_config": {"image_size": 448, "patch_size": 14, "hidden_size": 32, "num_hidden_layers": 1},
        "llm_config": TEXT | {"model_type": "llama"},
        "downsample_ratio": 0.5,
        "force_image_size": 448,
        "min_dynamic_patch": 1,
        "max_dynamic_patch": 6,
        "dynamic_image_size": True,
        "use_thumbnail": True,
        "use_msac": True,
        "ps_version": "v2",
        "select_layer": -1,
        "template": "h2ogpt2",
    }
    write_remote(path, {"configuration_h2ovl_chat.py": code}, config)


# Llama-Nemotron-Nano-VL ships its image processor as remote code; vLLM reads these three settings of it.
NEMOTRON_IMAGE_PROCESSOR_CODE = """
from transformers.image_processing_utils import BaseImageProcessor


class LlamaNemotronNanoVLImageProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values"]

    def __init__(self, image_size=512, max_num_tiles=12, use_thumbnail=True, **kwargs):
        super().__init__(**kwargs)
        self.image_size, self.max_num_tiles, self.use_thumbnail = image_size, max_num_tiles, use_thumbnail
"""


def write_nemotron_vl(path: str) -> None:
    """A Llama-3.1-Nemotron-Nano-VL checkpoint's layout: its config class and image processor as remote code,
    512 tiles of patch 16 at downsample 0.5, 1 to 12 tiles, a thumbnail."""
    code = INTERNVL_CONFIG_CODE.replace("InternVLChatConfig", "NemotronVLConfig")
    code = code.replace('"internvl_chat"', '"Llama_Nemotron_Nano_VL"').replace('"intern_vit_6b"', '"radio"')
    config = {
        "architectures": ["Llama_Nemotron_Nano_VL"],
        "model_type": "Llama_Nemotron_Nano_VL",
        "auto_map": {"AutoConfig": "configuration_nemotron_vl.NemotronVLConfig"},
        "vision_config": {"image_size": 512, "patch_size": 16, "hidden_size": 32, "num_hidden_layers": 1},
        "llm_config": TEXT | {"model_type": "llama"},
        "downsample_ratio": 0.5,
        "force_image_size": 512,
        "ps_version": "v2",
        "template": "llama3",
    }
    write_remote(
        path, {"configuration_nemotron_vl.py": code, "image_processing.py": NEMOTRON_IMAGE_PROCESSOR_CODE}, config
    )
    preprocessor = {
        "auto_map": {"AutoImageProcessor": "image_processing.LlamaNemotronNanoVLImageProcessor"},
        "image_processor_type": "LlamaNemotronNanoVLImageProcessor",
        "image_size": 512,
        "max_num_tiles": 12,
        "use_thumbnail": True,
        "norm_mean": [0.48145466, 0.4578275, 0.40821073],
        "norm_std": [0.26862954, 0.26130258, 0.27577711],
    }
    dump(path, "preprocessor_config.json", preprocessor)


def write_nemotron_vl_embed(path: str) -> None:
    """The Llama-Nemotron-VL embedding model's layout (llama-nemotron-embed-vl): its config class as remote code,
    512 tiles of patch 16 at downsample 0.5, 1 to 6 tiles (vLLM adds the thumbnail)."""
    code = INTERNVL_CONFIG_CODE.replace("InternVLChatConfig", "NemotronVLEmbedConfig")
    code = code.replace('"internvl_chat"', '"llama_nemotron_vl"').replace('"intern_vit_6b"', '"siglip_vision_model"')
    config = {
        "architectures": ["LlamaNemotronVLModel"],
        "model_type": "llama_nemotron_vl",
        "auto_map": {"AutoConfig": "configuration_nemotron_vl_embed.NemotronVLEmbedConfig"},
        "vision_config": {"image_size": 512, "patch_size": 16, "hidden_size": 32, "num_hidden_layers": 1},
        "llm_config": TEXT | {"model_type": "llama"},
        "downsample_ratio": 0.5,
        "force_image_size": 512,
        "min_dynamic_patch": 1,
        "max_dynamic_patch": 6,
        "dynamic_image_size": True,
        "template": "bidirectional-llama-retriever",
    }
    write_remote(path, {"configuration_nemotron_vl_embed.py": code}, config)


# Nemotron Nano VL v2 ships its config class as remote code; this one holds what vLLM's processor reads of it
# (vision_config.args without min_num_patches: tiles, not dynamic resolution).
NANO_CONFIG_CODE = """
from transformers import AutoConfig, PretrainedConfig


class NemotronNanoVLV2Config(PretrainedConfig):
    model_type = "NemotronH_Nano_VL_V2"
    is_composition = True

    def __init__(self, vision_config=None, llm_config=None, **kwargs):
        super().__init__(**kwargs)
        self.vision_config = PretrainedConfig(**(vision_config or {"args": {}}))
        llm_config = dict(llm_config or {"model_type": "llama"})
        self.llm_config = AutoConfig.for_model(llm_config.pop("model_type"), **llm_config)

    def to_dict(self):
        out = super().to_dict()
        out["vision_config"], out["llm_config"] = self.vision_config.to_dict(), self.llm_config.to_dict()
        return out
"""


def write_nano_nemotron_vl(path: str) -> None:
    """A Nemotron Nano VL v2 checkpoint's layout: its config class as remote code, 512 tiles of patch 16 at
    downsample 0.5 (256 tokens a tile), a thumbnail, RADIO's mean and std."""
    config = {
        "architectures": ["NemotronH_Nano_VL_V2"],
        "model_type": "NemotronH_Nano_VL_V2",
        "auto_map": {"AutoConfig": "configuration_nano_vl.NemotronNanoVLV2Config"},
        "vision_config": {"args": {"model": "vit_huge_patch16_224"}, "patch_size": 16},
        "llm_config": TEXT | {"model_type": "llama"},
        "force_image_size": 512,
        "patch_size": 16,
        "downsample_ratio": 0.5,
        "use_thumbnail": True,
        "norm_mean": [0.48145466, 0.4578275, 0.40821073],
        "norm_std": [0.26862954, 0.26130258, 0.27577711],
        "ps_version": "v2",
        "template": None,
    }
    write_remote(path, {"configuration_nano_vl.py": NANO_CONFIG_CODE}, config)


def write_nano_nemotron_vl_patches(path: str) -> None:
    """Nemotron Nano VL v2's layout with its video frames sized by vision_config.video_target_num_patches (a
    budget of 16x16 patches, the aspect ratio kept) instead of the 512 square."""
    write_nano_nemotron_vl(path)
    config_path = os.path.join(path, "config.json")
    with open(config_path) as f:
        config = json.load(f)
    config["vision_config"] |= {"video_target_num_patches": 1024, "video_maintain_aspect_ratio": True}
    dump(path, "config.json", config)


WRITERS = {
    "h2ovl": write_h2ovl,
    "nemotron_vl": write_nemotron_vl,
    "nemotron_vl_embed": write_nemotron_vl_embed,
    "nano_nemotron_vl": write_nano_nemotron_vl,
    "nano_nemotron_vl_patches": write_nano_nemotron_vl_patches,
}
# (height, width): 12 MP, 1080p, VGA, tiny, elongated, a 5:4 tie between 1x2 and 2x1, one tile already.
SIZES = [(3024, 4032), (1080, 1920), (480, 640), (57, 29), (40, 900), (448, 560), (448, 448)]
# Per request: fewer tiles, exactly two, one (no dynamic size); each on a batch (MSAC off) and one image (on).
# NanoNemotronVLProcessor's own: at most 4 tiles, 1.
TILE_BOUNDS = [
    {"max_dynamic_patch": 4},
    {"min_dynamic_patch": 2, "max_dynamic_patch": 2},
    {"dynamic_image_size": False},
]
REQUEST_KWARGS = {
    "h2ovl": TILE_BOUNDS,
    "nemotron_vl": TILE_BOUNDS,
    "nemotron_vl_embed": TILE_BOUNDS,
    "nano_nemotron_vl": [{"max_num_tiles": 4}, {"max_num_tiles": 1}],
    "nano_nemotron_vl_patches": [],
}


def requests(model: str):
    """(name, prompt, images, mm_processor_kwargs)."""
    from PIL import Image

    out = [(f"{h}x{w}", "<image> describe", [Image.fromarray(photo(h, w, i))], {}) for i, (h, w) in enumerate(SIZES)]
    out.append(("gray", "<image> describe", [Image.fromarray(photo(300, 400, 10)[..., 1])], {}))
    batch = [Image.fromarray(photo(h, w, 20 + i)) for i, (h, w) in enumerate([(480, 640), (1080, 1920), (448, 560)])]
    out.append(("batch", "<image> and <image> and <image> compare them", batch, {}))
    for i, kwargs in enumerate(REQUEST_KWARGS[model]):
        out.append((f"kwargs{i}-batch", "<image> and <image> and <image> compare", batch, kwargs))
        out.append((f"kwargs{i}-one", "<image> describe", batch[1:2], kwargs))
    return out


def video_requests(model: str):
    """(name, prompt, videos): clips as vLLM's video loader hands them (uint8 [frames, H, W, 3], metadata with
    the frames already sampled): a small odd one, 1080p, one already 512 square (vLLM does not resize it), and
    two clips of different sizes in one prompt (of one aspect ratio where the frames keep theirs: vLLM
    concatenates the clips' frames, and fails on two sizes, plugin on or off)."""
    import numpy as np

    def clip(frames: int, height: int, width: int, seed: int):
        video = np.stack([photo(height, width, seed + t) for t in range(frames)])
        metadata = {"fps": 2.0, "duration": frames / 2.0, "total_num_frames": frames}
        metadata |= {"frames_indices": list(range(frames)), "video_backend": "opencv", "do_sample_frames": False}
        return video, metadata

    aspect_kept = model in VIDEO_ONLY
    two = (
        [clip(3, 270, 480, 80), clip(4, 360, 640, 85)]
        if aspect_kept
        else [clip(3, 240, 200, 80), clip(4, 360, 640, 85)]
    )
    return [
        ("clip-5x57x91", "<video> describe", [clip(5, 57, 91, 70)]),
        ("clip-2x1080x1920", "<video> describe", [clip(2, 1080, 1920, 75)]),
        ("clip-2x512x512", "<video> describe", [clip(2, 512, 512, 78)]),
        ("clips-2", "<video> and <video> compare", two),
    ]


def worker(root: str, out_path: str) -> None:
    """One side: both models, every request; the results to `out_path`."""
    import logging

    import torch
    from vllm.plugins import load_general_plugins

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO)
    load_general_plugins()
    logged = []  # the plugin's lines, so that each case keeps those logged while it ran
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())
    logging.getLogger("vllm.plugins.fused_input_norm").addHandler(handler)
    results = {}
    for model, (_, _, normalize_settings) in MODELS.items():
        for device_normalize in normalize_settings:
            start = len(logged)
            processor = create_processor(os.path.join(root, model), device_normalize, trust_remote_code=True)
            hf_processor = processor.info.get_hf_processor()
            upstream = getattr(hf_processor, "image_processor", hf_processor)  # NanoNemotronVL's preprocesses itself
            key = f"{model}-{path_name(device_normalize)}"
            results[f"{key}-class"] = f"{type(upstream).__module__}.{type(upstream).__qualname__}"
            nano = model.startswith("nano_nemotron_vl")
            served = upstream._images_to_pixel_values_lst if nano else upstream.__call__
            results[f"{key}-served"] = hasattr(served, "fused_input_norm_wrapped")
            if model in VIDEO_MODELS:
                served = hf_processor._videos_to_pixel_values_lst
                results[f"{key}-video-served"] = hasattr(served, "fused_input_norm_wrapped")
                for name, prompt, videos in video_requests(model):
                    out = processor(prompt, processor.info.parse_mm_data({"video": videos}), hf_processor_mm_kwargs={})
                    results[f"{key}-{name}"] = outputs(out, "video")
            for name, prompt, images, kwargs in requests(model) if model not in VIDEO_ONLY else ():
                mm_data = processor.info.parse_mm_data({"image": images})
                out = processor(prompt, mm_data, hf_processor_mm_kwargs=kwargs)
                results[f"{key}-{name}"] = outputs(out, "image")
            results[f"{key}-log"] = logged[start:]
    torch.save(results, out_path)


def path_name(device_normalize: bool | None) -> str:
    return {None: "default", True: "uint8", False: "float"}[device_normalize]


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    for model, write in WRITERS.items():
        write(str(root / model))
    return both_sides(root, __file__)


CASES = [(model, path_name(n)) for model, (*_, settings) in MODELS.items() for n in settings]


@pytest.mark.parametrize(("model", "path"), CASES)
def test_same_outputs_plugin_on_and_off(sides, model, path):

    on, off = sides
    key = f"{model}-{path}"
    assert on[f"{key}-class"] == off[f"{key}-class"] == MODELS[model][1]
    assert on[f"{key}-served"] and not off[f"{key}-served"]
    name = MODELS[model][1].rsplit(".", 1)[1]
    handed_back = [line for line in on[f"{key}-log"] if f"{name} serves this call" in line]
    if path == "float" and model in VIDEO_MODELS:  # its float32 resize is not reproduced: vLLM's, and said (once)
        assert all("its float path" in line for line in handed_back), on["log"]
        assert len(handed_back) == (model == "nano_nemotron_vl"), on["log"]  # the first model on that path says it
    else:  # strict: every call the package's
        assert not handed_back, on["log"]
    names = [request for request, *_ in requests(model)] if model not in VIDEO_ONLY else []
    if model in VIDEO_MODELS:
        assert on[f"{key}-video-served"] and not off[f"{key}-video-served"]
        names += [request for request, *_ in video_requests(model)]
    assert_same_results(on, off, key, names, path == "uint8")


def test_log_says_fused_serves_the_subclasses(sides):
    on, off = sides
    served = [line for line in on["log"] if "serves vLLM's InternVLChatImageProcessor" in line]
    assert len(served) == 1, on["log"]
    for name in ("H2OVLImageProcessor", "LlamaNemotronNanoVLImageProcessor", "LlamaNemotronVLEmbedImageProcessor"):
        assert f"FusedImageProcessor (reference 'pil') serves vLLM's {name}" in served[0], served
        assert not any(name in line for line in off["log"]), off["log"]
    nano = [line for line in on["log"] if "serves vLLM's NanoNemotronVLProcessor images on its uint8 path" in line]
    assert len(nano) == 1, on["log"]  # once, when vLLM first builds one
    assert "serves vLLM's NanoNemotronVLProcessor videos on their uint8 path" in nano[0], nano
    assert not any("NanoNemotronVLProcessor" in line for line in off["log"]), off["log"]


# ----- in this process: the families' grids against vLLM's functions -----
SHAPES = [(h, w) for h in (1, 7, 57, 224, 448, 449, 512, 896, 1080, 3024) for w in (1, 29, 448, 560, 640, 1920, 4032)]
SHAPES += [(448, 560), (560, 448), (896, 1120), (100, 125), (4, 5), (448 * 3, 448), (40, 900), (1024, 1536)]
BOUNDS = [(1, 12), (1, 6), (2, 2), (1, 1), (3, 9), (4, 40), (5, 5), (1, 3)]


def test_h2ovl_msac_grids_are_vllms():
    """families.h2ovl.msac_grids against vLLM's two passes (calculate_h2ovl_targets over get_h2ovl_target_ratios,
    the second filtered by the first's grid), and the tile counts against its get_num_image_tokens."""
    import importlib

    from fused_input_norm.families import h2ovl

    module = importlib.import_module(H2OVL_MODULE)
    for _, high in BOUNDS:
        for h, w in SHAPES:
            found = []
            prior = None
            for low in (1, 3):
                ratios = module.get_h2ovl_target_ratios(low, high, prior_aspect_ratio=prior)
                *_, prior = module.calculate_h2ovl_targets(
                    orig_width=w, orig_height=h, target_ratios=ratios, image_size=448, use_thumbnail=True
                )
                found.append(prior)
            assert h2ovl.msac_grids(h, w, 448, high) == tuple(found), (h, w, high)


def test_nemotron_vl_tile_grid_is_vllms():
    import importlib

    from fused_input_norm.families import internvl_chat, nemotron_vl

    module = importlib.import_module(NEMOTRON_VL_MODULE)
    for low, high in BOUNDS:
        ratios = module.get_nemotron_vl_target_ratios(low, high)
        assert internvl_chat.grids(low, high) == ratios
        for h, w in SHAPES:
            blocks, width, height = module.calculate_nemotron_vl_targets(
                orig_width=w, orig_height=h, target_ratios=ratios, image_size=512, use_thumbnail=False
            )
            columns, rows = nemotron_vl.tile_grid(h, w, 512, low, high)
            assert (rows * 512, columns * 512, rows * columns) == (height, width, blocks), (h, w, low, high)


def test_served_only_as_vllm_0_34_writes_them():
    """Each class's functions are checked by vllm_internvl.moved: the installed vLLM's pass, a changed one is
    named (and its class then stays vLLM's)."""
    import importlib
    import types

    from fused_input_norm import vllm_internvl

    for name, reproduced in [
        (H2OVL_MODULE, vllm_internvl.H2OVL),
        (NEMOTRON_VL_MODULE, vllm_internvl.NEMOTRON_VL),
        (NEMOTRON_VL_MODULE, vllm_internvl.NEMOTRON_VL_EMBED),
        (NANO_MODULE, vllm_internvl.NANO),
        (NANO_MODULE, vllm_internvl.NANO_VIDEOS),
    ]:
        module = importlib.import_module(name)
        assert vllm_internvl.moved(module, reproduced) is None, name
        changed = types.SimpleNamespace(**vars(module))
        first = next(iter(reproduced))  # a module-level function of each
        setattr(changed, first, lambda *args, **kwargs: None)
        assert f"its {first} is not vllm 0.34.0's" in vllm_internvl.moved(changed, reproduced), name


if __name__ == "__main__":
    worker(*sys.argv[1:])
