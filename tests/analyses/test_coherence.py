"""The paper's incoherence: the mutual coherence of the positional and context vectors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from geomlens.analyses.decomposition import incoherence
from geomlens.analyses.decomposition.incoherence import abs_cosine_summary, vector_coherence


def test_vectors_in_orthogonal_subspaces_are_incoherent_and_a_shared_one_is_not() -> None:
    rng = np.random.default_rng(0)
    d = 64
    pos = np.zeros((40, d))
    pos[:, :4] = rng.standard_normal((40, 4))
    ctx = np.zeros((30, d))
    ctx[:, 4:8] = rng.standard_normal((30, 4))
    planted = vector_coherence(pos, ctx, seed=1)
    assert planted.max_cos == pytest.approx(0.0, abs=1e-12)
    assert planted.mean_cos == pytest.approx(0.0, abs=1e-12)
    ctx[3] = 2.5 * pos[7]  # one context vector along a positional one
    shared = vector_coherence(pos, ctx, seed=1)
    assert shared.max_cos == pytest.approx(1.0, abs=1e-12)
    # Gaussian vectors: mu near sqrt(2 ln(2 T C) / d) (within a factor of 1.5 either way)
    expected = math.sqrt(2 * math.log(2 * 40 * 30) / d)
    assert expected / 1.5 < shared.random_max_cos < expected * 1.5
    assert shared.random_mean_cos == pytest.approx(math.sqrt(2 / (math.pi * d)), rel=0.15)


def test_blocks_of_rows_give_the_whole_matrix_numbers(monkeypatch) -> None:
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((50, 16)), rng.standard_normal((70, 16))
    a[5] = 0.0  # a zero row is left out
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    whole = np.abs(unit(np.delete(a, 5, 0)) @ unit(b).T)
    monkeypatch.setattr(incoherence, "PAIR_BLOCK_BYTES", 8 * 70 * 3)  # 3 rows a block
    top, mean = abs_cosine_summary(a, b)
    assert top == pytest.approx(whole.max(), abs=1e-12)
    assert mean == pytest.approx(whole.mean(), abs=1e-12)


def test_the_random_level_is_the_expected_coherence_of_random_vectors() -> None:
    """The level has no draw of its own: it matches the mean over many Monte Carlo draws
    (within 2%, where one draw varies by about 8%), and the exact mean |cos|."""
    n_pos, n_ctx, d, draws = 12, 20, 48, 300
    rng = np.random.default_rng(5)
    tops, means = [], []
    for _ in range(draws):
        top, mean = abs_cosine_summary(
            rng.standard_normal((n_pos, d)), rng.standard_normal((n_ctx, d))
        )
        tops.append(top)
        means.append(mean)
    level, mean_level = incoherence.random_coherence(n_pos, n_ctx, d)
    assert level == pytest.approx(np.mean(tops), rel=0.02)
    assert np.std(tops) / level > 0.05  # one draw would not do
    assert mean_level == pytest.approx(np.mean(means), rel=0.01)
    # exact in the plane and in R^3: E|cos| = 2 / pi and 1 / 2
    assert incoherence.random_coherence(1, 1, 2)[1] == pytest.approx(2 / math.pi, abs=1e-12)
    assert incoherence.random_coherence(1, 1, 3)[0] == pytest.approx(0.5, abs=1e-9)
