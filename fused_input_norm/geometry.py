"""Output geometry, decided from shapes alone before any pixel moves: the processors' resize sizes, the center
crop box, and Qwen-VL's patch rows as zero-copy views of an image.

Hugging Face's Qwen2-VL image processor (also Qwen2.5-VL's and Qwen3-VL's) cuts a resized image [C, H, W]
into rows [grid_t * grid_h * grid_w, C * T * P * P] (P: patch_size, T: temporal_patch_size, m: merge_size).
Every element of a row is one pixel of the image, so the rows are a strided view of it: the frames
[T, C, H, W] split as [grid_t, T, C, H/(P*m), m, P, W/(P*m), m, P] and permuted to
[grid_t, H/(P*m), W/(P*m), m, m, C, T, P, P]. Written contiguously, that view is exactly the processor's
`pixel_values`; a still image is its one frame repeated T times, which a stride-0 expand gives for free.

Imports nothing from the package: every other module may use it.
"""

import math

import torch

# Qwen2VLImageProcessor's default pixel bounds (its size's shortest_edge / longest_edge).
QWEN_MIN_PIXELS = 56 * 56
QWEN_MAX_PIXELS = 28 * 28 * 1280
# Qwen2VLVideoProcessor's (per frame).
QWEN_VIDEO_MIN_PIXELS = 128 * 28 * 28
QWEN_VIDEO_MAX_PIXELS = 28 * 28 * 768
MAX_ASPECT_RATIO = 200  # smart_resize refuses a more elongated image
# Resize sides stay below this: the coefficient planner's doubles and int32 bounds are exact there.
MAX_SIDE = 1 << 24

# The channel axis of a patch view ([grid_t, H/(P*m), W/(P*m), m, m, C, T, P, P]).
PATCH_CHANNEL_DIM = 5
_TO_PATCH_ORDER = (0, 3, 6, 4, 7, 2, 1, 5, 8)


def smart_resize(
    height: int, width: int, factor: int = 28, min_pixels: int = QWEN_MIN_PIXELS, max_pixels: int = QWEN_MAX_PIXELS
) -> tuple[int, int]:
    """transformers' Qwen2-VL smart_resize: the (height, width) nearest the image's that are multiples of
    `factor`, with an area in [min_pixels, max_pixels] and the aspect ratio kept as well as that allows."""
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise ValueError(
            f"absolute aspect ratio must be smaller than {MAX_ASPECT_RATIO}, got {max(height, width) / min(height, width)}"
        )
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def smart_resize_clip(
    num_frames: int, height: int, width: int, temporal_factor: int, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """transformers' Qwen3-VL video smart_resize (GLM-4V's smart_resize too, line for line): like smart_resize,
    with the pixel bounds on the whole clip (frames rounded to temporal_factor) and frames smaller than
    `factor` scaled up first."""
    if num_frames < temporal_factor:
        raise ValueError(f"t:{num_frames} must be larger than temporal_factor:{temporal_factor}")
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height = int(height * scale)
        width = int(width * scale)
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise ValueError(
            f"absolute aspect ratio must be smaller than {MAX_ASPECT_RATIO}, got {max(height, width) / min(height, width)}"
        )
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((num_frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def shortest_edge_size(height: int, width: int, shortest_edge: int) -> tuple[int, int]:
    """transformers' get_resize_output_image_size(size=shortest_edge, default_to_square=False), as CLIP's
    processors resize: the short side to `shortest_edge`, the long side int(shortest_edge * long / short)."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = shortest_edge, int(shortest_edge * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def center_crop_box(size: tuple[int, int], crop_size: tuple[int, int]) -> tuple[int, int, int, int]:
    """transformers' center_crop of a crop that fits: (top, left, height, width), top = int((H - crop) / 2)."""
    crop_h, crop_w = crop_size
    return (size[0] - crop_h) // 2, (size[1] - crop_w) // 2, crop_h, crop_w


def padded_center_crop(
    size: tuple[int, int], crop_size: tuple[int, int], reference: str
) -> tuple[tuple[int, int, int, int], tuple[int, int]]:
    """transformers' center_crop of a crop larger than the image along a side: (top, left, height, width) of the
    image kept, and the (top, left) it lands at on the crop_size canvas of zeros. Along a side the crop exceeds,
    all of the image is kept and centered, the odd pixel of padding below (torchvision backend: tvF.pad by
    (crop - side) // 2 first) or above (Pil backend: NumPy's center_crop pads ceil((crop - side) / 2) first);
    along the other side the crop is cut from the middle as where it fits."""
    kept, placed = [], []
    for side, crop in zip(size, crop_size, strict=True):
        if crop > side:
            before = (crop - side) // 2 if reference == "torchvision" else (crop - side + 1) // 2
            kept.append((0, side))
            placed.append(before)
        else:
            kept.append(((side - crop) // 2, crop))
            placed.append(0)
    (top, height), (left, width) = kept
    return (top, left, height, width), (placed[0], placed[1])


def patch_grid(height: int, width: int, patch_size: int) -> tuple[int, int]:
    """(grid_h, grid_w) of a still image already sized to whole merged patches."""
    return height // patch_size, width // patch_size


def split_temporal(frames: torch.Tensor, temporal_patch_size: int) -> list[torch.Tensor]:
    """The frames [T', C, H, W] as [k * T, C, H, W] pieces whose temporal groups are complete, padding with the
    last frame as the processor does.

    A still image (one frame) and a clip one frame past a whole group end on a stride-0 expand of the last
    frame: no copy. A last group with several real frames and padding after them is no strided view of the
    clip, so it alone is gathered (a copy of T frames; never for temporal_patch_size 2).
    """
    whole, rest = divmod(frames.shape[0], temporal_patch_size)
    pieces = [frames[: whole * temporal_patch_size]] if whole else []
    if rest == 1:
        pieces.append(frames[-1:].expand(temporal_patch_size, -1, -1, -1))
    elif rest:
        pad = frames[-1:].expand(temporal_patch_size - rest, -1, -1, -1)
        pieces.append(torch.cat((frames[-rest:], pad)))
    return pieces


def patch_view(frames: torch.Tensor, patch_size: int, temporal_patch_size: int, merge_size: int) -> torch.Tensor:
    """[k * T, C, H, W] -> [k, H/(P*m), W/(P*m), m, m, C, T, P, P] with T = temporal_patch_size: no copy.
    Its first five axes enumerate the rows, the last four a row; the channel axis is PATCH_CHANNEL_DIM."""
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
