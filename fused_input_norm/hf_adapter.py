"""FusedHFImageProcessor: FusedImageProcessor behind a transformers image processor's call signature, so code
that holds a transformers processor (vLLM's multimodal processors) can be handed this one instead.

It wraps the transformers image processor it replaces (`upstream`) and resolves every call's kwargs exactly
as upstream's `preprocess` does (its defaults, then its `_standardize_kwargs`: min_pixels / max_pixels /
size aliases included). Where the resolved call is one FusedImageProcessor reproduces, it serves it:
`pixel_values` equal to upstream's (the resized bytes when do_rescale and do_normalize are off: uint8 rows
from the torchvision backend, the same values as float32 from the Pil one; float32 otherwise, bfloat16 where
transformers normalizes in it: Llama 4) and the same
`image_grid_thw`. Any other call (a kwarg it does not reproduce, an input type it does
not take) goes to upstream unchanged, and the first call of each kind logs why. Every other attribute
(merge_size, size, get_number_of_image_patches, ...) is upstream's, read AND written: `adapter.size = ...`
or `setattr(adapter, "do_normalize", False)` sets upstream's attribute, and later calls read it, as they
would on transformers' processor (vLLM writes such attributes for some models).

Each adapter keeps at most MAX_PROCESSORS FusedImageProcessors / FusedVideoProcessors (one per distinct
resolved config and device, least recently used dropped first), so per-request kwargs from a client cannot
grow it without bound; a dropped config is rebuilt on its next call (a few hundred microseconds).

For a processor no family reproduces, FusedHFGenericImageProcessor / FusedHFGenericVideoProcessor (the generic
path) run upstream's own preprocess with only transformers' backend primitives replaced (hf_primitives);
stand_in, which both engine plugins call, falls back to them where no family stands in. A family adapter's call
that its family does not reproduce goes to the generic path too, where upstream's class is on a backend it
serves (one log line per reason), and to upstream only where it is not.

Imports transformers only when called: importing this module never does.
"""

import dataclasses
import functools
import importlib.metadata
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from . import config as configs
from . import families, video
from .families.base import unstack
from .processor import FusedImageProcessor
from .video import FusedVideoProcessor

logger = logging.getLogger(__name__)

# Resolved kwargs that change nothing FusedImageProcessor computes (grouping only batches same-sized images;
# default_to_square was consumed by size's standardization; image_seq_length is the processor's token count,
# which PaliGemma's checkpoints put in the image processor's config).
_NO_EFFECT = {"disable_grouping", "default_to_square", "image_seq_length"}
# Kwargs that must be off (None or False) to be reproduced, unless the processor's family reads them (they are
# then in its config, not left over).
_OFF = ("do_center_crop", "crop_size", "do_pad", "pad_size")
# How many processors (distinct resolved configs x devices) one adapter keeps: a server sees one or a few
# (float32 and uint8 output, a per-request max_pixels); more are rebuilt on demand rather than kept forever.
MAX_PROCESSORS = 8
# How many distinct reasons for handing a call to transformers one adapter logs (each once): a reason can
# carry a client's value, so the set of those already logged is bounded too.
MAX_LOGGED_REASONS = 64


class _Processors:
    """A thread-safe LRU of processors by key, at most `limit` of them; `build()` runs outside the lock (two
    threads may build the same one; one of them is kept)."""

    def __init__(self, limit: int = MAX_PROCESSORS):
        self.limit = limit
        self._lock = threading.Lock()
        self._items: OrderedDict = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: tuple, build: Callable[[], Any]) -> Any:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
                return item
        item = build()
        with self._lock:
            item = self._items.setdefault(key, item)
            self._items.move_to_end(key)
            while len(self._items) > self.limit:
                self._items.popitem(last=False)
        return item

    def __getstate__(self) -> dict:  # a lock does not pickle or deepcopy: a copy starts empty
        return {"limit": self.limit}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["limit"])


class _Adapter:
    """What both adapters share: their own few attributes (_OWN), every other one upstream's (read, written
    and deleted there), the bounded processor cache, and the once-per-reason log of calls handed back.

    An adapter's type is a subclass of its upstream's class, made once per (adapter class, upstream class):
    `isinstance(adapter, type(upstream))` holds (vLLM's Qwen3-VL code tells videos from images that way, SGLang
    passes device= only to a transformers BaseImageProcessor), and lookups on `type(adapter)` (`valid_kwargs`)
    find upstream's class attributes. No upstream __init__ runs: the adapter holds no state of its own beyond
    _OWN, and __getattribute__ sends every other name to upstream, so upstream's class attributes (inherited
    here) never hide the values upstream's instance holds."""

    _OWN = frozenset({"upstream", "reference", "_processors", "_logged", "_log", "_generic"})
    # The upstream class this subclass stands in for; None on the adapter classes themselves.
    _upstream_class: type | None = None
    # Names an adapter answers itself (its own state, its classes' methods, dunders); set per adapter class.
    _adapter_names: frozenset = frozenset()

    @classmethod
    def _extra_bases(cls, upstream_class: type) -> tuple[type, ...]:
        """Classes the stand-in subclass lists after upstream's (the generic path's primitives); none here."""
        return ()

    @classmethod
    def _extra_namespace(cls, upstream_class: type) -> dict[str, Any]:
        """Functions the stand-in subclass defines itself (the generic path's by-name calls); none here."""
        return {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_upstream_class" not in vars(cls):  # an adapter class, not one of its stand-in subclasses
            cls._adapter_names = cls._OWN | {
                name for klass in cls.__mro__ if issubclass(klass, _Adapter) for name in vars(klass)
            }

    def __new__(cls, upstream: Any = None, *args: Any, **kwargs: Any) -> "_Adapter":
        # Built as its stand-in subclass for upstream's class. (Without upstream: a copy or unpickling, whose
        # class is already the subclass; see __reduce_ex__.)
        if cls._upstream_class is None and upstream is not None:
            cls = _stand_in_class(cls, type(upstream))
        return object.__new__(cls)

    def __init__(self, upstream: Any, reference: str, log: logging.Logger):
        self.upstream = upstream
        self.reference = reference
        self._processors = _Processors()
        self._logged: set[str] = set()
        self._log = log  # the host's logger (vLLM's), where its users read why a call went to transformers

    def __getattribute__(self, name: str) -> Any:
        if name in type(self)._adapter_names or (name.startswith("__") and name.endswith("__")):
            return object.__getattribute__(self, name)
        state = object.__getattribute__(self, "__dict__")
        if "upstream" not in state:  # half built (while unpickling): nothing to forward to yet
            raise AttributeError(name)
        return getattr(state["upstream"], name)

    def __getattr__(self, name: str) -> Any:
        # Reached only when the adapter's own lookup failed (e.g. `upstream` on a half-built object): an
        # upstream class's __getattr__, inherited here, must not answer for the adapter.
        raise AttributeError(name)

    def _owns(self, name: str) -> bool:
        """The adapter's own state and its classes' names (its methods: patching `adapter.preprocess` in a test
        patches the adapter's); every other name is upstream's."""
        return name in type(self)._adapter_names

    def __setattr__(self, name: str, value: Any) -> None:
        # Written where calls read it: a write on the wrapper alone would be silently ignored.
        if self._owns(name):
            object.__setattr__(self, name, value)
        else:
            setattr(self.upstream, name, value)

    def __delattr__(self, name: str) -> None:
        if self._owns(name):
            object.__delattr__(self, name)
        else:
            delattr(self.upstream, name)

    def __reduce_ex__(self, protocol: int) -> tuple:
        # The stand-in subclass is made at run time (pickle cannot name it): rebuilt from the adapter class
        # and upstream's class, then given this adapter's own state (upstream included).
        adapter_class = next(k for k in type(self).__mro__ if "_upstream_class" not in vars(k))
        state = dict(object.__getattribute__(self, "__dict__"))
        state.pop("_generic", None)  # made again on first use
        return (_rebuild, (adapter_class, type(self)._upstream_class), state)

    def __setstate__(self, state: dict) -> None:
        object.__getattribute__(self, "__dict__").update(state)

    def _handed_back(self, reason: str) -> None:
        """Logs why transformers serves a call, once per reason (at most MAX_LOGGED_REASONS of them)."""
        self._log_once(reason, f"transformers' {type(self.upstream).__name__} serves this call")

    def _to_generic_path(self, reason: str) -> None:
        """Logs why a family adapter's call goes to the generic path, once per reason (shared with _handed_back's)."""
        self._log_once(
            reason,
            f"the generic path serves this call (transformers' {type(self.upstream).__name__} with the package's "
            "primitives)",
        )

    def _log_once(self, reason: str, who: str) -> None:
        if reason in self._logged or len(self._logged) > MAX_LOGGED_REASONS:
            return
        self._logged.add(reason)
        if len(self._logged) > MAX_LOGGED_REASONS:
            reason = f"{reason} (further reasons are not logged: {MAX_LOGGED_REASONS} already were)"
        self._log.info("fused_input_norm: %s: %s", who, reason)

    def _generic_path(self) -> "_GenericAdapter | None":
        """Where a family adapter's call that its family does not reproduce goes: the generic adapter around the
        same upstream (made on first use, then kept), which runs upstream's own code with the package's exact
        primitives; None where upstream's class is on no backend the generic path serves (upstream answers)."""
        state = object.__getattribute__(self, "__dict__")
        if "_generic" not in state:
            generic = next((g for family, g in GENERIC.items() if isinstance(self, family)), None)
            if generic is not None and unsupported_generic(self.upstream) is None:
                generic = generic(self.upstream, self._log)
            else:
                generic = None
            state["_generic"] = generic
        return state["_generic"]


# One stand-in subclass per (adapter class, upstream class), kept for the process: there are as many as
# processor classes a host loads (a few), and a class made twice would make isinstance checks between two
# adapters of one upstream class disagree.
_STAND_IN_CLASSES: dict[tuple[type, type], type] = {}
_STAND_IN_LOCK = threading.Lock()


def _stand_in_class(adapter_class: type, upstream_class: type) -> type:
    """`adapter_class` as a subclass of `upstream_class`: the adapter's methods first, upstream's class next.
    It carries upstream's name and module: lookups keyed on them (transformers' tests find a processor's
    Kwargs class in `sys.modules[type(processor).__module__]`) see upstream's."""
    with _STAND_IN_LOCK:
        cls = _STAND_IN_CLASSES.get((adapter_class, upstream_class))
        if cls is None:
            namespace = {
                "_upstream_class": upstream_class,
                "__module__": upstream_class.__module__,
                "__qualname__": upstream_class.__qualname__,
                "__doc__": adapter_class.__doc__,
                **adapter_class._extra_namespace(upstream_class),
            }
            bases = (adapter_class, upstream_class, *adapter_class._extra_bases(upstream_class))
            cls = type(upstream_class.__name__, bases, namespace)
            _STAND_IN_CLASSES[(adapter_class, upstream_class)] = cls
        return cls


def _rebuild(adapter_class: type, upstream_class: type) -> _Adapter:
    """An empty adapter of the stand-in class (pickle and deepcopy then set its state)."""
    return object.__new__(_stand_in_class(adapter_class, upstream_class))


def reference_of(upstream: object) -> str | None:
    """Whose resize upstream runs: "torchvision" (transformers 5's default processors, what vLLM gets),
    "pil" (the *Pil processors, use_fast=False), or None for a backend this does not know."""
    names = {cls.__name__ for cls in type(upstream).__mro__}
    if "TorchvisionBackend" in names:
        return "torchvision"
    if "PilBackend" in names:
        return "pil"
    return None


def unsupported(upstream: object) -> str | None:
    """Why FusedHFImageProcessor cannot stand in for `upstream` at all (its class); None when it can."""
    if reference_of(upstream) is None:
        return f"{type(upstream).__name__} is neither transformers' torchvision nor its PIL backend"
    if configs.kind_of({"image_processor_type": type(upstream).__name__}) is None:
        return f"{type(upstream).__name__} is not an image processor FusedImageProcessor reproduces"
    for method in ("_standardize_kwargs", "preprocess"):
        if not callable(getattr(upstream, method, None)):
            return f"{type(upstream).__name__} has no {method}"
    if not isinstance(getattr(upstream, "_valid_kwargs_names", None), list):
        return f"{type(upstream).__name__} has no _valid_kwargs_names"
    # Its configuration is not checked here: the adapter builds for every configuration its class accepts
    # (Gemma 3's checkpoints leave the pan-and-scan settings null, which Gemma3Processor's call fills), and
    # each call decides, with the kwargs it brings, whether it is served or handed back.
    return None


class FusedHFImageProcessor(_Adapter):
    """A transformers image processor's interface, for the families FusedImageProcessor reproduces
    (`__call__`/`preprocess(images, **kwargs)` returning a BatchFeature, and every attribute of `upstream`, read and written), served by FusedImageProcessor where
    it reproduces the call; at most MAX_PROCESSORS of those kept; see the module docstring."""

    def __init__(self, upstream: Any, log: logging.Logger = logger):
        reason = unsupported(upstream)
        if reason is not None:
            raise ValueError(f"FusedHFImageProcessor: cannot serve {type(upstream).__name__}: {reason}")
        super().__init__(upstream, reference_of(upstream), log)

    def __repr__(self) -> str:
        return f"FusedHFImageProcessor(reference={self.reference!r}, upstream={type(self.upstream).__name__})"

    def __call__(self, images: Any, *args: Any, **kwargs: Any) -> Any:
        return self.preprocess(images, *args, **kwargs)

    def preprocess(self, images: Any, *args: Any, **kwargs: Any) -> Any:
        served = self._serve(images, args, kwargs)
        if isinstance(served, str):
            generic = self._generic_path()
            if generic is not None:  # upstream's own code, with the exact primitives: equal by construction
                self._to_generic_path(served)
                return generic.preprocess(images, *args, **kwargs)
            self._handed_back(served)
            return self.upstream.preprocess(images, *args, **kwargs)
        return served

    def _serve(self, images: Any, args: tuple, kwargs: dict) -> Any:
        """The BatchFeature, or why this call goes to upstream."""
        if args:
            return "positional arguments after images"
        flat = _flat(images)
        if not flat:
            return "no images"
        if any(not _is_image(image) for image in flat):
            return "an image that is not a PIL image, an array or a tensor (nested lists, URLs, paths)"
        layout = kwargs.get("input_data_format", getattr(self.upstream, "input_data_format", None))
        layout = getattr(layout, "value", layout)  # transformers' ChannelDimension or its string
        if layout is not None:
            reason = _unsupported_layout(flat, layout)
            if reason is not None:
                return reason
            if layout == "channels_last":
                images = _nested_map(images, _channels_last_to_first)
                flat = _flat(images)
        family = families.FAMILIES[configs.kind_of({"image_processor_type": type(self.upstream).__name__})]
        if hasattr(family, "samples") and sum(family.samples(images, "")) != _image_count(flat):
            return "4-D batches, which its processor counts as one image each"
        unknown = set(kwargs) - set(self.upstream._valid_kwargs_names) - {"return_tensors", "device"}
        if unknown:
            return f"kwargs {sorted(unknown)} that the processor does not declare"
        refused = _upstream_refuses(self.upstream, kwargs)
        if refused:
            return refused
        try:
            config, rest = _resolve_config(self.upstream, kwargs)
            configs.resolve(config, "FusedHFImageProcessor")
        except (TypeError, ValueError) as e:
            return str(e)
        # A call's None where the processor has a value (size=None): the config layer reads None as the class
        # default, transformers refuses it (GLM-4.1V, Idefics3) or fills it its own way; upstream answers.
        cleared = sorted(k for k, v in config.items() if v is None and getattr(self.upstream, k, None) is not None)
        if cleared:
            return f"kwargs {cleared} resolved to None (upstream's own answer: it refuses or fills them)"
        if hasattr(family, "samples") and max(family.samples(images, "")) > 1:
            # a multi-image sample is padded with the instance's image_mean, whatever the call's
            own = getattr(self.upstream, "image_mean", None)
            if config["image_mean"] != (list(own) if isinstance(own, tuple) else own):
                return "a multi-image sample with a call's image_mean (its padding reads the processor's own)"
            if not config["do_resize"]:
                return "a multi-image sample without do_resize (its squares come out in different sizes)"
        rescale_alone = getattr(family, "RESCALE_ALONE", False) and config["do_rescale"]
        if config["do_rescale"] != config["do_normalize"] and not rescale_alone:
            return "do_rescale and do_normalize differ (both on, float32, or both off, uint8, are served)"
        raw = not config["do_rescale"]  # transformers then returns the resized bytes
        return_tensors = rest.pop("return_tensors", None)
        if return_tensors not in (None, "pt"):
            return f"return_tensors={return_tensors!r} (only 'pt' is served)"
        device = rest.pop("device", None)
        rest.pop("input_data_format", None)  # read above
        data_format = rest.pop("data_format", None)
        if data_format not in (None, "channels_first") and getattr(data_format, "value", None) != "channels_first":
            return f"data_format={data_format!r}"
        for key in _OFF:
            if rest.pop(key, None) not in (None, False):
                return f"{key} is set"
        leftover = {k: v for k, v in rest.items() if k not in _NO_EFFECT and v is not None}
        if leftover:
            return f"kwargs it does not reproduce: {sorted(leftover)}"
        try:
            device = torch.device(device if device is not None else "cpu")
        except (TypeError, RuntimeError):
            return f"device={device!r}"
        if config.get("do_convert_rgb") and transformers_drops_alpha():
            if any(_array_with_alpha(image) for image in flat):
                return (
                    "an array or tensor with 2 or 4 channels: transformers before 5.21 does not convert it to RGB "
                    "(from 5.21 it composites alpha on white, as served)"
                )
            images = _nested_map(images, _drop_alpha)
            flat = _flat(images)
        processor = self._processor(config, device)
        try:
            # A family laid out per sample reads the call's nesting (transformers' nested list of images).
            out = processor(
                images if getattr(family, "BY_SAMPLE", False) else list(flat),
                visual_dtype=torch.uint8 if raw else processor.transformers_dtype,
            )
        except ValueError as e:
            # refused by the plan, from the images' shapes, before any kernel ran (LLaVA-NeXT: a view smaller
            # than the crop, which transformers pads): upstream answers, its result or its own error
            return str(e)
        if hasattr(family, "as_upstream"):
            out = family.as_upstream(self.reference, out, raw)
        elif raw and self.reference == "pil" and family.PIL_BYTES_AS_FLOAT:
            out["pixel_values"] = out["pixel_values"].float()
        # Python lists (Idefics3's rows and cols) are added as transformers adds them: after the conversion.
        lists = {key: value for key, value in out.items() if not isinstance(value, torch.Tensor)}
        out = {key: value for key, value in out.items() if key not in lists}
        if return_tensors is None and self.reference == "pil":  # and NumPy arrays unless asked for tensors
            out = {key: value.cpu().numpy() for key, value in out.items()}
        if return_tensors is None:  # and the Python lists transformers' _preprocess builds, where it builds them
            unstacked = getattr(family, "UNSTACKED", {})
            out = {k: unstack(unstacked[k], v, self.reference, out) if k in unstacked else v for k, v in out.items()}
        from transformers import BatchFeature

        feature = BatchFeature(data=out, tensor_type=return_tensors)
        feature.update(lists)
        return feature

    def _processor(self, config: dict, device: torch.device) -> FusedImageProcessor:
        return self._processors.get(
            (repr(sorted(config.items())), str(device)),
            lambda: FusedImageProcessor.from_preprocessor_config(config, device=device, reference=self.reference),
        )


def _plain(value: Any) -> Any:
    """A size (a SizeDict or a dict) as a dict of its set keys, to compare; any other value as it is."""
    if isinstance(value, Mapping) or dataclasses.is_dataclass(value):
        items = value.items() if isinstance(value, Mapping) else dataclasses.asdict(value).items()
        return {k: v for k, v in items if v is not None}
    return value


def _flat(images: Any) -> list:
    """The images of a call as transformers' make_flat_list_of_images lists them: one image, a list of them,
    or one level of nesting (a list of lists of images, some possibly empty) flattened into one batch. Any
    other structure is returned as a list of its items, which _serve then hands to upstream."""
    if not isinstance(images, list | tuple):
        return [images]
    if images and all(isinstance(group, list | tuple) for group in images):
        return [image for group in images for image in group]
    return list(images)


def _image_count(flat: list) -> int:
    """How many images FusedImageProcessor reads from these items (a 4-D array or tensor is a batch of them)."""
    return sum(item.shape[0] if getattr(item, "ndim", 0) == 4 else 1 for item in flat)


def _is_image(image: object) -> bool:
    if isinstance(image, np.ndarray | torch.Tensor):
        return image.dtype in (np.uint8, torch.uint8)
    try:
        from PIL import Image
    except ImportError:
        return False
    return isinstance(image, Image.Image)


def _upstream_refuses(upstream: Any, kwargs: Mapping) -> str | None:
    """Why upstream's own checks of a call's kwargs (its preprocess's first steps: the kwargs' types against
    its valid_kwargs, then _validate_preprocess_kwargs on them merged with its attributes) refuse them, or
    None. A refused call goes to upstream, which raises its own error: a client sees stock's answer (issue 46:
    do_image_splitting=0, min_pixels=None, size=None were served here and refused there)."""
    valid = getattr(upstream, "valid_kwargs", None)
    merge = getattr(upstream, "_merge_and_standardize_kwargs", None)
    validate = getattr(upstream, "_validate_preprocess_kwargs", None)
    try:
        if valid is not None:
            from huggingface_hub.dataclasses import validate_typed_dict

            validate_typed_dict(valid, dict(kwargs))
        if merge is not None and validate is not None:
            validate(**merge(**dict(kwargs)))
    except Exception as e:  # whatever upstream raises, it raises again when it serves the call
        return f"its own checks refuse the kwargs ({type(e).__name__}: {e})"
    return None


# transformers 5.21 made convert_to_rgb composite alpha on white (what FusedImageProcessor does); before it,
# a PIL image that is not RGB went through Pillow's image.convert("RGB"), which drops alpha (RGBA, LA, a
# palette's transparency), and arrays and tensors were left as they are.
COMPOSITES_ALPHA_FROM = (5, 21)


@functools.cache
def transformers_drops_alpha() -> bool:
    """Whether the installed transformers drops alpha in convert_to_rgb (before 5.21) rather than compositing
    it on white; the adapter follows the installed version, which is the one it stands in for."""
    try:
        version = importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        return False
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2]) < COMPOSITES_ALPHA_FROM


def _drop_alpha(image: Any) -> Any:
    """transformers' convert_to_rgb before 5.21 for a PIL image with alpha: Pillow's convert("RGB"), and an RGB
    image as it is, its transparency key ignored (Pillow keeps a palette's key as an RGB colour in `info`
    through convert("RGB"), which FusedImageProcessor would apply). Other images are left to
    FusedImageProcessor, whose conversion without alpha is the same."""
    from PIL import Image

    if not isinstance(image, Image.Image):
        return image
    keyed = image.info.get("transparency") is not None
    if image.mode != "RGB" and ("A" in image.getbands() or keyed):
        image = image.convert("RGB")
    elif image.mode == "RGB" and keyed:
        image = image.copy()  # the caller's image keeps its info
    else:
        return image
    image.info.pop("transparency", None)
    return image


def _array_with_alpha(image: Any) -> bool:
    """Whether an array or tensor may carry alpha (2 or 4 channels, first or last), which transformers before
    5.21 passes on unconverted: such calls go to upstream."""
    if not isinstance(image, np.ndarray | torch.Tensor) or image.ndim not in (3, 4):
        return False
    return image.shape[-1] in (2, 4) or image.shape[-3] in (2, 4)


def _unsupported_layout(flat: list, layout: object) -> str | None:
    """Why a call's input_data_format is not served, or None. transformers reads it for the arrays and tensors of
    3 or more dims (a PIL image is [H, W, C] and a 2-D array one channel whatever it says); FusedImageProcessor
    finds the channel axis as transformers' inference does (the first of 1, 3 or 4, else the last), which is the
    named axis where that axis has 1, 3 or 4 channels."""
    if layout not in ("channels_first", "channels_last"):
        return f"input_data_format={layout!r}"
    axis = -3 if layout == "channels_first" else -1
    for image in flat:
        if isinstance(image, np.ndarray | torch.Tensor) and image.ndim >= 3 and image.shape[axis] not in (1, 3, 4):
            return f"input_data_format={layout!r} with {image.shape[axis]} channels (shape {tuple(image.shape)})"
    return None


def _channels_last_to_first(image: Any) -> Any:
    """An array or tensor of 3 or more dims laid out [..., H, W, C] as a [..., C, H, W] view of the same type (no
    copy: FusedImageProcessor's intake reads the strides); anything else as it is."""
    if isinstance(image, np.ndarray) and image.ndim >= 3:
        return np.moveaxis(image, -1, -3)
    if isinstance(image, torch.Tensor) and image.ndim >= 3:
        return image.movedim(-1, -3)
    return image


def _nested_map(images: Any, function: Callable[[Any], Any]) -> Any:
    """`function` on every image of a call, keeping its nesting (one image, a list, a list of lists)."""
    if isinstance(images, list | tuple):
        return type(images)(_nested_map(item, function) for item in images)
    return function(images)


def _resolve_config(upstream: Any, kwargs: Mapping) -> tuple[dict, dict]:
    """The call's kwargs resolved as upstream's preprocess resolves them (its attributes as defaults, then its
    _standardize_kwargs), split into a preprocessor config for FusedImageProcessor and the rest. transformers
    reads an unset flag (None) as off: so does the config here."""
    resolved = dict(kwargs)
    for name in upstream._valid_kwargs_names:
        resolved.setdefault(name, getattr(upstream, name, None))
    resolved = upstream._standardize_kwargs(**resolved)
    config = {"image_processor_type": type(upstream).__name__}
    for key in configs.call_keys(configs.kind_of(config)):
        value = resolved.pop(key, None)
        if key == "resample":
            value = getattr(value, "value", value)  # PIL's Resampling or torchvision's InterpolationMode
        elif key.startswith("do_"):
            value = bool(value)
        elif key in ("size", "crop_size") and value is not None:
            value = {k: v for k, v in dict(value).items() if v is not None}
        elif key in ("image_mean", "image_std") and isinstance(value, tuple):
            value = list(value)
        config[key] = value
    return config, resolved


# ----- videos -----
# The keys a Qwen-VL video processor's _preprocess receives that FusedVideoProcessor computes from; frame
# sampling (fps, num_frames, min_frames, max_frames, GLM-4V's max_duration) is done by then, by upstream
# itself. (GLM-4V's max_image_size is read by no step; InternVL's initial_shift is read by its sampling only.)
_VIDEO_SAMPLED = {"fps", "num_frames", "min_frames", "max_frames", "max_duration", "max_image_size", "initial_shift"}
_VIDEO_KEYS = sorted(
    (video.CALL_KEYS["qwen3_vl"] | video.CALL_KEYS["gemma4"]) - _VIDEO_SAMPLED - {"do_sample_frames", "do_convert_rgb"}
)


def unsupported_video(upstream: object) -> str | None:
    """Why FusedHFVideoProcessor cannot stand in for the video processor `upstream`; None when it can."""
    name = type(upstream).__name__
    if configs.video_kind_of({"video_processor_type": name}) is None:
        return f"{name} is not a Qwen-VL, GLM-4V, SmolVLM, LLaVA-OneVision, InternVL or Gemma 4 video processor"
    for method in ("preprocess", "_preprocess", "to_dict"):
        if not callable(getattr(upstream, method, None)):
            return f"{name} has no {method}"
    return None  # as for images, each call decides on its configuration


def _video_config(upstream: Any) -> dict:
    config = {k: v for k, v in upstream.to_dict().items() if not k.startswith("_")}
    config["video_processor_type"] = type(upstream).__name__
    return config


class FusedHFVideoProcessor(_Adapter):
    """A transformers Qwen-VL, GLM-4V, SmolVLM2, LLaVA-OneVision or InternVL video processor whose per-frame work
    (resize, normalize, the patch rows, SmolVLM's padded frames, the others' [T, C, h, w] videos)
    FusedVideoProcessor computes:
    upstream's own `preprocess` runs (its kwarg checks, frame sampling, metadata, return_metadata) with this
    object as `self`, so only its `_preprocess` (the per-frame work) is replaced; a call that step does not
    reproduce goes to upstream's `_preprocess`, with one log line per reason. Every other attribute is
    upstream's, read and written (`adapter.do_sample_frames = True` sets upstream's, which its preprocess
    reads); one FusedVideoProcessor per device, at most MAX_PROCESSORS."""

    def __init__(self, upstream: Any, log: logging.Logger = logger):
        reason = unsupported_video(upstream)
        if reason is not None:
            raise ValueError(f"FusedHFVideoProcessor: cannot serve {type(upstream).__name__}: {reason}")
        super().__init__(upstream, "torchvision", log)  # transformers' video processors have no other backend

    def __repr__(self) -> str:
        return f"FusedHFVideoProcessor(upstream={type(self.upstream).__name__})"

    def __call__(self, videos: Any, **kwargs: Any) -> Any:
        return self.preprocess(videos, **kwargs)

    def preprocess(self, videos: Any, **kwargs: Any) -> Any:
        return type(self.upstream).preprocess(self, videos, **kwargs)

    def _preprocess(self, videos: list, **kwargs: Any) -> Any:
        served = self._serve(videos, kwargs)
        if isinstance(served, str):
            generic = self._generic_path()
            if generic is not None:  # upstream's _preprocess, with the exact primitives
                self._to_generic_path(served)
                return generic._preprocess(videos, **kwargs)
            self._handed_back(served)
            return type(self.upstream)._preprocess(self.upstream, videos, **kwargs)
        if "cap_pixels_per_frame" in kwargs and kwargs["cap_pixels_per_frame"] is None:
            # Unset means off, and upstream's _preprocess, replaced by this call (a call handed back warns
            # itself), warns once on its module's logger that the default will change: its users (and
            # transformers' own tests) listen there.
            from transformers.utils import logging as hf_logging

            hf_logging.get_logger(type(self.upstream).__module__).warning_once(
                "cap_pixels_per_frame is unset: served as False (no per-frame pixel cap), as %s does; it warns "
                "that its default will change: pass True or False",
                type(self.upstream).__name__,
            )
        return served

    def _serve(self, videos: list, kwargs: dict) -> Any:
        """The BatchFeature, or why this call goes to upstream's _preprocess. `videos`: upstream's prepared
        clips, uint8 [T, C, H, W] tensors."""
        if not videos or any(not isinstance(v, torch.Tensor) or v.dtype != torch.uint8 or v.dim() != 4 for v in videos):
            return "videos that are not uint8 [T, C, H, W] tensors once prepared"
        devices = {v.device for v in videos}
        if len(devices) != 1:
            return "videos on several devices"
        rest = dict(kwargs)
        overrides = {}
        for key in _VIDEO_KEYS:
            value = rest.pop(key, None)
            if value is None:
                continue
            if key == "resample":
                value = getattr(value, "value", value)
            elif key == "size":
                value = {k: v for k, v in dict(value).items() if v is not None}
            elif key in ("image_mean", "image_std") and isinstance(value, tuple):
                value = list(value)
            overrides[key] = value
        kind = configs.video_kind_of({"video_processor_type": type(self.upstream).__name__})
        # Gemma 4's rescale without normalize is its image family's float32 x * rescale_factor (RESCALE_ALONE)
        rescale_alone = kind in configs.BUDGET_VIDEO_KINDS and not overrides.get("do_normalize", False)
        if overrides.get("do_rescale", False) != overrides.get("do_normalize", False) and not rescale_alone:
            return "do_rescale and do_normalize differ (both on, float32, or both off, uint8, are served)"
        raw = not overrides.get("do_rescale", False)
        return_tensors = rest.pop("return_tensors", None)
        if return_tensors not in (None, "pt"):
            return f"return_tensors={return_tensors!r} (only 'pt' is served)"
        smolvlm = kind == "smolvlm"
        padded = rest.pop("do_pad", None)
        if smolvlm and padded is False:
            return "do_pad is off (SmolVLM's videos are served padded)"
        # (BaseVideoProcessor's _preprocess, LLaVA-OV's and InternVL's, reads no do_pad: their processors pass it)
        if not smolvlm and kind not in configs.FRAMEWISE_VIDEO_KINDS and padded not in (None, False):
            return "do_pad is set"
        for key in ("do_center_crop", "crop_size", "pad_size"):
            value = rest.pop(key, None)
            # upstream's own value passed back on each call (LlavaNextVideoProcessor's center crop) is its config's
            if value not in (None, False) and _plain(value) != _plain(getattr(self.upstream, key, None)):
                return f"{key} is set"
        leftover = {k: v for k, v in rest.items() if k not in _VIDEO_SAMPLED and v is not None}
        if leftover:
            return f"kwargs it does not reproduce: {sorted(leftover)}"
        try:
            processor = self._processor(devices.pop())
            out = processor(
                list(videos),
                visual_dtype=torch.uint8 if raw else torch.float32,
                do_sample_frames=False,  # upstream sampled them
                **overrides,
            )
        except (TypeError, ValueError) as e:
            return str(e)
        if kind in configs.BUDGET_VIDEO_KINDS and return_tensors is None:
            # Gemma 4's counts are lists of ints (its frames concatenated into one tensor either way)
            out = {key: value.tolist() if key.startswith("num_") else value for key, value in out.items()}
        elif (smolvlm or kind in configs.FRAMEWISE_VIDEO_KINDS) and return_tensors is None:
            # their unstacked output: a list of (padded) videos (and SmolVLM's of masks)
            out = {key: list(value) for key, value in out.items()}
        from transformers import BatchFeature

        return BatchFeature(data=out, tensor_type=return_tensors)

    def _processor(self, device: torch.device) -> FusedVideoProcessor:
        # Keyed by device and max_image_size: upstream's preprocess passes every setting of the call (its
        # attributes as they are now, a call's kwargs on top) to _preprocess, and _serve hands them all on as
        # overrides, but SmolVLM's resize reads its instance's max_image_size (a call's is read by no step).
        return self._processors.get(
            (str(device), repr(getattr(self.upstream, "max_image_size", None))),
            lambda: FusedVideoProcessor.from_preprocessor_config(
                _video_config(self.upstream), device=device, reference=self.reference
            ),
        )


# ----- the generic path -----
def unsupported_generic(upstream: object) -> str | None:
    """Why the generic path cannot stand in for `upstream` (its class); None when it can: any image or video
    processor built on transformers' TorchvisionBackend or PilBackend, remote-code subclasses included."""
    from .hf_primitives import backend_of

    name = type(upstream).__name__
    if backend_of(type(upstream)) is None:
        return f"{name} is built on neither transformers' TorchvisionBackend nor its PilBackend"
    for method in ("preprocess", "_preprocess"):
        if not callable(getattr(upstream, method, None)):
            return f"{name} has no {method}"
    if not isinstance(getattr(upstream, "__dict__", None), dict):
        return f"{name} keeps no instance __dict__"
    return None


class _GenericAdapter(_Adapter):
    """What the generic adapters share: upstream's own code (preprocess, _preprocess, its grids, tiles and
    reshapes) runs with this adapter as `self`, and only the backend's primitives are the package's
    (hf_primitives). Instance data is upstream's (read, written, deleted there; `self.__dict__` is upstream's,
    so to_dict and copies see its state); every function of upstream's class is looked up on the adapter's
    class, bound to the adapter: `self._preprocess(...)` inside upstream's preprocess, and its `self.resize`,
    reach the primitives, which the stand-in class lists just above the backend (a model's own override of a
    primitive still runs first). Nothing is decided per call beyond each primitive: a call it does not serve
    is the backend's own, with one log line per reason."""

    @classmethod
    def _extra_bases(cls, upstream_class: type) -> tuple[type, ...]:
        from .hf_primitives import backend_of, primitives

        backend = backend_of(upstream_class)
        return () if backend is None else (primitives(backend),)

    @classmethod
    def _extra_namespace(cls, upstream_class: type) -> dict[str, Any]:
        from .hf_primitives import by_name_calls

        return by_name_calls(upstream_class)

    def __init__(self, upstream: Any, log: logging.Logger = logger):
        reason = unsupported_generic(upstream)
        if reason is not None:
            raise ValueError(f"{type(self).__mro__[1].__name__}: cannot serve {type(upstream).__name__}: {reason}")
        super().__init__(upstream, reference_of(upstream), log)

    def __getattribute__(self, name: str) -> Any:
        # Python's own lookup over two instance dicts, the adapter's few names first, then upstream's: upstream's
        # code reads its attributes here tens of times a call, so this stays one short function.
        own = object.__getattribute__(self, "__dict__")
        if name == "__dict__":  # upstream's state, which its code reads as self.__dict__ (to_dict)
            return own["upstream"].__dict__ if "upstream" in own else own
        if name in own:
            return own[name]
        if "upstream" in own:  # (not while unpickling)
            state = own["upstream"].__dict__
            if name in state:
                return state[name]
        # a class attribute: upstream's functions, properties and lru_cache'd methods bound to the adapter
        return object.__getattribute__(self, name)

    def __repr__(self) -> str:
        return f"{type(self).__mro__[1].__name__}(upstream={type(self.upstream).__name__}, the generic path)"


class FusedHFGenericImageProcessor(_GenericAdapter):
    """Any transformers image processor on TorchvisionBackend or PilBackend that no family reproduces, run as
    its own code with the package's exact primitives; `isinstance(adapter, type(upstream))` holds."""


class FusedHFGenericVideoProcessor(_GenericAdapter):
    """Any transformers video processor (BaseVideoProcessor, on TorchvisionBackend) that no family reproduces,
    run as its own code (frame sampling included) with the package's exact primitives."""


# The generic adapter that stands in where a family adapter cannot (a family, where one exists, wins).
GENERIC = {FusedHFImageProcessor: FusedHFGenericImageProcessor, FusedHFVideoProcessor: FusedHFGenericVideoProcessor}


def stand_in(processor: object, attribute: str, what: str, adapter: type, why_not, log: logging.Logger) -> str | None:
    """Puts `adapter` (FusedHFImageProcessor or FusedHFVideoProcessor) around `processor.<attribute>` where
    `why_not` finds no reason against it, else its generic path (GENERIC[adapter]) where that can stand in; says which processor serves `what` (None: the processor has none).
    `log`: the host engine's logger, where the adapter says why a call goes to transformers. Both engine
    plugins (vllm_plugin, sglang_plugin) put their adapters in place through this."""
    upstream = getattr(processor, attribute, None)
    if upstream is None:
        return None
    name = type(upstream).__name__
    reason = why_not(upstream)
    if reason is not None and adapter in GENERIC:
        generic_reason = unsupported_generic(upstream)
        if generic_reason is None:
            adapter, family_reason, reason = GENERIC[adapter], reason, None
        else:  # the broader refusal: what keeps the generic path out keeps every family out too
            reason = generic_reason
    if reason is None:
        try:
            setattr(processor, attribute, adapter(upstream, log))
        except Exception as e:  # never an error in the engine's path: transformers' keeps serving
            reason = str(e)
    if reason is not None:
        return f"transformers' {name} serves {what}: {reason}"
    served = getattr(processor, attribute)
    if adapter is FusedHFImageProcessor:
        return f"FusedImageProcessor (reference {served.reference!r}) serves {what} in place of transformers' {name}"
    if adapter is FusedHFVideoProcessor:
        return f"FusedVideoProcessor serves {what} in place of transformers' {name}"
    return (
        f"the generic path serves {what}: transformers' {name} runs with fused_input_norm's exact primitives "
        f"(reference {served.reference!r}; no family: {family_reason})"
    )
