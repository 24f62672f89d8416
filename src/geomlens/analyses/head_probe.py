"""Probe attention heads with normalised common nouns (Molina 2023, "Traveling Words").

Each noun's embedding is put on the sphere the way the block's attention input is: by the
block's first norm (pre-norm), or by the norm that ends the previous block (post-norm;
the embedding norm for block 0). Positions are left out: rotary models are probed at
relative offset 0 (the rotation cancels) and learned positions are not added.

- W_QK: the score of query x and key y is ``(x W_Q + b_Q) . (y W_K + b_K)`` (Gemma's
  per-head q/k norms applied when the model has them). For each query noun: its top keys
  among the nouns and among the whole (normalised) vocabulary.
- W_VO: what a noun's value writes, ``(x W_V + b_V) W_O``, read through the readout
  (the linear part of the readout norm, then W_U): its top tokens.
- Per head: the fraction of nouns whose top noun key is themselves, and the mean rank
  (1 = top) of the query noun among its noun keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from geomlens.analyses.sphere import norm_linear, readout_norm, sig
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView, NormView


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


def _normed_qk(
    view: ModelView, layer: int, hw: Any, x: torch.Tensor, x_all: torch.Tensor, chunk: int = 8192
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """Queries and keys through the block's q/k norms (per head or over all heads, as the
    model applies them): ([H, n, e], [H, n, e], [H, V, e]); None when it has none."""
    attn = view.blocks[layer].attn
    if attn.linear_qk:
        return None
    with torch.inference_mode():
        q, kn = attn.project_qk(x[None], hw)
        keys = [
            attn.project_qk(x_all[i : i + chunk][None], hw)[1] for i in range(0, len(x_all), chunk)
        ]
    return q[0].float(), kn[0].float(), torch.cat(keys, dim=2)[0].float()


@dataclass(frozen=True)
class HeadProbe:
    """The probe of the heads of some layers.

    Attributes:
        nouns: the probe words (single tokens); noun_ids: their ids.
        layers: blocks probed.
        self_fraction: [layer][head] fraction of nouns whose top noun key is themselves.
        mean_self_rank: [layer][head] mean rank of the query among its noun keys.
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
    """
    if len(noun_ids) < 2:
        raise GeomlensError("the head probe needs at least 2 single-token nouns.")
    bad = [layer for layer in layers if not 0 <= layer < view.n_layers]
    if bad:
        raise GeomlensError(
            f"--probe-layers {bad} out of range: blocks are 0..{view.n_layers - 1}."
        )

    def tok(i: int) -> str:
        return str(i) if tokens is None else tokens[i]

    ids = torch.as_tensor(list(noun_ids), dtype=torch.long)
    n = len(ids)
    words = list(nouns) if nouns is not None else [tok(int(i)) for i in ids]
    V = view.W_E.shape[0]
    _, rnorm = readout_norm(view)
    W_U = view.W_U.float()
    fractions, ranks, tables = [], [], {}
    for layer in layers:
        hw = view.blocks[layer].heads()
        x = normalise_tokens(view, layer, ids).float()  # [n, d]
        x_all = normalise_tokens(view, layer, torch.arange(V)).float()  # [V, d]
        frac_row, rank_row, layer_tab = [], [], []
        normed = _normed_qk(view, layer, hw, x, x_all)
        group = view.n_heads // view.n_kv_heads  # query heads per (expanded) K/V head
        ka_cache: dict[int, torch.Tensor] = {}
        for h in range(view.n_heads):
            with torch.inference_mode():
                if normed is not None:
                    q, kn, ka = normed[0][h], normed[1][h], normed[2][h]
                else:
                    q = _proj(x, hw.W_Q[h], _b(hw.b_Q, h))
                    kn = _proj(x, hw.W_K[h], _b(hw.b_K, h))
                    if h // group not in ka_cache:
                        ka_cache = {h // group: _proj(x_all, hw.W_K[h], _b(hw.b_K, h))}
                    ka = ka_cache[h // group]
                s_n = (q @ kn.T).double()  # [n, n]
                s_a = q @ ka.T  # [n, V]
                vo = _proj(x, hw.W_V[h], _b(hw.b_V, h)) @ hw.W_O[h].float()  # [n, d]
                vo_logits = norm_linear(vo, rnorm) @ W_U
            diag = s_n.diagonal()
            rank = (s_n > diag[:, None]).sum(-1) + 1
            top_n = torch.topk(s_n, min(k, n), dim=-1).indices
            top_a = torch.topk(s_a, k, dim=-1).indices
            top_vo = torch.topk(vo_logits, k, dim=-1).indices
            frac_row.append(sig(float((rank == 1).double().mean())))
            rank_row.append(sig(float(rank.double().mean())))
            layer_tab.append(
                {
                    "head": h,
                    "probes": [
                        {
                            "noun": words[i],
                            "keys_nouns": [words[int(j)] for j in top_n[i]],
                            "keys_vocab": [tok(int(j)) for j in top_a[i]],
                            "vo_tokens": [tok(int(j)) for j in top_vo[i]],
                        }
                        for i in range(n)
                    ],
                }
            )
        fractions.append(frac_row)
        ranks.append(rank_row)
        tables[str(layer)] = layer_tab
    return HeadProbe(
        nouns=words,
        noun_ids=[int(i) for i in ids],
        layers=list(layers),
        self_fraction=fractions,
        mean_self_rank=ranks,
        tables=tables,
        n_dropped=n_dropped,
        k=k,
    )


def _proj(v: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    out = v @ W.float()
    return out if b is None else out + b.float()


def _b(b: torch.Tensor | None, h: int) -> torch.Tensor | None:
    return None if b is None else b[h]


def default_probe_layers(view: ModelView) -> list[int]:
    """First, middle and last block."""
    return sorted({0, view.n_layers // 2, view.n_layers - 1})
