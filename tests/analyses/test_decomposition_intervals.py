"""Intervals over contexts: the per-group sums redo the decomposition exactly, survive
checkpoints and Ray shards, and the half-sample intervals cover planted shares about 95%
of the time."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

from geomlens.analyses.decomposition.compute import analyse_layer
from geomlens.analyses.decomposition.intervals import (
    decomposition_intervals,
    group_draws,
    half_sample_interval,
)
from geomlens.engines.merge import merge_shards
from geomlens.engines.shards import ShardResult, plan_shards
from geomlens.stats import CapturedBatch, DecompositionAccumulator
from geomlens.stats.decomposition import interval_groups


def _filled(h: np.ndarray, groups: int, batch: int = 5) -> DecompositionAccumulator:
    C, T, d = h.shape
    acc = DecompositionAccumulator([0], C, T, d, False, groups=groups)
    for s in range(0, C, batch):
        hidden = {0: torch.tensor(h[s : s + batch], dtype=torch.float32)}
        acc.update(CapturedBatch(hidden, torch.arange(C)[s : s + batch]))
    return acc


@pytest.mark.parametrize("skip_first", [False, True])
def test_a_resample_is_the_decomposition_of_the_drawn_contexts(skip_first: bool) -> None:
    rng = np.random.default_rng(0)
    h = rng.standard_normal((24, 10, 8)).astype(np.float32).astype(np.float64)
    acc = _filled(h, groups=8)
    whole = acc.finalize(0, skip_first=skip_first)
    every, rows = acc.resample(0, np.ones(8), skip_first)
    assert list(rows) == list(range(24))
    np.testing.assert_allclose(every.pos, whole.pos, atol=1e-6)
    np.testing.assert_allclose(every.ctx, whole.ctx, atol=1e-6)
    assert every.total_ss == pytest.approx(whole.total_ss, rel=1e-6)
    weights = np.array([2, 0, 1, 0, 3, 1, 0, 1])  # groups of 3 contexts, some twice
    drawn, rows = acc.resample(0, weights, skip_first)
    x = h[rows][:, int(skip_first) :]
    mu = x.mean((0, 1))
    np.testing.assert_allclose(drawn.pos, x.mean(0) - mu, atol=1e-6)
    np.testing.assert_allclose(drawn.ctx, x.mean(1) - mu, atol=1e-6)
    assert drawn.total_ss == pytest.approx(((x - mu) ** 2).sum(), rel=1e-6)
    assert drawn.n_contexts == 3 * weights.sum()


def test_groups_survive_state_merge_and_ray_shards() -> None:
    rng = np.random.default_rng(1)
    C, T, d = 10, 6, 5
    h = torch.tensor(rng.standard_normal((C, T, d)), dtype=torch.float32)
    full = DecompositionAccumulator([0], C, T, d, False, groups=5)
    full.update(CapturedBatch({0: h}, torch.arange(C)))
    again = DecompositionAccumulator.from_state_dict(full.state_dict())
    assert again.groups == 5 and torch.equal(again.group_pos_sum, full.group_pos_sum)
    shards = plan_shards(n_contexts=C, batch_size=2, n_shards=3)
    results = []
    for shard in shards:
        part = DecompositionAccumulator(
            [0],
            len(shard.rows),
            T,
            d,
            False,
            groups=5,
            context_offset=shard.rows.start,
            total_contexts=C,
        )
        rows = torch.tensor(list(shard.rows))
        part.update(CapturedBatch({0: h[rows]}, torch.arange(len(shard.rows))))
        results.append(ShardResult(shard.index, part.state_dict()))
    merged = merge_shards(DecompositionAccumulator([0], C, T, d, False, groups=5), results, shards)
    torch.testing.assert_close(merged.group_pos_sum, full.group_pos_sum, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(merged.ctx_sumsq, full.ctx_sumsq, rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match="interval groups"):
        full.merge(DecompositionAccumulator([0], C, T, d, False))


def test_group_count_follows_contexts_and_memory() -> None:
    assert interval_groups(31, 128, 128, 576) == 16  # SmolLM2 at 128 x 128: 146 MiB
    assert interval_groups(31, 12, 64, 576) == 12  # one group per context
    assert interval_groups(31, 4, 64, 576) == 0  # too few contexts
    assert interval_groups(25, 8, 1024, 1024) == 0  # 105 MiB a group: none fit
    draws = group_draws(16, 30, seed=0)
    assert draws.shape == (30, 16) and (draws.sum(1) == 8).all()


def test_half_sample_interval_is_centred_and_cut_to_the_range() -> None:
    low, high = half_sample_interval(0.5, [0.4, 0.6, 0.45, 0.55], groups=16)
    assert low < 0.5 < high and 0.5 - low == pytest.approx(high - 0.5)
    assert half_sample_interval(0.02, [0.0, 0.3, 0.01, 0.2], 16, (0.0, 1.0))[0] == 0.0
    assert half_sample_interval(0.5, [None, None, 0.4], 16) == [None, None]


def test_intervals_cover_planted_shares_about_95_percent() -> None:
    """h[c, t] = pos[t] + ctx[c] + noise with a fixed pos and Gaussian contexts: the
    shares' values at an infinite corpus are known, and the intervals over 128 contexts
    in 16 groups cover them in about 95% of seeds (100 seeds, so 0.85-1.0)."""
    C, T, d, G = 128, 16, 32, 16
    pos = np.random.default_rng(123).standard_normal((T, d)) * 0.5
    pos -= pos.mean(0)
    s_ctx, s_noise = 1.0, 0.3
    P = float((pos**2).sum(1).mean())
    total = P + s_ctx**2 * d + s_noise**2 * d
    # the context part keeps the noise averaged over T positions: a floor of sigma^2 d / T
    planted = {"share_pos": P / total, "share_ctx": (s_ctx**2 * d + s_noise**2 * d / T) / total}
    hits = dict.fromkeys(planted, 0)
    n_seeds = 100
    with threadpool_limits(1, user_api="blas"):
        for seed in range(n_seeds):
            rng = np.random.default_rng(seed)
            h = pos[None] + s_ctx * rng.standard_normal((C, 1, d))
            h = h + s_noise * rng.standard_normal((C, T, d))
            acc = _filled(h, groups=G, batch=32)
            row = analyse_layer(acc.finalize(0), None, 0, baseline=False).to_dict()
            found = decomposition_intervals(acc, [row], None, n_draws=30, seed=seed)
            for key, value in planted.items():
                low, high = found["layers"]["0"][key]
                assert low <= row[key] <= high
                hits[key] += low <= value <= high
    for key in planted:
        assert 0.85 <= hits[key] / n_seeds <= 1.0, (key, hits[key])


def test_no_groups_no_intervals_with_the_reason() -> None:
    acc = DecompositionAccumulator([0], 4, 5, 3, False)
    found = decomposition_intervals(acc, [], None)
    assert found["method"] is None and "fewer than 8" in found["why"]


@pytest.mark.parametrize("overlap", [0.0, 0.6])
def test_the_subspace_incoherence_gets_an_interval_that_finds_planted_overlap(
    overlap: float,
) -> None:
    """pos in the first 3 coordinates; each context's vector in coordinates 3..d-1, plus
    ``overlap`` times a random mix of pos's coordinates. Orthogonal subspaces give a
    mean principal-angle cosine near 0, with an interval near 0; an overlap gives an
    interval well above it that holds the whole-corpus number."""
    C, T, d, G = 64, 16, 24, 16
    rng = np.random.default_rng(5)
    angle = np.linspace(0, np.pi, T)
    pos = np.zeros((T, d))
    pos[:, 0], pos[:, 1], pos[:, 2] = 3 * np.cos(angle), 3 * np.sin(angle), angle - angle.mean()
    ctx = np.zeros((C, d))
    ctx[:, 3:] = rng.standard_normal((C, d - 3))
    ctx[:, :3] = overlap * rng.standard_normal((C, 3)) * 3
    h = pos[None] + ctx[:, None] + 0.05 * rng.standard_normal((C, T, d))
    acc = _filled(h, groups=G, batch=16)
    with threadpool_limits(1, user_api="blas"):
        row = analyse_layer(acc.finalize(0), None, 0).to_dict()
        found = decomposition_intervals(acc, [row], None, n_draws=30, seed=0)
    low, high = found["layers"]["0"]["incoherence_mean"]
    assert low <= row["incoherence_mean"] <= high
    assert found["medians"]["incoherence_mean"] == [low, high]  # one layer: its median
    assert "incoherence_mean" not in found["not_resampled"]
    if overlap == 0.0:
        assert high < 0.1
    else:
        assert low > 0.3


def test_a_subspace_wider_than_half_the_contexts_can_span_says_why_it_has_no_interval() -> None:
    """16 contexts in 8 groups: a half-sample holds 8 contexts, so its context part spans
    at most 7 dimensions, fewer than the whole corpus's k (about 13 for a random pos):
    no draw defines the subspace incoherence at that k, and the intervals say so."""
    rng = np.random.default_rng(9)
    h = rng.standard_normal((16, 1, 24)) + rng.standard_normal((1, 16, 24))
    acc = _filled(h + 0.1 * rng.standard_normal((16, 16, 24)), groups=8, batch=8)
    with threadpool_limits(1, user_api="blas"):
        row = analyse_layer(acc.finalize(0), None, 0).to_dict()
        found = decomposition_intervals(acc, [row], None, n_draws=10, seed=0)
    assert row["incoherence_k"] > 7
    assert found["layers"]["0"]["incoherence_mean"] == [None, None]
    assert "incoherence_mean" not in found["medians"] and "share_pos" in found["medians"]
    assert (
        "half of the contexts span fewer dimensions" in found["not_resampled"]["incoherence_mean"]
    )


def test_the_layers_and_their_intervals_report_progress_once_per_layer() -> None:
    """The report's bars over the position/context step: one tick per layer and view, one
    per layer's draws; the numbers are those computed without a bar."""
    from geomlens.analyses.decomposition.compute import analyse_layers

    h = np.random.default_rng(5).standard_normal((16, 6, 8))
    acc = _filled(h, groups=8)
    ticks: list[int] = []
    rows = analyse_layers(acc, skip_first=True, progress=ticks.append)
    assert ticks == [1] * len(acc.layers)
    assert rows == analyse_layers(acc, skip_first=True)
    dicts = [r.to_dict() for r in rows]
    found = decomposition_intervals(acc, dicts, n_draws=4, progress=ticks.append)
    assert ticks == [1] * 2 * len(acc.layers)
    assert found == decomposition_intervals(acc, dicts, n_draws=4)


def test_the_layers_analysed_in_threads_give_the_numbers_of_one_thread() -> None:
    """The layers (their numbers and their half-sample draws) run in one thread per torch
    thread; every layer is seeded by itself, so two threads give the same numbers as one,
    in the layers' order."""
    from geomlens.analyses.decomposition.compute import analyse_layers

    rng = np.random.default_rng(9)
    C, T, d, layers = 16, 6, 8, [0, 1, 2]
    acc = DecompositionAccumulator(layers, C, T, d, False, groups=8)
    h = {layer: rng.standard_normal((C, T, d)) * (1 + layer) for layer in layers}
    for s in range(0, C, 4):
        hidden = {k: torch.tensor(v[s : s + 4], dtype=torch.float32) for k, v in h.items()}
        acc.update(CapturedBatch(hidden, torch.arange(C)[s : s + 4]))
    found = {}
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            rows = [r.to_dict() for r in analyse_layers(acc, skip_first=True)]
            found[threads] = rows, decomposition_intervals(acc, rows, n_draws=6)
    finally:
        torch.set_num_threads(before)
    assert [r["layer"] for r in found[1][0]] == layers
    assert list(found[1][1]["layers"]) == ["0", "1", "2"]
    assert found[1] == found[2]
