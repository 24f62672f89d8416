"""The positional geometry of a trained addition model, by the shared decomposition code.

The grid is C problems of one operand length n, each fed as the model sees it when it
predicts the last answer digit: prompt plus every answer token but the last, T = 3n + 2
tokens at position ids 0..T-1. Hidden states of every layer stream into the same
``DecompositionAccumulator`` that ``geomlens capture`` uses, and ``analyse_layer`` turns
them into shares, positional rank, ``pos_low_freq`` and ``pos_smoothness``. Attention
logits of every block are split into pos-pos, pos-ctx, ctx-pos, ctx-ctx and rest parts
by ``analyses.attention.parts``. All positions are kept: position 0 holds an operand
digit here, with no special token before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.analyses.arithmetic.data import Problems, sequence_length
from geomlens.analyses.attention.parts import AttentionParts, attention_parts, split_logits
from geomlens.analyses.common.spectra import gram_matrix
from geomlens.analyses.decomposition.compute import LayerDecomposition, analyse_layers
from geomlens.capturing.hooks import hidden_states
from geomlens.models.view import ModelView
from geomlens.stats import CapturedBatch, DecompositionAccumulator, DecompositionStats

Array = npt.NDArray[np.float64]

GEOMETRY_STREAM = 31
"""Seed-sequence tag of the problems whose hidden states are decomposed."""


def grid_length(n: int) -> int:
    """T of the decomposition grid for operand length n: 3n + 2 (the last answer token,
    which is never an input while decoding, is left off)."""
    return sequence_length(n) - 1


def untrained_block(gram: Array, trained: int) -> tuple[float | None, float | None]:
    """How the position ids that never received gradient sit against the trained ones.

    Args:
        gram: [T, T] cosine Gram matrix of the positional basis.
        trained: the first ``trained`` ids were trained; ids ``trained..T-1`` were not.

    Returns:
        (mean cosine between two different untrained ids, mean cosine between a trained
        and an untrained id); (None, None) when the grid has no untrained id, and None for
        the first when it has only one. A high first and a low or negative second: the
        untrained ids form a block of their own, cut off from the trained ones.
    """
    T = gram.shape[0]
    if trained >= T:
        return None, None
    block = gram[trained:, trained:]
    k = block.shape[0]
    within = float((block.sum() - np.trace(block)) / (k * (k - 1))) if k > 1 else None
    return within, float(gram[:trained, trained:].mean())


@dataclass(frozen=True)
class Geometry:
    """The positional geometry of one model on problems of one operand length.

    Attributes:
        operand_length: n.
        trained_positions: how many leading position ids received gradient in training
            (3 * max training length + 2; every id for the control), for reference lines.
        layers: per hidden-state layer (0 = embedding output) the decomposition results
            (``to_dict`` adds ``untrained_cos_within`` and ``untrained_cos_across``, from
            ``untrained_block``).
        stats: per layer the decomposition statistics (for figures).
        attention: per block the split of its attention logits.
        pos_pos: [blocks, H, T, T] the pos-pos logit part averaged over the attention
            contexts (nan above the diagonal: causal).
    """

    operand_length: int
    trained_positions: int
    layers: list[LayerDecomposition]
    stats: list[DecompositionStats]
    attention: list[AttentionParts]
    pos_pos: Array

    @property
    def n_positions(self) -> int:
        return grid_length(self.operand_length)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able numbers: per-layer rows (first 16 singular values) and per-block
        attention shares."""
        rows = []
        for r, st in zip(self.layers, self.stats, strict=True):
            row = r.to_dict()
            row["pos_singular_values"] = row["pos_singular_values"][:16]
            within, across = untrained_block(gram_matrix(st.pos), self.trained_positions)
            row["untrained_cos_within"], row["untrained_cos_across"] = within, across
            rows.append(row)
        blocks = []
        for a in self.attention:
            entry = a.to_dict()
            entry["pos_pos_share"] = [head[0] for head in entry["share"]]
            blocks.append(entry)
        return {
            "operand_length": self.operand_length,
            "n_positions": self.n_positions,
            "trained_positions": self.trained_positions,
            "n_contexts": self.layers[0].n_contexts if self.layers else 0,
            "layers": rows,
            "attention": blocks,
        }


def decompose(
    view: ModelView, tokens: torch.Tensor, batch_size: int = 128
) -> DecompositionAccumulator:
    """Stream [C, T] token ids through the model into a complete accumulator (all layers)."""
    C, T = tokens.shape
    layers = list(range(view.n_layers + 1))
    acc = DecompositionAccumulator(layers, C, T, view.d_model, second_moment=True)
    for start in range(0, C, batch_size):
        ids = tokens[start : start + batch_size]
        hidden = hidden_states(view, ids, layers)
        index = torch.arange(start, start + ids.shape[0])
        acc.update(
            CapturedBatch(hidden={k: v.cpu() for k, v in hidden.items()}, context_index=index)
        )
    return acc


def measure(
    view: ModelView,
    problems: Problems,
    *,
    trained_positions: int,
    attention_contexts: int = 16,
    seed: int = 0,
) -> Geometry:
    """Decompose the hidden states of ``problems`` and split every block's attention.

    Args:
        view: the trained model's view (in eval mode).
        problems: C problems of one operand length (C >= 2).
        trained_positions: leading position ids that received gradient in training.
        attention_contexts: problems whose attention logits are split.
        seed: seed of the analyses' random baselines.
    """
    n = problems.n
    tokens = torch.from_numpy(problems.tokens[:, : grid_length(n)].copy())
    acc = decompose(view, tokens)
    results = analyse_layers(acc, labels=None, skip_first=False, seed=seed)
    stats = [acc.finalize(layer) for layer in acc.layers]
    n_attn = min(attention_contexts, tokens.shape[0])
    blocks = list(range(view.n_layers))
    inputs = hidden_states(view, tokens[:n_attn], blocks)
    parts, pos_pos = [], []
    contexts = np.arange(n_attn)
    for block in blocks:
        split = attention_parts(view, block, inputs[block], stats[block], contexts=contexts)
        parts.append(split)
        pp = split_logits(view, block, inputs[block], stats[block], contexts)["pos_pos"]
        mean = pp.mean(0).cpu().numpy()
        mean[:, ~np.tril(np.ones(mean.shape[-2:], dtype=bool))] = np.nan
        pos_pos.append(mean)
    return Geometry(
        operand_length=n,
        trained_positions=trained_positions,
        layers=results,
        stats=stats,
        attention=parts,
        pos_pos=np.stack(pos_pos) if pos_pos else np.zeros((0, 0, 0, 0)),
    )
