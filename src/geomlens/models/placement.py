"""Where a model's weights sit when one device does not hold them: ``device_map``,
``max_memory`` and ``offload_folder`` handed to ``from_pretrained`` (accelerate places the
modules and moves each one's weights in for its forward pass), and the offloaded weights
read back for the view.

A module placed on "disk" (or on "cpu" while the model runs on a GPU) keeps its parameters
on the meta device between forward passes; accelerate's hook on it holds the real ones
(``weights_map``). ``materialised(model)`` puts them in for as long as the view is built,
so the view's weights (``W_E``, ``W_Q``, the norms' gains, ...) are real tensors in host
memory while the forward pass stays offloaded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from geomlens.errors import GeomlensError

DEVICE_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")
"""The placement strategies accelerate computes (a dict names each module's device)."""

PLACES = re.compile(r"cpu|disk|mps|cuda(:\d+)?|\d+")
"""A device a ``device_map`` dict may name for a module."""


def parse_device_map(text: str) -> str:
    """``--device-map``: one of ``DEVICE_MAPS`` (a dict is given from Python)."""
    import argparse

    if text not in DEVICE_MAPS:
        raise argparse.ArgumentTypeError(
            f"takes one of {', '.join(DEVICE_MAPS)} (got {text[:80]!r}); a dict of module "
            "names to devices is given from Python"
        )
    return text


def parse_max_memory(text: str) -> dict[str, str]:
    """``--max-memory``: "0=20GiB,1=20GiB,cpu=64GiB" (device=size, comma-separated)."""
    import argparse

    out: dict[str, str] = {}
    for part in text.split(","):
        device, _, size = part.partition("=")
        device, size = device.strip(), size.strip()
        if not PLACES.fullmatch(device) or device == "disk" or not SIZE.fullmatch(size):
            raise argparse.ArgumentTypeError(
                f"takes DEVICE=SIZE pairs like 0=20GiB,cpu=64GiB (got {part[:80]!r})"
            )
        out[device] = size
    return out


SIZE = re.compile(r"\d+(\.\d+)?\s*([KMGT]i?B|B)?", re.IGNORECASE)
"""A memory size accelerate reads ("20GiB", "500MB", a number of bytes)."""


def check_placement(
    device_map: str | Mapping[str, Any] | None,
    max_memory: Mapping[str, Any] | None,
    offload_folder: str | os.PathLike[str] | None,
) -> None:
    """Refuse a placement ``from_pretrained`` cannot follow, before anything loads.

    Raises:
        GeomlensError: an unknown strategy, a device no module can go to, a limit or an
            offload folder without a device map, or modules on "disk" without a folder.
    """
    if device_map is None:
        if max_memory is not None or offload_folder is not None:
            raise GeomlensError(
                "--max-memory and --offload-folder place a model only with --device-map; "
                "add --device-map auto (or sequential, balanced)."
            )
        return
    if isinstance(device_map, str):
        if device_map not in DEVICE_MAPS:
            raise GeomlensError(
                f"--device-map {device_map[:80]!r} is not a placement; use one of "
                f"{', '.join(DEVICE_MAPS)}, or a dict of module names to devices."
            )
        return
    bad = sorted({str(v) for v in device_map.values() if not PLACES.fullmatch(str(v))})
    if bad:
        raise GeomlensError(
            f"device_map names devices {', '.join(b[:20] for b in bad[:3])}; a module goes to "
            "cpu, disk, cuda:N (or N) or mps."
        )
    if "disk" in {str(v) for v in device_map.values()} and offload_folder is None:
        raise GeomlensError(
            "device_map puts modules on disk but names no folder for them; add "
            "offload_folder (--offload-folder DIR)."
        )


def placement(
    device_map: str | Mapping[str, Any] | None,
    max_memory: Mapping[str, Any] | None,
    offload_folder: str | os.PathLike[str] | None,
) -> dict[str, Any]:
    """The keyword arguments of ``from_pretrained`` that place the model (empty: one device,
    moved there after loading)."""
    if device_map is None:
        return {}
    kwargs: dict[str, Any] = {"device_map": device_map}
    if max_memory is not None:
        kwargs["max_memory"] = {int(k) if k.isdigit() else k: v for k, v in max_memory.items()}
    if offload_folder is not None:
        Path(offload_folder).mkdir(parents=True, exist_ok=True)
        kwargs["offload_folder"] = str(offload_folder)
    return kwargs


def offloaded(module: Any) -> list[Any]:
    """The accelerate hooks of ``module`` and its submodules that keep weights elsewhere
    (their module's parameters on the meta device between forward passes)."""
    hooks = []
    for sub in module.modules():
        hook = getattr(sub, "_hf_hook", None)
        for one in getattr(hook, "hooks", None) or ([hook] if hook is not None else []):
            if getattr(one, "offload", False) and getattr(one, "weights_map", None) is not None:
                hooks.append((sub, one))
    return hooks


def offloaded_weights(model: Any) -> dict[str, tuple[Mapping[str, Any], str]]:
    """Every offloaded tensor of ``model`` by its state-dict name: the weights map accelerate
    reads it from and its key there (read one at a time, e.g. to hash the weights without
    putting the whole model in memory)."""
    from accelerate.utils import named_module_tensors

    names = {id(module): name for name, module in model.named_modules()}
    stored: dict[str, tuple[Mapping[str, Any], str]] = {}
    for module, hook in offloaded(model):
        prefix = names.get(id(module), "")
        for name, tensor in named_module_tensors(
            module, include_buffers=hook.offload_buffers, recurse=hook.place_submodules
        ):
            if tensor.device.type == "meta":
                stored[f"{prefix}.{name}" if prefix else name] = (hook.weights_map, name)
    return stored


@contextmanager
def materialised(model: Any, where: Literal["host", "execution"] = "host") -> Iterator[None]:
    """Offloaded weights put into their modules for the block's length, then left to
    accelerate again: the view built inside reads real tensors. ``where``: in host memory
    (the whole model at once, for the view's build), or on the device each module runs on
    (one block's weights, read on demand). Nested blocks leave what an enclosing one put in."""
    from accelerate.utils import named_module_tensors, set_module_tensor_to_device

    placed = []
    for module, hook in offloaded(model):
        for name, tensor in named_module_tensors(
            module, include_buffers=hook.offload_buffers, recurse=hook.place_submodules
        ):
            if tensor.device.type == "meta":  # in already: an enclosing block put it in
                device = hook.execution_device if where == "execution" else "cpu"
                value = hook.weights_map[name]
                set_module_tensor_to_device(module, name, device, value=value)
                placed.append((module, name))
    try:
        yield
    finally:
        for module, name in placed:
            set_module_tensor_to_device(module, name, "meta")


def placement_record(model: Any) -> dict[str, Any]:
    """What a manifest says of a placed model, under "device_map": where each module sits
    (``hf_device_map``); empty for a model on one device."""
    placed = getattr(model, "hf_device_map", None)
    return {"device_map": {str(k): str(v) for k, v in placed.items()}} if placed else {}


def reading(module: Any, weights: Callable[[], Any]) -> Callable[[], Any]:
    """``weights`` (a view's per-call reader of ``module``'s parameters) run with the
    module's offloaded weights put in, on the device it runs on."""

    def read() -> Any:
        with materialised(module, "execution"):
            return weights()

    return read


def on_demand(view: Any) -> Any:
    """``view`` whose blocks read their offloaded weights when asked (``heads()``,
    ``mlp()`` and a decoder block's cross-attention heads compute from the modules'
    parameters on each call): each call runs with its block's weights put in, and returns
    tensors that outlive it."""
    from dataclasses import replace

    def wrapped(block: Any) -> Any:
        if not offloaded(block.module):
            return block
        attn = replace(block.attn, heads_fn=reading(block.module, block.attn.heads_fn))
        more = {}
        if getattr(block, "cross_heads_fn", None) is not None:
            more["cross_heads_fn"] = reading(block.module, block.cross_heads_fn)
        return replace(block, attn=attn, mlp_fn=reading(block.module, block.mlp_fn), **more)

    return replace(
        view,
        blocks=tuple(wrapped(b) for b in view.blocks),
        decoder_blocks=tuple(wrapped(b) for b in view.decoder_blocks),
    )


@contextmanager
def offload_refused(model: Any) -> Iterator[None]:
    """Where part of ``model`` is offloaded, a view that reads an offloaded module outside
    its forward pass (T5's relative position bias, computed by a method of the attention)
    meets a meta tensor: refused in one sentence instead of accelerate's error.

    Raises:
        GeomlensError: naming the model type and what to do.
    """
    try:
        yield
    except (NotImplementedError, RuntimeError) as exc:
        if not offloaded(model) or "meta" not in str(exc):
            raise
        kind = getattr(getattr(model, "config", None), "model_type", None) or "this"
        raise GeomlensError(
            f"the {kind} model's view reads some offloaded weights outside the forward pass, "
            "which accelerate's offload does not serve; place the whole model on devices "
            "that hold it (no 'disk', and no 'cpu' beside a GPU, in --device-map)."
        ) from None
