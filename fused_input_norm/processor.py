"""FusedImageProcessor: a Hugging Face image processor's work on the device, from a preprocessor_config.json.

Decode (torchvision; nvJPEG on CUDA), RGB conversion, the exact resize, center crop, rescale, normalize and
the output layout, with transformers' outputs: `pixel_values` (+ `image_grid_thw` for Qwen-VL) equal to
its processors' given the same decoded pixels. A call reads its images (images.py); the processor's family
(families/) plans it from their shapes alone: every output size, and the jobs (a box of an image, its
resized size, the output slots it fills); then one output is allocated, and each job is one fused resize +
normalize + layout kernel into its slots (resize.resize_into). One path for every family.
"""

import math
import os
from collections.abc import Mapping
from typing import Any

import torch

from . import config as configs
from . import families, ops, output_pool
from . import images as intake
from .checks import check_output_size, check_strided, check_visual_dtype, image_name, per_channel
from .module import FusedInputNorm
from .resize import PlanCache, check_reference, resize_into

_WHERE = "FusedImageProcessor"
ProcessorSettings = configs.ProcessorSettings


class FusedImageProcessor:
    """A Hugging Face image processor (Qwen2-VL / Qwen2.5-VL / Qwen3-VL, GLM-4.1V / GLM-4.5V, CLIP, SigLIP,
    Gemma 3, GOT-OCR2 / InternVL, LLaVA-OneVision, Idefics3 / SmolVLM, Llama 4, Pixtral) on the device.

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
        steps = getattr(families.FAMILIES[settings.kind], "normalize_steps", None)
        self._steps = steps(settings) if steps is not None else None
        if self._steps is not None:
            rescale, self._subtract, self._divisors = _stepwise(settings.normalization, self._steps)
            self._rescale = rescale.to(device)
            self._subtract = [t.to(device) for t in self._subtract]

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
        if getattr(families.FAMILIES[settings.kind], "TORCHVISION_ONLY", False) and reference != "torchvision":
            raise ValueError(
                f"{_WHERE}: reference {reference!r}: transformers has only a torchvision backend for the "
                f"{settings.kind} family's processor, so there is no Pil answer to reproduce: pass "
                f"reference='torchvision'"
            )
        device = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
        n = settings.normalization
        norm = FusedInputNorm(n.image_mean, n.image_std, n.rescale_factor, n.channel).to(device)
        return cls(settings, norm, device, reference, decoder)

    @property
    def transformers_dtype(self) -> torch.dtype:
        """The dtype of transformers' normalized pixel_values for this config: float32, or the dtype its
        processor rescales and normalizes in step by step (Llama 4's bfloat16)."""
        return self._steps if self._steps is not None else torch.float32

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

        Returns what the family's processor returns: Qwen-VL and GLM-4V {"pixel_values": [patches, C * T * P * P],
        "image_grid_thw": int64 [n, 3] on the CPU}; CLIP / SigLIP {"pixel_values": [n, C, h, w]}; Gemma 3
        {"pixel_values": [n + crops, C, h, w], "num_crops": int64 [n] on the CPU}; GOT-OCR2 {"pixel_values":
        [tiles, C, h, w], "num_patches": int64 [n] on the CPU}; LLaVA-OneVision {"pixel_values": [n, tiles, C, h,
        w], "image_sizes": int64 [n, 2], "batch_num_images": int64 [n], on the CPU}; Idefics3 / SmolVLM
        {"pixel_values": [samples, most slots, C, h, w], "pixel_attention_mask": int64 [samples, most slots, h,
        w] on the CPU (+ "rows", "cols" lists with return_row_col_info)}; Llama 4 {"pixel_values": [tiles, C, h,
        w], "aspect_ratios": int64 [n, 2]}; Pixtral {"pixel_values": [n, C, H, W] padded to the largest,
        "image_sizes": int64 [n, 2]}; the others as docs/families.md lists them (Gemma 4, LFM2-VL, MiniCPM-V 4.6,
        ...); pixel_values in `visual_dtype` on the processor's device.
        `visual_dtype=torch.uint8`: the resized bytes in that layout, without rescale and normalize (what
        transformers returns with do_rescale=False, do_normalize=False; vLLM normalizes them on the GPU).
        Every image is checked and every size decided before the first kernel runs.
        """
        s = self.settings
        if visual_dtype != torch.uint8:  # uint8: the resized bytes (see above)
            check_visual_dtype(_WHERE, visual_dtype)
        if isinstance(images, torch.Tensor):  # a batch: checked before it is split into images
            check_strided(_WHERE, "images", images)
        if self.reference == "pil" and not s.do_convert_rgb and self.norm.channel in (2, 4):
            # Pillow resizes an LA or RGBA image premultiplied by its alpha, and so does transformers' PIL
            # backend (it resizes through Pillow): a different sum from the resize's plain one per channel.
            raise ValueError(
                f"{_WHERE}: {self.norm.channel} channels with do_convert_rgb off and reference='pil': Pillow "
                f"resizes them premultiplied by their alpha, which is not implemented"
            )
        items = intake.as_list(images, _WHERE)
        family = families.FAMILIES[s.kind]
        count_samples = getattr(family, "samples", intake.samples)  # how its processor counts samples
        samples = count_samples(images, _WHERE) if getattr(family, "BY_SAMPLE", False) else None
        for i, item in enumerate(items):
            if isinstance(item, torch.Tensor):
                check_strided(_WHERE, image_name(i, len(items)), item)
        decoded = intake.decode_all(items, self.device, s.do_convert_rgb, self.norm.channel, _WHERE, self.decoder)
        shapes = [image.shape[-2:] for image, _ in decoded]
        by_reference = {"reference": self.reference} if getattr(family, "BY_REFERENCE", False) else {}
        by_sample = () if samples is None else (samples,)
        plan = family.plan(s, shapes, _WHERE, *by_sample, **by_reference)
        norm = self._bytes if visual_dtype == torch.uint8 else self.norm
        out_dtype = visual_dtype
        stepwise = self._steps is not None and visual_dtype != torch.uint8
        if stepwise:
            norm, out_dtype = self._rescale, self._steps
        weight, bias = norm.affine_constants(self.device, _WHERE)
        # (the steps' bfloat16 is no larger than any dtype asked: the output's check covers it)
        check_output_size(_WHERE, "pixel_values", plan.shape, visual_dtype)
        moved = (None, None)  # the call's image last moved to the device, and its pixels there
        stages = []  # uint8 [C, h, w] on the device: image len(decoded) + k is stages[k]

        def pixels(index: int) -> torch.Tensor:
            nonlocal moved
            if index >= len(decoded):
                return stages[index - len(decoded)]
            if moved[0] != index:  # a family's jobs of one image come together: each image moves once
                image, source = decoded[index]
                moved = index, intake.to_device_rgb(image, source, self.device, s.do_convert_rgb, self.reference)
            return moved[1]

        byte_weight, byte_bias = self._bytes.affine_constants(self.device, _WHERE)
        # Each stage the reference's uint8 bytes (the identity affine, a uint8 output), in a pooled block: its
        # pages are not faulted in again on every call, and it returns to the pool when the call ends.
        for stage in plan.stages:
            source = pixels(stage.image)
            if stage.pad:
                stages.append(_on_canvas(source, stage, self.device))
                continue
            scratch = output_pool.empty((source.shape[0], *stage.size), torch.uint8, self.device)
            self._resize(scratch[None], source, stage.box, byte_weight, byte_bias, stage.size, (0, 0, *stage.size))
            stages.append(scratch)
        # The kernel writes the patch rows in the plan's layout (the op's fourth value of patches, base.Plan):
        # channel-last rows [P, P, C], or each job's strips into its window of the call's [1, C, P, rows * P].
        layout = (1,) if plan.channel_last else (2,) if plan.strips else ()
        if plan.strips:
            rows, channel, patch, _ = plan.shape
            out = output_pool.empty((1, channel, patch, rows * patch), out_dtype, self.device)
        else:
            out = output_pool.empty(plan.shape, out_dtype, self.device)
            slots = out.flatten(0, plan.slot_dims - 1)
        for job in plan.jobs:
            start, stop = job.slots
            patches = (*job.patches, *layout) if job.patches else ()
            if plan.strips:  # the job's window of the strips
                dest = out[0, :, :, start * patch : stop * patch]
            elif patches:  # the slots are rows: one patch (or tile) of the resized box each
                dest = slots[start:stop].view(stop - start, -1)
            else:
                dest = slots[start:stop]
            self._resize(dest, pixels(job.image), job.box, weight, bias, job.size, job.crop, patches, job.pad)
        if stepwise:  # then mean subtracted and std divided, each rounded to the steps' dtype, as transformers does
            if plan.channel_last:  # the channel innermost in each row
                dim, channels = plan.slot_dims + 1, out.view(*plan.shape[: plan.slot_dims], -1, self.norm.channel)
            elif plan.strips:
                dim, channels = 1, out.view(1, self.norm.channel, -1)
            else:
                dim, channels = plan.slot_dims, out.view(*plan.shape[: plan.slot_dims + 1], -1)
            ops.affine_out(channels, channels, *self._subtract, dim)  # x * 1 - m: one rounding, as x - m
            for c, divisor in enumerate(self._divisors):
                channels.select(dim, c).div_(divisor)
        for start, stop, *box in plan.zero:  # slot ranges, or a box of [C, H, W] slots (padding after normalize)
            region = slots[start:stop]
            if box:
                top, left, height, width = box
                region = region[..., top : top + height, left : left + width]
            region.zero_()
        return {"pixel_values": out.to(visual_dtype), **plan.extras}

    def _resize(self, dest, pixels, box, weight, bias, size, crop, patches=(), pad=()) -> None:
        """One fused kernel: the box (None: all) of the [C, H, W] pixels resized to size, cropped, into dest."""
        if box is not None:
            top, left, height, width = box
            pixels = pixels[:, top : top + height, left : left + width]
        s = self.settings
        resize_into(
            dest, pixels[None], weight, bias, size, crop, s.resample, self.reference, self._plans, patches, pad=pad
        )


def _on_canvas(source: torch.Tensor, stage, device: torch.device) -> torch.Tensor:
    """A stage with a canvas: the box of the uint8 [C, H, W] source, unresized, on a canvas of one byte per
    channel (transformers pads such bytes before it resizes: LLaVA-OneVision's pad_to_square)."""
    canvas_h, canvas_w, top, left, fills = stage.pad
    if stage.box is not None:
        box_top, box_left, height, width = stage.box
        source = source[:, box_top : box_top + height, box_left : box_left + width]
    if tuple(source.shape[-2:]) != tuple(stage.size):
        raise ValueError(f"{_WHERE}: a stage on a canvas is not resized (size {stage.size}, box {source.shape[-2:]})")
    if len(fills) != source.shape[0]:
        raise ValueError(
            f"{_WHERE}: the padding color has {len(fills)} values for {source.shape[0]} channels (image_mean must "
            f"give one per channel)"
        )
    canvas = output_pool.empty((source.shape[0], canvas_h, canvas_w), torch.uint8, device)
    for channel, fill in enumerate(fills):
        canvas[channel].fill_(fill)
    canvas[:, top : top + stage.size[0], left : left + stage.size[1]].copy_(source)
    return canvas


def _stepwise(n: configs.Normalization, dtype: torch.dtype) -> tuple[FusedInputNorm, list[torch.Tensor], list[float]]:
    """transformers' rescale then normalize in `dtype`, each step rounded to it (x.to(dtype) * factor, - mean,
    / std, with mean and std rounded to dtype first, as it makes them tensors of the image's dtype): the
    kernel's affine, whose output rounded to dtype is the first step; the (weight 1, bias -mean) of the
    affine that subtracts the mean (x * 1 + b rounds once, as x - mean does); and per channel the std to
    divide by after it. Where every std is a power of two, dividing by it is exact and commutes with
    rounding: the kernel rescales by factor / std, the subtraction takes mean / std, and no division is
    left (Llama 4's 0.5: two passes over the output, not four)."""
    mean, std = (
        torch.tensor(per_channel(_WHERE, name, getattr(n, name), n.channel), dtype=dtype).tolist()
        for name in ("image_mean", "image_std")
    )
    ones = torch.ones(n.channel, dtype=torch.float32)
    if all(math.frexp(s)[0] == 0.5 for s in std):
        subtract = torch.tensor([-m / s for m, s in zip(mean, std, strict=True)], dtype=torch.float32)
        return FusedInputNorm(0.0, std, n.rescale_factor, n.channel), [ones, subtract], []
    subtract = torch.tensor([-m for m in mean], dtype=torch.float32)
    return FusedInputNorm(0.0, 1.0, n.rescale_factor, n.channel), [ones, subtract], std
