"""One section of ``report.html``, as an analysis declares it next to its own code.

A section is its anchor and title, the function that builds its HTML from a finished run,
when it is shown, and the captions of the figures it owns (figure files whose names start
with a caption's key), each with a line saying how to read it. A figure is shown once: a
PNG whose figure the section draws interactively is left out of the page (it stays in
``figures/``). ``analyses/registry.py`` lists the sections in page order; the page
lays out whatever is registered.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from geomlens.reporting.html import image, plot
from geomlens.runs.runfolder import Run


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
        how: figure-name prefix -> one line saying how to read that figure.
        interactive: figure names the section draws interactively: their PNGs are not
            repeated on the page (nor any PNG with a saved ``<stem>.plotly.json``).
    """

    anchor: str
    title: str
    build: Callable[[Run], str]
    present: Callable[[Run], bool] = always
    captions: dict[str, str] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)
    interactive: tuple[str, ...] = ()

    def caption(self, path: Path) -> str:
        """The caption of a figure file: its known prefix's text plus the rest of its name."""
        key = path.stem
        for known, text in self.captions.items():
            if key.startswith(known):
                return text + key.removeprefix(known).replace("_", " ")
        return key.replace("_", " ")

    def how_to_read(self, stem: str) -> str:
        """The "how to read this" line of a figure name (its longest known prefix's)."""
        known = [k for k in self.how if stem.startswith(k)]
        return self.how[max(known, key=len)] if known else ""

    def static_figures(self, folder: Path, prefixes: tuple[str, ...]) -> str:
        """Every PNG figure of the run whose name starts with one of ``prefixes``, except
        those the page already draws interactively."""
        return "".join(
            image(p, self.caption(p), self.how_to_read(p.stem))
            for p in figure_files(folder, prefixes)
            if p.stem not in self.interactive and not p.with_suffix(".plotly.json").exists()
        )

    def saved_plot(self, folder: Path, stem: str, plot_id: str) -> str:
        """An interactive figure the analysis saved as ``figures/<stem>.plotly.json``."""
        path = folder / "figures" / f"{stem}.plotly.json"
        if not path.exists():
            return ""
        figure = json.loads(path.read_text(encoding="utf-8"))
        return plot(figure, plot_id, self.captions.get(stem, stem), self.how_to_read(stem))


def figure_files(folder: Path, prefixes: tuple[str, ...]) -> list[Path]:
    """PNG figures of a run whose names start with one of ``prefixes``, sorted by name."""
    figures = folder / "figures"
    if not figures.is_dir():
        return []
    return sorted(p for p in figures.glob("*.png") if p.stem.startswith(prefixes))


def pct(x: float | None) -> str:
    """A share as a whole percentage ("–" when absent)."""
    return "–" if x is None else f"{100 * x:.0f}%"
