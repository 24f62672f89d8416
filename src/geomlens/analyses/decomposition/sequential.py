"""``--contexts auto``: how many contexts decide Song & Zhong's position claims.

The capture grows in chunks along a fixed schedule of looks, C0, 2 C0, 4 C0, ... (as far as
the corpus holds, up to ``--max-contexts``: 2,048 by default, ``MAX_LOOKS`` looks), and stops
at the first look where every position claim that reads the positional estimate is decided
("reproduced" or "not reproduced", none "inconclusive"), or at the last look: a number of
windows, never a time (the wall-clock budget only cuts a run short, saying so;
``pipeline.auto``).

Stopping at the first decided look is a look at the data that a fixed C does not take:
with 95% intervals at each of K looks, a claim whose truth sits at its threshold would be
decided at some look more often than 5% of the time. The 5% is spent over the planned
looks instead (Bonferroni): every look's intervals, and the final analysis's, are at
``1 - 0.05 / K``, so the chance that any look decides such a claim is at most 5% whatever
the looks' dependence. The schedule is fixed before the capture (it depends only on C0,
the corpus's size and ``--max-contexts``), as the spending needs.

A look computes only what those claims read, on the view without position 0 after the
outlier windows are set aside (``outliers.set_aside``, as the analysis step does): each
layer's noise-corrected numbers (``position_noise.corrected``) and their half-sample
draws (the same draws of groups as ``intervals.decomposition_intervals``, the same
resampled context parts), then the claims themselves (``claims.position_claims``). A
claim decided at a look keeps its verdict (it is not tested again); when only the counted
rank claim is left undecided (``COUNTED``), the look draws no half-samples. The full
analysis runs once, after the last look. See docs/decomposition.md, "--contexts auto".
"""

from __future__ import annotations

import math
import statistics
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from geomlens.analyses.common.layer_threads import map_layers
from geomlens.analyses.decomposition import intervals, outliers, position_noise
from geomlens.analyses.decomposition.claims import position_claims
from geomlens.analyses.decomposition.compute import analyse_layer, corrected_fields
from geomlens.capturing.capture import capture_contexts
from geomlens.corpus import Windows
from geomlens.models.view import ModelView
from geomlens.reporting.claims import Claim
from geomlens.stats.decomposition import DecompositionAccumulator

Array = npt.NDArray[np.float64]

ALPHA = 0.05
"""The error spent over all looks together."""

MAX_LOOKS = 5
"""The looks of the default schedule: C0 to 16 C0 (128 to 2,048 windows, the default
``--max-contexts``), the schedule the error spending was checked on."""

SPENDING = (
    "Bonferroni over the K planned looks of a fixed doubling schedule: every look's "
    "intervals (and the final analysis's) at 1 - 0.05 / K"
)
"""How the error is spent, as the record names it."""


def looks(first: int, available: int, max_looks: int | None = None) -> tuple[int, ...]:
    """The schedule: ``first``, twice it, four times it, ... while ``available`` (the
    corpus's windows, cut to ``--max-contexts``) holds them, at most ``max_looks`` looks
    (None: no other limit); one look of all it holds when that is below ``first``."""
    if available < first:
        return (available,)
    found = [first]
    while (max_looks is None or len(found) < max_looks) and 2 * found[-1] <= available:
        found.append(2 * found[-1])
    return tuple(found)


def level(n_looks: int, alpha: float = ALPHA) -> float:
    """Each look's interval coverage: 1 - alpha / K (Bonferroni over K looks)."""
    return 1.0 - alpha / max(1, n_looks)


def gated(claims: list[Claim]) -> list[Claim]:
    """The claims the looks wait for: those that read the positional estimate (they carry
    its noise share); the topic claim reads the context vectors only."""
    return [c for c in claims if c.noise_share is not None]


def undecided(metrics: dict[str, Any], model: dict[str, Any] | None = None) -> list[str]:
    """The ids of the gated position claims still "inconclusive" in ``metrics``."""
    return [
        c.id for c in gated(position_claims(metrics, model or {})) if c.verdict == "inconclusive"
    ]


def decided(metrics: dict[str, Any], model: dict[str, Any] | None = None) -> bool:
    """Whether every position claim that reads the positional estimate is decided."""
    return not undecided(metrics, model)


def _finite(value: Any) -> float | None:
    number = None if value is None else float(value)
    return number if number is not None and math.isfinite(number) else None


def corrected_row(
    groups: position_noise.GroupPositions, ctx: Array, seed: int = 0
) -> dict[str, Any]:
    """The noise-corrected numbers of one layer as a row holds them (``{}``: undefined):
    the part of ``compute.analyse_layer``'s row that ``draw_numbers`` resamples."""
    whole = position_noise.corrected(groups, ctx, seed, ctx_svd=_svd(ctx))
    if whole is None:
        return {}
    fields = corrected_fields(whole).items()
    return {k: _finite(v) for k, v in fields if not isinstance(v, tuple)}


def draw_numbers(
    groups: position_noise.GroupPositions,
    rank: int | None,
    drawn_ctx: Callable[[np.ndarray], Array],
    draws: np.ndarray,
    seed: int = 0,
) -> list[dict[str, float]]:
    """Per draw of groups, one layer's resampled noise-corrected numbers
    (``intervals.CORRECTED``), as the analysis's draws compute them: r kept at the whole
    corpus's ``rank``, the context part of the draw's contexts (empty without ``rank``).

    Args:
        groups: the layer's positional estimates per group.
        rank: the whole corpus's r (``pos_rank_corrected``).
        drawn_ctx: a draw's weights [G] -> the context part of its contexts.
        draws: [n_draws, G] the draws (``intervals.group_draws``).
        seed: the analysis's seed.
    """
    if rank is None:
        return []
    per_draw = []
    for weights in draws:
        drawn = drawn_ctx(weights)
        found = position_noise.corrected(
            groups.subset(np.asarray(weights) > 0),
            drawn,
            seed,
            rank=int(rank),
            baseline=False,
            ctx_svd=_svd(drawn),
        )
        numbers = {} if found is None else corrected_fields(found)
        per_draw.append(
            {k: v for k in intervals.CORRECTED if (v := _finite(numbers.get(k))) is not None}
        )
    return per_draw


def _svd(x: Array) -> tuple[Array, Array]:
    _, values, vt = np.linalg.svd(np.asarray(x, dtype=np.float64), full_matrices=False)
    return values, vt


def look_metrics(
    rows: list[dict[str, Any]],
    per_draw: list[list[dict[str, float]]],
    n_groups: int,
    coverage: float,
) -> dict[str, Any]:
    """A metrics.json view the claims read (``schema.skip_first_layers`` and
    ``skip_first_intervals``): the layers' rows and, for each corrected number, the
    interval at ``coverage`` of its median over layers (a draw's median counts only when
    it has every layer).

    Args:
        rows: per layer, "layer", "n_contexts", "n_positions" and its corrected numbers.
        per_draw: per layer, each draw's corrected numbers (``draw_numbers``).
        n_groups: G, the groups drawn from.
        coverage: the intervals' level.
    """
    medians: dict[str, list[Any]] = {}
    n_draws = max((len(d) for d in per_draw), default=0)
    for key in intervals.CORRECTED:
        whole = [r[key] for r in rows if r.get(key) is not None]
        if not whole or len(whole) < len(rows):
            continue
        drawn = []
        for i in range(n_draws):
            values = [d[i][key] for d in per_draw if i < len(d) and key in d[i]]
            drawn.append(statistics.median(values) if len(values) == len(rows) else None)
        found = intervals.half_sample_interval(
            statistics.median(whole), drawn, n_groups, intervals.BOUNDS[key], level=coverage
        )
        if found[0] is not None:
            medians[key] = found
    view = {
        "method": intervals.METHOD,
        "groups": n_groups,
        "n_draws": n_draws,
        "not_resampled": {},
        "medians": medians,
        "level": coverage,
    }
    return {"decomposition": {"skip_first": True, "layers": rows, "intervals": view}}


COUNTED = frozenset({"song.pos_low_rank"})
"""The waited-for claims that read no interval (a count of eigenvalues above the noise
floor, with its guards): a look where only these are undecided draws no half-samples."""


def accumulator_look(
    acc: DecompositionAccumulator,
    rerun: Callable[[list[int]], DecompositionAccumulator],
    coverage: float,
    seed: int = 0,
    resampled: bool = True,
) -> dict[str, Any]:
    """``look_metrics`` of a capture: the outlier windows set aside (``rerun``: windows ->
    an accumulator of them alone), then on the view without position 0, in threads,
    every layer's row (``compute.analyse_layer``) and, with ``resampled``, its draws
    (``draw_numbers``; without, no interval: the claims that read one stay
    inconclusive)."""
    clean = outliers.set_aside(acc, rerun).clean
    draws = intervals.group_draws(clean.groups, intervals.N_DRAWS, seed)

    def one(layer: int) -> tuple[dict[str, Any], list[dict[str, float]]]:
        groups = position_noise.group_positions(clean, layer, True)
        stats = clean.finalize(layer, skip_first=True, second_moment=False)
        # the analysis's own row (no labels: the topic claim is not waited for)
        found = analyse_layer(stats, None, seed, groups=groups).to_dict()
        row = {k: v for k, v in found.items() if not isinstance(v, list)}
        if groups is None or not resampled:
            return row, []
        resample = clean.resampler(layer, True)
        rank = row.get("pos_rank_corrected")
        return row, draw_numbers(groups, rank, lambda w: resample(w)[0].ctx, draws, seed)

    found = map_layers(one, clean.layers)
    if resampled:
        remember(
            acc,
            seed,
            {
                layer: (r.get("pos_rank_corrected"), d)
                for layer, (r, d) in zip(clean.layers, found, strict=True)
            },
        )
    return look_metrics([r for r, _ in found], [d for _, d in found], clean.groups, coverage)


_LAST: list[tuple[weakref.ref[DecompositionAccumulator], int, dict[int, Any]]] = []
"""The last look's draws of the noise-corrected numbers: (its accumulator, seed,
{layer: (r, per-draw numbers)}); the final analysis of the same accumulator reuses them."""


def remember(acc: DecompositionAccumulator, seed: int, draws: dict[int, Any]) -> None:
    """Keep a look's per-layer draws (``accumulator_look``) for ``reused_draws``."""
    _LAST[:] = [(weakref.ref(acc), seed, draws)]


def reused_draws(acc: DecompositionAccumulator, seed: int) -> dict[int, Any]:
    """{layer: (r, per-draw noise-corrected numbers)} of the last look when it was taken on
    this very accumulator with this seed (the same windows, outliers and draws of groups),
    else {}: what ``intervals.decomposition_intervals`` need not draw again."""
    for ref, kept_seed, draws in _LAST:
        if ref() is acc and kept_seed == seed:
            return draws
    return {}


@dataclass(frozen=True)
class Look:
    """One look: its contexts, the gated claims' verdicts, and those still undecided."""

    contexts: int
    verdicts: dict[str, str]
    undecided: list[str]

    @property
    def decided(self) -> bool:
        return not self.undecided

    @property
    def measured(self) -> bool:
        """Whether any gated claim was measured (a verdict other than "not measured")."""
        return any(v != "not measured" for v in self.verdicts.values())


@dataclass(frozen=True)
class PositionClaimsRule:
    """The decomposition's rule for ``--contexts auto`` (``pipeline.request.ContextRule``):
    the schedule, each look's level, a look, and where the record goes."""

    alpha: float = ALPHA
    max_looks: int | None = None
    spending: str = SPENDING

    def looks(self, first: int, available: int) -> tuple[int, ...]:
        return looks(first, available, self.max_looks)

    def level(self, n_looks: int) -> float:
        return level(n_looks, self.alpha)

    def look(
        self,
        acc: DecompositionAccumulator,
        view: ModelView,
        windows: Windows,
        batch_size: int,
        coverage: float,
        model: dict[str, Any],
        earlier: dict[str, str] | None = None,
    ) -> Look:
        """The gated claims judged on ``acc`` (the first ``acc.n_contexts`` of
        ``windows``), intervals at ``coverage``; only those still undecided.

        A claim an earlier look decided keeps that verdict (``earlier``: claim id ->
        the verdict it was decided with): it is not tested again, so the error spent on
        it stays that of the looks that tested it. When every claim still undecided is
        one that reads no interval (``COUNTED``), the look draws no half-samples (most
        of a look's work)."""
        decided = {
            k: v for k, v in (earlier or {}).items() if v in ("reproduced", "not reproduced")
        }

        def rerun(rows: list[int]) -> DecompositionAccumulator:
            return capture_contexts(view, windows, acc, rows, batch_size)

        waiting = {k for k in earlier or {} if k not in decided}
        resampled = not earlier or not waiting <= COUNTED
        metrics = accumulator_look(acc, rerun, coverage, resampled=resampled)
        claims = gated(position_claims(metrics, model))
        verdicts = {c.id: decided.get(c.id, c.verdict) for c in claims}
        return Look(
            acc.n_contexts,
            verdicts,
            [k for k, v in verdicts.items() if v == "inconclusive"],
        )

    @contextmanager
    def finishing(self, coverage: float) -> Iterator[None]:
        """Around the final analysis and its claims: intervals at the looks' level."""
        with intervals.interval_level(coverage):
            yield

    def sections(self, metrics: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
        """metrics.json sections to set: the decomposition's, with the record under
        "auto_contexts" (none when the run has no decomposition)."""
        found = metrics.get("decomposition")
        return {} if not found else {"decomposition": {**found, "auto_contexts": record}}


RULE = PositionClaimsRule()
"""The rule the decomposition registers (``entry.ENTRY.contexts_rule``)."""


def auto_contexts_reading(metrics: dict[str, Any]) -> str | None:
    """The page's line on ``--contexts auto`` (None for a run of fixed contexts)."""
    found = (metrics.get("decomposition") or {}).get("auto_contexts")
    if not found:
        return None
    why = {
        "decided": "every position claim that reads the positional estimate was decided",
        "budget": "the wall-clock safety --budget cut it short: "
        + str(found.get("cut_short") or "the verdicts are those of a shorter run"),
        "last look": "the last planned look (--max-contexts) was reached",
        "nothing to decide": "no position claim could be measured on these windows",
    }.get(found.get("stopped"), str(found.get("stopped")))
    looks = ", ".join(str(n) for n in found.get("looks", []))
    return (
        f"--contexts auto: looks at {looks} windows; stopped at {found.get('contexts')} "
        f"because {why}. Error spent over the "
        f"{len(found.get('planned', []))} planned looks ({found.get('alpha_spending')}): "
        f"intervals at {100 * found.get('level', 0.95):.1f}%."
    )
