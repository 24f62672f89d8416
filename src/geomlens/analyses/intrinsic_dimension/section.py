"""The intrinsic-dimension section: the profile over depth first, then what it says."""

from __future__ import annotations

from geomlens.analyses.intrinsic_dimension.claims import MIDDLE_PHASE
from geomlens.analyses.intrinsic_dimension.schema import KEY, IdMetrics
from geomlens.reporting.claims import claim_record, verdict_sentence
from geomlens.reporting.html import escape, number, readings, table, warning
from geomlens.reporting.section import Section
from geomlens.runs.runfolder import Run

OPENING = (
    '<p class="paper">The intrinsic dimension (ID) of the windows\' representations at each '
    "layer: how many directions the cloud of windows really uses, read from the ratio of each "
    "window's two nearest neighbours (TwoNN, Facco et al. 2017) and at larger neighbourhoods "
    '(GRIDE, Denti et al. 2022). Cheng et al. (<a href="https://arxiv.org/abs/2405.15471">'
    "arXiv:2405.15471</a>) find a high-dimensional phase in the middle layers of language "
    "models.</p>"
)


def id_section(run: Run) -> str:
    found = IdMetrics.read(run.metrics, KEY) if "n_windows" in run.metrics.get(KEY, {}) else None
    if found is None:
        return warning(str(run.metrics.get(KEY, {}).get("not_measured", "not measured")))
    folder = run.path
    figure = SECTION.static_figures(folder, ("intrinsic_dimension_",))
    lines = [
        f"{found.n_windows} windows, one point per window per layer ({found.pooling}).",
    ]
    rows = [r for r in found.layers if r.twonn is not None]
    if rows:
        top = max(rows, key=lambda r: r.twonn or 0.0)
        first, last = rows[0], rows[-1]
        lines.append(
            f"TwoNN reads {number(first.twonn)} at layer {first.layer}, peaks at "
            f"{number(top.twonn)} at layer {top.layer} (relative depth {number(top.depth)}), "
            f"and ends at {number(last.twonn)} at layer {last.layer}."
        )
    if found.n_windows < found.min_windows:
        lines.append(
            f"Only {found.n_windows} windows: TwoNN needs about {found.min_windows} for a "
            "profile whose layers differ by more than its spread."
        )
    record = claim_record(run.metrics.get("claims") or [], MIDDLE_PHASE)
    if record is not None:
        lines.append(verdict_sentence(record))
    body = table(
        ["layer", "depth", "TwoNN", "low", "high", *(f"GRIDE k={k}" for k in found.gride_k)],
        [[r.layer, r.depth, r.twonn, r.low, r.high, *(r.gride or [])] for r in found.layers],
        "Intrinsic dimension per layer (95% bootstrap interval over windows)",
        ["layer", "relative_depth", "twonn", None, None, *("gride" for _ in found.gride_k)],
    )
    return figure + OPENING + readings(lines) + body + f"<p>{escape(found.estimator)}.</p>"


SECTION = Section(
    KEY,
    "Intrinsic dimension",
    id_section,
    present=lambda run: KEY in run.metrics,
    captions={"intrinsic_dimension_profile": "Intrinsic dimension over relative depth"},
    how={
        "intrinsic_dimension_profile": "each point is one layer's TwoNN dimension of the "
        "windows (band: 95% over windows), thin lines GRIDE at growing neighbourhoods; a hump "
        "inside the grey middle third is the phase Cheng et al. describe."
    },
)
