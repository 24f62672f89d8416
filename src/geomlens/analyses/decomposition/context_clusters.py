"""Do context vectors cluster by document label?

Mean absolute cosine between context vectors of the same and of different labels, and
the adjusted Rand index of k-means on the context vectors against the labels.

k-means (Lloyd's algorithm from k-means++ seeds, best of ``n_init`` by inertia) and the
adjusted Rand index are written here in numpy: scikit-learn's would add about 110 MiB of
imports (scipy, joblib, ...) to ``decompose``, whose peak memory is held to 1.25x that of
``capture`` (docs/benchmarks.md). Both are checked against scikit-learn's in the tests.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController

from geomlens.errors import GeomlensError

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ContextClusters:
    """Label structure of the context vectors.

    Attributes:
        n_labels: number of distinct labels.
        cos_within: mean |cosine| over pairs of distinct contexts with the same label.
        cos_between: mean |cosine| over pairs with different labels.
        ari: adjusted Rand index of k-means (k = n_labels) against the labels.
    """

    n_labels: int
    cos_within: float
    cos_between: float
    ari: float


def encode_labels(
    labels: Sequence[object] | npt.NDArray[np.generic], n: int
) -> npt.NDArray[np.int64]:
    """Labels as integer codes 0..K-1 (in sorted order of the distinct labels).

    Args:
        labels: [C] one label per context (ints or strings).
        n: expected number of contexts.

    Raises:
        GeomlensError: when the number of labels is not ``n``.
    """
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise GeomlensError(
            f"got {arr.size} labels for {n} contexts: give exactly one label per context"
        )
    _, codes = np.unique(arr, return_inverse=True)
    return np.asarray(codes, dtype=np.int64).reshape(-1)


def cosine_matrix(x: Array) -> Array:
    """Cosine similarities between the rows of ``x`` (zero rows give 0).

    Args:
        x: [C, d] vectors.

    Returns:
        [C, C] cosines.
    """
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    u = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    return u @ u.T


def within_between(ctx: Array, codes: npt.NDArray[np.int64]) -> tuple[float, float]:
    """Mean |cosine| within and between labels, over pairs of distinct contexts.

    Args:
        ctx: [C, d] context vectors.
        codes: [C] integer labels.

    Returns:
        (within, between); nan where there is no such pair.
    """
    cos = np.abs(cosine_matrix(ctx))
    same = codes[:, None] == codes[None, :]
    off = ~np.eye(len(codes), dtype=bool)
    w, b = same & off, ~same
    within = float(cos[w].mean()) if w.any() else math.nan
    between = float(cos[b].mean()) if b.any() else math.nan
    return within, between


def _kmeans_pp(x: Array, k: int, rng: np.random.Generator) -> Array:
    """k-means++ seeds: each next centre drawn with probability proportional to the squared
    distance to the nearest centre chosen so far. Returns [k, d]."""
    centres = [x[rng.integers(len(x))]]
    d2 = ((x - centres[0]) ** 2).sum(1)
    for _ in range(1, k):
        total = d2.sum()
        i = int(rng.choice(len(x), p=d2 / total)) if total > 0 else int(rng.integers(len(x)))
        centres.append(x[i])
        d2 = np.minimum(d2, ((x - x[i]) ** 2).sum(1))
    return np.array(centres)


def _lloyd(
    x: Array, centres: Array, max_iter: int, tol: float
) -> tuple[npt.NDArray[np.int64], float]:
    """Lloyd iterations until the centres move less than ``tol`` (sum of squared shifts).

    An emptied cluster takes the point farthest from its centre. Returns (labels [C],
    inertia: the sum of squared distances to the assigned centres). Each step's centres
    are the members' means taken at once as a product with the [k, C] assignment matrix,
    and the last distances are expanded as every step's are (|x|^2 - 2 x.c + |c|^2): a
    loop over the clusters and a [C, k, d] difference cost most of the time; both agree
    with the direct forms to rounding.
    """
    sq = (x**2).sum(1)
    rows = np.arange(len(x))

    def distances(centres: Array) -> Array:
        return np.maximum(sq[:, None] - 2 * x @ centres.T + (centres**2).sum(1)[None, :], 0.0)

    for _ in range(max_iter):
        d2 = distances(centres)
        labels = d2.argmin(1)
        counts = np.bincount(labels, minlength=len(centres))
        if counts.all():
            assign = np.zeros((len(centres), len(x)))
            assign[labels, rows] = 1.0
            new = (assign @ x) / counts[:, None]
        else:
            new = _refilled_means(x, centres, d2, labels)
        shift = float(((new - centres) ** 2).sum())
        centres = new
        if shift <= tol:
            break
    d2 = distances(centres)
    labels = d2.argmin(1)
    return labels.astype(np.int64), float(d2[rows, labels].sum())


def _refilled_means(x: Array, centres: Array, d2: Array, labels: npt.NDArray[np.int64]) -> Array:
    """The next centres when a cluster has emptied (rare): cluster by cluster, an empty
    one takes the point farthest from its centre (``labels`` is updated in place)."""
    new = centres.copy()
    for j in range(len(centres)):
        members = labels == j
        if members.any():
            new[j] = x[members].mean(0)
        else:
            far = int(d2[np.arange(len(x)), labels].argmax())
            new[j], labels[far] = x[far], j
    return new


def row_space_coordinates(x: Array) -> Array:
    """[C, min(C, d)] the rows of ``x`` [C, d] in an orthonormal basis of their span:
    ``x = z Q^T`` (QR of x^T), so every distance and inner product between rows, and
    every mean of rows, is the same in z up to rounding. x itself when C >= d."""
    n, d = x.shape
    if n >= d:
        return x
    r: Array = np.asarray(np.linalg.qr(x.T, mode="r"))
    return np.ascontiguousarray(r.T)


def kmeans(
    x: Array, k: int, seed: int = 0, n_init: int = 10, max_iter: int = 300, tol: float = 1e-4
) -> npt.NDArray[np.int64]:
    """Cluster labels [C] of the rows of ``x`` [C, d]: the best of ``n_init`` k-means runs.

    ``tol`` is relative to the mean variance of the features, as in scikit-learn's KMeans.
    The rows are clustered in coordinates of their span (``row_space_coordinates``): the
    same distances and means, in at most C dimensions rather than d.
    Runs on one BLAS thread, so the labels do not depend on the machine's thread count.
    """
    x = np.asarray(x, dtype=np.float64)
    rng = np.random.default_rng(seed)
    abs_tol = tol * float(x.var(0).mean())
    best: tuple[npt.NDArray[np.int64], float] | None = None
    with _threads().limit(limits=1):
        x = row_space_coordinates(x)
        for _ in range(n_init):
            run = _lloyd(x, _kmeans_pp(x, k, rng), max_iter, abs_tol)
            if best is None or run[1] < best[1]:
                best = run
    assert best is not None
    return best[0]


@functools.cache
def _threads() -> ThreadpoolController:
    """The process's thread pools, found once: ``threadpool_limits`` searches the loaded
    libraries on every call (10 ms, more than a k-means of 128 contexts)."""
    return ThreadpoolController()


def adjusted_rand_index(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> float:
    """Adjusted Rand index of two labelings [C] (Hubert and Arabie 1985).

    1 for identical partitions (up to renaming), about 0 for independent ones; 1 also when
    both put every point in one cluster or every point in its own.
    """
    _, ai = np.unique(a, return_inverse=True)
    _, bi = np.unique(b, return_inverse=True)
    table = np.zeros((int(ai.max()) + 1, int(bi.max()) + 1), dtype=np.int64)
    np.add.at(table, (ai.reshape(-1), bi.reshape(-1)), 1)

    def pairs(n: npt.NDArray[np.int64]) -> float:
        return float((n * (n - 1) // 2).sum())

    both = pairs(table)
    rows, cols = pairs(table.sum(1)), pairs(table.sum(0))
    n = len(ai)
    expected = rows * cols / (n * (n - 1) / 2) if n > 1 else 0.0
    top = (rows + cols) / 2
    if top == expected:
        return 1.0
    return (both - expected) / (top - expected)


def kmeans_ari(ctx: Array, codes: npt.NDArray[np.int64], seed: int = 0) -> float:
    """Adjusted Rand index of k-means on ``ctx`` (k = number of labels) against the labels.

    Args:
        ctx: [C, d] context vectors.
        codes: [C] integer labels.
        seed: k-means seed (``n_init=10``).
    """
    k = int(codes.max()) + 1
    return adjusted_rand_index(codes, kmeans(ctx, k, seed))


def context_clusters(
    ctx: Array, labels: Sequence[object] | npt.NDArray[np.generic], seed: int = 0
) -> ContextClusters | None:
    """Within/between cosines and k-means ARI of context vectors against labels.

    Args:
        ctx: [C, d] context vectors.
        labels: [C] one label per context.
        seed: k-means seed.

    Returns:
        The summary, or None when there is only one distinct label.
    """
    codes = encode_labels(labels, ctx.shape[0])
    n_labels = int(codes.max()) + 1 if codes.size else 0
    if n_labels < 2:
        return None
    within, between = within_between(ctx, codes)
    return ContextClusters(n_labels, within, between, kmeans_ari(ctx, codes, seed))
