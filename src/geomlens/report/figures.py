"""What every figure module shares: a canvas, a choice of layers to show, and ``save``.

Figures are matplotlib ``Figure`` objects on the Agg canvas (no pyplot state) for static
PNG, or plotly figures for self-contained interactive HTML.
"""

from __future__ import annotations

import multiprocessing as mp
import warnings
from collections.abc import Callable, Sequence
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

    The HTML embeds plotly.js (works offline) and uses a fixed div id from the file name;
    beside it, ``<stem>.plotly.json`` holds the figure alone (for report.html).
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
        # The figure's data and layout, for report.html to embed without a second plotly.js.
        path.with_suffix(".plotly.json").write_text(fig.to_json(), encoding="utf-8")
    else:
        with warnings.catch_warnings():  # tokens in scripts the font lacks draw as boxes
            warnings.filterwarnings("ignore", message="Glyph .* missing from font")
            metadata = {"Software": None} if path.suffix == ".png" else None
            fig.savefig(path, dpi=dpi, metadata=metadata)
    return path


Figures = Sequence[tuple[Figure | go.Figure, str | Path]]


def _save_each(figures: Figures) -> None:
    for fig, path in figures:
        save(fig, path)


def save_in_background(figures: Figures) -> Callable[[], None]:
    """Start writing figures in a forked process; returns a function that waits for it.

    Rendering dominates the cost of figures (about a second each on a slow core), so it can
    overlap with other work. A forked child inherits the built figures: nothing is pickled.
    Where the platform cannot fork, the figures are written before this returns.
    """
    if "fork" not in mp.get_all_start_methods() or not figures:
        _save_each(figures)
        return lambda: None
    child = mp.get_context("fork").Process(target=_save_each, args=(list(figures),))
    child.start()

    def wait() -> None:
        child.join()
        if child.exitcode != 0:
            raise RuntimeError(f"writing figures failed (exit code {child.exitcode})")

    return wait


def save_all(figures: Figures) -> None:
    """Write many figures, half of them in a forked process alongside this one."""
    half = len(figures) // 2
    wait = save_in_background(figures[:half])
    _save_each(figures[half:])
    wait()
