"""families.deepseek_ocr (vLLM's DeepseekOCRProcessor, served by vllm_deepseek_ocr) through FusedImageProcessor,
against an independent reference: Pillow's ImageOps.pad (its contain-fit bicubic resize and centered grey
canvas), Pillow's resize and crops for the tiles (the grid from transformers' GOT-OCR2 get_optimal_tiled_canvas:
InternVL's rule, which vLLM's copies), and ToTensor + Normalize in float32 as torchvision computes them.
(tests/test_vllm_deepseek_ocr.py runs the whole processor on vs off through vLLM's apply().)"""

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps
from test_internvl_chat import photo

from fused_input_norm import FusedImageProcessor

get_optimal_tiled_canvas = pytest.importorskip(
    "transformers.models.got_ocr2.image_processing_got_ocr2",
    reason="the grid's reference (transformers' GOT-OCR2 module) needs torchvision",
    exc_type=ImportError,
).get_optimal_tiled_canvas

TILE, BASE, MAX_CROPS = 640, 1024, 6


def normalized(images: list) -> torch.Tensor:
    x = torch.stack([torch.from_numpy(np.array(i)).permute(2, 0, 1) for i in images]).float().div(255)
    return (x - 0.5) / 0.5


def reference(image: Image.Image, cropping: bool, resize_first: bool) -> tuple[torch.Tensor, list]:
    """The global view and the tiles (a list, empty where there are none), written from vLLM's description."""
    view = image.resize((TILE, TILE)) if resize_first and not cropping else image
    global_view = normalized([ImageOps.pad(view, (BASE, BASE), color=(127, 127, 127))])
    if not cropping or (image.width <= TILE and image.height <= TILE):
        return global_view, []
    columns, rows = get_optimal_tiled_canvas((image.height, image.width), (TILE, TILE), 2, MAX_CROPS)
    resized = image.resize((columns * TILE, rows * TILE))
    tiles = [
        resized.crop((c * TILE, r * TILE, (c + 1) * TILE, (r + 1) * TILE)) for r in range(rows) for c in range(columns)
    ]
    return global_view, [normalized(tiles), (columns, rows)]


def served(view: str, cropping: bool, resize_first: bool) -> FusedImageProcessor:
    config = {"image_processor_type": "DeepseekOCRProcessor", "size": TILE, "base_size": BASE, "view": view}
    config |= {"cropping": cropping, "resize_first": resize_first, "fill": 127, "max_crops": MAX_CROPS}
    return FusedImageProcessor.from_preprocessor_config(config, device=torch.device("cpu"), reference="pil")


# Odd sides (the pad's banker's rounding of a half: 1024 - 683 = 341), portrait and landscape, one that fits a
# tile, a square (no canvas), sides that contain-fit to a canvas one pixel short of the base.
SHAPES = [(57, 29), (1080, 1920), (900, 700), (640, 640), (1300, 1300), (1023, 1024), (3, 2000), (683, 1024)]


@pytest.mark.parametrize(("cropping", "resize_first"), [(True, True), (False, True), (False, False)])
def test_views_equal_pillow(cropping, resize_first):
    images = [Image.fromarray(photo(h, w, seed)) for seed, (h, w) in enumerate(SHAPES)]
    global_views = served("global", cropping, resize_first)(images)["pixel_values"]
    tiles = served("tiles", cropping, resize_first)(images)
    expected = [reference(image, cropping, resize_first) for image in images]
    want = torch.cat([g for g, _ in expected])
    assert global_views.shape == want.shape
    assert float((global_views - want).abs().max()) <= 1e-6
    tiled = [t for _, t in expected if t]
    grids = [t[1] if t else (1, 1) for _, t in expected]
    assert tiles["images_spatial_crop"].tolist() == [list(g) for g in grids]
    if tiled:
        want = torch.cat([t[0] for t in tiled])
        assert tiles["pixel_values"].shape == want.shape
        assert float((tiles["pixel_values"] - want).abs().max()) <= 1e-6
    else:
        assert tiles["pixel_values"].shape[0] == 0


def test_an_image_that_fits_as_nothing_is_refused():
    """Pillow pads a 1 x 3000 image as a blank canvas (its contain-fit height rounds to 0): refused, so the vLLM
    wrapper hands such a call to vLLM's code."""
    with pytest.raises(ValueError, match="empty image"):
        served("global", True, True)([Image.fromarray(photo(1, 3000, 0))])
