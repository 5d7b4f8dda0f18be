"""The generic path (FusedHFGenericImageProcessor / FusedHFGenericVideoProcessor: a transformers processor's own
code with the package's primitives: reading a PIL image, resizing, rescaling and normalizing) against
transformers itself, for every image and video processor class transformers has that no family serves and that
vLLM uses: the same outputs (uint8 and int outputs equal, float32 within 1e-6), the same container types, in
strict mode (a primitive handed back fails the test) and with the primitives counted (a case the package did not
serve fails too)."""

import copy
import logging
import pickle
import types

import numpy as np
import pytest
import torch
from test_resize import NO_TORCH_LANCZOS, TORCH_LANCZOS
from transformers_suite_plugin import refuse_handback

from fused_input_norm import hf_adapter, hf_primitives
from fused_input_norm.hf_adapter import FusedHFGenericImageProcessor, FusedHFGenericVideoProcessor

pytest.importorskip("torchvision", reason="transformers' TorchvisionBackend needs torchvision")
pytest.importorskip("transformers", reason="needs transformers")
Image = pytest.importorskip("PIL.Image", reason="needs Pillow")

# transformers' image processors that vLLM's models load, on the generic path itself (most now have a family, which
# hands the generic path the calls it does not reproduce).
IMAGE_CLASSES = [
    "LlavaNextImageProcessor",
    "LlavaNextImageProcessorPil",
    "Gemma4ImageProcessor",
    "Gemma4ImageProcessorPil",
    "Gemma4UnifiedImageProcessor",
    "Lfm2VlImageProcessor",
    "Cohere2VisionImageProcessor",
    "BlipImageProcessor",
    "BlipImageProcessorPil",
    "MiniCPMV4_6ImageProcessor",
    "MiniCPMV4_6ImageProcessorPil",
    "MiniCPMOcrImageProcessor",
    "Ernie4_5_VLMoeImageProcessor",
    "Ernie4_5_VLMoeImageProcessorPil",
    "PaddleOCRVLImageProcessor",
    "PaddleOCRVLImageProcessorPil",
    "Glm46VImageProcessor",
    "Glm46VImageProcessorPil",
    "Glm5NextImageProcessor",
    "Glm5NextImageProcessorPil",
    "CohereCompassImageProcessor",
    "CohereCompassImageProcessorPil",
    "Cosmos3EdgeImageProcessor",
    "Cosmos3EdgeImageProcessorPil",
    "MuseGlimmerImageProcessor",
    "Molmo2ImageProcessor",  # torch's float32 bilinear of image.float(), no antialiasing
]
# (class, call kwargs): their video processors, sampling set so that a 4-frame clip without
# metadata is a valid call (Ernie 4.5-VL's frames are drawn on with a font fetched from the Hub: not here).
VIDEO_CLASSES = [
    ("LlavaNextVideoVideoProcessor", {}),
    ("Gemma4VideoProcessor", {"num_frames": 4}),
    ("Gemma4UnifiedVideoProcessor", {"num_frames": 4}),
    ("InstructBlipVideoVideoProcessor", {}),
    ("MiniCPMV4_6VideoProcessor", {"do_sample_frames": False}),
    ("MiniCPMOcrVideoProcessor", {"do_sample_frames": False}),
    ("Ernie4_5_VLMoeVideoProcessor", {"do_sample_frames": False, "draw_on_frames": False}),
    ("Glm46VVideoProcessor", {"do_sample_frames": False}),
    ("Glm5NextVideoProcessor", {"do_sample_frames": False}),
    ("CohereCompassVideoProcessor", {}),
    ("Cosmos3EdgeVideoProcessor", {}),
    ("MuseGlimmerVideoProcessor", {}),
    ("Molmo2VideoProcessor", {"do_sample_frames": False}),
]
# Classes whose own code resizes without the backend's resize (Gemma 4 calls tvF.resize itself; Glm5Next's
# video frames this small are inside its token budget, kept as they are: its resize by the backend's name is
# test_a_models_own_call_of_the_backend_by_name_reaches_the_package's).
OWN_RESIZE = {
    "Gemma4ImageProcessor",
    "Gemma4ImageProcessorPil",
    "Gemma4UnifiedImageProcessor",
    "Gemma4VideoProcessor",
    "Gemma4UnifiedVideoProcessor",
    "Glm5NextVideoProcessor",
}
# Classes that convert to float32 before rescale_and_normalize (the backend's own steps then, as for any float input).
FLOAT_NORMALIZE = {"MiniCPMV4_6ImageProcessor", "MiniCPMOcrImageProcessor", "Molmo2VideoProcessor"}
LANCZOS = 1  # PIL.Image.Resampling.LANCZOS


def processor_class(name: str) -> type:
    """transformers' class `name` (from its top-level names, which cover both backends' modules)."""
    import transformers

    try:
        found = getattr(transformers, name)
    except (ImportError, AttributeError) as e:
        pytest.skip(f"the installed transformers has no {name} ({type(e).__name__}: {e})")
    if hf_primitives.backend_of(found) is None:
        pytest.skip(f"the installed transformers builds {name} on neither TorchvisionBackend nor PilBackend")
    if getattr(found, "resample", None) == LANCZOS and not name.endswith("Pil"):
        from transformers.utils.import_utils import is_torchvision_greater_or_equal

        if not TORCH_LANCZOS:
            pytest.skip(NO_TORCH_LANCZOS)
        if not is_torchvision_greater_or_equal("0.27"):  # transformers resizes with BICUBIC then: handed back
            pytest.skip("LANCZOS before torchvision 0.27: transformers falls back to BICUBIC, which is its own")
    return found


@pytest.fixture
def served(monkeypatch):
    """Strict mode (any primitive handed back fails), and how many calls each primitive of the package served."""
    monkeypatch.setattr(hf_adapter._Adapter, "_handed_back", refuse_handback)
    monkeypatch.setattr(hf_primitives, "MIN_NORMALIZE_VALUES", 1)  # the small images here normalized too
    counts = {"process_image": 0, "resize": 0, "normalize": 0}

    def counted(name, function):
        def wrapper(*args, **kwargs):
            out = function(*args, **kwargs)
            counts[name] += out is not None and not isinstance(out, str)
            return out

        return wrapper

    for name, function in [
        ("process_image", "pil_pixels"),
        ("process_image", "pil_array"),
        ("resize", "torchvision_resize"),
        ("resize", "pil_resize"),
        ("normalize", "torchvision_normalize"),
    ]:
        monkeypatch.setattr(hf_primitives, function, counted(name, getattr(hf_primitives, function)))
    return counts


def assert_same(got, expected, where="output"):
    """Equal values and equal containers: uint8 and ints exact, floats within 1e-6 (float32 compared in
    float64), the same list / tuple / tensor / array types, dtypes and shapes."""
    assert type(got) is type(expected), f"{where}: {type(got).__name__} != {type(expected).__name__}"
    if isinstance(expected, torch.Tensor | np.ndarray):
        assert got.dtype == expected.dtype and got.shape == expected.shape, (
            f"{where}: {got.dtype} {tuple(got.shape)} != {expected.dtype} {tuple(expected.shape)}"
        )
        got, expected = torch.as_tensor(np.asarray(got)), torch.as_tensor(np.asarray(expected))
        if expected.is_floating_point():
            diff = (got.double() - expected.double()).abs().max().item() if expected.numel() else 0.0
            assert diff <= 1e-6, f"{where}: differs by {diff}"
        else:
            assert torch.equal(got, expected), f"{where}: values differ"
    elif isinstance(expected, list | tuple):
        assert len(got) == len(expected), f"{where}: {len(got)} items != {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            assert_same(g, e, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert sorted(got) == sorted(expected), f"{where}: keys {sorted(got)} != {sorted(expected)}"
        for key in expected:
            assert_same(got[key], expected[key], f"{where}.{key}")
    else:
        assert got == expected, f"{where}: {got!r} != {expected!r}"


def same_call(adapter, upstream, *args, **kwargs):
    """The adapter's answer to a call equals upstream's, an exception of the same type included."""
    try:
        expected = upstream(*args, **kwargs)
    except Exception as e:
        with pytest.raises(type(e)):
            adapter(*args, **kwargs)
        return None
    got = adapter(*args, **kwargs)
    assert type(got) is type(expected)
    assert_same(dict(got), dict(expected))
    return got


def pixels(height, width, seed=0):
    return np.random.default_rng(seed + height * 7 + width).integers(0, 256, (height, width, 3), dtype=np.uint8)


# Per-call kwargs each class takes (transformers' common ones): raw bytes, another filter, another mean and std.
CALL_KWARGS = [
    {"do_rescale": False, "do_normalize": False},
    {"resample": 2},
    {"image_mean": [0.1, 0.2, 0.3], "image_std": [0.9, 0.8, 0.7]},
]


@pytest.mark.parametrize("name", IMAGE_CLASSES)
def test_image_processor_served_as_transformers_computes_it(served, name):
    cls = processor_class(name)
    upstream = cls()
    adapter = FusedHFGenericImageProcessor(upstream)
    assert isinstance(adapter, cls) and type(adapter).__name__ == name
    # its default config: PIL images of odd sizes as a batch, tensors with return_tensors unset (transformers'
    # containers), a tiny image (served, or refused as transformers refuses it)
    same_call(
        adapter, upstream, [Image.fromarray(pixels(97, 131)), Image.fromarray(pixels(300, 400))], return_tensors="pt"
    )
    tensors = [torch.from_numpy(pixels(233, 317)).permute(2, 0, 1), torch.from_numpy(pixels(41, 7)).permute(2, 0, 1)]
    same_call(adapter, upstream, tensors)
    same_call(adapter, upstream, Image.fromarray(pixels(5, 3)))
    for kwargs in CALL_KWARGS:
        same_call(adapter, upstream, Image.fromarray(pixels(121, 89)), return_tensors="pt", **kwargs)
    assert served["resize"] > 0 or name in OWN_RESIZE
    assert served["process_image"] > 0
    assert (served["normalize"] > 0) == (not name.endswith("Pil") and name not in FLOAT_NORMALIZE), served


def test_a_12_megapixel_photo_is_served_as_transformers_computes_it(served):
    cls = processor_class("LlavaNextImageProcessor")
    same_call(FusedHFGenericImageProcessor(cls()), cls(), Image.fromarray(pixels(3000, 4000)), return_tensors="pt")
    assert served["process_image"] > 0 and served["resize"] > 0


def clip(frames, height, width):
    return np.stack([pixels(height, width, seed) for seed in range(frames)])


@pytest.mark.parametrize("name, kwargs", VIDEO_CLASSES, ids=[name for name, _ in VIDEO_CLASSES])
def test_video_processor_served_as_transformers_computes_it(served, name, kwargs):
    cls = processor_class(name)
    upstream = cls()
    adapter = FusedHFGenericVideoProcessor(upstream)
    assert isinstance(adapter, cls)
    videos = [clip(4, 97, 131), clip(4, 180, 240)]
    same_call(adapter, upstream, videos, return_tensors="pt", **kwargs)
    same_call(adapter, upstream, [torch.from_numpy(clip(4, 61, 89))], **kwargs)
    same_call(adapter, upstream, videos[:1], do_rescale=False, do_normalize=False, return_tensors="pt", **kwargs)
    assert served["resize"] > 0 or name in OWN_RESIZE
    assert (served["normalize"] > 0) == (name not in FLOAT_NORMALIZE), served


def test_a_models_own_call_of_the_backend_by_name_reaches_the_package(served):
    """Glm5NextVideoProcessor.resize calls TorchvisionBackend.resize(self, ...) by the backend's name, past the
    class the adapter puts above the backend: the adapter's class holds a copy of that function whose global
    name is the package's primitives, so frames outside its token budget (down: 720p; up: a tiny clip) are
    resized by the engine, equal to transformers'."""
    cls = processor_class("Glm5NextVideoProcessor")
    upstream = cls()
    adapter = FusedHFGenericVideoProcessor(upstream)
    assert type(adapter).resize is not cls.resize and type(adapter).resize.__wrapped__ is cls.resize
    for video in [clip(4, 720, 1280), clip(2, 23, 41)]:  # a 200-token budget: 720p frames down, tiny ones up
        before = served["resize"]
        same_call(adapter, upstream, [video], do_sample_frames=False, max_image_tokens=200, return_tensors="pt")
        assert served["resize"] > before, video.shape


@pytest.mark.parametrize("threads", [1, 2])
def test_a_float_resize_without_antialias_is_torchs_own_bits(threads, monkeypatch):
    """Molmo 2 resizes image.float() with torch's float32 bilinear, no antialiasing: the engine's
    "bilinear_no_antialias_f32" filters, whichever kernel torch runs at this thread count (the two sum
    differently), bit for bit, on values that are not bytes too."""
    from torchvision.transforms.v2 import functional as tvF
    from transformers.image_utils import SizeDict

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        rng = np.random.default_rng(threads)
        for image, size in [
            (torch.from_numpy(pixels(301, 301)).permute(2, 0, 1).float().contiguous(), (448, 448)),
            (torch.from_numpy(rng.normal(0, 100, (2, 3, 97, 131)).astype(np.float32)), (40, 60)),
            (torch.from_numpy(rng.normal(0, 1, (1, 1, 50, 700)).astype(np.float32)), (300, 21)),
        ]:
            got = hf_primitives.torchvision_resize(image, SizeDict(height=size[0], width=size[1]), 2, False)
            expected = tvF.resize(image, list(size), interpolation=tvF.InterpolationMode.BILINEAR, antialias=False)
            assert isinstance(got, torch.Tensor) and torch.equal(got, expected), (threads, tuple(image.shape), size)
    finally:
        torch.set_num_threads(before)


def test_grey_and_rgba_pil_images_are_made_rgb_as_transformers_makes_them(served):
    """With do_convert_rgb (LLaVA-NeXT's default), L and RGBA PIL images are read by the package (strict: none is
    handed back): the grey repeated, the alpha composited on white as Pillow's alpha_composite does, for every
    alpha value; the values are transformers'."""
    cls = processor_class("LlavaNextImageProcessor")
    upstream = cls()
    adapter = FusedHFGenericImageProcessor(upstream)
    alpha = np.arange(60 * 80, dtype=np.uint32).reshape(60, 80, 1) % 256  # every alpha value
    rgba = Image.fromarray(np.dstack([pixels(60, 80), alpha.astype(np.uint8)]), "RGBA")
    large = Image.fromarray(np.dstack([pixels(300, 400), pixels(300, 400)[..., :1]]), "RGBA")
    same_call(adapter, upstream, [rgba, rgba.convert("L"), large, large.convert("L")], return_tensors="pt")
    assert served["process_image"] == 4


def test_a_pil_image_the_package_does_not_read_goes_to_the_backend_with_its_reason(caplog):
    # without do_convert_rgb transformers keeps the image's own channels; a palette image is Pillow's to convert
    cls = processor_class("LlavaNextImageProcessor")
    upstream = cls()
    adapter = FusedHFGenericImageProcessor(upstream)
    rgb = Image.fromarray(pixels(60, 80))
    with caplog.at_level(logging.INFO):
        same_call(adapter, upstream, [rgb.convert("P")], return_tensors="pt")
        same_call(adapter, upstream, [rgb.convert("L")], do_convert_rgb=False, do_normalize=False, return_tensors="pt")
    said = " ".join(r.getMessage() for r in caplog.records if "serves this call" in r.getMessage())
    assert "process_image: a PIL image in mode P" in said and "mode L" in said


def test_the_adapter_stands_in_for_upstream_in_copies_pickles_and_class_lookups():
    cls = processor_class("LlavaNextImageProcessor")
    upstream = cls(do_pad=False)
    adapter = FusedHFGenericImageProcessor(upstream)
    assert isinstance(adapter, cls) and type(adapter).valid_kwargs is cls.valid_kwargs
    assert adapter.to_dict() == upstream.to_dict() and adapter.do_pad is False and adapter.backend == "torchvision"
    adapter.do_pad = True  # a write reaches upstream, which later calls read
    assert upstream.do_pad is True
    for other in (copy.deepcopy(adapter), pickle.loads(pickle.dumps(adapter))):
        assert type(other) is type(adapter) and other.to_dict() == upstream.to_dict()
        same_call(other, upstream, Image.fromarray(pixels(50, 70)), return_tensors="pt")


def test_a_models_own_resize_runs_first_and_its_super_call_reaches_the_package(served):
    # Lfm2Vl overrides resize and calls super().resize: the package's sits between it and the backend.
    cls = processor_class("Lfm2VlImageProcessor")
    adapter = FusedHFGenericImageProcessor(cls())
    mro = type(adapter).__mro__
    assert mro.index(cls) < mro.index(hf_primitives.TorchvisionPrimitives) < mro.index(hf_primitives.backend_of(cls))
    same_call(adapter, cls(), Image.fromarray(pixels(700, 900)), return_tensors="pt")
    assert served["resize"] > 0


class _Holder:
    """A transformers processor's shape as the engine plugins see it: image_processor and video_processor."""

    def __init__(self, image_processor=None, video_processor=None):
        self.image_processor = image_processor
        self.video_processor = video_processor


def test_stand_in_gives_the_generic_path_where_no_family_serves_and_the_family_where_one_does():
    glimmer = processor_class("MuseGlimmerImageProcessor")  # no family reproduces either of these two
    video = processor_class("InstructBlipVideoVideoProcessor")
    qwen = processor_class("Qwen2VLImageProcessor")
    holder = _Holder(glimmer(), video())
    log = logging.getLogger("test")
    said = hf_adapter.stand_in(
        holder, "image_processor", "images", hf_adapter.FusedHFImageProcessor, hf_adapter.unsupported, log
    )
    assert isinstance(holder.image_processor, FusedHFGenericImageProcessor) and "generic path" in said
    said = hf_adapter.stand_in(
        holder, "video_processor", "videos", hf_adapter.FusedHFVideoProcessor, hf_adapter.unsupported_video, log
    )
    assert isinstance(holder.video_processor, FusedHFGenericVideoProcessor) and "generic path" in said
    holder = _Holder(qwen())
    hf_adapter.stand_in(
        holder, "image_processor", "images", hf_adapter.FusedHFImageProcessor, hf_adapter.unsupported, log
    )
    assert isinstance(holder.image_processor, hf_adapter.FusedHFImageProcessor)  # the family wins


def test_a_processor_on_neither_backend_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="neither transformers' TorchvisionBackend nor its PilBackend"):
        FusedHFGenericImageProcessor(object())


def test_the_vllm_plugin_serves_a_processor_without_a_family_by_the_generic_path_and_says_so(caplog):
    from fused_input_norm import vllm_plugin

    upstream = processor_class("ViTImageProcessor")()
    processor = _Holder(upstream)
    with caplog.at_level(logging.INFO, logger=vllm_plugin.logger.name):
        vllm_plugin.serve_images(types.SimpleNamespace(model="/models/vit", architectures=["SomeViT"]), processor)
    assert isinstance(processor.image_processor, FusedHFGenericImageProcessor)
    assert processor.image_processor.upstream is upstream
    said = [r.getMessage() for r in caplog.records if "fused_input_norm:" in r.getMessage()]
    assert said == [
        "fused_input_norm: the generic path serves images for ['SomeViT']: transformers' ViTImageProcessor runs "
        "with fused_input_norm's exact primitives (reference 'torchvision'; no family: ViTImageProcessor is not an "
        "image processor FusedImageProcessor reproduces)"
    ]


@pytest.mark.parametrize(
    "image, size, resample, antialias, why",
    [
        (torch.zeros(3, 20, 30), {"height": 10, "width": 10}, 2, None, "float32 input with antialias=None"),
        (torch.zeros(3, 20, 30), {"height": 10, "width": 10}, 3, False, "float32 input with resample=3"),
        (torch.zeros(3, 30, 20).transpose(1, 2), {"height": 10, "width": 10}, 2, False, "C, H, W], none empty, contig"),
        (torch.zeros(3, 20, 30), {"height": 10, "width": 10}, 1, True, "float32 input with resample=1"),
        (torch.zeros(3, 20, 30), {"height": 10, "width": 1}, 3, True, "float32 resize to width 1"),
        (torch.zeros(3, 20, 300), {"height": 10, "width": 74}, 3, True, "downscale of more than 4x across"),
        (torch.zeros(3, 20, 30, dtype=torch.int16), {"height": 10, "width": 10}, 2, True, "not a uint8 or float32"),
        (torch.zeros(3, 20, 30, dtype=torch.uint8, device="meta"), {"height": 10, "width": 10}, 2, True, "meta"),
        (torch.zeros(3, 20, 30, dtype=torch.uint8), {"height": 10, "width": 10}, 2, False, "antialias=False"),
        (torch.zeros(3, 20, 30, dtype=torch.uint8), {"height": 10, "width": 10}, 0, True, "resample=0"),
        (torch.zeros(3, 20, 30, dtype=torch.uint8), {"height": 1, "width": 1}, 2, True, "1x1"),
        (torch.zeros(3, 20, 30, dtype=torch.uint8), {}, 2, True, "a size without"),
    ],
    ids=[
        "float-antialias-none",
        "float-bicubic",
        "float-strided",
        "float-lanczos",
        "float-width-1",
        "float-far-downscale",
        "int16",
        "off-cpu",
        "no-antialias",
        "nearest",
        "1x1",
        "no-size",
    ],
)
def test_the_torchvision_resize_hands_back_what_the_engine_does_not_reproduce(image, size, resample, antialias, why):
    from transformers.image_utils import SizeDict

    said = hf_primitives.torchvision_resize(image, SizeDict(**size), resample, antialias)
    assert isinstance(said, str) and why in said


def test_the_torchvision_rescale_and_normalize_is_torchs_own_bits(monkeypatch):
    """hf_primitives.torchvision_normalize against TorchvisionBackend.rescale_and_normalize, bit for bit: uint8
    images of 3 to 5 dims, 1 and 3 channels, a crop's view; means and stds as tuples, numbers and tensors, fused
    with the rescale or not; a rescale alone. What it leaves to the backend: None (float input, a channels-last
    batch, neither step, a small image), a reason (a std of 0, a model's own normalize)."""
    from transformers import BlipImageProcessor

    upstream = BlipImageProcessor()
    small = torch.zeros((3, 17, 23), dtype=torch.uint8)  # under MIN_NORMALIZE_VALUES: the backend's, unlogged
    assert hf_primitives.torchvision_normalize(upstream, small, True, 1 / 255, True, 0.5, 0.5) is None
    monkeypatch.setattr(hf_primitives, "MIN_NORMALIZE_VALUES", 1)
    generator = torch.Generator().manual_seed(0)
    crop = torch.randint(0, 256, (2, 3, 40, 50), dtype=torch.uint8, generator=generator)[..., 3:33, 5:45]
    cases = [torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator) for shape in
             [(3, 17, 23), (2, 3, 31, 7), (2, 2, 3, 9, 11), (1, 1, 13, 13)]] + [crop]  # fmt: skip
    settings = [
        (True, 1 / 255, True, (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)),
        (True, 1 / 255, True, 0.5, 0.5),
        (False, 1 / 255, True, (12.5,), (60.0,)),
        (True, 1 / 127.5, True, torch.tensor([0.5, 0.25, 0.125]), torch.tensor([0.3, 0.2, 0.1])),
        (True, 1 / 255, False, None, None),
        (True, 0.001, False, None, None),
    ]
    for images in cases:
        for do_rescale, factor, do_normalize, mean, std in settings:
            if len(torch.as_tensor(mean if do_normalize else 0).view(-1)) not in (1, images.shape[-3]):
                continue  # transformers' error: the reason below hands it back (a mean of shape ...)
            got = hf_primitives.torchvision_normalize(upstream, images, do_rescale, factor, do_normalize, mean, std)
            expected = upstream.rescale_and_normalize(images, do_rescale, factor, do_normalize, mean, std)
            assert isinstance(got, torch.Tensor), got
            assert got.dtype == expected.dtype and got.stride() == expected.stride()
            assert torch.equal(got.view(torch.int32), expected.view(torch.int32)), (images.shape, mean)
    image = cases[1]
    assert hf_primitives.torchvision_normalize(upstream, image.float(), True, 1 / 255, True, 0.5, 0.5) is None
    channels_last = image.contiguous(memory_format=torch.channels_last)
    assert hf_primitives.torchvision_normalize(upstream, channels_last, True, 1 / 255, True, 0.5, 0.5) is None
    assert hf_primitives.torchvision_normalize(upstream, image, False, 1 / 255, False, 0.5, 0.5) is None
    assert hf_primitives.torchvision_normalize(upstream, image, False, 1, True, (0, 0, 0), (1, 0, 1)) == "a std of 0"
    why = hf_primitives.torchvision_normalize(upstream, cases[3], False, 1, True, (0, 0, 0), (1, 1, 1))
    assert why == "a mean of shape (3,) and std of (3,) for 1 channels"

    class OwnNormalize(BlipImageProcessor):
        def normalize(self, image, mean, std, inplace=False, **kwargs):
            return image

    why = hf_primitives.torchvision_normalize(OwnNormalize(), image, True, 1 / 255, True, 0.5, 0.5)
    assert why == "normalize is the model's own"
