"""The anisotropy figure: E[cos] of random token pairs by layer, the part of its 1 and 3
largest dimensions, and E[cos] after standardising each dimension."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from geomlens.reporting.figures import new_figure

if TYPE_CHECKING:  # matplotlib loads only when a figure is drawn
    from matplotlib.figure import Figure


def glance_figure(rows: Sequence[Mapping[str, Any]], model: str = "") -> Figure:
    """``rows``: the "anisotropy" section's per-layer rows."""
    fig = new_figure(6.4, 3.8)
    ax = fig.subplots()
    x = [r["layer"] for r in rows]
    ax.plot(x, [r["pair_cosine"] for r in rows], "-o", ms=3, color="k", label="E[cos]")
    ax.plot(x, [sum(d["cc"] for d in r["top_dims"][:3]) for r in rows], "-", label="3 largest CC_i")
    ax.plot(x, [r["top_dims"][0]["cc"] for r in rows], "--", label="largest CC_i")
    ax.plot(x, [r["standardised_cosine"] for r in rows], "-s", ms=3, label="E[cos] standardised")
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xlabel("layer (0 = embeddings)")
    ax.set_ylabel("E[cos] / CC_i")
    ax.set_title(f"Anisotropy and rogue dimensions{f' ({model})' if model else ''}")
    ax.legend(fontsize=7)
    return fig
