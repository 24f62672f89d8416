"""What every figure module shares: a canvas, a choice of layers to show, and ``save``.

Figures are matplotlib ``Figure`` objects on the Agg canvas (no pyplot state) for static
PNG, or plotly figures for self-contained interactive HTML.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 100  # PNG resolution: sharp enough to read, quick to render


def new_figure(width: float, height: float) -> Figure:
    """A matplotlib figure (inches) with constrained layout on the Agg canvas."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def pick_layers(layers: Sequence[int], max_panels: int = 6) -> list[int]:
    """Up to ``max_panels`` layers spread evenly over ``layers`` (first and last included).

    Args:
        layers: available layer indices, in order.
        max_panels: most layers to return.
    """
    layers = list(layers)
    if len(layers) <= max_panels:
        return layers
    idx = np.unique(np.linspace(0, len(layers) - 1, max_panels).round().astype(int))
    return [layers[i] for i in idx]


def save(fig: Figure | go.Figure, path: str | Path, dpi: int = DPI) -> Path:
    """Write a figure: matplotlib to PNG (or any format by suffix), plotly to HTML.

    The HTML embeds plotly.js (works offline) and uses a fixed div id from the file name.
    PNG metadata carries no software version, so equal figures give equal files.

    Args:
        fig: the figure.
        path: where to write; parent folders are created.
        dpi: resolution of raster images.

    Returns:
        The path written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(fig, go.Figure):
        if path.suffix.lower() not in (".html", ".htm"):
            raise ValueError(f"plotly figures are saved as .html, not {path.suffix!r}")
        fig.write_html(path, include_plotlyjs=True, full_html=True, div_id=f"fig-{path.stem}")
    else:
        fig.savefig(path, dpi=dpi, metadata={"Software": None} if path.suffix == ".png" else None)
    return path


_PENDING: list[tuple[Figure | go.Figure, Path]] = []


def _save_pending(index: int) -> str:
    fig, path = _PENDING[index]
    return str(save(fig, path))


def save_all(figures: Sequence[tuple[Figure | go.Figure, str | Path]], workers: int = 2) -> None:
    """Write many figures, rendering them in parallel where the platform can fork.

    Rendering dominates the cost of figures (about a second each on a slow core); forked
    workers inherit the built figures, so nothing is pickled but the file names.
    """
    global _PENDING
    _PENDING = [(fig, Path(path)) for fig, path in figures]
    try:
        if workers > 1 and len(_PENDING) > 1 and "fork" in mp.get_all_start_methods():
            with mp.get_context("fork").Pool(min(workers, len(_PENDING))) as pool:
                pool.map(_save_pending, range(len(_PENDING)), chunksize=1)
        else:
            for i in range(len(_PENDING)):
                _save_pending(i)
    finally:
        _PENDING = []
