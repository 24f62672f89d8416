"""Merge shard states into one accumulator: each shard exactly once, sums in a fixed tree.

A shard's state covers only its own contexts. The per-context parts (context sums,
position-0 vectors, the seen counts) are placed at the shard's rows, which is exact; the
parts summed over contexts (position sums, sums of squares, second moments) are added
pairwise in a balanced tree over shard ids. The tree depends only on the shard plan, not
on which worker finished first, so a plan gives the same bytes every time; against the
in-process capture, which adds batch after batch, only the order of additions differs:
relative differences of order 1e-16 per float64 addition, far below 1e-9, and about 6e-8
in the interval groups' positional sums, kept in float32, where a group spans two shards
(docs/scaling.md, "Same answer").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

from geomlens.engines.shards import Shard, ShardResult
from geomlens.errors import GeomlensError
from geomlens.stats import DecompositionAccumulator

T = TypeVar("T")

#: state entries indexed by context, and the axis of that index
PER_CONTEXT = {"ctx_sum": 1, "first": 1, "seen": 0, "ctx_sumsq": 1, "window_norms": 1}
#: state entries summed over contexts (a shard's interval groups are the run's)
SUMMED = ("pos_sum", "sumsq", "second", "group_pos_sum", "group_sketch")


def tree_reduce(items: Sequence[T], combine: Callable[[T, T], T]) -> T:
    """Combine neighbours pairwise, level by level: ((0+1)+(2+3))+(4+5)... (fixed order)."""
    if not items:
        raise ValueError("nothing to reduce")
    level = list(items)
    while len(level) > 1:
        paired = [combine(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def _add(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: a[k] + b[k] for k in a}


def select_once(results: Sequence[ShardResult], shards: Sequence[Shard]) -> list[ShardResult]:
    """One result per planned shard, in shard order (later copies of an id are dropped).

    Raises GeomlensError if a planned shard has no result or a result names no planned shard.
    """
    planned = {s.index for s in shards}
    first: dict[int, ShardResult] = {}
    for result in results:
        if result.shard not in planned:
            raise GeomlensError(f"a worker returned shard {result.shard}, which was not planned.")
        first.setdefault(result.shard, result)
    missing = sorted(planned - set(first))
    if missing:
        raise GeomlensError(f"shards {missing} never came back from the workers.")
    return [first[s.index] for s in shards]


def merge_shards(
    base: DecompositionAccumulator, results: Sequence[ShardResult], shards: Sequence[Shard]
) -> DecompositionAccumulator:
    """``base`` (all zeros, or a checkpoint of earlier batches) plus every shard exactly once.

    Returns a new accumulator on the host; checks that every context is then seen once.
    """
    ordered = select_once(results, shards)
    state = base.state_dict()
    state = {k: v.clone() for k, v in state.items()}
    layers = state["layers"].tolist()
    for result, shard in zip(ordered, shards, strict=True):
        if result.state["layers"].tolist() != layers:
            raise GeomlensError(f"shard {shard.index} covers other layers than the run.")
        if result.state["seen"].shape[0] != len(shard.rows):
            raise GeomlensError(f"shard {shard.index} covers other contexts than planned.")
    if ordered:
        keys = [k for k in SUMMED if k in state]
        sums = tree_reduce([{k: r.state[k] for k in keys} for r in ordered], _add)
        for k in keys:
            state[k] = state[k] + sums[k]
        for result, shard in zip(ordered, shards, strict=True):
            for k, axis in ((k, a) for k, a in PER_CONTEXT.items() if k in state):
                state[k].narrow(axis, shard.rows.start, len(shard.rows)).add_(result.state[k])
    acc = DecompositionAccumulator.from_state_dict(state)
    seen = acc.seen
    covered: set[int] = set()
    for shard in shards:
        covered.update(shard.rows)
    rows = torch.tensor(sorted(covered), dtype=torch.int64)
    if len(rows) and not bool((seen[rows] == 1).all()):
        twice = int((seen > 1).sum())
        raise GeomlensError(f"after merging, {twice} contexts were counted more than once.")
    return acc


#: state entries summed within each interval group, and the axis of the groups
GROUPED = {"group_pos_sum": 1, "group_sketch": 1}


def fold_groups(tensor: torch.Tensor, axis: int, into: int, start: int) -> torch.Tensor:
    """Groups g of ``tensor`` (along ``axis``) added into group ``start + g // 2`` of
    ``into`` groups: contiguous groups of C contexts are pairwise the groups of those
    contexts among 2C (``floor(floor(c G / C) / 2) = floor(c G / 2C)``)."""
    shape = list(tensor.shape)
    shape[axis] = into
    out = torch.zeros(shape, dtype=tensor.dtype)
    index = start + torch.arange(tensor.shape[axis]) // 2
    return out.index_add_(axis, index, tensor)


def extend(
    first: DecompositionAccumulator, chunk: DecompositionAccumulator
) -> DecompositionAccumulator:
    """The accumulator over ``first``'s contexts followed by ``chunk``'s, as many of each
    (``--contexts auto`` doubles the contexts at each look): the per-context parts placed
    one after the other, the sums added, and each one's interval groups folded pairwise into
    the groups of the whole (``first``'s into the first half, ``chunk``'s into the second),
    exactly the groups a capture of all of them keeps. Both must be complete, with the same
    layers, grid and an even number of groups."""
    if first.n_contexts != chunk.n_contexts or first.groups != chunk.groups:
        raise ValueError("extend takes two accumulators of as many contexts and groups")
    if first.groups % 2:
        raise ValueError("extend folds groups pairwise: it needs an even number of them")
    a, b = first.state_dict(), chunk.state_dict()
    if a.keys() != b.keys() or not torch.equal(a["layers"], b["layers"]):
        raise ValueError("extend takes two accumulators of the same layers and sums")
    state: dict[str, torch.Tensor] = {"layers": a["layers"]}
    for key in a.keys() - {"layers"}:
        if key in PER_CONTEXT:
            state[key] = torch.cat([a[key], b[key]], dim=PER_CONTEXT[key])
        elif key in GROUPED:
            axis, g = GROUPED[key], first.groups
            state[key] = fold_groups(a[key], axis, g, 0) + fold_groups(b[key], axis, g, g // 2)
        elif key in SUMMED:
            state[key] = a[key] + b[key]
        else:  # an entry neither list names: joining it blindly could be wrong
            raise ValueError(f"extend does not know how to join the state entry {key!r}")
    return DecompositionAccumulator.from_state_dict(state)
