"""A positional part at float64 rounding level has nothing to measure: nulls with a reason,
as for an exactly zero one, never ranks or coherences of rounding."""

from __future__ import annotations

import numpy as np
import pytest

from geomlens.analyses.decomposition.compute import ROUNDING_SHARE, analyse_layer
from geomlens.stats.decomposition import DecompositionStats


def stats_with(pos_scale: float, seed: int = 0) -> DecompositionStats:
    """A layer of 12 contexts x 10 positions whose context part has unit-scale energy and
    whose positional part is ``pos_scale`` times a random one."""
    rng = np.random.default_rng(seed)
    c, t, d = 12, 10, 16
    pos = rng.standard_normal((t, d)) * pos_scale
    pos -= pos.mean(0)
    ctx = rng.standard_normal((c, d))
    ctx -= ctx.mean(0)
    resid = rng.standard_normal((c, t, d)) * 0.1
    total = c * float(np.sum(pos**2)) + t * float(np.sum(ctx**2)) + float(np.sum(resid**2))
    return DecompositionStats(
        layer=3,
        mean=np.zeros(d),
        pos=pos,
        ctx=ctx,
        total_ss=total,
        second_moment=None,
        n_contexts=c,
        positions=np.arange(t),
        skip_first=False,
    )


@pytest.mark.parametrize("scale", [1e-9, 1e-7])
def test_rounding_level_positions_get_nulls_with_their_reason(scale):
    stats = stats_with(scale)
    assert 0 < stats.raw_shares[0] <= ROUNDING_SHARE
    found = analyse_layer(stats, baseline=False)
    assert found.pos_nothing_to_measure is not None
    assert "float64 rounding" in found.pos_nothing_to_measure
    zero = analyse_layer(stats_with(0.0), baseline=False)
    for key in ("pos_rank", "pos_rank95", "pos_stable_rank", "pos_low_freq", "coherence_max"):
        assert getattr(found, key) == getattr(zero, key) or (
            getattr(found, key) != getattr(found, key)  # nan, as for an exactly zero part
        ), key


def test_a_measurable_positional_part_is_measured():
    found = analyse_layer(stats_with(1e-3), baseline=False)
    assert found.pos_nothing_to_measure is None
    assert found.pos_rank95 and found.pos_rank95 >= 1
    assert found.pos_stable_rank >= 1
