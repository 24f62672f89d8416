"""The decomposition's part of report.html: the figures of the view the claims read (noise
share, outlier windows, incoherence ratio, the noise-removed Gram matrix and spiral) carry
the numbers of the metrics rows they are drawn from, and the section says them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from geomlens.analyses.common import spectra
from geomlens.analyses.decomposition import figures as figs
from geomlens.analyses.decomposition import position_noise, summary
from geomlens.analyses.decomposition.claims import COHERENCE_FACTOR
from geomlens.analyses.decomposition.position_noise import PLANTED_SHARE_MAX
from geomlens.analyses.decomposition.section import decomposition_section
from geomlens.reporting.glossary import describe
from geomlens.runs.runfolder import Run

LAYERS = [0, 1, 2, 3]
NOISE = [0.05, 0.31, 0.72, 0.12]
COHERENCE = [0.20, 0.35, 0.50, 0.25]
RANDOM = [0.10, 0.10, 0.125, 0.10]


def _rows(skip_first: bool = True) -> list[dict]:
    return [
        {
            "layer": layer,
            "skip_first": skip_first,
            "n_contexts": 30,
            "n_positions": 31,
            "share_pos": 0.1 * (i + 1),
            "share_ctx": 0.05,
            "share_resid": 0.85 - 0.1 * i,
            "pos_rank": 3,
            "pos_low_freq": 0.88,
            "pos_low_freq_energy": 0.51,
            "pos_low_freq_corrected": 0.9,
            "pos_low_freq_energy_corrected": 0.6,
            "pos_noise_share": NOISE[i],
            "coherence_max_corrected": COHERENCE[i],
            "coherence_random_max": RANDOM[i],
        }
        for i, layer in enumerate(LAYERS)
    ]


PER_LAYER = {
    str(layer): {"coherence_max_corrected": [c - 0.05, c + 0.1], "pos_noise_share": [n - 0.02, n]}
    for layer, c, n in zip(LAYERS, COHERENCE, NOISE, strict=True)
}

OUTLIERS = [
    {"window": 7, "layer": 2, "position": 1, "norm": 5000.0, "median": 100.0},
    {"window": 7, "layer": 3, "position": 1, "norm": 8000.0, "median": 100.0},
    {"window": 11, "layer": 3, "position": 2, "norm": 3000.0, "median": 60.0},
]


def _metrics() -> dict:
    medians = {"coherence_max_corrected": [0.2, 0.4]}
    return {
        "decomposition": {
            "skip_first": False,
            "layers": _rows(False),
            "other_view": {
                "skip_first": True,
                "layers": _rows(True),
                "intervals": {"layers": PER_LAYER, "medians": medians},
            },
            "outlier_windows": OUTLIERS,
            "outlier_rule": {"k": 25.0, "windows_set_aside": [7, 11]},
        }
    }


def test_the_noise_share_figure_has_one_point_per_layer_and_both_levels() -> None:
    fig = summary.noise_figure(_rows(), PER_LAYER)
    shares = fig["data"][0]
    assert list(shares["x"]) == LAYERS and list(shares["y"]) == NOISE
    # error bars: the interval's ends less the number
    assert list(shares["error_y"]["arrayminus"]) == pytest.approx([0.02] * 4)
    levels = {round(trace["y"][0], 6) for trace in fig["data"][1:]}
    assert levels == {0.1, PLANTED_SHARE_MAX}


def test_the_outlier_figure_has_one_point_per_flagged_entry_on_a_log_axis() -> None:
    fig = summary.outlier_figure(_metrics())
    assert fig is not None and fig["layout"]["yaxis"]["type"] == "log"
    windows = [t for t in fig["data"] if t["name"].startswith("window")]
    points = [(x, y) for t in windows for x, y in zip(t["x"], t["y"], strict=True)]
    assert len(points) == len(OUTLIERS)
    assert sorted(points) == sorted((o["layer"], o["norm"] / o["median"]) for o in OUTLIERS)
    k_line = [t for t in fig["data"] if t["name"].startswith("k =")]
    assert k_line and list(k_line[0]["y"]) == [25.0, 25.0]
    # no outlier flagged, or none checked: no figure
    none = _metrics()
    none["decomposition"]["outlier_windows"] = []
    assert summary.outlier_figure(none) is None


def test_the_incoherence_ratio_figure_divides_the_number_and_its_interval() -> None:
    fig = summary.incoherence_figure(_rows(), PER_LAYER)
    ratio = fig["data"][0]
    expected = [c / r for c, r in zip(COHERENCE, RANDOM, strict=True)]
    assert list(ratio["y"]) == pytest.approx(expected)
    assert list(ratio["error_y"]["array"]) == pytest.approx([0.1 / r for r in RANDOM])
    assert list(ratio["error_y"]["arrayminus"]) == pytest.approx([0.05 / r for r in RANDOM])
    assert [t["y"][0] for t in fig["data"][1:]] == [COHERENCE_FACTOR]


def test_the_incoherence_ratio_is_the_claims_median_over_the_random_level() -> None:
    number, low, high = summary.incoherence_ratio(_metrics())
    random = float(np.median(RANDOM))
    assert number == pytest.approx(float(np.median(COHERENCE)) / random)
    assert (low, high) == pytest.approx((0.2 / random, 0.4 / random))


def _planted_groups(seed: int = 0) -> tuple[position_noise.GroupPositions, np.ndarray]:
    """A smooth rank-3 positional part over 32 positions in 24 dimensions, 8 groups of 4
    contexts each with its own Gaussian noise; position 0 in the sums is dropped."""
    rng = np.random.default_rng(seed)
    t = np.arange(33) / 33
    basis = np.stack([np.cos(np.pi * t), np.sin(np.pi * t), np.cos(2 * np.pi * t)], axis=1)
    signal = basis @ rng.normal(size=(3, 24)) * 3.0
    sizes = np.full(8, 4.0)
    sums = np.stack([4 * (signal + rng.normal(size=signal.shape) * 0.5) for _ in sizes])
    ctx = rng.normal(size=(32, 24))
    return position_noise.from_sums(sums, sizes, skip_first=True), ctx


def test_the_noise_removed_gram_is_symmetric_with_unit_diagonal_and_what_the_claims_read():
    groups, ctx = _planted_groups()
    found = position_noise.corrected(groups, ctx, rank=3, baseline=False)
    assert found is not None and found.rank == 3
    part = figs.denoised_part(groups, found.rank, layer=5)
    assert part is not None and part.noise_removed and part.skip_first
    assert list(part.positions) == list(range(1, 33))
    assert np.linalg.matrix_rank(part.pos, tol=1e-8) == 3
    gram = figs.normalised_gram(part)
    assert gram.shape == (32, 32)
    np.testing.assert_allclose(gram, gram.T, atol=1e-12)
    np.testing.assert_allclose(np.diag(gram), 1.0, atol=1e-12)
    # the same P_r the corrected Gram low-frequency share reads
    assert spectra.low_freq_share(gram) == pytest.approx(found.low_freq, abs=1e-10)
    assert figs.denoised_part(groups, 0, layer=5) is None
    assert figs.denoised_part(groups, None, layer=5) is None


def test_the_spiral_draws_the_noise_removed_view_beside_the_first() -> None:
    groups, _ = _planted_groups(1)
    plain = [
        figs.PositionalPart(
            layer,
            np.arange(33),
            np.random.default_rng(layer).normal(size=(33, 6)),
            skip_first=False,
            noise_removed=False,
        )
        for layer in (0, 4)
    ]
    beside = [figs.denoised_part(groups, 3, layer=4)]
    assert beside[0] is not None
    fig = figs.spiral_figure_interactive(plain, beside=[p for p in beside if p is not None])
    traces = fig.data
    # two panels of the first view, one of the second (layer 0 has no noise-removed part)
    assert len(traces) == 3
    assert "noise removed" in traces[2].name and "layer 4" in traces[2].name
    xyz = figs.principal_coordinates(beside[0].pos, 3)
    np.testing.assert_allclose(traces[2].x, xyz[:, 0])
    np.testing.assert_allclose(traces[2].z, xyz[:, 2])
    assert list(traces[2].marker.color) == list(range(1, 33))
    assert "position 0 skipped, noise removed" in fig.layout.title.text


def test_the_section_says_the_outlier_count_the_noise_and_the_incoherence_ratio(tmp_path):
    (tmp_path / "metrics.json").write_text(json.dumps(_metrics()))
    html = decomposition_section(Run(tmp_path))
    assert "2 of 32 windows" in html
    assert 'id="plot-outliers"' in html and "The 3 flagged" in html
    assert 'id="plot-noise-share"' in html and 'id="plot-incoherence-ratio"' in html
    random = float(np.median(RANDOM))
    ratio = float(np.median(COHERENCE)) / random
    assert "incoherence ratio" in html and f"{ratio:.3g}" in html
    assert "Sampling noise is 5%-72%" in html


def test_the_two_low_frequency_numbers_have_their_own_names() -> None:
    assert describe("pos_low_freq").startswith("Gram low-frequency share")
    assert describe("pos_low_freq_energy").startswith("Low-frequency energy share")
    from geomlens.analyses.decomposition.claims import position_claims

    metrics = _metrics()
    claim = next(c for c in position_claims(metrics, {}) if c.id == "song.pos_low_frequency")
    assert "low-frequency energy share" in claim.value
    assert "Gram low-frequency share" in claim.value
    assert "(plain)" not in claim.value
