"""Anisotropy on planted hidden states: the streamed CC_i equal to a direct all-pairs
computation, a planted rogue dimension recovered, the standardised cosine on the sample
against the direct one (its bias), merging, and the claims."""

from __future__ import annotations

import numpy as np
import torch

from geomlens.analyses.anisotropy import compute
from geomlens.analyses.anisotropy.claims import anisotropy_claims
from geomlens.analyses.anisotropy.compute import AnisotropyTap, layer_results
from geomlens.analyses.anisotropy.step import anisotropy_metrics
from geomlens.stats.base import CapturedBatch

LAYERS, D, C, T, ROGUE = 3, 64, 40, 32, 5


def planted(seed: int = 0) -> torch.Tensor:
    """[L, C, T, D]: layer 0 isotropic Gaussian; layers 1-2 with a rogue dimension 5 of
    mean 20 (and spread 3), which makes most of every pair's cosine."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(LAYERS, C, T, D, generator=g, dtype=torch.float64)
    h[1:, :, :, ROGUE] = 20.0 + 3.0 * h[1:, :, :, ROGUE]
    return h.float()


def fed(h: torch.Tensor, rows: range, batch: int = 8) -> AnisotropyTap:
    tap = AnisotropyTap(layers=LAYERS, d=D)
    for start in range(rows.start, rows.stop, batch):
        index = torch.arange(start, min(rows.stop, start + batch))
        tap.update(CapturedBatch({k: h[k, index] for k in range(LAYERS)}, index))
    return tap


def direct(x: np.ndarray) -> tuple[np.ndarray, float]:
    """CC_i [d] and E[cos] over every ordered pair of tokens from different windows of
    ``x`` [C, T, d], pair by pair."""
    c, t, d = x.shape
    unit = x / np.linalg.norm(x, axis=-1, keepdims=True)
    flat, window = unit.reshape(c * t, d), np.repeat(np.arange(c), t)
    other = window[:, None] != window[None, :]
    cc = np.einsum("ad,bd,ab->d", flat, flat, other) / other.sum()
    return cc, float(cc.sum())


def standardised_direct(x: np.ndarray) -> float:
    flat = x.reshape(-1, x.shape[-1])
    z = (flat - flat.mean(0)) / flat.std(0)
    return direct(z.reshape(x.shape))[1]


def test_streamed_cc_equals_the_all_pairs_computation():
    h = planted()
    rows = layer_results(fed(h, range(C)))
    for r in rows:  # unit vectors in float32, summed in float64
        cc, cos = direct(h[r.layer].double().numpy())
        assert abs(r.cosine - cos) < 1e-6
        top = np.argsort(-cc)[:5]
        np.testing.assert_allclose([v for _, v in r.top_dims], cc[top], rtol=0, atol=1e-6)


def test_a_planted_rogue_dimension_dominates_and_standardising_removes_it():
    rows = layer_results(fed(planted(), range(C)))
    assert abs(rows[0].cosine) < 0.01
    for r in rows[1:]:
        assert r.cosine > 0.7
        assert r.top_dims[0][0] == ROGUE and r.top1_share > 0.95
        assert abs(r.standardised) < 0.02


def test_the_standardised_cosine_on_the_sample_is_unbiased_against_all_pairs():
    """Over planted corpora with a correlated pair of dimensions (a standardised cosine
    away from 0), the sample's estimate (256 of 1,280 tokens) against the exact all-pairs
    value: mean error near 0, each within sampling noise."""
    errors = []
    for seed in range(6):
        h = planted(seed).double()
        shared = torch.randn(C, T, generator=torch.Generator().manual_seed(100 + seed))
        h[:, :, :, :8] += 2.0 * shared[None, :, :, None].double()  # 8 dims move together
        got = layer_results(fed(h.float(), range(C)))[1].standardised
        errors.append(got - standardised_direct(h[1].numpy()))
    assert abs(float(np.mean(errors))) < 0.01
    assert max(abs(e) for e in errors) < 0.03


def test_taps_of_two_halves_merge_into_the_whole_with_the_same_sample():
    h = planted()
    whole = fed(h, range(C))
    merged = fed(h, range(0, 25), batch=5).merge(fed(h, range(25, C), batch=3))
    assert torch.equal(merged.where, whole.where) and torch.equal(merged.sample, whole.sample)
    for key, value in whole.state_dict().items():
        assert torch.allclose(merged.state_dict()[key].double(), value.double()), key
    assert (merged.keys < compute.EMPTY).sum() == compute.SAMPLE


def test_the_claims_of_timkey_are_reproduced_on_the_planted_states():
    metrics = {"anisotropy": anisotropy_metrics(fed(planted(), range(C)))}
    found = metrics["anisotropy"]
    assert found["top3_share_low"] <= found["top3_share_median"] <= found["top3_share_high"]
    verdicts = {c.id: c.verdict for c in anisotropy_claims(metrics, {})}
    assert verdicts == {"timkey.rogue_dims": "reproduced", "timkey.standardise": "reproduced"}
    iso = torch.randn(LAYERS, C, T, D, generator=torch.Generator().manual_seed(3))
    metrics = {"anisotropy": anisotropy_metrics(fed(iso, range(C)))}
    verdicts = {c.id: c.verdict for c in anisotropy_claims(metrics, {})}
    assert all(v.startswith("not measured") for v in verdicts.values())  # no anisotropy


def test_a_corpus_shorter_than_the_sample_leaves_every_statistic_finite() -> None:
    """Slots no token fills are marked by a finite key, since a checkpoint refuses NaN and
    infinite statistics (4 windows of 32 tokens fill 128 of the sample's slots)."""
    tap = fed(planted(), range(4))
    assert all(bool(torch.isfinite(v).all()) for v in tap.state_dict().values())
    assert int((tap.keys < compute.EMPTY).sum()) == 4 * T < compute.SAMPLE
    assert layer_results(tap)  # the sample's filled slots are read
