"""Which layers the attention-level analyses apply to: the one check every analysis that
reads a block's attention weights, scores, MLP or norms makes before it does.

A model in the hidden-state tier (``models.hidden_tier``) exposes its residual stream, its
embeddings and its readout, but no block's mixing: each block says why
(``BlockView.mixing``). The attention split, W_QK in the positional basis, induction heads,
the position kernels, the per-head refactoring, the head probe and the FFN sub-updates
then write, per layer, "not applicable: layer 3 mixes tokens by a state-space scan, not a
bilinear softmax attention" instead of a number.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from geomlens.models.view import ModelView

NOT_APPLICABLE = "not applicable"


def layer_reasons(view: ModelView, layers: Iterable[int] | None = None) -> dict[int, str]:
    """Block index -> "not applicable: layer i <why>" for the blocks (of ``layers``, or all)
    whose mixing the view does not model; empty where every one is modelled."""
    wanted = None if layers is None else set(layers)
    return {
        layer: f"{NOT_APPLICABLE}: layer {layer} {why}"
        for layer, why in view.not_modelled().items()
        if wanted is None or layer in wanted
    }


def modelled(view: ModelView, layers: Iterable[int]) -> list[int]:
    """The ``layers`` whose blocks' mixing the view models (in the order given)."""
    skip = view.not_modelled()
    return [layer for layer in layers if layer not in skip]


def not_applicable(view: ModelView, what: str) -> dict[str, Any] | None:
    """None where every block's mixing is modelled; else the record an attention-level
    analysis writes instead of its numbers: ``{"unsupported": "not applicable: <what> ...",
    "layers": {"0": "not applicable: layer 0 ...", ...}}`` (every block's reason)."""
    reasons = layer_reasons(view)
    if not reasons:
        return None
    first = next(iter(reasons.values())).removeprefix(f"{NOT_APPLICABLE}: ")
    more = "" if len(reasons) == 1 else f" ({len(reasons) - 1} more layers likewise or similar)"
    return {
        "unsupported": f"{NOT_APPLICABLE}: {what} reads attention weights, and {first}{more}",
        "tier": view.tier,
        "layers": {str(layer): why for layer, why in reasons.items()},
    }
