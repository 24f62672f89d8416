"""One section of ``report.html``, as an analysis declares it next to its own code.

A section is its anchor and title, the function that builds its HTML from a finished run,
when it is shown, and the captions of the figures it owns (figure files whose names start
with a caption's key). ``report/registry.py`` lists the sections in page order; the page
lays out whatever is registered.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from geomlens.io.runfolder import Run
from geomlens.report.html import image, plot


def always(run: Run) -> bool:
    return True


@dataclass(frozen=True)
class Section:
    """A page section.

    Attributes:
        anchor: the id in the page and the navigation bar.
        title: its heading.
        build: run -> the section's HTML (readings, tables, figures).
        present: run -> whether this run has the section's numbers.
        captions: figure-name prefix -> caption, for the figures this section shows.
    """

    anchor: str
    title: str
    build: Callable[[Run], str]
    present: Callable[[Run], bool] = always
    captions: dict[str, str] = field(default_factory=dict)

    def caption(self, path: Path) -> str:
        """The caption of a figure file: its known prefix's text plus the rest of its name."""
        key = path.stem
        for known, text in self.captions.items():
            if key.startswith(known):
                return text + key.removeprefix(known).replace("_", " ")
        return key.replace("_", " ")

    def static_figures(self, folder: Path, prefixes: tuple[str, ...]) -> str:
        """Every PNG figure of the run whose name starts with one of ``prefixes``."""
        return "".join(image(p, self.caption(p)) for p in figure_files(folder, prefixes))

    def saved_plot(self, folder: Path, stem: str, plot_id: str) -> str:
        """An interactive figure the analysis saved as ``figures/<stem>.plotly.json``."""
        path = folder / "figures" / f"{stem}.plotly.json"
        if not path.exists():
            return ""
        figure = json.loads(path.read_text(encoding="utf-8"))
        return plot(figure, plot_id, self.captions.get(stem, stem))


def figure_files(folder: Path, prefixes: tuple[str, ...]) -> list[Path]:
    """PNG figures of a run whose names start with one of ``prefixes``, sorted by name."""
    figures = folder / "figures"
    if not figures.is_dir():
        return []
    return sorted(p for p in figures.glob("*.png") if p.stem.startswith(prefixes))


def pct(x: float | None) -> str:
    """A share as a whole percentage ("–" when absent)."""
    return "–" if x is None else f"{100 * x:.0f}%"
