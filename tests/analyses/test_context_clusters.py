"""k-means and the adjusted Rand index in numpy, against scikit-learn's (a test-only
dependency: ``decompose`` does not import it)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score

from geomlens.analyses.decomposition.context_clusters import adjusted_rand_index, kmeans, kmeans_ari


@pytest.mark.parametrize("seed", range(6))
def test_adjusted_rand_index_equals_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    a = rng.integers(0, int(rng.integers(1, 6)), n)
    b = np.where(rng.random(n) < 0.5, a, rng.integers(0, 4, n))
    assert adjusted_rand_index(a, b) == pytest.approx(adjusted_rand_score(a, b), abs=1e-12)


def test_adjusted_rand_index_edge_cases():
    same = np.array([0, 0, 1, 1, 2])
    assert adjusted_rand_index(same, (same + 1) % 3) == 1.0  # renamed clusters
    assert adjusted_rand_index(np.zeros(5, int), np.zeros(5, int)) == 1.0
    assert adjusted_rand_index(np.arange(5), np.arange(5)) == 1.0
    assert adjusted_rand_index(np.array([0]), np.array([3])) == 1.0


def blobs(seed: int, k: int = 4, per: int = 16, d: int = 32, spread: float = 0.3):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d)) * 3
    labels = np.repeat(np.arange(k), per)
    return centres[labels] + spread * rng.standard_normal((k * per, d)), labels


@pytest.mark.parametrize("seed", range(4))
def test_kmeans_recovers_planted_clusters(seed):
    x, labels = blobs(seed)
    assert adjusted_rand_index(labels, kmeans(x, 4, seed=seed)) == 1.0
    assert kmeans_ari(x, labels, seed) == 1.0


@pytest.mark.parametrize("seed", range(4))
def test_kmeans_inertia_matches_sklearn(seed):
    """On overlapping clusters (no single right answer) the best of 10 runs reaches the
    inertia scikit-learn's KMeans reaches, within 1%."""
    x, _ = blobs(seed, k=5, per=20, d=8, spread=2.5)
    ours = kmeans(x, 5, seed=seed)
    inertia = sum(((x[ours == j] - x[ours == j].mean(0)) ** 2).sum() for j in np.unique(ours))
    theirs = KMeans(n_clusters=5, n_init=10, random_state=seed).fit(x).inertia_
    assert inertia <= theirs * 1.01
    assert len(np.unique(ours)) == 5  # no empty cluster


def test_kmeans_is_deterministic():
    x, _ = blobs(0, spread=2.0)
    assert np.array_equal(kmeans(x, 4, seed=3), kmeans(x, 4, seed=3))


def test_decompose_does_not_import_sklearn():
    """Importing scikit-learn would add about 110 MiB to decompose's peak (the benchmark
    in benchmarks/decompose_memory.py holds it to 1.25x capture's)."""
    code = "import sys, geomlens.analyses.decomposition.command; print('sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
