"""The report's stages run in order on one capture: each registered analysis with a stage
(``analyses/registry.py``), resumable, with its figures drawn while the next one computes.

Each stage is recorded as finished in ``stages.json`` once its numbers and figures are on
disk, so an interrupted report resumes at the first unfinished stage and the final
metrics.json equals an uninterrupted run's.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from geomlens.analyses import registry
from geomlens.analyses.base import Analysis, StageRequest
from geomlens.capturing.taps import TapsFactory
from geomlens.corpus import Windows
from geomlens.io.progress import Step, StepLines
from geomlens.models.view import ModelView
from geomlens.pipeline.taps import tap_factory
from geomlens.reporting.figures import deferred_rendering
from geomlens.runs import lifecycle
from geomlens.runs.runfolder import RunFolder
from geomlens.stats import DecompositionAccumulator

StageStep = Callable[[Step], Analysis]
"""A stage with its request given: the step reporter -> the stage's analysis."""


@dataclass(frozen=True)
class Stage:
    """One of the report's stages: its registered name, its progress title, its analysis."""

    name: str
    title: str
    analysis: StageStep


def report_stages(request: StageRequest, generates: bool) -> list[Stage]:
    """The registered analyses' stages this model runs, in order."""
    return [
        Stage(a.name, a.title, functools.partial(a.stage, request))
        for a in registry.report_stages(generates)
        if a.stage is not None
    ]


def report_taps(stages: list[Stage]) -> TapsFactory:
    """The taps the report's capture fills for those stages."""
    names = {stage.name for stage in stages}
    chosen = [a for a in registry.ANALYSES if a.name in names]
    return tap_factory(registry.tap_builds(chosen))


def settle(
    pending: list[tuple[str, list[Callable[[], None]]]], done: list[str], folder: RunFolder
) -> None:
    """Wait for the figures of the stages in ``pending``, recording each finished in order.

    A stage counts as finished only once its figures are on disk: a child that failed
    (a full disk, a kill) raises here, and that stage is left unrecorded.
    """
    while pending:
        name, waits = pending[0]
        for wait in waits:
            wait()
        pending.pop(0)
        done.append(name)
        lifecycle.record_stages(folder, done)


@dataclass(frozen=True)
class Staged:
    """The stages run in order as one ``Analysis``, skipping those finished (see
    ``lifecycle.finished_stages``).

    A stage's figures are drawn in forked processes while the next stage computes (see
    ``rendered_in_background``); the stage is recorded in ``stages.json`` once they are
    written, and every stage is recorded before the call returns.
    """

    stages: list[Stage]
    progress: bool

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        if view is not None and view.is_seq2seq:  # (stage tests run without a model)
            folder.merge_metrics("stacks", registry.seq2seq_stacks())
        names = [stage.name for stage in self.stages]
        done = lifecycle.finished_stages(folder, names, registry.stage_sections())
        pending: list[tuple[str, list[Callable[[], None]]]] = []
        try:
            for i, stage in enumerate(self.stages, start=1):
                prefix = f"[{i}/{len(self.stages)}] {stage.title}"
                if stage.name in done:
                    if self.progress:
                        print(f"{prefix}: already done", file=sys.stderr)
                    continue
                if self.progress:
                    print(f"{prefix} ...", file=sys.stderr, flush=True)
                started = time.perf_counter()
                step = StepLines(f"  {stage.name}", self.progress)
                with deferred_rendering() as waits:
                    stage.analysis(step)(folder, view, windows, acc)
                settle(pending, done, folder)  # earlier stages: drawn while this one ran
                pending.append((stage.name, waits))
                if not waits:
                    settle(pending, done, folder)
                if self.progress:
                    elapsed = time.perf_counter() - started
                    print(f"{prefix}: done in {elapsed:.0f} s", file=sys.stderr, flush=True)
        except BaseException:
            with suppress(Exception):  # record what finished drawing; the error goes on
                settle(pending, done, folder)
            raise
        settle(pending, done, folder)
