"""Figures of the attention analyses: logit parts, W_QK in the positional basis, induction.

Each function takes results and returns a matplotlib ``Figure`` drawn with the Agg canvas
(no pyplot state). Only ``save`` writes files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from geomlens.analyses.attention.induction import InductionResult
from geomlens.analyses.attention.parts import AttentionParts
from geomlens.analyses.attention.qk_basis import QKBasis
from geomlens.reporting.figures import new_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PART_COLOURS = {
    "pos_pos": "#1f77b4",
    "pos_ctx": "#9467bd",
    "ctx_pos": "#2ca02c",
    "ctx_ctx": "#ff7f0e",
    "rest": "#bbbbbb",
    "pos_bias": "#17becf",
}
SPLIT_PARTS = ("same_token", "neighbours", "induction", "other")
SPLIT_COLOURS = ("#2ca02c", "#1f77b4", "#d62728", "#bbbbbb")


def _draw_part_shares(ax: Axes, result: AttentionParts, which: str) -> None:
    shares = getattr(result, which)
    H = shares.shape[0]
    x = np.arange(H)
    pos_bottom, neg_bottom = np.zeros(H), np.zeros(H)
    for p, name in enumerate(result.parts):
        v = shares[:, p]
        bottom = np.where(v >= 0, pos_bottom, neg_bottom)
        ax.bar(x, v, bottom=bottom, color=PART_COLOURS.get(name), label=name)
        pos_bottom += np.clip(v, 0, None)
        neg_bottom += np.clip(v, None, 0)
    ax.set_xticks(x)
    ax.set_xlabel("head")
    ax.set_ylabel(which)
    skip = "position 0 skipped" if result.skip_first else "all positions"
    ax.set_title(f"Attention logit parts, block {result.layer} ({skip})", fontsize=9)


def part_shares(results: AttentionParts | Sequence[AttentionParts], which: str = "share") -> Figure:
    """Stacked bars per head of the logit parts' shares, one panel per block.

    Args:
        results: the split of one block, or of several (one panel each).
        which: "share" (var of each part over their sum), "share_cov" (covariance with
            the logits; may be negative) or "share_centred" (row-centred).
    """
    blocks = [results] if isinstance(results, AttentionParts) else list(results)
    H = getattr(blocks[0], which).shape[0]
    fig = new_figure(max(4.0, 0.4 * H + 2), 3.0 * len(blocks))
    for i, result in enumerate(blocks):
        ax = fig.add_subplot(len(blocks), 1, i + 1)
        _draw_part_shares(ax, result, which)
        if i == 0:
            ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def part_heatmaps(result: AttentionParts) -> Figure:
    """Mean |part| heatmaps [query i x key j] of the four position/context parts (one head)."""
    fig = new_figure(10.0, 2.9)
    axes = fig.subplots(1, 4)
    shown = result.heatmaps[:4]
    vmax = float(np.nanmax(shown)) if np.isfinite(shown).any() else 1.0
    image = None
    for ax, name, heat in zip(axes, result.parts[:4], shown, strict=True):
        image = ax.imshow(heat, cmap="viridis", vmin=0.0, vmax=vmax or 1.0)
        ax.set_title(name)
        ax.set_xlabel("key j")
    axes[0].set_ylabel("query i")
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.8, label="mean |logit part|")
    fig.suptitle(f"Block {result.layer}, head {result.heatmap_head}")
    return fig


def qk_matrix(result: QKBasis, head: int = 0) -> Figure:
    """M = U^T W_QK U of one head next to its low-rank + diagonal fit and the residual.

    Args:
        result: the block's W_QK in the positional basis.
        head: index into ``result.heads`` (not the head number).
    """
    h = result.heads[head]
    fit = h.fit.low_rank + np.diag(h.fit.diagonal)
    panels = [
        ("M", h.matrix),
        (f"rank {h.rank} + diagonal", fit),
        ("M - fit", h.matrix - fit),
    ]
    vmax = float(np.abs(h.matrix).max()) or 1.0
    fig = new_figure(9.5, 3.2)
    axes = fig.subplots(1, 3)
    image = None
    for ax, (title, m) in zip(axes, panels, strict=True):
        image = ax.imshow(m, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
        ax.set_title(title)
    if image is not None:
        fig.colorbar(image, ax=list(axes), shrink=0.8)
    fig.suptitle(
        f"Block {result.layer} head {h.head}: W_QK in top-{result.k} positional basis "
        f"(residual {h.fit.residual:.2f}, random {h.baseline_residual:.2f})"
    )
    return fig


def induction_scores(result: InductionResult) -> Figure:
    """Heatmap of induction scores, blocks x heads; found heads outlined by their value."""
    L, H = result.scores.shape
    fig = new_figure(max(4.0, 0.35 * H + 2), max(3.0, 0.22 * L + 1.5))
    ax = fig.add_subplot()
    image = ax.imshow(result.scores, cmap="magma", vmin=0.0, vmax=1.0, aspect="auto")
    for layer, head in result.found:
        ax.text(
            head,
            layer,
            f"{result.scores[layer, head]:.2f}",
            ha="center",
            va="center",
            fontsize=6,
            color="cyan",
        )
    ax.set_xlabel("head")
    ax.set_ylabel("block")
    ax.set_title(f"Induction scores (n={result.n}, threshold {result.threshold})")
    fig.colorbar(image, ax=ax, label="mean attention to i - n + 1")
    return fig


def induction_splits(
    result: InductionResult, heads: Sequence[tuple[int, int]] | None = None
) -> Figure:
    """Stacked bars of same-token / neighbours / induction / other attention per chosen head."""
    splits = [s for s in result.splits if heads is None or (s.layer, s.head) in set(heads)]
    fig = new_figure(max(4.0, 0.5 * len(splits) + 2), 3.2)
    ax = fig.add_subplot()
    x = np.arange(len(splits))
    bottom = np.zeros(len(splits))
    for name, colour in zip(SPLIT_PARTS, SPLIT_COLOURS, strict=True):
        v = np.array([getattr(s, name) for s in splits])
        ax.bar(x, v, bottom=bottom, color=colour, label=name)
        bottom += v
    ax.set_xticks(x, [f"{s.layer}.{s.head}" for s in splits], rotation=45, fontsize="small")
    ax.set_xlabel("block.head")
    ax.set_ylabel("mean attention mass")
    ax.set_title("Attention of second-copy tokens")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig
