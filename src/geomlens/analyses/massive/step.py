"""The report's massive-activation stage: reads the capture's ``MassiveTap`` and writes the
"massive" section of metrics.json (no forward pass of its own)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from geomlens.analyses.base import StageRequest
from geomlens.analyses.decomposition.schema import outlier_windows
from geomlens.analyses.massive import histogram
from geomlens.analyses.massive.compute import (
    ABSOLUTE,
    RATIO,
    Entry,
    LayerResult,
    MassiveTap,
    layer_results,
    profile,
    ratio_interval,
)
from geomlens.analyses.massive.figures import glance_figure
from geomlens.corpus import Windows
from geomlens.io.progress import Step
from geomlens.models.view import ModelView
from geomlens.pipeline.taps import filled_tap
from geomlens.reporting.figures import save_later
from geomlens.runs.runfolder import RunFolder
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.rounding import sig

DELIMITERS = frozenset(".,;:!?\n\"'()-")
"""Characters a delimiter token is made of (Sun et al.: the first period or newline)."""


def is_delimiter(text: str) -> bool:
    """Whether a token's text is whitespace or punctuation only."""
    return not text.strip() or all(ch in DELIMITERS or ch.isspace() for ch in text)


def token_record(entry: Entry, windows: Windows, view: ModelView) -> dict[str, Any]:
    """One large coordinate with the token carrying it (its id and decoded text)."""
    token = int(windows.input_ids[entry.window][entry.position])
    text = str(view.tokenizer.decode([token]))
    return {
        "value": sig(entry.value),
        "dim": entry.dim,
        "window": entry.window,
        "position": entry.position,
        "token_id": token,
        "text": text,
        "delimiter": is_delimiter(text),
    }


def carriers(rows: list[LayerResult], windows: Windows, view: ModelView) -> dict[str, Any]:
    """The coordinates passing Sun's rule among each layer's largest (every position and
    after the first): how many sit on the first position or on a delimiter token."""
    seen: dict[tuple[int, int, int, int], dict[str, Any]] = {}
    for r in rows:
        floor = max(ABSOLUTE, RATIO * r.median)
        for e in [*r.largest, *r.after_first]:
            if e.value > floor:
                seen[(r.layer, e.window, e.position, e.dim)] = token_record(e, windows, view)
    found = list(seen.values())
    n = len(found)
    first = sum(1 for f in found if f["position"] == 0)
    delim = sum(1 for f in found if f["position"] != 0 and f["delimiter"])
    later = sorted({f["window"] for f in found if f["position"] != 0})
    return {
        "entries": n,
        "start": None if not n else sig(first / n),
        "start_or_delimiter": None if not n else sig((first + delim) / n),
        "windows_after_first": later,
    }


def layer_record(r: LayerResult, windows: Windows, view: ModelView) -> dict[str, Any]:
    return {
        "layer": r.layer,
        "median_abs": sig(r.median),
        "top1_abs": sig(r.top[0]),
        "top2_abs": sig(r.top[1]),
        "top3_abs": sig(r.top[2]),
        "top1_over_median": sig(r.ratio),
        "massive": r.massive,
        "largest": [token_record(e, windows, view) for e in r.largest[:5]],
        "after_first": [token_record(e, windows, view) for e in r.after_first[:3]],
        "massive_dims": [token_record(e, windows, view) for e in r.massive_dims[:8]],
    }


def massive_metrics(
    tap: MassiveTap, windows: Windows, view: ModelView, outliers: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """The "massive" section of metrics.json."""
    rows = layer_results(tap)
    prof = profile(rows)
    peak = max(rows, key=lambda r: r.ratio) if rows else None
    ci = None if peak is None else ratio_interval(tap, peak.layer)
    found = carriers(rows, windows, view)
    flagged = sorted({int(o["window"]) for o in outliers or []})
    return {
        "rule": {"absolute": ABSOLUTE, "ratio": RATIO},
        "median": (
            f"histogram of log2 |h|, {histogram.BINS_PER_OCTAVE} bins per octave "
            "(off by at most 0.54%)"
        ),
        "layers": [layer_record(r, windows, view) for r in rows],
        "profile": {k: sig(v) if isinstance(v, float) else v for k, v in asdict(prof).items()},
        "peak": None
        if peak is None
        else {
            "layer": peak.layer,
            "ratio": sig(peak.ratio),
            "top1": sig(peak.top[0]),
            "low": None if ci is None else sig(ci[0]),
            "high": None if ci is None else sig(ci[1]),
        },
        "carriers": found,
        "outlier_windows": None if outliers is None else flagged,
        "outliers_with_massive_after_first": None
        if outliers is None
        else sorted(set(flagged) & set(found["windows_after_first"])),
    }


@dataclass(frozen=True)
class MassiveStage:
    """The stage: the capture's statistics -> metrics.json's "massive"."""

    step: Step

    def __call__(
        self, folder: RunFolder, view: ModelView, windows: Windows, acc: DecompositionAccumulator
    ) -> None:
        self.step("massive activations")
        tap = filled_tap(folder, "massive", MassiveTap(view))
        outliers = outlier_windows(folder.read_metrics())
        found = massive_metrics(tap, windows, view, outliers)
        folder.merge_metrics("massive", found)
        save_later(
            glance_figure(found["layers"], view.name),
            folder.path / "figures" / "massive_glance.png",
        )


def massive_stage(request: StageRequest, step: Step) -> MassiveStage:
    """The report's massive-activation stage."""
    return MassiveStage(step)
