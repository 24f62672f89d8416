"""W_QK's low-rank part at the rank its own spectrum gives (ScreeNOT), on planted matrices:
low rank r plus diagonal plus noise, in the positional directions or not, and the two W_QK
claims deciding on them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from geomlens.analyses.attention.claims import WHOLE_RESIDUAL, attention_claims
from geomlens.analyses.attention.qk_basis import (
    Factored,
    fit_low_rank_diagonal_factored,
    qk_rank,
    qk_singular_values,
    whole_qk,
)

D, K = 96, 8


def planted_qk(
    seed: int, rank: int, inside: bool = True, noise: float = 0.02, diagonal: float = 0.2
) -> tuple[Factored, np.ndarray]:
    """(W = L + D + N as factors W I^T, U [D, K]): L of rank ``rank`` with eigenvalues
    4, 3.5, 3, ... (a Gram-like part, as the positional one is) in directions inside U (``inside``) or away from it, D a diagonal of mean
    0.5 and spread ``diagonal``, N Gaussian with entries of scale ``noise`` (the bulk of
    D + N ends near 1.5, under the weakest planted direction)."""
    rng = np.random.default_rng(seed)
    frame = np.linalg.qr(rng.standard_normal((D, D)))[0]
    U = frame[:, :K]
    pool = frame[:, :K] if inside else frame[:, K:]
    directions = pool @ np.linalg.qr(rng.standard_normal((pool.shape[1], rank)))[0]
    strengths = 4.0 - 0.5 * np.arange(rank)
    W = (directions * strengths) @ directions.T
    W += np.diag(0.5 + diagonal * rng.standard_normal(D))
    W += noise * rng.standard_normal((D, D))
    return Factored(W, np.eye(D)), U


@pytest.mark.parametrize("rank", [1, 3, 5])
def test_screenot_reads_the_planted_rank_from_w_qks_own_spectrum(rank: int) -> None:
    for seed in range(3):
        qk, _ = planted_qk(seed, rank)
        assert qk_rank(qk) == rank


def test_a_head_without_a_low_rank_part_gets_rank_zero_and_a_diagonal_fit() -> None:
    qk, _ = planted_qk(0, 0)
    assert qk_rank(qk) == 0
    residual, P, R = fit_low_rank_diagonal_factored(qk, 0)
    assert P.shape == R.shape == (D, 0)
    whole = whole_qk(qk, np.eye(D)[:, :K], 0, seed=0)
    assert whole.in_basis is None and whole.low_rank_share == 0.0
    W = qk.A @ qk.B.T
    off = W - np.diag(np.diag(W))
    assert residual == pytest.approx(np.linalg.norm(off) / np.linalg.norm(W))


def test_singular_values_of_factors_equal_those_of_the_product() -> None:
    rng = np.random.default_rng(1)
    qk = Factored(rng.standard_normal((40, 6)), rng.standard_normal((40, 6)))
    values = qk_singular_values(qk)
    assert values.shape == (40,) and np.all(values[6:] == 0)
    np.testing.assert_allclose(values, np.linalg.svd(qk.A @ qk.B.T, compute_uv=False), atol=1e-10)


def test_the_whole_fit_at_the_screenot_rank_fits_the_planted_structure() -> None:
    qk, U = planted_qk(2, 3)
    fit = whole_qk(qk, U, qk_rank(qk), seed=0)
    assert fit.rank == 3
    assert fit.residual < WHOLE_RESIDUAL < fit.baseline_residual
    assert fit.in_basis is not None and fit.baseline_in_basis is not None
    assert fit.in_basis > 0.95 > 0.5 > fit.baseline_in_basis
    away = whole_qk(*planted_qk(2, 3, inside=False), rank=3, seed=0)
    assert away.in_basis is not None and away.in_basis < 0.1
    # L's share of ||W||^2: the planted part's 16 + 12.25 + 9 against about 0.29 D + 0.04 D
    assert 0.4 < fit.low_rank_share < 0.7


def metrics(heads: list[tuple[Factored, np.ndarray]], noise_share: float = 0.02) -> dict[str, Any]:
    """A run's metrics with one block of planted heads and a quiet positional estimate."""
    rows = []
    for h, (qk, U) in enumerate(heads):
        fit = whole_qk(qk, U, qk_rank(qk), seed=h)
        rows.append(
            {
                "head": h,
                "rank": fit.rank,
                "residual": 0.5,
                "baseline_residual": 0.9,
                "share_in_basis": 0.1,
                "whole_residual": fit.residual,
                "whole_baseline_residual": fit.baseline_residual,
                "whole_low_rank_in_basis": fit.in_basis,
                "whole_baseline_low_rank_in_basis": fit.baseline_in_basis,
                "whole_low_rank_share": fit.low_rank_share,
            }
        )
    layer = {
        "layer": 1,
        "skip_first": True,
        "n_contexts": 128,
        "n_positions": 127,
        "pos_noise_share": noise_share,
    }
    return {
        "decomposition": {"skip_first": True, "layers": [layer]},
        "attention": {"qk_basis": [{"layer": 1, "k": K, "rank": None, "heads": rows}]},
    }


def verdicts(m: dict[str, Any]) -> dict[str, str]:
    return {c.id: c.verdict for c in attention_claims(m, {})}


def test_the_claims_decide_on_planted_heads_at_their_own_ranks() -> None:
    inside = verdicts(metrics([planted_qk(s, r) for s, r in ((0, 1), (1, 3), (2, 5))]))
    assert inside["song.wqk_low_rank_plus_diagonal"] == "reproduced"
    assert inside["song.wqk_low_rank_positional"] == "reproduced"
    away = verdicts(metrics([planted_qk(s, 3, inside=False) for s in range(3)]))
    assert away["song.wqk_low_rank_plus_diagonal"] == "reproduced"
    assert away["song.wqk_low_rank_positional"] == "not reproduced"
    # a bulk with nothing standing out: rank 0 everywhere, no low-rank part to place
    rng = np.random.default_rng(0)
    bulk = [(Factored(rng.standard_normal((D, D)), np.eye(D)), np.eye(D)[:, :K]) for _ in "ab"]
    none = verdicts(metrics(bulk))
    assert none["song.wqk_low_rank_plus_diagonal"] == "not reproduced"
    assert none["song.wqk_low_rank_positional"].startswith("not measured: no head's W_QK")
