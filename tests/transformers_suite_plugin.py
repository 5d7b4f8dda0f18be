"""A pytest plugin that runs transformers' own processor tests against the HF adapters: every served
processor class transformers' test mixins hand a test (ImageProcessingTester's image_processing_classes,
VideoProcessingTestMixin's video_processor_list) builds a FusedHFImageProcessor / FusedHFVideoProcessor
around transformers' processor instead, and a call an adapter hands back to transformers fails the test.

For a transformers source checkout at the installed version (its tests/models/ are in git, not in the sdist):
    PYTHONPATH=<this repo>/tests python -m pytest -p transformers_suite_plugin \
        <checkout>/tests/models/qwen2_vl/test_image_processing_qwen2_vl.py ...
(scripts/test_transformers_suite.sh does this when TRANSFORMERS_SRC names the checkout). The helpers are
shared with tests/test_transformers_suite.py.
"""

import functools
import sys

import pytest

from fused_input_norm import config as configs
from fused_input_norm import hf_adapter


def adapted_kind(name: str | None) -> str | None:
    """ "image" or "video" for a transformers processor class the adapters stand in for (every served family,
    both backends), None for any other."""
    if not isinstance(name, str):
        return None
    if configs.video_kind_of({"video_processor_type": name}) is not None:
        return "video"
    if configs.kind_of({"image_processor_type": name.removesuffix("Pil")}) is not None:
        return "image"
    return None


def adapted(upstream_class: type, adapter: type) -> type:
    """upstream_class as the tests use it (constructor, from_dict, from_pretrained, from_json_file, class
    attributes), except that every instance it makes is `adapter(instance)`."""

    def __new__(cls, *args, **kwargs):
        return adapter(upstream_class(*args, **kwargs))

    return type(
        upstream_class.__name__, (upstream_class,), {"__new__": __new__, "__module__": upstream_class.__module__}
    )


def adapt(cls):
    """A served processor class adapted; any other class (or None) as it is."""
    kind = adapted_kind(getattr(cls, "__name__", None))
    if kind is None or getattr(cls, "_fused_input_norm_adapted", False):
        return cls
    new = adapted(cls, hf_adapter.FusedHFImageProcessor if kind == "image" else hf_adapter.FusedHFVideoProcessor)
    new._fused_input_norm_adapted = True
    return new


def refuse_handback(adapter, reason):
    raise AssertionError(f"{type(adapter).__name__} handed the call back to transformers: {reason}")


def _patch_mixins() -> None:
    """Wraps the mixins of every transformers test-common module imported so far (once each)."""
    for name, module in list(sys.modules.items()):
        if not name.endswith(("test_image_processing_common", "test_video_processing_common")):
            continue
        tester = getattr(module, "ImageProcessingTester", None)
        if tester is not None and not getattr(tester, "_fused_input_norm_patched", False):
            original = tester._get_image_processing_classes

            @functools.wraps(original)
            def classes(self, _original=original):
                return {name: adapt(cls) for name, cls in _original(self).items()}

            tester._get_image_processing_classes = classes
            tester._fused_input_norm_patched = True
        mixin = getattr(module, "VideoProcessingTestMixin", None)
        if mixin is not None and not getattr(mixin, "_fused_input_norm_patched", False):
            original_setup = mixin.setUp

            @functools.wraps(original_setup)
            def setup(self, _original=original_setup):
                _original(self)
                self.fast_video_processing_class = adapt(self.fast_video_processing_class)
                self.video_processor_list = [adapt(cls) for cls in self.video_processor_list or []]

            mixin.setUp = setup
            mixin._fused_input_norm_patched = True


def pytest_collection_modifyitems(session, config, items):
    _patch_mixins()  # the test modules, and the mixins they import, are imported by now


@pytest.fixture(autouse=True)
def _no_handback(monkeypatch):
    monkeypatch.setattr(hf_adapter._Adapter, "_handed_back", refuse_handback)
