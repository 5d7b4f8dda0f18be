"""FusedInputNorm.patchify's arguments checked and turned into the patch views (geometry.patch_view) and
sizes its kernels write: one view per image, or one resized size per image, and grid_thw, from shapes alone.
"""

from collections.abc import Sequence

import torch

from .checks import INPUT_DTYPES, check_channel_dim, dtype_names, image_name, is_int, positive_int
from .geometry import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, patch_view, smart_resize, split_temporal

_WHERE = "FusedInputNorm.patchify"
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
        name = image_name(i, len(images))
        frames = _frames(image, name, channel, channel_dim)
        if frames.device != images[0].device:
            raise ValueError(
                f"{_WHERE}: every image must be on one device, got {images[0].device} (images[0]) "
                f"and {frames.device} ({name})"
            )
        _check_spatial(frames, name, patch_size * merge_size)
        for piece in split_temporal(frames, temporal_patch_size):
            views.append(patch_view(piece, patch_size, temporal_patch_size, merge_size))
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
        positive_int(_WHERE, name, value)
    check_channel_dim(_WHERE, channel_dim)
    if isinstance(images, torch.Tensor):
        images = [images]
    elif not isinstance(images, list | tuple) or len(images) == 0:
        got = images if isinstance(images, list | tuple) else type(images).__name__
        raise ValueError(f"{_WHERE}: images must be a tensor or a non-empty list of tensors, got {got!r}")

    return list(images)


def _frames(image: object, name: str, channel: int, channel_dim: int) -> torch.Tensor:
    """The image as a [T, C, H, W] view."""
    if not isinstance(image, torch.Tensor):
        raise TypeError(f"{_WHERE}: {name} must be a torch.Tensor, got {type(image).__name__}")
    if image.dtype not in INPUT_DTYPES:
        raise TypeError(f"{_WHERE}: {name} must have one of the dtypes {dtype_names(INPUT_DTYPES)}, got {image.dtype}")
    still, clip = _LAYOUTS[channel_dim]
    if image.dim() not in (3, 4):
        raise ValueError(
            f"{_WHERE}: {name} must be an image {still} or a clip {clip} (channel_dim={channel_dim}), "
            f"got shape {tuple(image.shape)}"
        )
    if image.shape[channel_dim] != channel:
        hint = (
            f"; channels-last {_LAYOUTS[-1][image.dim() == 4]} needs channel_dim=-1"
            if channel_dim == -3 and image.shape[-1] == channel
            else ""
        )
        raise ValueError(
            f"{_WHERE}: {name} has {image.shape[channel_dim]} channels on axis {channel_dim} "
            f"(shape {tuple(image.shape)}, layout {clip if image.dim() == 4 else still}), expected {channel}{hint}"
        )
    if image.dim() == 4 and image.shape[0] == 0:
        raise ValueError(f"{_WHERE}: {name} is a clip {clip} with no frames, shape {tuple(image.shape)}")
    frames = image if image.dim() == 4 else image.unsqueeze(0)
    return frames.movedim(-1, -3) if channel_dim == -1 else frames


def _check_spatial(frames: torch.Tensor, name: str, multiple: int) -> None:
    height, width = frames.shape[-2:]
    if height == 0 or width == 0 or height % multiple or width % multiple:
        raise ValueError(
            f"{_WHERE}: {name} is {height}x{width} (HxW); both must be positive multiples of "
            f"patch_size * merge_size = {multiple}: resize it first, as the processor's smart_resize does"
        )


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
    for name, value, default in (
        ("min_pixels", min_pixels, QWEN_MIN_PIXELS),
        ("max_pixels", max_pixels, QWEN_MAX_PIXELS),
    ):
        if value is None:
            value = default
        elif not is_int(value) or value < 1:
            raise ValueError(f"{_WHERE}: {name} must be an int >= 1 or None, got {value!r}")
        bounds[name] = value
    if bounds["max_pixels"] < factor * factor:
        raise ValueError(
            f"{_WHERE}: max_pixels = {bounds['max_pixels']} is below one merged patch "
            f"((patch_size * merge_size)^2 = {factor * factor})"
        )
    if bounds["min_pixels"] > bounds["max_pixels"]:
        raise ValueError(f"{_WHERE}: min_pixels = {bounds['min_pixels']} exceeds max_pixels = {bounds['max_pixels']}")
    frames, sizes, grids = [], [], []
    for i, image in enumerate(images):
        name = image_name(i, len(images))
        if isinstance(image, torch.Tensor) and image.dtype != torch.uint8:
            raise TypeError(
                f"{_WHERE}: {name} must be torch.uint8 to be resized (min_pixels/max_pixels), got {image.dtype}"
            )
        if isinstance(image, torch.Tensor) and image.dim() != 3:
            raise ValueError(
                f"{_WHERE}: {name} must be one image {_LAYOUTS[channel_dim][0]} to be resized "
                f"(min_pixels/max_pixels), got shape {tuple(image.shape)}"
            )
        view = _frames(image, name, channel, channel_dim)
        if view.device != frames[0].device if frames else False:
            raise ValueError(
                f"{_WHERE}: every image must be on one device, got {frames[0].device} (images[0]) "
                f"and {view.device} ({name})"
            )
        height, width = view.shape[-2:]
        if height < 1 or width < 1:
            raise ValueError(f"{_WHERE}: {name} is empty, shape {tuple(image.shape)}")
        try:
            size = smart_resize(height, width, factor, bounds["min_pixels"], bounds["max_pixels"])
        except ValueError as error:
            raise ValueError(f"{_WHERE}: {name} ({height}x{width}): {error}") from None
        frames.append(view)
        sizes.append(size)
        grids.append([1, size[0] // patch, size[1] // patch])
    return frames, sizes, torch.tensor(grids, dtype=torch.int64, device="cpu")
