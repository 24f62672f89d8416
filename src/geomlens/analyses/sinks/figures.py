"""The attention-sink figure: the sink-rate heat map, layers x heads (the section's glance
figure)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from geomlens.analyses.sinks.compute import GU_LENGTH
from geomlens.analyses.sinks.schema import SinkMetrics
from geomlens.reporting.figures import new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def rate_figure(block: SinkMetrics) -> Figure:
    """Per layer and head, the share of windows whose first token draws more than epsilon
    of the head's attention: at T = 64 where the run has it (Gu's setting), else at T."""
    at64 = block.rate_map_64 is not None
    rates = np.array(block.rate_map_64 if at64 else block.rate_map, dtype=float)
    length = GU_LENGTH if at64 else block.length
    rate = block.sink_rate_64 if at64 else block.sink_rate
    n_layers, n_heads = rates.shape
    fig = new_figure(max(3.6, 1.6 + 0.32 * n_heads), max(2.8, 1.2 + 0.16 * n_layers))
    ax = fig.subplots()
    image = ax.imshow(rates, aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0, origin="lower")
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(
        f"Sink rate {rate:.2f} (first token > {block.epsilon:g}, T = {length})", fontsize=9
    )
    fig.colorbar(image, ax=ax, label="share of windows")
    return fig
