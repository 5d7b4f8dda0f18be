"""Hostile per-request kwargs (issue 46): what a vLLM API user can put in mm_processor_kwargs, sent to each
served family's FusedHFImageProcessor (what vLLM holds) and to the transformers processor it wraps, called
directly. The outcome must be stock's: served with the same pixel values (uint8 equal, float32 within 1e-6,
Llama 4's bfloat16 equal), or refused by both with the same exception class. Every case runs in this one
process (a few small images each); the cases that make stock itself allocate gigabytes or run for seconds
(pixel budgets of 10^8, max_patches in the tens of thousands, 7-pixel tiles) are the flood, run with
FUSED_INPUT_NORM_LONG_PROBES=1, which also prints each one's time on vs off."""

import math
import os
import time

import numpy as np
import pytest
import torch
from test_resize import NO_TORCH_LANCZOS, TORCH_LANCZOS

from fused_input_norm.hf_adapter import FusedHFImageProcessor

transformers = pytest.importorskip("transformers", reason="needs transformers")
LONG = os.environ.get("FUSED_INPUT_NORM_LONG_PROBES") == "1"

# What a JSON client can send (NaN and inf too: Python's json reads them), and a few Python-side extras.
HOSTILE = [0, -1, 2.5, "7", True, {}, [], None, 10**12, math.nan, math.inf]


def _sizes(edge_keys: tuple[str, str]) -> list:
    low, high = edge_keys
    return [
        {low: 4096, high: 1024},  # swapped edges
        {high: {high: 1024}},  # nested
        {low: 1, high: 1},
        {low: -5, high: 2000},
        {low: "3136", high: 2000},
        {},
        "big",
        [56, 56],
    ]


# family: (processor class, {kwarg: values}, kwargs whose huge values are the flood's)
FAMILIES = {
    "qwen2_vl": (
        "Qwen2VLImageProcessor",
        {
            "min_pixels": HOSTILE,
            "max_pixels": HOSTILE,
            "patch_size": HOSTILE,
            "merge_size": HOSTILE,
            "temporal_patch_size": HOSTILE,
            "size": [*HOSTILE, *_sizes(("shortest_edge", "longest_edge"))],
        },
        {"min_pixels", "size", "patch_size", "merge_size", "temporal_patch_size"},
    ),
    "glm4v": (
        "Glm4vImageProcessor",
        {
            "size": [*HOSTILE, *_sizes(("shortest_edge", "longest_edge"))],
            "patch_size": HOSTILE,
            "merge_size": HOSTILE,
        },
        {"size", "patch_size", "merge_size", "temporal_patch_size"},
    ),
    "idefics3": (
        "Idefics3ImageProcessor",
        {
            "size": [*HOSTILE, {"longest_edge": 1}, {"longest_edge": 2}, {"height": 1, "width": 1}, {"height": 64}],
            "max_image_size": [*HOSTILE, {"longest_edge": 1}, {"longest_edge": 0}, {"longest_edge": 64}],
            "do_image_splitting": HOSTILE,
        },
        {"size", "max_image_size"},
    ),
    "llama4": (
        "Llama4ImageProcessor",
        {
            "max_patches": [*HOSTILE, [16], 40000],
            "resize_to_max_canvas": HOSTILE,
            "size": [*HOSTILE, {"height": 336, "width": 224}, {"height": 14, "width": 14}],
        },
        {"max_patches", "size"},
    ),
    "gemma3": (
        "Gemma3ImageProcessor",
        {
            "size": [*HOSTILE, {"height": 1, "width": 1}, {"height": 64, "width": 48}],
            "do_pan_and_scan": HOSTILE,
            "pan_and_scan_min_crop_size": HOSTILE,
            "pan_and_scan_max_num_crops": HOSTILE,
        },
        {"size", "pan_and_scan_max_num_crops"},
    ),
    "llava_next": (
        "LlavaNextImageProcessor",
        {
            "image_grid_pinpoints": [*HOSTILE, [[1, 1]], [[7, 13]], [[336, 336], [0, 5]], [[336, 336.5]], [(336, 672)]],
            "size": [*HOSTILE, {"height": 1, "width": 1}, {"shortest_edge": 1}, {"height": 64}],
            "crop_size": [*HOSTILE, {"height": 300, "width": 100}, {"height": 64}],
        },
        {"image_grid_pinpoints", "size", "crop_size"},
    ),
    "gemma4": (
        "Gemma4ImageProcessor",
        {
            "max_soft_tokens": [*HOSTILE, 70, 300],
            "patch_size": [*HOSTILE, 1, 7],
            "pooling_kernel_size": [*HOSTILE, 1, 3],
        },
        {"patch_size", "pooling_kernel_size"},
    ),
}


def _is_huge(value: object) -> bool:
    """Whether a value (or any number inside it) asks for a huge amount of work."""
    if isinstance(value, dict):
        return any(_is_huge(v) for v in value.values())
    if isinstance(value, list):
        return any(_is_huge(v) for v in value)
    return isinstance(value, int | float) and not isinstance(value, bool) and (value >= 4096 or value == math.inf)


def _cases() -> list:
    """Every family x kwarg x value, less the huge values of the keys that size the work (the flood's)."""
    cases = []
    for family, (_, table, huge_keys) in FAMILIES.items():
        for key, values in table.items():
            for i, value in enumerate(values):
                if not (key in huge_keys and _is_huge(value)):
                    cases.append(pytest.param(family, {key: value}, id=f"{family}-{key}-{i}"))
    return cases


# The flood: the requests issue 46 found slower or larger with the plugin, and their like, each seconds and
# gigabytes of stock's own work. Left out: budgets stock never finishes or cannot allocate on one host (a
# max_patches of 10^12 loops over 10^12 tile counts in transformers; 49000 tiles with resize_to_max_canvas are a
# 33 GB bfloat16 output), which only a host that can lose the time and memory should send.
FLOOD = [
    ("llama4", {"max_patches": 40000}),
    ("llama4", {"max_patches": 1024, "resize_to_max_canvas": True}),
    ("qwen2_vl", {"min_pixels": 10**8}),
    ("qwen2_vl", {"size": {"shortest_edge": 10**8, "longest_edge": 2 * 10**8}}),
    ("glm4v", {"size": {"shortest_edge": 10**8, "longest_edge": 2 * 10**8}}),
    ("idefics3", {"max_image_size": {"longest_edge": 7}}),
    ("gemma3", {"do_pan_and_scan": True, "pan_and_scan_max_num_crops": 4096, "pan_and_scan_min_crop_size": 1}),
    # 1-pixel patches: LLaVA-NeXT cuts its canvas into squares of crop_size's height, 451,584 of them here
    ("llava_next", {"crop_size": {"height": 1, "width": 1}}),
    # 40 x 40 pooling: a 10,240-pixel side for the default 280 soft tokens, 22 s of stock's own work
    ("gemma4", {"pooling_kernel_size": 40}),
]


def _images() -> list:
    rng = np.random.default_rng(46)
    return [rng.integers(0, 256, shape, dtype=np.uint8) for shape in [(60, 90, 3), (97, 41, 3)]]


# Families whose torchvision backend resizes with LANCZOS: where torch has no uint8 lanczos (torch 2.11),
# transformers' output is not the reference ours is exact to, so their served cases compare nothing there.
LANCZOS_FAMILIES = {"idefics3"}


def _outcome(processor, kwargs: dict) -> tuple:
    start = time.perf_counter()
    try:
        out = processor(_images(), return_tensors="pt", **kwargs)
    except Exception as e:  # the outcome compared is the exception's class
        return ("refused", type(e), time.perf_counter() - start)
    return ("served", out, time.perf_counter() - start)


def _upstream(family: str):
    name = FAMILIES[family][0]
    try:
        return getattr(transformers, name)()
    except ImportError as e:  # Llama 4 has only a torchvision backend: no stock to compare with without it
        if "torchvision" not in str(e).lower():
            raise
        pytest.skip(f"transformers' {name} needs torchvision, which is not installed")


def _check(family: str, kwargs: dict) -> tuple[float, float]:
    theirs = _outcome(_upstream(family), kwargs)
    ours = _outcome(FusedHFImageProcessor(_upstream(family)), kwargs)
    what = f"{family} {kwargs}: ours {ours[0]} ({ours[1]}), transformers {theirs[0]} ({theirs[1]})"
    assert ours[0] == theirs[0], what
    if theirs[0] == "refused":
        assert ours[1] is theirs[1], what
        return ours[2], theirs[2]
    if family in LANCZOS_FAMILIES and not TORCH_LANCZOS:  # the served bytes have no reference to compare with
        pytest.skip(f"{family} resizes with LANCZOS: {NO_TORCH_LANCZOS}")
    got, expected = ours[1], theirs[1]
    assert set(got) == set(expected), what
    for name, ref in expected.items():
        pv = got[name]
        if not isinstance(ref, torch.Tensor):
            assert pv == ref, (what, name)
            continue
        assert pv.dtype == ref.dtype and pv.shape == ref.shape, (what, name, pv.shape, ref.shape)
        if ref.dtype == torch.float32:
            assert pv.numel() == 0 or float((pv - ref).abs().max()) <= 1e-6, (what, name)
        else:
            assert torch.equal(pv, ref), (what, name)
    return ours[2], theirs[2]


@pytest.mark.parametrize(("family", "kwargs"), _cases())
def test_hostile_kwarg_has_stock_outcome(family, kwargs):
    _check(family, kwargs)


@pytest.mark.skipif(not LONG, reason="the flood of expensive hostile kwargs: set FUSED_INPUT_NORM_LONG_PROBES=1")
@pytest.mark.parametrize(("family", "kwargs"), FLOOD, ids=[f"{f}-{i}" for i, (f, _) in enumerate(FLOOD)])
def test_flood_hostile_kwarg_has_stock_outcome_and_time(family, kwargs):
    on, off = _check(family, kwargs)
    print(f"\n{family} {kwargs}: {on:.2f} s on, {off:.2f} s off")
