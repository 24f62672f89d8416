"""The massive-activation section of report.html: the top-1/2/3 and median |h| by layer on
a log scale first, then what they say and where they sit."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.massive.schema import massive_layers, massive_section
from geomlens.reporting import interactive as plots
from geomlens.reporting.html import plot, readings, table
from geomlens.reporting.section import Section
from geomlens.runs.runfolder import Run

SOURCE = (
    '<p class="paper">The few hidden-state coordinates far larger than all others, where '
    "they sit and in which layers. From Sun, Chen, Kolter &amp; Liu, COLM 2024, "
    '<a href="https://arxiv.org/abs/2402.17762">arXiv:2402.17762</a>.</p>'
)


def glance(rows: list[dict[str, Any]]) -> str:
    """The section's first figure: top-1/2/3 and median |h| per layer, log scale."""
    figure = plots.per_layer(
        rows,
        ["top1_abs", "top2_abs", "top3_abs", "median_abs"],
        "Largest |h| against the median, by layer",
        "|h| (log scale)",
        log=True,
        names={
            "top1_abs": "top 1",
            "top2_abs": "top 2",
            "top3_abs": "top 3",
            "median_abs": "median",
        },
    )
    return plot(
        figure,
        "massive-glance",
        "Top-1/2/3 |h[t, i]| of a window (mean over windows) and the median |h| per layer",
        "Massive activations show as a gap of three or more decades between the top lines "
        "and the median.",
    )


def _where(row: dict[str, Any]) -> str:
    top = (row.get("largest") or [{}])[0]
    if not top:
        return "–"
    return f"dim {top['dim']}, position {top['position']} ({top['text']!r})"


def _num(x: float | None, fmt: str = ".3g") -> str:
    return "–" if x is None else format(x, fmt)


def lines(found: dict[str, Any]) -> list[str]:
    """What the run shows, in words."""
    prof, peak, carriers = found["profile"], found.get("peak") or {}, found["carriers"]
    said = [
        f"The largest ratio of a window's top-1 |h| to the median |h| is "
        f"{_num(peak.get('ratio'), ',.0f')} at layer {peak.get('layer')} (top-1 "
        f"{_num(peak.get('top1'), ',.0f')}; the median from a {found['median']})."
    ]
    if prof.get("appear") is None:
        said.append("No layer passes Sun et al.'s rule (over 100 and 1,000 x the median).")
    else:
        said.append(
            f"Sun et al.'s rule holds from layer {prof['appear']} (x{_num(prof.get('jump'))} "
            f"over the layer before) in {_num(prof.get('held'), '.0%')} of the layers from "
            f"there; it stops at layer {prof.get('vanish')}; dimensions {prof.get('dims')}."
        )
        said.append(
            f"Of {carriers['entries']} coordinates passing it among each layer's largest, "
            f"{_num(carriers['start'], '.0%')} sit at position 0 and "
            f"{_num(carriers['start_or_delimiter'], '.0%')} at position 0 or on a delimiter."
        )
    flagged = found.get("outlier_windows")
    if flagged is not None:
        both = found.get("outliers_with_massive_after_first") or []
        said.append(
            f"Windows with a massive coordinate after position 0: "
            f"{carriers['windows_after_first'] or 'none'}; the decomposition's outlier "
            f"windows (a norm 25 x the median): {flagged or 'none'}; in both: {both or 'none'}."
        )
    return said


def massive_section_html(run: Run) -> str:
    found = massive_section(run.metrics)
    if found is None:
        return readings(["Not computed in this run."])
    rows = massive_layers(run.metrics)
    body = [
        [
            r["layer"],
            r["median_abs"],
            r["top1_abs"],
            r["top1_over_median"],
            len(r["massive_dims"]),
            _where(r),
        ]
        for r in rows
    ]
    return "".join(
        [
            glance(rows),
            SOURCE,
            readings(lines(found)),
            table(
                ["layer", "median |h|", "top-1 |h|", "top-1 / median", "massive dims", "largest"],
                body,
                "Per layer",
                keys=["layer", "median_abs", "top1_abs", "top1_over_median", "massive_dims", None],
            ),
        ]
    )


SECTION = Section(
    "massive",
    "Massive activations",
    massive_section_html,
    lambda run: massive_section(run.metrics) is not None,
)
