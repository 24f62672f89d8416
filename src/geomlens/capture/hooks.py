"""Read hidden states out of an unmodified Hugging Face forward pass with hooks.

Hidden-state layer 0 is the input of block 0 (the embedding output, after any embedding
norm or scale the model applies); layer l is the output of block l-1. The final norm of
decoders is not applied (Hugging Face's last ``hidden_states`` entry has it).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import torch

from geomlens.models.view import ModelView


class _StopForward(Exception):
    """Raised by a hook once every requested layer is recorded: the rest is not needed."""


def _first_tensor(value: Any) -> torch.Tensor:
    return value if isinstance(value, torch.Tensor) else value[0]


@contextmanager
def recording(view: ModelView, layers: Sequence[int]) -> Iterator[dict[int, torch.Tensor]]:
    """Hooks that fill a dict layer -> hidden states [B, T, d] during a forward pass."""
    wanted = set(layers)
    last = max(wanted)
    record: dict[int, torch.Tensor] = {}
    handles = []

    def keep(layer: int, h: torch.Tensor) -> None:
        record[layer] = h.detach()
        if layer == last:
            raise _StopForward

    if 0 in wanted:

        def pre_hook(module: Any, args: tuple, kwargs: dict) -> None:
            keep(0, args[0] if args else kwargs["hidden_states"])

        handles.append(view.blocks[0].module.register_forward_pre_hook(pre_hook, with_kwargs=True))
    for block in view.blocks:
        layer = block.index + 1
        if layer in wanted:

            def hook(module: Any, args: Any, output: Any, layer: int = layer) -> None:
                keep(layer, _first_tensor(output))

            handles.append(block.module.register_forward_hook(hook))
    try:
        yield record
    finally:
        for handle in handles:
            handle.remove()


def base_kwargs(view: ModelView) -> dict[str, Any]:
    """Keyword arguments that keep the base forward lean (no KV cache) where accepted."""
    params = inspect.signature(view.base.forward).parameters
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    return {"use_cache": False} if "use_cache" in params or accepts_any else {}


def cache_keyword(view: ModelView) -> str:
    """The forward's name for the KV cache: ``cache`` in recent transformers releases,
    ``past_key_values`` in earlier ones (the output field has the same name)."""
    params = inspect.signature(view.base.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def hidden_states(
    view: ModelView,
    input_ids: torch.Tensor,
    layers: Sequence[int],
    attention_mask: torch.Tensor | None = None,
) -> dict[int, torch.Tensor]:
    """One forward pass of the base model; returns layer -> [B, T, d] for the given layers.

    The pass stops after the last requested block, so early layers cost only their share.
    ``attention_mask`` [B, T] (1 = token, 0 = padding) keeps a bidirectional stack from
    reading right-padding; causal stacks never read it, so they need none.
    """
    kwargs = base_kwargs(view)
    if attention_mask is not None:
        kwargs["attention_mask"] = attention_mask.to(view.device)
    with torch.inference_mode(), recording(view, layers) as record, suppress(_StopForward):
        view.base(input_ids=input_ids.to(view.device), **kwargs)
    return record
