"""``RunRequest``: everything one run of the pipeline needs, as one object."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

from geomlens.capturing.capture import NOT_IDENTITY, CaptureConfig
from geomlens.capturing.taps import TapsFactory
from geomlens.config.figure_level import FigureLevel
from geomlens.config.options import AUTO_MAX_CONTEXTS
from geomlens.corpus import Windows
from geomlens.engines import EngineConfig
from geomlens.models.view import ModelView
from geomlens.runs.runfolder import RunFolder
from geomlens.stats import DecompositionAccumulator


class Analysis(Protocol):
    """What runs after the capture: reads the statistics (and the taps the capture filled,
    ``pipeline.taps.filled_tap``), writes its metrics.json section(s) and figures."""

    def __call__(
        self,
        folder: RunFolder,
        view: ModelView,
        windows: Windows,
        acc: DecompositionAccumulator,
    ) -> None: ...


Judge = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]
"""(metrics, the manifest's model record) -> the sections the run's numbers decide (its
claims, a paper's numbers beside them), merged into metrics.json after the analysis."""

Check = Callable[[str, CaptureConfig], None]
"""(command, config) -> None, or a ``GeomlensError`` before the model loads."""


class Look(Protocol):
    """One look of ``--contexts auto``: whether the rule's claims are decided."""

    @property
    def contexts(self) -> int:
        """The windows the look read."""
        ...

    @property
    def verdicts(self) -> dict[str, str]:
        """Claim id -> its verdict at this look."""
        ...

    @property
    def undecided(self) -> list[str]:
        """The claims still inconclusive."""
        ...

    @property
    def decided(self) -> bool: ...

    @property
    def measured(self) -> bool:
        """Whether any of the rule's claims was measured (else nothing is to decide)."""
        ...


class ContextRule(Protocol):
    """When a capture extended in chunks holds contexts enough (``--contexts auto``): an
    analysis registers it (``AnalysisEntry.contexts_rule``); the pipeline runs it."""

    @property
    def spending(self) -> str:
        """How the error is spent over the looks, in words (recorded with the run)."""
        ...

    def looks(self, first: int, available: int) -> tuple[int, ...]:
        """The fixed schedule of looks (window counts, each twice the one before)."""
        ...

    def level(self, n_looks: int) -> float:
        """The intervals' coverage at every look of a schedule of ``n_looks``."""
        ...

    def look(
        self,
        acc: DecompositionAccumulator,
        view: ModelView,
        windows: Windows,
        batch_size: int,
        coverage: float,
        model: dict[str, Any],
        earlier: dict[str, str] | None = None,
    ) -> Look:
        """The rule's claims judged on ``acc``; ``earlier``: the verdicts of the look
        before (a claim decided there need not be tested again)."""
        ...

    def finishing(self, coverage: float) -> AbstractContextManager[None]:
        """Held around the final analysis and its claims."""
        ...

    def sections(self, metrics: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
        """metrics.json sections that carry the record (its page line)."""
        ...


@dataclass(frozen=True)
class AutoContexts:
    """``--contexts auto``: the capture grows along the rule's looks, up to
    ``max_contexts`` windows, until its claims are decided. Where and when it stops
    depends on the data and the seed only; ``budget_minutes`` is a safety that cuts a run
    short (and says so) on a machine too slow to reach the last look in that time.

    Attributes:
        budget_minutes: wall minutes for the chunks' captures and the looks (a safety).
        max_contexts: the most windows captured (the last look is the largest doubling of
            the first within it).
        rule: the registered rule (``analyses.registry.run_request`` fills it).
    """

    budget_minutes: float
    max_contexts: int = AUTO_MAX_CONTEXTS
    rule: ContextRule | None = None


@dataclass(frozen=True)
class RunRequest:
    """One command's run: what to capture, where, and what runs on the capture.

    Attributes:
        command: the command ("capture", "decompose", "sphere", "walk", "report"); it names
            the run in its config and says which metrics.json sections a finished run holds.
        config: what is captured (model, corpus, windows, layers, device, dtype, ...).
        out: the run folder.
        options: the command's own options, recorded in the run's config (its identity).
        analysis: what runs on the finished capture (None: the capture alone).
        view: a model already loaded for ``config.model`` (None: loaded when needed).
        progress: progress bars on stderr.
        checkpoint_every_s: seconds between saves of resumable progress.
        engine: where the capture runs (this process, or Ray); not part of the identity.
        sections: the metrics.json sections a finished run holds (None: the command's, from
            the analyses' registry).
        taps: the statistics the capture fills besides the decomposition (``capturing.taps``).
        figures: which figures the analyses draw (``config.figure_level.FigureLevel``).
        judge: decides the claims from the numbers written (None: none).
        check: refuses a config the analysis cannot analyse, before the model loads.
        checked: the caller has already validated ``config`` and run ``check`` (the report
            does both before it loads the model), so ``run`` does not repeat them.
        auto: ``--contexts auto`` (None: ``config.contexts`` windows); ``config.contexts``
            is then the first look.
    """

    command: str
    config: CaptureConfig
    out: str | Path
    options: dict[str, Any] = field(default_factory=dict)
    analysis: Analysis | None = None
    view: ModelView | None = None
    progress: bool = True
    checkpoint_every_s: float = 30.0
    engine: EngineConfig = field(default_factory=EngineConfig)
    sections: tuple[str, ...] | None = None
    taps: TapsFactory | None = None
    figures: FigureLevel = "all"
    judge: Judge | None = None
    check: Check | None = None
    checked: bool = False
    auto: AutoContexts | None = None

    def identity(self) -> dict[str, Any]:
        """The run's config as its run folder records it (what makes two runs the same):
        only what can change a number. The figures drawn, the progress bars, the engine
        and the checkpoints' pace are not in it (``runs.runfolder.PRESENTATION``): a rerun
        that changes only those reuses the run's statistics and redraws."""
        options = dict(self.options)
        if self.auto is not None:
            options.update(
                contexts="auto",
                budget=self.auto.budget_minutes,
                max_contexts=self.auto.max_contexts,
            )
        return {**self.config.to_dict(), "command": self.command, **options}


def identity_defaults(config_type: type[CaptureConfig]) -> dict[str, Any]:
    """The default of every identity field that has one (the capture options' of
    ``config_type``): a run recorded before such a field existed is the same run while this
    one leaves the field at its default."""
    return {
        f.name: f.default
        for f in fields(config_type)
        if f.default is not MISSING and f.name not in NOT_IDENTITY
    }
