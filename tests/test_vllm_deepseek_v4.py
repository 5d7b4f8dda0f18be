"""vLLM's own DeepSeek-V4 / V4.1 vision processor (DeepseekV4VLImageProcessor, served in its class by
vllm_deepseek_v4): vLLM 0.34.0's `apply()` with the plugin on (FUSED_INPUT_NORM_VLLM_PROCESSOR=1) against off
(=0), both architectures in one process per side, as a server runs (`bash scripts/test_vllm.sh` runs it).

Tiny model directories, no weights: DeepseekV4ForConditionalGeneration (model_type deepseek_v4: transformers'
DeepseekV4Config, the vision settings flat at the top as vLLM reads them) and DeepseekV41ForCausalLM
(model_type deepseek_v41: vLLM's DeepseekV41Config, text_config and vision_config nested, max_wh_ratio null as
the config class defaults it). The official configs are not reachable here: V4.1's vision values are its config
class's defaults; V4's are assumed (patch 14, downsample 2, 1024 tokens, a max_wh_ratio of 4 so that the
stretch path runs). A tokenizer with the image placeholder and the sentinel tokens at the ids vLLM checks.
Requests: a small odd image, 1080p, a 9:1 strip (V4: stretched past max_wh_ratio; V4.1: padded), two images in
one prompt. vLLM refuses every per-request processor kwarg for these models (its get_hf_processor raises), so
there is no per-request case. Compared: prompt_token_ids, mm_placeholders, mm_hashes and every tensor (bf16
patches exactly); the plugin's side must serve every request (a hand-back logs, and fails the test); after
them, an RGBA image and a subclass must be handed back to vLLM's code, equal to it, logged once each.
"""

import importlib.util
import logging
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_vllm_families import WORDS, assert_same_tensors, dump, outputs
from test_vllm_processor import both_sides, class_name, photo

HAS_VLLM = importlib.util.find_spec("vllm") is not None
pytestmark = pytest.mark.skipif(
    not HAS_VLLM, reason="needs vllm: `bash scripts/test_vllm.sh` installs vllm 0.34.0 in .venv-vllm and runs this file"
)

BAR = "\uff5c"  # DeepSeek's tokens hold a fullwidth vertical line
PLACEHOLDER = f"<{BAR}deepseek_image{BAR}>"
MODULES = {
    "deepseek_v4": "vllm.models.deepseek_v4.common.mm_preprocess",
    "deepseek_v41": "vllm.models.deepseek_v41.common.mm_preprocess",
}
# (height, width) of each request's images
REQUESTS = {"57x29": [(57, 29)], "1080x1920": [(1080, 1920)], "10x90": [(10, 90)], "two": [(300, 700), (480, 640)]}
TEXT = {"vocab_size": 129280, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
TEXT |= {"num_key_value_heads": 1, "head_dim": 16, "q_lora_rank": 16, "moe_intermediate_size": 32}


def write_tokenizer(path: str, placeholder_id: int, sentinels: dict) -> None:
    """A WordLevel tokenizer saved as transformers saves one, its special tokens at DeepSeek-V4's ids (vLLM checks
    the placeholder's and the sentinels' ids against the tokenizer)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = {f"<{BAR}begin▁of▁sentence{BAR}>": 0, f"<{BAR}end▁of▁sentence{BAR}>": 1, PLACEHOLDER: placeholder_id}
    special |= sentinels
    vocab = {word: 2 + i for i, word in enumerate(WORDS)} | special
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(list(special))
    bos, eos = list(special)[:2]
    PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", bos_token=bos, eos_token=eos, pad_token=eos
    ).save_pretrained(path)


def write_deepseek_v4(path: str) -> None:
    os.makedirs(path, exist_ok=True)
    sentinels = {f"<|place_holder_mm_span_{431 + i:04d}|>": 129257 + i for i in range(5)}
    write_tokenizer(path, 128815, sentinels)
    config = {
        "architectures": ["DeepseekV4ForConditionalGeneration"],
        "model_type": "deepseek_v4",
        **TEXT,
        "vision_n_layers": 1,
        "vision_dim": 32,
        "vision_n_heads": 2,
        "vision_patch_size": 14,
        "vision_downsample_ratio": 2,
        "vision_max_n_token": 1024,
        "vision_min_pixels": 0,
        "vision_max_wh_ratio": 4.0,
        "torch_dtype": "bfloat16",
    }
    dump(path, "config.json", config)


def write_deepseek_v41(path: str) -> None:
    os.makedirs(path, exist_ok=True)
    write_tokenizer(path, 129264, {})
    vision = {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64}
    vision |= {"patch_size": 14, "downsample_ratio": 3, "max_image_tokens": 1024, "min_pixels": 295936}
    config = {
        "architectures": ["DeepseekV41ForCausalLM"],
        "model_type": "deepseek_v41",
        "image_token_id": 129264,
        "text_config": TEXT | {"model_type": "deepseek_v4"},
        "vision_config": vision | {"max_wh_ratio": None},
        "torch_dtype": "bfloat16",
    }
    dump(path, "config.json", config)


WRITERS = {"deepseek_v4": write_deepseek_v4, "deepseek_v41": write_deepseek_v41}


def requests():
    """(name, prompt, images)."""
    from PIL import Image

    out = []
    for k, (name, sizes) in enumerate(REQUESTS.items()):
        images = [Image.fromarray(photo(h, w, 10 * k + i)) for i, (h, w) in enumerate(sizes)]
        prompt = " and ".join([PLACEHOLDER] * len(images)) + " describe"
        out.append((name, prompt, images))
    return out


def worker(root: str, out_path: str) -> None:
    """One side: both models, every request through apply(); the results to `out_path`."""
    import torch
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.plugins import load_general_plugins

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO)  # as a server shows vLLM's INFO lines
    load_general_plugins()
    results = {}
    for model in WRITERS:
        path = os.path.join(root, model)
        config = ModelConfig(model=path, tokenizer=path, dtype="bfloat16", seed=0)
        processor = MULTIMODAL_REGISTRY.create_processor(config)
        image_processor = processor.info.get_hf_processor().image_processor
        results[f"{model}-class"] = class_name(image_processor)
        results[f"{model}-served"] = hasattr(type(image_processor).__call__, "fused_input_norm_wrapped")
        for name, prompt, images in requests():
            out = processor(prompt, processor.info.parse_mm_data({"image": images}), hf_processor_mm_kwargs={})
            results[f"{model}-{name}"] = outputs(out, "image")
    results["handed-back"] = handed_back(image_processor) if results[f"{model}-served"] else None
    torch.save(results, out_path)


def handed_back(served) -> list:
    """After the requests, on the served side: what the wrapped __call__ gives for the calls it hands back (an
    RGBA image, a subclass), each against vLLM's own __call__ run directly: equal or not."""
    import torch
    from PIL import Image

    own = type(served).__call__.fused_input_norm_wrapped
    subclass = type("Subclass", (type(served),), {})
    stand_in = object.__new__(subclass)
    stand_in.__dict__.update(served.__dict__)
    rgba = Image.fromarray(photo(40, 60, 7)).convert("RGBA")
    rgb = Image.fromarray(photo(40, 60, 8))
    same = []
    for processor, image in [(served, rgba), (stand_in, rgb)]:
        got, expected = processor(image), own(processor, image)
        same.append(torch.equal(got[0], expected[0]) and got[1:] == expected[1:])
    return same


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    for model, write in WRITERS.items():
        write(str(root / model))
    return both_sides(root, __file__)


@pytest.mark.parametrize("model", WRITERS)
def test_same_outputs_plugin_on_and_off(sides, model):
    import torch

    on, off = sides
    assert on[f"{model}-served"] and not off[f"{model}-served"]
    assert on[f"{model}-class"] == off[f"{model}-class"] == f"{MODULES[model]}.DeepseekV4VLImageProcessor"
    for name in REQUESTS:
        got, expected = on[f"{model}-{name}"], off[f"{model}-{name}"]
        for field in ("prompt_token_ids", "mm_placeholders", "mm_hashes"):
            assert got[field] == expected[field], f"{model} {name}: {field}"
        assert_same_tensors(f"{model} {name}", got["tensors"], expected["tensors"])
    patches = on[f"{model}-1080x1920"]["tensors"][0]["patches"]
    assert patches.dtype == torch.bfloat16 and patches.shape[1:] == (3, 14, 14)
    # The sizes make what they are there for: 1080p shrunk to the budget, with grey rows above (ImageOps.pad's
    # round of half the spare rows: 1 for V4, 2 for V4.1); the odd image kept (V4) or grown to min_pixels (V4.1);
    # the 9:1 strip stretched past max_wh_ratio (V4: no grey row) or grown and fitted exactly (V4.1).
    grids = {name: [item["vit_grid"].tolist() for item in on[f"{model}-{name}"]["tensors"]] for name in REQUESTS}
    expected = {
        "deepseek_v4": {"57x29": [[5, 3]], "1080x1920": [[44, 78]], "10x90": [[1, 3]]},
        "deepseek_v41": {"57x29": [[55, 28]], "1080x1920": [[69, 122]], "10x90": [[13, 117]]},
    }[model]
    assert {name: grids[name] for name in expected} == expected, grids
    grey = torch.tensor(127 / 255 * 2 - 1).to(torch.bfloat16)
    top = {"deepseek_v4": 1, "deepseek_v41": 2}[model]
    first_row = patches[: expected["1080x1920"][0][1]]
    assert bool((first_row[:, :, :top] == grey).all()) and not bool((first_row[:, :, top] == grey).all())
    strip = on[f"{model}-10x90"]["tensors"][0]["patches"]
    assert not bool((strip == grey).all(-1).all(1).any()), "no grey pixel row in the strip"


def test_log_says_fused_serves_deepseek_v4(sides):
    on, off = sides
    for model in ("DeepSeek-V4", "DeepSeek-V4.1"):
        assert any(f"serves vLLM's DeepseekV4VLImageProcessor of {model} in" in entry for entry in on["log"]), on["log"]
    # the only calls handed back are the two handed_back() makes last, each equal to vLLM's own
    assert on["handed-back"] == [True, True] and off["handed-back"] is None
    reasons = sorted(entry.split("serves this call: ")[1] for entry in on["log"] if "serves this call" in entry)
    assert reasons == [
        "Subclass is a subclass of DeepseekV4VLImageProcessor with preprocessing of its own",
        "a RGBA image (vLLM converts it to RGB first)",
    ], on["log"]
    assert not any("DeepseekV4VL" in entry for entry in off["log"]), off["log"]


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
