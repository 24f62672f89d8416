"""``geomlens report``: every analysis on one capture, then one self-contained report.html.

One capture pass (with second moments) feeds the position/context decomposition and,
from its first windows, the norm statistics of the sphere stage and the position kernels
and refactoring check of the walk stage (see ``capture.taps``); the stages read those, the
same windows and the same loaded model. Each
stage records itself as finished in ``stages.json`` once its numbers and figures are on
disk, so an interrupted report resumes at the first unfinished stage and the final
metrics.json equals an uninterrupted run's.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import shutil
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import ClassVar

from geomlens.capture.capture import CaptureConfig, check_length, resolve_layers
from geomlens.capture.taps import TapsFactory
from geomlens.commands import lifecycle
from geomlens.commands.capture import (
    Analysis,
    CaptureRunConfig,
    check_decomposable,
    run_command,
    tap_factory,
)
from geomlens.commands.decompose import analyse_decomposition
from geomlens.commands.options import add_capture_options, capture_options, finished
from geomlens.commands.result import Result
from geomlens.commands.sphere import DEFAULT_PROMPT, analyse_sphere, check_prompt, load_nouns
from geomlens.commands.walk import (
    KERNEL_WINDOWS,
    TOP_K,
    analyse_walk,
    check_generate,
    default_text,
    encode_text,
    read_text_file,
)
from geomlens.corpus import Windows
from geomlens.engines import EngineConfig
from geomlens.errors import GeomlensError
from geomlens.io.files import replacing
from geomlens.io.progress import Step, StepLines
from geomlens.io.runfolder import Run, RunFolder, open_run
from geomlens.io.stored import store_compact
from geomlens.models.facts import check_before_loading
from geomlens.models.loading import eager_attention, load_configured
from geomlens.models.view import ModelView
from geomlens.report import registry
from geomlens.report.figure_level import FigureLevel
from geomlens.report.figures import deferred_rendering
from geomlens.report.page import write_report
from geomlens.stats import DecompositionAccumulator

Stage = Analysis
"""A report stage is an analysis step of run_command (commands.capture.Analysis)."""
StageFactory = Callable[[Step], Stage]
"""Builds a stage that reports its steps to the given reporter."""

WALK_GENERATE = 8
"""Tokens generated in the report's decoding walks (models that generate)."""

CONCEPT_LIMIT = 40
"""Items of the multiple-choice task scored in the report (a small default slice)."""


STAGE_SECTIONS = registry.stage_sections()
"""The metrics.json sections each stage writes, as registered when imported (the report
reads ``registry.stage_sections()`` when it runs): a stage is finished only with all of them."""

SEQ2SEQ_STACKS = registry.seq2seq_stacks()
"""Which stack of an encoder-decoder each section's numbers come from (metrics "stacks"),
as registered when imported (the report reads ``registry.seq2seq_stacks()``)."""


@dataclass(frozen=True)
class StageRequest:
    """What the report's stages read besides the run folder, the model, the windows and
    the statistics: each registered stage is ``(request, step) -> Stage``."""

    config: CaptureConfig
    text: str | None
    task: str | None
    limit: int
    skip_first: bool
    progress: bool
    words: list[str]


def decomposition_stage(request: StageRequest, step: Step) -> Stage:
    return analyse_decomposition(request.skip_first, request.config.seed, step)


def sphere_stage(request: StageRequest, step: Step) -> Stage:
    return analyse_sphere(request.config, request.words, DEFAULT_PROMPT, None, step)


def walk_report_stage(request: StageRequest, step: Step) -> Stage:
    return walk_stage(request.config.seed, WALK_GENERATE, step, request.text)


def concepts_report_stage(request: StageRequest, step: Step) -> Stage:
    return concepts_stage(request.config, request.task, request.limit, request.progress, step)


def report_stages(request: StageRequest, generates: bool) -> list[tuple[str, str, StageFactory]]:
    """The registered analyses' stages this model runs: (name, title, step -> stage)."""
    return [
        (a.name, a.title, functools.partial(registry.load(a.stage), request))
        for a in registry.report_stages(generates)
    ]


def report_taps(stages: list[tuple[str, str, StageFactory]]) -> TapsFactory:
    """The taps the report's capture fills for those stages."""
    names = {name for name, _, _ in stages}
    chosen = [a for a in registry.ANALYSES if a.name in names]
    return tap_factory(**registry.tap_windows(chosen))


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


def staged(stages: list[tuple[str, str, StageFactory]], progress: bool) -> Stage:
    """Run stages in order, skipping those finished (see ``finished_stages``).

    A stage's figures are drawn in forked processes while the next stage computes (see
    ``rendered_in_background``); the stage is recorded in ``stages.json`` once they are
    written, and every stage is recorded before this returns.
    """

    def analyse(
        folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        if view is not None and view.is_seq2seq:  # (stage tests run without a model)
            folder.merge_metrics("stacks", registry.seq2seq_stacks())
        names = [name for name, _, _ in stages]
        done = lifecycle.finished_stages(folder, names, registry.stage_sections())
        pending: list[tuple[str, list[Callable[[], None]]]] = []
        try:
            for i, (name, title, factory) in enumerate(stages, start=1):
                prefix = f"[{i}/{len(stages)}] {title}"
                if name in done:
                    if progress:
                        print(f"{prefix}: already done", file=sys.stderr)
                    continue
                if progress:
                    print(f"{prefix} ...", file=sys.stderr, flush=True)
                started = time.perf_counter()
                with deferred_rendering() as waits:
                    factory(StepLines(f"  {name}", progress))(folder, view, windows, acc)
                settle(pending, done, folder)  # earlier stages: drawn while this one ran
                pending.append((name, waits))
                if not waits:
                    settle(pending, done, folder)
                if progress:
                    elapsed = time.perf_counter() - started
                    print(f"{prefix}: done in {elapsed:.0f} s", file=sys.stderr, flush=True)
        except BaseException:
            with suppress(Exception):  # record what finished drawing; the error goes on
                settle(pending, done, folder)
            raise
        settle(pending, done, folder)

    return analyse


def walk_stage(seed: int, generate: int, step: Step, text: str | None = None) -> Stage:
    """The walk analyses under eager attention (its kernels read attention weights), on
    ``text`` (None: the packaged prompt, ``default_text``)."""

    def analyse(
        folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        n = generate if view.generates else 0
        with eager_attention(view):
            walk = analyse_walk(text or default_text(), n, TOP_K, KERNEL_WINDOWS, seed, step)
            walk(folder, view, windows, acc)

    return analyse


def default_task(name: str) -> str:
    """``name`` when a data folder holds it, else the packaged slice of timedial.

    The packaged file (the first 200 items of BIG-bench's timedial, Apache-2.0, see
    geomlens/data/NOTICE-bigbench.md) lets the report run on a machine with no data folder.
    """
    from geomlens.concepts.tasks import load_task

    try:
        load_task(name)
        return name
    except GeomlensError:
        return str(resources.files("geomlens") / "data" / "timedial_200.json")


def concepts_stage(
    config: CaptureConfig, task: str | None, limit: int, progress: bool, step: Step
) -> Stage:
    """The concept-space tests on a small slice of a task, as a run folder of their own.

    The tests run into ``DIR/concepts`` (which caches the baseline and each scheme) and
    their "concepts" section is copied into the report's metrics.
    """

    def analyse(
        folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        from geomlens.commands.concepts import DEFAULT_TASK, ConceptsConfig, run_concepts

        concepts = ConceptsConfig(
            model=config.model,
            task=task or default_task(DEFAULT_TASK),
            limit=limit,
            seed=config.seed,
            device=config.device,
            dtype=config.dtype,
            trust_remote_code=config.trust_remote_code,
        )
        step(f"{Path(concepts.task).stem}: {limit} items, the baseline and each scheme")
        run = run_concepts(concepts, folder.path / "concepts", view=view, progress=progress)
        figure = run.path / "figures" / "concepts_schemes.png"
        if figure.exists():
            (folder.path / "figures").mkdir(exist_ok=True)
            with replacing(folder.path / "figures" / figure.name) as tmp:
                shutil.copyfile(figure, tmp)
        folder.merge_metrics("concepts", run.metrics["concepts"])

    return analyse


def preflight(
    view: ModelView, config: CaptureConfig, text: str | None, task: str | None, limit: int
) -> None:
    """Every check the stages make against the model's positions, made before the capture
    (and before the run folder is made): the windows' length and layers, the walk text with
    its generated tokens, the sphere's prompt, and each concept item's context with its
    longest answer."""
    check_length(view, config.length)
    resolve_layers(view, config.layers)
    try:
        ids, _ = encode_text(view, text if text is not None else default_text())
    except GeomlensError as exc:
        if text is not None:
            raise
        raise GeomlensError(
            str(exc).replace(
                "give a shorter text.",
                "give a shorter one with --text or --text-file (the default is a packaged "
                "few-shot prompt).",
            )
        ) from None
    check_generate(view, len(ids), WALK_GENERATE if view.generates else 0)
    check_prompt(view, DEFAULT_PROMPT)
    if view.generates:
        from geomlens.commands.concepts import DEFAULT_TASK
        from geomlens.concepts.baseline import prepare
        from geomlens.concepts.tasks import load_task

        loaded = load_task(task or default_task(DEFAULT_TASK))
        prepare(view, loaded, loaded.take(limit), 0, config.seed)  # tokenisation only


def run_report(
    config: CaptureConfig,
    out: str | Path,
    *,
    text: str | None = None,
    task: str | None = None,
    limit: int = CONCEPT_LIMIT,
    skip_first: bool = False,
    view: ModelView | None = None,
    progress: bool = True,
    checkpoint_every_s: float = 30.0,
    engine: EngineConfig | None = None,
    figures: FigureLevel = "all",
) -> Run:
    """Every analysis the model supports on one capture, then ``DIR/report.html``.

    Args:
        config: the capture config (second moments are switched on).
        out: the run folder.
        text: the text of the walk stage (None: the packaged few-shot prompt).
        task: the multiple-choice task of the concept tests (None: the default task).
        limit: items of that task scored.
        skip_first: the primary view of position 0 (both views are computed and shown).
        view: a model already loaded for ``config.model``.
        progress: progress bars and stage lines on stderr.
        checkpoint_every_s: how often the capture saves resumable progress.
        engine: where the capture runs (default: this process).
        figures: which figures are drawn (the page's tables and readings are always there).
    """
    if limit < 1:
        raise GeomlensError(f"--limit must be at least 1 (got {limit}).")
    if task is not None:  # a bad task file is reported now, not after the capture
        from geomlens.concepts.tasks import load_task

        load_task(task)
    config = dataclasses.replace(config, second_moment=True)
    config.validate()
    check_decomposable("report", config)
    if view is None:  # the files' facts first: a refusal comes before the weights load
        check_before_loading(config.model, lambda v: preflight(v, config, text, task, limit))
        view = load_configured(config)
    preflight(view, config, text, task, limit)  # no forward pass, no run folder before it
    # One command per folder, from the capture to writing report.html.
    with lifecycle.held(out):
        return _report_locked(
            config,
            out,
            text,
            task,
            limit,
            skip_first,
            view,
            progress,
            checkpoint_every_s,
            engine,
            figures,
        )


def _report_locked(
    config: CaptureConfig,
    out: str | Path,
    text: str | None,
    task: str | None,
    limit: int,
    skip_first: bool,
    view: ModelView | None,
    progress: bool,
    checkpoint_every_s: float,
    engine: EngineConfig | None,
    figures: FigureLevel,
) -> Run:
    if view is None:
        view = load_configured(config)
    words = load_nouns(None)
    request = StageRequest(config, text, task, limit, skip_first, progress, words)
    stages = report_stages(request, view.generates)
    options = {
        "skip_first": skip_first,
        "task": task,
        "limit": limit,
        "walk_generate": WALK_GENERATE,
    }
    if text is not None:  # the default leaves earlier runs' configs as they were
        options["walk_text_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    written = registry.stage_sections()
    run = run_command(
        "report",
        config,
        out,
        options=options,
        analyse=staged(stages, progress),
        view=view,
        progress=progress,
        checkpoint_every_s=checkpoint_every_s,
        engine=engine,
        figures=figures,
        sections=("capture", *(s for name, _, _ in stages for s in written[name])),
        taps=report_taps(stages),
    )
    store_compact(run.path)  # every stage has read the interval groups: keep what is read later
    write_report(run.path)
    return open_run(run.path)


@dataclass(frozen=True)
class ReportConfig(CaptureRunConfig):
    """What ``geomlens report`` runs: ``CaptureRunConfig``'s fields, and

    Attributes:
        task: the multiple-choice task of the concept tests (None: the default task).
        limit: items of that task scored.
        skip_first: the primary view leaves position 0 out (both views are computed).
        text: the text of the walk stage (None: the packaged few-shot prompt).
        text_file: read that text from this file instead (wins over ``text``).
    """

    task: str | Path | None = None
    limit: int = CONCEPT_LIMIT
    skip_first: bool = False
    text: str | None = None
    text_file: str | Path | None = None

    command: ClassVar[str] = "report"


def run(config: ReportConfig, *, view: ModelView | None = None) -> Result:
    """``geomlens report`` (and ``geomlens.report(...)``)."""
    task = None if config.task is None else str(config.task)
    text = config.text if config.text_file is None else read_text_file(str(config.text_file))
    return config.result(
        run_report, view, text=text, task=task, limit=config.limit, skip_first=config.skip_first
    )


HELP = "every analysis on one capture, in one report.html"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_capture_options(parser)
    parser.add_argument(
        "--task", default=None, help="multiple-choice task of the concept tests (default task)"
    )
    parser.add_argument("--limit", type=int, default=40, metavar="N", help="task items scored (40)")
    parser.add_argument(
        "--skip-first",
        action="store_true",
        help="primary view leaves position 0 out (both views are shown)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--text", default=None, help="the text of the walk stage (default: a few-shot prompt)"
    )
    source.add_argument("--text-file", default=None, metavar="F", help="read that text from F")


def main(args: argparse.Namespace) -> int:
    own = ("task", "limit", "skip_first", "text", "text_file")
    return finished(run(ReportConfig.of(capture_options(args, *own))))
