"""vLLM's own DeepSeek-V4 / V4.1 vision preprocessing (DeepseekV4VLImageProcessor in
vllm/models/deepseek_v4/common/mm_preprocess.py and vllm/models/deepseek_v41/common/mm_preprocess.py, what vLLM
runs for DeepseekV4ForConditionalGeneration and DeepseekV41ForCausalLM): per image a canvas of whole patches
sized to a token budget (max_n_token LLM tokens, each downsample_ratio x downsample_ratio patches, plus a newline
token per row), then either Pillow's ImageOps.pad to it (a bicubic contain-fit, centered on grey 127) or, for an
image at least max_wh_ratio times wider than tall, a plain bicubic resize to it; then x / 255, (x - 0.5) / 0.5
in float32, cast to bfloat16 (one affine then one rounding: the same bfloat16 for every byte, checked by
tests/test_deepseek_v4.py), cut into patches.

pixel_values [patches, C, P, P] (each image's patches row by row), vit_grid and llm_grid (int64 [n, 2]: each
image's patch rows and columns, and its LLM token rows and columns). The two vLLM versions differ only in how
they shrink a canvas over budget (`budget`: "v4" or "v4.1").
"""

import math
from collections.abc import Mapping

import torch

from ..checks import is_int, positive_int
from .base import COMMON_DEFAULTS, STANDARD_MEAN, STANDARD_STD, Job, Plan, padded

KIND = "deepseek_v4"
TYPES = ("DeepseekV4VLImageProcessor",)  # no transformers class: vllm_deepseek_v4 builds the config
PROCESSOR_CLASSES = ()
PIL_BYTES_AS_FLOAT = False
KEYS = ("patch_size", "downsample_ratio", "max_n_token", "min_pixels", "max_wh_ratio", "budget")
BUDGETS = ("v4", "v4.1")
FILL = 127  # vLLM's color=(127, 127, 127)
COMPRESS_PAD_TO = 4  # DeepSeek-V4's compressor-alignment pad, reserved out of the budget (not V4.1's)
# The DeepSeek-V4-Flash-Vision config's values (vLLM reads them from config.json; it has no defaults).
DEFAULTS = {
    **COMMON_DEFAULTS,
    "size": {"height": 14, "width": 14},
    "image_mean": STANDARD_MEAN,
    "image_std": STANDARD_STD,
    "patch_size": 14,
    "downsample_ratio": 2,
    "max_n_token": 1024,
    "min_pixels": 0,
    "max_wh_ratio": None,
    "budget": "v4",
}


def settings(config: Mapping, get, where: str) -> dict:
    patch = positive_int(where, "patch_size", get("patch_size"))
    options = {key: positive_int(where, key, get(key)) for key in ("downsample_ratio", "max_n_token")}
    if options["max_n_token"] < 2 * COMPRESS_PAD_TO + 2:
        raise ValueError(f"{where}: max_n_token must be at least {2 * COMPRESS_PAD_TO + 2}, got {get('max_n_token')}")
    min_pixels = get("min_pixels")
    if not is_int(min_pixels) or min_pixels < 0:
        raise ValueError(f"{where}: min_pixels must be an int >= 0, got {min_pixels!r}")
    ratio = get("max_wh_ratio")
    if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not ratio > 0):
        raise ValueError(f"{where}: max_wh_ratio must be a number > 0 or null, got {ratio!r}")
    if get("budget") not in BUDGETS:
        raise ValueError(f"{where}: budget must be one of {BUDGETS}, got {get('budget')!r}")
    if not get("do_resize") or not get("do_rescale") or not get("do_normalize"):
        raise ValueError(f"{where}: DeepSeek-V4 always resizes, rescales and normalizes")
    options |= {"min_pixels": min_pixels, "max_wh_ratio": ratio, "budget": get("budget")}
    return {"size": {"height": patch, "width": patch}, "options": options}


def llm_grid(height: int, width: int, patch: int, ratio: int) -> tuple[int, int]:
    return math.ceil((height // patch) / ratio), math.ceil((width // patch) / ratio)


def v4_tokens(n_h: int, n_w: int) -> int:
    """DeepSeek-V4's block length of an LLM grid: rows of n_w + a newline, start and end, and an odd row count
    and the row pairs' odd length padded."""
    return n_h * (n_w + 1) + 2 + (n_h % 2) * (n_w + 1) + (n_h + 1) // 2 * (n_w + 1) % 2 * 2


def v41_tokens(n_h: int, n_w: int) -> int:
    """DeepSeek-V4.1's span length of an LLM grid: rows of n_w + a newline, start and end."""
    return n_h * (n_w + 1) + 2


def v4_solve(height, width, patch: int, ratio: int, budget: int) -> tuple[int, int]:
    """DeepSeek-V4's largest (height, width) in whole patches whose block fits `budget` tokens."""
    r = height / width
    max_w_float = math.sqrt((budget - 2) / r + 0.25) - 0.5
    max_h_float = max_w_float * r
    if max_w_float < 1.0:
        max_h = (budget - 2) // 2
        max_h -= max_h % 2
        return max_h * patch * ratio, patch * ratio
    if max_h_float < 2.0:
        if (budget - 2) // 2 - 1 <= 1:  # vLLM's assert fails
            raise ValueError(f"no two-row canvas fits a budget of {budget} tokens")
        return 2 * patch * ratio, ((budget - 2) // 2 - 1) * patch * ratio
    max_w, max_h = math.floor(max_w_float), math.floor(max_h_float)
    max_h -= max_h % 2
    beta = min(max_w * patch * ratio / width, max_h * patch * ratio / height)
    return math.floor(height * beta / patch) * patch, math.floor(width * beta / patch) * patch


def v41_solve(height, width, patch: int, ratio: int, budget: int) -> tuple[int, int]:
    """DeepSeek-V4.1's largest (height, width) in whole patches whose span fits `budget` tokens."""
    r = height / width
    max_w_float = math.sqrt((budget - 2) / r + 0.25) - 0.5
    max_h_float = max_w_float * r
    cell = patch * ratio
    if max_w_float < 1.0:
        return (budget - 2) // 2 * cell, cell
    if max_h_float < 1.0:
        return cell, (budget - 3) * cell
    beta = min(math.floor(max_w_float) * cell / width, math.floor(max_h_float) * cell / height)
    return math.floor(height * beta / patch) * patch, math.floor(width * beta / patch) * patch


def canvas(height: int, width: int, o: Mapping, patch: int) -> tuple[int, int]:
    """The (height, width) vLLM's load_image gives an image of this size: the image's own size (widened to
    max_wh_ratio's cap, grown to min_pixels) rounded up to whole patches, shrunk until it fits the budget."""
    ratio, cap = o["downsample_ratio"], o["max_wh_ratio"]
    h, w = height, width
    if cap is not None and w > h * cap:
        w = h * cap
    if 0 < w * h < o["min_pixels"]:
        scale = (o["min_pixels"] / (w * h)) ** 0.5
        w, h = int(w * scale), int(h * scale)
    best = (math.ceil(h / patch) * patch, math.ceil(w / patch) * patch)
    if o["budget"] == "v4.1":
        if v41_tokens(*llm_grid(*best, patch, ratio)) > o["max_n_token"]:
            best = v41_solve(h, w, patch, ratio, o["max_n_token"])
            if v41_tokens(*llm_grid(*best, patch, ratio)) > o["max_n_token"]:  # vLLM's assert fails
                raise ValueError(f"no canvas of a {height}x{width} image fits max_n_token={o['max_n_token']}")
        return best
    budget = o["max_n_token"] - (COMPRESS_PAD_TO - 1)
    limit = budget
    while v4_tokens(*llm_grid(*best, patch, ratio)) > limit:
        best = v4_solve(h, w, patch, ratio, budget)
        budget -= 1
    return best


def plan(s, shapes: list, where: str) -> Plan:
    patch, o = s.size["height"], s.options
    cap = o["max_wh_ratio"]
    jobs, vit, llm, start = [], [], [], 0
    for i, (height, width) in enumerate(shapes):
        best = canvas(height, width, o, patch)
        if min(best) < patch:
            raise ValueError(f"{where}: image {i} ({height}x{width}) gets a canvas of {best[0]}x{best[1]}, no patch")
        grid = (best[0] // patch, best[1] // patch)
        rows = grid[0] * grid[1]
        if cap is not None and width >= cap * height:  # vLLM's image.resize(best): stretched, no canvas
            jobs.append(Job(i, best, (0, 0, *best), (start, start + rows), patches=(1, patch, 1)))
        else:
            jobs.append(padded(i, height, width, best, FILL, (start, start + rows), where, patches=(1, patch, 1)))
        vit.append(grid)
        llm.append(llm_grid(*best, patch, o["downsample_ratio"]))
        start += rows
    extras = {
        "vit_grid": torch.tensor(vit, dtype=torch.int64, device="cpu").reshape(-1, 2),
        "llm_grid": torch.tensor(llm, dtype=torch.int64, device="cpu").reshape(-1, 2),
    }
    return Plan((start, s.normalization.channel, patch, patch), jobs, extras)
