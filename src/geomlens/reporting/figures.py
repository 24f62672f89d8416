"""What every figure module shares: a canvas, a choice of layers to show, and ``save``.

Figures are matplotlib ``Figure`` objects on the Agg canvas (no pyplot state) for static
PNG, or plotly figures for self-contained interactive HTML.
"""

from __future__ import annotations

import multiprocessing as mp
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from geomlens.config.figure_level import current_level
from geomlens.io.files import replacing, write_text_atomic

if TYPE_CHECKING:  # imported where a figure is drawn: a refused command never loads them
    import plotly.graph_objects as go
    from matplotlib.figure import Figure

DPI = 100  # PNG resolution: sharp enough to read, quick to render

PLOTLY_JS = "plotly.min.js"
"""The file beside interactive figures that holds plotly.js for all of them."""


def drawn(fig: Figure | go.Figure | None = None) -> bool:
    """Whether the current figure level draws ``fig`` (None: whether it draws any figure)."""
    level = current_level()
    if fig is None:
        return level != "none"
    import plotly.graph_objects as go

    if isinstance(fig, go.Figure):
        return level != "none"
    return level == "all"


def new_figure(width: float, height: float) -> Figure:
    """A matplotlib figure (inches) with constrained layout on the Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

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

    The HTML loads plotly.js from ``plotly.min.js`` in the same folder (written once, so the
    folder works offline without a copy per figure) and uses a fixed div id from the file name;
    beside it, ``<stem>.plotly.json`` holds the figure alone (for report.html).
    PNG metadata carries no software version, so equal figures give equal files.

    Outside the current ``figure_level`` nothing is written.

    Args:
        fig: the figure.
        path: where to write; parent folders are created.
        dpi: resolution of raster images.

    Returns:
        The path written (or that would have been).
    """
    import plotly.graph_objects as go
    import plotly.offline

    path = Path(path)
    if not drawn(fig):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(fig, go.Figure):
        if path.suffix.lower() not in (".html", ".htm"):
            raise ValueError(f"plotly figures are saved as .html, not {path.suffix!r}")
        # plotly.js once per folder (4.8 MB), beside the figures that load it by name
        html = fig.to_html(include_plotlyjs=PLOTLY_JS, full_html=True, div_id=f"fig-{path.stem}")
        if not (path.parent / PLOTLY_JS).exists():
            write_text_atomic(path.parent / PLOTLY_JS, plotly.offline.get_plotlyjs())
        write_text_atomic(path, html)
        # The figure's data and layout, for report.html to embed without a second plotly.js.
        write_text_atomic(path.with_suffix(".plotly.json"), fig.to_json())
    else:
        with warnings.catch_warnings():  # tokens in scripts the font lacks draw as boxes
            warnings.filterwarnings("ignore", message="Glyph .* missing from font")
            metadata = {"Software": None} if path.suffix == ".png" else None
            with replacing(path) as tmp:
                fig.savefig(tmp, dpi=dpi, metadata=metadata, format=path.suffix[1:] or None)
    return path


Figures: TypeAlias = "Sequence[tuple[Figure | go.Figure, str | Path]]"


def _save_each(figures: Figures) -> None:
    for fig, path in figures:
        save(fig, path)


def _save_each_reporting(figures: Figures, conn: Connection) -> None:
    """``_save_each`` in a child process: a failure is sent back to the parent."""
    try:
        _save_each(figures)
    except OSError as exc:
        conn.send(("os", exc.errno, exc.strerror, exc.filename))
        raise SystemExit(1) from None
    except Exception as exc:
        conn.send(("other", type(exc).__name__, str(exc)[:400], None))
        raise SystemExit(1) from None


def save_in_background(figures: Figures) -> Callable[[], None]:
    """Start writing figures in a forked process; returns a function that waits for it.

    Rendering dominates the cost of figures (about a second each on a slow core), so it can
    overlap with other work. A forked child inherits the built figures: nothing is pickled.
    Where the platform cannot fork, the figures are written before this returns.
    """
    figures = [(fig, path) for fig, path in figures if drawn(fig)]
    if "fork" not in mp.get_all_start_methods() or not figures:
        _save_each(figures)
        return lambda: None
    receive, send = mp.Pipe(duplex=False)
    child = mp.get_context("fork").Process(target=_save_each_reporting, args=(list(figures), send))
    child.start()
    send.close()

    def wait() -> None:
        child.join()
        try:  # at the end of the pipe (nothing sent) poll is true and recv raises EOFError
            failure = receive.recv() if receive.poll() else None
        except EOFError:
            failure = None
        receive.close()
        if failure is not None and failure[0] == "os":
            raise OSError(failure[1], failure[2], failure[3])  # a full disk: the path named
        if child.exitcode != 0:
            detail = f": {failure[1]}: {failure[2]}" if failure else ""
            raise RuntimeError(f"writing figures failed (exit code {child.exitcode}){detail}")

    return wait


def save_all(figures: Figures) -> None:
    """Write many figures, half of them in a forked process alongside this one."""
    figures = [(fig, path) for fig, path in figures if drawn(fig)]
    half = len(figures) // 2
    wait = save_in_background(figures[:half])
    _save_each(figures[half:])
    wait()


_queue: ContextVar[list[tuple[Figure | go.Figure, Path]] | None] = ContextVar(
    "geomlens_figure_queue", default=None
)
_waits: ContextVar[list[Callable[[], None]] | None] = ContextVar(
    "geomlens_figure_waits", default=None
)


def save_later(fig: Figure | go.Figure, path: str | Path) -> Path:
    """``save``, or, inside ``rendered_in_background``, queue the figure for its child.

    Returns the path the figure is (or will be) written to.
    """
    queue = _queue.get()
    if queue is None:
        return save(fig, path)
    if drawn(fig):
        queue.append((fig, Path(path)))
    return Path(path)


@contextmanager
def rendered_in_background() -> Iterator[None]:
    """Render the figures ``save_later`` queues inside, in one forked process started on exit.

    Building a figure is cheap; drawing it is not (seconds per figure on a slow core), so
    the drawing overlaps with what follows. On a normal exit the wait for the child goes
    to the enclosing ``deferred_rendering`` scope (the report runs its next stage
    meanwhile), or, outside any, happens here. On an exception nothing is rendered.
    """
    queue: list[tuple[Figure | go.Figure, Path]] = []
    token = _queue.set(queue)
    try:
        yield
    finally:
        _queue.reset(token)
    wait = save_in_background(queue)
    waits = _waits.get()
    if waits is None:
        wait()
    else:
        waits.append(wait)


@contextmanager
def deferred_rendering() -> Iterator[list[Callable[[], None]]]:
    """Collect the waits of ``rendered_in_background`` scopes inside, for the caller to call.

    Every wait must be called before the figures are relied on: each raises if its child
    failed (OSError for a full disk). On an exception inside, the children already
    started are joined (their failures ignored) and the exception goes on.
    """
    waits: list[Callable[[], None]] = []
    token = _waits.set(waits)
    try:
        yield waits
    except BaseException:
        for wait in waits:
            with suppress(Exception):
                wait()
        raise
    finally:
        _waits.reset(token)
