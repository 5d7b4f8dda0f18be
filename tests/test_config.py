"""One config reader for every reader: a config that leaves keys out means transformers' class defaults, for
FusedInputNorm.from_preprocessor_config and FusedImageProcessor.from_preprocessor_config alike, checked key by
key against the transformers classes themselves (both backends), built with their defaults."""

import pytest
import torch

from fused_input_norm import FusedImageProcessor, FusedInputNorm
from fused_input_norm import config as configs

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")

TYPES = {
    "Qwen2VLImageProcessor": ("Qwen2VLImageProcessor", "Qwen2VLImageProcessorPil"),
    "CLIPImageProcessor": ("CLIPImageProcessor", "CLIPImageProcessorPil"),
    "SiglipImageProcessor": ("SiglipImageProcessor", "SiglipImageProcessorPil"),
}
KEYS = (
    "do_resize",
    "size",
    "resample",
    "do_center_crop",
    "crop_size",
    "do_convert_rgb",
    "do_rescale",
    "rescale_factor",
    "do_normalize",
    "image_mean",
    "image_std",
    "patch_size",
    "temporal_patch_size",
    "merge_size",
)


def transformers_defaults(class_name: str) -> dict:
    """What transformers' class does with every key when the config gives none (None: the class has no such key)."""
    hf = getattr(transformers, class_name)()
    size = {k: v for k, v in dict(hf.size).items() if v is not None and k not in ("min_pixels", "max_pixels")}
    crop = getattr(hf, "crop_size", None)
    return {
        "do_resize": hf.do_resize,
        "size": size,
        "resample": {2: "bilinear", 3: "bicubic"}.get(int(hf.resample), int(hf.resample)),
        "do_center_crop": bool(getattr(hf, "do_center_crop", False)),
        "crop_size": (crop.height, crop.width) if getattr(hf, "do_center_crop", False) else None,
        "do_convert_rgb": hf.do_convert_rgb,
        "do_rescale": hf.do_rescale,
        "rescale_factor": hf.rescale_factor,
        "do_normalize": hf.do_normalize,
        "image_mean": [float(v) for v in hf.image_mean],
        "image_std": [float(v) for v in hf.image_std],
        **{k: getattr(hf, k, None) for k in ("patch_size", "temporal_patch_size", "merge_size")},
    }


def our_reading(config: dict) -> dict:
    """Every key as the processor resolves it, and the module's constants as FusedInputNorm reads the config."""
    s = configs.resolve(config, "test")
    return {
        "do_resize": s.do_resize,
        "size": s.size,
        "resample": s.resample,
        "do_center_crop": s.do_center_crop,
        "crop_size": s.crop_size,
        "do_convert_rgb": s.do_convert_rgb,
        **{k: getattr(s, k) for k in ("patch_size", "temporal_patch_size", "merge_size")},
    }


@pytest.mark.parametrize("backend", [0, 1], ids=["default", "pil"])
@pytest.mark.parametrize("type_name", list(TYPES))
@pytest.mark.parametrize("omitted", ["missing", "null"])
def test_omitted_keys_take_the_class_defaults(type_name, backend, omitted, record_property):
    expected = transformers_defaults(TYPES[type_name][backend])
    config = {"image_processor_type": type_name} | ({k: None for k in KEYS} if omitted == "null" else {})
    got = our_reading(config)
    for key, value in got.items():
        assert value == expected[key], (type_name, key, value, expected[key])
    # The affine, from both readers: the same code, the class's rescale and mean/std.
    weight = [expected["rescale_factor"] / s for s in expected["image_std"]]
    bias = [-m / s for m, s in zip(expected["image_mean"], expected["image_std"], strict=True)]
    want = torch.tensor([weight, bias], dtype=torch.float64).to(torch.float32)
    module = FusedInputNorm.from_preprocessor_config(config)
    processor = FusedImageProcessor.from_preprocessor_config(config, device="cpu")
    for norm in (module, processor.norm):
        assert (norm.image_mean, norm.image_std) == (expected["image_mean"], expected["image_std"]), type_name
        assert norm.rescale_factor == expected["rescale_factor"]
        assert torch.equal(torch.stack([norm.weight, norm.bias]), want), type_name
    record_property("defaults", {**got, "image_mean": module.image_mean, "image_std": module.image_std})
    print(f"{type_name}: " + ", ".join(f"{k}={v}" for k, v in expected.items() if v is not None))


def test_qwen_config_without_mean_and_std_is_normalized_as_transformers_does():
    """The bug this reader fixed: FusedInputNorm read a Qwen2-VL config that omits image_mean/image_std with
    mean = std = 0.5, where Qwen2VLImageProcessor (and FusedImageProcessor) use CLIP's."""
    hf = transformers.Qwen2VLImageProcessor()
    norm = FusedInputNorm.from_preprocessor_config({"image_processor_type": "Qwen2VLImageProcessor"})
    assert norm.image_mean == list(hf.image_mean) == configs.CLIP_MEAN
    assert norm.image_std == list(hf.image_std) == configs.CLIP_STD


def test_an_unknown_type_keeps_the_generic_defaults_for_the_module_and_is_refused_by_the_processor():
    config = {"image_processor_type": "NoSuchImageProcessor"}
    norm = FusedInputNorm.from_preprocessor_config(config)
    assert (norm.rescale_factor, norm.image_mean, norm.image_std) == (1 / 255, [0.5] * 3, [0.5] * 3)
    with pytest.raises(ValueError, match="unsupported image processor 'NoSuchImageProcessor'"):
        FusedImageProcessor.from_preprocessor_config(config, device="cpu")


def test_a_flag_that_is_not_a_bool_is_refused_by_both_readers():
    config = {"image_processor_type": "CLIPImageProcessor", "do_normalize": "yes"}
    for build in (FusedInputNorm.from_preprocessor_config, FusedImageProcessor.from_preprocessor_config):
        with pytest.raises(ValueError, match="do_normalize must be true or false, got 'yes'"):
            build(config)
