"""The position and context section (Song & Zhong): shares, ranks, frequency, topics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from geomlens.analyses.decomposition.claims import COHERENCE_FACTOR
from geomlens.analyses.decomposition.schema import (
    median_of,
    outlier_rule,
    outlier_windows,
    skip_first_intervals,
    skip_first_layers,
    with_outliers_layers,
)
from geomlens.analyses.decomposition.sequential import auto_contexts_reading
from geomlens.analyses.decomposition.summary import (
    INCOHERENCE_RATIO,
    incoherence_figure,
    incoherence_ratio,
    noise_figure,
    outlier_figure,
)
from geomlens.reporting import interactive as plots
from geomlens.reporting.html import coded, number, paper, plot, readings, table
from geomlens.reporting.section import Section, pct
from geomlens.runs.runfolder import Run


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
    ranks = rank_reading(rows)
    return lines + ([ranks] if ranks else [])


def directions(count: float) -> str:
    """A count of directions in words: "1 direction", "7 directions", "6.5 directions"."""
    return f"{number(count)} direction{'' if count == 1 else 's'}"


def rank_reading(rows: list[dict[str, Any]]) -> str | None:
    """One sentence relating the positional ranks the page gives, each a different count:
    the ScreeNOT rank (noise in; the published tables' rank), the directions above the
    noise floor (the low-rank claim's number) and the 95%-energy rank, with the noise
    removed and in (medians over layers, position 0 skipped; None without them)."""
    screenot, corrected = median_of(rows, "pos_rank"), median_of(rows, "pos_rank_corrected")
    energy, energy_noisy = median_of(rows, "pos_rank95_corrected"), median_of(rows, "pos_rank95")
    if screenot is None:
        return None
    counts = [
        f"ScreeNOT keeps {directions(screenot)} of the estimate with its sampling "
        "noise in (the rank the per-layer tables and the published numbers give)"
    ]
    if corrected is not None:
        counts.append(
            f"{number(corrected)} {'stands' if corrected == 1 else 'stand'} above the noise "
            "floor once the noise is removed "
            "(the number the low-rank claim reads)"
        )
    if energy is not None and energy_noisy is not None:
        counts.append(
            f"95% of the energy lies in {directions(energy)} with the noise removed "
            f"and in {number(energy_noisy)} with it in"
        )
    elif energy_noisy is not None:
        counts.append(f"95% of the energy lies in {directions(energy_noisy)}")
    return (
        "The positional ranks on this page count different things (medians over layers, "
        f"position 0 skipped): {'; '.join(counts)}."
    )


def noise_reading(m: dict[str, Any]) -> str | None:
    """One sentence: the noise share of pos over layers and the incoherence ratio, the
    numbers the claims on the positional estimate read (None without them)."""
    rows = skip_first_layers(m)
    shares = [r["pos_noise_share"] for r in rows if r.get("pos_noise_share") is not None]
    if not shares:
        return None
    ratio, low, high = incoherence_ratio(m)
    interval = f" [{number(low)}, {number(high)}]" if low is not None and high is not None else ""
    said = (
        ""
        if ratio is None
        else f" The {INCOHERENCE_RATIO} (mutual coherence of pos, noise removed, and ctx over "
        f"that of as many isotropic random vectors) is {number(ratio)}{interval} at the "
        f"median over layers; the incoherence claim asks for at most {COHERENCE_FACTOR:g}."
    )
    return (
        f"Sampling noise is {pct(min(shares))}-{pct(max(shares))} of the positional "
        f"estimate's energy by layer (median {pct(median_of(rows, 'pos_noise_share'))}, "
        "position 0 skipped); the claims read every positional number with it removed." + said
    )


COMPARED = (
    ("pos_noise_share", "noise share of the positional estimate"),
    ("coherence_max", "mutual coherence max |cos| (noise in)"),
    ("pos_low_freq_energy", "low-frequency energy share (noise in)"),
)
"""The medians over layers the page shows with and without the outlier windows."""


def outliers_reading(m: dict[str, Any]) -> str | None:
    """One sentence: how many windows were set aside and by which rule (with k), and the
    medians over layers with and without them; None for a run without the check."""
    found, rule = outlier_windows(m), outlier_rule(m)
    if found is None:
        return f"Outlier windows: not checked ({rule['why']})." if rule.get("why") else None
    aside = rule.get("windows_set_aside") or []
    k = rule.get("k")
    if not aside:
        why = f" ({rule['why']})" if rule.get("why") else ""
        return f"No window was set aside as an outlier (rule: norm above {k}x the median){why}."
    where = sorted({(f["layer"], f["position"]) for f in found})
    positions = sorted({p for _, p in where})
    before, after = with_outliers_layers(m), skip_first_layers(m)
    changes = "; ".join(
        f"{what} {number(median_of(before, key))} with them, {number(median_of(after, key))} "
        "without"
        for key, what in COMPARED
        if median_of(before, key) is not None and median_of(after, key) is not None
    )
    return (
        f"{len(aside)} of {len(aside) + int((after or [{}])[0].get('n_contexts') or 0)} "
        f"windows (numbers {', '.join(str(w) for w in aside)} in windows.json) were set aside "
        f"as outliers: their hidden-state norm at position {', '.join(map(str, positions))} "
        f"exceeds {k}x the median over windows at that layer and position in "
        f"{len(where)} (layer, position) pairs (a massive activation past position 0, after "
        "Sun et al. 2024), and every number here is computed without them"
        + (f" (medians over layers, position 0 skipped: {changes})." if changes else ".")
    )


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
    "pos_low_freq_energy",
    "pos_smoothness",
    "pos_noise_share",
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
    left: list[tuple[str, str | None]] = []
    for k, why in (found.get("not_resampled") or {}).items():
        left += [("; " if left else "", None), (LINES.get(k, k), k), (f" ({why})", None)]
    rank = found.get("sketch_rank")
    sketch = (
        f" The relative norms' draws estimate the top eigenvalue from a {rank}-column sketch "
        "of each group's second moments (Nystrom), scaled to the whole corpus's exact number."
        if rank
        else ""
    )
    said = (
        f"Intervals (95%, position 0 skipped): {found['method']}; {found['n_draws']} draws of "
        f"{found['groups']} groups.{sketch}"
    )
    if not left:
        return said
    return coded([(said + " Not resampled: ", None), *left, (".", None)])


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
        readings(
            [
                *decomposition_readings(m),
                intervals_reading(found),
                *filter(None, [noise_reading(m), outliers_reading(m), auto_contexts_reading(m)]),
            ]
        ),
        plot(
            plots.shares(views),
            "plot-shares",
            "Variance shares by layer, both views of position 0",
            HOW["shares"],
        ),
        *per_layer_plots(m, rows, per_layer),
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
    parts.append(spectra_plot(folder))
    parts.append(SECTION.static_figures(folder, ("decomposition_",)))
    return "".join(parts)


def spectra_plot(folder: Path) -> str:
    """The positional singular values per layer, position 0 skipped ("" without them)."""
    spectra_path = folder / "decomposition_spectra.json"
    if not spectra_path.exists():
        return ""
    spectra = json.loads(spectra_path.read_text())
    if "skip_first" not in spectra:
        return ""
    return plot(
        plots.spectra(spectra["skip_first"], "Positional singular values"),
        "plot-spectra",
        "Singular values of pos per layer (position 0 skipped)",
        HOW["spectra"],
    )


def per_layer_plots(
    m: dict[str, Any], rows: list[dict[str, Any]], per_layer: dict[str, Any]
) -> list[str]:
    """The per-layer plots of the view the claims read (position 0 skipped): shares,
    ranks, geometry, noise, the two low-frequency numbers."""
    return [
        plot(
            plots.per_layer(
                rows,
                SHARE_KEYS,
                "Shares with 95% intervals",
                "share",
                intervals=per_layer,
                names=LINES,
            ),
            "plot-share-intervals",
            "Positional and context shares with their intervals over contexts (position 0 skipped)",
            HOW["share_intervals"],
        ),
        plot(
            plots.per_layer(
                rows, plots.RANK_KEYS, "Positional rank", "rank", intervals=per_layer, names=LINES
            ),
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
                names=LINES,
            ),
            "plot-geometry",
            "Gram low-frequency share, smoothness, incoherence against random, and topic ARI",
            HOW["geometry"],
        ),
        *page_noise_plots(m, rows, per_layer),
        plot(
            plots.per_layer(
                rows,
                LOW_FREQ_KEYS,
                "Two low-frequency numbers, noise in and removed",
                "share",
                intervals=per_layer,
                names=LINES,
            ),
            "plot-low-frequency",
            "Low-frequency energy share and Gram low-frequency share, each with the noise in "
            "and removed (position 0 skipped)",
            HOW["low_frequency"],
        ),
    ]


LINES = {
    "share_pos": "positional share",
    "share_ctx": "context share",
    "pos_rank": "ScreeNOT rank",
    "pos_rank95": "95%-energy rank",
    "pos_stable_rank": "stable rank",
    "pos_low_freq": "Gram low-frequency share, noise in",
    "pos_low_freq_corrected": "Gram low-frequency share, noise removed",
    "pos_low_freq_energy": "low-frequency energy share, noise in",
    "pos_low_freq_energy_corrected": "low-frequency energy share, noise removed",
    "pos_smoothness": "smoothness",
    "incoherence_mean": "incoherence (mean principal-angle cosine)",
    "incoherence_random": "incoherence of random subspaces",
    "ctx_cluster_ari": "topic clustering (ARI)",
}
"""The words each per-layer line is named by on the page (its key in its hover text)."""

LOW_FREQ_KEYS = [
    "pos_low_freq_energy",
    "pos_low_freq_energy_corrected",
    "pos_low_freq",
    "pos_low_freq_corrected",
]
"""The two low-frequency numbers, each with the noise in and removed."""


def page_noise_plots(
    m: dict[str, Any], rows: list[dict[str, Any]], per_layer: dict[str, Any]
) -> list[str]:
    """The noise share and the incoherence ratio per layer (with the noise-corrected
    numbers), and the outlier windows' norms (where any window was flagged)."""
    parts = []
    if any(r.get("pos_noise_share") is not None for r in rows):
        parts.append(
            plot(
                noise_figure(rows, per_layer),
                "plot-noise-share",
                "Noise share of the positional estimate per layer (position 0 skipped)",
                HOW["noise_share"],
            )
        )
        parts.append(
            plot(
                incoherence_figure(rows, per_layer),
                "plot-incoherence-ratio",
                f"The {INCOHERENCE_RATIO} per layer: the largest |cos| between positional "
                "(noise removed) and context vectors over that of random vectors (position 0 "
                "skipped)",
                HOW["incoherence_ratio"],
            )
        )
    found = outlier_figure(m)
    if found is not None:
        parts.append(
            plot(
                found,
                "plot-outliers",
                f"The {len(outlier_windows(m) or [])} flagged (window, layer, position) "
                "entries of the outlier windows set aside",
                HOW["outliers"],
            )
        )
    return parts


HOW = {
    "shares": "each bar stacks the positional, context and residual shares of one layer's "
    "variance (they sum to 1); solid bars count every position, hatched bars leave position 0 "
    "out, whose large norm can dominate the positional share.",
    "share_intervals": "a line per share over layers; the error bars are 95% intervals over "
    "the windows, so two layers whose bars overlap are not told apart by this corpus.",
    "ranks": "how many directions the positional part needs per layer, three ways, each of "
    "the estimate with its sampling noise in: ScreeNOT's rank, the fewest directions holding "
    "95% of the energy, and the stable rank; a flat line far below the positions counted "
    "means a low-rank positional basis (the low-rank claim counts directions above the noise "
    "floor instead: see the readings above).",
    "noise_share": "one point per layer: the share of pos's energy that is sampling noise "
    "(error bars: 95% intervals over contexts). Under the 10% line a claim on the positional "
    "estimate is decided on its own; above the 0.65 line the low-frequency interval's "
    "coverage was not calibrated on planted data.",
    "incoherence_ratio": "one point per layer: the largest |cos| between a positional vector "
    "(noise removed) and a context vector, over the same for isotropic random vectors of the "
    "same count and dimension; at or under the dashed line (2) the claim calls them "
    "incoherent (the claim reads the median over layers).",
    "outliers": "one point per flagged (window, layer, position): that hidden state's norm "
    "over the median norm of all windows there (log axis); points above the k line are why "
    "the window was set aside, and every number on this page is computed without it.",
    "low_frequency": "two different numbers: the low-frequency energy share is the share of "
    "pos's energy in the lowest 10% of frequencies over positions (the claim reads it, noise "
    "removed); the Gram low-frequency share is the share of the normalised Gram matrix's "
    "2-D cosine transform in its lowest 10% x 10% block. Noise pulls the first toward 0.1.",
    "geometry": "Gram low-frequency share near 1 and smoothness near 0 mean "
    "pos[t] changes slowly "
    "with t; incoherence below its random line means the positional and context directions "
    "are closer to orthogonal than chance; ARI near 0 means no topic clusters.",
    "spectra": "one line per layer (colour runs from the first layer, dark, to the last, "
    "light); a steep drop after a few values means few positional directions carry the energy.",
    "decomposition_spiral": "pos[t] on its top three principal axes, coloured by position t: "
    "a smooth curve (often a spiral) means neighbouring positions have nearby vectors. The "
    "first row is the page's primary view (by default every position, where position 0 can "
    "dominate); the second, where drawn, the view the claims read: position 0 skipped, the "
    "outlier windows out and the sampling noise removed (P_r, pos projected onto the top r "
    "eigenvectors of the noise-free Gram matrix K).",
    "decomposition_gram": "the cosine of every pair of positional vectors, and under it its "
    "2-D cosine transform: energy in the top-left corner (boxed: the block the Gram "
    "low-frequency share counts) means a smooth, low-frequency basis. The first two rows are "
    "the primary view; the last two, where drawn, the normalised Gram matrix of P_r (pos "
    "projected onto K's top r eigenvectors, what pos_low_freq_corrected reads): position 0 "
    "skipped, outlier windows out, noise removed.",
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
        "decomposition_spiral": "Top-3 principal components of pos[t], coloured by t: the "
        "primary view, and the claims' view with the noise removed",
        "decomposition_gram": "Gram matrices of the normalised positional vectors and their "
        "DCT: the primary view, and the normalised Gram of P_r (noise removed)",
        "decomposition_contexts": "Context vectors on their top-2 principal axes, by topic",
    },
    how=HOW,
    interactive=("decomposition_shares", "decomposition_spectra", "decomposition_spiral"),
)
