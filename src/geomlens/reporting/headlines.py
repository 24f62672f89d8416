"""Each analysis's headline numbers: a few (label, value) pairs that say what a run found.

``Result.headline()`` (and a notebook's table of a result) joins them in the registry's
order (``reporting/registry.py``); each reads only its own metrics.json section.
"""

from __future__ import annotations

from typing import Any

Pairs = list[tuple[str, Any]]


def _median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return rows[len(rows) // 2]


def capture_headline(metrics: dict[str, Any]) -> Pairs:
    """The capture's variance shares at the middle layer (a run without a decomposition)."""
    if metrics.get("decomposition") or not metrics.get("capture"):
        return []
    mid = _median_row(metrics["capture"]["layers"])
    return [
        (f"share_pos, layer {mid['layer']}", mid["share_pos"]),
        (f"share_pos, layer {mid['layer']} (position 0 skipped)", mid["share_pos_skip_first"]),
    ]


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


def sphere_headline(metrics: dict[str, Any]) -> Pairs:
    """The layer-norm identity's error and the logit lens's prediction."""
    sphere = metrics.get("sphere")
    if not sphere:
        return []
    return [
        ("layer-norm identity, max relative error", sphere["identity"]["max_rel_err"]),
        ("logit-lens prediction", sphere["trajectory"]["prediction"]),
    ]


def walk_headline(metrics: dict[str, Any]) -> Pairs:
    """The share of heads with negative self-bias and the refactoring's error."""
    walk = metrics.get("walk")
    if not walk:
        return []
    return [
        ("heads with negative self-bias", walk["kernels"]["negative_self_bias_fraction"]),
        ("per-head refactoring, max relative error", walk["refactor"]["max_rel_err"]),
    ]


def concepts_headline(metrics: dict[str, Any]) -> Pairs:
    """The baseline's accuracies and the best scheme's headline ratio."""
    concepts = metrics.get("concepts") or {}
    if not concepts.get("baseline"):
        return []
    base = concepts["baseline"]
    found: Pairs = [(f"baseline {k}", base[k]) for k in ("acc", "acc_norm", "acc_bytes")]
    if concepts.get("ranking"):
        best = concepts["ranking"][0]
        key = concepts.get("headline", "normalised_vs_acc")
        found.append((f"best scheme ({best}), {key}", concepts["schemes"][best].get(key)))
    return found
