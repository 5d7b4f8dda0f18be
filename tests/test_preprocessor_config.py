"""FusedInputNorm.from_preprocessor_config without transformers: keys, scalars, defaults, identity."""

import pytest

from fused_input_norm import FusedInputNorm


def test_scalar_mean_std_and_channel_from_mean_length():
    norm = FusedInputNorm.from_preprocessor_config(
        {"image_mean": [0.5] * 4, "image_std": 0.25, "rescale_factor": 1 / 255}
    )
    assert norm.channel == 4
    assert norm.weight.tolist() == pytest.approx([4 / 255] * 4)
    assert norm.bias.tolist() == pytest.approx([-2.0] * 4)


def test_missing_keys_take_transformers_defaults():
    norm = FusedInputNorm.from_preprocessor_config({})
    assert (norm.channel, norm.rescale_factor, norm.image_mean, norm.image_std) == (3, 1 / 255, [0.5] * 3, [0.5] * 3)
    nulls = FusedInputNorm.from_preprocessor_config({"do_rescale": None, "rescale_factor": None, "image_mean": None})
    assert nulls.rescale_factor == 1 / 255 and nulls.image_mean == [0.5] * 3


def test_rescale_only_and_normalize_only():
    rescale_only = FusedInputNorm.from_preprocessor_config(
        {"do_normalize": False, "rescale_factor": 0.5, "image_mean": [0.1]}
    )
    assert rescale_only.channel == 1 and rescale_only.weight.tolist() == [0.5] and rescale_only.bias.tolist() == [0.0]
    normalize_only = FusedInputNorm.from_preprocessor_config(
        {"do_rescale": False, "image_mean": [1.0, 2.0], "image_std": [2.0, 4.0]}
    )
    assert normalize_only.weight.tolist() == [0.5, 0.25] and normalize_only.bias.tolist() == [-0.5, -0.5]


def test_neither_rescale_nor_normalize_is_identity():
    norm = FusedInputNorm.from_preprocessor_config(
        {"do_rescale": False, "do_normalize": False, "image_mean": [0.3] * 3}
    )
    assert norm.is_identity and norm.weight is None and norm.channel == 3


def test_bad_config_values_are_rejected():
    with pytest.raises(ValueError, match="image_std must be > 0"):
        FusedInputNorm.from_preprocessor_config({"image_std": [0.5, 0.0, 0.5]})
    with pytest.raises(ValueError, match="image_std must have one value per channel"):
        FusedInputNorm.from_preprocessor_config({"image_mean": [0.5] * 3, "image_std": [0.5] * 2})
