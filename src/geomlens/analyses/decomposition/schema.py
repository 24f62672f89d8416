"""What the claims, the page and ``compare`` read of a run's decomposition: the rows of the
view without position 0, their intervals over contexts, and the noise in the positional
estimate.

Where the run set outlier windows aside (``outliers.py``), both views are computed on the
windows left, so ``skip_first_layers`` and ``skip_first_intervals`` (what the claims read)
are the numbers without them; the view without position 0 on every window stays under
"with_outliers" (``with_outliers_layers``). A run made before the outlier check has
neither key and reads as before."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from geomlens.analyses.decomposition.position_noise import contexts_needed
from geomlens.papers.published import comparison, published_for
from geomlens.reporting import guards
from geomlens.reporting.claims import NO_INTERVAL, text
from geomlens.reporting.guards import Guard


def skip_first_layers(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-layer decomposition rows of the view without position 0, without the outlier
    windows where any were set aside (empty if absent)."""
    dec = metrics.get("decomposition") or {}
    if dec.get("skip_first"):
        return list(dec.get("layers", []))
    return list((dec.get("other_view") or {}).get("layers", []))


def skip_first_intervals(metrics: dict[str, Any]) -> dict[str, Any]:
    """The intervals over contexts of the view without position 0 ({} when absent)."""
    dec = metrics.get("decomposition") or {}
    view = dec if dec.get("skip_first") else dec.get("other_view") or {}
    return dict(view.get("intervals") or {})


def with_outliers_layers(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of the view without position 0 on every window, outliers included (empty when
    no window was set aside, or the run predates the check)."""
    dec = metrics.get("decomposition") or {}
    return list((dec.get("with_outliers") or {}).get("layers", []))


def with_outliers_intervals(metrics: dict[str, Any]) -> dict[str, Any]:
    """The intervals of ``with_outliers_layers`` ({} when absent)."""
    dec = metrics.get("decomposition") or {}
    return dict((dec.get("with_outliers") or {}).get("intervals") or {})


def outlier_windows(metrics: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Every flagged {"window", "layer", "position", "norm", "median"}; None where the run
    has no outlier information (made before the check, or its capture kept no norms)."""
    found = (metrics.get("decomposition") or {}).get("outlier_windows")
    return None if found is None else list(found)


def outlier_rule(metrics: dict[str, Any]) -> dict[str, Any]:
    """The outlier check's record: its k, rule, the windows set aside ({} when absent)."""
    return dict((metrics.get("decomposition") or {}).get("outlier_rule") or {})


def published_section(
    metrics: dict[str, Any], model: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The run's numbers beside a paper's for the same model (None when no paper gives
    per-layer numbers for this run's model, or the run has no decomposition)."""
    found, rows = published_for(model), skip_first_layers(metrics)
    if found is None or not rows:
        return None
    return comparison(found, rows, skip_first_intervals(metrics))


def run_published(metrics: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any] | None:
    """A paper's numbers for the run's model beside the run's, as the run stored them or
    (a run made before they were kept) computed now; None when no paper has any."""
    stored = metrics.get("published")
    return stored if stored else published_section(metrics, manifest.get("model"))


def median_interval(
    intervals: dict[str, Any], key: str, scale: float | None = 1.0
) -> tuple[float | None, float | None]:
    """The interval of the median over layers of ``key`` (divided by ``scale``)."""
    low, high = (intervals.get("medians") or {}).get(key) or (None, None)
    if low is None or high is None or not scale:
        return None, None
    return low / scale, high / scale


def median_of(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.median(values) if values else None


def interval_note(intervals: dict[str, Any], key: str) -> str:
    """How the interval of a median over layers was obtained, or why there is none."""
    if not intervals.get("method"):
        return NO_INTERVAL
    if key not in (intervals.get("medians") or {}):
        why = (intervals.get("not_resampled") or {}).get(key, "undefined in most draws")
        return f"none: {why}"
    return (
        f"{intervals['method']}; {intervals['n_draws']} draws of {intervals['groups']} "
        "groups, the median over layers of each draw"
    )


@dataclass(frozen=True)
class PositionView:
    """What the position/context claims read: the rows without position 0, their
    intervals, and the noise in their positional estimate."""

    rows: list[dict[str, Any]]
    intervals: dict[str, Any]

    def median(self, key: str) -> float | None:
        return median_of(self.rows, key)

    def shown(self, key: str, fmt: str, scale: float | None = 1.0) -> str:
        """The median of ``key`` over layers, with its interval (divided by ``scale``)."""
        number = self.median(key)
        low, high = median_interval(self.intervals, key, scale)
        return text(None if number is None else number / (scale or 1.0), fmt, low=low, high=high)

    def noise(self, layers: set[int] | None = None) -> tuple[float | None, int | None]:
        """(median noise share over the layers, contexts at which the upper end of its
        interval falls under 10%) of ``layers`` (all; a subset has no interval: its share)."""
        rows = [r for r in self.rows if layers is None or r.get("layer") in layers]
        share = median_of(rows, "pos_noise_share")
        contexts = next((r.get("n_contexts") for r in rows), None)
        upper = (
            None if layers is not None else median_interval(self.intervals, "pos_noise_share")[1]
        )
        needed = (
            None
            if share is None or not contexts
            else contexts_needed(share, int(contexts), upper=upper)
        )
        return share, needed

    @property
    def missing(self) -> str:
        """Why a position claim has no number."""
        return NOISE_MISSING if self.rows else "no decomposition in this run"

    def noise_guard(self, layers: set[int] | None = None) -> Guard | None:
        share, needed = self.noise(layers)
        contexts = next((r.get("n_contexts") for r in self.rows), None)
        return guards.noise(share, contexts, needed)


NOISE_MISSING = (
    "this run has no noise-corrected positional numbers (it kept no groups of contexts, or "
    "was made before them)"
)
