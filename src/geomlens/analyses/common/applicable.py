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


NO_NORMS = "the model has no layer norms geomlens can read"
"""Why the norm-level parts (the layer-norm identity, the radii, the readout norm's scores)
do not apply: a hidden-state-tier model none of whose norms reproduces a LayerNorm or
RMSNorm construction (or that has none)."""

NO_READOUT = "the readout is not available for this model"
"""The start of the sentence every readout part (top tokens, the logit lens, FFN
sub-updates, the walks' nearest tokens, concept words) writes instead of its numbers when
the view's logits are not the model's own (``ModelView.readout_differs``)."""


def norms_missing(view: ModelView) -> str | None:
    """The sentence "not applicable: the model has no layer norms geomlens can read" where
    no norm of the view is a LayerNorm or RMSNorm it reads (every block's norm an identity
    and no final, embedding or encoder norm); None where one is."""
    norms = [view.embedding_norm, view.final_norm, view.encoder_final_norm]
    for block in view.blocks:
        norms += [block.norm_attn, block.norm_mlp, *block.extra_norms.values()]
    if any(norm is not None and norm.kind != "identity" for norm in norms):
        return None
    return f"{NOT_APPLICABLE}: {NO_NORMS}"


def readout_missing(view: ModelView) -> str | None:
    """The sentence "not available: the readout is not available for this model: its logits
    differ from Hugging Face's ..." where the view's readout is not the model's
    (``ModelView.readout_differs``); None where it is."""
    differs = view.readout_differs()
    return None if differs is None else f"not available: {NO_READOUT}: {differs}"
