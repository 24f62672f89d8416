"""Decomposition accumulator: merging shards in any order equals one pass."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from geomlens.stats import CapturedBatch, DecompositionAccumulator, NonFiniteError

C, T, D, LAYERS = 10, 12, 8, [0, 2]


def random_states(seed: int = 0) -> dict[int, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {layer: torch.randn(C, T, D, generator=g) * (layer + 1) + 3 for layer in LAYERS}


def feed(acc: DecompositionAccumulator, h: dict[int, torch.Tensor], rows: list[int]) -> None:
    index = torch.tensor(rows)
    acc.update(CapturedBatch({k: v[index] for k, v in h.items()}, index))


def test_merge_in_any_order_equals_one_pass():
    h = random_states()
    single = DecompositionAccumulator(LAYERS, C, T, D)
    for start in range(0, C, 3):
        feed(single, h, list(range(start, min(C, start + 3))))
    shards_rows = [[0, 5, 9], [1, 2], [3, 4, 6, 7, 8]]
    for order in itertools.permutations(range(3)):
        shards = []
        for rows in shards_rows:
            acc = DecompositionAccumulator(LAYERS, C, T, D)
            feed(acc, h, rows)
            shards.append(acc)
        merged = shards[order[0]].merge(shards[order[1]]).merge(shards[order[2]])
        for layer in LAYERS:
            a, b = merged.finalize(layer), single.finalize(layer)
            np.testing.assert_allclose(a.pos, b.pos, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(a.ctx, b.ctx, rtol=1e-12, atol=1e-12)
            # second moments are summed per batch in float32, then in float64
            np.testing.assert_allclose(a.second_moment, b.second_moment, rtol=1e-6)
            assert a.total_ss == pytest.approx(b.total_ss, rel=1e-12)


def test_shares_sum_to_one_and_state_round_trips():
    h = random_states(1)
    acc = DecompositionAccumulator(LAYERS, C, T, D)
    feed(acc, h, list(range(C)))
    for layer in LAYERS:
        for skip in (False, True):
            assert sum(acc.finalize(layer, skip).shares) == pytest.approx(1.0, abs=1e-12)
    again = DecompositionAccumulator.from_state_dict(acc.state_dict())
    np.testing.assert_array_equal(again.finalize(2).ctx, acc.finalize(2).ctx)


def test_incomplete_or_duplicated_contexts_are_refused():
    h = random_states()
    acc = DecompositionAccumulator(LAYERS, C, T, D)
    feed(acc, h, [0, 1])
    with pytest.raises(ValueError, match="8 contexts missing"):
        acc.finalize(0)
    feed(acc, h, list(range(C)))
    with pytest.raises(ValueError, match="2 seen more than once"):
        acc.finalize(0)


def test_non_finite_batch_leaves_state_untouched():
    h = random_states()
    acc = DecompositionAccumulator(LAYERS, C, T, D)
    feed(acc, h, [0, 1])
    before = {k: v.clone() for k, v in acc.state_dict().items()}
    bad = {k: v.clone() for k, v in h.items()}
    bad[2][3, 4, 5] = float("inf")
    with pytest.raises(NonFiniteError):
        feed(acc, bad, [2, 3])
    for k, v in acc.state_dict().items():
        assert torch.equal(v, before[k]), k
