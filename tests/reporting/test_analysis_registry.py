"""One descriptor per analysis: the registry (``analyses/registry.py``) is what the report's
stages, the commands' sections and summaries, the headline, the figures, the claims and
the page read. A toy analysis planted in the registry alone runs as a report stage, lands
in metrics.json and shows on report.html; the tables the registry replaced are derived
from it unchanged."""

from __future__ import annotations

import inspect
import json
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
import transformers
from tiny_models import small_tokenizer

from geomlens.analyses import overview, registry
from geomlens.analyses.attention import section as attention
from geomlens.analyses.base import AnalysisEntry
from geomlens.analyses.concepts import section as concepts
from geomlens.analyses.decomposition import section as decomposition
from geomlens.analyses.interventions import section as interventions
from geomlens.analyses.result import open_result
from geomlens.analyses.sphere import section as sphere
from geomlens.analyses.walk import section as walk
from geomlens.cli import main
from geomlens.commands import COMMANDS
from geomlens.reporting.section import Section

# The tables as they were written out before the registry (each analysis's facts, by hand).
OLD_COMMAND_SECTIONS = {
    "capture": ("capture",),
    "decompose": ("capture", "decomposition", "attention", "induction"),
    "sphere": ("capture", "sphere"),
    "walk": ("capture", "walk"),
    "intervene": ("capture", "interventions"),
}
OLD_STAGE_SECTIONS = {
    "decomposition": ("decomposition",),
    "attention": ("attention", "induction"),
    "sphere": ("sphere",),
    "walk": ("walk",),
    "concepts": ("concepts",),
}
OLD_SEQ2SEQ_STACKS = {
    "decomposition": "encoder",
    "attention": "encoder",
    "induction": "decoder self-attention (the encoder reads one end-of-sequence token)",
    "sphere": "encoder",
    "walk": "encoder, then the decoder (walk.decoder) and its cross-attention",
    "concepts": "the encoder reads the context (or its concept vectors); the decoder scores "
    "each choice",
}
OLD_PAGE = (
    overview.SUMMARY,
    overview.CLAIMS,
    decomposition.SECTION,
    attention.SECTION,
    sphere.SECTION,
    walk.SECTION,
    interventions.SECTION,
    concepts.SECTION,
    overview.RUN,
)
OLD_STAGES = [
    ("decomposition", "position and context"),
    ("attention", "attention in the positional basis"),
    ("sphere", "layer norm and the hypersphere"),
    ("walk", "movement through embedding space"),
    ("concepts", "concept-space tests"),
]


def test_the_registry_gives_the_tables_it_replaced() -> None:
    """The analyses of those tables give them as they were (analyses registered since, each
    one folder, are left out of the comparison)."""
    old = set(OLD_STAGE_SECTIONS)
    assert registry.command_sections() == OLD_COMMAND_SECTIONS
    assert {k: v for k, v in registry.stage_sections().items() if k in old} == OLD_STAGE_SECTIONS
    stacks = [(k, v) for k, v in registry.seq2seq_stacks().items() if k in OLD_SEQ2SEQ_STACKS]
    assert stacks == list(OLD_SEQ2SEQ_STACKS.items())
    assert registry.page_sections() == registry.REGISTRY
    assert tuple(s for s in registry.REGISTRY if s in OLD_PAGE) == OLD_PAGE
    for generates, expected in ((True, OLD_STAGES), (False, OLD_STAGES[:4])):
        stages = [(a.name, a.title) for a in registry.report_stages(generates) if a.name in old]
        assert stages == expected
    from geomlens.analyses.sphere.compute import NormTap
    from geomlens.analyses.sphere.step import IDENTITY_WINDOWS
    from geomlens.analyses.walk.refactor import AttentionTap
    from geomlens.analyses.walk.step import KERNEL_WINDOWS

    builds = registry.tap_builds(
        [a for a in registry.report_stages(generates=True) if a.name in old]
    )
    assert builds == {
        "norms": (NormTap, IDENTITY_WINDOWS),
        "attention": (AttentionTap, KERNEL_WINDOWS),
    }


def test_every_command_that_returns_a_result_has_its_summary() -> None:
    """A command without finishing lines would fail every run of it at the end."""
    returning = [
        name
        for name, command in COMMANDS.items()
        if inspect.signature(getattr(import_module(command.module), "run", len)).return_annotation
        == "Result"
    ]
    summaries = registry.command_summaries()
    assert sorted(returning) == sorted(summaries)
    assert list(summaries) == [
        "capture",
        "decompose",
        "sphere",
        "walk",
        "intervene",
        "concepts",
        "report",
    ]
    for name, lines in summaries.items():
        assert callable(lines), name
    for entry in registry.ANALYSES:  # every stage, summary and tap count is a callable
        taps = [f for spec in entry.taps.values() for f in (spec.build, spec.windows)]
        for ref in (entry.stage, entry.summary, *taps):
            assert ref is None or callable(ref), entry.name


def test_the_claims_come_in_the_registrys_order() -> None:
    """Each analysis's claims in turn: the position claims, W_QK's, the sphere's, the
    walk's, then the concept tests', as the papers' sections go."""
    from geomlens.analyses.attention.claims import attention_claims
    from geomlens.analyses.concepts.claims import concept_claims
    from geomlens.analyses.decomposition.claims import position_claims
    from geomlens.analyses.sphere.claims import sphere_claims
    from geomlens.analyses.walk.claims import walk_claims

    papers = [position_claims, attention_claims, sphere_claims, walk_claims, concept_claims]
    feeds = [a.claims for a in registry.ANALYSES if a.claims is not None]
    assert [f for f in feeds if f in papers] == papers


# ------------------------------------------------------------------ a planted toy analysis


def toy_stage(request: Any, step: Any) -> Any:
    """A report stage that writes the capture's window count and layers, as read from the
    statistics it is handed."""

    def analyse(folder: Any, view: Any, windows: Any, acc: Any) -> None:
        folder.merge_metrics("toy", {"windows": len(windows.doc_ids), "layers": list(acc.layers)})

    return analyse


TOY = AnalysisEntry(
    "toy",
    writes=("toy",),
    section=Section(
        "toy",
        "A toy analysis",
        lambda run: f"<p>the toy saw {run.metrics['toy']['windows']} windows</p>",
        present=lambda run: "toy" in run.metrics,
    ),
    stage=toy_stage,
    title="a toy analysis",
    headline=lambda metrics: (
        [("toy windows", metrics["toy"]["windows"])] if "toy" in metrics else []
    ),
)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT (an encoder: no concept stage) with a real small tokenizer."""
    import torch

    tokenizer = small_tokenizer(encoder=True)
    config = transformers.BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=512,
    )
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("toy") / "bert"
    transformers.AutoModel.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_toy_analysis_planted_in_the_registry_runs_and_shows(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The toy stands in for the stages of the real analyses (kept fast: theirs are run
    by the report tests): the report runs what the registry lists, and nothing else."""
    without_stages = tuple(a for a in registry.ANALYSES if a.stage is None)
    monkeypatch.setattr(registry, "ANALYSES", (*without_stages, TOY))
    out = tmp_path / "run"
    args = ["report", "--model", str(tiny_bert), "--contexts", "8", "--length", "16"]
    assert main([*args, "--out", str(out), "--figures", "none"]) == 0
    err = capsys.readouterr().err
    assert "[1/1] a toy analysis: done" in err
    metrics = json.loads((out / "metrics.json").read_text())
    layers = [row["layer"] for row in metrics["capture"]["layers"]]
    assert metrics["toy"] == {"windows": 8, "layers": layers}
    assert json.loads((out / "stages.json").read_text())[-1] == "toy"
    page = (out / "report.html").read_text()
    assert '<section id="toy">' in page and "<p>the toy saw 8 windows</p>" in page
    assert '<a href="#toy">A toy analysis</a>' in page
    assert not {"decomposition", "sphere", "walk"} & set(metrics)
    assert page.index('<section id="toy">') < page.index('<section id="run">')
    assert ("toy windows", 8) in open_result(out).headline()
