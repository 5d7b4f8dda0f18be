"""FusedImageProcessor: a Hugging Face image processor's work on the device, from a preprocessor_config.json.

Decode (torchvision; nvJPEG on CUDA), RGB conversion, the exact resize, center crop, rescale, normalize and
the output layout, with transformers' outputs: `pixel_values` (+ `image_grid_thw` for Qwen-VL) equal to
its processors' given the same decoded pixels. A call reads its images (images.py), decides every output
size from their shapes (geometry.py), allocates one output, and writes each image into its slice with one
fused resize + normalize + layout kernel (resize.resize_into).
"""

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import torch

from . import config as configs
from . import images as intake
from . import output_pool
from .checks import check_output_size, check_strided, check_visual_dtype, image_name
from .geometry import MAX_ASPECT_RATIO, center_crop_box, patch_grid, shortest_edge_size, smart_resize
from .module import FusedInputNorm
from .resize import PlanCache, check_reference, resize_into

_WHERE = "FusedImageProcessor"
ProcessorSettings = configs.ProcessorSettings


@dataclasses.dataclass(frozen=True)
class _Layout:
    """Where each image of a call goes: its resized size and crop box, and its output slice."""

    sizes: list[tuple[int, int]]
    crops: list[tuple[int, int, int, int]]
    rows: list[int] | None  # Qwen-VL: patch rows per image; None for [n, C, h, w]
    grid_thw: torch.Tensor | None


class FusedImageProcessor:
    """A Hugging Face image processor (Qwen2-VL / Qwen2.5-VL / Qwen3-VL, CLIP, SigLIP) on the device.

    Build it with `from_preprocessor_config`; call it on images to get what the processor returns.
    """

    def __init__(
        self,
        settings: ProcessorSettings,
        norm: FusedInputNorm,
        device: torch.device,
        reference: str,
        decoder: str = "exact",
    ):
        self.settings = settings
        self.norm = norm
        self.device = device
        self.reference = reference
        self.decoder = decoder
        self._plans = PlanCache()  # resize coefficients per size pair
        self._bytes = FusedInputNorm.identity(norm.channel)  # uint8 output: weight 1, bias 0

    @classmethod
    def from_preprocessor_config(
        cls,
        config: Mapping | str | os.PathLike,
        *,
        device: torch.device | str | None = None,
        reference: str = "pil",
        decoder: str = "exact",
    ) -> "FusedImageProcessor":
        """Reads a model's image processor config (a model directory, a JSON file or a dict; read as
        FusedInputNorm.from_preprocessor_config reads it, processor_config.json nesting included, with the same
        defaults).

        `device`: where images are decoded and processed (default: CUDA if available, else the CPU).
        `reference`: whose resize to reproduce bit for bit: "pil" (transformers' *Pil processors; "pil-13",
        "pil-12.2", "pil-12.1" pin a Pillow release's pass order) or "torchvision" (the default processors of
        transformers 5, on CPU tensors).
        `decoder`: how encoded bytes are decoded. "exact" (the default): as `PIL.Image.open` decodes them, on the
        CPU (torchvision's decoder where its pixels are the same), then copied to the device: the same answer
        on every device. "nvjpeg": JPEGs decoded on a CUDA device by nvJPEG, in one batched call (only the
        bytes cross PCIe); faster, but NOT Pillow's pixels (measured on an H200: 10.3% of a 12 MP photo's
        values differ, by up to 14 levels). Other formats, and other devices, decode as "exact".
        """
        check_reference(_WHERE, reference)
        if decoder not in intake.DECODERS:
            raise ValueError(
                f"{_WHERE}: decoder must be one of {', '.join(map(repr, intake.DECODERS))}, got {decoder!r}"
            )
        settings = configs.resolve(configs.read(config, _WHERE), _WHERE)
        device = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
        n = settings.normalization
        norm = FusedInputNorm(n.image_mean, n.image_std, n.rescale_factor, n.channel).to(device)
        return cls(settings, norm, device, reference, decoder)

    def __repr__(self) -> str:
        return (
            f"FusedImageProcessor({self.settings.kind}, device={str(self.device)!r}, reference={self.reference!r}, "
            f"decoder={self.decoder!r}, "
            f"{self.settings}, {self.norm.extra_repr()})"
        )

    def __call__(self, images: Any, visual_dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
        """Processes one image or a list of them.

        Each image is a PIL.Image (its pixels as they are: Pillow resamples nothing; read in place, without a
        copy, where Pillow keeps the image in one block of memory, as it does up to its block size), a uint8
        NumPy array or
        torch tensor ([H, W], or [C, H, W] / [H, W, C] inferred as transformers infers it; a 4-D array is a
        batch), or encoded bytes in any format Pillow opens, meaning exactly the PIL image
        `ImageOps.exif_transpose(Image.open(io.BytesIO(b)))` (the first frame of an animation).
        With do_convert_rgb, gray is repeated to 3 channels and RGBA is composited on white as transformers'
        convert_to_rgb does for that input: Pillow's integer alpha_composite for a PIL image and for bytes;
        for arrays and tensors, the Pil backend's rounding (reference "pil") or the torchvision backend's
        float32 blend (reference "torchvision").

        Returns Qwen-VL: {"pixel_values": [patches, C * T * P * P], "image_grid_thw": int64 [n, 3] on the CPU};
        CLIP / SigLIP: {"pixel_values": [n, C, h, w]}; pixel_values in `visual_dtype` on the processor's device.
        `visual_dtype=torch.uint8`: the resized bytes in that layout, without rescale and normalize (what
        transformers returns with do_rescale=False, do_normalize=False; vLLM normalizes them on the GPU).
        Every image is checked and every size decided before the first kernel runs.
        """
        s = self.settings
        if visual_dtype != torch.uint8:  # uint8: the resized bytes (see above)
            check_visual_dtype(_WHERE, visual_dtype)
        if isinstance(images, torch.Tensor):  # a batch: checked before it is split into images
            check_strided(_WHERE, "images", images)
        items = intake.as_list(images, _WHERE)
        for i, item in enumerate(items):
            if isinstance(item, torch.Tensor):
                check_strided(_WHERE, image_name(i, len(items)), item)
        decoded = intake.decode_all(items, self.device, s.do_convert_rgb, self.norm.channel, _WHERE, self.decoder)
        layout = self._layout([image.shape[-2:] for image, _ in decoded])
        norm = self._bytes if visual_dtype == torch.uint8 else self.norm
        weight, bias = norm.affine_constants(self.device, _WHERE)
        channel = self.norm.channel
        if layout.rows is not None:
            patches = (s.temporal_patch_size, s.patch_size, s.merge_size)
            shape = (sum(layout.rows), channel * s.temporal_patch_size * s.patch_size**2)
            check_output_size(_WHERE, "pixel_values", shape, visual_dtype)
            out = output_pool.empty(shape, visual_dtype, self.device)
            slices = out.split(layout.rows)
        else:
            patches = ()
            shape = (len(decoded), channel, *layout.crops[0][2:])
            check_output_size(_WHERE, "pixel_values", shape, visual_dtype)
            out = output_pool.empty(shape, visual_dtype, self.device)
            slices = out.unsqueeze(1)
        for (image, source), size, crop, image_out in zip(decoded, layout.sizes, layout.crops, slices, strict=True):
            pixels = intake.to_device_rgb(image, source, self.device, s.do_convert_rgb, self.reference)
            resize_into(
                image_out, pixels[None], weight, bias, size, crop, s.resample, self.reference, self._plans, patches
            )
        if layout.rows is not None:
            return {"pixel_values": out, "image_grid_thw": layout.grid_thw}
        return {"pixel_values": out}

    def _layout(self, shapes: list) -> _Layout:
        """Every image's resized size and crop, as transformers computes them, and where it goes in the output;
        what the processor would refuse or pad (images too elongated for smart_resize, sizes that do not
        patchify or crop or stack), refused here, before any work."""
        s = self.settings
        count = len(shapes)
        sizes, crops = [], []
        for i, (height, width) in enumerate(shapes):
            name = image_name(i, count)
            if s.kind == "qwen2_vl":
                size = self._qwen_size(name, height, width)
                crop = (0, 0, *size)
            else:
                size, crop = self._resize_and_crop(name, height, width)
            sizes.append(size)
            crops.append(crop)
        if s.kind == "qwen2_vl":
            grids = [(1, *patch_grid(*size, s.patch_size)) for size in sizes]
            rows = [t * h * w for t, h, w in grids]
            return _Layout(sizes, crops, rows, torch.tensor(grids, dtype=torch.int64, device="cpu"))
        if len({crop[2:] for crop in crops}) > 1:
            listed = ", ".join(f"{image_name(i, count)}: {h}x{w}" for i, (_, _, h, w) in enumerate(crops))
            raise ValueError(
                f"{_WHERE}: the images come out in different sizes ({listed}), which do not stack into one "
                f"pixel_values; give a config with do_center_crop or a fixed size"
            )
        return _Layout(sizes, crops, None, None)

    def _qwen_size(self, name: str, height: int, width: int) -> tuple[int, int]:
        s = self.settings
        factor = s.patch_size * s.merge_size
        if not s.do_resize:
            if height % factor or width % factor:
                raise ValueError(
                    f"{_WHERE}: {name} is {height}x{width}; without do_resize, H and W must be multiples of "
                    f"patch_size * merge_size = {factor}"
                )
            return height, width
        if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
            raise ValueError(
                f"{_WHERE}: {name} of size {height}x{width} has an aspect ratio over {MAX_ASPECT_RATIO}, which "
                f"Qwen-VL's smart_resize refuses"
            )
        return smart_resize(height, width, factor, s.size["shortest_edge"], s.size["longest_edge"])

    def _resize_and_crop(self, name: str, height: int, width: int) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
        """CLIP / SigLIP: the resized size and the crop box in it, as transformers computes them."""
        s = self.settings
        if not s.do_resize:
            size = (height, width)
        elif "shortest_edge" in s.size:
            size = shortest_edge_size(height, width, s.size["shortest_edge"])
        else:
            size = (s.size["height"], s.size["width"])
        if not s.do_center_crop:
            return size, (0, 0, *size)
        crop_h, crop_w = s.crop_size
        if crop_h > size[0] or crop_w > size[1]:
            raise ValueError(
                f"{_WHERE}: {name} is {height}x{width}, smaller than crop_size {crop_h}x{crop_w} (do_resize is off)"
            )
        return size, center_crop_box(size, s.crop_size)
