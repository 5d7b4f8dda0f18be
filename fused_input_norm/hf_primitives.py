"""The generic path's primitives: transformers' backend methods (TorchvisionBackend's, which its video
processors inherit, and PilBackend's) that every model's own `_preprocess` calls, replaced by the package's
exact kernels. FusedHFGenericImageProcessor / FusedHFGenericVideoProcessor (hf_adapter) put `primitives(backend)`
just above the backend in the adapter's class, so a model's own override of a primitive still runs first, and
its `super().resize(...)` reaches the one here.

Each primitive serves a call bit-exact to the one it replaces, or hands it to that one (one log line per
reason, through the adapter's _handed_back):
  TorchvisionBackend.process_image   an RGB PIL image: its bytes copied once from Pillow's memory into the
                              contiguous [3, H, W] tensor (transformers copies them three times: Pillow's
                              convert, np.array, the channels-first copy); with do_convert_rgb, L and RGBA ones
                              made RGB as transformers' convert_to_rgb makes them; arrays and tensors stay the
                              backend's;
  TorchvisionBackend.resize   uint8 [..., C, H, W] CPU tensors, antialiased bilinear / bicubic / lanczos: the
                              resample engine's "torchvision" reference (torch's own CPU uint8 kernel, bit
                              for bit; on another device transformers runs that device's kernel: its own);
                              and float32 CPU tensors: contiguous ones, bilinear without antialiasing
                              (Molmo2 resizes image.float()), and any, bilinear or bicubic with it (MiniMax-M3's
                              video frames): torch's float32 kernels, the engine's "bilinear_no_antialias_f32",
                              "bilinear_f32" and "bicubic_f32" filters, where torch's x86 kernels fuse their
                              products into FMAs (torch_float_fma_kernel);
  TorchvisionBackend.rescale_and_normalize   uint8 CPU tensors of at least MIN_NORMALIZE_VALUES values, whose
                              float32 copy is contiguous: tvF.normalize's subtract then divide on the mean / std
                              it fuses (the affine op's x * 1 - mean, one rounding as torch's sub_, then torch's
                              div_), or its rescale alone (x * scale, one rounding), bit for bit, into pooled
                              memory; float input (MiniCPM-OCR's, Molmo 2's) stays the backend's;
  PilBackend.process_image    an RGB PIL image: np.array of it, channels first, without Pillow's convert copy;
  PilBackend.resize           uint8 [3, H, W] arrays, bilinear / bicubic / lanczos, no reducing_gap: the
                              engine's "pil" reference (the installed Pillow's pass order).
Anything else (another float input, a uint8 one with antialias=False, nearest, LANCZOS where transformers falls back to BICUBIC, a
1x1 target torch refuses, torch.compile tracing) is the backend's own. A model's own function that calls a
primitive by the backend's name (`TorchvisionBackend.resize(self, ...)`, as Glm5NextVideoProcessor.resize does),
past the class the adapter puts above the backend, runs as a copy of itself whose global name for the backend
is that class (`by_name_calls`): the same code, the same primitives. Nothing is fused across primitives
(resize returns the exact bytes the model's own crops, pads and tiles read), and the Pil backend's NumPy
rescale and normalize stay its own.

Imports transformers only when called.
"""

import functools

import numpy as np
import torch

from . import images, ops, output_pool
from . import resize as resizing

# Resample plans (per axis size pair), shared by every adapter in the process, bounded by PlanCache itself.
_PLANS = resizing.PlanCache()
_FILTERS = {"BILINEAR": "bilinear", "BICUBIC": "bicubic", "LANCZOS": "lanczos"}
# The widest float32 antialiased downscale across the engine serves (in_w / out_w): beyond it torch is as fast.
MAX_FLOAT_DOWNSCALE = 4
# PIL.Image.Resampling values (transformers' PILImageResampling) the engine reproduces.
_PIL_FILTERS = {2: "bilinear", 3: "bicubic", 1: "lanczos"}
# Below this many pixels a PIL image is read as transformers reads it, less Pillow's convert (measured: a 64x64
# image 22 us that way, 81 us through Pillow's Arrow export and the copy kernel; 224x224: 293 us against 99 us).
SMALL_IMAGE = 128 * 128
# Below this many values the backend's rescale_and_normalize is as fast (its three passes stay in cache; the
# affine op's call costs ~20 us more): measured at 1 thread, 512x512 RGB 428 us against 646, 640x640 678 against
# 602, 1024x1024 1633 against 1289.
MIN_NORMALIZE_VALUES = 1 << 20


def _output_size(size: object, height: int, width: int) -> tuple[int, int] | str:
    """The (height, width) a backend's resize computes from `size` (a SizeDict), in the backend's order of
    precedence; a reason where it raises instead (the backend then raises it)."""
    from transformers import image_transforms as tf
    from transformers.image_utils import get_image_size_for_max_height_width

    get = functools.partial(getattr, size)
    try:
        if get("shortest_edge", None) and get("longest_edge", None):
            return tuple(tf.get_size_with_aspect_ratio((height, width), size.shortest_edge, size.longest_edge))
        if get("shortest_edge", None):
            image = np.empty((1, height, width), dtype=np.uint8)  # only its shape is read
            return tuple(
                tf.get_resize_output_image_size(
                    image, size=size.shortest_edge, default_to_square=False, input_data_format="channels_first"
                )
            )
        if get("max_height", None) and get("max_width", None):
            return tuple(get_image_size_for_max_height_width((height, width), size.max_height, size.max_width))
        if get("height", None) and get("width", None):
            return (size.height, size.width)
    except Exception as e:  # whatever the backend's helpers raise, it raises again
        return f"a size its helpers refuse ({type(e).__name__}: {e})"
    return f"a size without height and width, max_height and max_width or shortest_edge: {size}"


def _checked_size(new_size: tuple[int, int] | str) -> tuple[int, int] | str:
    if isinstance(new_size, str):
        return new_size
    height, width = (int(side) for side in new_size)
    if height < 1 or width < 1:
        return f"an output size {new_size} with an empty side"
    if (height, width) == (1, 1):
        return "a 1x1 output (torch's uint8 kernel refuses it)"
    return (height, width)


def _torchvision_filter(resample: object) -> str:
    """The engine's filter name for the interpolation TorchvisionBackend.resize would run, or a reason."""
    from torchvision.transforms.v2 import InterpolationMode
    from transformers.image_utils import PILImageResampling, pil_torch_interpolation_mapping
    from transformers.utils.import_utils import is_torchvision_greater_or_equal

    if resample is None:
        mode = InterpolationMode.BILINEAR
    elif isinstance(resample, PILImageResampling | int):
        mode = pil_torch_interpolation_mapping.get(resample)
    else:
        mode = resample
    name = _FILTERS.get(getattr(mode, "name", None))
    if name is None:
        named = f" ({mode.name.lower()})" if isinstance(getattr(mode, "name", None), str) else ""
        return f"resample={resample!r}{named} (served: bilinear, bicubic, lanczos)"
    if name == "lanczos" and not is_torchvision_greater_or_equal("0.27"):
        return "LANCZOS before torchvision 0.27 (transformers resizes with BICUBIC then)"
    return name


def _resized(images: torch.Tensor, size: tuple[int, int], resample: str, reference: str) -> torch.Tensor:
    """uint8 [B, C, H, W] (any strides) resized to `size`: the engine with the identity affine, out in the input's
    dtype (float32 for the float32 bilinear's float input)."""
    channels = images.shape[1]
    out = torch.empty((images.shape[0], channels, *size), dtype=images.dtype, device=images.device)
    weight = torch.ones(channels, dtype=torch.float32, device=images.device)
    bias = torch.zeros(channels, dtype=torch.float32, device=images.device)
    resizing.resize_into(out, images, weight, bias, size, (0, 0, *size), resample, reference, _PLANS)
    return out


def pil_pixels(image: object, do_convert_rgb: object = None) -> torch.Tensor | str:
    """TorchvisionBackend.process_image's tensor for a PIL image (np.array of it, permuted to a contiguous
    [3, H, W]): the same bytes copied in one pass from Pillow's own memory (images.pil_to_chw, zero-copy where
    Pillow exports it) into a new tensor the model's code may write to; or why it is the backend's. With
    do_convert_rgb, L and RGBA images too, as transformers' convert_to_rgb makes them RGB: the grey repeated,
    the alpha composited on opaque white in Pillow's integer arithmetic (images.to_rgb, source "pil")."""
    keyed = image.info.get("transparency") is not None
    if do_convert_rgb and image.mode in ("L", "RGBA") and not keyed and 0 not in image.size:
        return images.to_rgb(images.pil_to_chw(image, convert_rgb=False), "pil", "torchvision").contiguous()
    if image.mode != "RGB" or keyed:
        return f"a PIL image in mode {image.mode}{' with a transparency key' if keyed else ''} (served: RGB)"
    if 0 in image.size:
        return "an empty PIL image"
    if image.width * image.height < SMALL_IMAGE:  # Pillow's export costs more than its copy saves
        return torch.from_numpy(np.array(image)).permute(2, 0, 1).contiguous()
    view = images.pil_to_chw(image, convert_rgb=False)
    return _resized(view[None], tuple(view.shape[-2:]), "bilinear", "torchvision")[0]  # an exact copy


def pil_array(image: object) -> np.ndarray | str:
    """PilBackend.process_image's array for a PIL image (np.array of its RGB conversion, channels moved first):
    the same [3, H, W] view of one copy, without the conversion's own copy of an image already RGB."""
    if image.mode != "RGB" or image.info.get("transparency") is not None:
        keyed = " with a transparency key" if image.info.get("transparency") is not None else ""
        return f"a PIL image in mode {image.mode}{keyed} (served: RGB)"
    return np.moveaxis(np.array(image), -1, 0)


def _not_on_this_cpu_now(image: torch.Tensor) -> str | None:
    """Why a tensor's resize is the backend's wherever it is or whenever it runs: another device (torch's kernels
    there round their own way: the engine is the CPU's) or torch.compile tracing; None otherwise."""
    if image.device.type != "cpu":
        return f"a tensor on {image.device} (transformers resizes it with torch's {image.device.type} kernel)"
    from transformers.utils.import_utils import is_torchdynamo_compiling

    return "torch.compile tracing" if is_torchdynamo_compiling() else None


def torchvision_resize(image: object, size: object, resample: object, antialias: object) -> torch.Tensor | str:
    """TorchvisionBackend.resize's result, or why it is the backend's to compute."""
    if isinstance(image, torch.Tensor) and image.dtype == torch.float32:
        return _float_resize(image, size, resample, antialias)
    if not isinstance(image, torch.Tensor) or image.dtype != torch.uint8:
        return f"an input that is not a uint8 or float32 tensor ({getattr(image, 'dtype', type(image).__name__)})"
    if antialias is not True:
        return f"antialias={antialias!r}"
    if image.dim() < 3 or 0 in image.shape:
        return f"a tensor of shape {list(image.shape)} (served: [..., C, H, W], none empty)"
    elsewhere = _not_on_this_cpu_now(image)
    if elsewhere is not None:
        return elsewhere
    name = _torchvision_filter(resample)
    if name not in _FILTERS.values():
        return name
    *lead, channels, height, width = image.shape
    new_size = _checked_size(_output_size(size, height, width))
    if isinstance(new_size, str):
        return new_size
    if new_size == (height, width):
        return image  # torchvision's resize returns its input itself then
    out = _resized(image.reshape(-1, channels, height, width), new_size, name, "torchvision")
    return out.reshape(*lead, channels, *new_size)


def _float_resize(image: torch.Tensor, size: object, resample: object, antialias: object) -> torch.Tensor | str:
    """TorchvisionBackend.resize of a float32 tensor: torch's float32 F.interpolate, which the engine's float32
    filters reproduce whatever the values: bilinear with antialias=False ("bilinear_no_antialias_f32": Molmo2
    resizes image.float()) and bilinear / bicubic with antialias=True ("bilinear_f32" / "bicubic_f32": MiniMax-M3's
    video frames), or why it is the backend's."""
    served = "(served: bilinear with antialias=False; bilinear, bicubic with antialias=True)"
    if antialias is not False and antialias is not True:
        return f"a float32 input with antialias={antialias!r} {served}"
    name = _torchvision_filter(resample)
    if name not in ("bilinear", "bicubic") or (name == "bicubic" and not antialias):
        return f"a float32 input with resample={resample!r}, antialias={antialias!r} {served}"
    # torch's antialiased filters give the same values for any strides; its bilinear without antialiasing picks
    # one of two kernels by the layout (torch_float_bilinear), tested for contiguous inputs.
    if image.dim() < 3 or 0 in image.shape or not (antialias or image.is_contiguous()):
        shapes = "[..., C, H, W], none empty" + ("" if antialias else ", contiguous")
        return f"a float32 tensor of shape {list(image.shape)} (served: {shapes})"
    elsewhere = _not_on_this_cpu_now(image)
    if elsewhere is not None:
        return elsewhere
    if not resizing.torch_float_fma_kernel():
        return f"torch's float32 {name} on this CPU (served where torch runs its AVX2/AVX-512 kernels)"
    *lead, channels, height, width = image.shape
    new_size = _checked_size(_output_size(size, height, width))
    if isinstance(new_size, str):
        return new_size
    if new_size == (height, width):
        return image  # torchvision's resize returns its input itself then
    if antialias and new_size[1] == 1 and new_size[0] != height:
        # torch's vertical pass iterates over rows then, and reads the first row's taps for every row.
        return "a float32 resize to width 1 (torch's antialiased kernel gives every row the first row's value)"
    if antialias and width > MAX_FLOAT_DOWNSCALE * new_size[1]:
        # Both sum each output pixel's window, one tap at a time: past this the windows are most of the time, and
        # the engine measured no faster than torch (a 6x downscale of 12 MP: 0.67-0.89x).
        return f"a float32 antialiased downscale of more than {MAX_FLOAT_DOWNSCALE}x across (torch's is as fast)"
    flat = image.reshape(-1, channels, height, width)
    if antialias:
        out = _resized(flat, new_size, f"{name}_f32", "torchvision")
    elif channels > 3 and flat.is_contiguous(memory_format=torch.channels_last):
        # contiguous both ways (H = W = 1): which of its kernels torch takes then is not what we tested
        return f"a float32 tensor of shape {list(image.shape)}, channels-last contiguous too"
    else:
        out = _resized(flat, new_size, resizing.torch_float_bilinear(channels, new_size), "torchvision")
    return out.reshape(*lead, channels, *new_size)


def pil_resize(image: object, size: object, resample: object, reducing_gap: object) -> np.ndarray | str:
    """PilBackend.resize's result, or why it is the backend's to compute."""
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
        return f"an input that is not a uint8 array ({getattr(image, 'dtype', type(image).__name__)})"
    if image.ndim != 3 or image.shape[0] != 3 or 0 in image.shape:
        return f"an array of shape {list(image.shape)} (served: [3, H, W], none empty)"
    if reducing_gap is not None:
        return f"reducing_gap={reducing_gap!r}"
    if resample is None:
        resample = 2  # the backend's default, BILINEAR
    name = _PIL_FILTERS.get(resample) if isinstance(resample, int) else None
    if name is None:
        from PIL import Image

        known = isinstance(resample, int) and resample in set(Image.Resampling)
        named = f" ({Image.Resampling(resample).name.lower()})" if known else ""
        return f"resample={resample!r}{named} (served: BILINEAR, BICUBIC, LANCZOS)"
    new_size = _checked_size(_output_size(size, *image.shape[1:]))
    if isinstance(new_size, str):
        return new_size
    out = _resized(torch.from_numpy(image).unsqueeze(0), new_size, name, "pil")
    return out[0].numpy()


def torchvision_normalize(adapter, images: object, do_rescale, rescale_factor, do_normalize, image_mean, image_std):
    """TorchvisionBackend.rescale_and_normalize's result for uint8 CPU images, each value rounded as torch rounds
    it, into the package's pooled memory (output_pool). With normalize: the mean and std its
    _fuse_mean_std_and_rescale_factor gives (the rescale folded in), then tvF.normalize's two steps on the float32
    copy: the affine op reads the bytes and writes x * 1 - mean (one rounding: x - mean, as torch's sub_), and
    torch's own div_ follows. A rescale alone (its `image * scale`, float32): x * scale + (-0.0) rounded once, as
    torch's float32 product (the -0.0 keeps a zero product's sign). None where the backend's own steps run unlogged
    (another dtype or device, neither step, fewer than MIN_NORMALIZE_VALUES values); a reason where it hands the
    call back."""
    if not (isinstance(images, torch.Tensor) and images.dtype == torch.uint8 and images.device.type == "cpu"):
        return None
    if not (do_normalize or do_rescale) or images.dim() < 3 or images.numel() < MIN_NORMALIZE_VALUES:
        return None
    # The backend's float32 copy keeps a dense tensor's strides (channels-last stays so): served where that copy
    # is contiguous, as the output here is (a crop's view is read in place). Its strides, without allocating it:
    if not torch.empty_like(images, dtype=torch.float32, device="meta").is_contiguous():
        return None
    step = "normalize" if do_normalize else "rescale"
    backend = backend_of(type(adapter))
    if getattr(type(adapter), step, None) is not getattr(backend, step, None):
        return f"{step} is the model's own"
    from transformers.utils.import_utils import is_torchdynamo_compiling

    if is_torchdynamo_compiling():
        return "torch.compile tracing"
    channels, dim = images.shape[-3], images.dim() - 3
    if not do_normalize:
        if not (isinstance(rescale_factor, int | float) and torch.get_default_dtype() == torch.float32):
            return f"a rescale_factor of {type(rescale_factor).__name__} (served: a number, into float32)"
        out = output_pool.empty(tuple(images.shape), torch.float32)
        ops.affine_out(out, images, torch.full((channels,), float(rescale_factor)), torch.full((channels,), -0.0), dim)
        return out
    mean, std, _ = adapter._fuse_mean_std_and_rescale_factor(
        do_normalize=do_normalize,
        image_mean=image_mean,
        image_std=image_std,
        do_rescale=do_rescale,
        rescale_factor=rescale_factor,
        device=images.device,
    )
    if isinstance(std, tuple | list) and not all(std):  # tvF.normalize raises its own ValueError
        return "a std of 0"
    try:
        mean, std = (torch.as_tensor(v, dtype=torch.float32, device=images.device) for v in (mean, std))
    except (TypeError, ValueError, RuntimeError) as e:
        return f"a mean or std torch does not take as a tensor ({e})"
    if any(v.dim() > 1 or v.numel() not in (1, channels) for v in (mean, std)):
        return f"a mean of shape {tuple(mean.shape)} and std of {tuple(std.shape)} for {channels} channels"
    out = output_pool.empty(tuple(images.shape), torch.float32)
    ops.affine_out(out, images, torch.ones(channels), (-mean).expand(channels).contiguous(), dim)
    return out.div_(std.view(-1, 1, 1))


class TorchvisionPrimitives:
    """TorchvisionBackend's process_image and resize, served by the package or handed to the backend's
    (the next class in the adapter's MRO). Mixed into `primitives(TorchvisionBackend)`; `self` is the adapter."""

    def process_image(self, image, do_convert_rgb=None, input_data_format=None, device=None, **kwargs):
        if not images.is_pil(image):  # an array or a tensor: the backend's few views and one copy
            return super().process_image(image, do_convert_rgb, input_data_format, device, **kwargs)
        out = pil_pixels(image, do_convert_rgb)
        if isinstance(out, str):
            self._handed_back(f"process_image: {out}")
            return super().process_image(image, do_convert_rgb, input_data_format, device, **kwargs)
        return out if device is None else out.to(device)

    def resize(self, image, size, resample=None, antialias=True, **kwargs):
        out = torchvision_resize(image, size, resample, antialias)
        if isinstance(out, str):
            self._handed_back(f"resize: {out}")
            return super().resize(image, size, resample=resample, antialias=antialias, **kwargs)
        return out

    def rescale_and_normalize(self, images, do_rescale, rescale_factor, do_normalize, image_mean, image_std):
        out = torchvision_normalize(self, images, do_rescale, rescale_factor, do_normalize, image_mean, image_std)
        if isinstance(out, str):
            self._handed_back(f"rescale_and_normalize: {out}")
        if isinstance(out, torch.Tensor):
            return out
        return super().rescale_and_normalize(images, do_rescale, rescale_factor, do_normalize, image_mean, image_std)


class PilPrimitives:
    """PilBackend's process_image and resize, served by the package or handed to the backend's; `self` is the
    adapter."""

    def process_image(self, image, do_convert_rgb=None, input_data_format=None, **kwargs):
        if not images.is_pil(image):  # an array or a tensor: the backend's few views
            return super().process_image(image, do_convert_rgb, input_data_format, **kwargs)
        out = pil_array(image)
        if isinstance(out, str):
            self._handed_back(f"process_image: {out}")
            return super().process_image(image, do_convert_rgb, input_data_format, **kwargs)
        return out

    def resize(self, image, size, resample=None, reducing_gap=None, **kwargs):
        out = pil_resize(image, size, resample, reducing_gap)
        if isinstance(out, str):
            self._handed_back(f"resize: {out}")
            return super().resize(image, size, resample=resample, reducing_gap=reducing_gap, **kwargs)
        return out


def _names(code, name: str) -> bool:
    """Whether `code` (or a function, lambda or comprehension inside it) reads the global `name`."""
    return name in code.co_names or any(_names(const, name) for const in code.co_consts if hasattr(const, "co_names"))


def by_name_calls(upstream_class: type) -> dict[str, object]:
    """The model's own functions (upstream's class and its bases below the backend, each name as the MRO finds
    it) that read the backend by its global name, as copies whose globals name primitives(backend) instead, to
    be set on the adapter's class; {} where none does."""
    import types

    backend = backend_of(upstream_class)
    if backend is None:
        return {}
    fused, seen, copies = primitives(backend), set(), {}
    for klass in upstream_class.__mro__:
        if klass is backend or issubclass(backend, klass):
            break
        for name, value in vars(klass).items():
            if name in seen:
                continue
            seen.add(name)
            if not isinstance(value, types.FunctionType) or value.__globals__.get(backend.__name__) is not backend:
                continue
            if _names(value.__code__, backend.__name__):
                rebound = {**value.__globals__, backend.__name__: fused}
                copy = types.FunctionType(
                    value.__code__, rebound, value.__name__, value.__defaults__, value.__closure__
                )
                copy.__kwdefaults__ = value.__kwdefaults__
                copies[name] = functools.update_wrapper(copy, value)
    return copies


@functools.cache
def primitives(backend: type) -> type:
    """`backend` (transformers' TorchvisionBackend or PilBackend) with its primitives replaced: a subclass of
    it, which an adapter's class lists after upstream's, so that it sits just above `backend` in the MRO."""
    mixin = TorchvisionPrimitives if backend.__name__ == "TorchvisionBackend" else PilPrimitives
    return type(f"Fused{backend.__name__}", (mixin, backend), {"__module__": __name__})


def backend_of(upstream_class: type) -> type | None:
    """transformers' backend class that `upstream_class` is built on, or None."""
    for klass in upstream_class.__mro__:
        if klass.__name__ in ("TorchvisionBackend", "PilBackend") and klass.__module__.startswith("transformers."):
            return klass
    return None
