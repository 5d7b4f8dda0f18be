"""families.internvl_chat (vLLM's InternVLChatImageProcessor, served by vllm_internvl) through FusedImageProcessor,
against an independent reference: the tile grid from transformers' GotOcr2 get_optimal_tiled_canvas (InternVL's
rule, written by transformers), Pillow's resize and crops, and ToTensor + Normalize in float32 as torchvision
computes them. (tests/test_vllm_families.py checks the grid against vLLM's own code, ties included, and the
whole processor on vs off through vLLM's apply().)"""

import numpy as np
import pytest
import torch
from PIL import Image

from fused_input_norm import FusedImageProcessor
from fused_input_norm.families import internvl_chat

# transformers' GOT-OCR2 module (the grid's reference) imports torchvision, and torchvision computes
# ToTensor + Normalize: both are needed.
get_optimal_tiled_canvas = pytest.importorskip(
    "transformers.models.got_ocr2.image_processing_got_ocr2",
    reason="the grid's reference (transformers' GOT-OCR2 module) and ToTensor + Normalize need torchvision",
    exc_type=ImportError,
).get_optimal_tiled_canvas

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
TILE = 448


def photo(height: int, width: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack([x / width * 255, y / height * 255, ((x // 37 + y // 23) % 2) * 200], axis=-1)
    return np.clip(base + rng.normal(0, 25, (height, width, 3)), 0, 255).astype(np.uint8)


def reference(image: Image.Image, low: int, high: int, thumbnail: bool) -> torch.Tensor:
    """InternVL's preprocessing written from its description: the closest grid, Pillow's (default, bicubic)
    resize to it, row-major tiles, a thumbnail where there is more than one tile; x / 255, - mean, / std."""
    columns, rows = get_optimal_tiled_canvas((image.height, image.width), (TILE, TILE), low, high)
    resized = image.resize((columns * TILE, rows * TILE))
    tiles = [
        resized.crop((c * TILE, r * TILE, (c + 1) * TILE, (r + 1) * TILE)) for r in range(rows) for c in range(columns)
    ]
    if thumbnail and len(tiles) > 1:
        tiles.append(image.resize((TILE, TILE)))
    x = torch.stack([torch.from_numpy(np.array(t.convert("RGB"))).permute(2, 0, 1) for t in tiles])
    mean, std = torch.tensor(MEAN).view(3, 1, 1), torch.tensor(STD).view(3, 1, 1)
    return (x.float().div(255) - mean) / std


def config(**overrides) -> dict:
    return {"image_processor_type": "InternVLChatImageProcessor", "size": TILE, **overrides}


SHAPES = [(1080, 1920), (480, 640), (57, 29), (40, 900), (448, 448), (1500, 700)]


@pytest.mark.parametrize(
    ("low", "high", "dynamic", "thumbnail"),
    [(1, 12, True, True), (1, 6, True, True), (2, 4, True, False), (1, 12, False, True)],
)
def test_tiles_match_pillow_and_torchvision(low, high, dynamic, thumbnail):
    options = {"min_dynamic_patch": low, "max_dynamic_patch": high, "dynamic_image_size": dynamic}
    processor = FusedImageProcessor.from_preprocessor_config(
        config(**options, use_thumbnail=thumbnail), device="cpu", reference="pil"
    )
    images = [Image.fromarray(photo(h, w, i)) for i, (h, w) in enumerate(SHAPES)]
    images.append(Image.fromarray(photo(300, 400, 9)[..., 1]))  # gray: repeated to RGB, as vLLM converts it
    out = processor(images)
    bounds = (low, high) if dynamic else (1, 1)
    expected = [reference(image, *bounds, thumbnail) for image in images]
    assert out["num_patches"].tolist() == [len(e) for e in expected]
    assert out["num_patches"].dtype == torch.int64
    ref = torch.cat(expected)
    assert out["pixel_values"].shape == ref.shape and out["pixel_values"].dtype == torch.float32
    assert float((out["pixel_values"] - ref).abs().max()) <= 1e-6
    # The resized bytes themselves are Pillow's, exactly: the uint8 output against the reference's bytes.
    raw = processor(images, visual_dtype=torch.uint8)["pixel_values"]
    mean, std = torch.tensor(MEAN).view(3, 1, 1), torch.tensor(STD).view(3, 1, 1)
    assert torch.equal(((raw.float().div(255) - mean) / std), ref)


def test_tile_grid_matches_transformers_rule():
    """Away from ties (which vLLM's grid order decides, checked against vLLM in test_vllm_families), the grid
    is transformers' GotOcr2 one, over many shapes and bounds."""
    for low, high in [(1, 12), (1, 6), (3, 9), (1, 1)]:
        for h in (1, 30, 224, 448, 700, 1080, 3024):
            for w in (1, 29, 448, 640, 1920, 4032):
                assert internvl_chat.tile_grid(h, w, TILE, low, high) == get_optimal_tiled_canvas(
                    (h, w), (TILE, TILE), low, high
                ), (h, w, low, high)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"min_dynamic_patch": 5, "max_dynamic_patch": 2}, "min_dynamic_patch \\(5\\) > max_dynamic_patch \\(2\\)"),
        ({"max_dynamic_patch": 0}, "max_dynamic_patch"),
        ({"size": {"height": 448, "width": 224}}, "one square tile side"),
        ({"dynamic_image_size": "yes"}, "dynamic_image_size must be true or false"),
    ],
)
def test_bad_configs_are_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        FusedImageProcessor.from_preprocessor_config(config(**overrides), device="cpu")


@pytest.mark.parametrize("model_dtype", [torch.bfloat16, torch.float16], ids=str)
def test_model_input_equals_totensor_normalize_for_every_byte(model_dtype):
    """float32 pixel_values differ from ToTensor + Normalize by up to 2 ulp (x * w + b against (x / 255 - m) /
    s); what the model gets, the values cast to its dtype, is the same for every byte value of every channel."""
    processor = FusedImageProcessor.from_preprocessor_config(config(dynamic_image_size=False), device="cpu")
    levels = np.repeat(np.arange(256, dtype=np.uint8), TILE * TILE // 256)
    image = np.stack([levels.reshape(TILE, TILE)] * 3, axis=-1)  # every byte in every channel, at the tile size
    got = processor([image])["pixel_values"][0]
    mean, std = torch.tensor(MEAN).view(3, 1, 1), torch.tensor(STD).view(3, 1, 1)
    expected = (torch.from_numpy(image).permute(2, 0, 1).float().div(255) - mean) / std
    assert float((got - expected).abs().max()) <= 1e-6
    assert torch.equal(got.to(model_dtype), expected.to(model_dtype))
