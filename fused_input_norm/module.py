"""FusedInputNorm: the vision encoder's input normalization as one fused op, safe to build anywhere."""

import math
import os
from collections.abc import Mapping, Sequence
from typing import Literal

import torch
from torch import nn

from . import config as configs
from . import ops
from .checks import INPUT_DTYPES, check_visual_dtype, dtype_names, is_int, is_number, per_channel
from .geometry import PATCH_CHANNEL_DIM
from .patchify import patch_views, resized_patch_plan
from .resize import PlanCache, check_resample, resize_arguments, resize_into

# A config this close to (weight 1, bias 0) only casts: torch.allclose's default tolerances
# (|w - 1| <= atol + rtol * 1, |b| <= atol), as vLLM decides it. Decided on plain Python floats, never on a
# device tensor, so building the module under torch.device("cuda") forces no device-to-host sync.
_IDENTITY_RTOL, _IDENTITY_ATOL = 1e-5, 1e-8

Number = int | float
Layout = Literal["pcl", "bchw"]
LAYOUTS = ("pcl", "bchw")


class FusedInputNorm(nn.Module):
    """y = (x * rescale_factor - mean[c]) / std[c], as y = x * weight[c] + bias[c] in fp32, one kernel.

    A drop-in for vLLM's FusedMMInputNorm (same constructor, `forward(pixel_values, visual_dtype)`,
    `input_dtype`, non-persistent buffers). The constructor's arguments are in `__init__`'s docstring;
    `from_preprocessor_config` builds one from a Hugging Face processor config.

    The constants and the identity decision are computed on the CPU. The weight/bias buffers are then
    placed on the default device (the active `torch.device` context, if any) with a non-blocking copy.
    They are derived from the processor config, not learned: they are not in `state_dict()`, so weight
    loaders (and vLLM's dummy weights) never touch them, and `.to()` still moves them (always as float32,
    rebuilt from the config: a model-wide `.half()` does not round them, `to_empty()` refills them).
    """

    weight: torch.Tensor | None
    bias: torch.Tensor | None

    def __init__(
        self,
        image_mean: Number | Sequence[Number] | torch.Tensor,
        image_std: Number | Sequence[Number] | torch.Tensor,
        rescale_factor: Number = 1.0,
        channel: int = 3,
        layout: Layout | None = None,
        *,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        """Folds the config into float32 weight = rescale_factor / std, bias = -mean / std, on the CPU.

        Args:
            image_mean, image_std: per-channel mean and std (a sequence of `channel` numbers, one number for
                all channels, or a CPU tensor); std > 0.
            rescale_factor: applied to the raw pixel before the mean is subtracted (1/255 for uint8 pixels).
            channel: number of channels.
            layout: what forward accepts. "pcl": 2-D patches [num_patches, channel * patch_elems],
                channel-major in each row (Qwen2-VL). "bchw": 4-D images [B, C, H, W]. None: decided by rank,
                patches for 2-D input and images with their channel on `channel_dim` for rank >= 3.
            dtype: the dtype of the weight/bias buffers; only float32, since the op computes in float32.

        Raises:
            TypeError: an argument of the wrong type (bool is not a number here; NumPy numbers are).
            ValueError: mismatched lengths, channel < 1, std <= 0, rescale_factor <= 0, non-finite values or
                float32 constants, an unknown layout, a dtype other than float32.

        An identity config (weight 1 and bias 0 within torch.allclose's default tolerances) makes a module
        with no buffers whose forward only casts. Otherwise the buffers go to the default device (the
        active `torch.device` context, if any) with a non-blocking copy: no device synchronization.
        """
        super().__init__()
        if not is_int(channel):
            raise TypeError(f"FusedInputNorm: channel must be a positive int, got {type(channel).__name__}")
        if channel < 1:
            raise ValueError(f"FusedInputNorm: channel must be a positive int, got {channel!r}")
        if not is_number(rescale_factor):
            raise TypeError(f"FusedInputNorm: rescale_factor must be a number, got {type(rescale_factor).__name__}")
        if layout is not None and layout not in LAYOUTS:
            raise ValueError(f"FusedInputNorm: layout must be 'pcl', 'bchw' or None, got {layout!r}")
        if dtype != torch.float32:
            raise ValueError(f"FusedInputNorm: dtype must be torch.float32 (the op computes in float32), got {dtype}")
        mean = per_channel("FusedInputNorm", "image_mean", image_mean, channel)
        std = per_channel("FusedInputNorm", "image_std", image_std, channel)
        rescale = float(rescale_factor)
        if not math.isfinite(rescale) or rescale <= 0:
            raise ValueError(f"FusedInputNorm: rescale_factor must be finite and > 0, got {rescale_factor!r}")
        if any(s <= 0 for s in std):
            raise ValueError(f"FusedInputNorm: image_std must be > 0 for every channel, got {std}")

        self.channel = channel
        self.layout = layout
        self.rescale_factor = rescale
        self.image_mean = mean
        self.image_std = std
        weight = [rescale / s for s in std]
        bias = [-m / s for m, s in zip(mean, std, strict=True)]
        _check_float32_constants(rescale, mean, std, weight, bias)
        self.is_identity = all(abs(w - 1.0) <= _IDENTITY_ATOL + _IDENTITY_RTOL for w in weight) and all(
            abs(b) <= _IDENTITY_ATOL for b in bias
        )
        self._constants = None if self.is_identity else (weight, bias)
        device = torch.get_default_device()
        self.register_buffer("weight", None if self.is_identity else _to_device(weight, device), persistent=False)
        self.register_buffer("bias", None if self.is_identity else _to_device(bias, device), persistent=False)
        self._plans = PlanCache()  # resize coefficients per size pair and device
        self._unit_params: dict = {}  # an identity module's (1, 0) for the resize kernels, per device

    def _apply(self, fn, recurse=True):
        # Every move and cast (.to, .cuda, .half, to_empty) goes through here. The op reads float32 constants,
        # and no state_dict load refills them: they are rebuilt from the config on the device `fn` chose, so a
        # model-wide .to(torch.bfloat16) does not round them and to_empty() does not leave them uninitialized.
        super()._apply(fn, recurse)
        if self._constants is not None:
            device = self.weight.device
            self.weight, self.bias = (_to_device(values, device) for values in self._constants)
        return self

    @property
    def input_dtype(self) -> torch.dtype | None:
        """The pixel dtype engines should ship (vLLM's CUDA-graph capture reads it): uint8, or None for an
        identity module, which takes pixels already in the encoder's dtype."""
        return None if self.is_identity else torch.uint8

    @classmethod
    def identity(cls, channel: int = 3, layout: Layout | None = None) -> "FusedInputNorm":
        """A module whose forward only casts."""
        return cls([0.0] * channel, [1.0] * channel, 1.0, channel, layout)

    @classmethod
    def from_preprocessor_config(
        cls, config: Mapping | str | os.PathLike, *, layout: Layout | None = None
    ) -> "FusedInputNorm":
        """Builds the module from a Hugging Face image processor config.

        `config` is a dict, the path of a `preprocessor_config.json` / `processor_config.json`, or a model
        directory holding one of them. A processor config that nests the image processor's under
        "image_processor" (transformers 5) is unwrapped, as vLLM's loader does.

        Honours do_rescale/rescale_factor and do_normalize/image_mean/image_std (lists or scalars); the
        channel count is the length of image_mean (else image_std, else 3). Missing or null keys take the
        defaults of the processor class the config names (config.DEFAULTS: CLIP's mean/std for Qwen-VL and
        CLIP, 0.5 for SigLIP), and transformers' usual ones for any other (rescale by 1/255, normalize with
        mean = std = 0.5), as FusedImageProcessor reads them. A config that neither rescales nor normalizes
        gives an identity module.
        """
        where = "FusedInputNorm.from_preprocessor_config"
        norm = configs.normalization(configs.read(config, where), where)
        return cls(norm.image_mean, norm.image_std, norm.rescale_factor, norm.channel, layout)

    def forward(
        self, pixel_values: torch.Tensor, visual_dtype: torch.dtype, *, channel_dim: int | None = None
    ) -> torch.Tensor:
        """Normalizes `pixel_values` into `visual_dtype` (float16, bfloat16 or float32), same shape.

        The layout decides the channel axis (see the class). With layout=None, images of rank >= 3 take
        theirs from `channel_dim` (default -3: [..., C, H, W]; -1: NHWC).
        """
        _check_forward_types(pixel_values, visual_dtype)
        x, dim = channel_view(pixel_values, self.channel, self.layout, channel_dim)
        if self.is_identity:
            return pixel_values.to(visual_dtype)
        self._check_device("FusedInputNorm", "pixel_values is", pixel_values.device)
        return ops.affine(x, self.weight, self.bias, dim, visual_dtype).view(pixel_values.shape)

    def _check_device(self, where: str, subject: str, device: torch.device) -> None:
        # Named after the caller's argument: the op would report it as weight on the wrong device.
        if device != self.weight.device:
            raise RuntimeError(
                f"{where}: {subject} on {device} but the module's buffers are on {self.weight.device}: "
                f"move the module with .to({str(device)!r})"
            )

    def patchify(
        self,
        images: torch.Tensor | Sequence[torch.Tensor],
        visual_dtype: torch.dtype,
        *,
        patch_size: int = 14,
        temporal_patch_size: int = 2,
        merge_size: int = 2,
        channel_dim: int = -3,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        resample: str = "bicubic",
        reference: str = "pil",
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Cuts resized images into Qwen-VL patch rows and normalizes them, in one pass per image.

        With min_pixels or max_pixels given, each uint8 image [C, H, W] of any size is first resized to
        smart_resize(H, W, patch_size * merge_size, min_pixels, max_pixels) (a bound not given takes
        smart_resize's default), exactly as `reference` resizes (see FusedInputNorm.resize), in the same
        pass; grid_thw follows. Without them, images must already have that size.

        `images`: an image [C, H, W] or a clip [T, C, H, W] ([H, W, C] / [T, H, W, C] with channel_dim=-1),
        or a list of them of different sizes, all on one device. H and W must be multiples of
        patch_size * merge_size (the processor's smart_resize makes them so); a clip whose T is not a multiple
        of temporal_patch_size is padded with its last frame, as the processor does.

        Returns (pixel_values, grid_thw) as Hugging Face's Qwen2-VL processor does: pixel_values
        [sum of grid_t * grid_h * grid_w, C * temporal_patch_size * patch_size**2] in `visual_dtype` on the
        images' device, rows in the processor's order; grid_thw an int64 CPU tensor [n_images, 3] taken
        from the shapes (no device sync). Qwen2-VL and Qwen2.5-VL: the defaults; Qwen3-VL: patch_size=16.
        """
        check_visual_dtype("FusedInputNorm.patchify", visual_dtype)
        if min_pixels is not None or max_pixels is not None:
            return self._patchify_resized(
                images,
                visual_dtype,
                (temporal_patch_size, patch_size, merge_size),
                channel_dim,
                min_pixels,
                max_pixels,
                resample,
                reference,
            )
        views, grid_thw = patch_views(images, self.channel, patch_size, temporal_patch_size, merge_size, channel_dim)
        device = views[0].device
        if not self.is_identity:
            self._check_device("FusedInputNorm.patchify", "images are", device)
        # Each view's first five axes enumerate its rows, the last four a row: one output for the whole
        # list, and each view's rows are a contiguous slice of it.
        rows = [math.prod(v.shape[:PATCH_CHANNEL_DIM]) for v in views]
        row_elems = math.prod(views[0].shape[PATCH_CHANNEL_DIM:])
        if torch.is_grad_enabled() and any(v.requires_grad for v in views):
            # A differentiable image (float pixels in a training or attribution loop): affine_out, which writes
            # into the shared output, cannot carry a graph, so each view goes through the differentiable op (or
            # a cast) and the rows are concatenated: one more copy, and the gradient reaches the image.
            pieces = [
                (
                    view.to(visual_dtype)
                    if self.is_identity
                    else ops.affine(view, self.weight, self.bias, PATCH_CHANNEL_DIM, visual_dtype)
                ).reshape(n, row_elems)
                for view, n in zip(views, rows, strict=True)
            ]
            return torch.cat(pieces), grid_thw
        pixel_values = torch.empty(sum(rows), row_elems, dtype=visual_dtype, device=device)
        for view, view_rows in zip(views, pixel_values.split(rows), strict=True):
            if self.is_identity:
                view_rows.view(view.shape).copy_(view)
            else:
                ops.affine_out(view_rows.view(view.shape), view, self.weight, self.bias, PATCH_CHANNEL_DIM)
        return pixel_values, grid_thw

    def _patchify_resized(
        self, images, visual_dtype, patches, channel_dim, min_pixels, max_pixels, resample, reference
    ):
        where = "FusedInputNorm.patchify"
        check_resample(where, resample, reference)
        frames, sizes, grid_thw = resized_patch_plan(images, self.channel, patches, channel_dim, min_pixels, max_pixels)
        temporal, patch, _ = patches
        rows = [(h // patch) * (w // patch) for h, w in sizes]
        device = frames[0].device
        weight, bias = self.affine_constants(device, where)
        pixel_values = torch.empty(
            sum(rows), self.channel * temporal * patch * patch, dtype=visual_dtype, device=device
        )
        for image, size, image_rows in zip(frames, sizes, pixel_values.split(rows), strict=True):
            resize_into(image_rows, image, weight, bias, size, (0, 0, *size), resample, reference, self._plans, patches)
        return pixel_values, grid_thw

    def resize(
        self,
        images: torch.Tensor,
        visual_dtype: torch.dtype,
        size: Sequence[int],
        *,
        resample: str = "bicubic",
        reference: str = "pil",
        crop: Sequence[int] | None = None,
        channel_dim: int = -3,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Resizes uint8 images exactly as the reference does, crops, and normalizes, in one pass.

        `images`: uint8 [C, H, W] or [B, C, H, W] ([H, W, C] / [B, H, W, C] with channel_dim=-1), any
        strides. `size` = (height, width) of the resampled image; `crop` = (top, left, height, width) inside it
        (default: all of it). `resample`: "bicubic", "bilinear" or "lanczos" (antialiased, as the references are);
        "cv2_cubic" / "cv2_cubic_f32" (OpenCV's INTER_CUBIC of the uint8 / float32 image) and
        "bilinear_no_antialias" / "bilinear_no_antialias_f32" (torch's F.interpolate with antialias=False of the
        uint8 image, on x86, and of the image as float32, on x86 at AVX2 and above) whatever the reference.
        `reference`: "pil" (PIL.Image.resize of the installed Pillow; "pil-13", "pil-12.2", "pil-12.1" pin a
        release's pass order) or "torchvision" (torchvision's uint8 resize, antialias=True, on the CPU).

        Returns [..., C, crop height, crop width], contiguous, in `visual_dtype`: before the affine, every
        value is the reference's uint8 pixel, bit for bit. An identity module returns those values cast.
        `out`: a tensor of that shape, dtype and device to write into (a slice of a batch's output) instead.
        """
        where = "FusedInputNorm.resize"
        check_visual_dtype(where, visual_dtype)
        check_resample(where, resample, reference)
        x, size, crop = resize_arguments(where, images, self.channel, size, crop, channel_dim)
        weight, bias = self.affine_constants(x.device, where)
        shape = (*images.shape[:-3], self.channel, *crop[2:])
        if out is None:
            out = torch.empty(shape, dtype=visual_dtype, device=x.device)
        elif not isinstance(out, torch.Tensor) or (out.shape, out.dtype, out.device, out.is_contiguous()) != (
            shape,
            visual_dtype,
            x.device,
            True,
        ):
            got = (tuple(out.shape), out.dtype, out.device) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(
                f"{where}: out must be a contiguous tensor of shape {shape}, dtype {visual_dtype} on {x.device}, "
                f"got {got}"
            )
        resize_into(out.view(x.shape[0], *shape[-3:]), x, weight, bias, size, crop, resample, reference, self._plans)
        return out

    def affine_constants(
        self, device: torch.device, where: str = "FusedInputNorm"
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """float32 weight/bias on `device` for the kernels that write into a caller's output (resize_into): the
        buffers (which must be on `device`), or (1, 0) for an identity module, whose kernels then only cast."""
        if not self.is_identity:
            self._check_device(where, "images are", device)
            return self.weight, self.bias
        key = (device.type, device.index)
        if key not in self._unit_params:
            self._unit_params[key] = (
                torch.ones(self.channel, dtype=torch.float32, device=device),
                torch.zeros(self.channel, dtype=torch.float32, device=device),
            )
        return self._unit_params[key]

    def extra_repr(self) -> str:
        layout = "" if self.layout is None else f", layout={self.layout!r}"
        if self.is_identity:
            return f"identity, channel={self.channel}{layout}"
        # Six significant digits, not six decimals: a std of 1e-7 must not print as 0.0.
        return (
            f"channel={self.channel}, rescale_factor={self.rescale_factor:g}, "
            f"mean={_six_digits(self.image_mean)}, std={_six_digits(self.image_std)}{layout}"
        )


def _six_digits(values: list[float]) -> list[float]:
    return [float(f"{v:.6g}") for v in values]


def _check_float32_constants(
    rescale: float, mean: list[float], std: list[float], weight: list[float], bias: list[float]
) -> None:
    """The op reads weight and bias as float32: a finite config whose constants overflow float32 (std 1e-39,
    rescale_factor 1e300) would store inf and turn every output into inf/NaN. Checked on the float32 values
    the buffers will hold, naming the argument that is out of range."""
    # On the CPU whatever the default device (meta, cuda): Python floats -> float32, no sync.
    stored = torch.tensor([weight, bias], dtype=torch.float64, device="cpu").to(torch.float32)
    finite = torch.isfinite(stored).tolist()
    for c, s in enumerate(std):
        if not finite[0][c]:
            # weight = rescale_factor / std: blame the factor further from 1.
            culprit = (
                f"rescale_factor ({rescale:g})"
                if abs(math.log(rescale)) > abs(math.log(s))
                else f"image_std[{c}] ({s:g})"
            )
            raise ValueError(
                f"FusedInputNorm: {culprit} is out of range: weight = rescale_factor / image_std[{c}] = {weight[c]:g} "
                f"is not a finite float32 (the op computes in float32)"
            )
        if not finite[1][c]:
            culprit = (
                f"image_mean[{c}] ({mean[c]:g})"
                if mean[c] != 0 and abs(math.log(abs(mean[c]))) > abs(math.log(s))
                else f"image_std[{c}] ({s:g})"
            )
            raise ValueError(
                f"FusedInputNorm: {culprit} is out of range: bias = -image_mean[{c}] / image_std[{c}] = {bias[c]:g} "
                f"is not a finite float32 (the op computes in float32)"
            )


def channel_view(
    pixel_values: torch.Tensor, channel: int, layout: Layout | None, channel_dim: int | None = None
) -> tuple[torch.Tensor, int]:
    """A view of `pixel_values` with its channels on one axis, and that axis: patches [P, C*K] -> [P, C, K]
    on axis 1, images as they are. Always a view (never a copy), so strided input reaches the op strided."""
    if channel_dim is not None and not is_int(channel_dim):
        raise TypeError(f"FusedInputNorm: channel_dim must be an int or None, got {type(channel_dim).__name__}")
    shape = tuple(pixel_values.shape)
    patches = layout == "pcl" or (layout is None and pixel_values.dim() == 2)
    if layout is not None and channel_dim is not None:
        raise ValueError(
            f"FusedInputNorm: channel_dim is for layout=None; layout={layout!r} fixes the channel axis "
            f"(got channel_dim={channel_dim})"
        )
    if layout == "pcl" and pixel_values.dim() != 2:
        raise ValueError(
            f"FusedInputNorm: layout='pcl' takes 2-D pixel_values [num_patches, {channel} * patch_elems], "
            f"got shape {shape}"
        )
    if layout == "bchw" and pixel_values.dim() != 4:
        raise ValueError(f"FusedInputNorm: layout='bchw' takes 4-D pixel_values [B, C, H, W], got shape {shape}")
    if layout is None and pixel_values.dim() < 2:
        raise ValueError(
            f"FusedInputNorm: pixel_values must be 2-D patches [num_patches, {channel} * patch_elems] or "
            f"images of rank >= 3, got shape {shape}"
        )
    if patches:
        if channel_dim is not None:
            raise ValueError(
                f"FusedInputNorm: channel_dim is for images of rank >= 3; 2-D pixel_values are patches "
                f"[num_patches, {channel} * patch_elems] with their channels inside each row (got shape {shape}, "
                f"channel_dim={channel_dim})"
            )
        row = shape[1]
        if row % channel != 0:
            raise ValueError(
                f"FusedInputNorm: a patch row of {row} elements does not split into {channel} channels "
                f"(pixel_values shape {shape})"
            )
        # Splitting one dim is always expressible in strides, so reshape returns a view here, never a copy
        # (and, unlike unflatten, torch 2.13's dynamo traces it under a torch.device context).
        return pixel_values.reshape(shape[0], channel, row // channel), 1
    dim = 1 if layout == "bchw" else -3 if channel_dim is None else channel_dim
    if not -pixel_values.dim() <= dim < pixel_values.dim():
        raise IndexError(f"FusedInputNorm: channel_dim {dim} is out of range for pixel_values of shape {shape}")
    if shape[dim] != channel:
        # Decoded images are HWC (PIL, OpenCV, NumPy): say so when the last axis is the one that fits.
        hint = (
            "; channels-last images ([..., H, W, C]) need channel_dim=-1"
            if layout is None and channel_dim is None and shape[-1] == channel
            else ""
        )
        raise ValueError(
            f"FusedInputNorm: pixel_values has {shape[dim]} channels on axis {dim} (shape {shape}), expected "
            f"{channel}{hint}"
        )
    return pixel_values, dim


def _check_forward_types(pixel_values: object, visual_dtype: object) -> None:
    # Named after the module's arguments: the op would report the same mistakes as `input` / `out_dtype`.
    if not isinstance(pixel_values, torch.Tensor):
        raise TypeError(f"FusedInputNorm: pixel_values must be a torch.Tensor, got {type(pixel_values).__name__}")
    if pixel_values.dtype not in INPUT_DTYPES:
        raise TypeError(
            f"FusedInputNorm: pixel_values must have one of the dtypes {dtype_names(INPUT_DTYPES)}, "
            f"got {pixel_values.dtype}"
        )
    check_visual_dtype("FusedInputNorm", visual_dtype)


def _to_device(values: list[float], device: torch.device) -> torch.Tensor:
    """Builds on the CPU, then moves to `device` without blocking the host."""
    cpu = torch.tensor(values, dtype=torch.float32, device="cpu")
    if device.type == "cpu":
        return cpu
    if device.type == "cuda" and torch.cuda.is_available():
        cpu = cpu.pin_memory()
    return cpu.to(device, non_blocking=True)
