"""The summary counts every claim: reproduced, not reproduced, inconclusive, not applicable
and not measured, the five summing to the number of claims; variants and identity checks
are listed apart."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from geomlens.analyses.overview import summary_section
from geomlens.reporting.claims import VERDICTS, count_sentence, counted, verdict_kind
from geomlens.runs.runfolder import Run

EVERY = (
    "reproduced",
    "not reproduced",
    "inconclusive",
    "not applicable: Singh studies decoder-only and encoder-decoder models",
    "not measured: no topic labels",
)


def record(i: int, verdict: str, kind: str = "claim") -> dict:
    return {"id": f"c{i}", "verdict": verdict, "kind": kind}


def test_the_counts_sum_to_the_claims_for_every_mix_of_verdicts() -> None:
    for n in range(4):
        for mix in itertools.product(EVERY, repeat=n):
            records = [record(i, v) for i, v in enumerate(mix)]
            records.append(record(99, EVERY[0], "variant"))  # listed apart, not counted
            count = counted(records)
            assert count["claims"] == n
            assert sum(count[k] for k in VERDICTS) == n
            for kind in VERDICTS:
                assert count[kind] == sum(verdict_kind(v) == kind for v in mix)
            assert count["apart"] == ["c99"]


def test_the_sentence_names_every_kind_even_at_zero() -> None:
    verdicts = ["reproduced"] * 2 + ["not reproduced"] + ["inconclusive"] * 7
    count = counted([record(i, v) for i, v in enumerate(verdicts)])
    assert count_sentence(count) == (
        "10 claims: 2 reproduced, 1 not reproduced, 7 inconclusive, 0 not applicable, "
        "0 not measured"
    )


def test_a_verdict_of_no_known_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown verdict"):
        counted([record(0, "reproduced-ish")])
    assert verdict_kind("not applicable: outside its scope") == "not applicable"


def test_the_page_summary_counts_the_claim_not_reproduced(tmp_path: Path) -> None:
    verdicts = ["reproduced"] * 2 + ["not reproduced"] + ["inconclusive"] * 7
    run = Run(tmp_path)
    run.__dict__["metrics"] = {
        "claims": [record(i, v) for i, v in enumerate(verdicts)]
        + [record(20, "reproduced", "identity")]
    }
    run.__dict__["manifest"] = {
        "config": {"model": "m", "corpus": "c", "contexts": 16, "length": 32},
        "model": {"name": "m", "family": "llama", "n_layers": 2, "d_model": 8},
    }
    html = summary_section(run)
    assert "10 claims: 2 reproduced, 1 not reproduced, 7 inconclusive, 0 not applicable" in html
    assert "1 variants and identity checks are listed apart" in html


def test_the_page_summary_says_which_tier_the_model_is_read_in(tmp_path: Path) -> None:
    run = Run(tmp_path)
    run.__dict__["metrics"] = {"claims": []}
    model = {"name": "m", "family": "deepseek_v3", "n_layers": 2, "d_model": 8}
    config = {"model": "m", "corpus": "c", "contexts": 16, "length": 32}
    run.__dict__["manifest"] = {"config": config, "model": {**model, "tier": "hidden-state"}}
    assert "hidden-state tier" in summary_section(run)
    run.__dict__["manifest"] = {"config": config, "model": model}  # a run from before tiers
    assert "full tier" in summary_section(run)
