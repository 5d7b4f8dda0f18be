"""vLLM 0.34.0's multimodal processors with the plugin serving images (FusedHFImageProcessor) against the same
vLLM with transformers' processor: `bash scripts/test_vllm.sh` runs this file in .venv-vllm.

Each side runs in its own process (FUSED_INPUT_NORM_VLLM_PROCESSOR=1 and =0), as a server would, on tiny local
Qwen2-VL, Qwen2.5-VL and Qwen3-VL model directories written here (config.json from transformers' config
classes, a `tokenizers` tokenizer holding the Qwen special tokens, preprocessor_config.json with the
checkpoints' min/max pixels), with vLLM's device normalize on (uint8 patch rows: equal exactly) and off
(float32 before vLLM's cast to the model dtype: within 1e-6; vLLM casts floats to bfloat16, so the workers
run with dtype float32 to compare the processor's values). Compared: prompt_token_ids, mm_placeholders,
mm_hashes, image_grid_thw, pixel_values; for videos (FusedHFVideoProcessor), the same plus video_grid_thw,
pixel_values_videos and Qwen2.5-VL's second_per_grid_ts.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

HAS_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

MODELS = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>"]
SPECIAL += ["<|video_pad|>"]
WORDS = ["[UNK]", "describe", "these", "images", "and", "compare", "them", "."]
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"
# (height, width): phone photos (12 MP), 1080p, VGA, tiny, elongated, and one already at a patch multiple.
SIZES = [(3024, 4032), (1080, 1920), (480, 640), (57, 29), (40, 900), (448, 336)]
# Per-request mm_processor_kwargs, as a request's mm_processor_kwargs carry them.
REQUEST_KWARGS = [
    {"max_pixels": 1003520},
    {"min_pixels": 200704, "max_pixels": 401408},
    {"size": {"shortest_edge": 50176, "longest_edge": 262144}},
]


def write_model(path: str, model: str) -> None:
    """A tiny model directory vLLM's ModelConfig and create_processor load: no weights."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    os.makedirs(path, exist_ok=True)
    vocab = {t: i for i, t in enumerate(WORDS + SPECIAL)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(SPECIAL)
    eos = "<|endoftext|>"
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="[UNK]", eos_token=eos, pad_token=eos
    ).save_pretrained(path)
    token_ids = {
        "image_token_id": vocab["<|image_pad|>"],
        "video_token_id": vocab["<|video_pad|>"],
        "vision_start_token_id": vocab["<|vision_start|>"],
        "vision_end_token_id": vocab["<|vision_end|>"],
    }
    text = {
        "vocab_size": 64,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 32768,
        "bos_token_id": vocab[eos],
        "eos_token_id": vocab[eos],
    }
    vision = {"depth": 1, "hidden_size": 32, "num_heads": 2, "spatial_merge_size": 2, "temporal_patch_size": 2}
    mean, std, patch = CLIP_MEAN, CLIP_STD, 14
    if model == "qwen2_vl":
        from transformers import Qwen2VLConfig as Config

        vision |= {"embed_dim": 32, "mlp_ratio": 2, "patch_size": 14}
        text["rope_scaling"] = {"type": "mrope", "mrope_section": [2, 3, 3]}
        arch, processor = "Qwen2VLForConditionalGeneration", "Qwen2VLProcessor"
    elif model == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig as Config

        vision |= {"out_hidden_size": 32, "intermediate_size": 64, "patch_size": 14, "window_size": 112}
        vision["fullatt_block_indexes"] = [0]
        text["rope_scaling"] = {"type": "mrope", "mrope_section": [2, 3, 3]}
        arch, processor = "Qwen2_5_VLForConditionalGeneration", "Qwen2_5_VLProcessor"
    else:
        from transformers import Qwen3VLConfig as Config

        vision |= {"out_hidden_size": 32, "intermediate_size": 64, "patch_size": 16, "num_position_embeddings": 64}
        vision["deepstack_visual_indexes"] = [0]
        text |= {"head_dim": 16, "rope_scaling": {"rope_type": "default", "mrope_section": [2, 3, 3]}}
        text["rope_scaling"]["mrope_interleaved"] = True
        arch, processor = "Qwen3VLForConditionalGeneration", "Qwen3VLProcessor"
        mean, std, patch = [0.5] * 3, [0.5] * 3, 16
    config = Config(text_config=text, vision_config=vision, **token_ids)
    config.architectures = [arch]
    config.save_pretrained(path)
    preprocessor = {
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": processor,
        "min_pixels": 3136,
        "max_pixels": 12845056,
        "patch_size": patch,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": mean,
        "image_std": std,
    }
    with open(os.path.join(path, "preprocessor_config.json"), "w") as f:
        json.dump(preprocessor, f)


def class_name(processor: object) -> str:
    """The adapter class where the plugin stands one in (its type is a subclass of transformers' class and
    carries that class's name and module, so the name alone does not tell), otherwise the processor's class."""
    for cls in type(processor).__mro__:
        if cls.__module__ == "fused_input_norm.hf_adapter":
            return f"{cls.__module__}.{cls.__qualname__}"
    return f"{type(processor).__module__}.{type(processor).__name__}"


def photo(height: int, width: int, seed: int):
    """A photo-like uint8 RGB image: smooth gradients and edges plus noise (every resampling tap matters)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack([x / width * 255, y / height * 255, ((x // 37 + y // 23) % 2) * 200], axis=-1)
    return np.clip(base + rng.normal(0, 25, (height, width, 3)), 0, 255).astype(np.uint8)


def requests():
    """(name, prompt, images, mm_processor_kwargs): each size alone, gray and RGBA PIL images as the offline API
    hands them, the same through vLLM's media loader (PNG bytes), a batch of three in one prompt, and the
    per-request kwargs."""
    import io

    from PIL import Image
    from vllm.multimodal.media import ImageMediaIO

    out = []
    for i, (h, w) in enumerate(SIZES):
        out.append((f"{h}x{w}", IMAGE + " describe", [Image.fromarray(photo(h, w, i))], {}))
    rgb = photo(300, 400, 10)
    gray = Image.fromarray(rgb[..., 1])
    alpha = (photo(300, 400, 11)[..., 0] // 2 + 64).astype("uint8")
    rgba = Image.fromarray(__import__("numpy").dstack([rgb, alpha]), "RGBA")
    out.append(("gray", IMAGE + " describe", [gray], {}))
    out.append(("rgba", IMAGE + " describe", [rgba], {}))
    loader = ImageMediaIO()
    for name, image in (("gray", gray), ("rgba", rgba)):
        png = io.BytesIO()
        image.save(png, format="PNG")
        out.append((f"{name}-media-loader", IMAGE + " describe", [loader.load_bytes(png.getvalue())], {}))
    batch = [Image.fromarray(photo(h, w, 20 + i)) for i, (h, w) in enumerate([(480, 640), (1080, 1920), (57, 29)])]
    out.append(("batch", " and ".join([IMAGE] * 3) + " compare them", batch, {}))
    for i, kwargs in enumerate(REQUEST_KWARGS):
        out.append((f"kwargs{i}", " and ".join([IMAGE] * 2) + " compare", batch[:2], kwargs))
    # A kwarg FusedImageProcessor does not reproduce (nearest resampling): transformers' serves the call.
    out.append(("fallback", IMAGE + " describe", batch[:1], {"resample": 0}))
    return out


VIDEO = "<|vision_start|><|video_pad|><|vision_end|>"


def video_requests():
    """(name, prompt, videos): clips as vLLM's video loader hands them to the processor, (frames [T, H, W, 3]
    uint8, metadata) with its frames already sampled (do_sample_frames False): an odd frame count, and two
    clips of different sizes in one prompt."""
    import numpy as np

    def clip(frames: int, height: int, width: int, seed: int):
        video = np.stack([photo(height, width, seed + t) for t in range(frames)])
        metadata = {
            "fps": 2.0,
            "duration": frames / 2.0,
            "total_num_frames": frames,
            "frames_indices": list(range(frames)),
            "video_backend": "opencv",
            "do_sample_frames": False,
        }
        return video, metadata

    return [
        ("clip-9x180x320", VIDEO + " describe", [clip(9, 180, 320, 40)]),
        ("clips-2", " and ".join([VIDEO] * 2) + " compare", [clip(4, 240, 200, 50), clip(6, 360, 640, 60)]),
    ]


def worker(root: str, out_path: str) -> None:
    """One side: every model, device normalize on and off, every request; the results to `out_path`."""
    import logging

    import torch
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.plugins import load_general_plugins

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO)  # as a server shows vLLM's INFO lines (a bare import shows none)
    load_general_plugins()
    results = {}
    for model in MODELS:
        for device_normalize in (True, False):
            path = os.path.join(root, model)
            config = ModelConfig(
                model=path, tokenizer=path, dtype="float32", mm_device_do_normalize=device_normalize, seed=0
            )
            processor = MULTIMODAL_REGISTRY.create_processor(config)
            image_processor = processor.info.get_hf_processor().image_processor
            key = f"{model}-{'uint8' if device_normalize else 'float'}"
            results[key + "-class"] = class_name(image_processor)
            video_processor = processor.info.get_hf_processor().video_processor
            results[key + "-video-class"] = class_name(video_processor)
            for name, prompt, videos in video_requests():
                out = processor(prompt, processor.info.parse_mm_data({"video": videos}), hf_processor_mm_kwargs={})
                items = out["mm_kwargs"]["video"]
                results[f"{key}-{name}"] = {
                    "prompt_token_ids": list(out["prompt_token_ids"]),
                    "mm_placeholders": [(p.offset, p.length) for p in out["mm_placeholders"]["video"]],
                    "mm_hashes": list(out["mm_hashes"]["video"]),
                    "video_grid_thw": torch.stack([item["video_grid_thw"].data for item in items]),
                    "pixel_values": torch.cat([item["pixel_values_videos"].data for item in items]),
                    "second_per_grid_ts": [
                        item["second_per_grid_ts"].data.tolist() for item in items if "second_per_grid_ts" in item
                    ],
                }
            for name, prompt, images, kwargs in requests():
                out = processor(prompt, processor.info.parse_mm_data({"image": images}), hf_processor_mm_kwargs=kwargs)
                items = out["mm_kwargs"]["image"]
                results[f"{key}-{name}"] = {
                    "prompt_token_ids": list(out["prompt_token_ids"]),
                    "mm_placeholders": [(p.offset, p.length) for p in out["mm_placeholders"]["image"]],
                    "mm_hashes": list(out["mm_hashes"]["image"]),
                    "image_grid_thw": torch.stack([item["image_grid_thw"].data for item in items]),
                    "pixel_values": torch.cat([item["pixel_values"].data for item in items]),
                }
    from PIL import Image

    results["pillow_block_size"] = Image.core.get_block_size()
    torch.save(results, out_path)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """Both sides' results: (plugin on, plugin off)."""
    root = tmp_path_factory.mktemp("models")
    for model in MODELS:
        write_model(str(root / model), model)
    return both_sides(root, __file__)


def written_sides(tmp_path_factory, models, write, script: str) -> list[dict]:
    """both_sides on fresh directories: write(path, model) for each of `models` under one temporary root."""
    root = tmp_path_factory.mktemp("models")
    for model in models:
        write(str(root / model), model)
    return both_sides(root, script)


def both_sides(root, script: str, switches: tuple = ("1", "0")) -> list[dict]:
    """`script`'s worker run on the model directories under `root` with the plugin on, then off (`switches`),
    each in its own process as a server runs: their results, each with the log lines that name fused_input_norm."""
    results = []
    for switch in switches:
        out = root / f"side{switch}.pt"
        env = {**os.environ, "FUSED_INPUT_NORM_VLLM_PROCESSOR": switch, "OMP_NUM_THREADS": "1"}
        run = subprocess.run(
            [sys.executable, script, str(root), str(out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            cwd="/",  # the installed package, not the source tree
        )
        assert run.returncode == 0, run.stderr[-4000:]
        import torch

        results.append(torch.load(out, weights_only=False))
        results[-1]["log"] = [line for line in (run.stdout + run.stderr).splitlines() if "fused_input_norm" in line]
    return results


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("path", ["uint8", "float"])
def test_same_outputs_as_transformers(sides, model, path):
    import torch

    on, off = sides
    key = f"{model}-{path}"
    assert on[key + "-class"] == "fused_input_norm.hf_adapter.FusedHFImageProcessor"
    assert off[key + "-class"].startswith("transformers."), off[key + "-class"]
    names = [name for name, *_ in requests_names()]
    for name in names:
        got, expected = on[f"{key}-{name}"], off[f"{key}-{name}"]
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
            assert got[field] == expected[field], f"{name}: {field}"
        assert torch.equal(got["image_grid_thw"], expected["image_grid_thw"]), name
        pv, ref = got["pixel_values"], expected["pixel_values"]
        assert pv.dtype == ref.dtype == (torch.uint8 if path == "uint8" else torch.float32), (name, pv.dtype, ref.dtype)
        assert pv.shape == ref.shape, name
        if path == "uint8":
            assert torch.equal(pv, ref), f"{name}: {int((pv != ref).sum())} bytes differ"
        else:
            diff = float((pv - ref).abs().max())
            assert diff <= 1e-6, f"{name}: differs by {diff}"


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("path", ["uint8", "float"])
def test_same_video_outputs_as_transformers(sides, model, path):
    """Videos through vLLM's processor: tokens, placeholders, hashes, grids, Qwen2.5-VL's second_per_grid_ts
    and pixel_values_videos (uint8 exactly, float32 within 1e-6)."""
    import torch

    on, off = sides
    key = f"{model}-{path}"
    assert on[key + "-video-class"] == "fused_input_norm.hf_adapter.FusedHFVideoProcessor"
    assert off[key + "-video-class"].startswith("transformers."), off[key + "-video-class"]
    for name in ("clip-9x180x320", "clips-2"):
        got, expected = on[f"{key}-{name}"], off[f"{key}-{name}"]
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes", "second_per_grid_ts"):
            assert got[field] == expected[field], f"{name}: {field}"
        assert torch.equal(got["video_grid_thw"], expected["video_grid_thw"]), name
        pv, ref = got["pixel_values"], expected["pixel_values"]
        assert pv.dtype == ref.dtype == (torch.uint8 if path == "uint8" else torch.float32), (name, pv.dtype)
        assert pv.shape == ref.shape, name
        if path == "uint8":
            assert torch.equal(pv, ref), f"{name}: {int((pv != ref).sum())} bytes differ"
        else:
            diff = float((pv - ref).abs().max())
            assert diff <= 1e-6, f"{name}: differs by {diff}"
    assert (model == "qwen2_5_vl") == bool(on[f"{key}-clips-2"]["second_per_grid_ts"])
    assert not any("serves this call" in line and "Video" in line for line in on["log"]), on["log"]


def requests_names():
    """The request names, without building images."""
    return (
        [(f"{h}x{w}",) for h, w in SIZES]
        + [(n,) for n in ("gray", "rgba", "gray-media-loader", "rgba-media-loader", "batch")]
        + [(f"kwargs{i}",) for i in range(len(REQUEST_KWARGS))]
        + [("fallback",)]
    )


def test_log_says_which_processor_serves_images(sides):
    on, off = sides
    served = [line for line in on["log"] if "serves images" in line]
    assert any("FusedImageProcessor" in line and "Qwen2VLForConditionalGeneration" in line for line in served), on[
        "log"
    ]
    assert any("Qwen3VLForConditionalGeneration" in line for line in served), on["log"]
    assert any("FUSED_INPUT_NORM_VLLM_PROCESSOR=0" in line for line in off["log"]), off["log"]
    assert all("FusedVideoProcessor serves videos" in line for line in served if "FusedImageProcessor" in line)
    assert any("serves this call" in line and "nearest" in line for line in on["log"]), on["log"]
    # The plugin's Pillow block size: the 12 MP photos decoded after it are one block, read in place.
    assert on["pillow_block_size"] == 256 << 20 and off["pillow_block_size"] == 16 << 20
    assert any("block size raised to 256 MiB" in line for line in on["log"]), on["log"]


if __name__ == "__main__":
    worker(*sys.argv[1:])
