"""families.deepseek_v4 (vLLM's DeepseekV4VLImageProcessor, served by vllm_deepseek_v4) through
FusedImageProcessor against Pillow itself: ImageOps.pad onto the canvas (bicubic, grey 127) or a plain bicubic
resize past max_wh_ratio, then float32 x / 255, (x - 0.5) / 0.5 cast to bfloat16, cut into [C, P, P] patches, as
vLLM's load_image writes it. (tests/test_vllm_deepseek_v4.py runs vLLM's own code on vs off through apply(),
where the canvas sizes are checked too.)"""

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

from fused_input_norm import FusedImageProcessor


def expected_patches(image: Image.Image, height: int, width: int, patch: int, stretch: bool) -> torch.Tensor:
    """vLLM's load_image from the canvas on, in Pillow, NumPy and torch."""
    if stretch:
        image = image.resize((width, height))
    else:
        image = ImageOps.pad(image, (width, height), color=(127, 127, 127))
    x = torch.from_numpy(np.asarray(image, dtype=np.float32)).permute(2, 0, 1) / 255
    x = ((x - 0.5) / 0.5).to(torch.bfloat16)
    rows, columns = height // patch, width // patch
    return x.reshape(3, rows, patch, columns, patch).permute(1, 3, 0, 2, 4).reshape(-1, 3, patch, patch)


def test_bfloat16_of_every_byte_is_vllms():
    """One affine rounded once to bfloat16 equals vLLM's float32 steps then the cast, for every byte."""
    processor = FusedImageProcessor.from_preprocessor_config(
        {"image_processor_type": "DeepseekV4VLImageProcessor", "patch_size": 16}, reference="pil"
    )
    values = np.arange(256, dtype=np.uint8).reshape(16, 16)
    image = Image.fromarray(np.stack([values, values.T, 255 - values], axis=-1))
    out = processor(image, torch.bfloat16)  # 16 x 16: the canvas is the image, no resize
    assert out["vit_grid"].tolist() == [[1, 1]]
    assert torch.equal(out["pixel_values"], expected_patches(image, 16, 16, 16, False))


@pytest.mark.parametrize("budget", ["v4", "v4.1"])
@pytest.mark.parametrize("size", [(57, 29), (1080, 1920), (10, 90), (700, 300)])
def test_patches_are_pillows_pad_or_resize(budget, size):
    rng = np.random.default_rng(sum(size))
    image = Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8))
    config = {"image_processor_type": "DeepseekV4VLImageProcessor", "budget": budget, "max_wh_ratio": 4}
    config |= {"max_n_token": 400, "downsample_ratio": 2 if budget == "v4" else 3}
    out = FusedImageProcessor.from_preprocessor_config(config, reference="pil")(image, torch.bfloat16)
    rows, columns = out["vit_grid"][0].tolist()
    assert out["llm_grid"][0].tolist() == [
        -(-rows // config["downsample_ratio"]),
        -(-columns // config["downsample_ratio"]),
    ]
    stretch = size[1] >= 4 * size[0]
    assert torch.equal(out["pixel_values"], expected_patches(image, rows * 14, columns * 14, 14, stretch))


def test_settings_it_cannot_reproduce_are_refused_naming_the_key():
    for key, value in [("budget", "v5"), ("max_wh_ratio", 0), ("min_pixels", -1), ("max_n_token", 3)]:
        with pytest.raises(ValueError, match=key):
            FusedImageProcessor.from_preprocessor_config(
                {"image_processor_type": "DeepseekV4VLImageProcessor", key: value}, reference="pil"
            )
