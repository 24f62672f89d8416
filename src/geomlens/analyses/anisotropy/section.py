"""The anisotropy section of report.html: E[cos] by layer with its top dimensions' parts
first, then the standardised cosine and the dimensions."""

from __future__ import annotations

from typing import Any

from geomlens.analyses.anisotropy.schema import anisotropy_layers, anisotropy_section
from geomlens.reporting import interactive as plots
from geomlens.reporting.html import plot, readings, table
from geomlens.reporting.section import Section
from geomlens.runs.runfolder import Run

SOURCE = (
    '<p class="paper">How far random token pairs point the same way, and which dimensions '
    "make them. After Ethayarajh, EMNLP 2019, and Timkey &amp; van Schijndel, EMNLP 2021, "
    '<a href="https://arxiv.org/abs/2109.04404">arXiv:2109.04404</a>.</p>'
)


def glance(rows: list[dict[str, Any]]) -> str:
    """The first figure: E[cos], the top-1 and top-3 dimensions' CC and the standardised
    E[cos] per layer."""
    shown = [
        {
            "layer": r["layer"],
            "pair_cosine": r["pair_cosine"],
            "top1_cc": r["top_dims"][0]["cc"] if r["top_dims"] else None,
            "top3_cc": sum(d["cc"] for d in r["top_dims"][:3]),
            "standardised_cosine": r["standardised_cosine"],
        }
        for r in rows
    ]
    figure = plots.per_layer(
        shown,
        ["pair_cosine", "top3_cc", "top1_cc", "standardised_cosine"],
        "Expected cosine of random token pairs and its largest dimensions",
        "E[cos] / CC",
        names={
            "pair_cosine": "E[cos]",
            "top3_cc": "3 largest CC_i",
            "top1_cc": "largest CC_i",
            "standardised_cosine": "E[cos] standardised",
        },
    )
    return plot(
        figure,
        "anisotropy-glance",
        "E[cos] of token pairs from different windows, the part of its 1 and 3 largest "
        "dimensions, and E[cos] after standardising each dimension, per layer",
        "Where the top-3 line sits near E[cos], a few rogue dimensions make the anisotropy.",
    )


def _dims(row: dict[str, Any]) -> str:
    return ", ".join(f"{d['dim']} ({d['cc']:.2f})" for d in row["top_dims"][:3])


def _share(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def lines(found: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """What the run shows, in words."""
    high = max(rows, key=lambda r: r["pair_cosine"])
    return [
        f"E[cos] of token pairs from different windows peaks at {high['pair_cosine']:.2f} at "
        f"layer {high['layer']}, where dimensions {_dims(high)} give most of it.",
        f"Median over layers of the 3 largest dimensions' share of E[cos]: "
        f"{_share(found.get('top3_share_median'))}; of standardised E[cos] to E[cos]: "
        f"{_share(found.get('standardised_ratio_median'))} ({found['standardised_on']}).",
    ]


def anisotropy_section_html(run: Run) -> str:
    found = anisotropy_section(run.metrics)
    rows = anisotropy_layers(run.metrics)
    if found is None or not rows:
        return readings(["Not computed in this run."])
    body = [
        [r["layer"], r["pair_cosine"], r["top3_share"], _dims(r), r["standardised_cosine"]]
        for r in rows
    ]
    return "".join(
        [
            glance(rows),
            SOURCE,
            readings(lines(found, rows)),
            table(
                ["layer", "E[cos]", "top-3 share", "top dims (CC)", "standardised E[cos]"],
                body,
                "Per layer",
                keys=["layer", "pair_cosine", "top3_share", None, "standardised_cosine"],
            ),
        ]
    )


SECTION = Section(
    "anisotropy",
    "Anisotropy and rogue dimensions",
    anisotropy_section_html,
    lambda run: anisotropy_section(run.metrics) is not None,
)
