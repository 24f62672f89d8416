"""The faster forms of the position/context analyses against the formulas they replace:
k-means in the rows' span with vectorised centre updates (the previous loop inlined),
the SVD of a projection from its coefficients, the top singular value from a Gram
matrix, the vocabulary scan's top k without an [M, c] mask."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from geomlens.analyses.common import vocab
from geomlens.analyses.decomposition import context_clusters, incoherence, position_noise
from geomlens.analyses.decomposition.compute import _top_singular


def previous_lloyd(x, centres, max_iter, tol):
    """``context_clusters._lloyd`` before it was vectorised (cluster by cluster)."""
    for _ in range(max_iter):
        sq = (x**2).sum(1)
        d2 = np.maximum(sq[:, None] - 2 * x @ centres.T + (centres**2).sum(1)[None, :], 0.0)
        labels = d2.argmin(1)
        new = centres.copy()
        for j in range(len(centres)):
            members = labels == j
            if members.any():
                new[j] = x[members].mean(0)
            else:
                far = int(d2[np.arange(len(x)), labels].argmax())
                new[j], labels[far] = x[far], j
        shift = float(((new - centres) ** 2).sum())
        centres = new
        if shift <= tol:
            break
    d2 = ((x[:, None, :] - centres[None, :, :]) ** 2).sum(-1)
    labels = d2.argmin(1)
    return labels.astype(np.int64), float(d2[np.arange(len(x)), labels].sum())


def previous_kmeans(x, k, seed=0, n_init=10, max_iter=300, tol=1e-4):
    """``context_clusters.kmeans`` before it clustered in the rows' span."""
    rng = np.random.default_rng(seed)
    abs_tol = tol * float(x.var(0).mean())
    best = None
    for _ in range(n_init):
        run = previous_lloyd(x, context_clusters._kmeans_pp(x, k, rng), max_iter, abs_tol)
        if best is None or run[1] < best[1]:
            best = run
    return best[0]


@pytest.mark.parametrize(("n", "d", "k", "spread"), [(64, 576, 5, 3.0), (40, 16, 4, 1.5)])
@pytest.mark.parametrize("seed", range(3))
def test_kmeans_equals_the_previous_loop(n, d, k, spread, seed):
    """Overlapping clusters (many iterations, several local optima), wide (C < d: the span
    coordinates) and narrow (C > d: the rows themselves): the same labels."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((k, d))[rng.integers(0, k, n)] + spread * rng.standard_normal((n, d))
    assert np.array_equal(context_clusters.kmeans(x, k, seed), previous_kmeans(x, k, seed))


def test_an_emptied_cluster_is_refilled_as_before():
    """Centres placed so that one cluster is empty from the first step."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal((20, 6)), rng.standard_normal((20, 6)) + 8])
    centres = np.stack([x[:20].mean(0), x[20:].mean(0), np.full(6, 100.0)])
    ours = context_clusters._lloyd(x, centres.copy(), 300, 1e-9)
    theirs = previous_lloyd(x, centres.copy(), 300, 1e-9)
    assert np.array_equal(ours[0], theirs[0])
    assert ours[1] == pytest.approx(theirs[1], rel=1e-9)


def test_row_space_coordinates_keep_distances():
    x = np.random.default_rng(1).standard_normal((12, 50))
    z = context_clusters.row_space_coordinates(x)
    assert z.shape == (12, 12)
    gram = lambda a: a @ a.T  # noqa: E731
    np.testing.assert_allclose(gram(z), gram(x), rtol=1e-12, atol=1e-12)


def test_projected_svd_equals_the_svd_of_the_projection():
    """U C with U [T', r] orthonormal: the same singular values and the same top-r
    subspace as the SVD of the T' x d product, and the same principal angles."""
    rng = np.random.default_rng(2)
    u = np.linalg.qr(rng.standard_normal((30, 4)))[0]
    coefficients = rng.standard_normal((4, 40))
    product = u @ coefficients
    values, vt = position_noise.projected_svd(coefficients)
    _, direct, direct_vt = np.linalg.svd(product, full_matrices=False)
    np.testing.assert_allclose(values, direct[:4], rtol=1e-12)
    assert direct[4] < 1e-12 * direct[0]
    np.testing.assert_allclose(vt.T @ vt, direct_vt[:4].T @ direct_vt[:4], atol=1e-12)
    ctx = rng.standard_normal((10, 40))
    fast = incoherence.incoherence(product, ctx, 4, baseline=False, pos_svd=(values, vt))
    slow = incoherence.incoherence(product, ctx, 4, baseline=False)
    assert fast.k == slow.k == 4
    assert fast.mean_cos == pytest.approx(slow.mean_cos, rel=1e-12)


def test_top_singular_equals_the_svd():
    x = np.random.default_rng(3).standard_normal((200, 16)) * np.logspace(0, 3, 16)
    assert _top_singular(x) == pytest.approx(np.linalg.svd(x, compute_uv=False)[0], rel=1e-13)


def previous_chunk_best(s, start, k, high_id_first):
    """``vocab._chunk_best`` before its tie check became one topk of k + 1."""
    from geomlens.analyses.common.vocab import ordered

    kk = min(k, s.shape[-1])
    kth = torch.topk(s, kk, dim=-1).values[:, -1:]
    mask = s >= kth
    if bool((mask.sum(-1) == kk).all()):
        cols = mask.nonzero()[:, 1].reshape(s.shape[0], kk)
        return ordered(s.gather(-1, cols), cols + start, high_id_first)
    out_s = torch.empty(s.shape[0], kk, dtype=s.dtype)
    out_i = torch.empty(s.shape[0], kk, dtype=torch.long)
    for row in range(s.shape[0]):
        cols = mask[row].nonzero()[:, 0]
        rs, ri = ordered(s[row, cols][None], cols[None] + start, high_id_first)
        out_s[row], out_i[row] = rs[0, :kk], ri[0, :kk]
    return out_s, out_i


@pytest.mark.parametrize("levels", [None, 3, 40])  # distinct scores, heavy ties, a few ties
@pytest.mark.parametrize(("k", "width"), [(5, 200), (5, 5), (7, 3)])
def test_chunk_best_equals_the_previous_form(levels, k, width):
    g = torch.Generator().manual_seed(k * width)
    s = torch.randn(6, width, generator=g)
    if levels is not None:
        s = torch.round(s * levels / 4) / levels
    for high_id_first in (False, True):
        ours = vocab._chunk_best(s, 100, k, high_id_first)
        theirs = previous_chunk_best(s, 100, k, high_id_first)
        assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])
