"""transformers' own processor tests against the adapters: the common mixins of transformers' test suite
(ImageProcessingTestMixin, VideoProcessingTestMixin: tests/test_*_processing_common.py of the installed
transformers' sdist on PyPI; its wheel has no tests), run once on transformers' Qwen-VL processors (Stock) and
once with every processor the tests build replaced by FusedHFImageProcessor / FusedHFVideoProcessor
(Adapters), where a call handed back to transformers fails the test (so a silent fallback cannot pass).

The sdist ships the mixins but not transformers' tests/models/qwen2_vl files, so the Qwen-specific tests
(patch-row shapes, nesting, frame sampling) are written here, each against transformers' own output.

Run by scripts/test_transformers_suite.sh, which fetches the sdist into .ci-cache/ and sets
FUSED_INPUT_NORM_TRANSFORMERS_TESTS; without it every test here skips, saying so.
"""

import functools
import importlib.util
import os
import sys
import types
import unittest
from typing import ClassVar

import pytest
import torch

SUITE = os.environ.get("FUSED_INPUT_NORM_TRANSFORMERS_TESTS", "")
_COMMON = os.path.join(SUITE, "tests", "test_image_processing_common.py")
if not SUITE or not os.path.isfile(_COMMON):
    pytest.skip(
        "transformers' test mixins are not here: run scripts/test_transformers_suite.sh (it downloads the installed "
        "transformers' sdist into .ci-cache/ and points FUSED_INPUT_NORM_TRANSFORMERS_TESTS at it)",
        allow_module_level=True,
    )
pytest.importorskip(
    "parameterized", reason="transformers' test mixins import parameterized (pip install parameterized)"
)
pytest.importorskip("transformers.models.qwen3_vl.video_processing_qwen3_vl", reason="needs transformers 5")

from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil  # noqa: E402
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor  # noqa: E402
from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor  # noqa: E402
from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor  # noqa: E402
from transformers_suite_plugin import adapted, refuse_handback  # noqa: E402

from fused_input_norm import hf_adapter  # noqa: E402
from fused_input_norm.hf_adapter import FusedHFImageProcessor, FusedHFVideoProcessor  # noqa: E402


def _load(name: str):
    """A module of transformers' tests/ by path. The image mixin imports utils/fetch_hub_objects_for_ci (a CI
    download cache the sdist leaves out): its one function, the local path of a test URL, is the URL itself
    here (the tests that open such URLs need the network either way)."""
    if "fetch_hub_objects_for_ci" not in sys.modules:
        shim = types.ModuleType("fetch_hub_objects_for_ci")
        shim.url_to_local_path = lambda url, *args, **kwargs: url
        sys.modules["fetch_hub_objects_for_ci"] = shim
    spec = importlib.util.spec_from_file_location(
        f"transformers_tests_{name}", os.path.join(SUITE, "tests", f"{name}.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


image_common = _load("test_image_processing_common")
video_common = _load("test_video_processing_common")


def forbid_fallback(test: unittest.TestCase) -> None:
    """A call the adapter hands back to transformers fails the test, naming why."""
    original = hf_adapter._Adapter._handed_back
    hf_adapter._Adapter._handed_back = refuse_handback
    test.addCleanup(setattr, hf_adapter._Adapter, "_handed_back", original)


def known_failure(method, reason: str, strict: bool = False):
    """The mixin's `method` marked as failing for `reason` in one class (a wrapper: the mixin's own function,
    shared by every class, stays unmarked)."""

    @functools.wraps(method)
    def test(self):
        return method(self)

    return pytest.mark.xfail(reason=reason, strict=strict)(test)


# ----- images -----

IMAGE_KWARGS = {
    "size": {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280},
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "do_resize": True,
    "do_normalize": True,
    "do_convert_rgb": True,
}


class _ImageTester(image_common.ImageProcessingTester):
    classes: ClassVar[dict] = {}

    def __init__(self, parent, **kwargs):
        super().__init__(parent, min_resolution=56, max_resolution=400, **{**IMAGE_KWARGS, **kwargs})

    def _get_image_processing_classes(self):
        return dict(self.classes)


class StockImageTester(_ImageTester):
    classes: ClassVar[dict] = {"torchvision": Qwen2VLImageProcessor, "pil": Qwen2VLImageProcessorPil}


class AdaptedImageTester(_ImageTester):
    classes: ClassVar[dict] = {
        "torchvision": adapted(Qwen2VLImageProcessor, FusedHFImageProcessor),
        "pil": adapted(Qwen2VLImageProcessorPil, FusedHFImageProcessor),
    }


class _QwenImageTests(image_common.ImageProcessingTestMixin):
    """The mixin's tests, and the Qwen-VL call tests (patch rows, not [B, C, H, W]) checked against the stock
    processor of the same backend: equal grids and rows (uint8 exactly, float32 within 1e-5)."""

    def _expected(self, backend: str, images, **kwargs):
        stock = StockImageTester.classes[backend](**self.image_processor_dict)
        return stock(images, return_tensors="pt", **kwargs)

    def _check_calls(self, **inputs):
        for backend, image_processing_class in self.image_processing_classes.items():
            processor = image_processing_class(**self.image_processor_dict)
            images = self.image_processor_tester.prepare_image_inputs(**inputs)
            for batch in (images[0], images, [[image] for image in images]):  # one, a list, one level of nesting
                got = processor(batch, return_tensors="pt")
                expected = self._expected(backend, batch)
                self.assertTrue(torch.equal(got.image_grid_thw, expected.image_grid_thw))
                self.assertEqual(got.pixel_values.shape, expected.pixel_values.shape)
                self.assertEqual(got.pixel_values.shape[1], 3 * 2 * 14 * 14)
                self.assertLessEqual(float((got.pixel_values - expected.pixel_values).abs().max()), 1e-5)

    def test_call_pil(self):
        self._check_calls(equal_resolution=False)

    def test_call_numpy(self):
        self._check_calls(equal_resolution=False, numpify=True)

    def test_call_pytorch(self):
        self._check_calls(equal_resolution=False, torchify=True)

    def test_call_uint8_rows(self):
        for backend, image_processing_class in self.image_processing_classes.items():
            processor = image_processing_class(**self.image_processor_dict)
            processor.do_rescale = processor.do_normalize = False  # as vLLM asks for uint8 rows: an attribute write
            images = self.image_processor_tester.prepare_image_inputs(equal_resolution=False)
            got = processor(images, return_tensors="pt")
            expected = self._expected(backend, images, do_rescale=False, do_normalize=False)
            # The resized bytes: uint8 from the torchvision backend, float32 values from the Pil one.
            self.assertEqual(got.pixel_values.dtype, torch.uint8 if backend == "torchvision" else torch.float32)
            self.assertEqual(got.pixel_values.dtype, expected.pixel_values.dtype)
            self.assertTrue(torch.equal(got.pixel_values, expected.pixel_values))

    @unittest.skip(reason="Qwen2-VL's processors return a 4-channel input's rows only for the 3 channels they keep")
    def test_call_numpy_4_channels(self):
        pass

    # Fail on transformers' own processors too (so on the adapters, which reproduce each backend exactly):
    test_backends_equivalence = known_failure(
        image_common.ImageProcessingTestMixin.test_backends_equivalence,
        "opens transformers' COCO test image from huggingface.co: needs the network",
    )
    test_backends_equivalence_batched = known_failure(
        image_common.ImageProcessingTestMixin.test_backends_equivalence_batched,
        "transformers' torchvision and Pil backends differ by up to 0.3 on the mixin's random-noise images (its "
        "bound: 0.1); Qwen2-VL's own test file sets its own inputs",
    )


class Qwen2VLImageStock(_QwenImageTests, unittest.TestCase):
    image_processor_tester_class = StockImageTester


class Qwen2VLImageAdapters(_QwenImageTests, unittest.TestCase):
    image_processor_tester_class = AdaptedImageTester

    def setUp(self):
        super().setUp()
        forbid_fallback(self)


# ----- videos -----


class _VideoTester:
    def __init__(self, parent, video_class: type, batch_size=5, num_frames=8, min_resolution=56, max_resolution=180):
        self.parent = parent
        self.video_class = video_class
        self.batch_size, self.num_frames, self.num_channels = batch_size, num_frames, 3
        self.min_resolution, self.max_resolution = min_resolution, max_resolution

    def prepare_video_processor_dict(self):
        return {"do_resize": True, "do_normalize": True, "do_convert_rgb": True, "do_sample_frames": False}

    def prepare_video_inputs(self, equal_resolution=False, return_tensors="pil"):
        return video_common.prepare_video_inputs(
            batch_size=self.batch_size,
            num_frames=self.num_frames,
            num_channels=self.num_channels,
            min_resolution=self.min_resolution,
            max_resolution=self.max_resolution,
            equal_resolution=equal_resolution,
            return_tensors=return_tensors,
        )

    def expected_output_video_shape(self, videos):
        """The rows transformers' own processor gives these videos (Qwen-VL concatenates every video's rows)."""
        stock = self.video_class(**self.prepare_video_processor_dict())
        return tuple(stock(videos, return_tensors="pt")["pixel_values_videos"].shape)


class _QwenVideoTests(video_common.VideoProcessingTestMixin):
    video_class: type = None
    adapt = False

    def setUp(self):
        super().setUp()
        self.video_processor_tester = _VideoTester(self, self.video_class)
        cls = adapted(self.video_class, FusedHFVideoProcessor) if self.adapt else self.video_class
        self.fast_video_processing_class = cls
        self.video_processor_list = [cls]
        if self.adapt:
            forbid_fallback(self)

    @property
    def video_processor_dict(self):
        return self.video_processor_tester.prepare_video_processor_dict()

    def assert_expected_videos_shape(self, encoded_videos, expected_output_video_shape, num_videos):
        self.assertEqual(tuple(encoded_videos.shape), expected_output_video_shape)

    @unittest.skip(reason="the mixin expects [videos, frames, C, H, W] outputs; Qwen-VL's are patch rows")
    def test_call_numpy_4_channels(self):
        pass

    @unittest.skip(reason="the mixin passes size=42; a Qwen-VL size is a pair of pixel bounds")
    def test_video_processor_from_dict_with_kwargs(self):
        pass

    def test_call_sample_frames(self):
        """Qwen-VL's version of the mixin's test (rows, not frames, on axis 0): do_sample_frames written as an
        attribute decides, a call's num_frames / fps (with metadata) pick the frames, as transformers does."""
        videos = self.video_processor_tester.prepare_video_inputs(equal_resolution=False, return_tensors="torch")
        for cls in self.video_processor_list:
            processor = cls(**self.video_processor_dict)
            stock = self.video_class(**self.video_processor_dict)
            for sample in (False, True):
                processor.do_sample_frames = stock.do_sample_frames = sample
                # fps=None with num_frames: Qwen3-VL's config sets fps, and the two exclude each other.
                for kwargs in (
                    {"num_frames": 4, "fps": None},
                    {"fps": 3, "video_metadata": [{"total_num_frames": 8, "fps": 4}]},
                ):
                    got = processor(videos[0], return_tensors="pt", **kwargs)
                    expected = stock(videos[0], return_tensors="pt", **kwargs)
                    self.assertTrue(torch.equal(got["video_grid_thw"], expected["video_grid_thw"]))
                    self.assertLessEqual(
                        float((got["pixel_values_videos"] - expected["pixel_values_videos"]).abs().max()), 1e-5
                    )
                    frames = int(got["video_grid_thw"][0, 0]) * stock.temporal_patch_size
                    self.assertEqual(frames, 8 if not sample else 4 if "num_frames" in kwargs else 6)
            with self.assertRaises(ValueError):  # more frames than the video has
                processor.do_sample_frames = True
                processor(videos[0], return_tensors="pt", num_frames=10)

    def test_call_uint8_rows(self):
        videos = self.video_processor_tester.prepare_video_inputs(equal_resolution=False, return_tensors="np")
        for cls in self.video_processor_list:
            processor = cls(**self.video_processor_dict)
            processor.do_rescale = processor.do_normalize = False
            got = processor(videos, return_tensors="pt")
            expected = self.video_class(**self.video_processor_dict)(
                videos, return_tensors="pt", do_rescale=False, do_normalize=False
            )
            self.assertEqual(got["pixel_values_videos"].dtype, torch.uint8)
            self.assertTrue(torch.equal(got["pixel_values_videos"], expected["pixel_values_videos"]))


class Qwen2VLVideoStock(_QwenVideoTests, unittest.TestCase):
    video_class = Qwen2VLVideoProcessor


class Qwen2VLVideoAdapters(_QwenVideoTests, unittest.TestCase):
    video_class = Qwen2VLVideoProcessor
    adapt = True


class Qwen3VLVideoStock(_QwenVideoTests, unittest.TestCase):
    video_class = Qwen3VLVideoProcessor


class Qwen3VLVideoAdapters(_QwenVideoTests, unittest.TestCase):
    video_class = Qwen3VLVideoProcessor
    adapt = True


def test_the_suite_is_the_installed_transformers_version():
    import transformers

    assert os.path.basename(os.path.normpath(SUITE)) == f"transformers-{transformers.__version__}"
