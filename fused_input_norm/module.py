"""FusedInputNorm: the vision encoder's input normalization as one fused op, safe to build anywhere."""

import json
import math
import os
from collections.abc import Mapping, Sequence

import torch
from torch import nn

from . import ops
from .patchify import PATCH_CHANNEL_DIM, patch_views

# A config this close to (weight 1, bias 0) only casts. Decided on plain Python floats: never on a device
# tensor, so building the module under torch.device("cuda") forces no device-to-host sync.
_IDENTITY_TOL = 1e-6

Number = int | float

# What a preprocessor config means when it leaves a key out: the values nearly every Hugging Face image
# processor class defaults to (transformers' BaseImageProcessor rescale_factor, IMAGENET_STANDARD_MEAN/STD).
_CONFIG_DEFAULTS = {
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
}


def _per_channel(name: str, value: Number | Sequence[Number] | torch.Tensor, channel: int) -> list[float]:
    if isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            raise ValueError(
                f"FusedInputNorm: {name} must be given on the CPU (a list, a float or a CPU tensor), "
                f"got a tensor on {value.device}: reading it would synchronize the device"
            )
        value = value.flatten().tolist()
    values = [float(value)] * channel if isinstance(value, int | float) else [float(v) for v in value]
    if len(values) != channel:
        raise ValueError(f"FusedInputNorm: {name} must have one value per channel ({channel}), got {len(values)}")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"FusedInputNorm: {name} must be finite, got {values}")
    return values


class FusedInputNorm(nn.Module):
    """y = (x * rescale_factor - mean[c]) / std[c], as y = x * weight[c] + bias[c] in fp32, one kernel.

    Args:
        image_mean, image_std: per-channel mean and std (a sequence of `channel` numbers, one number for
            all channels, or a CPU tensor).
        rescale_factor: applied to the raw pixel before the mean is subtracted (1/255 for uint8 pixels).
        channel: number of channels.
        dtype: the dtype of the weight/bias buffers; only float32, since the op computes in float32.

    The constants and the identity decision are computed on the CPU. The weight/bias buffers are then
    placed on the default device (the active `torch.device` context, if any) with a non-blocking copy.
    """

    weight: torch.Tensor | None
    bias: torch.Tensor | None

    def __init__(
        self,
        image_mean: Number | Sequence[Number] | torch.Tensor,
        image_std: Number | Sequence[Number] | torch.Tensor,
        rescale_factor: Number = 1.0,
        channel: int = 3,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if not isinstance(channel, int) or channel < 1:
            raise ValueError(f"FusedInputNorm: channel must be a positive int, got {channel!r}")
        if dtype != torch.float32:
            raise ValueError(f"FusedInputNorm: dtype must be torch.float32 (the op computes in float32), got {dtype}")
        mean = _per_channel("image_mean", image_mean, channel)
        std = _per_channel("image_std", image_std, channel)
        rescale = float(rescale_factor)
        if not math.isfinite(rescale) or rescale <= 0:
            raise ValueError(f"FusedInputNorm: rescale_factor must be finite and > 0, got {rescale_factor!r}")
        if any(s <= 0 for s in std):
            raise ValueError(f"FusedInputNorm: image_std must be > 0 for every channel, got {std}")

        self.channel = channel
        self.rescale_factor = rescale
        self.image_mean = mean
        self.image_std = std
        weight = [rescale / s for s in std]
        bias = [-m / s for m, s in zip(mean, std, strict=True)]
        self.is_identity = all(abs(w - 1.0) <= _IDENTITY_TOL for w in weight) and all(
            abs(b) <= _IDENTITY_TOL for b in bias
        )
        if self.is_identity:
            self.register_buffer("weight", None)
            self.register_buffer("bias", None)
        else:
            self.register_buffer("weight", _to_default_device(weight))
            self.register_buffer("bias", _to_default_device(bias))

    @classmethod
    def identity(cls, channel: int = 3) -> "FusedInputNorm":
        """A module whose forward only casts."""
        return cls([0.0] * channel, [1.0] * channel, 1.0, channel)

    @classmethod
    def from_preprocessor_config(cls, config: Mapping | str | os.PathLike) -> "FusedInputNorm":
        """Builds the module from a Hugging Face image processor config: a dict, or the path of a
        `preprocessor_config.json`.

        Honours do_rescale/rescale_factor and do_normalize/image_mean/image_std (lists or scalars); the
        channel count is the length of image_mean (else image_std, else 3). Missing or null keys take
        the usual transformers defaults (rescale by 1/255, normalize with mean = std = 0.5). A config that
        neither rescales nor normalizes gives an identity module.
        """
        if not isinstance(config, Mapping):
            with open(config, encoding="utf-8") as f:
                config = json.load(f)

        def get(key):
            value = config.get(key)
            return _CONFIG_DEFAULTS[key] if value is None else value

        mean, std = get("image_mean"), get("image_std")
        sized = [v for v in (mean, std) if isinstance(v, Sequence | torch.Tensor)]
        channel = len(sized[0]) if sized else 3
        rescale = float(get("rescale_factor")) if get("do_rescale") else 1.0
        if not get("do_normalize"):
            mean, std = 0.0, 1.0
        return cls(mean, std, rescale, channel)

    def forward(self, pixel_values: torch.Tensor, visual_dtype: torch.dtype, *, channel_dim: int = -3) -> torch.Tensor:
        """Normalizes `pixel_values` into `visual_dtype` (float16, bfloat16 or float32), same shape.

        2-D input is the Qwen2-VL patch layout [num_patches, channel * patch_elems], channel-major in each
        row. Rank >= 3 input is images whose channel axis is `channel_dim` (-3: [..., C, H, W]; -1: NHWC).
        """
        if not isinstance(visual_dtype, torch.dtype) or not visual_dtype.is_floating_point:
            raise TypeError(f"FusedInputNorm: visual_dtype must be a floating torch.dtype, got {visual_dtype!r}")
        x, dim = self._channel_view(pixel_values, channel_dim)
        if self.is_identity:
            return pixel_values.to(visual_dtype)
        return ops.affine(x, self.weight, self.bias, dim, visual_dtype).view(pixel_values.shape)

    def patchify(
        self,
        images: torch.Tensor | Sequence[torch.Tensor],
        visual_dtype: torch.dtype,
        *,
        patch_size: int = 14,
        temporal_patch_size: int = 2,
        merge_size: int = 2,
        channel_dim: int = -3,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Cuts resized images into Qwen-VL patch rows and normalizes them, in one pass per image.

        `images`: an image [C, H, W] or a clip [T, C, H, W] ([H, W, C] / [T, H, W, C] with channel_dim=-1),
        or a list of them of different sizes, all on one device. H and W must be multiples of
        patch_size * merge_size (the processor's smart_resize makes them so); a clip whose T is not a multiple
        of temporal_patch_size is padded with its last frame, as the processor does.

        Returns (pixel_values, grid_thw) as Hugging Face's Qwen2-VL processor does: pixel_values
        [sum of grid_t * grid_h * grid_w, C * temporal_patch_size * patch_size**2] in `visual_dtype` on the
        images' device, rows in the processor's order; grid_thw an int64 CPU tensor [n_images, 3] taken
        from the shapes (no device sync). Qwen2-VL and Qwen2.5-VL: the defaults; Qwen3-VL: patch_size=16.
        """
        if not isinstance(visual_dtype, torch.dtype) or not visual_dtype.is_floating_point:
            raise TypeError(
                f"FusedInputNorm.patchify: visual_dtype must be a floating torch.dtype, got {visual_dtype!r}"
            )
        views, grid_thw = patch_views(images, self.channel, patch_size, temporal_patch_size, merge_size, channel_dim)
        # Each view's first five axes enumerate its rows, the last four a row: one output for the whole
        # list, and each view's rows are a contiguous slice of it.
        rows = [math.prod(v.shape[:PATCH_CHANNEL_DIM]) for v in views]
        row_elems = math.prod(views[0].shape[PATCH_CHANNEL_DIM:])
        pixel_values = torch.empty(sum(rows), row_elems, dtype=visual_dtype, device=views[0].device)
        for view, view_rows in zip(views, pixel_values.split(rows), strict=True):
            if self.is_identity:
                view_rows.view(view.shape).copy_(view)
            else:
                ops.affine_out(view_rows.view(view.shape), view, self.weight, self.bias, PATCH_CHANNEL_DIM)
        return pixel_values, grid_thw

    def _channel_view(self, pixel_values: torch.Tensor, channel_dim: int) -> tuple[torch.Tensor, int]:
        shape = tuple(pixel_values.shape)
        if pixel_values.dim() < 2:
            raise ValueError(
                f"FusedInputNorm: pixel_values must be 2-D patches [num_patches, {self.channel} * patch_elems] or "
                f"images of rank >= 3, got shape {shape}"
            )
        if pixel_values.dim() == 2:
            row = shape[1]
            if row % self.channel != 0:
                raise ValueError(
                    f"FusedInputNorm: a patch row of {row} elements does not split into {self.channel} channels "
                    f"(pixel_values shape {shape})"
                )
            return pixel_values.reshape(shape[0], self.channel, row // self.channel), 1
        if not -pixel_values.dim() <= channel_dim < pixel_values.dim():
            raise IndexError(f"FusedInputNorm: channel_dim {channel_dim} is out of range for shape {shape}")
        if shape[channel_dim] != self.channel:
            raise ValueError(
                f"FusedInputNorm: pixel_values has {shape[channel_dim]} channels on axis {channel_dim} "
                f"(shape {shape}), expected {self.channel}"
            )
        return pixel_values, channel_dim

    def extra_repr(self) -> str:
        if self.is_identity:
            return f"identity, channel={self.channel}"
        return (
            f"channel={self.channel}, rescale_factor={self.rescale_factor:g}, "
            f"mean={[round(m, 6) for m in self.image_mean]}, std={[round(s, 6) for s in self.image_std]}"
        )


def _to_default_device(values: list[float]) -> torch.Tensor:
    """Builds on the CPU, then moves to the default device without blocking the host."""
    cpu = torch.tensor(values, dtype=torch.float32, device="cpu")
    device = torch.get_default_device()
    if device.type == "cpu":
        return cpu
    if device.type == "cuda" and torch.cuda.is_available():
        cpu = cpu.pin_memory()
    return cpu.to(device, non_blocking=True)
