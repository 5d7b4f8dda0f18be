"""FusedInputNorm.from_preprocessor_config without transformers: keys, scalars, defaults, identity."""

import json

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


IMAGENET = {"rescale_factor": 1 / 255, "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]}
CLIP = {"rescale_factor": 1 / 255, "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954] * 3}


def constants(config):
    return [config["rescale_factor"] / s for s in config["image_std"]], [
        -m / s for m, s in zip(config["image_mean"], config["image_std"], strict=True)
    ]


def assert_built_from(norm, config):
    weight, bias = constants(config)
    assert norm.weight.tolist() == pytest.approx(weight, rel=1e-7)
    assert norm.bias.tolist() == pytest.approx(bias, rel=1e-7)


def write(path, config):
    path.write_text(json.dumps(config))
    return path


def test_model_directory_with_preprocessor_config(tmp_path):
    write(tmp_path / "preprocessor_config.json", IMAGENET | {"image_processor_type": "CLIPImageProcessor"})
    for source in (tmp_path, str(tmp_path)):
        assert_built_from(FusedInputNorm.from_preprocessor_config(source), IMAGENET)


def test_processor_config_nesting_image_processor(tmp_path):
    """transformers 5 saves one processor_config.json with the image processor's keys under "image_processor"."""
    nested = {"processor_class": "Qwen2VLProcessor", "image_processor": IMAGENET}
    assert_built_from(FusedInputNorm.from_preprocessor_config(nested), IMAGENET)
    assert_built_from(
        FusedInputNorm.from_preprocessor_config(write(tmp_path / "processor_config.json", nested)), IMAGENET
    )
    assert_built_from(FusedInputNorm.from_preprocessor_config(tmp_path), IMAGENET)


def test_directory_prefers_the_file_vllm_reads(tmp_path):
    """vLLM's loader reads processor_config.json first, and falls back to the flat preprocessor_config.json
    when the former does not describe the image processor."""
    write(tmp_path / "preprocessor_config.json", CLIP)
    write(tmp_path / "processor_config.json", {"processor_class": "X", "image_processor": IMAGENET})
    assert_built_from(FusedInputNorm.from_preprocessor_config(tmp_path), IMAGENET)
    write(tmp_path / "processor_config.json", {"processor_class": "X", "chat_template": "{{ messages }}"})
    assert_built_from(FusedInputNorm.from_preprocessor_config(tmp_path), CLIP)


def test_directory_without_a_config(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"has no processor_config\.json or preprocessor_config\.json"):
        FusedInputNorm.from_preprocessor_config(tmp_path)


def test_layout_passes_through():
    assert FusedInputNorm.from_preprocessor_config(IMAGENET, layout="bchw").layout == "bchw"
    assert (
        FusedInputNorm.from_preprocessor_config({"do_rescale": False, "do_normalize": False}, layout="pcl").layout
        == "pcl"
    )
