"""The claims at a glance: every claim's number and 95% interval against its threshold, on
one scale, coloured by verdict, with the nearest published value marked.

Each claim compares a number with a threshold, by "number >= threshold" or "number <=
threshold" (its rule says which). On a common scale the threshold sits at 1: the number
and its interval are divided by the threshold, and for a "<=" rule inverted (threshold /
number), so that on every row the claim holds to the right of 1 and fails to the left. The
x axis is logarithmic, so a factor of two reads the same on every row. A claim without a
number, a positive threshold or a direction is left out (its row in the table says why).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

VERDICT_COLOURS = {
    "reproduced": "#2e7d32",
    "not reproduced": "#c62828",
    "inconclusive": "#ef8f00",
}
"""Marker colour by verdict (any other verdict: grey)."""

OTHER_COLOUR = "#8a8a8a"

CLIP = (1e-3, 1e3)
"""Ratios are drawn inside this range (an interval end beyond it is drawn at its edge)."""


def direction(rule: str) -> str | None:
    """ ">=" or "<=" as the rule states its comparison (None when it states neither)."""
    above, below = rule.rfind(">="), rule.rfind("<=")
    if above < 0 and below < 0:
        return None
    return ">=" if above > below else "<="


@dataclass(frozen=True)
class Row:
    """One claim on the common scale: ``ratio`` > 1 means the claim holds at that value.

    Attributes:
        label: the claim's id.
        ratio: the number over the threshold (">=") or the threshold over the number ("<=").
        low, high: its interval on the same scale (None without one).
        published: the nearest published value on the same scale (None without one).
        verdict: the claim's verdict.
        text: the hover text (claim, number, interval, threshold, verdict).
    """

    label: str
    ratio: float
    low: float | None
    high: float | None
    published: float | None
    verdict: str
    text: str


def _scaled(value: Any, threshold: float, rule: str) -> float | None:
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    inverted = threshold / value if value > 0 else math.inf
    ratio = value / threshold if rule == ">=" else inverted
    return min(max(ratio, CLIP[0]), CLIP[1])


def rows(records: Sequence[dict[str, Any]]) -> list[Row]:
    """The claims that can be drawn on the common scale, in the records' order."""
    out = []
    for r in records:
        rule, threshold = direction(str(r.get("rule", ""))), r.get("threshold")
        if rule is None or not isinstance(threshold, (int, float)) or not threshold > 0:
            continue
        ratio = _scaled(r.get("number"), threshold, rule)
        if ratio is None:
            continue
        ends = [_scaled(r.get(k), threshold, rule) for k in ("low", "high")]
        low, high = (None, None) if None in ends else sorted(ends)  # type: ignore[type-var]
        interval = "" if r.get("low") is None else f" [{r['low']:.3g}, {r['high']:.3g}]"
        out.append(
            Row(
                label=str(r["id"]),
                ratio=ratio,
                low=low,
                high=high,
                published=_scaled(r.get("published_number"), threshold, rule),
                verdict=str(r.get("verdict", "")),
                text=f"{r.get('claim', r['id'])}<br>{r['number']:.3g}{interval} "
                f"{rule} {threshold:g}: {r.get('verdict', '')}",
            )
        )
    return out


def claims_figure(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """A plotly figure (as a dict) of the claims at a glance, or None when none can be
    drawn."""
    drawn = rows(records)
    if not drawn:
        return None
    traces: list[dict[str, Any]] = []
    for verdict in dict.fromkeys(_verdict_key(r.verdict) for r in drawn):
        mine = [r for r in drawn if _verdict_key(r.verdict) == verdict]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": verdict,
                "x": [r.ratio for r in mine],
                "y": [r.label for r in mine],
                "text": [r.text for r in mine],
                "hoverinfo": "text",
                "marker": {"color": VERDICT_COLOURS.get(verdict, OTHER_COLOUR), "size": 11},
                "error_x": {
                    "type": "data",
                    "symmetric": False,
                    "array": [0 if r.high is None else r.high - r.ratio for r in mine],
                    "arrayminus": [0 if r.low is None else r.ratio - r.low for r in mine],
                    "color": VERDICT_COLOURS.get(verdict, OTHER_COLOUR),
                },
            }
        )
    published = [r for r in drawn if r.published is not None]
    if published:
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "nearest published value",
                "x": [r.published for r in published],
                "y": [r.label for r in published],
                "marker": {"symbol": "diamond-open", "color": "#1f4e99", "size": 12},
                "hoverinfo": "x+name",
            }
        )
    return {
        "data": traces,
        "layout": {
            "title": {
                "text": "Claims against their thresholds (right of 1: the claim holds)",
                "y": 0.98,
                "yanchor": "top",
            },
            "xaxis": {"type": "log", "title": {"text": "number / threshold (<= rules inverted)"}},
            "yaxis": {"autorange": "reversed", "automargin": True},
            "shapes": [
                {
                    "type": "line",
                    "x0": 1,
                    "x1": 1,
                    "xref": "x",
                    "y0": 0,
                    "y1": 1,
                    "yref": "paper",
                    "line": {"color": "#444", "dash": "dash"},
                }
            ],
            "height": 150 + 28 * len(drawn),
            "margin": {"l": 10, "r": 10, "t": 90, "b": 50},
            # above the plot: below it, the legend would cover the x axis's title
            "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        },
    }


def _verdict_key(verdict: str) -> str:
    return verdict if verdict in VERDICT_COLOURS else "not decided here"
