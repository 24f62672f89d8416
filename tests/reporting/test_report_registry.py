"""The report page lays out whatever is registered, and the registry names every section."""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path

from geomlens.analyses import FOLDERS, overview, registry
from geomlens.analyses.base import AnalysisEntry
from geomlens.reporting import page
from geomlens.reporting.section import Section
from geomlens.runs.runfolder import open_run


def test_every_section_module_is_registered_once() -> None:
    """Each folder's section module (and the shared overview) declares the sections the
    registry lists, each once."""
    modules = [overview]
    for folder in FOLDERS:
        found = importlib.util.find_spec(f"geomlens.analyses.{folder}.section")
        if found is not None:
            modules.append(importlib.import_module(f"geomlens.analyses.{folder}.section"))
    declared = [v for module in modules for v in vars(module).values() if isinstance(v, Section)]
    assert {id(s) for s in declared} == {id(s) for s in registry.REGISTRY}
    anchors = [s.anchor for s in registry.REGISTRY]
    assert len(anchors) == len(set(anchors))
    keys = [k for s in registry.REGISTRY for k in s.captions]
    assert len(keys) == len(set(keys))  # each figure has one owner


def _minimal_run(tmp_path: Path) -> Path:
    config = {"model": "m", "corpus": "bbc", "contexts": 2, "length": 4, "seed": 0}
    (tmp_path / "manifest.json").write_text(
        json.dumps({"command": "report", "config": config, "status": "complete"})
    )
    (tmp_path / "metrics.json").write_text(json.dumps({"extra": {"value": 42}}))
    return tmp_path


def test_a_registered_section_appears_on_the_page_without_touching_it(
    tmp_path: Path, monkeypatch
) -> None:
    extra = Section(
        "extra",
        "An extra analysis",
        lambda run: f"<p>value {run.metrics['extra']['value']}</p>",
        present=lambda run: "extra" in run.metrics,
    )
    planted = AnalysisEntry("extra", section=extra)
    monkeypatch.setattr(registry, "ANALYSES", (*registry.ANALYSES, planted))
    run = open_run(_minimal_run(tmp_path))
    html = page.build_page(run, registry.page_sections(), registry.run_claims)
    assert '<section id="extra">' in html and "<p>value 42</p>" in html
    assert '<a href="#extra">An extra analysis</a>' in html
    # sections whose numbers the run lacks are left out
    assert '<section id="sphere">' not in html and '<section id="claims">' in html
