"""What the decomposition says in brief: its finishing lines, headline and plotly figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.analyses.decomposition.claims import COHERENCE_FACTOR
from geomlens.analyses.decomposition.position_noise import NOISE_TARGET, PLANTED_SHARE_MAX
from geomlens.analyses.decomposition.schema import (
    PositionView,
    median_interval,
    outlier_rule,
    outlier_windows,
    skip_first_intervals,
    skip_first_layers,
)
from geomlens.reporting import interactive
from geomlens.runs.runfolder import Run

if TYPE_CHECKING:
    import plotly.graph_objects as go

Pairs = list[tuple[str, Any]]


def _median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return rows[len(rows) // 2]


def decompose_lines(run: Run) -> list[str]:
    dec = run.metrics["decomposition"]
    view = "position 0 skipped" if dec["skip_first"] else "all positions"
    lines = [
        f"decomposition written to {run.path} (metrics.json, figures/)",
        f"  layer  share_pos  share_ctx  pos_rank  ({view})",
    ]
    for row in dec["layers"]:
        lines.append(
            f"  {row['layer']:5d}  {row['share_pos']:9.3f}  {row['share_ctx']:9.3f}"
            f"  {row['pos_rank']:8d}"
        )
    return lines


def decomposition_headline(metrics: dict[str, Any]) -> Pairs:
    """Shares and positional rank at the middle layer, position 0 skipped."""
    dec = metrics.get("decomposition")
    if not dec:
        return []
    rows = dec["layers"] if dec["skip_first"] else dec["other_view"]["layers"]
    mid = _median_row(rows)
    return [
        (f"share_pos, layer {mid['layer']} (position 0 skipped)", mid["share_pos"]),
        (f"share_ctx, layer {mid['layer']} (position 0 skipped)", mid["share_ctx"]),
        (f"pos_rank, layer {mid['layer']} (position 0 skipped)", mid["pos_rank"]),
    ]


def view_name(skip_first: bool) -> str:
    return "position 0 skipped" if skip_first else "all positions"


def decomposition_figures(folder: Path, dec: dict[str, Any]) -> dict[str, go.Figure]:
    """Shares (both views), ranks, geometry and spectra of the decomposition; with the
    noise-corrected numbers, the noise share and the incoherence ratio per layer; with
    outlier windows, their norms over the median."""
    import plotly.graph_objects as go

    views = [
        (view_name(dec["skip_first"]), dec["layers"]),
        (view_name(dec["other_view"]["skip_first"]), dec["other_view"]["layers"]),
    ]
    rows = skip_first_layers({"decomposition": dec})
    figures = {
        "shares": go.Figure(interactive.shares(views)),
        "ranks": go.Figure(
            interactive.per_layer(
                rows,
                interactive.RANK_KEYS,
                "Positional rank (position 0 skipped)",
                "rank",
            )
        ),
        "geometry": go.Figure(
            interactive.per_layer(
                rows,
                interactive.GEOMETRY_KEYS,
                "Frequency, incoherence and topic clustering (position 0 skipped)",
                "value",
            )
        ),
    }
    metrics = {"decomposition": dec}
    per_layer = skip_first_intervals(metrics).get("layers") or {}
    if any(r.get("pos_noise_share") is not None for r in rows):
        figures["noise"] = go.Figure(noise_figure(rows, per_layer))
        figures["incoherence"] = go.Figure(incoherence_figure(rows, per_layer))
    outliers = outlier_figure(metrics)
    if outliers is not None:
        figures["outliers"] = go.Figure(outliers)
    spectra_path = folder / "decomposition_spectra.json"
    if spectra_path.exists():
        spectra = json.loads(spectra_path.read_text(encoding="utf-8"))
        if "skip_first" in spectra:
            figures["spectra"] = go.Figure(
                interactive.spectra(
                    spectra["skip_first"], "Positional singular values (position 0 skipped)"
                )
            )
    return figures


def decomposition_run_figures(folder: Path, metrics: dict[str, Any]) -> dict[str, go.Figure]:
    if "decomposition" not in metrics:
        return {}
    return decomposition_figures(folder, metrics["decomposition"])


NOISE_LEVELS = (
    (NOISE_TARGET, f"{NOISE_TARGET:g}: a claim on pos is decided under it"),
    (PLANTED_SHARE_MAX, f"{PLANTED_SHARE_MAX:g}: the planted calibration's limit"),
)
"""The levels the noise share is read against: the share a claim on the positional
estimate needs (``position_noise.NOISE_TARGET``), and the largest share the planted
calibration of the low-frequency interval covers (``position_noise.PLANTED_SHARE_MAX``)."""

INCOHERENCE_RATIO = "incoherence ratio"
"""The page's name of coherence_max_corrected / coherence_random_max."""


def noise_figure(
    rows: list[dict[str, Any]], per_layer: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The noise share of pos per layer (view without position 0), with its intervals and
    ``NOISE_LEVELS``, as a plotly dict."""
    return interactive.noise_shares(
        rows,
        NOISE_LEVELS,
        per_layer,
        "Noise share of the positional estimate (position 0 skipped)",
    )


def outlier_figure(metrics: dict[str, Any]) -> dict[str, Any] | None:
    """Each flagged (window, layer, position)'s norm over the median there, log axis, with
    the rule's k; None when the run flagged none or did not check."""
    found = outlier_windows(metrics)
    if not found:
        return None
    k = outlier_rule(metrics).get("k")
    return interactive.outlier_ratios(
        found,
        None if k is None else float(k),
        "Outlier windows: norm over the median over windows, per flagged layer",
    )


def incoherence_figure(
    rows: list[dict[str, Any]], per_layer: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The incoherence ratio per layer (coherence_max_corrected / coherence_random_max,
    view without position 0), with its intervals and the claim's threshold."""
    return interactive.ratio_per_layer(
        rows,
        "coherence_max_corrected",
        "coherence_random_max",
        f"{INCOHERENCE_RATIO} (coherence_max_corrected / coherence_random_max)",
        [(COHERENCE_FACTOR, f"{COHERENCE_FACTOR:g}: the incoherence claim's threshold")],
        "Incoherence ratio: mutual coherence, noise removed, over random vectors'",
        "x the random level",
        per_layer,
    )


def incoherence_ratio(metrics: dict[str, Any]) -> tuple[float | None, float | None, float | None]:
    """(median over layers of coherence_max_corrected / median of coherence_random_max,
    and that number's 95% interval): what the incoherence claim decides on."""
    view = PositionView(skip_first_layers(metrics), skip_first_intervals(metrics))
    random, number = view.median("coherence_random_max"), view.median("coherence_max_corrected")
    if random is None or number is None or not random:
        return None, None, None
    low, high = median_interval(view.intervals, "coherence_max_corrected", random)
    return number / random, low, high
