"""vLLM's own InternVL image (and video) processor, its H2OVL and Llama-Nemotron-Nano-VL subclasses and
NanoNemotronVL's tiles, served by FusedImageProcessor.

The remote-code InternVL checkpoints (`InternVLChatModel`: InternVL2.5 / 3 / 3.5; also the models whose vLLM
processing builds the same InternVLChatImageProcessor: Skywork-R1V, Eagle2.5-VL, Qianfan-OCR, NVLM-D) are not
preprocessed by transformers but by vllm/transformers_utils/processors/internvl.py: Pillow's default-filter
(bicubic) resize to the tile grid, 448 crops and a thumbnail, then torchvision's ToTensor + Normalize, image by
image (a video's frames: one tile each). `serve` replaces InternVLChatImageProcessor's and
InternVLChatVideoProcessor's `__call__` with ones that run the families.internvl_chat plan (the grid resize
written as tiles by one kernel call, a job per thumbnail) through FusedImageProcessor, reference "pil" (the
installed Pillow's resize), float32: the same pixel_values_flat and image_num_patches (pixel_values_flat_video
and video_num_patches). Two subclasses inherit that `__call__` and preprocess in their own module; they are
served by their own family: H2OVLImageProcessor (`H2OVLChatModel`: MSAC's second grid, families.h2ovl) and
LlamaNemotronNanoVLImageProcessor (`Llama_Nemotron_Nano_VL`: its own grid score, no Normalize,
families.nemotron_vl). NanoNemotronVLProcessor (`NemotronH_Nano_VL_V2` and the NemotronH Omni architectures) is
no subclass: it cuts InternVL's grid of 512 tiles with torch's antialiased bicubic, and vLLM builds it through
InputProcessingContext.init_processor, which `serve` wraps so that the first build wraps the class's
_images_to_pixel_values_lst (reference "torchvision", uint8: vLLM's device-normalize path; its float path, a
float32 resize, stays vLLM's) and NanoNemotronVLProcessor._videos_to_pixel_values_lst (each clip's frames resized
to one size, the same path; uint8 only, as its images).

vLLM's code is only served as this module knows it: the sources of the functions it reproduces must be those
of vllm 0.34.0 (their SHA-256 below); where they moved, `serve` changes nothing for that class and says why. A
call it does not reproduce (an image that is not an RGB or gray PIL image, a video that is not a uint8 array,
another subclass of the processor with preprocessing of its own, e.g. Nemotron-VL's embedding model's) runs
vLLM's own code, and the first call of each kind logs why.

vllm is imported only inside `serve`.
"""

import dataclasses
import functools
import hashlib
import importlib
import inspect
import logging
import threading

import torch

from .processor import FusedImageProcessor

MODULE = "vllm.transformers_utils.processors.internvl"
CLASS = "InternVLChatImageProcessor"
VIDEO_CLASS = "InternVLChatVideoProcessor"
# What this reproduces: these functions of MODULE (and the classes' methods), as vllm 0.34.0 writes them.
IMAGES = {
    "build_transform": "c1d7f0208d17afd6b019db5f2405599dbcadecf10c8f106cba3737e95b14926d",
    "find_closest_aspect_ratio": "977332f6419322fb80645634336b71152fd2acf6706baa4999fe9ddf719c953b",
    "resolve_internvl_min_max_num": "42b351b270f3ba5ff70c511c97ebf82f0e3e8caefa4db2a60fcc040fac237219",
    "get_internvl_target_ratios": "2b81aebfc3b7c57a069b30a4d8325b7f5c27a682bfcd343cb0c9970d61045d2f",
    "calculate_internvl_targets": "b81a1baeb80d7db216ed4ac2aee1a3682af152caed1dddbc7db446eaba3acff2",
    "dynamic_preprocess_internvl": "b7561d2416a8cd7bc98fdd20a4832ea85d79a9bf4669ee99de5ab1fb56845ad6",
    "image_to_pixel_values_internvl": "7e5a5d0f784544b2a249bd1647868b9d81f297045ae447a1c7f391a569209c1e",
    f"{CLASS}._images_to_pixel_values_lst": "c58a9f8ece855c1088d77b4f27f73aa686d6339b7d21479bd98dfd5868e8969e",
    f"{CLASS}.__call__": "e28d749febe3cb9aa37c1fabfbe7cf967d685da9a79b9446e9c5890805b7b944",
}
# Videos: each frame through the images' path with one tile (no thumbnail), then these.
VIDEOS = {
    **IMAGES,
    "video_to_pixel_values_internvl": "fef61cd82e77e643dd73f53bd1be533e34b3b30b901334175eadff17906a8e24",
    f"{VIDEO_CLASS}._videos_to_pixel_values_lst": "6add2135226c32836514de1dd8afe0256f03daf54f947ec356d72e4b3704f184",
    f"{VIDEO_CLASS}.__call__": "3d987924dd76b038c69ad6affd6a6a08fa15a4c398e30d3d0d8524d402b4152b",
}
H2OVL_CLASS = "H2OVLImageProcessor"
# H2OVL's own functions (module vllm.transformers_utils.processors.h2ovl); it builds InternVL's build_transform,
# find_closest_aspect_ratio and get_internvl_target_ratios, which IMAGES checks.
H2OVL = {
    "resolve_h2ovl_min_max_num": "42f62405413cacc48ae65cefe750b87e7de618abe1c3461aebcad6750d7adb5d",
    "get_h2ovl_target_ratios": "09f689955c9ff68e7faaba931fbfb49be0cdb695b4fc50d80d4f7a8ea338b4a6",
    "calculate_h2ovl_targets": "0c0d7d2c5360549facddef664628a9ad9c148964791242e72e7bc3005a7fa493",
    "dynamic_preprocess_h2ovl": "622391e8fd735aee132dc19f0d44f9347e5d7dd9474dbbd9bd512a8a81182569",
    "_preprocess_image": "7e75c8181b6746d6d412e60505fb1dcdb515d5635f1fbce24e5ebece79894e02",
    "image_to_pixel_values_h2ovl": "846861fb371b5632fa94106063dc47e52a62642623f978f375bcaacee3538730",
    f"{H2OVL_CLASS}.__init__": "9a55418443fddb7c374810c9dbc9fb07161c2f0cd75c65ab92bc974b8a5cdde6",
    f"{H2OVL_CLASS}.resolve_min_max_num": "578062a18e0c09f8c018f7acc107f06054b04e400677da013373617370579555",
    f"{H2OVL_CLASS}._images_to_pixel_values_lst": "f688bbc5767de174da7b908bfcbf00cf94909d3eee0b8b73844f66173244ce12",
}
NEMOTRON_VL_CLASS = "LlamaNemotronNanoVLImageProcessor"
# Llama-Nemotron-Nano-VL's (module vllm.transformers_utils.processors.nemotron_vl): its own transform and grid.
NEMOTRON_VL = {
    "build_transform": "6cf5ea7a427ef0049c1bd9b0510e7dfacb53a2ee4dfe4d884d95797346240ef1",
    "find_closest_aspect_ratio": "2c782119e3e43bc6e2091314fb15f9f1645cb855e500ab21c392908a459cd11a",
    "calculate_nemotron_vl_targets": "c8d76e85fd15071168dd1d261b95ca790ee122e81a3162b3f7d12db8365dc772",
    "dynamic_preprocess_nemotron_vl": "f8d1f6b8e0bd7a9a9d7b58a98adc2aa1e3f41265d496bf5c4ca20479feabd3ef",
    "get_nemotron_vl_target_ratios": "aa3d4b0c9305befbbbcbfbb48a9b97100d3bed7bdf9c4b699b58937225cf7ada",
    "image_to_pixel_values_nemotron_vl": "9dc079c65eab80817cf5bc4595f2b8bcae44c67c359832f78f1e133b3975e0cb",
    f"{NEMOTRON_VL_CLASS}.resolve_min_max_num": "62fc77342cc00877686020f2f1275815524b18d3d9b621a1197e126af53c265a",
    f"{NEMOTRON_VL_CLASS}._images_to_pixel_values_lst": "bb3d3d875d7800bb16d4fc81e0a76f51ffcce6ced83009f2025958124081436f",
}
EMBED_CLASS = "LlamaNemotronVLEmbedImageProcessor"
# Llama-Nemotron-VL's embedding model's (the same module): the same grid, SigLIP's Normalize, or (normalize_on_cpu
# off: vLLM's device-normalize path) PILToTensor's bytes.
NEMOTRON_VL_EMBED = {
    **{name: digest for name, digest in NEMOTRON_VL.items() if "." not in name and name != "build_transform"},
    "build_siglip_transform": "7946ca9c5f4ef1805a4d9dc919e830742411ea8b3f939d34a0feee916652e208",
    f"{EMBED_CLASS}.__init__": "5cf45a24c365f1d7b9d221105407cac726eb35dad23b793a723a135936b4c8b6",
    f"{EMBED_CLASS}.resolve_min_max_num": NEMOTRON_VL[f"{NEMOTRON_VL_CLASS}.resolve_min_max_num"],  # InternVL's
    f"{EMBED_CLASS}._images_to_pixel_values_lst": "4e429bd01d37d13f78f9e7cf65820466d5022734a51bb9f85d979c61ff638068",
}
IMAGENET_MEAN = [0.485, 0.456, 0.406]  # vLLM's IMAGENET_MEAN / _STD (its internvl module's)
IMAGENET_STD = [0.229, 0.224, 0.225]


@dataclasses.dataclass(frozen=True)
class Served:
    """An image processor class of vLLM's this serves, and how."""

    module: str  # where vLLM defines it
    reproduced: dict  # the functions of `module` (and the class's methods) this reproduces: name -> SHA-256
    attributes: tuple[str, ...]  # the instance's settings its config takes besides the per-call tile bounds
    mean: list  # what its transform normalizes with (0 and 1: ToTensor's [0, 1] floats, no Normalize)
    std: list
    bytes_unless: str | None = None  # the instance's switch which, false, makes it return the resized uint8 bytes


SERVED = {
    CLASS: Served(MODULE, IMAGES, ("use_thumbnail",), IMAGENET_MEAN, IMAGENET_STD),
    H2OVL_CLASS: Served(
        "vllm.transformers_utils.processors.h2ovl", H2OVL, ("use_thumbnail", "use_msac"), IMAGENET_MEAN, IMAGENET_STD
    ),
    NEMOTRON_VL_CLASS: Served(
        "vllm.transformers_utils.processors.nemotron_vl", NEMOTRON_VL, ("use_thumbnail",), [0.0] * 3, [1.0] * 3
    ),
    EMBED_CLASS: Served(
        "vllm.transformers_utils.processors.nemotron_vl",
        NEMOTRON_VL_EMBED,
        ("use_thumbnail",),
        [0.5] * 3,
        [0.5] * 3,
        bytes_unless="normalize_on_cpu",
    ),
}
SERVING = "FusedImageProcessor (reference 'pil')"
# vLLM's NanoNemotronVLProcessor (NemotronH_Nano_VL_V2 and the NemotronH *Omni* architectures), which vLLM builds
# through InputProcessingContext.init_processor (no transformers processor, no cached_processor_from_config):
# served in its class the first time vLLM builds it (importing its module costs seconds, so not before).
CONTEXT_MODULE = "vllm.multimodal.processing.context"
NANO_MODULE = "vllm.transformers_utils.processors.nano_nemotron_vl"
NANO_CLASS = "NanoNemotronVLProcessor"
NANO_BASE = "BaseNanoNemotronVLProcessor"
NANO = {
    "_bicubic_resize_and_normalize": "05ef8de4327bd4dae8128957abc3aa8688b4c749aaecee953e18127ee4024ab8",
    "_pil_to_nhwc_tensor": "7befc4a2cbf45ecb55f0be7bf71ee95e191fbb852150725cc0f0ff1e8157ef94",
    "dynamic_preprocess": "942e85f3e9c443c0fa724573eb0e6d635b3bc3612fbf6cf1157681e193e57155",
    "get_internvl_target_ratios": "2b81aebfc3b7c57a069b30a4d8325b7f5c27a682bfcd343cb0c9970d61045d2f",
    "calculate_internvl_targets": "b81a1baeb80d7db216ed4ac2aee1a3682af152caed1dddbc7db446eaba3acff2",
    f"{NANO_BASE}.__init__": "79921fb5d57c1704b07be8790d5b7f9a6847f593d641d3870980f36c4373dbb7",
    f"{NANO_BASE}._images_to_pixel_values_lst": "5fd39ec7770544b93e2cc4efa2fc3f21dcbd86dd9a1c61ea8476cfd9f71cf96d",
    f"{NANO_BASE}._preprocess_image": "fdc0f50d1036394ecccaecfa1d0909b4a39ac65decc0112e4c57696ac52d8e17",
}
# Its videos: each clip's frames resized together to one size (its image size squared, or the size its
# video_target_num_patches gives, which vLLM reads from get_video_target_size_and_feature_size, called here too).
NANO_VIDEOS = {
    "_bicubic_resize_and_normalize": NANO["_bicubic_resize_and_normalize"],
    "video_to_pixel_values": "b4d3cfda66bb2e2b471d97909076100c7069abdb85d8515689267a47e8c4bc4c",
    "get_video_target_size_and_feature_size": "d62b7fbdfdcdae210ce2c7ceccc4fa14105c48eedb59ddc2be354edca733dfa5",
    "_compute_aspect_preserving_size": "0a52bb1b0188b619488eaa3411223540c18d965f4747bf29ba2c7f0dcad986d2",
    f"{NANO_CLASS}.__init__": "ca50aba5c526cddafb258d3aba0f85866d1951beede13bf35137092a2ac1a172",
    f"{NANO_CLASS}._videos_to_pixel_values_lst": "f512ccfb87177623a6bd32138516006c60de15caf00ec5f35fe8a8d8d5268e2e",
}
# The vLLM classes whose images (videos) this module serves: scripts/vllm_reach.py reads them.
IMAGE_CLASSES = (*SERVED, NANO_CLASS)
VIDEO_CLASSES = (VIDEO_CLASS, NANO_CLASS)
MAX_LOGGED_REASONS = 64
# vLLM resizes the image in its own mode, then converts it to RGB: for these modes that is the same as
# converting first (gray repeated to 3 channels), as FusedImageProcessor does.
SERVED_MODES = ("RGB", "L")


def digest(obj: object) -> str:
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()


def moved(module: object, reproduced: dict = IMAGES, release: str = "vllm 0.34.0") -> str | None:
    """Why `module`'s preprocessing (the functions `reproduced` names, as `release` writes them; InternVL's by
    default) is not the one this reproduces; None when it is."""
    for name, expected in reproduced.items():
        obj = module
        try:
            for part in name.split("."):
                obj = getattr(obj, part)
            found = digest(obj)
        except (AttributeError, OSError, TypeError) as e:
            return f"its {name} cannot be read ({e})"
        if found != expected:
            return f"its {name} is not {release}'s (the one this reproduces)"
    return None


def unwrapped_class(
    module_name: str, class_name: str, method: str, reproduced: dict, served: str, label: str | None = None
) -> tuple[object, type | None, str | None]:
    """The steps every vllm_* module takes before serving `class_name.method` in place: import vLLM's module,
    find the class, leave a method an earlier plugin load wrapped alone, and check the SHA-256 of what it
    reproduces (`moved`). (module, class, None) to go on; (module or None, None, the sentence to log) where it
    stops. `label`: how the sentence names vLLM's processing (its class by default)."""
    label = label or f"vLLM's {class_name}"
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        return None, None, f"{label} stays vLLM's: this vLLM has no {module_name} ({e})"
    cls = getattr(module, class_name, None)
    if cls is None:
        return module, None, f"{label} stays vLLM's: this vLLM has no {module_name}.{class_name}"
    if getattr(getattr(cls, method, None), "fused_input_norm_wrapped", None) is not None:  # plugins load again
        return module, None, served
    reason = moved(module, reproduced)
    if reason is not None:
        return module, None, f"vLLM's {class_name} serves: {reason}"
    return module, cls, None


def serve(log: logging.Logger) -> str:
    """Makes FusedImageProcessor serve vLLM's InternVLChatImageProcessor (and the subclasses SERVED names) and
    InternVLChatVideoProcessor; returns the sentence to log."""
    handed_back = HandedBack(log)
    images, said = {}, []
    base = _reproduced(CLASS, SERVED[CLASS])
    for name, served in SERVED.items():
        # The subclasses run the base's __call__ (and H2OVL its transform): served only where it is.
        cls = base if isinstance(base, str) else _reproduced(name, served)
        if isinstance(cls, str):
            said.append(f"vLLM's {name} serves: {cls}")
        else:
            images[cls] = served
            said.append(f"{SERVING} serves vLLM's {name} in place of its Pillow resize and torchvision transform")
    if images:  # wrapped in the base class, whose __call__ the subclasses inherit
        _wrap(base, "images", functools.partial(_serve_images, images), images, handed_back)
    video = _reproduced(VIDEO_CLASS, Served(MODULE, VIDEOS, (), IMAGENET_MEAN, IMAGENET_STD))
    if isinstance(video, str):
        said.append(f"vLLM's {VIDEO_CLASS} serves: {video}")
    else:
        _wrap(video, "videos", _serve_videos, {video: None}, handed_back)
        said.append(f"{SERVING} serves vLLM's {VIDEO_CLASS} in place of its Pillow resize and torchvision transform")
    said.append(_serve_on_init(handed_back, log))
    return "; ".join(said)


def _serve_on_init(handed_back, log: logging.Logger) -> str:
    """Wraps InputProcessingContext.init_processor so that the first NanoNemotronVLProcessor vLLM builds has
    its class served (_serve_nano), logged in one line; says so."""
    try:
        cls = importlib.import_module(CONTEXT_MODULE).InputProcessingContext
    except (ImportError, AttributeError) as e:
        return f"vLLM's {NANO_CLASS} serves: this vLLM has no {CONTEXT_MODULE}.InputProcessingContext ({e})"
    original = cls.init_processor
    later = f"vLLM's {NANO_CLASS}: said when vLLM first builds one"
    if getattr(original, "fused_input_norm_wrapped", None) is not None:
        return later
    lock, done = threading.Lock(), []

    @functools.wraps(original)
    def init_processor(self, typ, /, **kwargs):
        if getattr(typ, "__module__", None) == NANO_MODULE and getattr(typ, "__name__", None) == NANO_CLASS:
            with lock:
                if not done:
                    done.append(True)
                    log.info("fused_input_norm: %s", _serve_nano(importlib.import_module(NANO_MODULE), handed_back))
        return original(self, typ, **kwargs)

    init_processor.fused_input_norm_wrapped = original
    cls.init_processor = init_processor
    return later


def _serve_nano(module, handed_back) -> str:
    """Serves NanoNemotronVLProcessor's images (_serve_nano_images) and videos (_nano_frames in place of its
    _videos_to_pixel_values_lst), each where vLLM's code is the one reproduced; says which serves them."""
    said = [_serve_nano_images(module, handed_back)]
    reason = moved(module, NANO_VIDEOS)
    if reason is not None:
        return "; ".join([*said, f"vLLM's {NANO_CLASS} serves its videos: {reason}"])
    cls = getattr(module, NANO_CLASS)
    wrap_method(cls, "_videos_to_pixel_values_lst", functools.partial(_nano_frames, module), handed_back)
    said.append(
        f"FusedImageProcessor (reference 'torchvision') serves vLLM's {NANO_CLASS} videos on their uint8 path "
        f"in place of its antialiased bicubic interpolate; their float path stays vLLM's"
    )
    return "; ".join(said)


def _serve_nano_images(module, handed_back) -> str:
    """Replaces BaseNanoNemotronVLProcessor._images_to_pixel_values_lst by one that serves the calls _nano_tiles
    does and hands the rest to vLLM's; says which serves it."""
    reason = moved(module, NANO)
    if reason is not None:
        return f"vLLM's {NANO_CLASS} serves: {reason}"
    base, cls = getattr(module, NANO_BASE), getattr(module, NANO_CLASS)
    original = base._images_to_pixel_values_lst
    if getattr(original, "fused_input_norm_wrapped", None) is None:

        @functools.wraps(original)
        def _images_to_pixel_values_lst(self, *args, **kwargs):
            out = _nano_tiles(cls, self, args, kwargs)
            if isinstance(out, str):
                handed_back(type(self).__name__, out)
                return original(self, *args, **kwargs)
            return out

        _images_to_pixel_values_lst.fused_input_norm_wrapped = original
        base._images_to_pixel_values_lst = _images_to_pixel_values_lst
    return (
        f"FusedImageProcessor (reference 'torchvision') serves vLLM's {NANO_CLASS} images on its uint8 path "
        f"(mm_device_do_normalize) in place of its antialiased bicubic interpolate; its float path stays vLLM's"
    )


def _nano_tiles(cls, upstream, args: tuple, kwargs: dict) -> list | str:
    """What vLLM's BaseNanoNemotronVLProcessor._images_to_pixel_values_lst(images, max_num_tiles) returns: per
    image, its uint8 [tiles (+ thumbnail), 3, S, S] (InternVL's grid of 1..max_num_tiles, torch's antialiased
    bicubic), or why this call goes to vLLM's code."""
    if type(upstream) is not cls:
        return f"{type(upstream).__name__} is a subclass of {cls.__name__} with preprocessing of its own"
    if len(args) != 2 or kwargs:
        return "not called as (images, max_num_tiles)"
    images, max_num_tiles = args
    if upstream.do_cpu_normalize:
        # vLLM resizes float32 pixels there (unrounded, then / 255 and Normalize): not this package's resize.
        return "its float path (do_normalize on: a float32 resize, not reproduced)"
    if upstream.dynamic_tiler is not None:
        return "dynamic resolution (its DynamicResolutionImageTiler)"
    unserved = _unserved(list(images) if isinstance(images, list) else [images], "vLLM converts it to RGB first")
    if unserved:
        return unserved
    config = {
        "image_processor_type": CLASS,
        "size": upstream.image_size,
        "min_dynamic_patch": 1,
        "max_dynamic_patch": max_num_tiles,
        "dynamic_image_size": True,
        "use_thumbnail": upstream.use_thumbnail,
        "resample": 3,  # torch's bicubic (antialiased, as torchvision resizes uint8)
    }
    try:
        items = tuple(sorted(config.items()))
        out = processor(items, "torchvision")(images, visual_dtype=torch.uint8)
    except (TypeError, ValueError) as e:
        return str(e)
    return list(torch.split(out["pixel_values"], out["num_patches"].tolist()))


def _nano_frames(module, upstream, args: tuple, kwargs: dict) -> list | str:
    """What vLLM's NanoNemotronVLProcessor._videos_to_pixel_values_lst(videos, dtype=...) returns on its uint8
    path: per clip, its frames resized with torch's antialiased bicubic, uint8 [frames, 3, h, w]; or why this
    call goes to vLLM's code."""
    import numpy as np

    cls = getattr(module, NANO_CLASS)
    if type(upstream) is not cls:
        return f"{type(upstream).__name__} is a subclass of {cls.__name__} with preprocessing of its own"
    if len(args) != 1 or set(kwargs) - {"dtype"} or not isinstance(args[0], list) or not args[0]:
        return "not called as (a list of videos, dtype=...)"
    if upstream.do_cpu_normalize:  # the dtype only matters there
        return "its float path (do_normalize on: a float32 resize, not reproduced)"
    clips = []
    for video in args[0]:
        if not isinstance(video, np.ndarray) or video.dtype != np.uint8 or video.ndim != 4 or video.shape[-1] != 3:
            return "a video that is not a uint8 [frames, H, W, 3] array"
        if not len(video):
            return "a video with no frames"
        height = width = upstream.image_size
        if upstream.video_target_num_patches is not None:  # vLLM's own sizing, so that its token count agrees
            width, height, _ = module.get_video_target_size_and_feature_size(
                orig_w=video.shape[2],
                orig_h=video.shape[1],
                target_patches=upstream.video_target_num_patches,
                maintain_aspect_ratio=upstream.video_maintain_aspect_ratio,
                patch_size=upstream.config.patch_size,
                downsample_ratio=upstream.config.downsample_ratio,
            )
        # A frame already at that size comes out as its own bytes (vLLM skips the interpolate there).
        config = {"image_processor_type": "SiglipImageProcessor", "size": (height, width), "resample": 3}
        try:
            out = processor(tuple(sorted(config.items())), "torchvision")(list(video), visual_dtype=torch.uint8)
        except (TypeError, ValueError) as e:
            return str(e)
        clips.append(out["pixel_values"])
    return clips


def _reproduced(name: str, served: Served) -> type | str:
    """vLLM's class `name`, where its module is the one this reproduces; or why not."""
    try:
        module = importlib.import_module(served.module)
    except ImportError as e:
        return f"this vLLM has no {served.module} ({e})"
    cls = getattr(module, name, None)
    if cls is None:
        return f"this vLLM has no {served.module}.{name}"
    if getattr(cls.__call__, "fused_input_norm_wrapped", None) is not None:  # vLLM may load plugins more than once
        return cls
    return moved(module, served.reproduced) or cls


def _wrap(cls: type, argument: str, serve_call, served: dict, handed_back) -> None:
    """Replaces cls.__call__ (whose first argument, by position or by keyword, is `argument`) by one that runs
    `serve_call` for instances of the classes `served` names (cls or a subclass; not theirs) and hands what it
    does not serve to the original."""
    wrap_method(
        cls,
        "__call__",
        lambda upstream, args, kwargs: _served(cls, upstream, served, argument, args, kwargs, serve_call),
        handed_back,
    )


def bound_arguments(
    cls: type, method: str, signature: inspect.Signature, upstream, args: tuple, kwargs: dict
) -> dict | str:
    """The arguments of a call of `cls.<method>` (wrapped; `signature`: the original's), defaults applied; or
    why the call goes to vLLM's code: `upstream` is a subclass (its own preprocessing), or the arguments do
    not bind."""
    if type(upstream) is not cls:
        return f"{type(upstream).__name__} is a subclass of {cls.__name__} with preprocessing of its own"
    try:
        bound = signature.bind(upstream, *args, **kwargs)
    except TypeError as e:
        return f"arguments {cls.__name__}.{method} does not take ({e})"
    bound.apply_defaults()
    return bound.arguments


def wrap_bound(cls: type, name: str, serve_bound, log: logging.Logger) -> None:
    """wrap_method for a call served from its arguments: `serve_bound(upstream, arguments)` gets each call's
    arguments bound to cls.<name>'s signature, defaults applied (a subclass, or arguments that do not bind, go
    to vLLM's code: bound_arguments), and returns the result or why vLLM's code serves the call."""
    signature = inspect.signature(getattr(cls, name))

    def serve_call(upstream, args: tuple, kwargs: dict) -> object:
        call = bound_arguments(cls, name, signature, upstream, args, kwargs)
        return call if isinstance(call, str) else serve_bound(upstream, call)

    wrap_method(cls, name, serve_call, HandedBack(log))


def wrap_method(cls: type, name: str, serve_call, handed_back) -> None:
    """Replaces cls.<name> by one that returns `serve_call(self, args, kwargs)`, or, where that gives a reason
    (a str), logs it through `handed_back` and runs the original. A method wrapped already is left as it is
    (vLLM may load plugins more than once). Every vllm_* module wraps vLLM's classes through this."""
    original = getattr(cls, name)
    if getattr(original, "fused_input_norm_wrapped", None) is not None:
        return

    @functools.wraps(original)
    def method(self, *args, **kwargs):
        out = serve_call(self, args, kwargs)
        if isinstance(out, str):
            handed_back(type(self).__name__, out)
            return original(self, *args, **kwargs)
        return out

    method.fused_input_norm_wrapped = original
    setattr(cls, name, method)


def replace_functions(module_name: str, serve_calls: dict, reproduced: dict, served: str, label: str, log) -> str:
    """wrap_method for a module's functions (vLLM's modules that preprocess without a processor class): imports
    vLLM's module, checks the SHA-256 of what it reproduces (`moved`), then makes each module.<name> of
    `serve_calls` return serve_call(*args, **kwargs), or, where that gives a reason (a str), log it as `label`'s
    and run the original. Returns the sentence to log: `served`, or why `label` stays vLLM's."""
    module = importlib.import_module(module_name)
    if any(getattr(getattr(module, name), "fused_input_norm_wrapped", None) is not None for name in serve_calls):
        return served  # plugins load again
    reason = moved(module, reproduced)
    if reason is not None:
        return f"vLLM's {label} stays its own: {reason}"
    handed_back = HandedBack(log)
    for name, serve_call in serve_calls.items():
        _replace_function(module, name, serve_call, handed_back, label)
    return served


def _replace_function(module: object, name: str, serve_call, handed_back, label: str) -> None:
    original = getattr(module, name)

    @functools.wraps(original)
    def function(*args, **kwargs):
        out = serve_call(*args, **kwargs)
        if isinstance(out, str):
            handed_back(f"{label} {name}", out)
            return original(*args, **kwargs)
        return out

    function.fused_input_norm_wrapped = original
    setattr(module, name, function)


def _served(cls, upstream, served: dict, argument: str, args: tuple, kwargs: dict, serve_call) -> object:
    """`serve_call`'s output for a call of `cls.__call__`, or why it goes to vLLM's code."""
    if type(upstream) not in served:
        return f"{type(upstream).__name__} is a subclass of {cls.__name__} with preprocessing of its own"
    if len(args) + (argument in kwargs) != 1:
        return f"{argument} not given once (as the first argument or by name)"
    rest = {key: value for key, value in kwargs.items() if key != argument}
    return serve_call(upstream, args[0] if args else kwargs[argument], rest)


def _serve_images(served: dict, upstream, images, kwargs: dict) -> object:
    """The BatchFeature vLLM's InternVLChatImageProcessor (or the subclass `upstream` is, as `served` says how)
    returns, or why this call goes to vLLM's code."""
    images = images if isinstance(images, list) else [images]
    unserved = _unserved(images, "vLLM resizes it in that mode, then converts it to RGB")
    if unserved:
        return unserved
    bounds = {key: kwargs.get(key) for key in ("min_dynamic_patch", "max_dynamic_patch", "dynamic_image_size")}
    bounds = {key: getattr(upstream, key) if value is None else value for key, value in bounds.items()}
    how = served[type(upstream)]
    settings = {**bounds, **{key: getattr(upstream, key) for key in how.attributes}}
    as_bytes = how.bytes_unless is not None and not getattr(upstream, how.bytes_unless)
    dtype = torch.uint8 if as_bytes else torch.float32
    out = _run(type(upstream).__name__, upstream, images, settings, how, kwargs, dtype)
    if isinstance(out, str):
        return out
    return _batch({"pixel_values_flat": out["pixel_values"], "image_num_patches": out["num_patches"]}, kwargs)


def _unserved(images: list, why_mode: str) -> str | None:
    """Why these images are not served (None: they are)."""
    images = pil_images(images, SERVED_MODES, why_mode)
    return images if isinstance(images, str) else None


def pil_images(images, modes: tuple, why: str) -> list | str:
    """The call's image or images as a list, or why they are not served: none, one that is not a PIL image, or
    one whose mode is not in `modes` (`why`: what vLLM does with those). vllm_step3 shares it."""
    images = images if isinstance(images, list) else [images]
    if not images:
        return "no images"
    from PIL import Image

    for image in images:
        if not isinstance(image, Image.Image):
            return f"an image that is not a PIL image ({type(image).__name__})"
        if image.mode not in modes:
            return f"a {image.mode} image ({why})"
    return images


def _serve_videos(upstream, videos, kwargs: dict) -> object:
    """The BatchFeature vLLM's InternVLChatVideoProcessor returns (each frame one tile, no thumbnail), or why
    this call goes to vLLM's code."""
    import numpy as np

    videos = videos if isinstance(videos, list) else [videos]
    if not videos:
        return "no videos"
    for video in videos:
        if not isinstance(video, np.ndarray) or video.dtype != np.uint8 or video.ndim != 4 or video.shape[-1] != 3:
            return "a video that is not a uint8 [frames, H, W, 3] array"
    frames = [frame for video in videos for frame in video]
    one_tile = {"min_dynamic_patch": 1, "max_dynamic_patch": 1, "dynamic_image_size": False, "use_thumbnail": False}
    out = _run(CLASS, upstream, frames, one_tile, SERVED[CLASS], kwargs)
    if isinstance(out, str):
        return out
    counts = torch.tensor([len(video) for video in videos])
    return _batch({"pixel_values_flat_video": out["pixel_values"], "video_num_patches": counts}, kwargs)


def _run(
    name: str, upstream, images: list, tiles: dict, how: Served, kwargs: dict, dtype: torch.dtype = torch.float32
) -> dict | str:
    """FusedImageProcessor's outputs for these images as vLLM's class `name` makes them with these tile settings,
    or why not."""
    if kwargs.get("return_tensors") not in (None, "pt"):
        return f"return_tensors={kwargs['return_tensors']!r} (only 'pt' is served)"
    config = {
        "image_processor_type": name,
        "size": upstream.image_size,
        **tiles,
        "resample": 3,  # Pillow's default filter for RGB and L images: bicubic
        "image_mean": how.mean,
        "image_std": how.std,
    }
    try:
        items = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in config.items()))
        return processor(items, "pil")(images, visual_dtype=dtype)
    except (TypeError, ValueError) as e:
        return str(e)


def _batch(data: dict, kwargs: dict) -> object:
    from transformers import BatchFeature

    return BatchFeature(data, tensor_type=kwargs.get("return_tensors"))


@functools.lru_cache(maxsize=8)  # one per distinct config (per-request tile bounds), least recently used out
def processor(items: tuple, reference: str) -> FusedImageProcessor:
    """FusedImageProcessor (CPU, `reference` "pil" or "torchvision") for a config given as sorted (key, value)
    items, lists as tuples; vLLM's own processors' modules (vllm_deepseek_ocr) share it."""
    config = {key: list(value) if isinstance(value, tuple) else value for key, value in items}
    return FusedImageProcessor.from_preprocessor_config(config, device=torch.device("cpu"), reference=reference)


class HandedBack:
    """Logs why vLLM's code serves a call, once per reason (at most MAX_LOGGED_REASONS of them)."""

    def __init__(self, log: logging.Logger):
        self._log = log
        self._lock = threading.Lock()
        self._logged: set[str] = set()

    def __call__(self, name: str, reason: str) -> None:
        with self._lock:
            if reason in self._logged or len(self._logged) >= MAX_LOGGED_REASONS:
                return
            self._logged.add(reason)
        self._log.info("fused_input_norm: vLLM's %s serves this call: %s", name, reason)
