"""FusedHFImageProcessor (what vLLM holds as its image processor) against the transformers processor it wraps,
called directly: the same BatchFeature on the calls it serves (uint8 patch rows with do_rescale and
do_normalize off, float32 within 1e-6 otherwise; per-call size kwargs resolved as transformers resolves them),
transformers' own output on the calls it does not reproduce, upstream's attributes. The same inside vLLM:
tests/test_vllm_processor.py."""

import logging

import numpy as np
import pytest
import torch
from conftest import requires_cuda
from test_resize import NO_TORCH_LANCZOS, TORCH_LANCZOS

from fused_input_norm.hf_adapter import FusedHFImageProcessor, unsupported

qwen = pytest.importorskip("transformers.models.qwen2_vl.image_processing_qwen2_vl", reason="needs transformers")
Image = pytest.importorskip("PIL.Image", reason="needs Pillow")


def upstream():
    return qwen.Qwen2VLImageProcessor(min_pixels=3136, max_pixels=1003520)


def images():
    rng = np.random.default_rng(3)
    rgb = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in [(480, 640), (57, 29), (1080, 1920)]]
    return [Image.fromarray(a) for a in rgb] + [
        Image.fromarray(rgb[0][..., 0]),
        Image.fromarray(rgb[0]).convert("RGBA"),
    ]


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"do_rescale": False, "do_normalize": False},
        {"max_pixels": 200704},
        {"size": {"shortest_edge": 50176, "longest_edge": 262144}, "do_rescale": False, "do_normalize": False},
    ],
    ids=["float", "uint8", "max_pixels", "size-uint8"],
)
def test_same_batch_feature_as_transformers(kwargs):
    ours, theirs = FusedHFImageProcessor(upstream()), upstream()
    got, expected = ours(images(), return_tensors="pt", **kwargs), theirs(images(), return_tensors="pt", **kwargs)
    assert set(got) == set(expected) == {"pixel_values", "image_grid_thw"}
    assert got["pixel_values"].dtype in (torch.uint8, torch.float32)
    _assert_same(got, expected)


def test_calls_its_family_does_not_reproduce_go_to_the_generic_path(monkeypatch, caplog):
    """A call the family refuses runs upstream's own code with the exact primitives (the generic path); a
    primitive that does not serve its step (nearest) leaves that step to transformers' backend."""
    from transformers.image_processing_backends import TorchvisionBackend

    ours, theirs = FusedHFImageProcessor(upstream()), upstream()
    backend_resize = []
    monkeypatch.setattr(
        TorchvisionBackend,
        "resize",
        lambda self, *a, _resize=TorchvisionBackend.resize, **k: backend_resize.append(1) or _resize(self, *a, **k),
    )
    with caplog.at_level(logging.INFO):
        for kwargs in ({"resample": 0}, {"do_rescale": True, "do_normalize": False}):
            got, expected = ours(images()[:2], **kwargs), theirs(images()[:2], **kwargs)
            assert torch.equal(got["pixel_values"], expected["pixel_values"])
            assert torch.equal(got["image_grid_thw"], expected["image_grid_thw"])
    said = [r.getMessage() for r in caplog.records if "serves this call" in r.getMessage()]
    assert len(said) == 3, said
    assert "the generic path serves this call" in said[0] and "nearest" in said[0]
    assert "transformers' Qwen2VLImageProcessor serves this call: resize: resample=0" in said[1]
    assert "the generic path serves this call" in said[2] and "do_rescale and do_normalize differ" in said[2]
    # transformers' resize ran for the nearest call only: both images on each side (ours, theirs), then theirs
    assert len(backend_resize) == 6, backend_resize


def test_upstream_attributes_and_refusals():
    ours = FusedHFImageProcessor(upstream())
    assert ours.merge_size == 2 and ours.reference == "torchvision"
    assert ours.get_number_of_image_patches(1080, 1920, {}) == upstream().get_number_of_image_patches(1080, 1920, {})
    convnext = pytest.importorskip("transformers.models.convnext").ConvNextImageProcessor()
    assert "not an image processor FusedImageProcessor reproduces" in unsupported(convnext)
    with pytest.raises(ValueError, match="cannot serve ConvNextImageProcessor"):
        FusedHFImageProcessor(convnext)


@pytest.mark.parametrize("backend", ["", "Pil"])
@pytest.mark.parametrize(
    ("family", "kwargs"),
    [
        ("clip.CLIPImageProcessor", {}),
        ("clip.CLIPImageProcessor", {"size": {"shortest_edge": 336}, "crop_size": {"height": 336, "width": 336}}),
        ("clip.CLIPImageProcessor", {"do_rescale": False, "do_normalize": False}),
        # a crop larger than the resize along one side (odd padding, which the backends place apart), cut
        # along the other: transformers pads with zeros, then crops
        ("clip.CLIPImageProcessor", {"crop_size": {"height": 257, "width": 255}}),
        (
            "clip.CLIPImageProcessor",
            {"crop_size": {"height": 301, "width": 233}, "do_rescale": False, "do_normalize": False},
        ),
        # vLLM's Ovis processor: a per-call height x width under a larger square crop (padding on one side only)
        (
            "clip.CLIPImageProcessor",
            {"size": {"height": 251, "width": 448}, "crop_size": {"height": 448, "width": 448}},
        ),
        ("siglip.SiglipImageProcessor", {}),
        ("siglip.SiglipImageProcessor", {"size": {"height": 384, "width": 384}}),
    ],
    ids=["clip", "clip-336", "clip-uint8", "clip-pad-odd", "clip-pad-uint8", "clip-pad-ovis", "siglip", "siglip-384"],
)
def test_every_family_in_the_registry_is_served_as_transformers_computes_it(monkeypatch, family, kwargs, backend):
    module, name = family.split(".")
    theirs = getattr(pytest.importorskip(f"transformers.models.{module}"), name + backend)()
    ours = FusedHFImageProcessor(theirs)
    expected = theirs(images()[:2], return_tensors="pt", **kwargs)
    _forbid_upstream_preprocess(monkeypatch, ours)
    got = ours(images()[:2], return_tensors="pt", **kwargs)
    assert set(got) == set(expected)
    pv, ref = got["pixel_values"], expected["pixel_values"]
    assert pv.dtype == ref.dtype and pv.shape == ref.shape
    assert torch.equal(pv, ref) if pv.dtype == torch.uint8 else float((pv - ref).abs().max()) <= 1e-6


@pytest.mark.parametrize("backend", ["", "Pil"])
@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("layout", ["channels_last", "channels_first", "enum"])
def test_input_data_format_is_served_as_transformers_reads_it(monkeypatch, backend, channels, layout):
    """transformers' own test_call_numpy_4_channels: arrays and tensors laid out as input_data_format says
    (4 channels with do_convert_rgb off and four means), served, not handed back, except 4 channels on the PIL
    backend: Pillow resizes RGBA premultiplied by alpha (the plain resize served them before, 1.98 off).
    Shapes where inference alone finds the other axis: a 4x3x3 or 3x4x3 image read channels-first by it."""
    from transformers.image_utils import ChannelDimension

    theirs = getattr(pytest.importorskip("transformers.models.clip"), "CLIPImageProcessor" + backend)()
    ours = FusedHFImageProcessor(theirs)
    rng = np.random.default_rng(5)
    last = [rng.integers(0, 256, (h, w, channels), dtype=np.uint8) for h, w in [(37, 50), (4, 3), (3, 4)]]
    given = last if layout != "channels_first" else [np.moveaxis(a, -1, 0) for a in last]
    given = [*given[:2], torch.from_numpy(given[2])]
    layout_kwarg = ChannelDimension.LAST if layout == "enum" else layout
    kwargs = {"input_data_format": layout_kwarg, "return_tensors": "pt"}
    if channels == 4:
        kwargs |= {"do_convert_rgb": False, "image_mean": [0.1, 0.2, 0.3, 0.4], "image_std": [0.5, 0.6, 0.7, 0.8]}
    expected = theirs(given, **kwargs)
    pil_alpha = backend == "Pil" and channels == 4  # Pillow resizes RGBA premultiplied: transformers answers
    if not pil_alpha:
        _forbid_upstream_preprocess(monkeypatch, ours)
    pv, ref = ours(given, **kwargs)["pixel_values"], expected["pixel_values"]
    assert pv.shape == ref.shape == (3, channels, 224, 224)
    assert float((pv - ref).abs().max()) <= 1e-6
    assert any("premultiplied" in reason for reason in ours._logged) == pil_alpha


def test_input_data_format_that_names_an_axis_without_1_3_or_4_channels_is_handed_back(caplog):
    theirs = pytest.importorskip("transformers.models.clip").CLIPImageProcessor()
    ours = FusedHFImageProcessor(theirs)
    image = np.random.default_rng(6).integers(0, 256, (3, 40, 2), dtype=np.uint8)  # "last": 2 channels
    with caplog.at_level(logging.INFO):
        with pytest.raises(Exception) as ours_error:
            ours(image, input_data_format="channels_last", return_tensors="pt")
    with pytest.raises(Exception) as theirs_error:
        theirs(image, input_data_format="channels_last", return_tensors="pt")
    assert type(ours_error.value) is type(theirs_error.value)
    assert any("input_data_format='channels_last' with 2 channels" in r.getMessage() for r in caplog.records)


# ----- videos -----


def _clips():
    rng = np.random.default_rng(7)
    return [
        rng.integers(0, 256, (9, 180, 320, 3), dtype=np.uint8),
        rng.integers(0, 256, (6, 240, 200, 3), dtype=np.uint8),
    ]


def _metadata():
    return [
        {"fps": 4.0, "total_num_frames": 9, "frames_indices": list(range(9))},
        {"fps": 3.0, "total_num_frames": 6, "frames_indices": list(range(6))},
    ]


@pytest.mark.parametrize("model", ["qwen2_vl", "qwen3_vl"])
@pytest.mark.parametrize(
    "kwargs",
    [
        {"do_sample_frames": False},
        {"do_sample_frames": True, "fps": 2},
        {"do_sample_frames": False, "do_rescale": False, "do_normalize": False},
        {"do_sample_frames": False, "size": {"shortest_edge": 3136, "longest_edge": 200000}},
    ],
    ids=["as-given", "sampled", "uint8", "size"],
)
def test_video_same_batch_feature_as_transformers(model, kwargs):
    """FusedHFVideoProcessor against the transformers video processor it wraps (upstream's own sampling and
    metadata, FusedVideoProcessor's rows): float32 within 1e-6, uint8 equal, grids and sampled frames equal,
    and no call handed back to transformers."""
    import copy

    from fused_input_norm.hf_adapter import FusedHFVideoProcessor

    module = pytest.importorskip(f"transformers.models.{model}.video_processing_{model}")
    cls = module.Qwen2VLVideoProcessor if model == "qwen2_vl" else module.Qwen3VLVideoProcessor
    upstream = cls(cap_pixels_per_frame=False)
    served = FusedHFVideoProcessor(copy.deepcopy(upstream))
    expected = upstream(videos=_clips(), video_metadata=_metadata(), return_metadata=True, **kwargs)
    got = served(videos=_clips(), video_metadata=_metadata(), return_metadata=True, **kwargs)
    assert not served._logged, served._logged
    assert torch.equal(got["video_grid_thw"], expected["video_grid_thw"])
    indices = [[[int(i) for i in m.frames_indices] for m in out["video_metadata"]] for out in (got, expected)]
    assert indices[0] == indices[1]
    pv, ref = got["pixel_values_videos"], expected["pixel_values_videos"]
    assert pv.dtype == ref.dtype and pv.shape == ref.shape
    if pv.dtype == torch.uint8:
        assert torch.equal(pv, ref)
    else:
        assert float((pv - ref).abs().max()) <= 1e-6


def test_video_calls_it_does_not_reproduce_go_to_transformers(caplog):
    from fused_input_norm.hf_adapter import FusedHFVideoProcessor, unsupported_video

    module = pytest.importorskip("transformers.models.qwen2_vl.video_processing_qwen2_vl")
    upstream = module.Qwen2VLVideoProcessor(cap_pixels_per_frame=False)
    served = FusedHFVideoProcessor(upstream, logging.getLogger("test_video_adapter"))
    with caplog.at_level(logging.INFO, logger="test_video_adapter"):
        got = served(videos=_clips(), do_sample_frames=False, do_rescale=True, do_normalize=False)
    expected = upstream(videos=_clips(), do_sample_frames=False, do_rescale=True, do_normalize=False)
    assert torch.equal(got["pixel_values_videos"], expected["pixel_values_videos"])
    assert "do_rescale and do_normalize differ" in caplog.text
    assert unsupported_video(qwen.Qwen2VLImageProcessor()) is not None
    assert served.merge_size == upstream.merge_size  # upstream's attributes


# ----- attribute writes, nesting, the bounded processor cache -----


def _forbid_upstream_preprocess(monkeypatch, adapter):
    """A call handed back to transformers fails the test, instead of passing on transformers' own answer."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"handed back to transformers: {sorted(adapter._logged)}")

    monkeypatch.setattr(adapter.upstream, "preprocess", refuse)
    monkeypatch.setattr(adapter.upstream, "_preprocess", refuse)


def _assert_same(got, expected):
    assert torch.equal(got["image_grid_thw"], expected["image_grid_thw"])
    pv, ref = got["pixel_values"], expected["pixel_values"]
    assert pv.dtype == ref.dtype and pv.shape == ref.shape
    if pv.dtype == torch.uint8:
        assert torch.equal(pv, ref)
    else:
        assert float((pv - ref).abs().max()) <= 1e-6


@pytest.mark.parametrize(
    "writes",
    [
        {"do_rescale": False, "do_normalize": False},
        {"max_pixels": 200704},
        {"size": {"shortest_edge": 50176, "longest_edge": 262144}},
        {"patch_size": 16},
        {"merge_size": 1},
        {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.25, 0.5, 0.125]},
    ],
    ids=["uint8", "max_pixels", "size", "patch_size", "merge_size", "mean-std"],
)
def test_attribute_writes_reach_upstream_and_later_calls(monkeypatch, writes):
    """transformers' processor honours `processor.x = v` on its next call; so does the adapter, by writing x on
    upstream (where the call's defaults are read), and it still serves the call itself."""
    ours, theirs = FusedHFImageProcessor(upstream()), upstream()
    before = ours(images()[:3], return_tensors="pt")
    for name, value in writes.items():
        setattr(ours, name, value)
        setattr(theirs, name, value)
        assert getattr(ours.upstream, name) == value and name not in vars(ours)
    _forbid_upstream_preprocess(monkeypatch, ours)
    got, expected = ours(images()[:3], return_tensors="pt"), theirs(images()[:3], return_tensors="pt")
    _assert_same(got, expected)
    changed = before["pixel_values"].shape != got["pixel_values"].shape or not torch.equal(
        before["pixel_values"].float(), got["pixel_values"].float()
    )
    assert changed  # the write took effect (and the comparison above is not between two unchanged calls)


def test_deleting_an_attribute_deletes_upstreams_and_the_adapter_keeps_its_own():
    ours = FusedHFImageProcessor(upstream())
    ours.do_normalize = False
    del ours.do_normalize  # the instance value goes; the class default shows through again
    assert ours.upstream.do_normalize is True and ours.do_normalize is True
    ours.reference = "pil"  # the adapter's own state stays on it
    assert ours.reference == "pil" and getattr(ours.upstream, "reference", None) is None


@pytest.mark.parametrize("nested", [[[0], [1, 2]], [[0, 1], [], [2]], ([0], (1,), [2])], ids=["2+1", "empty", "tuples"])
def test_one_level_of_nesting_is_one_flat_batch_as_in_transformers(monkeypatch, nested):
    """transformers' make_flat_list_of_images flattens a list of lists of images into one batch; served too."""
    pictures = images()
    batch = [type(group)(pictures[i] for i in group) for group in nested]
    ours, theirs = FusedHFImageProcessor(upstream()), upstream()
    expected = theirs(batch, return_tensors="pt")
    assert torch.equal(expected["pixel_values"], theirs(pictures[:3], return_tensors="pt")["pixel_values"])
    _forbid_upstream_preprocess(monkeypatch, ours)
    _assert_same(ours(batch, return_tensors="pt"), expected)


def _long_probes() -> bool:
    import os

    return os.environ.get("FUSED_INPUT_NORM_LONG_PROBES") == "1"


def test_a_flood_of_distinct_per_call_configs_keeps_at_most_max_processors(monkeypatch):
    """Every request with its own size kwarg resolves to its own config: the adapter keeps the last
    MAX_PROCESSORS of them (the probe that found this kept 3,001 for 3,000 requests), from several threads
    at once, and every call's result is still transformers'. FUSED_INPUT_NORM_LONG_PROBES=1: 3,000 requests."""
    from concurrent.futures import ThreadPoolExecutor

    from fused_input_norm.hf_adapter import MAX_PROCESSORS

    requests = 3000 if _long_probes() else 60
    picture = [Image.fromarray(np.random.default_rng(5).integers(0, 256, (61, 47, 3), dtype=np.uint8))]
    ours, theirs = FusedHFImageProcessor(upstream()), upstream()
    _forbid_upstream_preprocess(monkeypatch, ours)

    def request(i):
        size = {"shortest_edge": 3136 + 28 * i, "longest_edge": 1003520}
        return i, ours(picture, size=size, do_rescale=False, do_normalize=False)

    with ThreadPoolExecutor(4) as pool:
        for i, got in pool.map(request, range(requests)):
            assert len(ours._processors) <= MAX_PROCESSORS
            if i % max(1, requests // 20) == 0 or i >= requests - 3:  # a sample checked against transformers
                size = {"shortest_edge": 3136 + 28 * i, "longest_edge": 1003520}
                expected = theirs(picture, size=size, do_rescale=False, do_normalize=False)
                _assert_same(got, expected)
    assert requests > MAX_PROCESSORS and len(ours._processors) == MAX_PROCESSORS


def test_a_copy_of_the_adapter_starts_with_an_empty_cache_and_still_serves():
    import copy
    import pickle

    ours = FusedHFImageProcessor(upstream())
    ours(images()[:1])
    for clone in (copy.deepcopy(ours), pickle.loads(pickle.dumps(ours))):
        assert len(clone._processors) == 0 and clone.upstream is not ours.upstream
        _assert_same(clone(images()[:2], return_tensors="pt"), upstream()(images()[:2], return_tensors="pt"))


def test_reasons_logged_are_bounded(caplog):
    """A reason can carry a client's value (an odd data_format): at most MAX_LOGGED_REASONS are kept."""
    from fused_input_norm.hf_adapter import MAX_LOGGED_REASONS

    ours = FusedHFImageProcessor(upstream(), logging.getLogger("test_reasons"))
    monkey = [f"kind-{i}" for i in range(MAX_LOGGED_REASONS + 10)]
    with caplog.at_level(logging.INFO, logger="test_reasons"):
        for reason in monkey:
            ours._handed_back(reason)
    assert len(ours._logged) == MAX_LOGGED_REASONS + 1
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == MAX_LOGGED_REASONS + 1 and "further reasons are not logged" in said[-1]


@pytest.mark.parametrize("model", ["qwen2_vl", "qwen3_vl"])
@pytest.mark.parametrize(
    "writes",
    [
        {"do_sample_frames": True, "fps": 2},
        {"do_rescale": False, "do_normalize": False},
        {"size": {"shortest_edge": 3136, "longest_edge": 100000}},
        {"patch_size": 8},
    ],
    ids=["sample-frames", "uint8", "size", "patch_size"],
)
def test_video_attribute_writes_reach_upstream_and_later_calls(monkeypatch, model, writes):
    """transformers' test_call_sample_frames sets `processor.do_sample_frames = True` and expects sampled
    frames: written on the adapter, it reaches upstream, whose preprocess reads it; the adapter still serves."""
    import copy

    from fused_input_norm.hf_adapter import FusedHFVideoProcessor

    module = pytest.importorskip(f"transformers.models.{model}.video_processing_{model}")
    cls = module.Qwen2VLVideoProcessor if model == "qwen2_vl" else module.Qwen3VLVideoProcessor
    theirs = cls(cap_pixels_per_frame=False)
    ours = FusedHFVideoProcessor(copy.deepcopy(theirs))
    ours.do_sample_frames = False
    theirs.do_sample_frames = False
    before = ours(videos=_clips(), video_metadata=_metadata())
    for name, value in writes.items():
        setattr(ours, name, value)
        setattr(theirs, name, value)
        assert getattr(ours.upstream, name) == value and name not in vars(ours)
    monkeypatch.setattr(ours.upstream, "_preprocess", lambda *a, **k: pytest.fail(f"handed back: {ours._logged}"))
    got = ours(videos=_clips(), video_metadata=_metadata())
    expected = theirs(videos=_clips(), video_metadata=_metadata())
    assert torch.equal(got["video_grid_thw"], expected["video_grid_thw"])
    pv, ref = got["pixel_values_videos"], expected["pixel_values_videos"]
    assert pv.dtype == ref.dtype and pv.shape == ref.shape
    assert torch.equal(pv, ref) if pv.dtype == torch.uint8 else float((pv - ref).abs().max()) <= 1e-6
    assert pv.shape != before["pixel_values_videos"].shape or pv.dtype != before["pixel_values_videos"].dtype


def test_the_pil_backend_served_with_rescale_and_normalize_off_gives_its_float32_bytes(monkeypatch):
    """transformers' Pil backend returns the resized bytes as float32 values (its torchvision backend as uint8),
    as NumPy arrays without return_tensors: the adapter over it returns the same types and values, served."""
    pil = pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl").Qwen2VLImageProcessorPil
    ours, theirs = FusedHFImageProcessor(pil(max_pixels=200704)), pil(max_pixels=200704)
    _forbid_upstream_preprocess(monkeypatch, ours)
    for kwargs in ({"do_rescale": False, "do_normalize": False}, {}):
        got, expected = ours(images()[:3], **kwargs), theirs(images()[:3], **kwargs)
        for key in ("pixel_values", "image_grid_thw"):  # NumPy arrays without return_tensors, as the Pil backend's
            assert type(got[key]) is type(expected[key]) is np.ndarray and got[key].dtype == expected[key].dtype
        got, expected = (
            ours(images()[:3], return_tensors="pt", **kwargs),
            theirs(images()[:3], return_tensors="pt", **kwargs),
        )
        assert got["pixel_values"].dtype == expected["pixel_values"].dtype == torch.float32
        _assert_same(got, expected)


@requires_cuda
@pytest.mark.parametrize("uint8", [False, True], ids=["float32", "uint8"])
def test_cuda_calls_equal_the_same_calls_on_the_cpu(uint8):
    """The adapters with device="cuda" (what vLLM's --mm-processor-device passes): the same BatchFeature as the
    same call on the CPU, bit for bit (one kernel per backend, the same integer resize and FMA), left on the
    device, and served (not handed back to transformers)."""
    import copy

    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    from fused_input_norm.hf_adapter import FusedHFVideoProcessor

    flags = {"do_rescale": False, "do_normalize": False} if uint8 else {}
    image = FusedHFImageProcessor(upstream())
    on_cpu = image(images(), return_tensors="pt", **flags)
    on_gpu = image(images(), return_tensors="pt", device="cuda", **flags)
    assert not image._logged, image._logged
    assert on_gpu["pixel_values"].device.type == "cuda"
    assert torch.equal(on_gpu["pixel_values"].cpu(), on_cpu["pixel_values"])
    assert torch.equal(on_gpu["image_grid_thw"].cpu(), on_cpu["image_grid_thw"])

    video = FusedHFVideoProcessor(copy.deepcopy(Qwen2VLVideoProcessor(cap_pixels_per_frame=False)))
    kwargs = {"video_metadata": _metadata(), "do_sample_frames": False, **flags}
    on_cpu = video(videos=_clips(), **kwargs)
    on_gpu = video(videos=_clips(), device="cuda", **kwargs)
    assert not video._logged, video._logged
    assert on_gpu["pixel_values_videos"].device.type == "cuda"
    assert torch.equal(on_gpu["pixel_values_videos"].cpu(), on_cpu["pixel_values_videos"])
    assert torch.equal(on_gpu["video_grid_thw"].cpu(), on_cpu["video_grid_thw"])


@pytest.mark.parametrize("cap", [None, False], ids=["unset", "false"])
def test_video_cap_pixels_per_frame_unset_warns_on_upstreams_logger_as_transformers_does(caplog, cap):
    """transformers' video processors warn (once, on their module's logger) when cap_pixels_per_frame is unset:
    the adapter, which replaces their _preprocess, warns there too, and stays silent for an explicit False."""
    import copy

    from transformers.models.qwen2_vl import video_processing_qwen2_vl as module
    from transformers.utils import logging as hf_logging

    from fused_input_norm.hf_adapter import FusedHFVideoProcessor

    served = FusedHFVideoProcessor(copy.deepcopy(module.Qwen2VLVideoProcessor(cap_pixels_per_frame=cap)))
    logger = hf_logging.get_logger(module.__name__)
    logger.warning_once.cache_clear()
    with caplog.at_level(logging.WARNING, logger=module.__name__):
        served(videos=_clips(), video_metadata=_metadata(), do_sample_frames=False)
    assert not served._logged, served._logged
    warned = [r for r in caplog.records if r.name == module.__name__ and r.levelno == logging.WARNING]
    assert len(warned) == (1 if cap is None else 0), [r.getMessage() for r in warned]


# ----- standing in: the adapter's type is upstream's -----


def test_the_adapter_is_an_instance_of_upstreams_class_and_transformers_base_class():
    """vLLM, SGLang and transformers test `isinstance(processor, <transformers class>)` (SGLang passes device=
    only to a BaseImageProcessor): the adapter passes wherever its upstream passes, and is still an adapter."""
    from transformers import BaseImageProcessor

    theirs = upstream()
    ours = FusedHFImageProcessor(theirs)
    assert isinstance(ours, type(theirs)) and isinstance(ours, qwen.Qwen2VLImageProcessor)
    assert isinstance(ours, BaseImageProcessor) and isinstance(ours, FusedHFImageProcessor)
    assert type(ours) is type(FusedHFImageProcessor(upstream()))  # one stand-in class per upstream class
    assert (type(ours).__name__, type(ours).__module__) == ("Qwen2VLImageProcessor", qwen.__name__)
    siglip = pytest.importorskip("transformers.models.siglip").SiglipImageProcessor()
    other = FusedHFImageProcessor(siglip)
    assert isinstance(other, type(siglip)) and not isinstance(other, type(theirs))
    assert not isinstance(ours, type(siglip))


def test_lookups_on_the_adapters_type_find_upstreams_class_attributes():
    """`type(processor).valid_kwargs` (transformers' kwarg checks) and the other class attributes are
    upstream's, not the adapter's."""
    theirs = upstream()
    ours = FusedHFImageProcessor(theirs)
    for name in ("valid_kwargs", "model_input_names", "resample", "image_mean", "merge_size", "preprocess"):
        if name == "preprocess":  # the adapter's own method, on its type too
            assert type(ours).preprocess is FusedHFImageProcessor.preprocess
            continue
        if hasattr(type(theirs), name):
            assert getattr(type(ours), name) is getattr(type(theirs), name), name
    assert type(ours).valid_kwargs is qwen.Qwen2VLImageProcessor.valid_kwargs


def test_upstreams_class_attributes_never_hide_upstreams_instance_values():
    """The stand-in class inherits upstream's class attributes (defaults such as image_mean); reads and
    writes still reach upstream's instance, whose values differ from them here."""
    theirs = qwen.Qwen2VLImageProcessor(image_mean=[0.1, 0.2, 0.3], merge_size=1, do_normalize=False)
    ours = FusedHFImageProcessor(theirs)
    assert list(ours.image_mean) == [0.1, 0.2, 0.3] and ours.merge_size == 1 and ours.do_normalize is False
    assert list(type(ours).image_mean) != [0.1, 0.2, 0.3]  # the class default, hidden on the instance
    ours.merge_size = 2
    assert theirs.merge_size == 2 and "merge_size" not in vars(ours)
    assert ours.to_dict() == theirs.to_dict()  # upstream's method, bound to upstream


def test_a_copy_and_a_pickle_keep_the_stand_in_type_and_upstreams_values():
    import copy
    import pickle

    ours = FusedHFImageProcessor(qwen.Qwen2VLImageProcessor(merge_size=1, max_pixels=200704))
    assert ours.size["longest_edge"] == 200704
    for clone in (copy.deepcopy(ours), pickle.loads(pickle.dumps(ours)), copy.copy(ours)):
        assert type(clone) is type(ours) and isinstance(clone, qwen.Qwen2VLImageProcessor)
        assert (
            clone.merge_size == 1 and clone.upstream.size["longest_edge"] == 200704 and clone.reference == "torchvision"
        )
    assert copy.deepcopy(ours).upstream is not ours.upstream


def test_vllms_qwen3_vl_check_tells_the_video_adapter_from_an_image_processor():
    """vLLM's qwen3_vl.py (_get_vision_info) picks the video path by
    `isinstance(image_processor, Qwen3VLVideoProcessor)`: true for the video adapter, false for the image one."""
    import copy

    from transformers import BaseVideoProcessor

    from fused_input_norm.hf_adapter import FusedHFVideoProcessor

    videos = pytest.importorskip("transformers.models.qwen3_vl.video_processing_qwen3_vl").Qwen3VLVideoProcessor
    theirs = videos(cap_pixels_per_frame=False)
    video = FusedHFVideoProcessor(copy.deepcopy(theirs))
    image = FusedHFImageProcessor(upstream())
    assert isinstance(video, videos) and isinstance(video, BaseVideoProcessor)
    assert not isinstance(image, videos)
    assert type(video).valid_kwargs is videos.valid_kwargs
    got = video(videos=_clips(), video_metadata=_metadata(), do_sample_frames=False)
    expected = theirs(videos=_clips(), video_metadata=_metadata(), do_sample_frames=False)
    assert not video._logged, video._logged
    assert float((got["pixel_values_videos"] - expected["pixel_values_videos"]).abs().max()) <= 1e-6


def test_vllms_qwen3_vl_vision_info_reads_the_video_adapter_as_a_video_processor():
    """vLLM's own function, where installed (the vLLM venv): the same answer with the adapter as upstream."""
    qwen3_vl = pytest.importorskip("vllm.model_executor.models.qwen3_vl", reason="needs vllm")
    import inspect

    source = inspect.getsource(qwen3_vl)
    assert "isinstance(image_processor, Qwen3VLVideoProcessor)" in source
    from fused_input_norm.hf_adapter import FusedHFVideoProcessor

    videos = qwen3_vl.Qwen3VLVideoProcessor
    assert isinstance(FusedHFVideoProcessor(videos(cap_pixels_per_frame=False)), videos)


def test_importing_the_package_does_not_import_transformers():
    import subprocess
    import sys

    code = "import sys, fused_input_norm, fused_input_norm.hf_adapter; print('transformers' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )


# ----- built for every configuration its class accepts; each call decides -----

# What Gemma3Processor's call passes to its image processor (Gemma3ProcessorKwargs' defaults) when a request
# turns pan and scan on: the checkpoints' image processor configs leave these settings null.
GEMMA3_CALL = {
    "pan_and_scan_min_crop_size": 256,
    "pan_and_scan_max_num_crops": 4,
    "pan_and_scan_min_ratio_to_activate": 1.2,
}


def _gemma3_as_checkpoints_ship_it(**overrides):
    """Gemma 3's image processor as its checkpoints' preprocessor_config.json builds it (the pan-and-scan
    settings null), with vLLM's per-request `do_pan_and_scan=True` as a construction kwarg."""
    gemma3 = pytest.importorskip("transformers.models.gemma3").Gemma3ImageProcessor
    config = {
        "do_pan_and_scan": None,
        "pan_and_scan_min_crop_size": None,
        "pan_and_scan_max_num_crops": None,
        "pan_and_scan_min_ratio_to_activate": None,
        "size": {"height": 896, "width": 896},
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "resample": 2,
    }
    return gemma3(**{**config, **overrides})


def test_gemma3_with_null_pan_and_scan_settings_is_built_and_serves_the_calls_that_fill_them(monkeypatch):
    """vLLM builds Gemma 3's processor with do_pan_and_scan=True and the checkpoint's null settings; the
    adapter is built (it used to refuse, leaving transformers in place), and the call Gemma3Processor makes
    (the settings filled) is served, equal to transformers'."""
    theirs = _gemma3_as_checkpoints_ship_it(do_pan_and_scan=True)
    assert unsupported(theirs) is None
    ours = FusedHFImageProcessor(_gemma3_as_checkpoints_ship_it(do_pan_and_scan=True))
    pictures = images()[:3]  # 1080x1920 is elongated enough to be cut into crops
    expected = theirs(pictures, return_tensors="pt", **GEMMA3_CALL)
    _forbid_upstream_preprocess(monkeypatch, ours)
    got = ours(pictures, return_tensors="pt", **GEMMA3_CALL)
    assert int(expected["num_crops"].sum()) > 0
    assert torch.equal(got["num_crops"], expected["num_crops"])
    pv, ref = got["pixel_values"], expected["pixel_values"]
    assert pv.shape == ref.shape and float((pv - ref).abs().max()) <= 1e-6


def test_gemma3_a_call_without_the_settings_is_handed_back_with_transformers_answer(caplog):
    """The same processor called without the settings (only Gemma3Processor fills them): transformers' own
    answer (here its error), and the reason logged once."""
    theirs = _gemma3_as_checkpoints_ship_it(do_pan_and_scan=True)
    ours = FusedHFImageProcessor(_gemma3_as_checkpoints_ship_it(do_pan_and_scan=True), logging.getLogger("t_g3"))
    try:
        expected = theirs(images()[:3], return_tensors="pt")
    except Exception as e:  # whatever transformers raises, the adapter raises
        with caplog.at_level(logging.INFO, logger="t_g3"), pytest.raises(type(e)):
            ours(images()[:3], return_tensors="pt")
    else:
        with caplog.at_level(logging.INFO, logger="t_g3"):
            got = ours(images()[:3], return_tensors="pt")
        assert torch.equal(got["pixel_values"], expected["pixel_values"])
    assert "pan_and_scan" in caplog.text and "serves this call" in caplog.text


@pytest.mark.parametrize("family", ["gemma3.Gemma3ImageProcessor", "llama4.Llama4ImageProcessor"])
def test_do_resize_none_is_built_and_each_call_answers_as_transformers(family):
    """transformers builds these with do_resize=None (its tests do); so does the adapter. Its calls answer as
    transformers' (Llama 4 refuses an unset do_resize at call time: the same error)."""
    module, name = family.split(".")
    cls = getattr(pytest.importorskip(f"transformers.models.{module}"), name)
    theirs, ours = cls(do_resize=None), FusedHFImageProcessor(cls(do_resize=None))
    assert isinstance(ours, cls) and ours.do_resize is None
    pictures = [images()[0]] * 2  # one size: transformers stacks unresized images only when they agree
    try:
        expected = theirs(pictures, return_tensors="pt")
    except Exception as e:
        with pytest.raises(type(e)):
            ours(pictures, return_tensors="pt")
        return
    got = ours(pictures, return_tensors="pt")
    assert set(got) == set(expected)
    pv, ref = got["pixel_values"], expected["pixel_values"]
    assert pv.shape == ref.shape and float((pv - ref).abs().max()) <= 1e-6


def test_llava_onevision_pinpoints_that_are_not_whole_tiles_are_built_and_answer_as_transformers():
    """LLaVA-OneVision with image_grid_pinpoints that are not whole tiles of size (transformers' own tests
    use such): built, and its calls give transformers' answer."""
    cls = pytest.importorskip("transformers.models.llava_onevision").LlavaOnevisionImageProcessor
    config = {"image_grid_pinpoints": [[200, 300], [300, 500]], "size": {"height": 384, "width": 384}}
    theirs, ours = cls(**config), FusedHFImageProcessor(cls(**config))
    assert isinstance(ours, cls)
    got, expected = ours(images()[:2], return_tensors="pt"), theirs(images()[:2], return_tensors="pt")
    assert set(got) == set(expected)
    for key in expected:
        assert torch.equal(got[key], expected[key]), key


def test_video_adapter_is_built_for_a_configuration_it_does_not_serve_and_hands_its_calls_back(caplog):
    from fused_input_norm.hf_adapter import FusedHFVideoProcessor

    cls = pytest.importorskip("transformers.models.qwen2_vl.video_processing_qwen2_vl").Qwen2VLVideoProcessor
    theirs = cls(cap_pixels_per_frame=False, resample=0)  # nearest: not reproduced
    ours = FusedHFVideoProcessor(cls(cap_pixels_per_frame=False, resample=0), logging.getLogger("t_video"))
    with caplog.at_level(logging.INFO, logger="t_video"):
        got = ours(videos=_clips(), video_metadata=_metadata(), do_sample_frames=False)
    expected = theirs(videos=_clips(), video_metadata=_metadata(), do_sample_frames=False)
    assert torch.equal(got["pixel_values_videos"], expected["pixel_values_videos"])
    assert "serves this call" in caplog.text


# ----- return_tensors unset: transformers' containers -----


def _assert_same_containers(got, expected, where="output"):
    """The same Python containers, element types and values: lists where transformers lists, torch.Size or
    tuples as it gives them, tensors and arrays of the same dtype and shape, values equal (float within 1e-6)."""
    assert type(got) is type(expected), (
        f"{where}: {type(got).__name__} where transformers gives {type(expected).__name__}"
    )
    if isinstance(expected, list | tuple):
        assert len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            _assert_same_containers(g, e, f"{where}[{i}]")
    elif isinstance(expected, torch.Tensor | np.ndarray):
        assert got.dtype == expected.dtype and tuple(got.shape) == tuple(expected.shape), where
        g, e = torch.as_tensor(got), torch.as_tensor(expected)
        if g.is_floating_point():
            assert float((g.float() - e.float()).abs().max()) <= 1e-6, where
        else:
            assert torch.equal(g, e), where
    else:
        assert got == expected, where


UNSTACKED_FAMILIES = [
    ("qwen2_vl.Qwen2VLImageProcessor", {}),
    ("clip.CLIPImageProcessor", {}),
    ("siglip.SiglipImageProcessor", {}),
    ("glm4v.Glm4vImageProcessor", {}),
    ("gemma3.Gemma3ImageProcessor", GEMMA3_CALL | {"do_pan_and_scan": True}),
    ("got_ocr2.GotOcr2ImageProcessor", {"crop_to_patches": True}),
    ("llava_onevision.LlavaOnevisionImageProcessor", {}),
    ("llava_next.LlavaNextImageProcessor", {}),
    ("idefics3.Idefics3ImageProcessor", {}),
    ("smolvlm.SmolVLMImageProcessor", {}),
    ("llama4.Llama4ImageProcessor", {}),
    ("pixtral.PixtralImageProcessor", {}),
]


@pytest.mark.parametrize("raw", [False, True], ids=["float", "uint8"])
@pytest.mark.parametrize("backend", ["", "Pil"])
@pytest.mark.parametrize(("family", "kwargs"), UNSTACKED_FAMILIES, ids=[f.split(".")[0] for f, _ in UNSTACKED_FAMILIES])
def test_return_tensors_unset_gives_transformers_containers(monkeypatch, family, kwargs, backend, raw):
    """transformers' _preprocess returns lists where it built lists when the call leaves return_tensors unset
    (Gemma 3's num_crops, Llama 4's pixel_values per image, LLaVA-OneVision's image_sizes, ...): the adapter
    returns the same containers, served."""
    module, name = family.split(".")
    cls = getattr(pytest.importorskip(f"transformers.models.{module}"), name + backend, None)
    if cls is None:
        pytest.skip(f"transformers has no {name + backend}")
    if module in ("idefics3", "smolvlm") and backend == "" and not TORCH_LANCZOS:
        pytest.skip(f"{name} resizes with LANCZOS: {NO_TORCH_LANCZOS}")
    if raw:
        kwargs = kwargs | {"do_rescale": False, "do_normalize": False}
    rng = np.random.default_rng(11)
    pictures = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in [(480, 640), (300, 1200)]]
    expected = cls()(pictures, **kwargs)
    ours = FusedHFImageProcessor(cls())
    _forbid_upstream_preprocess(monkeypatch, ours)
    got = ours(pictures, **kwargs)
    assert set(got) == set(expected)
    for key in expected:
        _assert_same_containers(got[key], expected[key], key)
