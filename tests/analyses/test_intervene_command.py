"""``geomlens intervene`` on a tiny random Llama: one run folder with the checks' numbers, the
glance figure and the claims; report.html shows the section; bad options are refused in
one sentence; the claims follow the rule and guards from a run's numbers alone."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from tiny_models import saved_llama

from geomlens.analyses import registry
from geomlens.analyses.interventions.claims import intervention_claims
from geomlens.cli import main

ARGS = ["--contexts", "16", "--length", "16", "--batch-size", "8", "--quiet"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = saved_llama(tmp_path_factory.mktemp("tiny-llama") / "llama")
    out = folder.parent / "run"
    args = ["intervene", "--model", str(folder), *ARGS, "--held-out", "8", "--controls", "3"]
    assert main([*args, "--out", str(out)]) == 0
    return out


def metrics(run: Path) -> dict[str, Any]:
    return json.loads((run / "metrics.json").read_text())


def test_the_run_holds_every_check_against_its_controls(run: Path):
    m = metrics(run)
    section = m["interventions"]
    assert section["held_out"] == 8 and section["estimation_windows"] == 16
    assert section["held_out_disjoint"] is True
    assert section["layers"] == [1, 2] and section["loss_kind"] == "next-token"
    assert set(section["checks"]) == {
        "positional",
        "smoothness",
        "context",
        "massive",
        "final_norm",
    }
    positional = section["checks"]["positional"]
    assert len(positional["controls"]["loss"]["draws"]) == 3
    arm = positional["arms"]["positional"]
    assert arm["loss"]["n"] == 8 and arm["loss"]["low"] <= arm["loss"]["high"]
    assert set(section["checks"]["smoothness"]["arms"]) == {"low_frequency", "high_frequency"}
    assert section["checks"]["final_norm"]["detail"] == {"bias": False, "kind": "rmsnorm"}
    assert (run / "figures" / "interventions_glance.png").is_file()
    ids = {c["id"] for c in m["claims"]}
    assert {"interventions.positional_neighbour", "interventions.final_norm_loss"} <= ids
    assert section["base"]["attention_bins"]["0"] > 0


def test_the_page_shows_the_section(run: Path):
    html = registry.write_report(run).read_text()
    assert '<section id="interventions">' in html
    assert "held-out windows" in html


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--checks", "position"], "--checks takes"),
        (["--held-out", "0"], "--held-out must be at least 1"),
    ],
)
def test_bad_options_are_refused_in_one_sentence(extra, message, tmp_path, capsys):
    args = ["intervene", "--model", "minilm-l6", *ARGS, *extra, "--out", str(tmp_path / "x")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def _section(effect: float, low: float, high: float, held: int = 16, n: int = 8) -> dict:
    spread = {"median": 0.1, "p05": 0.0, "p95": 0.2, "draws": [0.1] * n}
    arm = {
        "loss": {"value": effect, "low": low, "high": high, "n": held},
        "neighbour": {"value": -effect, "low": -high, "high": -low, "n": held},
    }
    near = {"median": -0.1, "p05": -0.2, "p95": 0.0, "draws": [-0.1] * n}
    record = {"n_controls": n, "controls": {"loss": spread, "neighbour": near}, "arms": {}}
    positional = copy.deepcopy(record)
    positional["arms"]["positional"] = arm
    return {
        "interventions": {
            "held_out": held,
            "trained_head": True,
            "base": {"loss": {"value": 3.0}},
            "checks": {"positional": positional},
        }
    }


def _verdict(metrics: dict, claim_id: str) -> Any:
    return next(c for c in intervention_claims(metrics, {}) if c.id == claim_id)


def test_the_rule_reproduces_a_clear_effect_and_guards_a_covered_or_thin_one():
    clear = _verdict(_section(0.6, 0.5, 0.7), "interventions.positional_loss")
    assert clear.verdict == "reproduced" and clear.threshold == pytest.approx(0.2)
    small = _verdict(_section(0.15, 0.1, 0.19), "interventions.positional_loss")
    assert small.verdict == "not reproduced"
    covered = _verdict(_section(0.3, 0.1, 0.5), "interventions.positional_loss")
    assert covered.verdict == "inconclusive" and covered.guard == "interval"
    thin = _verdict(_section(0.6, 0.5, 0.7, held=4), "interventions.positional_neighbour")
    assert thin.verdict == "inconclusive" and thin.guard == "windows"
    few = _verdict(_section(0.6, 0.5, 0.7, n=2), "interventions.positional_neighbour")
    assert few.verdict == "inconclusive" and few.guard == "controls"
    missing = _verdict(_section(0.6, 0.5, 0.7), "interventions.massive_zero")
    assert missing.verdict.startswith("not measured")
    untrained = _section(0.6, 0.5, 0.7)
    untrained["interventions"]["trained_head"] = False
    assert _verdict(untrained, "interventions.positional_loss").verdict.startswith("not applicable")
    saturated = _section(0.6, 0.5, 0.7)
    controls = saturated["interventions"]["checks"]["positional"]["controls"]
    controls["loss"] = {**controls["loss"], "median": 4.0}
    broken = _verdict(saturated, "interventions.positional_neighbour")
    assert broken.verdict == "inconclusive" and broken.guard == "saturated"
    assert intervention_claims({}, {}) == []
