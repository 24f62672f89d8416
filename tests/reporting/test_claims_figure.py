"""The claims-at-a-glance figure: one scale on which every claim holds right of 1."""

from __future__ import annotations

import math

import pytest

from geomlens.reporting.claims_figure import claims_figure, direction, rows


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


def test_a_claim_holds_right_of_one_whatever_its_direction():
    found = rows(
        [
            record("above.holds", 0.8, 0.5, "x >= 0.5", "reproduced", 0.6, 1.0),
            record("above.fails", 0.25, 0.5, "x >= 0.5", "not reproduced"),
            record("below.holds", 5.0, 20.0, "rank <= 20", "reproduced", 4.0, 10.0),
            record("below.fails", 40.0, 20.0, "rank <= 20", "not reproduced"),
        ]
    )
    by = {r.label: r for r in found}
    assert by["above.holds"].ratio == pytest.approx(1.6) and by["above.holds"].ratio > 1
    assert (by["above.holds"].low, by["above.holds"].high) == pytest.approx((1.2, 2.0))
    assert by["above.fails"].ratio == pytest.approx(0.5)
    assert by["below.holds"].ratio == pytest.approx(4.0)
    # a "<=" interval is inverted, and its ends swap
    assert (by["below.holds"].low, by["below.holds"].high) == pytest.approx((2.0, 5.0))
    assert by["below.fails"].ratio == pytest.approx(0.5)


def test_claims_that_cannot_be_placed_are_left_out():
    found = rows(
        [
            record("no.number", None, 0.5, "x >= 0.5", "not measured: no groups"),
            record("no.threshold", 0.3, None, "x >= ?", "not applicable: encoder"),
            record("zero.threshold", 0.3, 0.0, "x >= 0", "reproduced"),
            record("no.direction", 0.3, 0.5, "lists differ", "not reproduced"),
            record("nan", math.nan, 0.5, "x >= 0.5", "inconclusive"),
        ]
    )
    assert found == []
    assert claims_figure([]) is None


def test_the_figure_colours_by_verdict_and_marks_published_values():
    figure = claims_figure(
        [
            record("a", 0.8, 0.5, "x >= 0.5", "reproduced", 0.6, 1.0, published_number=0.7),
            record("b", 0.45, 0.5, "x >= 0.5", "inconclusive", 0.3, 0.6),
            record("c", 0.1, 0.5, "x >= 0.5", "not reproduced"),
        ]
    )
    assert figure is not None
    names = [t["name"] for t in figure["data"]]
    assert names == ["reproduced", "inconclusive", "not reproduced", "nearest published value"]
    colours = {t["name"]: t["marker"]["color"] for t in figure["data"]}
    assert len(set(colours.values())) == 4
    published = figure["data"][-1]
    assert published["y"] == ["a"] and published["x"] == pytest.approx([1.4])
    assert figure["layout"]["xaxis"]["type"] == "log"
