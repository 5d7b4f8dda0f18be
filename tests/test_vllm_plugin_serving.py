"""vllm_plugin.serve_images without vLLM: whatever the architecture, a processor holding an image (or video)
processor that FusedHFImageProcessor (FusedHFVideoProcessor) reproduces gets one; any other keeps transformers'
and the one log line per model says why. (tests/test_vllm_families.py runs the same through vLLM's apply().)"""

import logging
import types

import pytest

from fused_input_norm import vllm_plugin
from fused_input_norm.hf_adapter import FusedHFImageProcessor, FusedHFVideoProcessor

transformers = pytest.importorskip("transformers")
# vLLM loads transformers' default (torchvision) processors; without torchvision their names are the Pil ones.
pytest.importorskip("torchvision", reason="transformers' default processors, the ones vLLM loads, need torchvision")


@pytest.fixture
def plugin_log():
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    level = vllm_plugin.logger.level
    vllm_plugin.logger.addHandler(handler)
    vllm_plugin.logger.setLevel(logging.INFO)
    yield records
    vllm_plugin.logger.removeHandler(handler)
    vllm_plugin.logger.setLevel(level)


def model(name: str, architecture: str) -> types.SimpleNamespace:
    """What serve_images reads of vLLM's ModelConfig."""
    return types.SimpleNamespace(model=f"/models/{name}", architectures=[architecture])


def test_any_architecture_holding_a_reproduced_processor_is_served(plugin_log):
    from transformers import CLIPImageProcessor

    processor = types.SimpleNamespace(image_processor=CLIPImageProcessor(), tokenizer=object())
    vllm_plugin.serve_images(model("clip-any", "SomeNewVLMForConditionalGeneration"), processor)
    assert isinstance(processor.image_processor, FusedHFImageProcessor)
    assert [r.getMessage() for r in plugin_log] == [
        "fused_input_norm: FusedImageProcessor (reference 'torchvision') serves images for "
        "['SomeNewVLMForConditionalGeneration'] in place of transformers' CLIPImageProcessor"
    ]
    served = processor.image_processor
    vllm_plugin.serve_images(model("clip-any", "SomeNewVLMForConditionalGeneration"), processor)  # vLLM's cache
    assert processor.image_processor is served and len(plugin_log) == 1


def test_images_and_videos_are_served_each_where_reproduced(plugin_log):
    from transformers import Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    processor = types.SimpleNamespace(image_processor=Qwen2VLImageProcessor(), video_processor=Qwen2VLVideoProcessor())
    vllm_plugin.serve_images(model("qwen-omni", "Qwen2_5OmniThinkerForConditionalGeneration"), processor)
    assert isinstance(processor.image_processor, FusedHFImageProcessor)
    assert isinstance(processor.video_processor, FusedHFVideoProcessor)
    (message,) = [r.getMessage() for r in plugin_log]
    assert "serves images for ['Qwen2_5OmniThinkerForConditionalGeneration']" in message
    assert "FusedVideoProcessor serves videos in place of transformers' Qwen2VLVideoProcessor" in message


def test_a_processor_it_does_not_reproduce_stays_with_the_reason(plugin_log):
    # No family, and on neither of transformers' backends (an older remote-code processor): not the generic path
    from transformers.image_processing_utils import BaseImageProcessor

    class OldImageProcessor(BaseImageProcessor):
        pass

    upstream = OldImageProcessor()
    processor = types.SimpleNamespace(image_processor=upstream)
    vllm_plugin.serve_images(model("old", "SomeOldModel"), processor)
    assert processor.image_processor is upstream
    assert [r.getMessage() for r in plugin_log] == [
        "fused_input_norm: transformers' OldImageProcessor serves images for ['SomeOldModel']: OldImageProcessor is "
        "built on neither transformers' TorchvisionBackend nor its PilBackend"
    ]


def test_a_processor_without_images_or_videos_is_left_alone(plugin_log):
    processor = types.SimpleNamespace(tokenizer=object())
    vllm_plugin.serve_images(model("text-only", "LlamaForCausalLM"), processor)
    assert vars(processor) == {"tokenizer": processor.tokenizer} and plugin_log == []
