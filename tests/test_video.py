"""FusedVideoProcessor against transformers 5's own video processors (Qwen2VLVideoProcessor for Qwen2-VL and
Qwen2.5-VL, Qwen3VLVideoProcessor), each built from the same config: clips made of real photos (a window
moving across a scikit-image photo, 5-9 frames of about 200x300), odd frame counts, frame sampling off and on
(with metadata), clips of different sizes in one call, the input forms, the uint8 output, per-call keys, and
every kind of bad input, named before any kernel runs.
"""

import json

import numpy as np
import pytest
import torch
from conftest import QWEN2_VL_CHECKPOINT, RecordOps, requires_cuda

from fused_input_norm import FusedVideoProcessor, output_pool

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
pytest.importorskip("torchvision", reason="transformers' video processors need torchvision")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")

FP32_ATOL = 1e-6  # fp32 rounding: the processor's (x * r - m) / s against the kernel's one FMA
CLASSES = {"qwen2_vl": "Qwen2VLVideoProcessor", "qwen3_vl": "Qwen3VLVideoProcessor"}
# Configs modelled on the checkpoints' video_preprocessor_config.json, plus the bare class defaults (which
# upscale these small clips: Qwen2VLVideoProcessor's min_pixels is 128 * 28 * 28).
CONFIGS = {
    "qwen2-vl": {
        **QWEN2_VL_CHECKPOINT,
        "video_processor_type": "Qwen2VLVideoProcessor",
        "processor_class": "Qwen2VLProcessor",
    },
    "qwen2.5-vl": {
        "min_pixels": 3136,
        "max_pixels": 12845056,
        "video_processor_type": "Qwen2VLVideoProcessor",
        "processor_class": "Qwen2_5_VLProcessor",
    },
    "qwen3-vl": {
        "size": {"longest_edge": 25165824, "shortest_edge": 4096},
        "patch_size": 16,
        "temporal_patch_size": 2,
        "merge_size": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "processor_class": "Qwen3VLProcessor",
        "video_processor_type": "Qwen3VLVideoProcessor",
    },
    "qwen2-vl-defaults": {"video_processor_type": "Qwen2VLVideoProcessor"},
    "qwen3-vl-defaults": {"video_processor_type": "Qwen3VLVideoProcessor"},
}
KIND = {name: "qwen3_vl" if "qwen3" in name else "qwen2_vl" for name in CONFIGS}


def clip(frames: int, height: int = 200, width: int = 300, name: str = "astronaut", step=(5, 7)) -> np.ndarray:
    """uint8 [T, H, W, 3]: a window moving across a real photo, `step` pixels per frame."""
    photo = np.asarray(getattr(skimage_data, name)())
    dy, dx = step
    assert (frames - 1) * dy + height <= photo.shape[0] and (frames - 1) * dx + width <= photo.shape[1]
    return np.stack([photo[t * dy : t * dy + height, t * dx : t * dx + width] for t in range(frames)])


def hf_processor(config: dict):
    """transformers' video processor built from the config, as AutoVideoProcessor builds it."""
    return getattr(transformers, CLASSES[KIND_OF(config)])(**config)


def KIND_OF(config: dict) -> str:
    return "qwen3_vl" if config["video_processor_type"].startswith("Qwen3") else "qwen2_vl"


def expected(config: dict, videos, **kwargs) -> dict:
    kwargs.setdefault("cap_pixels_per_frame", False)  # transformers warns when it is left unset
    return hf_processor(config)(videos, return_tensors="pt", **kwargs)


def assert_same(got: dict, want: dict, atol: float = FP32_ATOL) -> float:
    assert torch.equal(got["video_grid_thw"], want["video_grid_thw"]), (got["video_grid_thw"], want["video_grid_thw"])
    assert got["video_grid_thw"].dtype == torch.int64
    pv, ref = got["pixel_values_videos"], want["pixel_values_videos"]
    assert pv.shape == ref.shape and pv.dtype == ref.dtype, (pv.shape, ref.shape, pv.dtype, ref.dtype)
    diff = (pv.double() - ref.double()).abs().max().item()
    assert diff <= atol, f"max |diff| {diff}"
    return diff


@pytest.fixture(scope="module")
def processors():
    return {name: FusedVideoProcessor.from_preprocessor_config(c, device="cpu") for name, c in CONFIGS.items()}


# ----- parity: values within 1e-6, grids equal -----


@pytest.mark.parametrize("config", list(CONFIGS))
def test_odd_and_even_frame_counts_without_sampling(processors, config, record_property):
    """5, 8 and 9 frames: the last frame repeated to a multiple of temporal_patch_size when odd."""
    diffs = []
    for frames in (5, 8, 9):
        video = clip(frames)
        want = expected(CONFIGS[config], video, do_sample_frames=False)
        got = processors[config](video, do_sample_frames=False, cap_pixels_per_frame=False)
        diffs.append(assert_same(got, want))
    record_property("max_abs_diff", max(diffs))


@pytest.mark.parametrize("config", list(CONFIGS))
def test_clips_of_different_sizes_in_one_call(processors, config, record_property):
    """Three clips of three sizes and frame counts (a tensor [T, C, H, W], an array [T, H, W, C], a list of PIL
    frames) in one call: one output, the clips' rows in order."""
    videos = [
        torch.from_numpy(clip(7, 180, 260, "coffee", (3, 4))).permute(0, 3, 1, 2),
        clip(6, 230, 170, "chelsea", (2, 6)),
        [Image.fromarray(f) for f in clip(5, 210, 310, "astronaut", (9, 2))],
    ]
    # transformers takes every video of a call in the first one's form: it is given them all as [T, C, H, W].
    as_tensors = [videos[0], torch.from_numpy(videos[1]).permute(0, 3, 1, 2)]
    as_tensors.append(torch.from_numpy(np.stack([np.asarray(f) for f in videos[2]])).permute(0, 3, 1, 2))
    want = expected(CONFIGS[config], as_tensors, do_sample_frames=False)
    got = processors[config](videos, do_sample_frames=False, cap_pixels_per_frame=False)
    record_property("max_abs_diff", assert_same(got, want))
    assert got["video_grid_thw"].shape == (3, 3)


@pytest.mark.parametrize("config", ["qwen2-vl", "qwen3-vl", "qwen3-vl-defaults"])
def test_sampling_with_metadata(processors, config, record_property):
    """do_sample_frames on, with each clip's metadata (vLLM passes its decoder's): Qwen2-VL with fps given per
    call, Qwen3-VL with its config's fps 2; frame counts that sample unevenly."""
    videos = [clip(9), clip(7, 190, 250, "coffee", (4, 3))]
    metadata = [{"total_num_frames": 9, "fps": 3.0}, {"total_num_frames": 7, "fps": 2.5}]
    kwargs = {"do_sample_frames": True}
    if KIND[config] == "qwen2_vl":
        kwargs |= {"fps": 2.0, "min_frames": 2}
    want = expected(CONFIGS[config], videos, video_metadata=metadata, **kwargs)
    got = processors[config](videos, video_metadata=metadata, cap_pixels_per_frame=False, **kwargs)
    record_property("max_abs_diff", assert_same(got, want))


def test_sampling_config_keys_and_video_metadata_objects():
    """do_sample_frames and fps in the config itself, transformers' VideoMetadata objects, a 5-D batch."""
    from transformers.video_utils import VideoMetadata

    for config in (
        {"video_processor_type": "Qwen2VLVideoProcessor", "do_sample_frames": True, "fps": 1.0, "min_frames": 2},
        {"video_processor_type": "Qwen3VLVideoProcessor", "fps": 1.5, "size": CONFIGS["qwen3-vl"]["size"]},
    ):
        p = FusedVideoProcessor.from_preprocessor_config(config, device="cpu")
        videos = [clip(9), clip(8, name="coffee")]

        def metadata():  # transformers writes frames_indices into them: fresh ones per call
            return [VideoMetadata(total_num_frames=9, fps=4.0), VideoMetadata(total_num_frames=8, fps=3.0)]

        assert_same(p(videos, video_metadata=metadata()), expected(config, videos, video_metadata=metadata()))
        batch = np.stack([clip(8), clip(8, name="coffee")])
        assert_same(
            p(batch, video_metadata=metadata()[1:] * 2), expected(config, batch, video_metadata=metadata()[1:] * 2)
        )


@pytest.mark.parametrize(
    "config,kwargs",
    [
        ("qwen2-vl", {"do_sample_frames": True, "num_frames": 5}),  # rounded to 4 (temporal_patch_size)
        ("qwen2-vl", {"do_sample_frames": True, "num_frames": 3}),
        ("qwen3-vl", {"num_frames": 5, "fps": None}),  # a call's fps=None lets num_frames through
        ("qwen3-vl", {}),  # no metadata: transformers assumes 24 fps (and warns)
        ("qwen3-vl-defaults", {"num_frames": 9, "fps": None}),
    ],
)
def test_sampling_without_metadata(processors, config, kwargs):
    video = clip(9)
    assert_same(
        processors[config](video, cap_pixels_per_frame=False, **kwargs), expected(CONFIGS[config], video, **kwargs)
    )


@pytest.mark.parametrize("config", ["qwen2-vl", "qwen3-vl"])
def test_cap_pixels_per_frame(processors, config):
    """cap_pixels_per_frame=True: the per-frame budget shrinks with the frame count, as in qwen-vl-utils."""
    video = clip(8, 240, 320)
    kwargs = {"cap_pixels_per_frame": True, "max_video_tokens": 20, "do_sample_frames": False}
    want = expected(CONFIGS[config], video, **kwargs)
    assert_same(processors[config](video, **kwargs), want)
    uncapped = processors[config](video, do_sample_frames=False)
    assert not torch.equal(uncapped["video_grid_thw"], want["video_grid_thw"])  # the cap changed the size


@pytest.mark.parametrize("config", ["qwen2-vl", "qwen3-vl"])
def test_uint8_output_is_transformers_bytes(processors, config):
    """visual_dtype=torch.uint8: transformers' output with rescale and normalize off, byte for byte."""
    videos = [clip(5), clip(6, 150, 220, "coffee", (2, 2))]
    want = expected(CONFIGS[config], videos, do_sample_frames=False, do_rescale=False, do_normalize=False)
    got = processors[config](videos, torch.uint8, do_sample_frames=False)
    assert got["pixel_values_videos"].dtype == torch.uint8
    assert_same(got, want, atol=0)


@pytest.mark.parametrize("config", ["qwen2-vl", "qwen3-vl"])
def test_clip_rows_in_each_dtype_against_the_formula(processors, config):
    """The clip-mode patch rows (P 14 and 16; 9 frames: four groups of two different frames, then the lone
    last frame padded to a group as a still) in float32, bfloat16 and uint8, each against transformers' resized
    bytes (rescale and normalize off) put through (x * rescale_factor - mean) / std in float64: float32 within
    1e-6, bfloat16 the rounding of that value (either neighbour only within 2e-6 of a rounding boundary), uint8
    the bytes themselves."""
    video = clip(9, 230, 340, "coffee", (4, 6))
    hf = hf_processor(CONFIGS[config])
    want = expected(CONFIGS[config], video, do_sample_frames=False, do_rescale=False, do_normalize=False)
    t, p = hf.temporal_patch_size, hf.patch_size
    x = want["pixel_values_videos"].double()
    assert x.shape[0] > 4 * 28 and x.shape[0] % 5 == 0  # several bands a group, five groups
    channel = torch.arange(x.shape[1]) // (t * p * p)
    mean, std = torch.tensor(hf.image_mean, dtype=torch.float64), torch.tensor(hf.image_std, dtype=torch.float64)
    ref = (x * hf.rescale_factor - mean[channel]) / std[channel]
    blocks = x.view(x.shape[0], 3, t, p * p)
    assert not torch.equal(blocks[: 4 * x.shape[0] // 5, :, 0], blocks[: 4 * x.shape[0] // 5, :, 1])  # frames differ
    assert torch.equal(blocks[4 * x.shape[0] // 5 :, :, 0], blocks[4 * x.shape[0] // 5 :, :, 1])  # the padded frame

    got = {dtype: processors[config](video, dtype, do_sample_frames=False) for dtype in (torch.float32, torch.bfloat16)}
    for result in got.values():
        assert torch.equal(result["video_grid_thw"], want["video_grid_thw"])
    assert (got[torch.float32]["pixel_values_videos"].double() - ref).abs().max().item() <= FP32_ATOL
    bf16 = got[torch.bfloat16]["pixel_values_videos"]
    assert bf16.dtype == torch.bfloat16
    low, high = (ref - 2e-6).to(torch.bfloat16), (ref + 2e-6).to(torch.bfloat16)
    assert ((bf16 == low) | (bf16 == high)).all()
    # The window admits both neighbours for a few (channel, byte) pairs only (127 and 128 at mean = std = 0.5):
    # elsewhere the bfloat16 value is pinned.
    loose = (channel * 256 + x.long())[low != high].unique()
    assert loose.numel() <= 6, loose
    u8 = processors[config](video, torch.uint8, do_sample_frames=False)["pixel_values_videos"]
    assert u8.dtype == torch.uint8 and torch.equal(u8.double(), x)


def test_input_forms_and_gray(processors):
    """A 4-D array, a [T, C, H, W] tensor, a list of PIL frames, a list of [H, W, C] arrays, a 5-D batch, and a
    gray clip [T, H, W, 1] (repeated to RGB as transformers' convert_to_rgb does)."""
    config = CONFIGS["qwen2-vl"]
    p = processors["qwen2-vl"]
    video = clip(5)
    want = expected(config, video)
    for form in (
        video,
        torch.from_numpy(video).permute(0, 3, 1, 2),
        [Image.fromarray(f) for f in video],
        list(video),
    ):
        assert_same(p(form), want)
    batch = np.stack([video, clip(5, name="coffee")])
    assert_same(p(batch), expected(config, batch))
    gray = np.ascontiguousarray(video[..., :1])
    assert_same(p(gray), expected(config, gray))


def test_per_call_size_and_max_pixels(processors):
    video = clip(6)
    config = CONFIGS["qwen2-vl"]
    size = {"shortest_edge": 3136, "longest_edge": 28 * 28 * 30}
    assert_same(processors["qwen2-vl"](video, size=size), expected(config, video, size=size))
    assert_same(
        processors["qwen2-vl"](video, max_pixels=28 * 28 * 20),
        expected(config, video, size={"shortest_edge": 3136, "longest_edge": 28 * 28 * 20}),
    )


def test_from_a_model_directory(tmp_path):
    """A directory with video_preprocessor_config.json (and the image one beside it), a JSON file, and
    processor_config.json nesting "video_processor" (transformers 5's layout)."""
    video = clip(5)
    config = CONFIGS["qwen3-vl"]
    want = expected(config, video, do_sample_frames=False)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"image_processor_type": "Qwen2VLImageProcessor"}))
    (tmp_path / "video_preprocessor_config.json").write_text(json.dumps(config))
    for source in (tmp_path, tmp_path / "video_preprocessor_config.json"):
        p = FusedVideoProcessor.from_preprocessor_config(source, device="cpu")
        assert p.settings.kind == "qwen3_vl" and p.settings.patch_size == 16
        assert_same(p(video, do_sample_frames=False), want)
    nested = tmp_path / "nested"
    nested.mkdir()
    (nested / "processor_config.json").write_text(json.dumps({"video_processor": config, "image_processor": {}}))
    assert_same(FusedVideoProcessor.from_preprocessor_config(nested, device="cpu")(video, do_sample_frames=False), want)


def test_defaults_are_the_classes(processors):
    for name in ("qwen2-vl-defaults", "qwen3-vl-defaults"):
        s, hf = processors[name].settings, hf_processor(CONFIGS[name])
        assert s.size == {"shortest_edge": hf.size.shortest_edge, "longest_edge": hf.size.longest_edge}
        assert (s.patch_size, s.temporal_patch_size, s.merge_size) == (
            hf.patch_size,
            hf.temporal_patch_size,
            hf.merge_size,
        )
        assert (s.do_sample_frames, s.fps, s.num_frames) == (hf.do_sample_frames, hf.fps, hf.num_frames)
        assert (s.min_frames, s.max_frames, s.max_video_tokens) == (hf.min_frames, hf.max_frames, hf.max_video_tokens)
        n = s.normalization
        assert list(n.image_mean) == list(hf.image_mean) and list(n.image_std) == list(hf.image_std)


def test_one_output_allocation_and_two_resizes_per_odd_clip(processors, monkeypatch):
    """A 9-frame clip: the four whole temporal groups in one clip-mode resize, the lone last frame in one
    more; one output allocated for the call."""
    monkeypatch.setattr(output_pool, "pool", output_pool.OutputPool(0))  # every output a torch.empty, counted below
    p = processors["qwen2-vl"]
    videos = [clip(9), clip(8, name="coffee")]
    p(videos)
    with RecordOps() as recorded:
        p(videos)
    names = [str(op) for op in recorded.ops()]
    assert names.count("fused_input_norm.resize_affine_out.default") == 3, names
    assert sum(name.startswith("aten.empty") for name in names) == 1, names


# ----- bad input: named, before any kernel -----

BAD = [
    ("empty-clip", lambda: np.zeros((0, 200, 300, 3), np.uint8), ValueError, r"videos is an empty clip"),
    ("empty-frame-list", lambda: [clip(5), []], ValueError, r"videos\[1\] is an empty clip"),
    ("2-channels", lambda: [clip(5), clip(5)[..., :2]], ValueError, r"videos\[1\] of shape \(5, 200, 300, 2\)"),
    (
        "5-channels",
        lambda: np.concatenate([clip(5), clip(5)[..., :2]], axis=-1),
        ValueError,
        r"videos of shape \(5, 200, 300, 5\) has no channel axis of 1 \(gray\) or 3",
    ),
    ("float-frames", lambda: [clip(5), clip(5).astype(np.float32)], TypeError, r"videos\[1\] must be uint8 frames"),
    (
        "float-tensor",
        lambda: torch.from_numpy(clip(5)).float(),
        TypeError,
        r"videos must be uint8 frames, got a tensor of torch.float32",
    ),
    (
        "frames-of-different-sizes",
        lambda: [clip(5), [Image.fromarray(f) for f in clip(3)] + [Image.fromarray(clip(1, 100, 100)[0])]],
        ValueError,
        r"videos\[1\]: frame 3 has shape \(100, 100, 3\), frame 0 \(200, 300, 3\)",
    ),
    ("not-a-video", lambda: 3.5, TypeError, r"videos is a float"),
    ("no-such-file", lambda: "no/such/clip.mp4", FileNotFoundError, r"videos: no video file at 'no/such/clip.mp4'"),
    ("not-a-video-in-list", lambda: [clip(5), {"frames": 3}], TypeError, r"videos\[1\] is a dict"),
    (
        "rgba-frames",
        lambda: [Image.fromarray(f).convert("RGBA") for f in clip(2)],
        ValueError,
        r"videos frame 0 is a PIL image in mode 'RGBA'",
    ),
]


@pytest.mark.parametrize("make,error,match", [pytest.param(*c[1:], id=c[0]) for c in BAD])
def test_bad_input_is_named_before_any_kernel(processors, make, error, match):
    videos = make()
    with RecordOps() as recorded, pytest.raises(error, match=r"^FusedVideoProcessor: " + match):
        processors["qwen2-vl"](videos)
    ran = [str(op) for op in recorded.ops()]
    assert not any(name.startswith("fused_input_norm") for name in ran), ran
    assert not any(name.startswith("aten.empty") for name in ran), ran


def test_refusals_that_transformers_also_makes(processors):
    """What transformers refuses is refused here too, named: Qwen3-VL's one-frame clip, a metadata list of the
    wrong length, num_frames with the config's fps, sampling more frames than there are."""
    with pytest.raises(ValueError, match=r"videos of 1 frames of 200x300: t:1 must be larger than temporal_factor:2"):
        processors["qwen3-vl"](clip(1), do_sample_frames=False)
    with pytest.raises(ValueError):
        expected(CONFIGS["qwen3-vl"], clip(1), do_sample_frames=False)
    with pytest.raises(ValueError, match=r"2 videos but 1 video_metadata entries"):
        processors["qwen2-vl"]([clip(5), clip(5)], video_metadata=[{"total_num_frames": 5, "fps": 2.0}])
    with pytest.raises(ValueError, match=r"mutually exclusive"):
        processors["qwen3-vl"](clip(9), num_frames=4)
    with pytest.raises(ValueError, match=r"mutually exclusive"):
        expected(CONFIGS["qwen3-vl"], clip(9), num_frames=4)
    with pytest.raises(ValueError, match=r"exceeds total_num_frames=5"):
        processors["qwen2-vl"](clip(5), do_sample_frames=True, num_frames=8)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) crop_sizes"):
        processors["qwen2-vl"](clip(5), crop_sizes=3)
    with pytest.raises(ValueError, match=r"unsupported video processor 'LlavaNextVideoProcessor'"):
        FusedVideoProcessor.from_preprocessor_config({"video_processor_type": "LlavaNextVideoProcessor"})


# ----- how a clip's frames reach the kernel: strided views of the clip, a copy only where none exists -----


@pytest.mark.parametrize("temporal", [1, 2, 3])
def test_temporal_pieces_are_the_padded_frames_in_order(temporal):
    """The pieces, concatenated (a still-image piece repeated T times), are frames[indices] padded with the last
    frame to whole groups, as transformers pads; for T <= 2 every piece is a view of the clip (no copy)."""
    from fused_input_norm.video import temporal_pieces

    frames = torch.arange(20, dtype=torch.uint8).view(20, 1, 1, 1).expand(20, 3, 2, 2)
    rng = np.random.default_rng(temporal)
    cases = [list(range(20)), list(range(0, 20, 3)), np.linspace(0, 19, 7).round().astype(int).tolist(), [4, 4, 4, 9]]
    cases += [sorted(rng.choice(20, size=int(rng.integers(1, 20)), replace=False).tolist()) for _ in range(30)]
    for indices in cases:
        pad = -len(indices) % temporal
        want = frames[indices + [indices[-1]] * pad]
        got, groups = [], 0
        for piece, n, as_clip in temporal_pieces(frames, indices, temporal):
            got.append(piece if as_clip else piece.expand(temporal, -1, -1, -1))
            assert len(got[-1]) == n * temporal
            groups += n
            if temporal <= 2:
                assert piece.untyped_storage().data_ptr() == frames.untyped_storage().data_ptr(), indices
        assert torch.equal(torch.cat(got), want), (indices, temporal)
        assert groups == (len(indices) + pad) // temporal


@pytest.mark.parametrize("frames", [4, 5, 7])
def test_temporal_patch_size_3(frames):
    """temporal_patch_size 3: padded groups of several real frames (gathered), against transformers."""
    config = {"video_processor_type": "Qwen2VLVideoProcessor", "temporal_patch_size": 3, "min_pixels": 3136}
    video = clip(frames)
    got = FusedVideoProcessor.from_preprocessor_config(config, device="cpu")(video)
    assert_same(got, expected(config, video))


def test_sampled_clip_is_never_copied(processors):
    """Qwen3-VL's fps sampling (np.linspace: uneven steps) reaches the kernel as views of the clip: no gather."""
    video = clip(9)
    metadata = {"total_num_frames": 9, "fps": 3.0}
    p = processors["qwen3-vl"]
    p(video, video_metadata=metadata)
    with RecordOps() as recorded:
        got = p(video, video_metadata=metadata)
    names = [str(op) for op in recorded.ops()]
    assert not any("index" in n or "cat" in n or "stack" in n for n in names), names
    assert_same(got, expected(CONFIGS["qwen3-vl"], video, video_metadata=metadata))


# ----- on CUDA: the same call's result as on the CPU (whose parity with transformers is checked above) -----


@requires_cuda
@pytest.mark.parametrize("reference", ["torchvision", "pil"])
@pytest.mark.parametrize("config", ["qwen2-vl", "qwen3-vl-defaults"])
def test_cuda_equals_cpu(config, reference):
    """Odd clips (clip mode and the lone last frame), a gray clip, sampling with metadata, temporal_patch_size 3
    (gathered groups); float32 within 1e-6, bfloat16 and uint8 equal; the grid on the CPU."""
    videos = [clip(9), clip(6, 230, 170, "chelsea", (2, 6)), np.ascontiguousarray(clip(7, 180, 260, "coffee")[..., :1])]
    metadata = [{"total_num_frames": n, "fps": fps} for n, fps in ((9, 3.0), (6, 2.0), (7, 2.5))]
    configs = [CONFIGS[config], {**CONFIGS[config], "temporal_patch_size": 3}]
    for cfg in configs:
        cpu = FusedVideoProcessor.from_preprocessor_config(cfg, device="cpu", reference=reference)
        gpu = FusedVideoProcessor.from_preprocessor_config(cfg, device="cuda", reference=reference)
        for kwargs in ({"do_sample_frames": False}, {"do_sample_frames": True, "video_metadata": metadata, "fps": 2.0}):
            for dtype in (torch.float32, torch.bfloat16, torch.uint8):
                want, got = cpu(videos, dtype, **kwargs), gpu(videos, dtype, **kwargs)
                assert got["pixel_values_videos"].device.type == "cuda"
                assert got["video_grid_thw"].device.type == "cpu"
                got = {k: v.cpu() for k, v in got.items()}
                assert_same(got, want, atol=FP32_ATOL if dtype == torch.float32 else 0)


@requires_cuda
def test_cuda_clip_on_the_device_is_not_copied_back():
    """A clip already on the GPU is processed there: no device-to-host copy, no sync once planned."""
    p = FusedVideoProcessor.from_preprocessor_config(CONFIGS["qwen2-vl"], device="cuda")
    video = torch.from_numpy(clip(9)).cuda()
    want = p(video.cpu())
    p(video)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        got = p(video)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert_same({k: v.cpu() for k, v in got.items()}, {k: v.cpu() for k, v in want.items()}, atol=0)
