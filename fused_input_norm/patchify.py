"""Qwen-VL patch rows as zero-copy views of the image: the index math behind FusedInputNorm.patchify.

Hugging Face's Qwen2-VL image processor (also used by Qwen2.5-VL and Qwen3-VL) cuts a resized image
[C, H, W] into rows [grid_t * grid_h * grid_w, C * T * P * P] (P: patch_size, T: temporal_patch_size,
m: merge_size). Every element of a row is one pixel of the image, so the rows are a strided view of it:
the frames [T, C, H, W] split as [grid_t, T, C, H/(P*m), m, P, W/(P*m), m, P] and permuted to
[grid_t, H/(P*m), W/(P*m), m, m, C, T, P, P]. Written contiguously, that view is exactly the processor's
`pixel_values`; a still image is its one frame repeated T times, which a stride-0 expand gives for free.
"""

from collections.abc import Sequence

import torch

from .ops import INPUT_DTYPES
from .resize import smart_resize

# The channel axis of a patch view ([grid_t, H/(P*m), W/(P*m), m, m, C, T, P, P]).
PATCH_CHANNEL_DIM = 5
_TO_PATCH_ORDER = (0, 3, 6, 4, 7, 2, 1, 5, 8)
_LAYOUTS = {-3: ("[C, H, W]", "[T, C, H, W]"), -1: ("[H, W, C]", "[T, H, W, C]")}


def patch_views(
    images: torch.Tensor | Sequence[torch.Tensor],
    channel: int,
    patch_size: int,
    temporal_patch_size: int,
    merge_size: int,
    channel_dim: int,
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Checks `images` and returns the 9-D patch views to write one after the other, and grid_thw.

    One view per image, two for a clip whose frame count is not a multiple of temporal_patch_size (its
    last group repeats the last frame, as the processor pads). grid_thw is an int64 CPU tensor
    [n_images, 3] computed from shapes only.
    """
    images = _checked_images(images, patch_size, temporal_patch_size, merge_size, channel_dim)
    views, grids = [], []
    for i, image in enumerate(images):
        name = f"images[{i}]" if len(images) > 1 else "images"
        frames = _frames(image, name, channel, channel_dim)
        if frames.device != images[0].device:
            raise ValueError(
                f"FusedInputNorm.patchify: every image must be on one device, got {images[0].device} (images[0]) "
                f"and {frames.device} ({name})"
            )
        _check_spatial(frames, name, patch_size * merge_size)
        for piece in _split_temporal(frames, temporal_patch_size):
            views.append(_patch_view(piece, patch_size, temporal_patch_size, merge_size))
        num_frames, _, height, width = frames.shape
        grids.append([-(-num_frames // temporal_patch_size), height // patch_size, width // patch_size])
    return views, torch.tensor(grids, dtype=torch.int64, device="cpu")


def _checked_images(
    images: object, patch_size: object, temporal_patch_size: object, merge_size: object, channel_dim: object
) -> list:
    """The checks every patchify call makes first: the patch geometry, channel_dim, and images as a non-empty
    list."""
    for name, value in (
        ("patch_size", patch_size),
        ("temporal_patch_size", temporal_patch_size),
        ("merge_size", merge_size),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"FusedInputNorm.patchify: {name} must be an int >= 1, got {value!r}")
    if not isinstance(channel_dim, int) or isinstance(channel_dim, bool):
        raise TypeError(f"FusedInputNorm.patchify: channel_dim must be -3 or -1, got {type(channel_dim).__name__}")
    if channel_dim not in _LAYOUTS:
        raise ValueError(
            f"FusedInputNorm.patchify: channel_dim must be -3 (channels first) or -1 (channels last), got {channel_dim!r}"
        )
    if isinstance(images, torch.Tensor):
        images = [images]
    elif not isinstance(images, list | tuple) or len(images) == 0:
        got = images if isinstance(images, list | tuple) else type(images).__name__
        raise ValueError(
            f"FusedInputNorm.patchify: images must be a tensor or a non-empty list of tensors, got {got!r}"
        )

    return list(images)


def _frames(image: object, name: str, channel: int, channel_dim: int) -> torch.Tensor:
    """The image as a [T, C, H, W] view."""
    if not isinstance(image, torch.Tensor):
        raise TypeError(f"FusedInputNorm.patchify: {name} must be a torch.Tensor, got {type(image).__name__}")
    if image.dtype not in INPUT_DTYPES:
        raise TypeError(
            f"FusedInputNorm.patchify: {name} must have one of the dtypes {', '.join(map(str, INPUT_DTYPES))}, "
            f"got {image.dtype}"
        )
    still, clip = _LAYOUTS[channel_dim]
    if image.dim() not in (3, 4):
        raise ValueError(
            f"FusedInputNorm.patchify: {name} must be an image {still} or a clip {clip} (channel_dim={channel_dim}), "
            f"got shape {tuple(image.shape)}"
        )
    if image.shape[channel_dim] != channel:
        hint = (
            f"; channels-last {_LAYOUTS[-1][image.dim() == 4]} needs channel_dim=-1"
            if channel_dim == -3 and image.shape[-1] == channel
            else ""
        )
        raise ValueError(
            f"FusedInputNorm.patchify: {name} has {image.shape[channel_dim]} channels on axis {channel_dim} "
            f"(shape {tuple(image.shape)}, layout {clip if image.dim() == 4 else still}), expected {channel}{hint}"
        )
    if image.dim() == 4 and image.shape[0] == 0:
        raise ValueError(f"FusedInputNorm.patchify: {name} is a clip {clip} with no frames, shape {tuple(image.shape)}")
    frames = image if image.dim() == 4 else image.unsqueeze(0)
    return frames.movedim(-1, -3) if channel_dim == -1 else frames


def _check_spatial(frames: torch.Tensor, name: str, multiple: int) -> None:
    height, width = frames.shape[-2:]
    if height == 0 or width == 0 or height % multiple or width % multiple:
        raise ValueError(
            f"FusedInputNorm.patchify: {name} is {height}x{width} (HxW); both must be positive multiples of "
            f"patch_size * merge_size = {multiple}: resize it first, as the processor's smart_resize does"
        )


def _split_temporal(frames: torch.Tensor, temporal_patch_size: int) -> list[torch.Tensor]:
    """The frames as [k * T, C, H, W] pieces whose temporal groups are complete, padding by the last frame.

    A still image (one frame) and a clip one frame past a whole group end on a stride-0 expand of the
    last frame: no copy. A last group with several real frames and padding after them is no strided view
    of the clip, so it alone is gathered (a copy of T frames; never for temporal_patch_size 2).
    """
    whole, rest = divmod(frames.shape[0], temporal_patch_size)
    pieces = [frames[: whole * temporal_patch_size]] if whole else []
    if rest == 1:
        pieces.append(frames[-1:].expand(temporal_patch_size, -1, -1, -1))
    elif rest:
        pad = frames[-1:].expand(temporal_patch_size - rest, -1, -1, -1)
        pieces.append(torch.cat((frames[-rest:], pad)))
    return pieces


def _patch_view(frames: torch.Tensor, patch_size: int, temporal_patch_size: int, merge_size: int) -> torch.Tensor:
    """[k * T, C, H, W] -> [k, H/(P*m), W/(P*m), m, m, C, T, P, P] with T = temporal_patch_size: no copy."""
    _, channel, height, width = frames.shape
    return frames.view(
        -1,
        temporal_patch_size,
        channel,
        height // (patch_size * merge_size),
        merge_size,
        patch_size,
        width // (patch_size * merge_size),
        merge_size,
        patch_size,
    ).permute(_TO_PATCH_ORDER)


def resized_patch_plan(
    images: torch.Tensor | Sequence[torch.Tensor],
    channel: int,
    patches: tuple[int, int, int],
    channel_dim: int,
    min_pixels: int | None,
    max_pixels: int | None,
) -> tuple[list[torch.Tensor], list[tuple[int, int]], torch.Tensor]:
    """Checks patchify's resizing arguments: the images as [1, C, H, W] uint8 views, the size smart_resize
    gives each, and grid_thw (an int64 CPU tensor, from shapes only)."""
    temporal, patch, merge = patches
    images = _checked_images(images, patch, temporal, merge, channel_dim)
    factor = patch * merge
    bounds = {}
    for name, value, default in (("min_pixels", min_pixels, 56 * 56), ("max_pixels", max_pixels, 28 * 28 * 1280)):
        if value is None:
            value = default
        elif not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"FusedInputNorm.patchify: {name} must be an int >= 1 or None, got {value!r}")
        bounds[name] = value
    if bounds["max_pixels"] < factor * factor:
        raise ValueError(
            f"FusedInputNorm.patchify: max_pixels = {bounds['max_pixels']} is below one merged patch "
            f"((patch_size * merge_size)^2 = {factor * factor})"
        )
    if bounds["min_pixels"] > bounds["max_pixels"]:
        raise ValueError(
            f"FusedInputNorm.patchify: min_pixels = {bounds['min_pixels']} exceeds max_pixels = {bounds['max_pixels']}"
        )
    frames, sizes, grids = [], [], []
    for i, image in enumerate(images):
        name = f"images[{i}]" if len(images) > 1 else "images"
        if isinstance(image, torch.Tensor) and image.dtype != torch.uint8:
            raise TypeError(
                f"FusedInputNorm.patchify: {name} must be torch.uint8 to be resized (min_pixels/max_pixels), got "
                f"{image.dtype}"
            )
        if isinstance(image, torch.Tensor) and image.dim() != 3:
            raise ValueError(
                f"FusedInputNorm.patchify: {name} must be one image {_LAYOUTS[channel_dim][0]} to be resized "
                f"(min_pixels/max_pixels), got shape {tuple(image.shape)}"
            )
        view = _frames(image, name, channel, channel_dim)
        if view.device != frames[0].device if frames else False:
            raise ValueError(
                f"FusedInputNorm.patchify: every image must be on one device, got {frames[0].device} (images[0]) "
                f"and {view.device} ({name})"
            )
        height, width = view.shape[-2:]
        if height < 1 or width < 1:
            raise ValueError(f"FusedInputNorm.patchify: {name} is empty, shape {tuple(image.shape)}")
        try:
            size = smart_resize(height, width, factor, bounds["min_pixels"], bounds["max_pixels"])
        except ValueError as error:
            raise ValueError(f"FusedInputNorm.patchify: {name} ({height}x{width}): {error}") from None
        frames.append(view)
        sizes.append(size)
        grids.append([1, size[0] // patch, size[1] // patch])
    return frames, sizes, torch.tensor(grids, dtype=torch.int64, device="cpu")
