"""The circular block bootstrap of a mean over dependent positions, and its use in the walk.

Planted series with a known mean: a persistent two-state Markov chain (neighbours strongly
dependent, as the positions of one text are), where the block bootstrap should cover the
mean about 95% of the time and the Wilson interval, which takes the values as independent,
clearly less often; and an i.i.d. series, where both should.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from geomlens.analyses.walk.walks import EncodingWalk
from geomlens.stats.intervals import N_BOOT, block_bootstrap_mean, wilson
from geomlens.stats.rounding import sig

P = 0.3  # stationary share of ones
N = 300  # positions per series
SERIES = 200  # series per coverage estimate


def _chains(seed: int, lag1: float) -> npt.NDArray[np.bool_]:
    """[SERIES, N] 0/1 Markov chains started from their stationary law, mean P, with lag-1
    autocorrelation ``lag1`` (P(1 -> 0) = (1 - lag1)(1 - P), P(0 -> 1) = (1 - lag1) P;
    lag1 = 0: i.i.d. draws)."""
    rng = np.random.default_rng(seed)
    to_zero, to_one = (1 - lag1) * (1 - P), (1 - lag1) * P
    u = rng.random((SERIES, N))
    x = np.empty((SERIES, N), dtype=bool)
    x[:, 0] = u[:, 0] < P
    for t in range(1, N):
        x[:, t] = np.where(x[:, t - 1], u[:, t] >= to_zero, u[:, t] < to_one)
    return x


def _covers(record: dict) -> bool:
    return bool(record["low"] <= P <= record["high"])


def _coverage(x: npt.NDArray[np.bool_]) -> tuple[float, float]:
    """Shares of the series whose block-bootstrap and Wilson intervals cover P."""
    block = np.mean([_covers(block_bootstrap_mean(s, seed=0)) for s in x])
    plain = np.mean([_covers(wilson(int(s.sum()), s.size)) for s in x])
    return float(block), float(plain)


def test_dependent_series_coverage() -> None:
    # stay in 1 with probability 0.79, in 0 with 0.91: runs of ~5 ones and ~11 zeros, an
    # effective sample several times smaller than N
    block, plain = _coverage(_chains(seed=1, lag1=0.7))
    assert 0.85 <= block <= 0.99, (block, plain)
    assert plain <= block - 0.15, (block, plain)


def test_iid_series_coverage() -> None:
    block, plain = _coverage(_chains(seed=2, lag1=0.0))
    assert 0.88 <= block <= 0.99, (block, plain)
    assert 0.88 <= plain <= 0.99, (block, plain)


def test_record_and_determinism() -> None:
    x = _chains(seed=3, lag1=0.7)[0].astype(np.float64)
    r = block_bootstrap_mean(x, seed=5)
    assert r == block_bootstrap_mean(x.copy(), seed=5)
    assert r != block_bootstrap_mean(x, seed=6)
    assert r["value"] == sig(x.mean())
    assert r["low"] <= r["value"] <= r["high"]
    assert r["n"] == N and r["n_boot"] == N_BOOT
    assert r["block"] == round(math.sqrt(N)) == 17
    assert "circular block bootstrap" in r["method"] and "17" in r["method"]
    custom = block_bootstrap_mean(x, seed=5, n_boot=200, block=40)
    assert custom["block"] == 40 and custom["n_boot"] == 200


def test_small_series() -> None:
    empty = block_bootstrap_mean(np.zeros(0), seed=0)
    assert empty["n"] == 0 and empty["block"] == 1
    assert all(math.isnan(empty[k]) for k in ("value", "low", "high"))
    one = block_bootstrap_mean(np.array([1.0]), seed=0)
    assert one["value"] == one["low"] == one["high"] == 1.0
    assert one["n"] == 1 and one["block"] == 1
    # a block longer than the series is cut to it
    assert block_bootstrap_mean(np.arange(5.0), seed=0, block=9)["block"] == 5


def test_encoding_walk_summary_intervals() -> None:
    rng = np.random.default_rng(0)
    layers, t, k = 4, 40, 3

    def ranks(n: int) -> npt.NDArray[np.int64]:
        return rng.integers(0, 20, size=(layers, n))

    def layer_or_never(n: int) -> npt.NDArray[np.int64]:
        return rng.integers(-1, layers, size=n)

    walk = EncodingWalk(
        layer_names=tuple(str(i) for i in range(layers)),
        k=k,
        input_ids=rng.integers(0, 50, size=t),
        top_dot=rng.integers(0, 50, size=(layers, t, k)),
        top_cos=rng.integers(0, 50, size=(layers, t, k)),
        own_rank_dot=ranks(t),
        own_rank_cos=ranks(t),
        next_rank_dot=ranks(t - 1),
        next_rank_cos=ranks(t - 1),
        leave_dot=layer_or_never(t),
        leave_cos=layer_or_never(t),
        arrive_dot=layer_or_never(t - 1),
        arrive_cos=layer_or_never(t - 1),
    )
    for metric in ("cos", "dot"):
        s = walk.summary(metric)
        leave_ci, arrive_ci = s["frac_never_leave_ci"], s["frac_never_arrive_ci"]
        assert leave_ci["value"] == s["frac_never_leave"]
        assert arrive_ci["value"] == s["frac_never_arrive"]
        assert leave_ci["n"] == t and arrive_ci["n"] == t - 1
        assert leave_ci["low"] <= leave_ci["value"] <= leave_ci["high"]
        assert arrive_ci["low"] <= arrive_ci["value"] <= arrive_ci["high"]
        assert s == walk.summary(metric)
    assert walk.to_dict()["cos"] == walk.summary("cos")
