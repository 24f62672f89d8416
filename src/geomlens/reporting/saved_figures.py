"""Figures a run saved as plotly JSON (``figures/<stem>.plotly.json``) and its static PNGs,
read back by name (nothing is recomputed)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import plotly.graph_objects as go


def saved_figures(folder: Path, saved: Mapping[str, str]) -> dict[str, go.Figure]:
    """The figures the analyses saved as plotly JSON: ``saved`` maps a figure's name to the
    stem of its file."""
    import plotly.io

    found = {}
    for name, stem in saved.items():
        path = folder / "figures" / f"{stem}.plotly.json"
        if path.exists():
            found[name] = plotly.io.from_json(path.read_text(encoding="utf-8"))
    return found


def images_of(folder: Path) -> dict[str, Path]:
    """The run's static PNG figures by file stem."""
    figures = folder / "figures"
    if not figures.is_dir():
        return {}
    return {p.stem: p for p in sorted(figures.glob("*.png"))}
