"""Rotary frequencies exactly as Hugging Face uses them, for every rope type it implements.

The frequencies and the attention scaling are read from the model's own rotary module,
which computed them with transformers' rope initialisation functions
(``ROPE_INIT_FUNCTIONS``: linear, dynamic, yarn, longrope, llama3, proportional, and the
module's own default); nothing here re-derives a formula. Two types change their
frequencies with the input's length, as Hugging Face's ``dynamic_rope_update`` does:

- ``longrope``: the short factors up to ``original_max_position_embeddings`` positions, the
  long factors beyond (computed by the same initialisation function at that length);
- ``dynamic``: the initial frequencies up to the model's original context; beyond it
  Hugging Face recomputes them from the longest input it has seen so far (state kept
  between calls), which the view cannot reproduce, so those lengths are refused.

Modules that keep a sine/cosine table instead (GPT-J, CodeGen) give their frequencies as
the angle of position 1 in that table.
"""

from __future__ import annotations

from typing import Any

import torch

from geomlens.errors import GeomlensError
from geomlens.models.view import Rotary

LENGTH_DEPENDENT = ("longrope", "dynamic")
"""Rope types whose frequencies depend on the input's length."""


def rope_types() -> tuple[str, ...]:
    """Every rope type transformers implements: "default" and its rope table's types
    (imported here, on first use: loading a model never needs it at import)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    return ("default", *ROPE_INIT_FUNCTIONS)


def rope_type_of(params: Any) -> str:
    """The rope type of one ``rope_parameters``/``rope_scaling`` dict (default: "default")."""
    params = params or {}
    return str(params.get("rope_type", params.get("type", "default")))


def config_rope_types(value: Any) -> list[str]:
    """The rope types a config's ``rope_parameters`` names, flat or per layer type."""
    value = value or {}
    if not isinstance(value, dict):
        return [str(value)]
    nested = [v for k, v in value.items() if isinstance(v, dict) and k not in ("type",)]
    if nested and "rope_type" not in value and "type" not in value:
        return [rope_type_of(v) for v in nested]
    return [rope_type_of(value)]


def known_rope(value: Any) -> str | None:
    """Accept ``rope_parameters``/``rope_scaling`` of any rope type transformers implements."""
    unknown = sorted({t for t in config_rope_types(value) if t not in rope_types()})
    if not unknown:
        return None
    return "handled: rope_type " + ", ".join(repr(t) for t in rope_types())


def default_rope_only(value: Any) -> str | None:
    """Accept rope parameters without scaling (for modules that keep a fixed table)."""
    kinds = config_rope_types(value)
    return None if all(k == "default" for k in kinds) else "handled: rope_type 'default'"


def _parameters(config: Any, layer_type: str | None) -> dict[str, Any]:
    params = dict(getattr(config, "rope_parameters", None) or {})
    if layer_type is not None and isinstance(params.get(layer_type), dict):
        return dict(params[layer_type])
    return params


def _attr(module: Any, name: str, layer_type: str | None) -> Any:
    return getattr(module, name if layer_type is None else f"{layer_type}_{name}", None)


def module_rotary(
    module: Any, config: Any, layer_type: str | None = None, interleaved: bool = False
) -> Rotary:
    """The Rotary of a Hugging Face rotary-embedding module (of one layer type, if it keeps
    one set per type), with the length rule of its rope type."""
    table = getattr(module, "embed_positions", None)
    if table is not None and _attr(module, "inv_freq", layer_type) is None:
        return table_rotary(table, interleaved)
    kinds = getattr(module, "rope_type", "default")
    kind = str(kinds.get(layer_type, "default") if isinstance(kinds, dict) else kinds)
    inv = _attr(module, "original_inv_freq", layer_type)
    if inv is None:
        inv = _attr(module, "inv_freq", layer_type)
    scaling = _attr(module, "attention_scaling", layer_type)
    params = _parameters(config, layer_type)
    theta = params.get("rope_theta", getattr(config, "rope_theta", None))
    rotary = Rotary(
        inv_freq=inv.detach().float().cpu().clone(),
        attention_scaling=1.0 if scaling is None else float(scaling),
        interleaved=interleaved,
        rope_type=kind,
        theta=None if theta is None else float(theta),
    )
    if kind == "longrope":
        return _with_length(rotary, _longrope(rotary, config, params, layer_type))
    if "dynamic" in kind:
        limit = int(getattr(module, "original_max_seq_len", config.max_position_embeddings))
        return _with_length(rotary, _dynamic(rotary, limit))
    return rotary


def _with_length(rotary: Rotary, rule: Any) -> Rotary:
    from dataclasses import replace

    return replace(rotary, by_length=rule)


def _longrope(rotary: Rotary, config: Any, params: dict[str, Any], layer_type: str | None) -> Any:
    """Length -> Rotary: short factors up to the original context, long factors beyond
    (Hugging Face's ``longrope_frequency_update``)."""
    from dataclasses import replace

    original = int(params["original_max_position_embeddings"])
    kwargs = {} if layer_type is None else {"layer_type": layer_type}
    cache: dict[str, Rotary] = {}

    def at(length: int) -> Rotary:
        if length <= original:
            return replace(rotary, by_length=None)
        if "long" not in cache:
            from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

            inv, _ = ROPE_INIT_FUNCTIONS["longrope"](config, None, seq_len=original + 1, **kwargs)
            cache["long"] = replace(rotary, inv_freq=inv.float().cpu(), by_length=None)
        return cache["long"]

    return at


def _dynamic(rotary: Rotary, limit: int) -> Any:
    """Length -> Rotary: the initial frequencies up to ``limit`` positions; longer inputs
    refused (Hugging Face's frequencies there depend on earlier inputs)."""
    from dataclasses import replace

    def at(length: int) -> Rotary:
        if length > limit:
            raise GeomlensError(
                f"dynamic rope scaling changes this model's frequencies for inputs longer "
                f"than {limit} positions, from the longest input Hugging Face has seen, "
                f"which geomlens cannot reproduce; use at most {limit} positions."
            )
        return replace(rotary, by_length=None)

    return at


def table_rotary(table: torch.Tensor, interleaved: bool) -> Rotary:
    """The Rotary of a [positions, dim] table ``cat(sin, cos)`` (GPT-J, CodeGen): its
    inverse frequencies are the angles of position 1."""
    half = table.shape[-1] // 2
    sin, cos = table[1, :half].double(), table[1, half:].double()
    inv = torch.atan2(sin, cos).float()
    return Rotary(inv_freq=inv.cpu(), interleaved=interleaved, theta=None)
