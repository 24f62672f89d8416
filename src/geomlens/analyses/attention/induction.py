"""Induction heads on repeated random tokens, and the split of their attention.

A batch of random token sequences of length n, each followed by itself (length 2n), goes
through the model with eager attention. A head's induction score is its mean attention
from each token of the second copy (i >= n) to the token after that token's first
occurrence (j = i - n + 1). For the found heads the attention of the second copy splits
into the parts Song & Zhong (2023) name: same token (j = i - n), neighbours, induction
target (j = i - n + 1). See docs/attention.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView

Array = npt.NDArray[np.float64]

DEFAULT_THRESHOLD = 0.3
NEIGHBOUR_RADIUS = 2


@dataclass(frozen=True)
class InductionSplit:
    """Mean attention mass of one head's second-copy queries, by target.

    All are means over batch and queries i in [n, 2n) of summed attention; the sets are
    disjoint, so ``same_token + neighbours + induction + other == 1``.

    Attributes:
        layer, head: block and query head.
        score: the induction score (= ``induction``).
        same_token: j = i - n (the same token's earlier occurrence).
        neighbours_local: i - 2 <= j <= i (the query and the two tokens before it).
        neighbours_earlier: |j - (i - n)| <= 2 except j = i - n and j = i - n + 1.
        neighbours: the union of the two neighbour sets.
        induction: j = i - n + 1.
        other: every remaining key.
    """

    layer: int
    head: int
    score: float
    same_token: float
    neighbours_local: float
    neighbours_earlier: float
    neighbours: float
    induction: float
    other: float


@dataclass(frozen=True)
class InductionResult:
    """Induction scores of every head and the split of the chosen heads.

    Attributes:
        scores: [L, H] induction score per (block, head), in [0, 1].
        n: length of the random sequence (inputs are 2n tokens); batch: sequences.
        threshold: the score above which a head counts as an induction head.
        found: (layer, head) with score > threshold, highest first.
        top: the top_k (layer, head), highest first.
        splits: one ``InductionSplit`` per head of ``found`` and ``top`` (found first).
        seed: seed of the token sampler.
    """

    scores: Array
    n: int
    batch: int
    threshold: float
    found: tuple[tuple[int, int], ...]
    top: tuple[tuple[int, int], ...]
    splits: tuple[InductionSplit, ...]
    seed: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-able numbers."""
        return {
            "scores": self.scores.tolist(),
            "n": self.n,
            "batch": self.batch,
            "threshold": self.threshold,
            "found": [list(x) for x in self.found],
            "top": [list(x) for x in self.top],
            "splits": [vars(s) for s in self.splits],
            "seed": self.seed,
        }


def repeated_tokens(view: ModelView, n: int, batch: int, seed: int = 0) -> torch.Tensor:
    """[batch, 2n] random tokens (no special tokens) each followed by itself.

    Tokens are drawn uniformly with replacement by ``np.random.default_rng(seed)`` from the
    embedding's vocabulary minus the tokenizer's special ids (all ids without a tokenizer).
    """
    vocab = int(view.W_E.shape[0])
    special = set(getattr(view.tokenizer, "all_special_ids", None) or [])
    allowed = np.array([t for t in range(vocab) if t not in special], dtype=np.int64)
    rng = np.random.default_rng(seed)
    first = allowed[rng.integers(0, len(allowed), size=(batch, n))]
    return torch.as_tensor(np.concatenate([first, first], axis=1))


def check_eager(view: ModelView) -> None:
    """Refuse a model that does not run eager attention (no attention weights otherwise)."""
    impl = getattr(view.config, "_attn_implementation", None)
    if impl != "eager":
        raise GeomlensError(
            f"attention weights need eager attention, {view.name} runs {impl!r}: "
            'load it with load_model(name, attention="eager")'
        )


def layer_attention_weights(view: ModelView, input_ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Every block's [B, H, T, T] attention probabilities (needs eager attention), float32
    on the CPU: the model's own tensors where they already are, with no stacked copy (at
    T = 1024 a window's attention of 24 layers is 1.6 GB)."""
    check_eager(view)
    with torch.inference_mode():
        out = view.base(input_ids=input_ids.to(view.device), output_attentions=True)
    attn = getattr(out, "attentions", None)
    if not attn or any(a is None for a in attn):
        raise GeomlensError(f"{view.name} returned no attention weights")
    return tuple(a.float().cpu() for a in attn)


def attention_weights(view: ModelView, input_ids: torch.Tensor) -> torch.Tensor:
    """[L, B, H, T, T] attention probabilities of every block (needs eager attention)."""
    return torch.stack(layer_attention_weights(view, input_ids))


def decoder_attention_weights(view: ModelView, input_ids: torch.Tensor) -> torch.Tensor:
    """[L_dec, B, H, T, T] self-attention probabilities of an encoder-decoder's decoder.

    The decoder reads ``input_ids``; the encoder reads one end-of-sequence token (an empty
    input as a T5 tokenizer encodes it), so whatever the decoder copies it finds in its own
    self-attention, not through cross-attention.
    """
    check_eager(view)
    config: Any = view.model.config
    eos = config.eos_token_id if config.eos_token_id is not None else config.pad_token_id
    source = torch.full((input_ids.shape[0], 1), int(eos), dtype=torch.long)
    with torch.inference_mode():
        out = view.model(
            input_ids=source.to(view.device),
            decoder_input_ids=input_ids.to(view.device),
            output_attentions=True,
        )
    attn = getattr(out, "decoder_attentions", None)
    if not attn or any(a is None for a in attn):
        raise GeomlensError(f"{view.name} returned no decoder attention weights")
    return torch.stack([a.float().cpu() for a in attn])


def target_masks(n: int) -> dict[str, torch.Tensor]:
    """[n, 2n] bool masks over keys j for the second-copy queries i = n..2n-1, per part."""
    i = torch.arange(n, 2 * n)[:, None]
    j = torch.arange(2 * n)[None, :]
    causal = j <= i
    same = j == i - n
    induction = j == i - n + 1
    local = causal & (j >= i - NEIGHBOUR_RADIUS)
    earlier = ((j - (i - n)).abs() <= NEIGHBOUR_RADIUS) & ~same & ~induction & causal
    neighbours = (local | earlier) & ~same & ~induction
    return {
        "same_token": same,
        "neighbours_local": local & ~same & ~induction,
        "neighbours_earlier": earlier & ~local,
        "neighbours": neighbours,
        "induction": induction,
    }


def split_head(attn: torch.Tensor, n: int, layer: int, head: int) -> InductionSplit:
    """The split of one head from its [B, 2n, 2n] attention probabilities."""
    rows = attn[:, n : 2 * n].double()  # [B, n, 2n]
    masks = target_masks(n)
    mass = {k: float((rows * m).sum(-1).mean()) for k, m in masks.items()}
    other = 1.0 - mass["same_token"] - mass["neighbours"] - mass["induction"]
    return InductionSplit(
        layer=layer,
        head=head,
        score=mass["induction"],
        other=other,
        **mass,
    )


def induction_heads(
    view: ModelView,
    n: int = 32,
    batch: int = 4,
    seed: int = 0,
    threshold: float = DEFAULT_THRESHOLD,
    top_k: int = 5,
    input_ids: torch.Tensor | None = None,
) -> InductionResult:
    """Score every head for induction on repeated random tokens and split the best ones.

    Args:
        view: a decoder loaded with eager attention.
        n: length of the random sequence (the model sees 2n tokens).
        batch: number of sequences.
        seed: seed of the sampler.
        threshold: induction heads score above this.
        top_k: also split the top_k heads by score.
        input_ids: [B, 2n] own repeated sequences instead of sampled ones.
    """
    if view.kind == "encoder":
        raise GeomlensError("induction heads are measured on causal decoders only")
    ids = repeated_tokens(view, n, batch, seed) if input_ids is None else input_ids
    if ids.shape[1] != 2 * n or not torch.equal(ids[:, :n], ids[:, n:]):
        raise GeomlensError(f"input_ids must be [B, {2 * n}]: a sequence followed by itself")
    weights = decoder_attention_weights if view.is_seq2seq else attention_weights
    attn = weights(view, ids)  # [L, B, H, T, T]
    i = torch.arange(n, 2 * n)
    scores = attn[:, :, :, i, i - n + 1].double().mean((1, 3)).numpy()  # [L, H]
    order = np.argsort(-scores, axis=None, kind="stable")
    H = scores.shape[1]
    ranked = [(int(o) // H, int(o) % H) for o in order]
    found = tuple((l, h) for l, h in ranked if scores[l, h] > threshold)
    top = tuple(ranked[:top_k])
    chosen = list(found) + [x for x in top if x not in found]
    splits = tuple(split_head(attn[l, :, h], n, l, h) for l, h in chosen)
    return InductionResult(
        scores=scores,
        n=n,
        batch=int(ids.shape[0]),
        threshold=threshold,
        found=found,
        top=top,
        splits=splits,
        seed=seed,
    )
