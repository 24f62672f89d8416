"""Intrinsic dimension: a planted 5-dimensional manifold in 64 dimensions (flat and curved)
is recovered by TwoNN and GRIDE, TwoNN equals scikit-dimension's, GRIDE's likelihood finds
the dimension of exactly drawn ratios, a planted middle phase is found (and a flat profile
is not called one), and the step's profile equals TwoNN of SmolLM2's own mean-pooled
Hugging Face hidden states."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from geomlens.analyses.intrinsic_dimension.claims import MIDDLE_PHASE, id_claims
from geomlens.analyses.intrinsic_dimension.compute import phase, profile
from geomlens.analyses.intrinsic_dimension.estimators import gride, gride_fit, twonn
from geomlens.analyses.intrinsic_dimension.step import IntrinsicDimensionAnalysis, metrics_block
from geomlens.capturing import hidden_states
from geomlens.config.figure_level import figure_level
from geomlens.corpus import make_windows
from geomlens.runs.runfolder import RunFolder
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.base import CapturedBatch


def flat(rng: np.random.Generator, n: int, d: int = 5, D: int = 64) -> np.ndarray:
    """n points of a d-dimensional Gaussian in a random d-plane of R^D."""
    basis, _ = np.linalg.qr(rng.standard_normal((D, d)))
    return rng.standard_normal((n, d)) @ basis.T


def curved(rng: np.random.Generator, n: int, d: int = 5, D: int = 64) -> np.ndarray:
    """n points of a curved d-dimensional manifold: a uniform cube mapped through sines,
    cosines and squares into 4d features, then rotated into R^D."""
    z = rng.uniform(-1, 1, (n, d))
    features = np.concatenate([np.sin(2 * z), np.cos(2 * z), z**2, z], 1)
    basis, _ = np.linalg.qr(rng.standard_normal((D, features.shape[1])))
    return features @ basis.T


@pytest.mark.parametrize("manifold", [flat, curved])
def test_a_planted_five_dimensional_manifold_in_64_dimensions_is_recovered(manifold):
    x = manifold(np.random.default_rng(0), 1000)
    assert twonn(x) == pytest.approx(5, abs=0.4)
    scales = gride(x)
    assert [s.k for s in scales] == [1, 2, 4, 8, 16]
    for s in scales[:4]:
        assert s.dimension == pytest.approx(5, abs=0.5), s
    assert all(a.scale < b.scale for a, b in zip(scales, scales[1:], strict=False))


def test_twonn_equals_scikit_dimensions():
    skdim = pytest.importorskip("skdim")
    rng = np.random.default_rng(1)
    for x in (flat(rng, 200), curved(rng, 300), rng.standard_normal((150, 12))):
        assert twonn(x) == pytest.approx(skdim.id.TwoNN().fit(x).dimension_, rel=1e-10)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_gride_finds_the_dimension_of_ratios_drawn_from_its_own_law(k):
    """r_2k / r_k of a Poisson process in d dimensions: mu^-d is Beta(k, k)-distributed."""
    rng = np.random.default_rng(k)
    d = 7.0
    mu = rng.beta(k, k, 20000) ** (-1 / d)
    assert gride_fit(mu, k) == pytest.approx(d, rel=0.03)
    if k == 1:
        assert gride_fit(mu, 1) == pytest.approx(mu.size / np.log(mu).sum())


def planted_layers(dims: list[int], n: int = 300) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(2)
    return {layer: flat(rng, n, d) for layer, d in enumerate(dims)}


def test_a_planted_middle_phase_is_found_and_a_flat_profile_is_not():
    dims = [3, 3, 4, 12, 14, 12, 4, 3, 3]
    found = profile(planted_layers(dims), n_layers=len(dims) - 1, seed=0, n_boot=200)
    middle = phase(found)
    assert middle.peak_layer == 4 and middle.number is not None and middle.low is not None
    assert middle.low > 0
    assert (found.low <= found.twonn).all() and (found.twonn <= found.high).all()
    metrics = {"intrinsic_dimension": metrics_block(found, middle).to_dict()}
    claim = id_claims(metrics, {})[0]
    assert claim.id == MIDDLE_PHASE and claim.verdict == "reproduced"
    assert id_claims(metrics, {"is_encoder": True})[0].verdict.startswith("not applicable")

    level = profile(planted_layers([6] * 9), n_layers=8, seed=0, n_boot=200)
    metrics = {"intrinsic_dimension": metrics_block(level, phase(level)).to_dict()}
    assert id_claims(metrics, {})[0].verdict in ("inconclusive", "not reproduced")


def test_too_few_windows_make_the_claim_inconclusive():
    dims = [3, 3, 12, 14, 12, 3, 3]
    found = profile(planted_layers(dims, n=40), n_layers=6, seed=0, n_boot=100)
    metrics = {"intrinsic_dimension": metrics_block(found, phase(found)).to_dict()}
    claim = id_claims(metrics, {})[0]
    assert claim.verdict == "inconclusive" and claim.guard == "few windows"
    assert "at least 100" in claim.why


def test_the_step_equals_twonn_of_smollm2s_mean_pooled_hf_states(smollm2, bbc, tmp_path):
    C, T = 12, 16
    windows = make_windows(bbc, smollm2.tokenizer, C, T, seed=4)
    ids = torch.tensor(windows.input_ids)
    layers = list(range(smollm2.n_layers + 1))
    acc = DecompositionAccumulator(layers, C, T, smollm2.d_model, second_moment=False)
    acc.update(CapturedBatch(hidden_states(smollm2, ids, layers), torch.arange(C)))
    with figure_level("none"):
        IntrinsicDimensionAnalysis(seed=0)(RunFolder(tmp_path), smollm2, windows, acc)
    rows = json.loads((tmp_path / "metrics.json").read_text())["intrinsic_dimension"]["layers"]
    with torch.inference_mode():
        theirs = smollm2.base(input_ids=ids, output_hidden_states=True).hidden_states
    for layer in range(smollm2.n_layers):  # HF's last entry has the final norm applied
        pooled = theirs[layer][:, 1:].double().mean(1).numpy()
        assert rows[layer]["twonn"] == pytest.approx(twonn(pooled), rel=1e-4), layer
