"""Every analysis, read from its folder: ``ANALYSES`` holds each folder's ``entry.ENTRY``
in the order of ``analyses.FOLDERS``.

The report's stages, the metrics.json sections each command's run holds, the taps a capture
fills, the encoder-decoder stack notes, the commands' finishing lines, the headline numbers,
a run's plotly figures, the claims and the sections of report.html are all read from
``ANALYSES``; adding an analysis is its folder and its name in ``analyses.FOLDERS``.

The registry sits below the commands (which import it) and above the folders it lists; no
folder's entry, step, section, claims or figures imports it (a folder's command may, to run
the analyses its command names).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from geomlens.analyses import FOLDERS, overview
from geomlens.analyses.base import AnalysisEntry, StageRequest, Steps
from geomlens.capturing.capture import CaptureConfig
from geomlens.io.progress import Step
from geomlens.pipeline.request import RunRequest
from geomlens.pipeline.taps import TapBuild
from geomlens.reporting import glossary, page
from geomlens.reporting.claims import Claim, with_published_scores
from geomlens.reporting.saved_figures import saved_figures
from geomlens.reporting.section import Section
from geomlens.runs.runfolder import Run


def entries(folders: tuple[str, ...] = FOLDERS) -> tuple[AnalysisEntry, ...]:
    """The entries of ``folders`` (``geomlens.analyses.<folder>.entry.ENTRY``), in order."""
    return tuple(importlib.import_module(f"geomlens.analyses.{f}.entry").ENTRY for f in folders)


ANALYSES: tuple[AnalysisEntry, ...] = entries()
"""Every analysis, in the order of the page, the headline, the figures and the claims."""

for _analysis in ANALYSES:
    glossary.extend(dict(_analysis.glossary))


def report_lines(run: Run) -> list[str]:
    """The report's own finishing line (the report runs every analysis with a stage)."""
    minutes = run.manifest.get("timing", {}).get("wall_seconds", 0.0) / 60
    return [f"report written to {run.path / 'report.html'} ({minutes:.1f} min)"]


REPORT_SUMMARY = report_lines


def page_sections() -> tuple[Section, ...]:
    """The sections of report.html in page order: the summary and the claims, each
    analysis's section, the run's record."""
    own = tuple(a.section for a in ANALYSES if a.section is not None)
    return (overview.SUMMARY, overview.CLAIMS, *own, overview.RUN)


REGISTRY: tuple[Section, ...] = page_sections()
"""The page's sections as registered when the package was imported (see
``page_sections`` for the registry's current ones)."""


def report_stages(generates: bool) -> list[AnalysisEntry]:
    """The analyses the report runs as stages, in order, on a model that generates or not."""
    return [a for a in ANALYSES if a.stage is not None and (generates or not a.generating_only)]


def stage_sections() -> dict[str, tuple[str, ...]]:
    """Report stage -> the metrics.json sections it writes."""
    return {a.name: a.writes for a in ANALYSES if a.stage is not None}


def seq2seq_stacks() -> dict[str, str]:
    """metrics section -> which stack of an encoder-decoder its numbers come from."""
    return {key: text for a in ANALYSES for key, text in a.stacks.items()}


def of_command(command: str) -> list[AnalysisEntry]:
    """The analyses whose sections a run of ``command`` holds, in order."""
    return [a for a in ANALYSES if a.command == command]


def command_sections() -> dict[str, tuple[str, ...]]:
    """Capturing command -> the metrics.json sections a finished run of it holds."""
    found: dict[str, tuple[str, ...]] = {}
    for a in ANALYSES:
        if a.command and a.captures:
            found[a.command] = tuple(
                dict.fromkeys((*found.get(a.command, ("capture",)), *a.writes))
            )
    return found


def command_steps(command: str, request: StageRequest, step: Step) -> Steps:
    """The steps a run of ``command`` takes on its capture: those of its analyses, in order."""
    return Steps([a.stage(request, step) for a in of_command(command) if a.stage is not None])


def check(command: str, config: CaptureConfig) -> None:
    """Refuse a config the analyses of ``command`` cannot analyse (before the model loads)."""
    for a in of_command(command) if command != "report" else report_stages(True):
        if a.check is not None:
            a.check(command, config)


def tap_builds(chosen: list[AnalysisEntry]) -> dict[str, tuple[TapBuild, int]]:
    """The taps ``chosen`` need: name -> (its builder, the windows it reads)."""
    return {
        name: (spec.build, int(spec.windows())) for a in chosen for name, spec in a.taps.items()
    }


SummaryLines = Callable[[Any], list[str]]
"""A command's finishing lines: its run -> the lines printed."""


def command_summaries() -> dict[str, SummaryLines]:
    """Command (a manifest's "command") -> its finishing lines, for every command that
    returns a ``Result``."""
    found: dict[str, SummaryLines] = {}
    for a in ANALYSES:
        if a.command and a.summary is not None:
            found.setdefault(a.command, a.summary)
    return {**found, "report": REPORT_SUMMARY}


def summary_lines(command: str, run: Any) -> list[str]:
    """The lines ``geomlens <command>`` prints when it finishes; a run of ``--contexts
    auto`` that the wall-clock safety cut short says so last."""
    lines = command_summaries()[command](run)
    auto = (run.metrics.get("capture") or {}).get("auto_contexts") or {}
    if auto.get("cut_short"):
        lines = [*lines, f"--contexts auto: {auto['cut_short']}"]
    return lines


def headline(metrics: dict[str, Any]) -> list[tuple[str, Any]]:
    """A few numbers that say what the run found: each analysis's, in order."""
    return [pair for a in ANALYSES if a.headline is not None for pair in a.headline(metrics)]


def claims(metrics: dict[str, Any], model: dict[str, Any] | None = None) -> list[Claim]:
    """Every claim, in the order of the papers' sections (each analysis's), with the
    published numbers for this run's model or setting beside them.

    Args:
        metrics: a run's metrics.json.
        model: the manifest's "model" record (kind, position scheme, head count; None: a
            decoder).
    """
    model = model or {}
    found = [c for a in ANALYSES if a.claims is not None for c in a.claims(metrics, model)]
    return with_published_scores(found, model)


def claim_records(
    metrics: dict[str, Any], model: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The claims as metrics.json keeps them."""
    return [c.to_dict() for c in claims(metrics, model)]


def judged(metrics: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    """The metrics.json sections a finished run's numbers decide: "claims" and, where a
    paper publishes numbers for this run's model, "published" (what ``pipeline.run`` merges
    once the analyses have written theirs)."""
    found: dict[str, Any] = {"claims": claim_records(metrics, model)}
    for a in ANALYSES:
        published = None if a.published is None else a.published(metrics, model)
        if published is not None:
            found["published"] = published
    return found


def run_claims(metrics: dict[str, Any], manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The claims a run holds in metrics.json, or (a run made before they were kept) its
    claims computed now from its numbers."""
    stored = metrics.get("claims")
    return list(stored) if stored is not None else claim_records(metrics, manifest.get("model"))


def figures_of(folder: Path, metrics: dict[str, Any]) -> dict[str, Any]:
    """Every plotly figure the run folder's saved numbers and figures give, by name: each
    analysis's, then those saved as plotly JSON."""
    figures: dict[str, Any] = {}
    for analysis in ANALYSES:
        if analysis.figures is not None:
            figures.update(analysis.figures(folder, metrics))
    saved = {name: stem for a in ANALYSES for name, stem in a.saved.items()}
    figures.update(saved_figures(folder, saved))
    return figures


def run_request(command: str, config: CaptureConfig, out: str | Path, **fields: Any) -> RunRequest:
    """The pipeline's request for a run of ``command``, with what its analyses declare: the
    sections a finished run holds, their limits checked before the model loads, and the
    claims decided from their numbers (``fields``: the rest of ``RunRequest``'s)."""
    analysed = command == "report" or any(a.stage is not None for a in of_command(command))
    fields.setdefault("sections", command_sections().get(command, ("capture",)))
    auto = fields.get("auto")
    if auto is not None and auto.rule is None:  # --contexts auto: the registered rule
        rule = next((a.contexts_rule for a in ANALYSES if a.contexts_rule is not None), None)
        fields["auto"] = replace(auto, rule=rule)
    return RunRequest(
        command, config, out, judge=judged if analysed else None, check=check, **fields
    )


def write_report(path: str | Path) -> Path:
    """Write ``report.html`` of a finished run folder with every registered section."""
    return page.write_report(path, page_sections(), run_claims)
