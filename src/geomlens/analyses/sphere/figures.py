"""Figures of the sphere analyses (layer norm, head probe, logit lens, trajectories).

Each function takes results and returns a figure: a matplotlib ``Figure`` (Agg canvas, no
pyplot state) or, for the 3-D trajectory, a plotly ``Figure``. ``save`` (shared with the
decomposition figures) writes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from geomlens.analyses.sphere.compute import TopTokens
from geomlens.analyses.sphere.head_probe import HeadProbe
from geomlens.analyses.sphere.lens import Trajectory, TrajectoryMap
from geomlens.reporting.figures import new_figure, save

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from matplotlib.figure import Figure

__all__ = [
    "cosine_figure",
    "lens_figure",
    "radius_figure",
    "save",
    "self_attention_figure",
    "top_tokens_figure",
    "trajectory_figure_2d",
    "trajectory_figure_3d",
]

Array = npt.NDArray[np.float64]


def _group(name: str) -> str:
    return name.split(".")[-1] if name.startswith("blocks.") else name


def _block(name: str) -> float:
    if name.startswith("blocks."):
        return float(name.split(".")[1])
    return -1.0 if name == "embedding_norm" else np.inf


def radius_figure(layers: Sequence[Mapping[str, Any]]) -> Figure:
    """Radius (mean +- std of |x|) of every norm's inputs per block, and the all-ones share.

    Args:
        layers: ``Orientation.layers`` rows (name, input_norm_mean/std, ones_share_mean, ...).
    """
    fig = new_figure(10, 4.2)
    ax, ax2 = fig.subplots(1, 2)
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in layers:
        groups.setdefault(_group(row["name"]), []).append(row)
    n_blocks = max([_block(r["name"]) for r in layers if np.isfinite(_block(r["name"]))] + [0])
    sqrt_d = None
    for gname, rows in groups.items():
        x = np.array([_block(r["name"]) for r in rows])
        x = np.where(np.isinf(x), n_blocks + 1, x)
        for suffix, style in (("", "-o"), ("_skip_first", "--")):
            m = np.array([r[f"input_norm_mean{suffix}"] or np.nan for r in rows], dtype=float)
            s = np.array([r[f"input_norm_std{suffix}"] or np.nan for r in rows], dtype=float)
            if np.all(np.isnan(m)):
                continue
            label = gname + (" (pos 0 skipped)" if suffix else "")
            (line,) = ax.plot(x, m, style, ms=3, label=label)
            if not suffix:
                ax.fill_between(
                    x, np.maximum(m - s, 1e-3), m + s, alpha=0.15, color=line.get_color()
                )
        ax2.plot(x, [r["ones_share_mean"] for r in rows], "-o", ms=3, label=gname)
        sqrt_d = rows[0]["sqrt_d"]
    if sqrt_d is not None:
        ax.axhline(sqrt_d, color="k", lw=0.8, ls=":", label="sqrt(d)")
    ax.set_yscale("log")
    ax.set_xlabel("block (embedding norm at -1, final norm at the end)")
    ax.set_ylabel("|x| before the norm")
    ax.set_title("Radius of the inputs of each norm")
    ax.legend(fontsize=7)
    ax2.set_xlabel("block")
    ax2.set_ylabel("mean (x . 1)^2 / (d |x|^2)")
    ax2.set_title("Share along the all-ones direction")
    ax2.legend(fontsize=7)
    return fig


def cosine_figure(cosines: Mapping[str, Mapping[str, Array]]) -> Figure:
    """Histograms of cos(e, N(e)) over the vocabulary, without and with gamma/beta.

    Args:
        cosines: norm name -> {"plain": [vocab], "affine": [vocab]}.
    """
    fig = new_figure(5 * max(len(cosines), 1), 3.6)
    axes = np.atleast_1d(fig.subplots(1, max(len(cosines), 1)))
    for ax, (name, c) in zip(axes, cosines.items(), strict=False):
        lo = float(min(np.min(c["plain"]), np.min(c["affine"])))
        bins = np.linspace(min(lo, 0.99), 1.0, 60)
        ax.hist(c["plain"], bins=bins, alpha=0.6, label="without gamma/beta")
        ax.hist(c["affine"], bins=bins, alpha=0.6, label="with gamma/beta")
        ax.set_title(f"cos(embedding, {name}(embedding))", fontsize=9)
        ax.set_xlabel("cosine")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    return fig


def _show(s: str, width: int = 14) -> str:
    s = repr(s)[1:-1]
    return s if len(s) <= width else s[: width - 1] + "~"


def top_tokens_figure(top: TopTokens) -> Figure:
    """A table: top and bottom k tokens by raw norm, by the plain and the affine readout."""
    cols = []
    headers = []
    names = {"norm": "|e|", "plain": "N0(e).u", "affine": "N(e).u"}
    for key in ("norm", "plain", "affine"):
        for end in ("top", "bottom"):
            cols.append([_show(t) for t in top.tables[key][end]])
            headers.append(f"{names[key]} {end}")
    cells = [list(r) for r in zip(*cols, strict=True)]
    fig = new_figure(11, 0.32 * (top.k + 2) + 0.6)
    ax = fig.subplots()
    ax.axis("off")
    table = ax.table(cellText=cells, colLabels=headers, loc="center", cellLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    ranks = ", ".join(
        f"{names.get(k, k)}: {v:.0f}" for k, v in top.freq_rank.items() if v is not None
    )
    ax.set_title(
        f"Top/bottom {top.k} tokens (readout norm: {top.readout_norm}); "
        f"mean frequency rank of the tops: {ranks}",
        fontsize=8,
    )
    return fig


def self_attention_figure(probe: HeadProbe) -> Figure:
    """Heatmap of each head's self-attention fraction among the probe nouns."""
    data = np.array(probe.self_fraction, dtype=float)
    fig = new_figure(max(4.0, 0.45 * data.shape[1] + 2), 0.5 * data.shape[0] + 1.6)
    ax = fig.subplots()
    im = ax.imshow(data, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_yticks(range(len(probe.layers)), [f"block {x}" for x in probe.layers])
    ax.set_xticks(range(data.shape[1]))
    ax.set_xlabel("head")
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            ax.text(
                j,
                i,
                f"{data[i, j]:.2f}",
                ha="center",
                va="center",
                fontsize=7,
                color="w" if data[i, j] < 0.6 else "k",
            )
    fig.colorbar(im, ax=ax, label="fraction of nouns whose top key is themselves")
    ax.set_title(f"W_QK self-attention on {len(probe.nouns)} normalised nouns")
    return fig


def lens_figure(traj: Trajectory) -> Figure:
    """Logit lens: next-token rank per layer and position, labelled with the top-1 token."""
    from matplotlib import colormaps
    from matplotlib.colors import LogNorm

    T = len(traj.tokens)
    ranks = np.array(
        [[np.nan if r is None else r for r in row] for row in traj.next_rank], dtype=float
    )
    fig = new_figure(1.2 * T + 2.5, 0.22 * len(traj.layers) + 1.6)
    ax = fig.subplots()
    finite = ranks[np.isfinite(ranks)]
    vmax = float(max(finite.max(), 2.0)) if finite.size else 2.0
    cmap = colormaps["magma_r"].with_extremes(bad="#eeeeee")
    im = ax.imshow(ranks, aspect="auto", cmap=cmap, norm=LogNorm(1, vmax), origin="lower")
    for li in range(len(traj.layers)):
        for t in range(T):
            ax.text(
                t,
                li,
                _show(traj.top[li][t][0], 10),
                ha="center",
                va="center",
                fontsize=6,
                color="k" if not np.isfinite(ranks[li, t]) or ranks[li, t] < 30 else "w",
            )
    ax.set_xticks(range(T), [_show(t, 10) for t in traj.tokens], rotation=45, ha="right")
    ax.set_yticks(range(len(traj.layers)), [str(x) for x in traj.layers], fontsize=6)
    ax.set_ylabel("layer")
    fig.colorbar(im, ax=ax, label="rank of the actual next token")
    ax.set_title(f"Logit lens ({traj.readout}); cell text: top-1 token", fontsize=9)
    return fig


def _labels(ids: Array, tokens: Sequence[str]) -> list[str]:
    return [tokens[int(i)] for i in ids]


def trajectory_figure_3d(m: TrajectoryMap, traj: Trajectory, tokens: Sequence[str]) -> go.Figure:
    """Interactive 3-D UMAP: vocabulary points and each prompt position's path up the layers."""
    import plotly.graph_objects as go

    fig = go.Figure()
    xy = m.token_xy
    fig.add_trace(
        go.Scatter3d(
            x=xy[:, 0],
            y=xy[:, 1],
            z=xy[:, 2],
            mode="markers",
            name="vocabulary sample",
            marker={"size": 2, "color": "#bbbbbb"},
            text=_labels(m.token_ids, tokens),
            hoverinfo="text",
        )
    )
    for t, word in enumerate(traj.tokens):
        p = m.path_xy[t]
        fig.add_trace(
            go.Scatter3d(
                x=p[:, 0],
                y=p[:, 1],
                z=p[:, 2],
                mode="lines+markers",
                name=f"{t}: {word!r}",
                marker={"size": 3},
                text=[f"layer {x}: top {traj.top[i][t][0]!r}" for i, x in enumerate(m.layers)],
                hoverinfo="text+name",
            )
        )
    fig.update_layout(
        title="Residual trajectories among token vectors (UMAP, cosine)",
        margin={"l": 0, "r": 0, "t": 40, "b": 0},
        legend={"font": {"size": 10}},
    )
    return fig


def trajectory_figure_2d(m: TrajectoryMap, traj: Trajectory, tokens: Sequence[str]) -> Figure:
    """Static 2-D view of the trajectories: the first two axes of a UMAP (2 or 3 axes)."""
    from matplotlib import colormaps

    fig = new_figure(7.5, 6)
    ax = fig.subplots()
    ax.scatter(m.token_xy[:, 0], m.token_xy[:, 1], s=2, c="#cccccc", label="vocabulary sample")
    cmap = colormaps["tab10"]
    for t, word in enumerate(traj.tokens):
        p = m.path_xy[t][:, :2]
        c = cmap(t % 10)
        ax.plot(p[:, 0], p[:, 1], "-", color=c, lw=1, alpha=0.8)
        ax.scatter(p[:, 0], p[:, 1], s=8, color=c, label=_show(word, 12))
        ax.annotate(str(m.layers[0]), tuple(p[0]), fontsize=6, color=c)
        ax.annotate(str(m.layers[-1]), tuple(p[-1]), fontsize=6, color=c)
    ax.set_title("Residual trajectories among token vectors (UMAP axes 1-2, cosine)", fontsize=9)
    ax.legend(fontsize=7, markerscale=2)
    ax.set_xticks([])
    ax.set_yticks([])
    return fig
