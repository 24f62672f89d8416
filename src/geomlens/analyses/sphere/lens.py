"""Logit lens and residual trajectories: every layer's hidden state read as the model reads
its last one.

Pre-norm models (Llama, GPT-2, Gemma): the hidden states of ``capturing.hooks`` never carry
the final norm (the last one is the last block's raw output), so the lens applies the
final norm exactly once, then W_U; at the last layer this is the model's own logits.
Post-norm encoders (BERT): every block ends in a LayerNorm, so each hidden state already
sits on the (gamma/beta-shaped) sphere and is read through W_U directly; without an LM
head, W_U is the transpose of the token embedding table (W_E, the exact block-0 input,
also holds the token type row, which no readout adds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.analyses.common.vocab import scan_vocab, unembed_scores
from geomlens.models.view import ModelView
from geomlens.stats.rounding import sig

Array = npt.NDArray[np.float64]


def readout_description(view: ModelView) -> str:
    """How hidden states become logits, in words (recorded in metrics)."""
    has_head = getattr(view.model, "get_output_embeddings", lambda: None)() is not None
    # without an LM head, W_U is the input's token table (an encoder's token type row is
    # part of W_E, the block-0 input, but not of the table a tied decoder would read)
    head = "W_U" if has_head else "the token embedding table's transpose (no LM head)"
    if view.final_norm is not None:
        return f"final_norm then {head}"
    return f"{head} (post-norm: hidden states are already normalised)"


def normalised_states(view: ModelView, h: torch.Tensor) -> torch.Tensor:
    """What the unembedding reads: ``final_norm(h)`` for pre-norm models, ``h`` otherwise.

    Args:
        h: [..., d] hidden states from ``capturing.hooks.hidden_states`` (no final norm).
    """
    if view.final_norm is None:
        return h
    with torch.inference_mode():
        return view.final_norm.module(h)


def lens_logits(view: ModelView, h: torch.Tensor) -> torch.Tensor:
    """Logit lens of hidden states: [..., d] -> [..., vocab] (final norm applied once).

    The whole matrix, for tests and single vectors; ``trajectory`` reads it in chunks.

    Args:
        h: [..., d] hidden states without the final norm (as ``capturing.hooks`` returns).
    """
    x = normalised_states(view, h)
    with torch.inference_mode():
        return view.unembed(x)


@dataclass(frozen=True)
class Trajectory:
    """The logit lens of one prompt at every layer.

    Attributes:
        tokens: [T] the prompt's tokens as decoded; ids: [T] their ids.
        layers: hidden-state layers (0 = embedding output).
        top: [layer][position] the top-k token strings.
        top_ids: [layer][position] their ids.
        next_rank: [layer][position] rank (1 = top) of the actual next token; None at the
            last position.
        first_top1: [position] first layer where the next token is top-1, or None.
        prediction: the model's top-1 token after the last position (last layer's lens).
        readout: how hidden states become logits.
    """

    tokens: list[str]
    ids: list[int]
    layers: list[int]
    top: list[list[list[str]]]
    top_ids: list[list[list[int]]]
    next_rank: list[list[int | None]]
    first_top1: list[int | None]
    prediction: str
    prediction_id: int
    readout: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "ids": self.ids,
            "layers": self.layers,
            "readout": self.readout,
            "top5": self.top,
            "next_rank": self.next_rank,
            "first_top1": self.first_top1,
            "prediction": self.prediction,
            "prediction_id": self.prediction_id,
        }


def trajectory(
    view: ModelView,
    ids: Sequence[int],
    hidden: dict[int, torch.Tensor],
    tokens: Sequence[str] | None = None,
    k: int = 5,
) -> Trajectory:
    """Top-k tokens and the next token's rank at every layer and position.

    The logit lens runs over the vocabulary in chunks (``analyses.common.vocab``): no [L, T, vocab]
    matrix is held; equal logits are ordered by ascending id.

    Args:
        view: the model.
        ids: [T] the prompt's token ids.
        hidden: layer -> [T, d] (or [1, T, d]) hidden states without the final norm.
        tokens: [vocab] token strings (None: ids as strings).
        k: how many top tokens per cell.
    """

    def tok(i: int) -> str:
        return str(i) if tokens is None else tokens[i]

    layers = sorted(hidden)
    T = len(ids)
    stacked = torch.stack([hidden[layer].reshape(T, -1) for layer in layers])  # [L, T, d]
    best, above = _lens_readout(view, stacked, ids, k)
    top_ids = [[[int(i) for i in row] for row in best[li]] for li in range(len(layers))]
    top = [[[tok(i) for i in row] for row in layer] for layer in top_ids]
    ranks: list[list[int | None]] = [
        [int(above[li, t]) + 1 if t + 1 < T else None for t in range(T)]
        for li in range(len(layers))
    ]
    first: list[int | None] = []
    for t in range(T):
        hit = [layers[j] for j in range(len(layers)) if ranks[j][t] == 1]
        first.append(hit[0] if hit else None)
    pred = top_ids[-1][-1][0]
    return Trajectory(
        tokens=[tok(int(i)) for i in ids],
        ids=[int(i) for i in ids],
        layers=layers,
        top=top,
        top_ids=top_ids,
        next_rank=ranks,
        first_top1=first,
        prediction=tok(pred),
        prediction_id=pred,
        readout=readout_description(view),
    )


def _lens_readout(
    view: ModelView, stacked: torch.Tensor, ids: Sequence[int], k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The lens of hidden states [L, T, d] over the vocabulary in chunks: top-k ids
    [L, T, k] and the number of logits above the next token's [L, T] (the last position,
    without a next token, ranks its own: not used)."""
    L, T = stacked.shape[:2]
    x = normalised_states(view, stacked).reshape(L * T, -1)  # [L*T, d]
    nxt = torch.as_tensor([*ids[1:], ids[-1]], dtype=torch.long).repeat(L)
    with torch.inference_mode():
        (got,) = scan_vocab(
            unembed_scores(view, x),
            x.shape[0],
            int(view.W_U.shape[1]),
            column_bytes=4 * (x.shape[0] + view.d_model),
            k=k,
            rank_ids=nxt,
        )
    assert got.top_ids is not None and got.ranks is not None
    return got.top_ids.reshape(L, T, -1), got.ranks.reshape(L, T)


def vocabulary_sample(vocab: int, n: int, seed: int, include: Sequence[int] = ()) -> Array:
    """A fixed, sorted, seeded sample of ``n`` token ids, plus ``include``."""
    rng = np.random.default_rng(seed)
    chosen = rng.choice(vocab, size=min(n, vocab), replace=False)
    return np.unique(np.concatenate([chosen, np.asarray(include, dtype=np.int64)]))


@dataclass(frozen=True)
class TrajectoryMap:
    """A UMAP of the prompt's trajectories among token vectors.

    Attributes:
        token_ids: [n_tok] sampled vocabulary ids; token_xy: [n_tok, n_components].
        path_xy: [T, n_layers, n_components] each position's path up the layers.
        layers: the hidden-state layers of the path.
        metric: the UMAP metric.
    """

    token_ids: Array
    token_xy: Array
    path_xy: Array
    layers: list[int]
    metric: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "token_ids": [int(i) for i in self.token_ids],
            "token_xy": [[sig(v, 6) for v in row] for row in self.token_xy],
            "path_xy": [[[sig(v, 6) for v in p] for p in pos] for pos in self.path_xy],
            "layers": self.layers,
            "metric": self.metric,
        }


@cache
def umap_module() -> ModuleType:
    """``umap``, with its numba kernels compiled once per installation, not per process.

    Most of umap's kernels are compiled without numba's on-disk cache, so every new
    process spent about 15 s compiling them (most of the sphere stage); turning the cache
    on for each of them (``Dispatcher.enable_caching``, what ``cache=True`` does) makes
    later processes load the machine code instead. The code and its results are the same.
    """
    import umap
    import umap.layouts
    import umap.spectral
    import umap.umap_
    import umap.utils
    from numba.core.caching import NullCache
    from numba.core.registry import CPUDispatcher

    for module in (umap.umap_, umap.utils, umap.layouts, umap.spectral):
        for kernel in vars(module).values():
            if not isinstance(kernel, CPUDispatcher):
                continue
            if isinstance(vars(kernel).get("_cache"), NullCache):
                kernel.enable_caching()
    return umap


def trajectory_map(
    view: ModelView,
    hidden: dict[int, torch.Tensor],
    token_ids: Array,
    *,
    n_components: int = 3,
    seed: int = 0,
    n_neighbors: int = 15,
    n_epochs: int = 200,
    epoch_bar: dict[str, Any] | None = None,
) -> TrajectoryMap:
    """UMAP (cosine) of normalised hidden states together with unembedding vectors.

    The hidden states are taken as the unembedding reads them (``normalised_states``);
    the token points are the columns of W_U (W_E rows when tied), so nearness in the map
    stands for a high logit.

    Args:
        view: the model.
        hidden: layer -> [T, d] hidden states without the final norm.
        token_ids: [n_tok] vocabulary ids to place.
        n_components: 2 or 3.
        seed: UMAP's random state (fixed: same input, same map).
        n_neighbors: UMAP's neighbourhood size; n_epochs: its optimisation epochs.
        epoch_bar: tqdm options of a bar over those epochs (None: no bar).
    """
    umap = umap_module()
    layers = sorted(hidden)
    states = torch.stack(
        [normalised_states(view, hidden[layer]).reshape(-1, view.d_model) for layer in layers],
        dim=1,
    )  # [T, L, d]
    T, L, _ = states.shape
    vecs = view.W_U[:, torch.as_tensor(token_ids)].T.double().cpu().numpy()
    pts = np.concatenate([vecs, states.reshape(T * L, -1).double().cpu().numpy()])
    # Cosine distances in one matrix product: UMAP's own "cosine" on fewer than 4,096
    # points calls a Python-level metric once per pair (9 million calls for the default
    # 3,000 tokens, most of the sphere stage's time).
    unit = pts / np.maximum(np.linalg.norm(pts, axis=1, keepdims=True), 1e-30)
    distances = np.clip(1.0 - unit @ unit.T, 0.0, 2.0)
    np.fill_diagonal(distances, 0.0)
    reducer = umap.UMAP(
        n_components=n_components,
        n_neighbors=n_neighbors,
        metric="precomputed",
        random_state=seed,
        init="spectral",
        n_epochs=n_epochs,
        n_jobs=1,
        tqdm_kwds={"disable": True} if epoch_bar is None else dict(epoch_bar),
    )
    xy = np.asarray(reducer.fit_transform(distances), dtype=np.float64)
    n = len(token_ids)
    return TrajectoryMap(
        token_ids=np.asarray(token_ids),
        token_xy=xy[:n],
        path_xy=xy[n:].reshape(T, L, n_components),
        layers=layers,
        metric="cosine",
    )
