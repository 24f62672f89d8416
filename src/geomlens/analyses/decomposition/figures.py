"""Figures of the position/context decomposition.

Each function takes results (``LayerDecomposition``) or statistics (``DecompositionStats``)
and returns a figure: a matplotlib ``Figure`` (drawn with the Agg canvas, no pyplot state)
for static PNG, or a plotly ``Figure`` for interactive HTML; ``report.figures.save`` writes.
Every title says whether position 0 was skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from geomlens.analyses.common.spectra import gram_dct, gram_matrix, n_low_frequencies
from geomlens.analyses.decomposition.compute import LayerDecomposition
from geomlens.reporting.figures import new_figure, pick_layers
from geomlens.stats.decomposition import DecompositionStats

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from matplotlib.figure import Figure

Array = npt.NDArray[np.float64]

SHARE_COLOURS = {"position": "#1f77b4", "context": "#ff7f0e", "residual": "#bbbbbb"}


def _skip_note(skip_first: bool) -> str:
    return "position 0 skipped" if skip_first else "all positions"


def _select(
    stats: Sequence[DecompositionStats], layers: Sequence[int] | None, max_panels: int
) -> list[DecompositionStats]:
    by_layer = {s.layer: s for s in stats}
    chosen = pick_layers(list(by_layer), max_panels) if layers is None else list(layers)
    missing = [layer for layer in chosen if layer not in by_layer]
    if missing:
        raise ValueError(f"no statistics for layers {missing}")
    return [by_layer[layer] for layer in chosen]


def _panels(
    stats: Sequence[DecompositionStats], layers: Sequence[int] | None, max_panels: int
) -> tuple[list[DecompositionStats], int, int]:
    """The layers shown (``_select``), and the rows and columns of their grid (at most 3
    columns)."""
    chosen = _select(stats, layers, max_panels)
    ncols = min(3, len(chosen))
    return chosen, -(-len(chosen) // ncols), ncols


def top_principal_coordinates(x: Array, k: int) -> Array:
    """``U[:, :k] * s[:k]`` of the SVD of ``x``, from the k top eigenpairs of a Gram matrix.

    Only k eigenpairs of the smaller Gram matrix are computed, which took 0.15 s where a
    full SVD of a 256 x 384 matrix took 0.5-3 s on the reference machine.

    Args:
        x: [n, d] matrix.
        k: number of axes (at most min(n, d) are returned).
    """
    import scipy.linalg

    n, d = x.shape
    k = min(k, n, d)
    if k == 0:
        return np.zeros((n, 0))
    if n <= d:
        w, u = scipy.linalg.eigh(x @ x.T, subset_by_index=[n - k, n - 1])
        return (u * np.sqrt(np.clip(w, 0.0, None)))[:, ::-1]
    _, v = scipy.linalg.eigh(x.T @ x, subset_by_index=[d - k, d - 1])
    return (x @ v)[:, ::-1]


def principal_coordinates(x: Array, k: int) -> Array:
    """Coordinates of the rows of ``x`` on its top-k principal axes, with fixed signs.

    Rows are centred first; each axis is signed so that its largest coordinate in
    absolute value is positive, which keeps figures identical across runs.

    Args:
        x: [n, d] vectors.
        k: number of axes (padded with zeros when x has fewer).

    Returns:
        [n, k] coordinates.
    """
    x = np.asarray(x, dtype=np.float64)
    x = x - x.mean(0)
    coords = top_principal_coordinates(x, k)
    signs = np.sign(coords[np.abs(coords).argmax(0), np.arange(coords.shape[1])])
    coords = coords * np.where(signs == 0, 1.0, signs)
    if coords.shape[1] < k:
        coords = np.pad(coords, ((0, 0), (0, k - coords.shape[1])))
    return coords


def shares_figure(results: Sequence[LayerDecomposition]) -> Figure:
    """Stacked bars per layer of the positional, context and residual variance shares.

    Args:
        results: one result per layer.
    """
    fig = new_figure(max(5.0, 0.25 * len(results) + 2.0), 3.5)
    ax = fig.add_subplot()
    x = np.arange(len(results))
    bottom = np.zeros(len(results))
    for (name, colour), key in zip(
        SHARE_COLOURS.items(), ("share_pos", "share_ctx", "share_resid"), strict=True
    ):
        vals = np.array([getattr(r, key) for r in results], dtype=float)
        ax.bar(x, vals, bottom=bottom, color=colour, label=name, width=0.8)
        bottom += np.nan_to_num(vals)
    ax.set_xticks(x, [str(r.layer) for r in results], fontsize=7)
    ax.set_xlabel("layer")
    ax.set_ylabel("share of variance")
    ax.set_ylim(0, 1)
    skip = bool(results[0].skip_first) if results else False
    ax.set_title(f"Variance shares by layer ({_skip_note(skip)})")
    ax.legend(loc="upper right", fontsize=8)
    return fig


def spectra_figure(results: Sequence[LayerDecomposition]) -> Figure:
    """Singular values of the positional part per layer, log scale, coloured by layer.

    Args:
        results: one result per layer.
    """
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    fig = new_figure(6.0, 4.0)
    ax = fig.add_subplot()
    layers = [r.layer for r in results]
    norm = Normalize(min(layers, default=0), max(layers, default=1))
    colours = colormaps["viridis"]
    for r in results:
        s = np.asarray(r.pos_singular_values, dtype=float)
        s = s[s > s[0] * 1e-10] if s.size else s  # drop numerical zeros (pos is centred)
        ax.plot(np.arange(1, s.size + 1), s, color=colours(norm(r.layer)), lw=1.2, marker=".")
    ax.set_yscale("log")
    ax.set_xlabel("index")
    ax.set_ylabel("singular value of pos")
    skip = bool(results[0].skip_first) if results else False
    ax.set_title(f"Positional spectra ({_skip_note(skip)})")
    fig.colorbar(ScalarMappable(norm=norm, cmap=colours), ax=ax, label="layer")
    return fig


def spiral_figure(
    stats: Sequence[DecompositionStats], layers: Sequence[int] | None = None, max_panels: int = 6
) -> Figure:
    """Top-3 principal components of pos[t], coloured by t, one 3-D panel per layer.

    Args:
        stats: per-layer statistics.
        layers: layers to show (default: up to ``max_panels`` spread evenly).
        max_panels: most panels when ``layers`` is None.
    """
    chosen, nrows, ncols = _panels(stats, layers, max_panels)
    fig = new_figure(3.6 * ncols, 3.4 * nrows)
    for i, s in enumerate(chosen):
        ax = fig.add_subplot(nrows, ncols, i + 1, projection="3d")
        xyz = principal_coordinates(s.pos, 3)
        ax.plot(xyz[:, 0], xyz[:, 1], xyz[:, 2], color="#999999", lw=0.5)
        ax.scatter(xyz[:, 0], xyz[:, 1], xyz[:, 2], c=s.positions, cmap="viridis", s=6)
        ax.set_title(f"layer {s.layer}", fontsize=9)
        ax.tick_params(labelsize=6)
    skip = bool(chosen[0].skip_first) if chosen else False
    fig.suptitle(f"Positional part, top-3 PCs, coloured by position ({_skip_note(skip)})")
    return fig


def spiral_figure_interactive(
    stats: Sequence[DecompositionStats], layers: Sequence[int] | None = None, max_panels: int = 6
) -> go.Figure:
    """Interactive version of ``spiral_figure``: one 3-D scene per layer.

    Args:
        stats: per-layer statistics.
        layers: layers to show (default: up to ``max_panels`` spread evenly).
        max_panels: most panels when ``layers`` is None.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    chosen, nrows, ncols = _panels(stats, layers, max_panels)
    fig = make_subplots(
        rows=nrows,
        cols=ncols,
        specs=[[{"type": "scene"}] * ncols for _ in range(nrows)],
        subplot_titles=[f"layer {s.layer}" for s in chosen],
    )
    for i, s in enumerate(chosen):
        xyz = principal_coordinates(s.pos, 3)
        fig.add_trace(
            go.Scatter3d(
                x=xyz[:, 0],
                y=xyz[:, 1],
                z=xyz[:, 2],
                mode="lines+markers",
                marker={
                    "size": 2.5,
                    "color": s.positions,
                    "colorscale": "Viridis",
                    "showscale": i == 0,
                    "colorbar": {"title": {"text": "t"}},
                },
                line={"color": "#999999", "width": 1},
                text=[f"t={t}" for t in s.positions],
                name=f"layer {s.layer}",
                showlegend=False,
            ),
            row=i // ncols + 1,
            col=i % ncols + 1,
        )
    skip = bool(chosen[0].skip_first) if chosen else False
    fig.update_layout(
        title={"text": f"Positional part, top-3 PCs ({_skip_note(skip)})"},
        height=420 * nrows,
        width=420 * ncols,
        margin={"l": 0, "r": 0, "t": 60, "b": 0},
    )
    return fig


def gram_figure(
    stats: Sequence[DecompositionStats],
    layers: Sequence[int] | None = None,
    max_panels: int = 4,
    n_freq: int | None = None,
) -> Figure:
    """Gram matrix of the normalised positional vectors and its 2-D DCT, per layer.

    The DCT panel shows the lowest ``n_freq`` frequencies on each axis (default
    ``max(10, 2 * ceil(T'/10))``); the box marks the block counted by ``pos_low_freq``.

    Args:
        stats: per-layer statistics.
        layers: layers to show (default: up to ``max_panels`` spread evenly).
        max_panels: most layers when ``layers`` is None.
        n_freq: frequencies shown in the DCT panel.
    """
    from matplotlib.patches import Rectangle

    chosen = _select(stats, layers, max_panels)
    fig = new_figure(3.2 * len(chosen), 6.2)
    for i, s in enumerate(chosen):
        g = gram_matrix(s.pos)
        coef = gram_dct(g)
        n_low = n_low_frequencies(g.shape[0])
        n_show = min(g.shape[0], n_freq or max(10, 2 * n_low))
        top = fig.add_subplot(2, len(chosen), i + 1)
        ext = (
            s.positions[0] - 0.5,
            s.positions[-1] + 0.5,
            s.positions[-1] + 0.5,
            s.positions[0] - 0.5,
        )
        im = top.imshow(g, cmap="coolwarm", vmin=-1, vmax=1, extent=ext, interpolation="nearest")
        top.set_title(f"layer {s.layer}: Gram", fontsize=9)
        top.set_xlabel("t'", fontsize=8)
        top.set_ylabel("t", fontsize=8)
        top.tick_params(labelsize=6)
        bottom = fig.add_subplot(2, len(chosen), len(chosen) + i + 1)
        block = coef[:n_show, :n_show]
        vmax = float(np.abs(block).max()) or 1.0
        im2 = bottom.imshow(block, cmap="coolwarm", vmin=-vmax, vmax=vmax, interpolation="nearest")
        bottom.add_patch(
            Rectangle((-0.5, -0.5), n_low, n_low, fill=False, edgecolor="black", lw=1.0)
        )
        bottom.set_title(f"layer {s.layer}: DCT (low {n_show})", fontsize=9)
        bottom.set_xlabel("frequency", fontsize=8)
        bottom.set_ylabel("frequency", fontsize=8)
        bottom.tick_params(labelsize=6)
        if i == len(chosen) - 1:
            fig.colorbar(im, ax=top, shrink=0.8)
            fig.colorbar(im2, ax=bottom, shrink=0.8)
    skip = bool(chosen[0].skip_first) if chosen else False
    fig.suptitle(f"Positional Gram matrices and their DCT ({_skip_note(skip)})")
    return fig


def context_figure(
    stats: Sequence[DecompositionStats],
    labels: Sequence[object] | npt.NDArray[np.generic] | None = None,
    layers: Sequence[int] | None = None,
    max_panels: int = 4,
) -> Figure:
    """Context vectors on their top-2 principal axes, coloured by document label, per layer.

    Args:
        stats: per-layer statistics.
        labels: [C] one label per context, or None (one colour).
        layers: layers to show (default: up to ``max_panels`` spread evenly).
        max_panels: most layers when ``layers`` is None.
    """
    from matplotlib import colormaps

    chosen = _select(stats, layers, max_panels)
    fig = new_figure(3.4 * len(chosen) + 1.2, 3.4)
    names: npt.NDArray[np.generic]
    if labels is None:
        names, codes = np.array(["all"]), np.zeros(chosen[0].n_contexts if chosen else 0, int)
    else:
        names, codes = np.unique(np.asarray(labels), return_inverse=True)
    cmap = colormaps["tab10" if len(names) <= 10 else "tab20"]
    for i, s in enumerate(chosen):
        ax = fig.add_subplot(1, len(chosen), i + 1)
        xy = principal_coordinates(s.ctx, 2)
        for j, name in enumerate(names):
            m = codes == j
            ax.scatter(xy[m, 0], xy[m, 1], s=8, color=cmap(j % cmap.N), label=str(name))
        ax.set_title(f"layer {s.layer}", fontsize=9)
        ax.set_xlabel("PC1", fontsize=8)
        ax.set_ylabel("PC2", fontsize=8)
        ax.tick_params(labelsize=6)
    if labels is not None and chosen:
        fig.axes[-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    skip = bool(chosen[0].skip_first) if chosen else False
    fig.suptitle(f"Context vectors, top-2 PCs ({_skip_note(skip)})")
    return fig
