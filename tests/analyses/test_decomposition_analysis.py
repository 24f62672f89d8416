"""The position/context analyses recover structure planted in synthetic hidden states."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import plotly.graph_objects as go
import pytest
import scipy.fft
from matplotlib.figure import Figure
from synthetic import planted, reference_parts, reference_stats, stream

from geomlens.analyses.common import spectra
from geomlens.analyses.decomposition import figures as figs
from geomlens.analyses.decomposition.compute import (
    LayerDecomposition,
    analyse_layer,
    analyse_layers,
)
from geomlens.analyses.decomposition.context_clusters import context_clusters
from geomlens.analyses.decomposition.incoherence import principal_cosines, random_mean_cosine
from geomlens.errors import GeomlensError
from geomlens.reporting import figures


@pytest.fixture(scope="module")
def clean():
    """Exactly decomposable: double-centred noise, orthogonal subspaces, smooth spiral."""
    p = planted(seed=1)
    return p, analyse_layer(stream(p.hidden).finalize(0), p.labels, seed=0)


@pytest.fixture(scope="module")
def noisy():
    """Plain Gaussian noise (leaks into pos and ctx)."""
    p = planted(exact=False, noise=0.15, seed=2)
    return p, stream(p.hidden)


def test_shares_sum_to_one_and_match_direct(noisy):
    p, acc = noisy
    r = analyse_layer(acc.finalize(0))
    parts = reference_parts(p.hidden)
    h = p.hidden.astype(np.float64)
    s = np.sum((h - parts["mu"]) ** 2)
    c, t, _ = h.shape
    direct = (
        c * np.sum(parts["pos"] ** 2) / s,
        t * np.sum(parts["ctx"] ** 2) / s,
        np.sum(parts["resid"] ** 2) / s,
    )
    assert r.share_pos + r.share_ctx + r.share_resid == pytest.approx(1.0, abs=1e-12)
    assert (r.share_pos, r.share_ctx, r.share_resid) == pytest.approx(direct, abs=1e-10)


def test_planted_shares_recovered(clean):
    p, r = clean
    assert (r.share_pos, r.share_ctx, r.share_resid) == pytest.approx(p.shares, abs=1e-3)


def test_planted_rank_recovered(clean, noisy):
    _, r = clean
    assert r.pos_rank == 4 and r.pos_rank95 == 4
    r2 = analyse_layer(noisy[1].finalize(0))
    assert r2.pos_rank == 4 and r2.pos_rank95 == 4
    assert 0.5 < r2.pos_explained < 1.0
    # noise spreads energy beyond the planted rank: 95% needs more directions, ScreeNOT does not
    p = planted(exact=False, noise=0.3, seed=3)
    r3 = analyse_layer(stream(p.hidden).finalize(0))
    assert r3.pos_rank == 4 and r3.pos_rank95 > 4


def test_spectrum_numbers_match_svd(clean):
    p, r = clean
    pos = reference_parts(p.hidden)["pos"]
    s = np.linalg.svd(pos, compute_uv=False)
    np.testing.assert_allclose(r.pos_singular_values, s[:64], rtol=1e-9, atol=1e-12)
    assert r.pos_stable_rank == pytest.approx(np.sum(s**2) / s[0] ** 2, rel=1e-9)
    assert r.pos_explained == pytest.approx(s[: r.pos_rank].sum() / s.sum(), rel=1e-9)
    assert len(r.pos_singular_values) == min(64, *pos.shape)


def test_incoherence_orthogonal_vs_aligned(clean):
    _, r = clean
    aligned = planted(aligned=True, seed=1)
    ra = analyse_layer(stream(aligned.hidden).finalize(0), aligned.labels)
    assert r.incoherence_k == ra.incoherence_k == 4
    assert r.incoherence_max < 0.01
    assert ra.incoherence_mean > 0.99 and ra.incoherence_max > 0.99
    assert r.incoherence_mean < r.incoherence_random < ra.incoherence_mean
    # baseline: mean cosine of random 4-dim subspaces of R^64 is about sqrt(4/64)
    assert 0.1 < r.incoherence_random < 0.4
    # the paper's mutual coherence of the vectors recovers the same planted structure
    assert r.coherence_max < 0.05 < r.coherence_random_max < ra.coherence_max
    assert ra.coherence_max > 0.9 and ra.coherence_mean > r.coherence_random_mean


def test_principal_cosines_known_angle():
    theta = 0.3
    u = np.array([[1.0], [0.0], [0.0]])
    v = np.array([[math.cos(theta)], [math.sin(theta)], [0.0]])
    assert principal_cosines(u, v)[0] == pytest.approx(math.cos(theta))
    assert random_mean_cosine(50, 3, 3, seed=0) == random_mean_cosine(50, 3, 3, seed=0)


def test_context_clusters(clean):
    _, r = clean
    assert r.n_labels == 4
    assert r.ctx_cluster_ari is not None and r.ctx_cluster_ari > 0.9
    assert r.ctx_cos_within is not None and r.ctx_cos_between is not None
    assert r.ctx_cos_within > r.ctx_cos_between + 0.3


def test_context_clusters_absent_without_labels(clean):
    p, _ = clean
    stats = stream(p.hidden).finalize(0)
    for labels, n_labels in ((None, None), (["x"] * p.hidden.shape[0], 1)):
        r = analyse_layer(stats, labels)
        assert r.n_labels == n_labels
        assert r.ctx_cluster_ari is None and r.ctx_cos_within is None
        assert r.ctx_cos_between is None
    with pytest.raises(GeomlensError):
        analyse_layer(stats, [0, 1, 2])
    # string labels work the same as integer ones
    names = np.array(["biz", "pol", "spo", "tech"])[p.labels]
    assert context_clusters(stats.ctx, names) == context_clusters(stats.ctx, p.labels)


def test_smooth_vs_permuted_positions(clean):
    _, smooth = clean
    rough_p = planted(permute=True, seed=1)
    rough = analyse_layer(stream(rough_p.hidden).finalize(0))
    assert rough.pos_rank == smooth.pos_rank == 4  # same spectrum, different order
    assert smooth.pos_low_freq > 0.85 and rough.pos_low_freq < 0.2
    assert smooth.pos_smoothness < 0.25 and rough.pos_smoothness > 0.8


def test_gram_dct_is_ft_g_f():
    rng = np.random.default_rng(0)
    pos = rng.standard_normal((30, 8))
    g = spectra.gram_matrix(pos)
    f = spectra.dct_basis(30)
    np.testing.assert_allclose(f.T @ f, np.eye(30), atol=1e-12)
    np.testing.assert_allclose(spectra.gram_dct(g), f.T @ g @ f, atol=1e-12)
    np.testing.assert_allclose(f[:, 3], scipy.fft.idct(np.eye(30)[3], norm="ortho"), atol=1e-12)
    assert np.diag(g) == pytest.approx(np.ones(30))
    assert spectra.n_low_frequencies(30) == 3 and spectra.n_low_frequencies(511) == 52
    coef = f.T @ g @ f
    assert spectra.low_freq_share(g) == pytest.approx(np.sum(coef[:3, :3] ** 2) / np.sum(coef**2))
    diffs = np.abs(g[1:] - g[:-1]).mean()
    assert spectra.smoothness(g) == pytest.approx(diffs / np.abs(g).mean())


def test_energy_rank_and_screenot_bound():
    assert spectra.energy_rank(np.array([3.0, 1.0, 0.1])) == 2
    assert spectra.energy_rank(np.array([1.0, 0.0])) == 1
    assert spectra.energy_rank(np.zeros(3)) == 0
    assert spectra.screenot_bound((511, 576)) == 20
    assert spectra.screenot_bound((20, 64)) == 9
    rng = np.random.default_rng(0)
    low = rng.standard_normal((20, 2)) @ rng.standard_normal((2, 64)) * 10
    assert spectra.screenot_rank(low + 0.01 * rng.standard_normal((20, 64))) == 2
    # scale-free: the same matrix a million times smaller has the same rank
    assert spectra.screenot_rank(1e-6 * (low + 0.01 * rng.standard_normal((20, 64)))) == 2


def test_screenot_rank_equals_the_package_on_the_matrix():
    from screenot import adaptiveHardThresholding

    rng = np.random.default_rng(1)
    for rank, shape in ((3, (64, 96)), (7, (120, 80)), (1, (40, 40))):
        x = rng.standard_normal((shape[0], rank)) @ rng.standard_normal((rank, shape[1]))
        x = x + 0.3 * rng.standard_normal(shape)
        top = np.linalg.norm(x, ord=2)
        k = spectra.screenot_bound(shape)
        _, _, expected = adaptiveHardThresholding(x / top, k, strategy="i")
        svals = spectra.singular_values(x)
        assert spectra.screenot_rank(x, svals=svals) == expected
        assert spectra.screenot_rank(x) == expected


def test_rel_norm_matches_direct_svd(noisy):
    p, acc = noisy
    r = analyse_layer(acc.finalize(0))
    h = p.hidden.astype(np.float64)
    c, t, d = h.shape
    parts = reference_parts(h)
    broadcast = np.broadcast_to(parts["pos"], (c, t, d)).reshape(-1, d)
    uncentred = h.reshape(-1, d)
    centred = uncentred - parts["mu"]
    top = np.linalg.norm(broadcast, ord=2)
    # the accumulator sums h h^T in float32 matmuls, hence the looser tolerance
    assert r.rel_norm_pos == pytest.approx(top / np.linalg.norm(uncentred, ord=2), rel=1e-5)
    assert r.rel_norm_pos_centred == pytest.approx(top / np.linalg.norm(centred, ord=2), rel=1e-5)
    no_second = stream(p.hidden, second_moment=False).finalize(0)
    r0 = analyse_layer(no_second)
    assert r0.rel_norm_pos is None and r0.rel_norm_pos_centred is None


def _assert_same(a: LayerDecomposition, b: LayerDecomposition, rel: float = 1e-8) -> None:
    for f in dataclasses.fields(LayerDecomposition):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name.startswith("rel_norm"):
            assert x == pytest.approx(y, rel=1e-5), f.name
        elif isinstance(x, float):
            assert x == pytest.approx(y, rel=rel, abs=1e-12), f.name
        elif isinstance(x, tuple):
            np.testing.assert_allclose(x, y, rtol=rel, atol=1e-12, err_msg=f.name)
        else:
            assert x == y, f.name


def test_skip_first_equals_array_without_position_zero():
    p = planted(exact=False, seed=4)
    h = p.hidden.copy()
    h[:, 0] = 6.0  # a massive activation at position 0
    acc = stream(h)
    streamed = analyse_layer(acc.finalize(0, skip_first=True), p.labels)
    direct = analyse_layer(reference_stats(h, skip_first=True), p.labels)
    assert streamed.skip_first and streamed.n_positions == h.shape[1] - 1
    _assert_same(streamed, direct)
    full = analyse_layer(acc.finalize(0), p.labels)
    _assert_same(full, analyse_layer(reference_stats(h), p.labels))
    assert full.share_pos > 0.8 > 0.3 > streamed.share_pos


def test_analyse_layers_and_determinism():
    p1, p2 = planted(seed=5), planted(permute=True, seed=6)
    acc = stream({3: p1.hidden, 7: p2.hidden})
    results = analyse_layers(acc, p1.labels, skip_first=True, seed=0)
    assert [r.layer for r in results] == [3, 7]
    assert all(r.skip_first for r in results)
    # same input, same batches, same seed: identical JSON, byte for byte
    again = analyse_layers(stream({3: p1.hidden, 7: p2.hidden}), p1.labels, True, 0)
    dump = json.dumps([r.to_dict() for r in results], sort_keys=True)
    assert dump == json.dumps([r.to_dict() for r in again], sort_keys=True)
    d = results[0].to_dict()
    assert set(d) == {f.name for f in dataclasses.fields(LayerDecomposition)}
    assert isinstance(d["pos_singular_values"], list) and isinstance(d["pos_rank"], int)
    assert "NaN" not in json.dumps(d, allow_nan=True)


# ---------------------------------------------------------------------- figures


@pytest.fixture(scope="module")
def layer_stats():
    p1, p2, p3 = planted(seed=7), planted(seed=8, permute=True), planted(seed=9, aligned=True)
    acc = stream({0: p1.hidden, 1: p2.hidden, 2: p3.hidden})
    stats = [acc.finalize(layer, skip_first=True) for layer in acc.layers]
    return stats, [analyse_layer(s, p1.labels) for s in stats], p1.labels


def _nonempty_mpl(fig: Figure) -> None:
    assert isinstance(fig, Figure) and fig.axes
    fig.canvas.draw()
    w, h = fig.canvas.get_width_height()
    assert w > 100 and h > 100
    assert any(ax.has_data() for ax in fig.axes)


def test_shares_figure(layer_stats):
    _nonempty_mpl(figs.shares_figure(layer_stats[1]))


def test_spectra_figure(layer_stats):
    _nonempty_mpl(figs.spectra_figure(layer_stats[1]))


def test_spiral_figure(layer_stats):
    _nonempty_mpl(figs.spiral_figure(layer_stats[0]))


def test_spiral_figure_interactive(layer_stats, tmp_path):
    fig = figs.spiral_figure_interactive(layer_stats[0], layers=[0, 2])
    assert isinstance(fig, go.Figure) and len(fig.data) == 2
    assert len(fig.data[0].x) == layer_stats[0][0].length
    out = figures.save(fig, tmp_path / "spiral.html")
    assert out.stat().st_size > 1000


def test_gram_figure(layer_stats):
    _nonempty_mpl(figs.gram_figure(layer_stats[0]))


def test_context_figure(layer_stats, tmp_path):
    stats, _, labels = layer_stats
    fig = figs.context_figure(stats, labels)
    _nonempty_mpl(fig)
    _nonempty_mpl(figs.context_figure(stats[:1]))
    out = figures.save(fig, tmp_path / "ctx.png")
    assert out.read_bytes()[:4] == b"\x89PNG"
