"""What an analysis is, in one place: one ``AnalysisEntry`` per analysis, in page order.

The report's stages, the metrics.json sections each command's run holds, the taps the
report fills, the encoder-decoder stack notes, the commands' finishing lines, the
headline numbers, a run's plotly figures, the claims and the sections of report.html are
all read from ``ANALYSES``; adding an analysis with its own report section is its module,
its figures, its page section (``reporting/sections/``) and one entry here.

The registry sits below the pipeline and the commands (which import it) and above what it
lists: the analysis steps (``reporting/stages/``), the page sections, the claims, headlines,
figures and summaries; none of those imports it. What needs every analysis at once (the
claims of a run, its figures, its headline) is read through the functions here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geomlens.reporting import claims as paper_claims
from geomlens.reporting import headlines, run_figures, summaries
from geomlens.reporting.section import Section
from geomlens.reporting.sections import attention, concepts, decomposition, overview, sphere, walk
from geomlens.reporting.stages import StageFactory
from geomlens.reporting.stages import concepts as concepts_stage
from geomlens.reporting.stages import decomposition as decomposition_stage
from geomlens.reporting.stages import sphere as sphere_stage
from geomlens.reporting.stages import walk as walk_stage

TapWindows = Callable[[], int]
"""A tap's window count, read when the run starts (tests lower the module constants)."""


@dataclass(frozen=True)
class AnalysisEntry:
    """One analysis, as every part of the package that lists analyses sees it.

    Attributes:
        name: its name; its report stage's name (``stages.json``) when it has one.
        writes: the metrics.json sections it writes (its stage is finished only with all).
        section: its section of report.html (None: not on the page).
        stage: its report stage, ``(request, step) -> Analysis`` (``reporting/stages/``; None:
            the report runs it inside another's stage, or not).
        title: the stage's line in the report's progress.
        generating_only: the report runs its stage only on models that generate.
        taps: tap keyword of ``analyses.taps.tap_factory`` -> the windows it fills, for the
            report's capture.
        command: the command that runs it on its own ("" none).
        captures: that command runs a capture (its run also holds the "capture" section).
        summary: the lines that command prints when it finishes, ``run -> list[str]``.
        headline: metrics -> a few (label, value) pairs that say what it found.
        figures: (run folder, metrics) -> its plotly figures by name.
        claims: (metrics, model record) -> the papers' claims its numbers decide.
        stacks: metrics section -> which stack of an encoder-decoder its numbers come from.
    """

    name: str
    writes: tuple[str, ...] = ()
    section: Section | None = None
    stage: StageFactory | None = None
    title: str = ""
    generating_only: bool = False
    taps: Mapping[str, TapWindows] = field(default_factory=dict)
    command: str = ""
    captures: bool = True
    summary: Callable[[Any], list[str]] | None = None
    headline: Callable[[dict[str, Any]], list[tuple[str, Any]]] | None = None
    figures: Callable[[Path, dict[str, Any]], dict[str, Any]] | None = None
    claims: Callable[[dict[str, Any], dict[str, Any]], list[paper_claims.Claim]] | None = None
    stacks: Mapping[str, str] = field(default_factory=dict)


ANALYSES: tuple[AnalysisEntry, ...] = (
    AnalysisEntry(
        "capture",
        writes=("capture",),
        command="capture",
        summary=summaries.capture_lines,
        headline=headlines.capture_headline,
        figures=run_figures.capture_run_figures,
    ),
    AnalysisEntry(
        "decomposition",
        writes=("decomposition", "attention", "induction"),
        section=decomposition.SECTION,
        stage=decomposition_stage.decomposition_stage,
        title="position and context",
        command="decompose",
        summary=summaries.decompose_lines,
        headline=headlines.decomposition_headline,
        figures=run_figures.decomposition_run_figures,
        claims=paper_claims.position_claims,
        stacks={"decomposition": "encoder"},
    ),
    AnalysisEntry(
        "attention",  # its numbers are written by the decomposition's stage
        section=attention.SECTION,
        figures=run_figures.attention_run_figures,
        stacks={
            "attention": "encoder",
            "induction": "decoder self-attention (the encoder reads one end-of-sequence token)",
        },
    ),
    AnalysisEntry(
        "sphere",
        writes=("sphere",),
        section=sphere.SECTION,
        stage=sphere_stage.sphere_stage,
        title="layer norm and the hypersphere",
        taps={"norms": sphere_stage.identity_windows},
        command="sphere",
        summary=summaries.sphere_lines,
        headline=headlines.sphere_headline,
        claims=paper_claims.sphere_claims,
        stacks={"sphere": "encoder"},
    ),
    AnalysisEntry(
        "walk",
        writes=("walk",),
        section=walk.SECTION,
        stage=walk_stage.walk_stage,
        title="movement through embedding space",
        taps={"attention": walk_stage.kernel_windows},
        command="walk",
        summary=summaries.walk_lines,
        headline=headlines.walk_headline,
        figures=run_figures.walk_run_figures,
        claims=paper_claims.walk_claims,
        stacks={"walk": "encoder, then the decoder (walk.decoder) and its cross-attention"},
    ),
    AnalysisEntry(
        "concepts",
        writes=("concepts",),
        section=concepts.SECTION,
        stage=concepts_stage.concepts_stage,
        title="concept-space tests",
        generating_only=True,
        command="concepts",
        captures=False,  # it scores a task's items; no corpus is captured
        summary=summaries.concepts_lines,
        headline=headlines.concepts_headline,
        figures=run_figures.concepts_run_figures,
        claims=paper_claims.concept_claims,
        stacks={
            "concepts": "the encoder reads the context (or its concept vectors); the decoder "
            "scores each choice"
        },
    ),
)
"""Every analysis, in the order of the page, the headline, the figures and the claims."""

REPORT_SUMMARY = summaries.report_lines
"""The report's own finishing line (the report runs every analysis with a stage)."""


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


def command_sections() -> dict[str, tuple[str, ...]]:
    """Capturing command -> the metrics.json sections a finished run of it holds."""
    return {
        a.command: tuple(dict.fromkeys(("capture", *a.writes)))
        for a in ANALYSES
        if a.command and a.captures
    }


def tap_windows(entries: list[AnalysisEntry]) -> dict[str, int]:
    """The taps ``entries`` need: ``tap_factory``'s keyword -> windows."""
    return {key: int(windows()) for a in entries for key, windows in a.taps.items()}


SummaryLines = Callable[[Any], list[str]]
"""A command's finishing lines: its run -> the lines printed."""


def command_summaries() -> dict[str, SummaryLines]:
    """Command (a manifest's "command") -> its finishing lines, for every command that
    returns a ``Result``."""
    found = {a.command: a.summary for a in ANALYSES if a.command and a.summary is not None}
    return {**found, "report": REPORT_SUMMARY}


def summary_lines(command: str, run: Any) -> list[str]:
    """The lines ``geomlens <command>`` prints when it finishes."""
    return command_summaries()[command](run)


def headline(metrics: dict[str, Any]) -> list[tuple[str, Any]]:
    """A few numbers that say what the run found: each analysis's, in order."""
    return [pair for a in ANALYSES if a.headline is not None for pair in a.headline(metrics)]


def claims(
    metrics: dict[str, Any], model: dict[str, Any] | None = None
) -> list[paper_claims.Claim]:
    """Every claim, in the order of the papers' sections (each analysis's), with the
    published numbers for this run's model or setting beside them.

    Args:
        metrics: a run's metrics.json.
        model: the manifest's "model" record (kind, position scheme, head count; None: a
            decoder).
    """
    model = model or {}
    found = [c for a in ANALYSES if a.claims is not None for c in a.claims(metrics, model)]
    return paper_claims.with_published_scores(found, model)


def claim_records(
    metrics: dict[str, Any], model: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The claims as metrics.json keeps them."""
    return [c.to_dict() for c in claims(metrics, model)]


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
    figures.update(run_figures.saved_figures(folder))
    return figures
