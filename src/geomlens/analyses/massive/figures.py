"""The massive-activation figure: top-1/2/3 |h| of a window and the median |h| by layer, on
a log scale (Sun et al.'s figure 2 in form), with Sun's floor of 100 marked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from geomlens.reporting.figures import new_figure

if TYPE_CHECKING:  # matplotlib loads only when a figure is drawn
    from matplotlib.figure import Figure


def glance_figure(rows: Sequence[Mapping[str, Any]], model: str = "") -> Figure:
    """``rows``: the "massive" section's per-layer rows."""
    fig = new_figure(6.4, 3.8)
    ax = fig.subplots()
    x = [r["layer"] for r in rows]
    for key, label in (("top1_abs", "top 1"), ("top2_abs", "top 2"), ("top3_abs", "top 3")):
        ax.plot(x, [r[key] for r in rows], "-o", ms=3, label=label)
    ax.plot(x, [r["median_abs"] for r in rows], "-", color="grey", label="median")
    ax.axhline(100, color="k", lw=0.8, ls=":", label="100 (Sun et al.'s floor)")
    ax.set_yscale("log")
    ax.set_xlabel("layer (0 = embeddings)")
    ax.set_ylabel("|h[t, i]|")
    ax.set_title(f"Largest |h| against the median{f' ({model})' if model else ''}")
    ax.legend(fontsize=7)
    return fig
