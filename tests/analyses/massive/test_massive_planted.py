"""Massive activations on planted hidden states: the streamed median's error, a planted
massive dimension recovered with its tokens and layers, merging, and the claims."""

from __future__ import annotations

import numpy as np
import torch

from geomlens.analyses.massive import histogram
from geomlens.analyses.massive.claims import massive_claims
from geomlens.analyses.massive.compute import MassiveTap, layer_results, profile
from geomlens.analyses.massive.step import massive_metrics
from geomlens.stats.base import CapturedBatch

LAYERS, D, C, T = 6, 32, 10, 12
DIM, OTHER = 7, 11


def planted(seed: int = 0) -> torch.Tensor:
    """[L, C, T, D] Gaussian hidden states; from layer 2 on, dimension 7 of every window's
    first token is 2,000, and dimension 11 of window 3's position 5 is 800."""
    h = torch.randn(LAYERS, C, T, D, generator=torch.Generator().manual_seed(seed))
    h[2:, :, 0, DIM] = 2000.0
    h[2:, 3, 5, OTHER] = -800.0
    return h


def fed(h: torch.Tensor, rows: range, batch: int = 4) -> MassiveTap:
    tap = MassiveTap(layers=LAYERS, d=D)
    for start in range(rows.start, rows.stop, batch):
        index = torch.arange(start, min(rows.stop, start + batch))
        tap.update(CapturedBatch({k: h[k, index] for k in range(LAYERS)}, index))
    return tap


def test_the_histogram_median_is_within_one_bin_of_the_exact_median():
    rng = np.random.default_rng(0)
    for sigma in (0.5, 2.0, 4.0):
        x = torch.from_numpy(rng.lognormal(0.0, sigma, 100_001))
        exact = float(np.median(x.numpy()))
        got = histogram.quantile(histogram.counts(x))
        assert abs(got / exact - 1) < histogram.WIDTH
    halves = histogram.counts(x[:50_000]) + histogram.counts(x[50_000:])
    assert torch.equal(halves, histogram.counts(x))  # counts merge exactly


def test_a_planted_massive_dimension_is_found_with_its_tokens_and_layers():
    rows = layer_results(fed(planted(), range(C)))
    assert [r.massive for r in rows] == [False, False, True, True, True, True]
    median = float(np.median(np.abs(planted()[3].numpy())))
    assert abs(rows[3].median / median - 1) < 0.006
    assert abs(rows[3].top[0] - 2000.0) < 1e-9 and rows[3].ratio > 1000
    top = rows[3].largest[0]
    assert (top.dim, top.position) == (DIM, 0)
    later = rows[3].after_first[0]
    assert (later.window, later.position, later.dim, later.value) == (3, 5, OTHER, 800.0)
    assert [e.dim for e in rows[3].massive_dims] == [DIM, OTHER]
    prof = profile(rows)
    assert (prof.appear, prof.vanish, prof.held, prof.dims) == (2, None, 1.0, [DIM, OTHER])
    assert prof.jump is not None and prof.jump > 100


def test_taps_of_two_halves_merge_into_the_whole():
    h = planted()
    whole = fed(h, range(C))
    merged = fed(h, range(0, 6), batch=3).merge(fed(h, range(6, C), batch=2))
    for key, value in whole.state_dict().items():
        assert torch.allclose(merged.state_dict()[key].double(), value.double()), key
    again = MassiveTap(layers=LAYERS, d=D)
    again.load_state_dict(whole.state_dict())
    assert [r.ratio for r in layer_results(again)] == [r.ratio for r in layer_results(whole)]


class _Tokenizer:
    def decode(self, ids: list[int]) -> str:
        return "." if ids == [1] else "word"


class _View:
    tokenizer = _Tokenizer()


class _Windows:
    input_ids = [[1 if (c, t) == (3, 5) else 2 for t in range(T)] for c in range(C)]


def test_the_claims_of_sun_are_reproduced_on_the_planted_states():
    tap = fed(planted(), range(C))
    metrics = {"massive": massive_metrics(tap, _Windows(), _View(), [{"window": 3}])}  # type: ignore[arg-type]
    found = metrics["massive"]
    assert found["carriers"]["start_or_delimiter"] == 1.0
    assert found["outliers_with_massive_after_first"] == [3]
    verdicts = {c.id: c.verdict for c in massive_claims(metrics, {})}
    assert verdicts == {
        "sun.massive_exist": "reproduced",
        "sun.massive_tokens": "reproduced",
        "sun.massive_layers": "reproduced",
    }
    encoder = massive_claims(metrics, {"is_encoder": True})
    assert all(c.verdict.startswith("not applicable") for c in encoder)


def test_gaussian_states_pass_no_rule():
    h = torch.randn(LAYERS, C, T, D, generator=torch.Generator().manual_seed(1))
    metrics = {"massive": massive_metrics(fed(h, range(C)), _Windows(), _View(), None)}  # type: ignore[arg-type]
    verdicts = {c.id: c.verdict for c in massive_claims(metrics, {})}
    assert verdicts["sun.massive_exist"] == "not reproduced"
    assert verdicts["sun.massive_tokens"].startswith("not measured")
