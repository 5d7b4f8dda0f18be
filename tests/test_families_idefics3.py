"""Idefics3 (Idefics3ImageProcessor) and SmolVLM / SmolVLM2 (SmolVLMImageProcessor) against transformers 5's
own processors, both backends (the torchvision one = reference "torchvision", on CPU tensors; the Pil one =
reference "pil"): their chain of LANCZOS resizes (the longest edge, then whole tiles, then the tiles and the
global image of that), each step's uint8 bytes read by the next, reproduced through Plan.stages.

FusedHFImageProcessor(upstream) against upstream itself (transformers' preprocess patched to fail, so a call
handed back fails the test) on real photos of several shapes (wide, tall, tiny, thin, 1080p) and on nested
samples of different image counts (padding and pixel_attention_mask), with the per-call kwargs the processors
take (do_image_splitting, max_image_size, size, do_resize, return_row_col_info); float32 within 1e-6, the
resized bytes (do_rescale and do_normalize off) equal, every key, shape and dtype the same. Then
FusedImageProcessor from the checkpoints' configs, the sizes against transformers' own functions over many
shapes, the samples against its make_nested_list_of_images, lanczos in another family's config, and what is
refused. The EQUALITY lines printed (pytest -s) are the equality table."""

import logging
import random
import types

import numpy as np
import pytest
import torch
from conftest import RecordOps, requires_cuda
from family_checks import FP32_ATOL, as_input, assert_same, forbid_upstream, photo
from test_resize import NO_TORCH_LANCZOS, TORCH_LANCZOS

from fused_input_norm import FusedImageProcessor
from fused_input_norm import config as configs
from fused_input_norm import images as intake
from fused_input_norm.families import idefics3
from fused_input_norm.hf_adapter import FusedHFImageProcessor

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
idefics3_tv = pytest.importorskip("transformers.models.idefics3.image_processing_idefics3")
idefics3_pil = pytest.importorskip("transformers.models.idefics3.image_processing_pil_idefics3")
image_utils = pytest.importorskip("transformers.image_utils")
# The torchvision backend runs LANCZOS where torch has the uint8 kernel (and torchvision >= 0.27); elsewhere
# it falls back to BICUBIC, which is not what this family computes.
needs_torch_lanczos = pytest.mark.skipif(not TORCH_LANCZOS, reason=NO_TORCH_LANCZOS)
REFERENCES = ["pil", pytest.param("torchvision", marks=needs_torch_lanczos)]
CLASSES = {
    "idefics3": (transformers.Idefics3ImageProcessorPil, transformers.Idefics3ImageProcessor),
    "smolvlm": (transformers.SmolVLMImageProcessorPil, transformers.SmolVLMImageProcessor),
}
_COMMON = {
    "do_convert_rgb": True,
    "do_image_splitting": True,
    "do_normalize": True,
    "do_pad": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "resample": 1,
    "rescale_factor": 1 / 255,
}
# The configs as the checkpoints ship them, less the type keys each test names: HuggingFaceM4/Idefics3-8B-Llama3,
# and SmolVLM's larger tiles (SmolVLM-Instruct, SmolVLM2-2.2B-Instruct).
CHECKPOINTS = {
    "idefics3": {**_COMMON, "size": {"longest_edge": 1456}, "max_image_size": {"longest_edge": 364}},
    "smolvlm": {**_COMMON, "size": {"longest_edge": 1536}, "max_image_size": {"longest_edge": 384}},
}
# What Idefics3Processor / SmolVLMProcessor pass their image processor on every call.
PROCESSOR_KWARGS = {"return_row_col_info": True}


def shapes_photos() -> dict[str, np.ndarray]:
    """Real photos in the shapes that take each branch: wide, tall, tiny, thin (1 tile high), 1080p."""
    rocket, coffee, chelsea, astronaut = (photo(n) for n in ("rocket", "coffee", "chelsea", "astronaut"))
    return {
        "wide": rocket,  # 427x640
        "tall": np.ascontiguousarray(rocket.transpose(1, 0, 2)),  # 640x427
        "tiny": np.ascontiguousarray(chelsea[100:117, 200:229]),  # 17x29: scaled up ~50x in step 1
        "thin": np.ascontiguousarray(coffee[:30, :]),  # 30x600: one row of tiles
        "1080p": np.pad(astronaut, ((284, 284), (704, 704), (0, 0)), mode="reflect"),  # 1080x1920
    }


PHOTOS = shapes_photos()


def call_images(reference: str, case: str):
    """One photo as a list (one sample), or nested samples of 2, 1 and 0 images (rows padded, one all padding)."""
    if case == "samples":
        names = [["wide", "tiny"], ["thin"], []]
        return [[as_input(reference, PHOTOS[n]) for n in group] for group in names]
    return [as_input(reference, PHOTOS[case])]


def upstream(family: str, reference: str, config: dict):
    pil_class, tv_class = CLASSES[family]
    return (pil_class if reference == "pil" else tv_class)(**config)


def check_adapter(monkeypatch, family, reference, case, dtype, config, kwargs) -> None:
    if dtype == "uint8":
        kwargs = {**kwargs, "do_rescale": False, "do_normalize": False}
    images = call_images(reference, case)
    expected = upstream(family, reference, config)(images, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(upstream(family, reference, config))
    forbid_upstream(monkeypatch, ours)
    got = ours(images, return_tensors="pt", **kwargs)
    # the raw bytes (uint8, or float32 where a backend returns them so): integers, so within 1e-6 is equal
    assert_same(got, expected, f"{family} {reference} {case} {'-'.join(kwargs) or 'defaults'} {dtype}")


# ----- the adapter over transformers' processor, both backends -----


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("case", ["tall", "1080p", "samples"])
def test_idefics3_adapter_matches_transformers(monkeypatch, case, reference, dtype):
    check_adapter(monkeypatch, "idefics3", reference, case, dtype, CHECKPOINTS["idefics3"], PROCESSOR_KWARGS)


# family, case, the call's kwargs: SmolVLM's larger tiles; each per-call kwarg the processors take.
CALLS = [
    ("smolvlm", "1080p", PROCESSOR_KWARGS),
    ("idefics3", "samples", {"do_image_splitting": False}),
    ("idefics3", "wide", {"max_image_size": {"longest_edge": 200}, **PROCESSOR_KWARGS}),
    # step 1 within one tile: step 2 makes the image exactly one tile, its own global image, with no crops
    ("idefics3", "samples", {"size": {"longest_edge": 300}, "max_image_size": {"longest_edge": 320}}),
    ("idefics3", "tall", {"size": {"height": 500, "width": 300}}),
    ("idefics3", "samples", {"do_resize": False, **PROCESSOR_KWARGS}),
]


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize(("family", "case", "kwargs"), CALLS, ids=[f"{f}-{c}-{'-'.join(k)}" for f, c, k in CALLS])
def test_per_call_kwargs_match_transformers(monkeypatch, family, case, kwargs, reference):
    check_adapter(monkeypatch, family, reference, case, "float32", CHECKPOINTS[family], kwargs)


@needs_torch_lanczos
def test_raw_bytes_dtype_is_each_backends(monkeypatch):
    """do_rescale and do_normalize off: float32 from the torchvision backend always; from the Pil one uint8
    unless a sample is padded (its NumPy stack of uint8 images and float32 zero slots)."""
    raw = {"do_rescale": False, "do_normalize": False}
    for reference, case, dtype in (("torchvision", "wide", torch.float32), ("pil", "wide", torch.uint8)):
        images = call_images(reference, case)
        expected = upstream("idefics3", reference, {})(images, return_tensors="pt", **raw)
        got = FusedHFImageProcessor(upstream("idefics3", reference, {}))(images, return_tensors="pt", **raw)
        assert got["pixel_values"].dtype == expected["pixel_values"].dtype == dtype
    images = call_images("pil", "samples")
    assert upstream("idefics3", "pil", {})(images, return_tensors="pt", **raw)["pixel_values"].dtype == torch.float32


def test_pil_backend_without_return_tensors_gives_arrays_and_lists(monkeypatch):
    """Without return_tensors the Pil backend returns NumPy arrays; rows and cols stay lists either way."""
    images = call_images("pil", "samples")
    expected = upstream("idefics3", "pil", {})(images, return_row_col_info=True)
    ours = FusedHFImageProcessor(upstream("idefics3", "pil", {}))
    forbid_upstream(monkeypatch, ours)
    got = ours(images, return_row_col_info=True)
    assert type(got["pixel_values"]) is type(got["pixel_attention_mask"]) is np.ndarray
    assert got["rows"] == expected["rows"] and got["cols"] == expected["cols"]
    assert expected["rows"][2] == []  # the empty sample: a row of padding
    assert np.array_equal(got["pixel_attention_mask"], expected["pixel_attention_mask"])
    assert float(np.abs(got["pixel_values"] - expected["pixel_values"]).max()) <= FP32_ATOL


@requires_cuda
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_cuda_calls_equal_the_same_calls_on_the_cpu(dtype):
    """device="cuda": the stages and the jobs on the device, the same bytes as on the CPU (there transformers
    would fall back to BICUBIC; the engine runs torchvision's LANCZOS)."""
    kwargs = PROCESSOR_KWARGS | ({"do_rescale": False, "do_normalize": False} if dtype == "uint8" else {})
    ours = FusedHFImageProcessor(upstream("idefics3", "torchvision", CHECKPOINTS["idefics3"]))
    images = call_images("torchvision", "samples")
    on_cpu = ours(images, return_tensors="pt", **kwargs)
    on_gpu = ours(images, return_tensors="pt", device="cuda", **kwargs)
    assert not ours._logged, ours._logged
    assert on_gpu["pixel_values"].device.type == "cuda"
    assert list(on_gpu) == list(on_cpu)
    for key, value in on_cpu.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(on_gpu[key].cpu(), value), key
        else:
            assert on_gpu[key] == value, key


# ----- FusedImageProcessor from a config, every spelling -----


@pytest.mark.parametrize("reference", REFERENCES)
@pytest.mark.parametrize("family", ["idefics3", "smolvlm"])
def test_processor_from_config_matches_transformers(family, reference):
    """A nested call (samples of 2, 0 and 1 images) with the processors' row/col kwarg set in the config. (An
    empty sample at the end is left out of the torchvision backend's rows and cols: the adapter's test has it.)"""
    config = {**CHECKPOINTS[family], **PROCESSOR_KWARGS}
    type_name = CLASSES[family][1].__name__
    processor = FusedImageProcessor.from_preprocessor_config(
        {**config, "image_processor_type": type_name}, device="cpu", reference=reference
    )
    arrays = [[PHOTOS[n] for n in group] for group in (["wide", "tiny"], [], ["thin"])]
    got = processor(arrays)
    images = [[as_input(reference, hwc) for hwc in group] for group in arrays]
    expected = upstream(family, reference, config)(images, return_tensors="pt")
    assert_same(got, expected, f"{family} {reference} from-config samples float32")


@pytest.mark.parametrize(
    "type_keys",
    [
        {"image_processor_type": "Idefics3ImageProcessor", "processor_class": "Idefics3Processor"},
        {"image_processor_type": "Idefics3ImageProcessorPil"},
        {"image_processor_type": "SmolVLMImageProcessorFast"},
        {"processor_class": "SmolVLMProcessor"},
        {"processor_class": "Idefics3Processor"},
    ],
)
def test_every_spelling_reads_the_same_settings(type_keys):
    config = CHECKPOINTS["smolvlm"]
    s = FusedImageProcessor.from_preprocessor_config({**config, **type_keys}, device="cpu").settings
    assert s == configs.resolve({**config, "image_processor_type": "SmolVLMImageProcessor"}, "FusedImageProcessor")
    assert (
        s.kind == "idefics3"
        and s.size == config["size"]
        and s.options["tile"] == config["max_image_size"]["longest_edge"]
    )


@pytest.mark.parametrize(
    "config",
    [{"image_processor_type": "Idefics3ImageProcessor"}, {"image_processor_type": "SmolVLMImageProcessorPil"}],
    ids=["idefics3", "smolvlm"],
)
def test_omitted_keys_take_the_class_defaults(config):
    s = configs.resolve(config, "test")
    hf = upstream("idefics3" if "Idefics3" in config["image_processor_type"] else "smolvlm", "pil", {})
    assert s.resample == "lanczos" and int(hf.resample) == 1
    assert s.size == {"longest_edge": hf.size.longest_edge}
    assert s.options["tile"] == hf.max_image_size["longest_edge"]
    assert s.options["do_image_splitting"] == hf.do_image_splitting
    assert s.options["return_row_col_info"] == hf.return_row_col_info
    assert list(s.normalization.image_mean) == list(hf.image_mean)


# ----- sizes and samples against transformers' own functions -----


def test_sizes_are_transformers_over_many_shapes():
    """Step 1 (get_resize_output_image_size, both backends' copies) and step 2 (resize_for_vision_encoder, run
    with a resize that reports the size it is asked for) over random shapes, longest edges and tiles."""
    rng = random.Random(37)
    asked = types.SimpleNamespace(resize=lambda image, size, resample=None: (size.height, size.width))
    for _ in range(3000):
        height, width = rng.choice([rng.randint(1, 40), rng.randint(1, 5000)]), rng.randint(1, 5000)
        longest, tile = rng.choice([364, 1456, 1536, 2048, 5000, rng.randint(1, 6000)]), rng.randint(1, 600)
        ours = idefics3.longest_edge_size(height, width, longest)
        assert ours == idefics3_tv.get_resize_output_image_size(torch.empty(0, height, width), longest)
        assert ours == idefics3_pil.get_resize_output_image_size(np.empty((0, height, width)), longest)
        tiled = transformers.Idefics3ImageProcessor.resize_for_vision_encoder(
            asked, torch.empty(0, height, width), tile
        )
        assert idefics3.tiled_size(height, width, tile) == tiled, (height, width, tile)


@pytest.mark.parametrize(
    "structure",
    ["one", "flat", "nested", "nested-empty", "batch4d", "list-of-4d"],
)
def test_samples_are_transformers_nesting(structure):
    image = np.zeros((5, 7, 3), np.uint8)
    images = {
        "one": image,
        "flat": [image, image, image],
        "nested": [[image, image], [image]],
        "nested-empty": [[], [image], [image, image]],
        "batch4d": np.zeros((2, 5, 7, 3), np.uint8),
        "list-of-4d": [np.zeros((2, 5, 7, 3), np.uint8), np.zeros((3, 5, 7, 3), np.uint8)],
    }[structure]
    want = [len(group) for group in image_utils.make_nested_list_of_images(images)]
    assert intake.samples(images, "test") == want
    assert sum(want) == len(intake.as_list(images, "test"))


# ----- lanczos from any family's config -----


@pytest.mark.parametrize("reference", REFERENCES)
def test_lanczos_in_a_clip_config_matches_transformers(monkeypatch, reference):
    """resample 1 in another family's config (CLIP's): its one resize in LANCZOS, as both backends run it."""
    pil_class, tv_class = transformers.CLIPImageProcessorPil, transformers.CLIPImageProcessor
    cls = pil_class if reference == "pil" else tv_class
    images = [as_input(reference, PHOTOS["wide"]), as_input(reference, PHOTOS["tiny"])]
    expected = cls(resample=1)(images, return_tensors="pt")
    ours = FusedHFImageProcessor(cls(resample=1))
    forbid_upstream(monkeypatch, ours)
    got = ours(images, return_tensors="pt")
    assert float((got["pixel_values"] - expected["pixel_values"]).abs().max()) <= FP32_ATOL
    for spelling in (1, "lanczos", Image.Resampling.LANCZOS):
        assert configs.resolve({"image_processor_type": "CLIPImageProcessor", "resample": spelling}, "t").resample == (
            "lanczos"
        )


# ----- refusals: named, before any kernel; calls not reproduced go to transformers -----


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"do_pad": False}, "do_pad off is not implemented for Idefics3 / SmolVLM"),
        ({"max_image_size": 364}, "max_image_size must be {'longest_edge': int}, got 364"),
        ({"max_image_size": {"longest_edge": 0}}, "max_image_size['longest_edge'] must be an int >= 1, got 0"),
        ({"size": {"shortest_edge": 364}}, "size must be {'longest_edge': int} or {'height': int, 'width': int}"),
        ({"size": {"longest_edge": -1}}, "size['longest_edge'] must be an int >= 1, got -1"),
        ({"return_row_col_info": "yes"}, "return_row_col_info must be true or false, got 'yes'"),
        ({"do_image_splitting": 1}, "do_image_splitting must be true or false"),
        ({"resample": 4}, "resample 4 (box) is not implemented"),
    ],
)
def test_bad_configs_are_refused(config, message):
    with pytest.raises(ValueError, match="FusedImageProcessor: ") as error:
        FusedImageProcessor.from_preprocessor_config(
            {"image_processor_type": "Idefics3ImageProcessor", **config}, device="cpu"
        )
    assert message in str(error.value), str(error.value)


def test_a_structure_transformers_does_not_group_is_refused_before_any_kernel():
    processor = FusedImageProcessor.from_preprocessor_config(
        {"image_processor_type": "Idefics3ImageProcessor"}, device="cpu"
    )
    with RecordOps() as recorded, pytest.raises(ValueError) as raised:
        processor([np.zeros((2, 5, 7, 3), np.uint8), np.zeros((5, 7, 3), np.uint8)])
    assert "mixes 4-D batches with single images" in str(raised.value)
    assert not any("fused_input_norm" in str(op) for op in recorded.ops())


def test_calls_it_does_not_reproduce_go_to_transformers(caplog):
    """do_pad off (a list of tensors, or a stack) goes to transformers, logged, with transformers' answer."""
    images = call_images("torchvision", "wide")
    theirs = upstream("idefics3", "torchvision", {})
    ours = FusedHFImageProcessor(upstream("idefics3", "torchvision", {}))
    with caplog.at_level(logging.INFO):
        got, expected = (
            ours(images, return_tensors="pt", do_pad=False),
            theirs(images, return_tensors="pt", do_pad=False),
        )
    assert torch.equal(got["pixel_values"], expected["pixel_values"]) and "pixel_attention_mask" not in got
    said = [r.getMessage() for r in caplog.records if "serves this call" in r.getMessage()]
    assert len(said) == 1 and "do_pad off is not implemented" in said[0], said
