"""Figures of the walk analyses: similarity maps, encoding and decoding walks, kernels.

Each function takes results and returns a figure (matplotlib on the Agg canvas, or plotly
for the interactive similarity maps); ``geomlens.reporting.figures.save`` writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from geomlens.analyses.walk.kernels import BiasKernel, EmpiricalKernel
from geomlens.analyses.walk.refactor import RefactorResult
from geomlens.analyses.walk.similarity import SimilarityMaps
from geomlens.analyses.walk.walks import EncodingWalk, WalkProjection
from geomlens.reporting.figures import new_figure, pick_layers

if TYPE_CHECKING:
    import plotly.graph_objects as go
    from matplotlib.figure import Figure

MAX_INTERACTIVE_LAYERS = 12
"""Cosine maps: up to 12 layers, stored as int16 thousandths."""

MAX_DOT_LAYERS = 4
"""Inner-product maps: up to 4 layers, float32 (every layer's map is in
similarity.safetensors; a long text's float32 maps cost about 0.6 MB a layer per file)."""


def _pick(names: Sequence[str], n: int) -> list[int]:
    """Indices of up to n layers, evenly spread, first and last included."""
    return pick_layers(list(range(len(names))), n)


def _of(stack: str) -> str:
    """ " (decoder stack)" and the like in titles; nothing for a model's only stack."""
    return "" if stack == "main" else f" ({stack} stack)"


def similarity_grid(maps: SimilarityMaps, metric: str = "cos") -> Figure:
    """Up to six layers' T x T maps (cosine on [-1, 1]; inner products per panel)."""
    idx = _pick(maps.layer_names, 6)
    fig = new_figure(2.2 * len(idx), 2.6)
    axes = fig.subplots(1, len(idx), squeeze=False)[0]
    data = maps.cos if metric == "cos" else maps.dot
    for ax, i in zip(axes, idx, strict=True):
        m = data[i]
        if metric == "cos":
            im = ax.imshow(m, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="antialiased")
        else:
            lim = float(np.quantile(np.abs(m), 0.99)) or 1.0
            im = ax.imshow(m, cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="antialiased")
        ax.set_title(f"layer {maps.layer_names[i]}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(im, ax=list(axes), shrink=0.8)
    name = "cosine similarity" if metric == "cos" else "inner product (99% clip per panel)"
    fig.suptitle(f"{name} between positions", fontsize=10)
    return fig


def similarity_interactive(
    maps: SimilarityMaps, labels: Sequence[str], metric: str = "cos"
) -> go.Figure:
    """A heatmap per layer with a layer slider; hovering shows both tokens and the value.

    Up to ``MAX_INTERACTIVE_LAYERS`` layers (evenly spread) keep the file small; every
    layer is in similarity.safetensors.
    """
    import plotly.graph_objects as go

    cos = metric == "cos"
    idx = _pick(maps.layer_names, MAX_INTERACTIVE_LAYERS if cos else MAX_DOT_LAYERS)
    axis = [f"{t}: {s}" for t, s in enumerate(labels)]
    fig = go.Figure()
    for n, i in enumerate(idx):
        # Compact typed arrays keep the self-contained HTML to a few MB.
        z = np.round(maps.cos[i] * 1000).astype(np.int16) if cos else maps.dot[i]
        extra: dict[str, Any] = {"zmin": -1000, "zmax": 1000} if cos else {}
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=axis,
                y=axis,
                colorscale="RdBu_r",
                zmid=None if cos else 0,
                visible=n == len(idx) - 1,
                colorbar={"title": "cos x 1000" if cos else "inner product"},
                hovertemplate="query %{y}<br>key %{x}<br>"
                + ("cos x 1000" if cos else "dot")
                + " %{z}<extra></extra>",
                **extra,
            )
        )
    steps = [
        {
            "method": "update",
            "label": maps.layer_names[i],
            "args": [{"visible": [k == n for k in range(len(idx))]}],
        }
        for n, i in enumerate(idx)
    ]
    fig.update_layout(
        title=f"{'cosine similarity' if cos else 'inner product'} between positions",
        sliders=[{"active": len(idx) - 1, "steps": steps, "currentvalue": {"prefix": "layer "}}],
        xaxis={"showticklabels": False},
        yaxis={"showticklabels": False, "autorange": "reversed"},
        width=760,
        height=800,
    )
    return fig


def walk_ranks_figure(walk: EncodingWalk) -> Figure:
    """Per layer: share of positions whose own / next token is among the k nearest."""
    fig = new_figure(9, 3.4)
    ax, hist = fig.subplots(1, 2, width_ratios=[2, 1])
    x = np.arange(len(walk.layer_names))
    for m, style in (("cos", "-"), ("dot", "--")):
        own = (getattr(walk, f"own_rank_{m}") < walk.k).mean(1)
        nxt = (getattr(walk, f"next_rank_{m}") < walk.k).mean(1)
        ax.plot(x, own, style, color="#1f77b4", label=f"own token ({m})")
        ax.plot(x, nxt, style, color="#d62728", label=f"next token ({m})")
    ax.set_xlabel("layer")
    ax.set_ylabel(f"share of positions in top {walk.k}")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7)
    ax.set_title(
        f"encoding walk{_of(walk.stack)}: own and next token among the nearest", fontsize=9
    )
    left = walk.leave_cos[walk.leave_cos >= 0]
    hist.hist(left, bins=np.arange(len(x) + 1) - 0.5, color="#1f77b4")
    hist.set_xlabel("leave layer (cos)")
    hist.set_ylabel("positions")
    return fig


def walk_table_figure(
    walk: EncodingWalk,
    labels: Sequence[str],
    decode: Callable[[Any], list[str]],
    n_positions: int = 8,
    n_layers: int = 8,
) -> Figure:
    """The nearest token (cosine) of a few positions at a few layers, as a table."""
    T = len(labels)
    pos = sorted({int(p) for p in np.linspace(1, T - 1, n_positions)})
    layers = _pick(walk.layer_names, n_layers)
    cells = [
        [decode(walk.top_cos[l, p, :1])[0][:12].replace(" ", "\u2423") for l in layers] for p in pos
    ]
    fig = new_figure(1.2 * len(layers) + 1.6, 0.35 * len(pos) + 1.0)
    ax = fig.subplots()
    ax.axis("off")
    table = ax.table(
        cellText=cells,
        rowLabels=[f"{p}: {labels[p][:10]!r}" for p in pos],
        colLabels=[f"layer {walk.layer_names[l]}" for l in layers],
        loc="center",
    )
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    ax.set_title(f"encoding walk{_of(walk.stack)}: nearest token by cosine", fontsize=9)
    return fig


def decoding_figure(proj: WalkProjection, token_labels: Sequence[str]) -> Figure:
    """Decoding walks as paths among the token vectors (unit vectors, 2 principal axes)."""
    fig = new_figure(6.5, 5.5)
    ax = fig.subplots()
    ax.scatter(proj.token_xy[:, 0], proj.token_xy[:, 1], s=8, color="#999999")
    for (x, y), s in zip(proj.token_xy, token_labels, strict=True):
        ax.annotate(s[:10], (x, y), fontsize=6, color="#555555")
    colours = {"greedy": "#d62728", "sample": "#1f77b4"}
    for mode, path in proj.paths.items():
        ax.plot(path[:, 0], path[:, 1], "-o", ms=3, color=colours.get(mode, "k"), label=mode)
        if len(path):
            ax.annotate("start", path[0], fontsize=7, color=colours.get(mode, "k"))
    ax.set_xlabel(f"axis 1 ({proj.explained[0]:.0%} of token variance)")
    ax.set_ylabel(f"axis 2 ({proj.explained[1]:.0%})")
    ax.legend(fontsize=8)
    ax.set_title("decoding walk: final vectors d_t among token vectors", fontsize=9)
    return fig


KERNEL_TITLES = {
    "main": "empirical kernels",
    "encoder": "encoder self-attention",
    "decoder": "decoder self-attention",
    "cross": "cross-attention (decoder i, encoder j)",
}


def kernels_figure(
    kernel: EmpiricalKernel, biases: Sequence[BiasKernel] = (), attention: str = "main"
) -> Figure:
    """Mean attention by offset per layer (head mean), negative self-bias heads, the model's
    own position biases (T5 buckets, ALiBi).

    ``attention`` names the kernel ("main", "encoder", "decoder" or "cross"); the
    cross-attention's kernel is drawn at every offset (both signs), the others at delta >= 0.
    """
    from matplotlib import colormaps

    n = 3 if biases else 2
    fig = new_figure(4.2 * n, 3.6)
    axes = fig.subplots(1, n)
    cmap = colormaps["viridis"]
    L = kernel.attn.shape[0]
    keep = kernel.offsets >= (kernel.offsets.min() if attention == "cross" else 0)
    for l in range(L):
        axes[0].plot(
            kernel.offsets[keep], kernel.attn[l].mean(0)[keep], color=cmap(l / max(L - 1, 1))
        )
    axes[0].set_yscale("log")
    axes[0].set_xlabel("offset i - j")
    axes[0].set_ylabel("mean attention (head mean)")
    title = KERNEL_TITLES.get(attention, attention)
    axes[0].set_title(f"{title} ({kernel.n_windows} windows)", fontsize=9)
    neg = kernel.negative_self_bias()
    axes[1].imshow(neg.T, aspect="auto", cmap="Greys", vmin=0, vmax=1)
    axes[1].set_xlabel("layer")
    axes[1].set_ylabel("head")
    axes[1].set_title(f"negative self-bias (black): {neg.mean():.0%} of heads", fontsize=9)
    if biases:
        for k in biases:
            for h in range(k.bias.shape[0]):
                axes[2].plot(k.offsets, k.bias[h], lw=0.8, ls="--" if k.stack == "decoder" else "-")
        axes[2].set_xlabel("offset i - j")
        axes[2].set_ylabel("bias added to the scores")
        kinds = ", ".join(sorted({k.kind for k in biases}))
        axes[2].set_title(f"position bias ({kinds}; dashed: decoder)", fontsize=9)
    return fig


def refactor_figure(result: RefactorResult) -> Figure:
    """Mean |O_h| / |block input| per layer and head."""
    fig = new_figure(7, 3.4)
    ax = fig.subplots()
    im = ax.imshow(result.head_norm_rel.T, aspect="auto", cmap="magma")
    fig.colorbar(im, ax=ax)
    ax.set_xlabel("layer")
    ax.set_ylabel("head")
    ax.set_title(
        f"how far each head moves the vector (max rel err {result.max_rel_err:.1e})", fontsize=9
    )
    return fig
