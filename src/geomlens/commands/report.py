"""``geomlens report``: every analysis on one capture, then one self-contained report.html.

One capture pass (with second moments) feeds the position/context decomposition and,
from its first windows, the norm statistics of the sphere stage and the position kernels
and refactoring check of the walk stage (see ``capturing.taps``); the stages
(``analyses/staged.py``) read those, the same windows and the same loaded model.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from geomlens.analyses import registry
from geomlens.analyses.base import StageRequest
from geomlens.analyses.concepts.step import DEFAULT_TASK, default_task
from geomlens.analyses.result import Result, run_result
from geomlens.analyses.sphere.step import DEFAULT_PROMPT, check_prompt, load_nouns
from geomlens.analyses.staged import Staged, report_stages, report_taps
from geomlens.analyses.walk.step import (
    WALK_GENERATE,
    check_generate,
    encode_text,
    fitted_default_text,
    read_text_file,
)
from geomlens.capturing.capture import CaptureConfig, check_length, resolve_layers
from geomlens.config.figure_level import FigureLevel
from geomlens.config.options import (
    add_capture_options,
    add_options,
    command_option,
    command_options,
    finished,
)
from geomlens.config.run import CaptureRunConfig
from geomlens.engines import EngineConfig
from geomlens.errors import GeomlensError
from geomlens.io.files import utf8_text, write_text_atomic
from geomlens.models.facts import check_before_loading
from geomlens.models.loading import load_configured
from geomlens.models.view import ModelView
from geomlens.pipeline import run as pipeline
from geomlens.pipeline.request import AutoContexts
from geomlens.runs import lifecycle
from geomlens.runs.runfolder import Run, open_run
from geomlens.runs.stored import store_compact

CONCEPT_LIMIT = 40
"""Items of the multiple-choice task scored in the report (a small default slice)."""


def preflight(
    view: ModelView, config: CaptureConfig, text: str | None, task: str | None, limit: int
) -> None:
    """Every check the stages make against the model's positions, made before the capture
    (and before the run folder is made): the windows' length and layers, the walk text with
    its generated tokens, the sphere's prompt, and each concept item's context with its
    longest answer."""
    check_length(view, config.length)
    resolve_layers(view, config.layers)
    generate = WALK_GENERATE if view.generates else 0
    # the packaged text is cut to the model's positions; a given text is refused instead
    walked = text if text is not None else fitted_default_text(view, generate)[0]
    try:
        ids, _ = encode_text(view, walked)
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
    check_generate(view, len(ids), generate)
    check_prompt(view, DEFAULT_PROMPT)
    if view.generates:
        from geomlens.analyses.concepts.baseline import prepare
        from geomlens.analyses.concepts.choice import report_tasks
        from geomlens.analyses.concepts.tasks import load_task

        # the given task, or every task the report's default may choose
        specs = [task] if task else [spec for _, spec in report_tasks() if spec is not None]
        for spec in specs or [default_task(DEFAULT_TASK)]:
            loaded = load_task(spec)
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
    auto: AutoContexts | None = None,
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
        auto: ``--contexts auto`` (None: ``config.contexts`` windows).
    """
    if limit < 1:
        raise GeomlensError(f"--limit must be at least 1 (got {limit}).")
    if task is not None:  # a bad task file is reported now, not after the capture
        from geomlens.analyses.concepts.tasks import load_task

        load_task(task)
    config = dataclasses.replace(config, second_moment=True)
    config.validate()
    registry.check("report", config)
    if view is None:  # the files' facts first: a refusal comes before the weights load
        check_before_loading(
            config.model, lambda v: preflight(v, config, text, task, limit), config.revision
        )
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
            auto,
        )


def _report_locked(
    config: CaptureConfig,
    out: str | Path,
    text: str | None,
    task: str | None,
    limit: int,
    skip_first: bool,
    view: ModelView,
    progress: bool,
    checkpoint_every_s: float,
    engine: EngineConfig | None,
    figures: FigureLevel,
    auto: AutoContexts | None = None,
) -> Run:
    words = load_nouns(None)
    stage_request = StageRequest(config, text, task, limit, skip_first, progress, words)
    stages = report_stages(stage_request, view.generates)
    options = {
        "skip_first": skip_first,
        "task": task,
        "limit": limit,
        "walk_generate": WALK_GENERATE,
    }
    if text is not None:  # the default leaves earlier runs' configs as they were
        options["walk_text_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    written = registry.stage_sections()
    request = registry.run_request(
        "report",
        config,
        out,
        options=options,
        analysis=Staged(stages, progress),
        view=view,
        progress=progress,
        checkpoint_every_s=checkpoint_every_s,
        engine=engine or EngineConfig(),
        figures=figures,
        sections=("capture", *(s for stage in stages for s in written[stage.name])),
        taps=report_taps(stages),
        checked=True,  # validated and checked above, before the model loaded
        auto=auto,
    )
    kept = numbers_to_keep(Path(out), figures)
    run = pipeline.run(request)
    if kept is not None:  # only the figures were drawn again: the first run's numbers stand
        write_text_atomic(run.path / "metrics.json", kept)
    store_compact(run.path)  # every stage has read the interval groups: keep what is read later
    registry.write_report(run.path)
    return open_run(run.path)


def numbers_to_keep(out: Path, figures: FigureLevel) -> str | None:
    """metrics.json of a finished report in ``out`` that drew other figures than
    ``figures`` (None otherwise). Its stages run again to draw them, on statistics
    compacted when it finished (float32, without the interval groups), which would give
    plain numbers without their intervals: the first run's numbers are kept instead."""
    try:
        manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        if manifest.get("status") != "complete" or pipeline.figures_drawn(manifest) == figures:
            return None
        return (out / "metrics.json").read_text(encoding="utf-8")
    except (OSError, ValueError, AttributeError):  # no finished run there: nothing kept
        return None


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

    task: str | Path | None = command_option(
        None, help="multiple-choice task of the concept tests (default task)"
    )
    limit: int = command_option(
        CONCEPT_LIMIT, int, metavar="N", help=f"task items scored ({CONCEPT_LIMIT})"
    )
    skip_first: bool = command_option(
        False, help="primary view leaves position 0 out (both views are shown)"
    )
    text: str | None = command_option(
        None, group="source", help="the text of the walk stage (default: a few-shot prompt)"
    )
    text_file: str | Path | None = command_option(
        None, group="source", metavar="F", help="read that text from F"
    )

    command: ClassVar[str] = "report"


def run(config: ReportConfig, *, view: ModelView | None = None) -> Result:
    """``geomlens report`` (and ``geomlens.report(...)``)."""
    task = None if config.task is None else str(config.task)
    text = config.text if config.text_file is None else read_text_file(str(config.text_file))
    if text is not None:
        utf8_text(text, "--text", "give UTF-8 text, or save it in a UTF-8 file for --text-file")
    return run_result(
        config,
        run_report,
        view,
        text=text,
        task=task,
        limit=config.limit,
        skip_first=config.skip_first,
    )


HELP = "every analysis on one capture, in one report.html"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The capture options, then the report's own (``ReportConfig``'s)."""
    add_capture_options(parser)
    add_options(parser, ReportConfig)


def main(args: argparse.Namespace) -> int:
    return finished(run(ReportConfig.of(command_options(args, ReportConfig))))
