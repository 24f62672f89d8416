"""Which figures a run draws, declared apart from the drawing code so that the command
line and the Python API can name the levels without importing matplotlib or plotly."""

from __future__ import annotations

from typing import Literal, get_args

FigureLevel = Literal["all", "interactive", "none"]
"""Which figures a run draws: static PNGs and interactive plotly figures ("all"), the
interactive ones only (no matplotlib drawing, the costly part), or none (numbers only)."""

FIGURE_LEVELS: tuple[str, ...] = get_args(FigureLevel)
