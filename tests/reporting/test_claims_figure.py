"""The claims-at-a-glance figure: every counted claim, on a scale where it holds right of\nthe threshold's mark, and nothing else."""

from __future__ import annotations

import math

import pytest

from geomlens.reporting.claims import VERDICTS, counted
from geomlens.reporting.claims_figure import claims_figure, direction, rows, short_label


def record(id_, number, threshold, rule, verdict, low=None, high=None, **extra):
    return {
        "id": id_,
        "claim": id_,
        "number": number,
        "threshold": threshold,
        "rule": rule,
        "verdict": verdict,
        "low": low,
        "high": high,
        **extra,
    }


def test_direction_is_read_from_the_rule():
    assert direction("median ARI >= 0.1 and within > between") == ">="
    assert direction("max |cos| <= 2 x the random level") == "<="
    assert direction("the two lists differ") is None
    assert direction("with gamma/beta minus without > 0") == ">="


def test_a_claim_holds_right_of_one_whatever_its_direction():
    found = rows(
        [
            record("above.holds", 0.8, 0.5, "x >= 0.5", "reproduced", 0.6, 1.0),
            record("above.fails", 0.25, 0.5, "x >= 0.5", "not reproduced"),
            record("below.holds", 5.0, 20.0, "rank <= 20", "reproduced", 4.0, 10.0),
            record("below.fails", 40.0, 20.0, "rank <= 20", "not reproduced"),
        ]
    )
    by = {r.id: r for r in found}
    assert {r.panel for r in found} == {"ratio"}
    assert by["above.holds"].x == pytest.approx(1.6) and by["above.holds"].x > 1
    assert (by["above.holds"].low, by["above.holds"].high) == pytest.approx((1.2, 2.0))
    assert by["above.fails"].x == pytest.approx(0.5)
    assert by["below.holds"].x == pytest.approx(4.0)
    # a "<=" interval is inverted, and its ends swap
    assert (by["below.holds"].low, by["below.holds"].high) == pytest.approx((2.0, 5.0))
    assert by["below.fails"].x == pytest.approx(0.5)


def test_a_threshold_of_zero_is_placed_by_its_difference():
    """Molina's gamma/beta claim ("with minus without > 0"): no ratio exists at 0, so its
    row sits on the difference panel, right of 0 where the claim holds."""
    found = rows(
        [
            record("shift.holds", 0.3, 0.0, "with minus without > 0", "reproduced", 0.1, 0.5),
            record("shift.fails", -0.2, 0.0, "with minus without > 0", "not reproduced"),
            record("less.holds", -0.2, 0.0, "drift <= 0", "reproduced"),
        ]
    )
    assert [r.panel for r in found] == ["difference"] * 3
    assert [r.x for r in found] == pytest.approx([0.3, -0.2, 0.2])
    assert (found[0].low, found[0].high) == pytest.approx((0.1, 0.5))


def test_every_counted_claim_has_a_row_and_identities_have_none():
    """A claim without a number or without a comparison still has its row (the "none"
    panel, its verdict beside it); variants and identity checks are not counted, so
    they are not drawn."""
    found = rows(
        [
            record("no.number", None, 0.5, "x >= 0.5", "not measured: no groups"),
            record("no.threshold", 0.3, None, "x >= ?", "not applicable: encoder"),
            record("no.direction", 0.3, 0.5, "lists differ", "not reproduced"),
            record("nan", math.nan, 0.5, "x >= 0.5", "inconclusive"),
            record("an.identity", 1e-7, 1e-4, "err <= 1e-4", "reproduced", kind="identity"),
            record("a.variant", 0.9, 0.5, "x >= 0.5", "reproduced", kind="variant"),
        ]
    )
    assert [r.id for r in found] == ["no.number", "no.threshold", "no.direction", "nan"]
    assert {r.panel for r in found} == {"none"}
    kinds = ["not measured", "not applicable", "not reproduced", "inconclusive"]
    assert [r.verdict for r in found] == kinds
    assert claims_figure([]) is None
    assert (
        claims_figure([record("i", 1e-7, 1e-4, "e <= 1e-4", "reproduced", kind="identity")]) is None
    )


def test_the_legend_counts_are_the_summarys_counts():
    records = [
        record("a", 0.8, 0.5, "x >= 0.5", "reproduced", 0.6, 1.0, published_number=0.7),
        record("b", 0.45, 0.5, "x >= 0.5", "inconclusive", 0.3, 0.6),
        record("c", 0.1, 0.5, "x >= 0.5", "not reproduced"),
        record("d", 0.0, 0.0, "shift > 0", "not reproduced"),
        record("e", None, 0.5, "x >= 0.5", "inconclusive"),
        record("f", 1e-7, 1e-4, "err <= 1e-4", "reproduced", kind="identity"),
    ]
    figure = claims_figure(records)
    assert figure is not None
    drawn: dict[str, int] = {}
    for trace in figure["data"]:
        if trace["legendgroup"] != "published":
            drawn[trace["legendgroup"]] = drawn.get(trace["legendgroup"], 0) + len(trace["y"])
    count = counted(records)
    assert drawn == {k: count[k] for k in VERDICTS if count[k]}
    assert drawn == {"reproduced": 1, "not reproduced": 2, "inconclusive": 2}
    names = [t["name"] for t in figure["data"] if t["showlegend"]]
    assert names == [
        "reproduced (1)",
        "not reproduced (2)",
        "inconclusive (2)",
        "nearest published value",
    ]
    colours = {t["legendgroup"]: t["marker"]["color"] for t in figure["data"]}
    assert len(set(colours.values())) == 4
    published = next(t for t in figure["data"] if t["legendgroup"] == "published")
    assert published["x"] == pytest.approx([1.4])
    layout = figure["layout"]
    assert layout["xaxis"]["type"] == "log" and "type" not in layout["xaxis2"]
    assert layout["yaxis"]["categoryarray"] == ["a", "b", "c"]
    assert layout["yaxis3"]["categoryarray"] == ["e"]


def test_a_row_reads_as_words_and_two_claims_alike_keep_apart():
    claim = "Concept vectors stand in for the text: the model keeps a share (pyramidal test)"
    other = claim.replace("pyramidal", "similarity")
    assert short_label(claim, [claim, other]).replace("<br>", " ") == (
        "Concept vectors stand in for the text (pyramidal test)"
    )
    assert short_label("The positional part is low-rank", []) == "The positional part is low-rank"
    assert max(len(line) for line in short_label(claim, [claim, other]).split("<br>")) <= 34
