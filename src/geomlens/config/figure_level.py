"""Which figures a run draws, declared apart from the drawing code so that the command
line and the Python API can name the levels without importing matplotlib or plotly."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal, get_args

FigureLevel = Literal["all", "interactive", "none"]
"""Which figures a run draws: static PNGs and interactive plotly figures ("all"), the
interactive ones only (no matplotlib drawing, the costly part), or none (numbers only)."""

FIGURE_LEVELS: tuple[str, ...] = get_args(FigureLevel)

_level: ContextVar[str] = ContextVar("geomlens_figure_level", default="all")


@contextmanager
def figure_level(level: FigureLevel) -> Iterator[None]:
    """Inside, ``reporting.figures.save`` and ``save_later`` write only the figures ``level``
    asks for."""
    if level not in FIGURE_LEVELS:
        raise ValueError(f"figure level {level!r} is not one of {FIGURE_LEVELS}")
    token = _level.set(level)
    try:
        yield
    finally:
        _level.reset(token)


def current_level() -> str:
    """The figure level in force (``figure_level``'s, default "all")."""
    return _level.get()
