"""The claims at a glance: every counted claim's number and 95% interval against its
threshold, coloured by verdict, with the nearest published value marked.

The chart shows exactly the claims the summary counts (``claims.counted``): one row each,
so that its dots of each colour tally with the summary's counts. Variants and identity
checks are not counted and not drawn (the table lists them, marked so).

Each claim compares a number with a threshold ("number >= threshold", "<=", or strictly);
its row sits in one of three panels:

- **ratio** (a positive threshold): the number and its interval divided by the threshold,
  and for a "<=" rule inverted (threshold / number), so that the threshold sits at 1 and
  the claim holds to the right of it; the axis is logarithmic, so a factor of two reads
  the same on every row;
- **difference** (a threshold of 0, where no ratio exists): the number less the threshold
  (for a "<=" rule the threshold less the number): the claim holds right of 0;
- **no number**: a claim without a number (not measured, or a guard that left nothing to
  compare), or one whose rule states no comparison, drawn at one spot with its verdict.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from geomlens.reporting.claims import VERDICTS, counted, verdict_kind

VERDICT_COLOURS = {
    "reproduced": "#2e7d32",
    "not reproduced": "#c62828",
    "inconclusive": "#ef8f00",
    "not applicable": "#8a8a8a",
    "not measured": "#c4c4c4",
}
"""Marker colour by kind of verdict (``claims.VERDICTS``)."""

CLIP = (1e-3, 1e3)
"""Ratios are drawn inside this range (an interval end beyond it is drawn at its edge)."""

PANELS = {
    "ratio": "number / threshold (a '<=' rule inverted): right of 1, the claim holds",
    "difference": "number - threshold, for a threshold of 0 ('<=' rules: threshold - "
    "number): right of 0, the claim holds",
    "none": "no number on a scale (the table says why)",
}
"""The chart's panels, top to bottom, with their x axis's title."""

ROW_PX, GAP_PX = 42, 80
"""Height of a row, and of the space between panels (the upper panel's axis and title)."""

LABEL_WIDTH = 34
"""Characters per line of a row's label before it wraps."""


def direction(rule: str) -> str | None:
    """ ">=" or "<=" as the rule states its comparison ("x > 0" reads as ">="; None when
    it states none)."""
    above, below = rule.rfind(">="), rule.rfind("<=")
    if above < 0 and below < 0:
        above, below = rule.rfind(">"), rule.rfind("<")
    if above < 0 and below < 0:
        return None
    return ">=" if above > below else "<="


@dataclass(frozen=True)
class Row:
    """One counted claim in its panel: right of the panel's mark (1, or 0) it holds.

    Attributes:
        id: the claim's id.
        label: the claim in a few words (the row's name on the chart).
        panel: "ratio", "difference" or "none" (see ``PANELS``).
        x: where its number sits on its panel's scale (0 in the "none" panel).
        low, high: its interval on the same scale (None without one).
        published: the nearest published value on the same scale (None without one).
        verdict: the kind of its verdict (one of ``claims.VERDICTS``).
        text: the hover text (claim, number, interval, threshold, verdict).
    """

    id: str
    label: str
    panel: str
    x: float
    low: float | None
    high: float | None
    published: float | None
    verdict: str
    text: str


def _finite(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _scaled(value: Any, threshold: float, rule: str, panel: str) -> float | None:
    """``value`` on ``panel``'s scale for a claim of ``threshold`` and ``rule``."""
    if not _finite(value):
        return None
    if panel == "difference":
        return value - threshold if rule == ">=" else threshold - value
    inverted = threshold / value if value > 0 else math.inf
    ratio = value / threshold if rule == ">=" else inverted
    return min(max(ratio, CLIP[0]), CLIP[1])


def short_label(claim: str, others: Sequence[str] = ()) -> str:
    """A claim in a few words: its text up to its first colon, with its closing
    parenthesis kept when another claim of ``others`` starts the same way, wrapped into
    lines of about ``LABEL_WIDTH`` characters."""
    head = claim.split(": ", 1)[0]
    tail = re.search(r"\([^()]*\)$", claim)
    if tail and sum(o.split(": ", 1)[0] == head for o in others) > 1:
        head = f"{head} {tail.group(0)}"
    lines: list[str] = []
    for word in head.split():
        if lines and len(lines[-1]) + 1 + len(word) <= LABEL_WIDTH:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def _row(r: dict[str, Any], names: Sequence[str]) -> Row:
    rule, threshold, number = direction(str(r.get("rule", ""))), r.get("threshold"), r.get("number")
    verdict = verdict_kind(str(r.get("verdict", "")))
    words = str(r.get("claim", r["id"]))
    placed = rule is not None and _finite(threshold) and _finite(number) and threshold >= 0
    if not placed:
        said = "no number" if not _finite(number) else "no comparison to place it on"
        return Row(
            id=str(r["id"]),
            label=short_label(words, names),
            panel="none",
            x=0.0,
            low=None,
            high=None,
            published=None,
            verdict=verdict,
            text=f"{words}<br>{said}: {r.get('verdict', '')}",
        )
    assert rule is not None and isinstance(threshold, (int, float))
    panel = "ratio" if threshold > 0 else "difference"
    x = _scaled(number, threshold, rule, panel)
    assert x is not None
    ends = [_scaled(r.get(k), threshold, rule, panel) for k in ("low", "high")]
    low, high = (None, None) if None in ends else sorted(ends)  # type: ignore[type-var]
    interval = "" if not _finite(r.get("low")) else f" [{r['low']:.3g}, {r['high']:.3g}]"
    return Row(
        id=str(r["id"]),
        label=short_label(words, names),
        panel=panel,
        x=x,
        low=low,
        high=high,
        published=_scaled(r.get("published_number"), threshold, rule, panel),
        verdict=verdict,
        text=f"{words}<br>{number:.3g}{interval} {rule} {threshold:g}: {r.get('verdict', '')}",
    )


def rows(records: Sequence[dict[str, Any]]) -> list[Row]:
    """Every counted claim (kind "claim") as a row, in the records' order; the variants
    and identity checks are left out, as the summary leaves them out of its counts."""
    claims = [r for r in records if r.get("kind", "claim") == "claim"]
    names = [str(r.get("claim", r["id"])) for r in claims]
    return [_row(r, names) for r in claims]


def claims_figure(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """A plotly figure (as a dict) of the counted claims at a glance, or None when there
    are none. Each verdict is one legend entry, named with its count."""
    drawn = rows(records)
    if not drawn:
        return None
    count = counted(records)
    panels = [p for p in PANELS if any(r.panel == p for r in drawn)]
    axes = {p: ("" if i == 0 else str(i + 1)) for i, p in enumerate(panels)}
    traces: list[dict[str, Any]] = []
    for verdict in VERDICTS:
        first = True
        for panel in panels:
            mine = [r for r in drawn if r.verdict == verdict and r.panel == panel]
            if mine:
                traces.append(_markers(mine, verdict, count[verdict], axes[panel], first))
                first = False
    legend = True
    for panel in panels:
        published = [r for r in drawn if r.panel == panel and r.published is not None]
        if published:
            traces.append(_published(published, axes[panel], legend))
            legend = False
    layout, height = _panels_layout({p: [r for r in drawn if r.panel == p] for p in panels})
    layout.update(
        {
            "title": {
                "text": f"The {len(drawn)} counted claims against their thresholds",
                "y": 0.99,
                "yanchor": "top",
            },
            "height": height,
            "margin": {"l": 10, "r": 10, "t": 90, "b": 60},
            # above the plot: below it, the legend would cover the x axis's title
            "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        }
    )
    return {"data": traces, "layout": layout}


def _markers(mine: list[Row], verdict: str, count: int, axis: str, legend: bool) -> dict[str, Any]:
    colour = VERDICT_COLOURS[verdict]
    trace: dict[str, Any] = {
        "type": "scatter",
        "mode": "markers",
        "name": f"{verdict} ({count})",
        "legendgroup": verdict,
        "showlegend": legend,
        "x": [r.x for r in mine],
        "y": [r.label for r in mine],
        "customdata": [r.id for r in mine],
        "hovertext": [r.text for r in mine],
        "hoverinfo": "text",
        "marker": {"color": colour, "size": 11},
        "xaxis": f"x{axis}",
        "yaxis": f"y{axis}",
    }
    if all(r.panel == "none" for r in mine):  # no scale: the verdict written beside the dot
        trace.update({"mode": "markers+text", "text": [verdict] * len(mine)})
        trace["textposition"] = "middle right"
    if any(r.low is not None for r in mine):
        trace["error_x"] = {
            "type": "data",
            "symmetric": False,
            "array": [0 if r.high is None else r.high - r.x for r in mine],
            "arrayminus": [0 if r.low is None else r.x - r.low for r in mine],
            "color": colour,
        }
    return trace


def _published(mine: list[Row], axis: str, legend: bool) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "markers",
        "name": "nearest published value",
        "legendgroup": "published",
        "showlegend": legend,
        "x": [r.published for r in mine],
        "y": [r.label for r in mine],
        "marker": {"symbol": "diamond-open", "color": "#1f4e99", "size": 12},
        "hoverinfo": "x+name",
        "xaxis": f"x{axis}",
        "yaxis": f"y{axis}",
    }


def _panels_layout(by_panel: dict[str, list[Row]]) -> tuple[dict[str, Any], int]:
    """The axes of the panels, stacked top to bottom with heights by their rows, and the
    figure's height in pixels."""
    heights = {p: ROW_PX * max(len(r), 1) + 20 for p, r in by_panel.items()}
    plot_px = sum(heights.values()) + GAP_PX * (len(heights) - 1)
    layout: dict[str, Any] = {"shapes": []}
    top = plot_px
    for i, (panel, height) in enumerate(heights.items()):
        n = "" if i == 0 else str(i + 1)
        domain = [(top - height) / plot_px, top / plot_px]
        top -= height + GAP_PX
        xaxis: dict[str, Any] = {"anchor": f"y{n}", "title": {"text": PANELS[panel]}}
        if panel == "ratio":
            xaxis["type"] = "log"
        if panel == "none":
            xaxis.update({"range": [-0.1, 1.0], "showticklabels": False, "showgrid": False})
            xaxis["zeroline"] = False
        layout[f"xaxis{n}"] = xaxis
        layout[f"yaxis{n}"] = {
            "domain": domain,
            "anchor": f"x{n}",
            "autorange": "reversed",
            "automargin": True,
            "type": "category",
            "categoryorder": "array",  # the records' order, whatever the traces' order
            "categoryarray": [r.label for r in by_panel[panel]],
        }
        if panel != "none":
            mark = 1 if panel == "ratio" else 0
            layout["shapes"].append(
                {
                    "type": "line",
                    "x0": mark,
                    "x1": mark,
                    "xref": f"x{n}",
                    "y0": 0,
                    "y1": 1,
                    "yref": f"y{n} domain",
                    "line": {"color": "#444", "dash": "dash"},
                }
            )
    return layout, plot_px + 150
