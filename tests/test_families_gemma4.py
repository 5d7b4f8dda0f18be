"""Gemma 4 (Gemma4ImageProcessor, both backends) and Gemma 4 Unified (Gemma4UnifiedImageProcessor, torchvision
only) against transformers 5's own processors: FusedHFImageProcessor(upstream) against upstream itself on real
photos of several sizes and aspect ratios (wide, tall, tiny, a thin strip whose short side rounds to 0, one
already at its budget size) and a batch of them all, float32 within 1e-6 and the resized bytes (do_rescale off)
equal, every key with transformers' container types (return_tensors "pt" and unset); other budgets per call and
in the config; without resize; gray and RGBA; FusedImageProcessor from the config as the class saves it; the
budget sizes against transformers' own function over many shapes; what either refuses, named. Strict: a call
handed back to transformers fails (family_checks.forbid_upstream).

Their video processors (Gemma4VideoProcessor, Gemma4UnifiedVideoProcessor: each frame resized, rescaled and
patchified as the image processor does an image, at the video budget, the clips' frames concatenated):
FusedHFVideoProcessor(upstream) against upstream on clips of real photos (odd and 1080p-ish sizes, clips of
several lengths, gray), per-call budgets, the bytes, rescale alone, return_tensors unset, frames sampled by
upstream; FusedVideoProcessor from the class's saved config. Strict as the images'.

The EQUALITY lines printed (pytest -s) are the equality table: family, backend, case, max abs diff."""

import math

import numpy as np
import pytest
import torch
from conftest import requires_cuda
from family_checks import FP32_ATOL, as_input, assert_same, forbid_upstream, photo

from fused_input_norm import FusedImageProcessor, FusedVideoProcessor
from fused_input_norm.families import gemma4
from fused_input_norm.hf_adapter import FusedHFImageProcessor, FusedHFVideoProcessor

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency, not installed")
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (real photos) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed")
gemma4_hf = pytest.importorskip("transformers.models.gemma4.image_processing_gemma4")

# (class, backend): Gemma 4's two spellings and Unified's one
CLASSES = {
    "gemma4-pil": (transformers.Gemma4ImageProcessorPil, "pil"),
    "gemma4": (transformers.Gemma4ImageProcessor, "torchvision"),
    "unified": (transformers.Gemma4UnifiedImageProcessor, "torchvision"),
}


def shapes_photos() -> dict[str, np.ndarray]:
    rocket, coffee, chelsea, astronaut = (photo(n) for n in ("rocket", "coffee", "chelsea", "astronaut"))
    return {
        "wide": rocket,  # 427x640
        "tall": np.ascontiguousarray(rocket.transpose(1, 0, 2)),  # 640x427
        "tiny": np.ascontiguousarray(chelsea[100:117, 200:229]),  # 17x29: scaled up
        "strip": np.ascontiguousarray(np.concatenate([coffee, coffee, coffee], axis=1)[:20]),  # 20x1800: h -> 48
        "budget": np.pad(astronaut, ((128, 128), (128, 128), (0, 0)), mode="reflect"),  # 768x768: its size, kept
    }


PHOTOS = shapes_photos()
CASES = [*PHOTOS, "batch"]


def case_images(case: str) -> list[np.ndarray]:
    return [*PHOTOS.values(), PHOTOS["wide"]] if case == "batch" else [PHOTOS[case]]


def check(monkeypatch, name: str, case: str, kwargs: dict, config: dict | None = None, label: str = ""):
    """The adapter over `name`'s class against the class itself, strict, return_tensors "pt"."""
    cls, backend = CLASSES[name]
    images = [as_input(backend, hwc) for hwc in case_images(case)]
    expected = cls(**(config or {}))(images, return_tensors="pt", **kwargs)
    ours = FusedHFImageProcessor(cls(**(config or {})))
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(images, return_tensors="pt", **kwargs), expected, f"{name} {case} {label or kwargs}")
    return expected


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", CLASSES)
def test_adapter_matches_transformers(monkeypatch, name, case, dtype):
    kwargs = {"do_rescale": False} if dtype == "uint8" else {}
    expected = check(monkeypatch, name, case, kwargs, label=dtype)
    if case == "budget":  # kept at its size (no resampling pass): 48x48 patches, 256 soft tokens
        assert expected["num_soft_tokens_per_image"].tolist() == [256]


@pytest.mark.parametrize(("case", "tokens"), [("batch", 70), ("wide", 1120)])
@pytest.mark.parametrize("name", CLASSES)
def test_other_budgets_per_call(monkeypatch, name, case, tokens):
    check(monkeypatch, name, case, {"max_soft_tokens": tokens})


@pytest.mark.parametrize("name", CLASSES)
def test_other_patch_sizes_in_the_config(monkeypatch, name):
    config = {"patch_size": 14, "pooling_kernel_size": 2, "max_soft_tokens": 140}
    check(monkeypatch, name, "batch", {}, config, label="patch 14, pooling 2")


@pytest.mark.parametrize("name", CLASSES)
def test_without_resize(monkeypatch, name):
    """do_resize off: an image whose sides are multiples of the (merged) patch is patchified as it is."""
    check(monkeypatch, name, "budget", {"do_resize": False})


@pytest.mark.parametrize("name", CLASSES)
def test_gray_and_rgba_are_converted_as_transformers_does(monkeypatch, name):
    cls, _ = CLASSES[name]
    rgb = PHOTOS["wide"]
    alpha = np.linspace(0, 255, rgb.shape[1], dtype=np.uint8)[None, :].repeat(rgb.shape[0], 0)
    images = [Image.fromarray(rgb).convert("L"), Image.fromarray(np.dstack([rgb, alpha]))]
    expected = cls()(images, return_tensors="pt")
    ours = FusedHFImageProcessor(cls())
    forbid_upstream(monkeypatch, ours)
    assert_same(ours(images, return_tensors="pt"), expected, f"{name} gray-rgba")


@pytest.mark.parametrize("name", CLASSES)
def test_return_tensors_unset_gives_transformers_containers(monkeypatch, name):
    """Unset: transformers stacks pixel_values and image_position_ids (tensors, or NumPy arrays on the Pil
    backend) and lists num_soft_tokens_per_image as ints: the adapter returns the same types and values."""
    cls, backend = CLASSES[name]
    images = [as_input(backend, hwc) for hwc in case_images("batch")]
    expected = cls()(images)
    ours = FusedHFImageProcessor(cls())
    forbid_upstream(monkeypatch, ours)
    got = ours(images)
    assert set(got) == set(expected)
    for key, want in expected.items():
        assert type(got[key]) is type(want), (key, type(got[key]), type(want))
        if isinstance(want, list):
            assert got[key] == want and all(type(v) is int for v in got[key]), key
            continue
        have, want = torch.as_tensor(got[key]), torch.as_tensor(want)
        assert have.dtype == want.dtype and have.shape == want.shape, key
        assert float((have.double() - want.double()).abs().max()) <= FP32_ATOL, key


@pytest.mark.parametrize("name", CLASSES)
def test_processor_from_the_saved_config(name):
    """FusedImageProcessor from the config as the class saves it (preprocessor_config.json)."""
    cls, backend = CLASSES[name]
    config = cls().to_dict()
    processor = FusedImageProcessor.from_preprocessor_config(config, device="cpu", reference=backend)
    assert processor.settings.kind == ("gemma4_unified" if name == "unified" else "gemma4")
    photos = case_images("batch")
    expected = cls()([as_input(backend, p) for p in photos], return_tensors="pt")
    got = processor([Image.fromarray(p) for p in photos] if backend == "pil" else photos)
    assert_same(got, expected, f"{name} from-config")


@requires_cuda
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
@pytest.mark.parametrize("name", ["gemma4", "unified"])
def test_cuda_calls_equal_the_same_calls_on_the_cpu(name, dtype):
    """device="cuda" (vLLM's --mm-processor-device): the same outputs as on the CPU, bit for bit, the pixels
    left on the device, served."""
    cls, backend = CLASSES[name]
    kwargs = {"do_rescale": False} if dtype == "uint8" else {}
    ours = FusedHFImageProcessor(cls())
    images = [as_input(backend, hwc) for hwc in case_images("batch")]
    on_cpu = ours(images, return_tensors="pt", **kwargs)
    on_gpu = ours(images, return_tensors="pt", device="cuda", **kwargs)
    assert not ours._logged, ours._logged
    assert on_gpu["pixel_values"].device.type == "cuda"
    assert set(on_gpu) == set(on_cpu)
    for key in on_cpu:
        assert torch.equal(on_gpu[key].cpu(), on_cpu[key]), key


def test_budget_sizes_are_transformers():
    """gemma4.budget_size against transformers' get_aspect_ratio_preserving_size, answers and refusals, over
    thousands of shapes (extreme ratios included) and every budget and patch geometry its checkpoints use."""
    rng = np.random.default_rng(0)
    shapes = [(int(h), int(w)) for h, w in rng.integers(1, 5000, size=(1500, 2))]
    shapes += [(1, 1), (1, 4000), (4000, 1), (3, 9000), (9000, 3), (16, 16), (480, 480), (1080, 1920), (3024, 4032)]
    compared = 0
    for tokens in gemma4.SOFT_TOKENS:
        for patch, pooling in ((16, 3), (14, 2)):
            max_patches = tokens * pooling**2
            for h, w in shapes:
                try:
                    want = gemma4_hf.get_aspect_ratio_preserving_size(h, w, patch, max_patches, pooling)
                except ValueError:
                    with pytest.raises(ValueError):
                        gemma4.budget_size(h, w, patch, max_patches, pooling)
                    continue
                assert gemma4.budget_size(h, w, patch, max_patches, pooling) == want, (h, w, tokens, patch)
                compared += 1
    assert compared > 10000, compared  # (its refusals cannot be reached with these budgets: none seen)


@pytest.mark.parametrize(
    ("config", "images", "match"),
    [
        ({"max_soft_tokens": 300}, [np.zeros((64, 64, 3), np.uint8)], "max_soft_tokens must be one of"),
        ({"patch_size": 0}, [np.zeros((64, 64, 3), np.uint8)], "patch_size must be an int >= 1"),
        ({"do_resize": False}, [np.zeros((50, 64, 3), np.uint8)], r"images is 50x64; without do_resize"),
        ({"do_resize": False}, [np.zeros((48 * 48, 48 * 48, 3), np.uint8)], "patches at most 2520"),
    ],
    ids=["budget", "patch", "unresized-sides", "unresized-too-many"],
)
def test_refusals_name_the_argument(config, images, match):
    with pytest.raises(ValueError, match=match):
        processor = FusedImageProcessor.from_preprocessor_config(
            {"image_processor_type": "Gemma4ImageProcessor", **config}, device="cpu", reference="torchvision"
        )
        processor(images)


def test_channel_last_rows_are_the_patches():
    """The layout itself, independent of transformers: row r of image 0 is patch (r // gw, r % gw) of the
    resized image, its pixels [P, P, C] in raster order; padding rows are zero."""
    processor = FusedImageProcessor.from_preprocessor_config(
        {"image_processor_type": "Gemma4ImageProcessor", "do_resize": False, "do_rescale": False},
        device="cpu",
        reference="torchvision",
    )
    image = torch.from_numpy(PHOTOS["budget"][:96, :144]).permute(2, 0, 1).contiguous()  # 6 x 9 patches of 16
    out = processor([image], visual_dtype=torch.uint8)
    rows = out["pixel_values"][0]
    for r in (0, 1, 8, 9, 53):
        y, x = divmod(r, 9)
        want = image[:, 16 * y : 16 * y + 16, 16 * x : 16 * x + 16].permute(1, 2, 0).reshape(-1)
        assert torch.equal(rows[r], want), r
    assert not rows[54:].any() and math.prod(rows.shape) == 2520 * 768
    assert out["image_position_ids"][0, 10].tolist() == [1, 1] and out["image_position_ids"][0, 54].tolist() == [-1, -1]


# ----- videos -----
VIDEO_CLASSES = {"gemma4": transformers.Gemma4VideoProcessor, "unified": transformers.Gemma4UnifiedVideoProcessor}


def clip(frames: int, name: str, height: int, width: int) -> torch.Tensor:
    """uint8 [T, C, H, W]: crops of a real photo (tiled where it is smaller), shifted a few pixels a frame."""
    image = photo(name)
    image = np.tile(image, (-(-(height + 3 * frames) // image.shape[0]), -(-(width + 5 * frames) // image.shape[1]), 1))
    crops = [image[3 * t : 3 * t + height, 5 * t : 5 * t + width] for t in range(frames)]
    return torch.from_numpy(np.stack(crops)).permute(0, 3, 1, 2).contiguous()


# name -> (videos, per-call kwargs)
VIDEO_CALLS = {
    "odd-and-1080p": (lambda: [clip(3, "chelsea", 57, 29), clip(2, "rocket", 1080, 1920)], {}),
    "lengths-and-budget": (
        lambda: [clip(4, "coffee", 240, 200), clip(1, "astronaut", 336, 336)],
        {"max_soft_tokens": 280},
    ),
    "bytes": (lambda: [clip(2, "coffee", 101, 333)], {"do_rescale": False, "do_normalize": False}),
    "rescale-alone": (lambda: [clip(2, "coffee", 101, 333)], {"do_normalize": False}),
    "gray": (lambda: [clip(2, "rocket", 90, 160)[:, :1].contiguous()], {}),
}


def video_check(monkeypatch, name: str, videos: list, config: dict | None = None, **kwargs):
    cls = VIDEO_CLASSES[name]
    upstream = cls(**(config or {}))
    adapter = FusedHFVideoProcessor(cls(**(config or {})))
    assert isinstance(adapter, cls)
    forbid_upstream(monkeypatch, adapter)
    return adapter(videos, **kwargs), upstream(videos, **kwargs)


@pytest.mark.parametrize("case", VIDEO_CALLS)
@pytest.mark.parametrize("name", VIDEO_CLASSES)
def test_video_adapter_matches_transformers(monkeypatch, name, case):
    make, kwargs = VIDEO_CALLS[case]
    videos = make()
    got, want = video_check(monkeypatch, name, videos, do_sample_frames=False, return_tensors="pt", **kwargs)
    assert_same(dict(got), dict(want), f"{name} video {case}")
    assert want["num_frames_per_video"].tolist() == [len(v) for v in videos]


@pytest.mark.parametrize("name", VIDEO_CLASSES)
def test_video_return_tensors_unset_and_sampling_are_transformers(monkeypatch, name):
    """Unset: one concatenated tensor each, the counts lists of ints. Sampled (by num_frames, and by fps):
    upstream's own sample_frames picks the frames, the adapter does their work."""
    videos = [clip(3, "chelsea", 57, 29), clip(2, "coffee", 120, 90)]
    got, want = video_check(monkeypatch, name, videos, do_sample_frames=False)
    assert set(got) == set(want)
    for key in ("num_frames_per_video", "num_soft_tokens_per_video"):
        assert got[key] == want[key] and all(type(v) is int for v in got[key]), key
    tensors = ("pixel_values_videos", "video_position_ids")
    assert_same({k: got[k] for k in tensors}, {k: want[k] for k in tensors}, f"{name} unset")
    VideoMetadata = transformers.video_utils.VideoMetadata
    videos = [clip(8, "chelsea", 64, 48), clip(6, "coffee", 48, 80)]
    meta = [{"total_num_frames": 8, "fps": 4.0, "duration": 2.0}, {"total_num_frames": 6, "fps": 3.0, "duration": 2.0}]
    # (num_frames and fps exclude each other: sampling by fps needs a config without the class's num_frames)
    for config, kwargs in (({}, {"num_frames": 3}), ({"num_frames": None}, {"fps": 1})):
        fresh = lambda: [VideoMetadata(**m) for m in meta]  # noqa: E731 (upstream writes into them)
        got, want = video_check(
            monkeypatch, name, videos, config, video_metadata=fresh(), return_tensors="pt", **kwargs
        )
        assert_same(dict(got), dict(want), f"{name} sampled {kwargs}")
        assert want["pixel_values_videos"].shape[0] < 14


@pytest.mark.parametrize("name", VIDEO_CLASSES)
def test_video_processor_from_the_saved_config(name):
    """FusedVideoProcessor from the config as the class saves it (video_preprocessor_config.json): its own
    budget (70) and normalize; its sampling is upstream's, so a call asking for it is refused, named."""
    cls = VIDEO_CLASSES[name]
    processor = FusedVideoProcessor.from_preprocessor_config(cls().to_dict(), device="cpu")
    assert processor.settings.kind == ("gemma4_unified" if name == "unified" else "gemma4")
    videos = [clip(2, "rocket", 200, 300), clip(3, "coffee", 57, 29)]
    got = processor(videos, do_sample_frames=False)
    want = cls()(videos, do_sample_frames=False, return_tensors="pt")
    assert_same(got, dict(want), f"{name} video from-config")
    with pytest.raises(ValueError, match="frame sampling is not implemented"):
        processor(videos)
