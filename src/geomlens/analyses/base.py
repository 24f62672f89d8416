"""What every analysis folder declares: its ``AnalysisEntry`` (``<folder>/entry.py``), the
request its report stage reads, and the step that runs on a finished capture.

A step is an ``Analysis`` (``pipeline.request``): called with the run folder, the loaded
model, the windows and the capture's statistics, it computes its numbers, merges them into
``metrics.json`` and draws its figures. A command's run (``pipeline.run``) calls its
analyses' steps; the report's stages (``analyses/staged.py``) call each registered
analysis's in turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geomlens.capturing.capture import CaptureConfig
from geomlens.corpus import Windows
from geomlens.io.progress import Step
from geomlens.models.view import ModelView
from geomlens.pipeline.request import Analysis, ContextRule
from geomlens.reporting.claims import Claim
from geomlens.reporting.section import Section
from geomlens.runs.runfolder import RunFolder
from geomlens.stats import DecompositionAccumulator

__all__ = ["Analysis", "AnalysisEntry", "Steps", "StageFactory", "StageRequest", "TapSpec"]


@dataclass(frozen=True)
class StageRequest:
    """What the report's stages read besides the run folder, the model, the windows and
    the statistics."""

    config: CaptureConfig
    text: str | None
    task: str | None
    limit: int
    skip_first: bool
    progress: bool
    words: list[str]


StageFactory = Callable[[StageRequest, Step], Analysis]
"""A registered report stage: the request and the step reporter -> the stage's analysis."""

TapWindows = Callable[[], int]
"""A tap's window count, read when the run starts (tests lower the module constants)."""


def every_window() -> int:
    """The windows count of a ``HiddenTap``'s spec: it opens no tapped pass (0) and is fed
    every window's hidden states by the capture loop."""
    return 0


@dataclass(frozen=True)
class TapSpec:
    """A statistic an analysis has the capture fill (``capturing.taps.Tap``): how to build it
    for a model and over how many of the first windows. A ``capturing.taps.HiddenTap``
    class is fed every window's hidden states instead (``windows`` left at ``every_window``):
    a streamed per-token statistic on the one capture pass."""

    build: Callable[[ModelView, int], Any]
    windows: TapWindows = every_window


@dataclass(frozen=True)
class Steps:
    """Several analyses' steps run one after the other on the same capture, as one
    ``Analysis`` (a command whose run holds several analyses' sections)."""

    steps: Sequence[Analysis]

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        for step in self.steps:
            step(folder, view, windows, acc)


@dataclass(frozen=True)
class AnalysisEntry:
    """One analysis, as every part of the package that lists analyses sees it.

    Attributes:
        name: its name (its folder's); its report stage's name (``stages.json``).
        writes: the metrics.json sections it writes (its stage is finished only with all).
        section: its section of report.html (None: not on the page).
        stage: its report stage, ``(request, step) -> Analysis`` (None: no stage).
        title: the stage's line in the report's progress.
        generating_only: the report runs its stage only on models that generate.
        taps: tap name -> what the capture fills for it (``TapSpec``).
        command: the command whose run holds its sections ("" none); several analyses can
            name one command (``decompose`` runs the decomposition and attention steps).
        captures: that command runs a capture (its run also holds the "capture" section).
        summary: the lines that command prints when it finishes, ``run -> list[str]``
            (given by the command's first analysis).
        headline: metrics -> a few (label, value) pairs that say what it found.
        figures: (run folder, metrics) -> its plotly figures by name.
        saved: figure name -> stem of the ``figures/<stem>.plotly.json`` its step saves.
        claims: (metrics, model record) -> the papers' claims its numbers decide.
        published: (metrics, model record) -> a paper's numbers beside the run's, for
            metrics.json's "published" (None: none for this model).
        stacks: metrics section -> which stack of an encoder-decoder its numbers come from.
        check: refuses a capture config its command cannot analyse, before the model loads.
        contexts_rule: when a capture grown in chunks holds contexts enough to decide its
            claims (``--contexts auto``; ``pipeline.request.ContextRule``).
        glossary: its own metric keys -> one sentence each (the page's hover text and
            glossary, the API tables' column descriptions).
    """

    name: str
    writes: tuple[str, ...] = ()
    section: Section | None = None
    stage: StageFactory | None = None
    title: str = ""
    generating_only: bool = False
    taps: Mapping[str, TapSpec] = field(default_factory=dict)
    command: str = ""
    captures: bool = True
    summary: Callable[[Any], list[str]] | None = None
    headline: Callable[[dict[str, Any]], list[tuple[str, Any]]] | None = None
    figures: Callable[[Path, dict[str, Any]], dict[str, Any]] | None = None
    saved: Mapping[str, str] = field(default_factory=dict)
    claims: Callable[[dict[str, Any], dict[str, Any]], list[Claim]] | None = None
    published: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None] | None = None
    stacks: Mapping[str, str] = field(default_factory=dict)
    check: Callable[[str, CaptureConfig], None] | None = None
    contexts_rule: ContextRule | None = None
    glossary: Mapping[str, str] = field(default_factory=dict)
