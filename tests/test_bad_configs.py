"""Bad configs and arguments, named before anything is allocated or any kernel runs: a config that is not a
mapping, a string or a bool where a number belongs, patch and image sizes no output could be allocated for
(checks.MAX_OUTPUT_BYTES, the 2^24 side limit), and tensors without strided pixels (sparse, nested, meta),
for every reader (FusedInputNorm, FusedImageProcessor, FusedVideoProcessor) and the op wrappers."""

import json

import pytest
import torch

from fused_input_norm import FusedImageProcessor, FusedInputNorm, FusedVideoProcessor, affine, affine_out, ops
from fused_input_norm.checks import MAX_OUTPUT_BYTES

QWEN = {"image_processor_type": "Qwen2VLImageProcessor"}
QWEN_VIDEO = {"video_processor_type": "Qwen2VLVideoProcessor"}


def image_processor(config):
    return FusedImageProcessor.from_preprocessor_config(config, device="cpu")


def video_processor(config):
    return FusedVideoProcessor.from_preprocessor_config(config, device="cpu")


READERS = {
    "FusedInputNorm": (FusedInputNorm.from_preprocessor_config, QWEN),
    "FusedImageProcessor": (image_processor, QWEN),
    "FusedVideoProcessor": (video_processor, QWEN_VIDEO),
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("content", [[1, 2], None, 3, "a string"], ids=["list", "null", "number", "string"])
def test_a_config_file_that_is_not_a_json_object_is_named(tmp_path, reader, content):
    """Was: AttributeError: 'list' object has no attribute 'get'."""
    build, _ = READERS[reader]
    path = tmp_path / "preprocessor_config.json"
    path.write_text(json.dumps(content))
    with pytest.raises(TypeError, match=rf"{reader}.*preprocessor_config.json' must hold a JSON object .*, got"):
        build(path)
    with pytest.raises(TypeError, match=rf"{reader}.*preprocessor_config.json' must hold a JSON object"):
        build(tmp_path)  # the model directory holding it


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("config", [[("image_processor_type", "x")], None, 3.5], ids=["list", "None", "float"])
def test_a_config_object_that_is_not_a_mapping_or_a_path_is_named(reader, config):
    build, _ = READERS[reader]
    with pytest.raises(TypeError, match=rf"{reader}.*config must be a mapping .*, got {type(config).__name__}"):
        build(config)


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(
    "key, value, match",
    [
        ("rescale_factor", "abc", "rescale_factor must be a number .*got 'abc'"),
        ("rescale_factor", "0.5", "rescale_factor must be a number .*got '0.5'"),  # was accepted, as 0.5
        ("rescale_factor", True, "rescale_factor must be a number .*got True"),  # was accepted, as 1.0
        ("rescale_factor", [0.5], r"rescale_factor must be a number .*got \[0.5\]"),
        ("image_mean", "abc", "image_mean must be a number or a non-empty list of numbers, got 'abc'"),
        ("image_mean", [0.5, "0.5", 0.5], r"image_mean\[1\] must be a number .*got '0.5'"),
        ("image_mean", True, "image_mean must be a number or a non-empty list of numbers, got True"),
        ("image_std", [True, 0.5, 0.5], r"image_std\[0\] must be a number .*got True"),
        ("image_std", [], r"image_std must be a number or a non-empty list of numbers, got \[\]"),
        ("image_std", {"r": 0.5}, "image_std must be a number or a non-empty list of numbers"),
    ],
)
def test_a_string_or_a_bool_where_a_number_belongs_is_a_type_error(reader, key, value, match):
    build, base = READERS[reader]
    with pytest.raises(TypeError, match=rf"{reader}.*{match}"):
        build({**base, key: value})


@pytest.mark.parametrize("reader", ["FusedImageProcessor", "FusedVideoProcessor"])
@pytest.mark.parametrize(
    "key, value, match",
    [
        ("patch_size", "14", "patch_size must be an int >= 1, got '14'"),
        ("patch_size", True, "patch_size must be an int >= 1, got True"),
        ("merge_size", 2.0, "merge_size must be an int >= 1, got 2.0"),
        ("merge_size", 1e9, "merge_size must be an int >= 1, got 1000000000.0"),
        ("temporal_patch_size", False, "temporal_patch_size must be an int >= 1, got False"),
        ("patch_size", 10**9, r"patch_size \* merge_size must be below 16777216 .*got 1000000000 \* 2"),
        ("merge_size", 10**9, r"patch_size \* merge_size must be below 16777216 .*got \d+ \* 1000000000"),
        ("min_pixels", True, r"size\['shortest_edge'\] \(min_pixels\) must be an int >= 1, got True"),
        ("max_pixels", "1003520", r"size\['longest_edge'\] \(max_pixels\) must be an int >= 1, got '1003520'"),
        (
            "size",
            {"shortest_edge": 3136, "longest_edge": 1.5e6},
            r"size\['longest_edge'\] \(max_pixels\) must be an int >= 1, got 1500000.0",
        ),
    ],
)
def test_bad_sizes_are_named(reader, key, value, match):
    build, base = READERS[reader]
    with pytest.raises(ValueError, match=rf"{reader}: {match}"):
        build({**base, key: value})


@pytest.mark.parametrize(
    "config, match",
    [
        ({"size": {"shortest_edge": 1 << 24}}, r"size\['shortest_edge'\] must be below 16777216"),
        ({"size": {"height": 224, "width": 1 << 30}}, r"size\['width'\] must be below 16777216"),
        (
            {"do_center_crop": True, "do_resize": False, "crop_size": {"height": 1 << 24, "width": 2}},
            r"crop_size\['height'\] must be below 16777216",
        ),
    ],
)
def test_clip_sides_past_the_largest_image_side_are_named(config, match):
    with pytest.raises(ValueError, match=rf"FusedImageProcessor: {match}"):
        image_processor({"image_processor_type": "CLIPImageProcessor", **config})


def _allocations(monkeypatch):
    """Counts torch.empty calls of a processor call (the output's allocation)."""
    made = []
    real = torch.empty

    def counting(*args, **kwargs):
        made.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "empty", counting)
    return made


@pytest.mark.parametrize(
    "config, call, dtype",
    [
        ({"patch_size": 1000, "merge_size": 1000}, {}, "float32"),  # one image: [10^6, 6 * 10^6] rows
        ({"min_pixels": 10**13, "max_pixels": 10**14}, {}, "float32"),
        ({"temporal_patch_size": 10**9}, {}, "uint8"),
    ],
    ids=["patch-1000x1000", "min-pixels-1e13", "temporal-1e9"],
)
def test_an_output_no_call_could_allocate_is_refused_before_allocating(monkeypatch, config, call, dtype):
    processor = image_processor({**QWEN, **config})
    image = torch.zeros(3, 30, 40, dtype=torch.uint8)
    made = _allocations(monkeypatch)
    with pytest.raises(ValueError, match=r"FusedImageProcessor: pixel_values would be \[\d+, \d+\] torch\.\w+ \("):
        processor(image, visual_dtype=getattr(torch, dtype))
    assert not made


def test_a_video_output_no_call_could_allocate_is_refused_before_allocating(monkeypatch):
    processor = video_processor(QWEN_VIDEO)
    made = _allocations(monkeypatch)
    with pytest.raises(ValueError, match=rf"pixel_values_videos would be .*over the {MAX_OUTPUT_BYTES >> 30} GiB"):
        processor(torch.zeros(4, 3, 56, 56, dtype=torch.uint8), size={"shortest_edge": 10**13, "longest_edge": 10**14})
    assert not made


def test_an_output_just_under_the_limit_is_not_refused_by_it(monkeypatch):
    """The limit is on bytes: the same rows in uint8 are a quarter of float32's (both far under it here)."""
    processor = image_processor({**QWEN, "min_pixels": 2**20, "max_pixels": 2**21})
    out = processor(torch.zeros(3, 30, 40, dtype=torch.uint8), visual_dtype=torch.uint8)["pixel_values"]
    assert out.numel() * out.element_size() < MAX_OUTPUT_BYTES and out.shape[0] * 28 * 28 >= 2**20 // 4


def _image():
    return torch.randint(0, 256, (3, 30, 40), dtype=torch.uint8)


TENSORS = [
    ("sparse", lambda t: t.to_sparse(), TypeError, "must be a dense \\(strided\\) tensor, got layout torch.sparse_coo"),
    ("meta", lambda t: t.to("meta"), ValueError, "is a meta tensor: it has a shape but no pixels"),
]


@pytest.mark.parametrize("name, make, error, match", TENSORS, ids=[t[0] for t in TENSORS])
def test_image_tensors_without_strided_pixels_are_named(name, make, error, match):
    processor = image_processor(QWEN)
    with pytest.raises(error, match=rf"FusedImageProcessor: images {match}"):
        processor(make(_image()))
    with pytest.raises(error, match=rf"FusedImageProcessor: images\[1\] {match}"):
        processor([_image(), make(_image())])
    with pytest.raises(error, match=rf"FusedImageProcessor: images {match}"):
        processor(make(_image()[None].expand(2, -1, -1, -1).contiguous()))  # a batch


def test_a_nested_tensor_is_named():
    processor = image_processor(QWEN)
    with pytest.warns(UserWarning, match="nested tensors is in prototype"):
        nested = torch.nested.nested_tensor([_image(), _image()])
    with pytest.raises(
        TypeError, match="FusedImageProcessor: images must be a dense \\(strided\\) tensor, got a nested"
    ):
        processor(nested)


@pytest.mark.parametrize("name, make, error, match", TENSORS, ids=[t[0] for t in TENSORS])
def test_video_tensors_without_strided_pixels_are_named(name, make, error, match):
    processor = video_processor(QWEN_VIDEO)
    clip = torch.randint(0, 256, (4, 3, 56, 56), dtype=torch.uint8)
    with pytest.raises(error, match=rf"FusedVideoProcessor: videos {match}"):
        processor(make(clip))
    with pytest.raises(error, match=rf"FusedVideoProcessor: videos\[1\] {match}"):
        processor([clip, make(clip)])


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize(
    "argument, layout",
    [("input", "sparse_coo"), ("weight", "sparse_coo"), ("bias", "sparse_coo"), ("input", "sparse_csr")],
)
def test_the_ops_name_a_tensor_that_is_not_strided(argument, layout):
    """Was: NotImplementedError from the dispatcher (no kernel for the Sparse backends)."""
    args = {"input": _image().float()[0], "weight": torch.ones(30), "bias": torch.zeros(30)}
    args[argument] = args[argument].to_sparse() if layout == "sparse_coo" else args[argument].to_sparse_csr()
    match = rf"{argument} must be a dense \(strided\) tensor, got layout torch.{layout}"
    with pytest.raises(TypeError, match=rf"fused_input_norm.affine: {match}"):
        affine(args["input"], args["weight"], args["bias"], 0)
    with pytest.raises(TypeError, match=rf"fused_input_norm.affine_out: {match}"):
        affine_out(torch.empty(30, 40), args["input"], args["weight"], args["bias"], 0)


def test_resize_affine_out_names_a_sparse_plan():
    plan = ops.resample_plan(30, 20, "bicubic", "pil")
    image = _image()[None]
    with pytest.raises(TypeError, match=r"resize_affine_out: row_plan must be a dense \(strided\) tensor"):
        ops.resize_affine_out(
            torch.empty(1, 3, 20, 40), image, torch.ones(3), torch.zeros(3), plan.to_sparse(), None, (20, 40),
            (0, 0, 20, 40), "bicubic", True,
        )  # fmt: skip


def test_meta_tensors_still_run_the_ops_fake_kernel():
    """A meta call is shape inference (module construction under torch.device('meta') relies on it), not an
    error: the ops keep taking meta tensors; only the processors, which read pixels, refuse them."""
    out = affine(_image().to("meta"), torch.ones(3, device="meta"), torch.zeros(3, device="meta"), 0)
    assert out.device.type == "meta" and out.shape == (3, 30, 40) and out.dtype == torch.float32
