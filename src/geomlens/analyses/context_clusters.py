"""Do context vectors cluster by document label?

Mean absolute cosine between context vectors of the same and of different labels, and
the adjusted Rand index of k-means on the context vectors against the labels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_rand_score
from threadpoolctl import threadpool_limits

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


def kmeans_ari(ctx: Array, codes: npt.NDArray[np.int64], seed: int = 0) -> float:
    """Adjusted Rand index of k-means on ``ctx`` (k = number of labels) against the labels.

    Runs on one thread so that the result does not depend on the machine's thread count.

    Args:
        ctx: [C, d] context vectors.
        codes: [C] integer labels.
        seed: k-means seed (``n_init=10``).
    """
    k = int(codes.max()) + 1
    with threadpool_limits(limits=1):
        km = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(
            np.asarray(ctx, dtype=np.float64)
        )
    return float(adjusted_rand_score(codes, km.labels_))


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
