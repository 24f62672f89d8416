"""Figures of the addition study: accuracy by operand length, training curves, Gram
matrices of the positional basis, and the pos-pos part of attention.

Each function takes numbers the study computed and returns a matplotlib ``Figure`` on the
Agg canvas; ``reporting.figures.save`` writes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from geomlens.analyses.common.spectra import gram_matrix
from geomlens.reporting.figures import new_figure, pick_layers
from geomlens.stats.decomposition import DecompositionStats

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MODEL_COLOURS = {"model": "#1f77b4", "control": "#ff7f0e"}


def _shade_train(ax: Axes, train_range: Sequence[int]) -> None:
    lo, hi = train_range
    ax.axvspan(lo - 0.5, hi + 0.5, color="#dddddd", zorder=0, label="training lengths")


def accuracy_figure(
    curves: Mapping[str, Mapping[int, float]], train_range: Sequence[int]
) -> Figure:
    """Exact-match accuracy against operand length, one line per model.

    Args:
        curves: model name ("model", "control") -> operand length -> accuracy.
        train_range: (lo, hi) operand lengths seen in training (shaded).
    """
    fig = new_figure(5.0, 3.2)
    ax = fig.add_subplot()
    _shade_train(ax, train_range)
    for name, acc in curves.items():
        lengths = sorted(acc)
        ax.plot(
            lengths,
            [acc[n] for n in lengths],
            marker="o",
            color=MODEL_COLOURS.get(name),
            label=name,
        )
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("operand length (digits)")
    ax.set_ylabel("exact-match accuracy")
    ax.set_title("Addition: accuracy by operand length", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def training_figure(histories: Mapping[str, Mapping[str, Any]]) -> Figure:
    """Loss against step, and checkpoint accuracy inside and outside the training range.

    Args:
        histories: model name -> {"loss": [[step, loss], ...], "evals": [{"step",
            "accuracy_in_range", "accuracy_out_of_range"}, ...]}.
    """
    fig = new_figure(9.0, 3.2)
    loss_ax, acc_ax = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for name, hist in histories.items():
        colour = MODEL_COLOURS.get(name)
        curve = np.asarray(hist["loss"], dtype=float).reshape(-1, 2)
        loss_ax.plot(curve[:, 0], curve[:, 1], color=colour, label=name)
        steps = [e["step"] for e in hist["evals"]]
        for key, style, what in (
            ("accuracy_in_range", "-", "in range"),
            ("accuracy_out_of_range", "--", "out of range"),
        ):
            values = [np.nan if e[key] is None else e[key] for e in hist["evals"]]
            acc_ax.plot(
                steps, values, style, marker="o", ms=3, color=colour, label=f"{name}, {what}"
            )
    loss_ax.set_yscale("log")
    loss_ax.set_xlabel("step")
    loss_ax.set_ylabel("answer-token cross-entropy")
    loss_ax.set_title("Training loss", fontsize=10)
    loss_ax.legend(fontsize=8)
    acc_ax.set_ylim(-0.03, 1.03)
    acc_ax.set_xlabel("step")
    acc_ax.set_ylabel("exact match, mean over lengths")
    acc_ax.set_title("Accuracy at checkpoints", fontsize=10)
    acc_ax.legend(fontsize=7)
    return fig


def gram_grid(
    rows: Sequence[tuple[str, Sequence[DecompositionStats], int]],
    layers: Sequence[int] | None = None,
    max_panels: int = 4,
) -> Figure:
    """Gram matrices of the normalised positional vectors, one row per (model, length).

    Args:
        rows: (title, per-layer statistics, trained positions) per row; a dashed line marks
            the first position id that never received gradient, when it is in the grid.
        layers: layers shown (default: up to ``max_panels`` spread over the first row's).
        max_panels: most layers when ``layers`` is None.
    """
    chosen = (
        list(layers)
        if layers is not None
        else pick_layers([s.layer for s in rows[0][1]], max_panels)
    )
    fig = new_figure(2.6 * len(chosen) + 0.6, 2.5 * len(rows))
    image = None
    for r, (title, stats, trained) in enumerate(rows):
        by_layer = {s.layer: s for s in stats}
        for c, layer in enumerate(chosen):
            ax = fig.add_subplot(len(rows), len(chosen), r * len(chosen) + c + 1)
            s = by_layer[layer]
            g = gram_matrix(s.pos)
            lo, hi = s.positions[0] - 0.5, s.positions[-1] + 0.5
            image = ax.imshow(
                g,
                cmap="coolwarm",
                vmin=-1,
                vmax=1,
                extent=(lo, hi, hi, lo),
                interpolation="nearest",
            )
            if trained <= s.positions[-1]:
                for line in (ax.axvline, ax.axhline):
                    line(trained - 0.5, color="black", lw=0.8, ls="--")
            ax.set_title(f"{title}\nlayer {layer}", fontsize=8)
            ax.tick_params(labelsize=6)
    if image is not None:
        fig.colorbar(image, ax=fig.axes, shrink=0.6, label="cosine")
    fig.suptitle("Gram matrices of the positional basis (all positions)", fontsize=10)
    return fig


def pos_pos_figure(pos_pos: np.ndarray, shares: Sequence[Sequence[float]], title: str) -> Figure:
    """The pos-pos part of the attention logits, per block, for its most positional head.

    Args:
        pos_pos: [blocks, H, T, T] mean pos-pos logits (nan where masked).
        shares: [blocks][H] share of the pos-pos part per head (picks the head shown).
        title: what the grid is (model and operand length).
    """
    n_blocks = pos_pos.shape[0]
    fig = new_figure(2.8 * max(1, n_blocks) + 0.4, 2.9)
    for b in range(n_blocks):
        head = int(np.nanargmax(np.asarray(shares[b], dtype=float)))
        m = pos_pos[b, head]
        vmax = float(np.nanmax(np.abs(m))) or 1.0
        ax = fig.add_subplot(1, n_blocks, b + 1)
        im = ax.imshow(m, cmap="coolwarm", vmin=-vmax, vmax=vmax, interpolation="nearest")
        ax.set_title(f"block {b}, head {head}\npos-pos share {shares[b][head]:.2f}", fontsize=8)
        ax.set_xlabel("key position", fontsize=7)
        ax.set_ylabel("query position", fontsize=7)
        ax.tick_params(labelsize=6)
        fig.colorbar(im, ax=ax, shrink=0.7)
    fig.suptitle(f"pos-pos attention logits: {title}", fontsize=10)
    return fig
