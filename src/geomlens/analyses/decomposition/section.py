"""The position and context section (Song & Zhong): shares, ranks, frequency, topics."""

from __future__ import annotations

import json
from typing import Any

from geomlens.analyses.decomposition.schema import skip_first_intervals, skip_first_layers
from geomlens.io.runfolder import Run
from geomlens.reporting import interactive as plots
from geomlens.reporting.html import number, paper, plot, readings, table
from geomlens.reporting.section import Section, pct


def decomposition_readings(m: dict[str, Any]) -> list[str]:
    dec = m.get("decomposition")
    if not dec:
        return []
    rows = skip_first_layers(m)
    lines = []
    if rows:
        mid = rows[len(rows) // 2]
        top = max(rows, key=lambda r: r["share_pos"])
        lines.append(
            f"Without position 0, the positional part explains {pct(mid['share_pos'])} of the "
            f"variance at layer {mid['layer']} (ScreeNOT rank {mid['pos_rank']}), the context "
            f"part {pct(mid['share_ctx'])}; the positional share peaks at layer {top['layer']} "
            f"({pct(top['share_pos'])})."
        )
    primary = dec["layers"] if not dec.get("skip_first") else dec["other_view"]["layers"]
    big = max(primary, key=lambda r: r["share_pos"])
    lines.append(
        f"With position 0 included, the positional share reaches {pct(big['share_pos'])} at layer "
        f"{big['layer']}: compare the two views before reading the shares."
    )
    return lines


SHARE_KEYS = ["share_pos", "share_ctx"]

TABLE_KEYS = [
    "layer",
    "share_pos",
    "share_ctx",
    "share_resid",
    "rel_norm_pos",
    "pos_rank",
    "pos_rank95",
    "pos_stable_rank",
    "pos_explained",
    "pos_low_freq",
    "pos_smoothness",
    "incoherence_max",
    "incoherence_mean",
    "incoherence_random",
    "coherence_max",
    "coherence_random_max",
    "ctx_cos_within",
    "ctx_cos_between",
    "ctx_cluster_ari",
]
"""The per-layer columns of the two tables."""


def with_interval(row: dict[str, Any], key: str, intervals: dict[str, Any]) -> Any:
    """A table cell: the number, and its 95% interval over contexts where there is one."""
    low, high = (intervals.get(str(row.get("layer"))) or {}).get(key) or (None, None)
    value = row.get(key)
    if value is None or low is None or high is None:
        return value
    return f"{number(value)} [{number(low)}, {number(high)}]"


def intervals_reading(found: dict[str, Any]) -> str:
    """One sentence on how the intervals were obtained, or why there are none."""
    if not found.get("method"):
        return f"No intervals over contexts: {found.get('why', 'none in this run')}."
    left = "; ".join(f"{k} ({why})" for k, why in (found.get("not_resampled") or {}).items())
    rank = found.get("sketch_rank")
    sketch = (
        f" The relative norms' draws estimate the top eigenvalue from a {rank}-column sketch "
        "of each group's second moments (Nystrom), scaled to the whole corpus's exact number."
        if rank
        else ""
    )
    return (
        f"Intervals (95%, position 0 skipped): {found['method']}; {found['n_draws']} draws of "
        f"{found['groups']} groups.{sketch}" + (f" Not resampled: {left}." if left else "")
    )


def decomposition_section(run: Run) -> str:
    m, folder = run.metrics, run.path
    dec = m["decomposition"]
    views = [(("position 0 skipped" if dec["skip_first"] else "all positions"), dec["layers"])]
    other = dec["other_view"]
    views.append(
        ("position 0 skipped" if other["skip_first"] else "all positions", other["layers"])
    )
    rows = skip_first_layers(m)
    found = skip_first_intervals(m)
    per_layer = found.get("layers") or {}
    all_positions = other["layers"] if dec["skip_first"] else dec["layers"]
    parts = [
        paper(
            "song",
            "Each layer's hidden states h[c, t] split into a global mean, a positional part "
            "pos[t] (mean over windows), a context part ctx[c] (mean over positions) and a "
            "residual.",
        ),
        readings([*decomposition_readings(m), intervals_reading(found)]),
        plot(
            plots.shares(views),
            "plot-shares",
            "Variance shares by layer, both views of position 0",
            HOW["shares"],
        ),
        plot(
            plots.per_layer(
                rows, SHARE_KEYS, "Shares with 95% intervals", "share", intervals=per_layer
            ),
            "plot-share-intervals",
            "Positional and context shares with their intervals over contexts (position 0 skipped)",
            HOW["share_intervals"],
        ),
        plot(
            plots.per_layer(rows, plots.RANK_KEYS, "Positional rank", "rank", intervals=per_layer),
            "plot-ranks",
            "Rank of the positional part (position 0 skipped)",
            HOW["ranks"],
        ),
        plot(
            plots.per_layer(
                rows,
                plots.GEOMETRY_KEYS,
                "Frequency, incoherence and topic clustering",
                "value",
                intervals=per_layer,
            ),
            "plot-geometry",
            "Low-frequency share, smoothness, incoherence against random, and topic ARI",
            HOW["geometry"],
        ),
        SECTION.saved_plot(folder, "decomposition_spiral", "plot-spiral"),
        table(
            TABLE_KEYS,
            [[with_interval(r, k, per_layer) for k in TABLE_KEYS] for r in rows],
            "Per layer, position 0 skipped (95% intervals over contexts in brackets)",
        ),
        table(
            TABLE_KEYS,
            [[r.get(k) for k in TABLE_KEYS] for r in all_positions],
            "Per layer, all positions",
        ),
    ]
    spectra_path = folder / "decomposition_spectra.json"
    if spectra_path.exists():
        spectra = json.loads(spectra_path.read_text())
        if "skip_first" in spectra:
            parts.append(
                plot(
                    plots.spectra(spectra["skip_first"], "Positional singular values"),
                    "plot-spectra",
                    "Singular values of pos per layer (position 0 skipped)",
                    HOW["spectra"],
                )
            )
    parts.append(SECTION.static_figures(folder, ("decomposition_",)))
    return "".join(parts)


HOW = {
    "shares": "each bar stacks the positional, context and residual shares of one layer's "
    "variance (they sum to 1); solid bars count every position, hatched bars leave position 0 "
    "out, whose large norm can dominate the positional share.",
    "share_intervals": "a line per share over layers; the error bars are 95% intervals over "
    "the windows, so two layers whose bars overlap are not told apart by this corpus.",
    "ranks": "how many directions the positional part needs per layer: a flat line far "
    "below the positions counted means a low-rank positional basis.",
    "geometry": "low-frequency share near 1 and smoothness near 0 mean pos[t] changes slowly "
    "with t; incoherence below its random line means the positional and context directions "
    "are closer to orthogonal than chance; ARI near 0 means no topic clusters.",
    "spectra": "one line per layer (colour runs from the first layer, dark, to the last, "
    "light); a steep drop after a few values means few positional directions carry the energy.",
    "decomposition_spiral": "pos[t] on its top three principal axes, coloured by position t: "
    "a smooth curve (often a spiral) means neighbouring positions have nearby vectors.",
    "decomposition_gram": "left, the cosine of every pair of positional vectors; right, its "
    "2-D cosine transform: energy in the top-left corner means a smooth, low-frequency basis.",
    "decomposition_contexts": "each point is one window's context vector, coloured by topic: "
    "separate colour groups mean the context part carries the topic.",
}
"""A line under each figure of the section saying how to read it."""


SECTION = Section(
    "decomposition",
    "Position and context",
    decomposition_section,
    present=lambda run: "decomposition" in run.metrics,
    captions={
        "decomposition_shares": "Variance shares per layer (static)",
        "decomposition_spectra": "Singular values of the positional part",
        "decomposition_spiral": "Top-3 principal components of pos[t], coloured by t",
        "decomposition_gram": "Gram matrices of the normalised positional vectors and their DCT",
        "decomposition_contexts": "Context vectors on their top-2 principal axes, by topic",
    },
    how=HOW,
    interactive=("decomposition_shares", "decomposition_spectra", "decomposition_spiral"),
)
