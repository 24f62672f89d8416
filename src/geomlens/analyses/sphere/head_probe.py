"""Probe attention heads with normalised common nouns (Molina 2023, "Traveling Words").

Each noun's embedding is put on the sphere the way the block's attention input is: by the
block's first norm (pre-norm), or by the norm that ends the previous block (post-norm;
the embedding norm for block 0). Positions are left out: rotary models are probed at
relative offset 0 (the rotation cancels) and learned positions are not added.

- W_QK: the score of query x and key y is ``(x W_Q + b_Q) . (y W_K + b_K)`` (Gemma's
  per-head q/k norms applied when the model has them). For each query noun: its top keys
  among the nouns and among the whole (normalised) vocabulary, which is normalised,
  projected and scored one chunk at a time (``analyses.common.vocab``; equal scores: lower id
  first).
- W_VO: what a noun's value writes, ``(x W_V + b_V) W_O``, read through the readout
  (the linear part of the readout norm, then W_U): its top tokens.
- Per head: the fraction of nouns whose top noun key is themselves, and the mean rank
  (1 = top) of the query noun among its noun keys.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from geomlens.analyses.common.vocab import Columns, matrix_scores, scan_vocab
from geomlens.analyses.sphere.compute import norm_linear, readout_norm
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView, NormView
from geomlens.stats.intervals import percentiles, resamples, wilson
from geomlens.stats.rounding import sig

INTERVALS = (
    "95% over the nouns: the self fraction by the Wilson score; the mean self rank by a "
    "bootstrap of the query nouns (1000 draws seeded by the layer; the keys stay all nouns)"
)


def probe_input_norm(view: ModelView, layer: int) -> NormView | None:
    """The norm that puts block ``layer``'s attention input on the sphere."""
    block = view.blocks[layer]
    if block.attn_input_norm is not None:
        return block.attn_input_norm
    if block.layout == "post":  # the previous block's last norm wrote this input
        return view.embedding_norm if layer == 0 else view.blocks[layer - 1].norm_mlp
    return None


def single_token_ids(tokenizer: Any, words: Sequence[str]) -> tuple[list[str], list[int]]:
    """The words that are one token (tried as " word", then "word"), with their ids."""
    kept, ids = [], []
    for word in words:
        for variant in (" " + word, word):
            toks = tokenizer(variant, add_special_tokens=False)["input_ids"]
            if len(toks) == 1:
                kept.append(word)
                ids.append(int(toks[0]))
                break
    return kept, ids


def normalise_tokens(view: ModelView, layer: int, ids: torch.Tensor) -> torch.Tensor:
    """[n] token ids -> [n, d] their embeddings as block ``layer``'s attention input sees them."""
    e = view.W_E[ids] * view.embedding_scale
    norm = probe_input_norm(view, layer)
    if norm is None:
        return e
    with torch.inference_mode():
        return norm.module(e)


def _queries_keys(
    view: ModelView, layer: int, hw: Any, x: torch.Tensor, queries_too: bool = True
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per head, queries and keys [n, e] of normalised tokens x [n, d], float32: through
    the block's q/k norms when it has them (per head or over all heads, as the model
    applies them), else the plain projections ``x W + b``. Without ``queries_too`` the
    plain path projects no queries (an empty list): the vocabulary scan needs keys only."""
    attn = view.blocks[layer].attn
    with torch.inference_mode():
        if not attn.linear_qk:
            q, k = attn.project_qk(x[None], hw)
            return list(q[0].float()), list(k[0].float())
        group = view.n_heads // view.n_kv_heads  # query heads per (expanded) K/V head
        keys: dict[int, torch.Tensor] = {}
        for h in range(0, view.n_heads, group):  # heads of one K/V head share its keys
            keys[h // group] = _proj(x, hw.W_K[h], _b(hw.b_K, h))
        heads = range(view.n_heads) if queries_too else range(0)
        queries = [_proj(x, hw.W_Q[h], _b(hw.b_Q, h)) for h in heads]
        return queries, [keys[h // group] for h in range(view.n_heads)]


def _vocab_keys(
    view: ModelView, layer: int, hw: Any, queries: list[torch.Tensor], k: int
) -> list[torch.Tensor]:
    """Per head, the top-k keys [n, k] of the queries [n, e] among the whole normalised
    vocabulary, scanned in chunks (``vocab.scan_vocab``): a chunk's tokens are normalised
    and projected to keys, scored, and dropped."""
    V, H, n = int(view.W_E.shape[0]), view.n_heads, queries[0].shape[0]
    e = queries[0].shape[-1]

    def score(cols: Columns) -> list[torch.Tensor]:
        ids = torch.arange(V)[cols]
        x = normalise_tokens(view, layer, ids).float()
        keys = _queries_keys(view, layer, hw, x, queries_too=False)[1]
        return [queries[h] @ keys[h].T for h in range(H)]

    with torch.inference_mode():
        got = scan_vocab(
            score, n, V, n_scores=H, column_bytes=4 * (4 * view.d_model + 3 * H * e + H * n), k=k
        )
    return [r.top_ids for r in got if r.top_ids is not None]


@dataclass(frozen=True)
class HeadProbe:
    """The probe of the heads of some layers.

    Attributes:
        nouns: the probe words (single tokens); noun_ids: their ids.
        layers: blocks probed.
        self_fraction: [layer][head] fraction of nouns whose top noun key is themselves.
        mean_self_rank: [layer][head] mean rank of the query among its noun keys.
        self_fraction_ci, mean_self_rank_ci: [layer][head] their 95% intervals [low, high]
            over the nouns (``INTERVALS`` says how).
        tables: per layer, per head, per noun: "keys_nouns", "keys_vocab", "vo_tokens".
        n_dropped: requested nouns that were not a single token.
    """

    nouns: list[str]
    noun_ids: list[int]
    layers: list[int]
    self_fraction: list[list[float]]
    mean_self_rank: list[list[float]]
    tables: dict[str, Any]
    n_dropped: int
    k: int
    self_fraction_ci: list[list[list[float]]] = field(default_factory=list)
    mean_self_rank_ci: list[list[list[float]]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        heads = []
        for li, layer in enumerate(self.layers):
            for h, (f, r) in enumerate(
                zip(self.self_fraction[li], self.mean_self_rank[li], strict=True)
            ):
                heads.append({"layer": layer, "head": h, "self_fraction": f, "mean_self_rank": r})
        return {
            "layers": self.layers,
            "n_nouns": len(self.nouns),
            "n_dropped_multi_token": self.n_dropped,
            "self_fraction": self.self_fraction,
            "mean_self_rank": self.mean_self_rank,
            "self_fraction_ci": self.self_fraction_ci,
            "mean_self_rank_ci": self.mean_self_rank_ci,
            "intervals": INTERVALS,
            "heads": heads,
            "positions": "left out (rotary: offset 0; learned positions not added)",
        }

    def tables_dict(self) -> dict[str, Any]:
        return {"nouns": self.nouns, "noun_ids": self.noun_ids, "k": self.k, "layers": self.tables}


def probe_heads(
    view: ModelView,
    noun_ids: Sequence[int],
    layers: Sequence[int],
    *,
    nouns: Sequence[str] | None = None,
    tokens: Sequence[str] | None = None,
    k: int = 5,
    n_dropped: int = 0,
    progress: Callable[[int], object] | None = None,
) -> HeadProbe:
    """Probe every head of ``layers`` with the nouns.

    Args:
        view: the model.
        noun_ids: [n] token ids of the probe nouns (n >= 2).
        layers: block indices.
        nouns: [n] the words (default: their token strings).
        tokens: [vocab] token strings (None: ids as strings).
        k: entries per table row.
        n_dropped: recorded as is (nouns left out by the caller).
        progress: called with 1 after each layer (a progress bar's ``update``).
    """
    different = len(set(noun_ids))
    if different < 2:  # one token repeated: every head's self fraction would be 1
        raise GeomlensError(
            "the head probe needs at least 2 different single-token nouns, but the nouns "
            f"given make {different}; give more nouns that are one token each."
        )
    bad = [layer for layer in layers if not 0 <= layer < view.n_layers]
    if bad:
        raise GeomlensError(
            f"--probe-layers {bad} out of range: blocks are 0..{view.n_layers - 1}."
        )

    def tok(i: int) -> str:
        return str(i) if tokens is None else tokens[i]

    ids = torch.as_tensor(list(noun_ids), dtype=torch.long)
    words = list(nouns) if nouns is not None else [tok(int(i)) for i in ids]
    fractions, ranks, fraction_cis, rank_cis, tables = [], [], [], [], {}
    for layer in layers:
        frac_row, rank_row, layer_tab, (frac_ci, rank_ci) = _probe_layer(view, layer, ids, k)
        fractions.append(frac_row)
        ranks.append(rank_row)
        fraction_cis.append(frac_ci)
        rank_cis.append(rank_ci)
        tables[str(layer)] = _layer_tables(layer_tab, words, tok)
        if progress is not None:
            progress(1)
    return HeadProbe(
        nouns=words,
        noun_ids=[int(i) for i in ids],
        layers=list(layers),
        self_fraction=fractions,
        mean_self_rank=ranks,
        tables=tables,
        n_dropped=n_dropped,
        k=k,
        self_fraction_ci=fraction_cis,
        mean_self_rank_ci=rank_cis,
    )


def _layer_tables(
    tops: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    words: list[str],
    tok: Callable[[int], str],
) -> list[dict[str, Any]]:
    """Per head, per noun: the top noun keys, vocabulary keys and W_VO tokens as text."""
    return [
        {
            "head": h,
            "probes": [
                {
                    "noun": words[i],
                    "keys_nouns": [words[int(j)] for j in top_n[i]],
                    "keys_vocab": [tok(int(j)) for j in top_a[i]],
                    "vo_tokens": [tok(int(j)) for j in top_vo[i]],
                }
                for i in range(len(words))
            ],
        }
        for h, (top_n, top_a, top_vo) in enumerate(tops)
    ]


Intervals = tuple[list[list[float]], list[list[float]]]


def _probe_layer(
    view: ModelView, layer: int, ids: torch.Tensor, k: int
) -> tuple[
    list[float], list[float], list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], Intervals
]:
    """One block's probe: per head the self fraction, the mean self rank, the top ids
    ([n, k] each) among the nouns, among the vocabulary (keys), and of W_VO's readout, and
    the two numbers' intervals over the nouns."""
    n = len(ids)
    hw = view.blocks[layer].heads()
    _, rnorm = readout_norm(view)
    x = normalise_tokens(view, layer, ids).float()  # [n, d]
    queries, keys = _queries_keys(view, layer, hw, x)
    vocab_top = _vocab_keys(view, layer, hw, queries, k)
    frac_row, rank_row, tops = [], [], []
    frac_ci: list[list[float]] = []
    rank_ci: list[list[float]] = []
    draws = resamples(n, seed=layer)
    for h in range(view.n_heads):
        with torch.inference_mode():
            s_n = (queries[h] @ keys[h].T).double()  # [n, n]
            vo = _proj(x, hw.W_V[h], _b(hw.b_V, h)) @ hw.W_O[h].float()  # [n, d]
            (vo_read,) = scan_vocab(
                matrix_scores(norm_linear(vo, rnorm), view.W_U),
                n,
                int(view.W_U.shape[1]),
                column_bytes=4 * (n + view.d_model),
                k=k,
            )
        diag = s_n.diagonal()
        rank = (s_n > diag[:, None]).sum(-1) + 1
        top_n = torch.topk(s_n, min(k, n), dim=-1).indices
        assert vo_read.top_ids is not None
        tops.append((top_n, vocab_top[h], vo_read.top_ids))
        frac_row.append(sig(float((rank == 1).double().mean())))
        rank_row.append(sig(float(rank.double().mean())))
        w = wilson(int((rank == 1).sum()), n)
        frac_ci.append([w["low"], w["high"]])
        ranks = rank.double().numpy()
        rank_ci.append([sig(v) for v in percentiles(ranks[draws].mean(1))])
    return frac_row, rank_row, tops, (frac_ci, rank_ci)


def _proj(v: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    out = v @ W.float()
    return out if b is None else out + b.float()


def _b(b: torch.Tensor | None, h: int) -> torch.Tensor | None:
    return None if b is None else b[h]


def default_probe_layers(view: ModelView) -> list[int]:
    """First, middle and last block."""
    return sorted({0, view.n_layers // 2, view.n_layers - 1})
