"""families.moondream3 (vLLM's Moondream 3 preprocessing, served by vllm_moondream3) through FusedImageProcessor
against an independent reference written from the processor's description with Pillow and torch: the image
resized with Pillow's LANCZOS to 378x378 (the global view) and to the grid of crop windows plus the margins,
the crops cut from that at steps of one window, then x / 255, - 0.5, / 0.5 in bfloat16. Settings beyond the
checkpoint's (which vLLM's per-request kwargs never reach) included: no margin, fewer crops, a smaller crop.
The tiling itself is checked against vLLM's select_tiling in tests/test_vllm_moondream3.py's served call."""

import numpy as np
import pytest
import torch
from PIL import Image
from test_vllm_processor import photo

from fused_input_norm.families import moondream3
from fused_input_norm.processor import FusedImageProcessor

SIZES = [(1, 1), (57, 29), (378, 378), (400, 700), (1080, 1920), (999, 301)]
SETTINGS = [{}, {"overlap_margin": 0, "max_crops": 4}, {"crop_size": 224, "patch_size": 14, "overlap_margin": 2}]


def reference(image: Image.Image, crop: int, patch: int, margin: int, max_crops: int):
    window = (crop // patch - 2 * margin) * patch
    edge = margin * patch
    rows, columns = moondream3.select_tiling(image.height - 2 * edge, image.width - 2 * edge, window, max_crops)
    grid = image.resize((columns * window + 2 * edge, rows * window + 2 * edge), Image.Resampling.LANCZOS)
    grid = np.asarray(grid)
    views = [np.asarray(image.resize((crop, crop), Image.Resampling.LANCZOS))]
    views += [
        grid[r * window : r * window + crop, c * window : c * window + crop]
        for r in range(rows)
        for c in range(columns)
    ]
    x = torch.from_numpy(np.stack(views)).permute(0, 3, 1, 2).to(torch.bfloat16)
    return x.div_(255.0).sub_(0.5).div_(0.5), (rows, columns)


@pytest.mark.parametrize("settings", SETTINGS, ids=["checkpoint", "no-margin-4-crops", "crop-224"])
def test_same_as_pillow_and_bfloat16_steps(settings):
    config = {"image_processor_type": "Moondream3ImageProcessor", **settings}
    processor = FusedImageProcessor.from_preprocessor_config(config, device="cpu", reference="pil")
    full = {**moondream3.DEFAULTS, **settings}
    for i, (h, w) in enumerate(SIZES):
        image = Image.fromarray(photo(h, w, i))
        expected, tiling = reference(
            image, full["crop_size"], full["patch_size"], full["overlap_margin"], full["max_crops"]
        )
        out = processor(image, torch.bfloat16)
        assert out["tilings"].tolist() == [list(tiling)], (h, w)
        assert out["pixel_values"].dtype == torch.bfloat16
        assert torch.equal(out["pixel_values"], expected), (h, w, settings)


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"crop_size": 380}, "not a multiple of patch_size"),
        ({"overlap_margin": 14}, "leaves no crop window"),
        ({"overlap_margin": -1}, "overlap_margin must be"),
        ({"max_crops": 0}, "max_crops"),
    ],
)
def test_settings_it_does_not_reproduce_are_refused_by_name(settings, says):
    config = {"image_processor_type": "Moondream3ImageProcessor", **settings}
    with pytest.raises(ValueError, match=says):
        FusedImageProcessor.from_preprocessor_config(config, device="cpu", reference="pil")
