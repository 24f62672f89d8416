"""The intrinsic-dimension figure: the profile over relative depth (the section's glance
figure)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from geomlens.analyses.intrinsic_dimension.compute import MIDDLE
from geomlens.analyses.intrinsic_dimension.schema import IdMetrics
from geomlens.reporting.figures import new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def profile_figure(block: IdMetrics) -> Figure:
    """TwoNN by relative depth with its 95% band, GRIDE at each scale as thin lines, the
    middle third shaded."""
    fig = new_figure(6.4, 3.6)
    ax = fig.subplots()
    depth = np.array([r.depth for r in block.layers], dtype=float)
    nan = float("nan")
    value = np.array([nan if r.twonn is None else r.twonn for r in block.layers])
    low = np.array([nan if r.low is None else r.low for r in block.layers])
    high = np.array([nan if r.high is None else r.high for r in block.layers])
    ax.axvspan(*MIDDLE, color="0.92", label="middle third")
    ax.fill_between(depth, low, high, color="C0", alpha=0.25, linewidth=0)
    ax.plot(depth, value, "o-", color="C0", label="TwoNN (95% band)")
    for s, k in enumerate(block.gride_k):
        ys = np.array(
            [
                nan if r.gride is None or s >= len(r.gride) or r.gride[s] is None else r.gride[s]
                for r in block.layers
            ],
            dtype=float,
        )
        ax.plot(depth, ys, lw=0.8, alpha=0.7, color=f"C{s + 1}", label=f"GRIDE k={k}")
    ax.set_xlabel("relative depth (layer / blocks)")
    ax.set_ylabel("intrinsic dimension")
    ax.set_title(f"Intrinsic dimension of {block.n_windows} windows (mean-pooled)")
    ax.legend(fontsize=7, ncol=2)
    return fig
