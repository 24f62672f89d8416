"""What an edit does, measured on held-out windows: the model's loss, every head's
attention mass by relative offset, the readout's top tokens and the context vectors of the
last layer (for the ARI of their clusters).

The loss is the next-token loss of a decoder, or the masked-token loss of an encoder (15%
of each window's inner positions replaced by the mask token, the same positions for every
edit: seeded by the window count). Attention comes from one eager pass with the edits on;
each head's mass at |q - k| = 0, 1, 2-4 and 5 or more is averaged over the queries that
have keys at every one of those offsets (q >= 5 in a causal stack). Everything is kept per
window, so that an interval over windows can be taken.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import torch

from geomlens.capturing.edits import Edit, editing
from geomlens.capturing.hooks import base_kwargs, recording
from geomlens.errors import GeomlensError
from geomlens.models.check import eager_attention
from geomlens.models.view import ModelView

Array = npt.NDArray[np.float64]

OFFSET_BINS: tuple[tuple[int, int | None], ...] = ((0, 0), (1, 1), (2, 4), (5, None))
"""The |q - k| ranges (inclusive; None: no end) the attention mass is summed over."""

BIN_NAMES = ("0", "1", "2-4", "5+")

NEIGHBOUR_BINS = (1, 2)
"""The bins whose mass is the neighbour attention: |q - k| from 1 to 4."""

MASK_SHARE = 0.15
"""Share of an encoder window's inner positions masked for the masked-token loss."""

TOP_K = 10
"""Top tokens of the readout kept per measurement."""


@dataclass(frozen=True)
class Measured:
    """One edit (or none) measured on held-out windows.

    Attributes:
        loss: [W] each window's mean next-token (decoder) or masked-token (encoder) loss,
            in nats.
        attention: [W, L, H, 4] each window's attention mass per layer, head and offset bin
            (``OFFSET_BINS``).
        top_tokens: [TOP_K] the token ids with the highest mean log-probability over every
            position of every window.
        context: [W, d] each window's last-layer mean over positions (its context vector
            plus the global mean).
        readout_loss: other readouts' losses [W] by name (``measure``'s ``readouts``).
    """

    loss: Array
    attention: Array
    top_tokens: npt.NDArray[np.int64]
    context: Array
    readout_loss: dict[str, Array] = field(default_factory=dict)

    @property
    def neighbour(self) -> Array:
        """[W] each window's attention mass at |q - k| in 1..4, mean over layers and heads."""
        return self.attention[..., list(NEIGHBOUR_BINS)].sum(-1).mean((1, 2))


def offset_masks(length: int, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """[4, T, T] which (query, key) pairs fall in each offset bin, and [T] the queries
    averaged (those with keys at every bin's offsets)."""
    i = torch.arange(length)[:, None]
    j = torch.arange(length)[None, :]
    delta = (i - j).abs()
    allowed = (j <= i) if causal else torch.ones(length, length, dtype=torch.bool)
    bins = []
    for lo, hi in OFFSET_BINS:
        inside = delta >= lo if hi is None else (delta >= lo) & (delta <= hi)
        bins.append(inside & allowed)
    first = OFFSET_BINS[-1][0]
    queries = torch.arange(length) >= first if causal else torch.ones(length, dtype=torch.bool)
    return torch.stack(bins), queries


def offset_mass(attn: torch.Tensor, bins: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """[B, H, T, T] attention probabilities -> [B, H, 4] the mass in each bin, mean over the
    chosen queries."""
    a = attn.float()[:, :, queries]  # [B, H, Q, T]
    m = bins[:, queries].to(a.dtype)  # [4, Q, T]
    return torch.einsum("bhqk,nqk->bhn", a, m) / int(queries.sum())


def masked_inputs(
    view: ModelView, ids: torch.Tensor, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """An encoder's masked windows and which positions were masked ([B, T] bool): a
    ``MASK_SHARE`` of each window's inner positions (its first and last kept), at least
    one, chosen by a generator seeded by ``seed`` and the window count."""
    mask_id = getattr(view.tokenizer, "mask_token_id", None)
    if mask_id is None:
        raise GeomlensError(f"{view.name}'s tokenizer has no mask token for a masked-token loss.")
    B, T = ids.shape
    if T < 3:
        raise GeomlensError("a masked-token loss needs windows of at least 3 tokens.")
    g = torch.Generator().manual_seed(seed * 1_000_003 + B)
    n = max(1, round(MASK_SHARE * (T - 2)))
    chosen = torch.zeros(B, T, dtype=torch.bool)
    for b in range(B):
        chosen[b, 1 + torch.randperm(T - 2, generator=g)[:n]] = True
    return ids.masked_fill(chosen, int(mask_id)), chosen


def _loss(logits: torch.Tensor, ids: torch.Tensor, masked: torch.Tensor | None) -> torch.Tensor:
    """[B] each window's mean loss: next token (``masked`` None) or masked tokens."""
    logp = torch.log_softmax(logits.double(), -1)
    if masked is None:
        nll = -logp[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
        return nll.mean(1)
    nll = -logp.gather(-1, ids[..., None])[..., 0]
    return (nll * masked).sum(1) / masked.sum(1)


def measure(
    view: ModelView,
    ids: torch.Tensor,
    edits: Sequence[Edit] = (),
    batch_size: int = 8,
    readout: str = "model",
    seed: int = 0,
    readouts: Mapping[str, Callable[[torch.Tensor], torch.Tensor]] | None = None,
) -> Measured:
    """Run the held-out windows ``ids`` [W, T] with ``edits`` on and measure them.

    Args:
        readout: "model" (the model's own final norm and unembedding), or "no-gain" (the
            final norm without its gain and bias: only centring, for a LayerNorm, and
            scaling to unit RMS), for the gain/bias check.
        seed: the masked positions' seed (encoders).
        readouts: other readouts of the same pass, name -> ``h [B, T, d] -> logits``; their
            losses per window come back in ``readout_loss``.
    """
    if view.is_seq2seq:
        raise GeomlensError(
            f"{view.name} is an encoder-decoder; the interventions measure decoders and encoders."
        )
    causal = not view.is_encoder
    masked_all, targets, inputs = None, ids, ids
    if not causal:
        inputs, masked_all = masked_inputs(view, ids, seed)
    bins, queries = offset_masks(ids.shape[1], causal)
    last = view.n_layers
    losses, attention, logp_sum, contexts = [], [], None, []
    others: dict[str, list[torch.Tensor]] = {name: [] for name in readouts or {}}
    kwargs = base_kwargs(view)
    with eager_attention(view), editing(view, edits), torch.inference_mode():
        for at in range(0, len(ids), batch_size):
            part = inputs[at : at + batch_size].to(view.device)
            target = targets[at : at + batch_size]
            with recording(view, [last], stop=False) as rec:
                out = view.base(input_ids=part, output_attentions=True, **kwargs)
            attn = getattr(out, "attentions", None)
            if not attn or any(a is None for a in attn):
                raise GeomlensError(f"{view.name} returned no attention weights")
            attention.append(torch.stack([offset_mass(a.cpu(), bins, queries) for a in attn], 1))
            h = rec[last]
            contexts.append(h.double().mean(1).cpu())
            logits = readout_logits(view, h, readout).cpu()
            masked = None if masked_all is None else masked_all[at : at + batch_size]
            losses.append(_loss(logits, target, masked))
            for name, read in (readouts or {}).items():
                others[name].append(_loss(read(h).cpu(), target, masked))
            logp = torch.log_softmax(logits.double(), -1).sum((0, 1))
            logp_sum = logp if logp_sum is None else logp_sum + logp
    assert logp_sum is not None
    return Measured(
        loss=torch.cat(losses).numpy(),
        attention=torch.cat(attention).double().numpy(),
        top_tokens=torch.topk(logp_sum, TOP_K).indices.numpy().astype(np.int64),
        context=torch.cat(contexts).numpy(),
        readout_loss={name: torch.cat(v).numpy() for name, v in others.items()},
    )


def readout_logits(
    view: ModelView, h: torch.Tensor, readout: str = "model", order: torch.Tensor | None = None
) -> torch.Tensor:
    """[B, T, d] last-layer states -> [B, T, vocab] logits, through the model's final norm
    ("model"), through it without its gain and bias ("no-gain"), or with its gain and
    bias's coordinates taken in ``order`` ("shuffled": a control as large as the gain)."""
    if readout == "model":
        return view.logits(h)
    norm = view.readout_norm
    if norm is None:
        raise GeomlensError(f"{view.name} has no final norm whose gain and bias could be left out.")
    x = h.double()
    if norm.kind == "layernorm":
        x = x - x.mean(-1, keepdim=True)
    x = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps)
    if readout == "shuffled":
        assert order is not None
        x = x * norm.weight.double().to(x.device)[order]
        if norm.bias is not None:
            x = x + norm.bias.double().to(x.device)[order]
    return view.unembed(x.to(view.W_U.dtype))
