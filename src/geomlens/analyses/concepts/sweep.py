"""Grids of schemes: read a YAML or JSON grid, run each scheme once, cache by its hash.

A grid file holds one mapping, or a list of mappings, of scheme fields to a value or a
list of values (``grids: [...]`` at the top level is accepted too); every combination is
a scheme. Each finished scheme is written to ``DIR/schemes/<hash>.json`` with the
identity of the run (model, task, shots, items, seed), so an interrupted sweep resumes
where it stopped and a finished one recomputes nothing.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from geomlens.analyses.concepts.baseline import BATCH_TOKENS, ChoiceScores, Prepared
from geomlens.analyses.concepts.pyramidal import pyramidal_scores
from geomlens.analyses.concepts.reuse import Reuse
from geomlens.analyses.concepts.schema import HEADLINE
from geomlens.analyses.concepts.schemes import LayerRef, Scheme, resolve_layer, scheme_from_dict
from geomlens.analyses.concepts.scores import rnd, summary
from geomlens.analyses.concepts.similarity import similarity_scores
from geomlens.errors import GeomlensError, within_limit
from geomlens.models.view import ModelView
from geomlens.runs.runfolder import write_json


class Bar(Protocol):
    """A progress display: ``update(n)`` items done, ``close()`` at the end (tqdm's)."""

    def update(self, n: int) -> Any: ...

    def close(self) -> Any: ...


SchemeProgress = Callable[[int, int, Scheme, bool], Bar | None]
"""Called as each scheme starts with (index, count, scheme, cached); may return a bar."""


def read_grid(path: str | Path) -> list[Scheme]:
    """Every distinct scheme of a grid file, in grid order."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise GeomlensError(f"cannot read sweep grid {path}.") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception:
        raise GeomlensError(f"sweep grid {path} is not valid YAML or JSON.") from None
    if isinstance(data, dict) and "grids" in data:
        data = data["grids"]
    grids = data if isinstance(data, list) else [data]
    if not grids or not all(isinstance(g, dict) and g for g in grids):
        raise GeomlensError(f"sweep grid {path} must hold mappings of scheme fields to values.")
    return expand(grids)


def expand(grids: Sequence[dict[str, Any]]) -> list[Scheme]:
    """The distinct schemes of the grids (each list value varies, each scalar is fixed)."""
    sizes = [math.prod(len(v) if isinstance(v, list) else 1 for v in g.values()) for g in grids]
    within_limit("the sweep grid", "scheme combinations", sum(sizes), "vary fewer fields")
    seen: dict[str, Scheme] = {}
    for grid in grids:
        keys = list(grid)
        values = [v if isinstance(v, list) else [v] for v in grid.values()]
        for combo in itertools.product(*values):
            scheme = scheme_from_dict(dict(zip(keys, combo, strict=True)))
            seen.setdefault(scheme.key, scheme)
    return list(seen.values())


def evaluate(
    view: ModelView,
    scheme: Scheme,
    prepared: Sequence[Prepared],
    baseline: Sequence[ChoiceScores],
    seed: int,
    batch_tokens: int = BATCH_TOKENS,
    progress: Callable[[int], None] | None = None,
    feed: str = "encoder",
    reuse: Reuse | None = None,
) -> dict[str, Any]:
    """Run one scheme on the prepared items: per-item scores and predictions, and summary.

    ``feed``: where an encoder-decoder reads test 1's vectors ("encoder" or "decoder");
    ``progress`` hears the items done; ``reuse`` shares passes with the baseline and the
    other schemes of the run (the numbers are the same without it).
    """
    gold = np.array([p.item.gold for p in prepared])
    base_pred = [b.predictions() for b in baseline]
    base = {
        k: np.array([p[k] for p in base_pred]) == gold for k in ("acc", "acc_norm", "acc_bytes")
    }
    result: dict[str, Any] = {"key": scheme.key, "label": scheme.label, "scheme": scheme.to_dict()}
    if scheme.test == "pyramidal":
        scores = pyramidal_scores(
            view,
            scheme,
            prepared,
            batch_tokens=batch_tokens,
            progress=progress,
            feed=feed,
            reuse=reuse,
        )
        preds = [s.predictions() for s in scores]
        correct = {k: np.array([p[k] for p in preds]) == gold for k in base}
        result["summary"] = summary(correct["acc"], base, seed)
        for k in ("acc_norm", "acc_bytes"):
            result["summary"][k] = rnd(float(correct[k].mean()))
        diff = max(
            abs(a - b)
            for s, bs in zip(scores, baseline, strict=True)
            for a, b in zip(s.loglik, bs.loglik, strict=True)
        )
        result["summary"]["loglik_max_abs_diff_vs_baseline"] = rnd(diff)
        result["items"] = [
            {"scores": [rnd(x) for x in s.loglik], "pred": p}
            for s, p in zip(scores, preds, strict=True)
        ]
    else:
        sims = similarity_scores(
            view, scheme, prepared, batch_tokens=batch_tokens, progress=progress, reuse=reuse
        )
        pred = np.array([int(np.argmax(s)) for s in sims])
        result["summary"] = summary(pred == gold, base, seed)
        result["items"] = [
            {"scores": [rnd(x) for x in s], "pred": {"acc": int(k)}}
            for s, k in zip(sims, pred, strict=True)
        ]
    return result


def context_layers(view: ModelView, schemes: Sequence[Scheme]) -> list[LayerRef]:
    """The layers at which some scheme reads the whole context in one pass (``concat_*``):
    the baseline's context pass can keep those vectors (``baseline_scores``'s ``layers``)."""
    found: dict[tuple[int, bool, bool], LayerRef] = {}
    for scheme in schemes:
        if scheme.segment.startswith("concat_"):
            ref = resolve_layer(scheme.layer, view.n_layers)
            found.setdefault((ref.index, ref.embedding, ref.final_norm), ref)
    return list(found.values())


def cache_path(folder: Path, scheme: Scheme) -> Path:
    return folder / "schemes" / f"{scheme.key}.json"


def load_cached(folder: Path, scheme: Scheme, identity: dict[str, Any]) -> dict[str, Any] | None:
    """A finished scheme's result for this run's identity, or None."""
    path = cache_path(folder, scheme)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data["result"] if data.get("identity") == identity else None


def run_schemes(
    view: ModelView,
    schemes: Sequence[Scheme],
    prepared: Sequence[Prepared],
    baseline: Sequence[ChoiceScores],
    folder: Path,
    identity: dict[str, Any],
    seed: int,
    batch_tokens: int = BATCH_TOKENS,
    on_scheme: SchemeProgress | None = None,
    feed: str = "encoder",
    reuse: Reuse | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Results of every scheme (cached ones read back); returns them and how many ran.

    ``identity`` must name ``feed`` wherever it matters, so that caches never mix feeds.
    ``on_scheme(i, n, scheme, cached)`` is called as each scheme starts; what it returns
    (if not None) hears the items scored and is closed when the scheme ends.
    """
    for scheme in schemes:  # every layer must exist on this model before any cache is read
        for spec in (scheme.layer, scheme.out_layer):
            if spec is not None:
                resolve_layer(spec, view.n_layers)
    results, computed = [], 0
    (folder / "schemes").mkdir(parents=True, exist_ok=True)
    for i, scheme in enumerate(schemes):
        cached = load_cached(folder, scheme, identity)
        bar = on_scheme(i, len(schemes), scheme, cached is not None) if on_scheme else None
        if cached is None:
            update = bar.update if bar is not None else None
            cached = evaluate(
                view, scheme, prepared, baseline, seed, batch_tokens, update, feed, reuse
            )
            write_json(cache_path(folder, scheme), {"identity": identity, "result": cached})
            computed += 1
        if bar is not None:
            bar.close()
        results.append(cached)
    return results, computed


def ranked(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Results sorted by normalised score (vs baseline acc), best first; ties by label."""

    def order(r: dict[str, Any]) -> tuple[float, str]:
        value = r["summary"].get(HEADLINE)
        return (-(value if value is not None else -np.inf), r["label"])

    return sorted(results, key=order)


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def table_markdown(results: Sequence[dict[str, Any]], top: int | None = None) -> str:
    """A markdown table of schemes sorted by normalised score."""
    rows = ranked(results)[:top]
    lines = [
        "| rank | scheme | acc [95% CI] | acc / baseline acc [95% CI] "
        "| acc / baseline acc_norm | key |",
        "| ---: | --- | --- | --- | --- | --- |",
    ]
    for rank, r in enumerate(rows, 1):
        s = r["summary"]
        lo, hi = s["acc_ci"]
        nlo, nhi = s[f"{HEADLINE}_ci"]
        lines.append(
            f"| {rank} | `{r['label']}` | {_fmt(s['acc'])} [{_fmt(lo)}, {_fmt(hi)}] | "
            f"{_fmt(s[HEADLINE])} [{_fmt(nlo)}, {_fmt(nhi)}] | "
            f"{_fmt(s['normalised_vs_acc_norm'])} | {r['key']} |"
        )
    return "\n".join(lines) + "\n"


def table_csv(results: Sequence[dict[str, Any]]) -> str:
    cols = [
        "rank",
        "key",
        "label",
        "acc",
        "acc_lo",
        "acc_hi",
        "normalised_vs_acc",
        "normalised_vs_acc_lo",
        "normalised_vs_acc_hi",
        "normalised_vs_acc_norm",
    ]
    lines = [",".join(cols)]
    for rank, r in enumerate(ranked(results), 1):
        s = r["summary"]
        vals = [
            rank,
            r["key"],
            f'"{r["label"]}"',
            s["acc"],
            *s["acc_ci"],
            s[HEADLINE],
            *s[f"{HEADLINE}_ci"],
            s["normalised_vs_acc_norm"],
        ]
        lines.append(",".join("" if v is None else str(v) for v in vals))
    return "\n".join(lines) + "\n"
