"""Figures of the position/context decomposition.

Each function takes results (``LayerDecomposition``) or statistics (``DecompositionStats``)
and returns a figure: a matplotlib ``Figure`` (drawn with the Agg canvas, no pyplot state)
for static PNG, or a plotly ``Figure`` for interactive HTML; ``reporting.figures.save`` writes.
Every title says whether position 0 was skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import numpy.typing as npt

from geomlens.analyses.common.spectra import gram_dct, gram_matrix, n_low_frequencies
from geomlens.analyses.decomposition.compute import LayerDecomposition
from geomlens.analyses.decomposition.position_noise import GroupPositions, denoised_positions
from geomlens.reporting.figures import new_figure, pick_layers
from geomlens.stats.decomposition import DecompositionStats

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from matplotlib.figure import Figure

Array = npt.NDArray[np.float64]

SHARE_COLOURS = {"position": "#1f77b4", "context": "#ff7f0e", "residual": "#bbbbbb"}


def _skip_note(skip_first: bool) -> str:
    return "position 0 skipped" if skip_first else "all positions"


@dataclass(frozen=True)
class PositionalPart:
    """One layer's positional vectors as a figure draws them, when they are not a view's
    plain ``DecompositionStats.pos``: the noise-removed P_r of ``denoised_part``.

    Attributes:
        layer: hidden-state layer.
        positions: [T'] the positions kept.
        pos: [T', d] the positional vectors.
        skip_first: whether position 0 was left out.
        noise_removed: whether the sampling noise was removed (P_r).
    """

    layer: int
    positions: npt.NDArray[np.int64]
    pos: Array
    skip_first: bool
    noise_removed: bool = True


Part = DecompositionStats | PositionalPart
"""What the positional figures draw: a view's statistics or a positional part."""

PartT = TypeVar("PartT", bound=Part)


def denoised_part(
    groups: GroupPositions, rank: int | None, layer: int, skip_first: bool = True
) -> PositionalPart | None:
    """The noise-removed positional part P_r of one layer, pos projected onto the top
    ``rank`` eigenvectors of the noise-free Gram K (``pos_rank_corrected``): what the
    claims' view reads. None when no direction stands above the noise floor."""
    if rank is None or rank < 1:
        return None
    pos = denoised_positions(groups, rank)
    first = 1 if skip_first else 0
    return PositionalPart(layer, np.arange(first, first + pos.shape[0]), pos, skip_first)


def _note(part: Part) -> str:
    """The view of one part, for a title: which positions, and whether noise was removed."""
    removed = isinstance(part, PositionalPart) and part.noise_removed
    return _skip_note(bool(part.skip_first)) + (", noise removed" if removed else "")


def _panel_title(part: Part, with_view: bool) -> str:
    """ "layer L", with the view when two are drawn (the figure's title says them in full)."""
    if not with_view:
        return f"layer {part.layer}"
    removed = isinstance(part, PositionalPart) and part.noise_removed
    return f"layer {part.layer} ({'noise removed' if removed else _skip_note(part.skip_first)})"


def _views_note(rows: Sequence[Sequence[Part | None]]) -> str:
    """The views shown, one per row, for a figure's title."""
    notes = [next((_note(p) for p in row if p is not None), None) for row in rows]
    return " / ".join(n for n in notes if n) or _skip_note(False)


def _view_rows(
    stats: Sequence[Part],
    layers: Sequence[int] | None,
    max_panels: int,
    beside: Sequence[PositionalPart] | None,
) -> list[list[Part | None]]:
    """The panels of each row: the chosen layers of ``stats``, then (with ``beside``) the
    same layers of ``beside`` (None where it lacks one)."""
    chosen: list[Part | None] = list(_select(stats, layers, max_panels))
    if beside is None:
        return [chosen]
    by_layer = {p.layer: p for p in beside}
    return [chosen, [by_layer.get(s.layer) for s in chosen if s is not None]]


def _select(stats: Sequence[PartT], layers: Sequence[int] | None, max_panels: int) -> list[PartT]:
    by_layer = {s.layer: s for s in stats}
    chosen = pick_layers(list(by_layer), max_panels) if layers is None else list(layers)
    missing = [layer for layer in chosen if layer not in by_layer]
    if missing:
        raise ValueError(f"no statistics for layers {missing}")
    return [by_layer[layer] for layer in chosen]


def _panels(
    stats: Sequence[PartT], layers: Sequence[int] | None, max_panels: int
) -> tuple[list[PartT], int, int]:
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
    stats: Sequence[Part],
    layers: Sequence[int] | None = None,
    max_panels: int = 6,
    beside: Sequence[PositionalPart] | None = None,
) -> Figure:
    """Top-3 principal components of pos[t], coloured by t, one 3-D panel per layer; with
    ``beside``, a second row of the same layers from those parts (the noise-removed view).

    Args:
        stats: per-layer statistics (or positional parts).
        layers: layers to show (default: up to ``max_panels`` spread evenly).
        max_panels: most panels when ``layers`` is None.
        beside: a second view's parts, drawn under the first (layers it lacks left empty).
    """
    rows = _view_rows(stats, layers, max_panels, beside)
    chosen = rows[0]
    if beside is None:
        _, nrows, ncols = _panels(stats, layers, max_panels)
    else:
        nrows, ncols = len(rows), max(len(chosen), 1)
    fig = new_figure(3.6 * ncols, 3.4 * nrows)
    for r, row in enumerate(rows):
        for i, s in enumerate(row):
            if s is None:
                continue
            index = i + 1 if beside is None else r * ncols + i + 1
            ax = fig.add_subplot(nrows, ncols, index, projection="3d")
            xyz = principal_coordinates(s.pos, 3)
            ax.plot(xyz[:, 0], xyz[:, 1], xyz[:, 2], color="#999999", lw=0.5)
            ax.scatter(xyz[:, 0], xyz[:, 1], xyz[:, 2], c=s.positions, cmap="viridis", s=6)
            ax.set_title(_panel_title(s, beside is not None), fontsize=9)
            ax.tick_params(labelsize=6)
    fig.suptitle(f"Positional part, top-3 PCs, coloured by position ({_views_note(rows)})")
    return fig


def spiral_figure_interactive(
    stats: Sequence[Part],
    layers: Sequence[int] | None = None,
    max_panels: int = 6,
    beside: Sequence[PositionalPart] | None = None,
) -> go.Figure:
    """Interactive version of ``spiral_figure``: one 3-D scene per layer (and per view,
    with ``beside``: one row each, the same layers in each column).

    Args:
        stats: per-layer statistics (or positional parts).
        layers: layers to show (default: up to ``max_panels`` spread evenly).
        max_panels: most panels when ``layers`` is None.
        beside: a second view's parts, drawn under the first (layers it lacks left empty).
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = _view_rows(stats, layers, max_panels, beside)
    chosen = rows[0]
    if beside is None:
        _, nrows, ncols = _panels(stats, layers, max_panels)
        cells = [(i // ncols + 1, i % ncols + 1, s) for i, s in enumerate(chosen)]
    else:
        nrows, ncols = len(rows), max(len(chosen), 1)
        cells = [(r + 1, i + 1, s) for r, row in enumerate(rows) for i, s in enumerate(row)]
    titles = [
        "" if s is None else _panel_title(s, beside is not None)
        for _, _, s in sorted(cells, key=lambda c: (c[0], c[1]))
    ]
    panel = min(420, PAGE_WIDTH // ncols)  # square scenes, the row no wider than the page
    fig = make_subplots(
        rows=nrows,
        cols=ncols,
        specs=[[{"type": "scene"}] * ncols for _ in range(nrows)],
        subplot_titles=titles,
    )
    first = True
    for row, col, s in cells:
        if s is None:
            continue
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
                    "showscale": first,
                    "colorbar": {"title": {"text": "t"}},
                },
                line={"color": "#999999", "width": 1},
                text=[f"t={t}" for t in s.positions],
                name=f"layer {s.layer} ({_note(s)})",
                showlegend=False,
            ),
            row=row,
            col=col,
        )
        first = False
    fig.update_layout(
        title={"text": f"Positional part, top-3 PCs ({_views_note(rows)})"},
        height=panel * nrows,
        width=panel * ncols,
        margin={"l": 0, "r": 0, "t": 60, "b": 0},
    )
    return fig


PAGE_WIDTH = 1300
"""The widest a figure of several panels is drawn, in pixels (the page fits 1,400)."""


def normalised_gram(part: Part) -> Array:
    """[T', T'] the cosines between the positional vectors of ``part`` (``gram_matrix``):
    symmetric, unit diagonal wherever pos[t] is not zero. For a noise-removed part, the
    normalised Gram of P_r that ``pos_low_freq_corrected`` reads."""
    return gram_matrix(part.pos)


def gram_figure(
    stats: Sequence[Part],
    layers: Sequence[int] | None = None,
    max_panels: int = 4,
    n_freq: int | None = None,
    beside: Sequence[PositionalPart] | None = None,
) -> Figure:
    """Gram matrix of the normalised positional vectors and its 2-D DCT, per layer; with
    ``beside``, two more rows of the same from those parts (the noise-removed view).

    The DCT panel shows the lowest ``n_freq`` frequencies on each axis (default
    ``max(10, 2 * ceil(T'/10))``); the box marks the block counted by ``pos_low_freq``
    (the Gram low-frequency share).

    Args:
        stats: per-layer statistics (or positional parts).
        layers: layers to show (default: up to ``max_panels`` spread evenly).
        max_panels: most layers when ``layers`` is None.
        n_freq: frequencies shown in the DCT panel.
        beside: a second view's parts, drawn under the first (layers it lacks left empty).
    """
    from matplotlib.patches import Rectangle

    rows = _view_rows(stats, layers, max_panels, beside)
    ncols = max(len(rows[0]), 1)
    nrows = 2 * len(rows)
    fig = new_figure(3.2 * ncols, 3.1 * nrows)
    two = beside is not None
    for r, row in enumerate(rows):
        for i, s in enumerate(row):
            if s is None:
                continue
            g = normalised_gram(s)
            coef = gram_dct(g)
            n_low = n_low_frequencies(g.shape[0])
            n_show = min(g.shape[0], n_freq or max(10, 2 * n_low))
            top = fig.add_subplot(nrows, ncols, 2 * r * ncols + i + 1)
            ext = (
                s.positions[0] - 0.5,
                s.positions[-1] + 0.5,
                s.positions[-1] + 0.5,
                s.positions[0] - 0.5,
            )
            im = top.imshow(
                g, cmap="coolwarm", vmin=-1, vmax=1, extent=ext, interpolation="nearest"
            )
            top.set_title(f"{_panel_title(s, two)}: Gram", fontsize=9)
            top.set_xlabel("t'", fontsize=8)
            top.set_ylabel("t", fontsize=8)
            top.tick_params(labelsize=6)
            bottom = fig.add_subplot(nrows, ncols, (2 * r + 1) * ncols + i + 1)
            block = coef[:n_show, :n_show]
            vmax = float(np.abs(block).max()) or 1.0
            im2 = bottom.imshow(
                block, cmap="coolwarm", vmin=-vmax, vmax=vmax, interpolation="nearest"
            )
            bottom.add_patch(
                Rectangle((-0.5, -0.5), n_low, n_low, fill=False, edgecolor="black", lw=1.0)
            )
            bottom.set_title(f"layer {s.layer}: DCT (low {n_show})", fontsize=9)
            bottom.set_xlabel("frequency", fontsize=8)
            bottom.set_ylabel("frequency", fontsize=8)
            bottom.tick_params(labelsize=6)
            if i == len(row) - 1:
                fig.colorbar(im, ax=top, shrink=0.8)
                fig.colorbar(im2, ax=bottom, shrink=0.8)
    fig.suptitle(f"Positional Gram matrices and their DCT ({_views_note(rows)})")
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
