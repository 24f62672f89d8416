"""`geomlens decompose` end to end on real weights: numbers, both views of position 0, files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from geomlens.analyses.decomposition.command import run_decompose
from geomlens.capturing import CaptureConfig
from geomlens.cli import main


@pytest.fixture(scope="module")
def minilm_run(minilm, tmp_path_factory):
    config = CaptureConfig(model="minilm-l6", contexts=16, length=32, batch_size=8)
    out = tmp_path_factory.mktemp("dec") / "minilm"
    return run_decompose(config, out, view=minilm, progress=False)


@pytest.fixture(scope="module")
def smol_run(smollm2, tmp_path_factory):
    config = CaptureConfig(model="smollm2-135m", contexts=16, length=32, batch_size=8)
    out = tmp_path_factory.mktemp("dec") / "smol"
    return run_decompose(config, out, view=smollm2, skip_first=True, progress=False, figures="none")


KEYS = {
    "share_pos",
    "share_ctx",
    "share_resid",
    "rel_norm_pos",
    "pos_rank",
    "pos_stable_rank",
    "pos_explained",
    "pos_rank95",
    "pos_low_freq",
    "pos_smoothness",
    "incoherence_max",
    "incoherence_mean",
    "incoherence_random",
    "coherence_max",
    "coherence_mean",
    "coherence_random_max",
    "coherence_random_mean",
    "ctx_cos_within",
    "ctx_cos_between",
    "ctx_cluster_ari",
}


def test_every_layer_has_every_number_and_shares_sum_to_one(minilm_run):
    section = minilm_run.metrics["decomposition"]
    assert section["skip_first"] is False and section["other_view"]["skip_first"] is True
    assert [r["layer"] for r in section["layers"]] == list(range(7))
    for row in section["layers"] + section["other_view"]["layers"]:
        assert set(row) >= KEYS
        total = row["share_pos"] + row["share_ctx"] + row["share_resid"]
        assert total == pytest.approx(1.0, abs=1e-12)
        assert 0 < row["rel_norm_pos"] < 1
        assert row["ctx_cluster_ari"] is not None and row["n_labels"] == 5


def test_shares_agree_with_the_capture_section(minilm_run):
    capture = {r["layer"]: r for r in minilm_run.metrics["capture"]["layers"]}
    for row in minilm_run.metrics["decomposition"]["layers"]:
        assert row["share_pos"] == pytest.approx(capture[row["layer"]]["share_pos"], abs=1e-9)


def test_attention_parts_add_up_to_the_real_logits(minilm_run, smol_run):
    for run in (minilm_run, smol_run):
        attention = run.metrics["attention"]
        assert len(attention["parts"]) == len(attention["blocks"]) >= 3
        for block in attention["parts"]:
            assert block["max_rel_error"] <= 1e-6
            for head in block["share_cov"]:
                assert sum(head) == pytest.approx(1.0, abs=1e-9)
        for block in attention["qk_basis"]:
            assert all(0 <= h["residual"] <= 1 for h in block["heads"])
            assert block["rank"] is None and all(h["rank"] >= 0 for h in block["heads"])
        # W_QK of every block (every captured layer but the last, which is no block's input)
        n_blocks = len(run.metrics["decomposition"]["layers"]) - 1
        assert [b["layer"] for b in attention["qk_basis"]] == list(range(n_blocks))


def test_smollm2_position_zero_view_and_induction_heads(smol_run):
    section = smol_run.metrics["decomposition"]
    assert section["skip_first"] is True
    skipped = {r["layer"]: r for r in section["layers"]}
    kept = {r["layer"]: r for r in section["other_view"]["layers"]}
    assert kept[20]["share_pos"] > 0.9 > 0.5 > skipped[20]["share_pos"]
    induction = smol_run.metrics["induction"]
    assert induction["found"], "SmolLM2 has induction heads in its middle blocks"
    assert all(10 <= layer <= 28 for layer, _ in induction["found"])
    assert smol_run.manifest["config"]["skip_first"] is True


def test_files_of_the_run(minilm_run):
    figures = {p.name for p in (minilm_run.path / "figures").iterdir()}
    for name in ("shares", "spectra", "spiral", "gram", "contexts"):
        assert f"decomposition_{name}.png" in figures
    assert "decomposition_spiral.html" in figures
    assert all((minilm_run.path / "figures" / f).stat().st_size > 5000 for f in figures)
    spectra = json.loads((minilm_run.path / "decomposition_spectra.json").read_text())
    views = {"all_positions", "skip_first"}  # and their noise-free spectra (16 groups)
    assert set(spectra) == views | {f"{view}_corrected" for view in views}
    assert len(spectra["all_positions"]["3"]) == 32
    assert 0 < len(spectra["skip_first_corrected"]["3"]) <= 31


def test_same_config_gives_byte_identical_metrics(minilm, minilm_run, tmp_path):
    """The rerun draws no figures (``minilm_run`` drew them): the numbers do not depend on them."""
    config = CaptureConfig(model="minilm-l6", contexts=16, length=32, batch_size=8)
    again = run_decompose(config, tmp_path / "again", view=minilm, progress=False, figures="none")
    assert (again.path / "metrics.json").read_bytes() == (
        minilm_run.path / "metrics.json"
    ).read_bytes()


def test_cli_prints_a_table(capsys, minilm_run):
    args = ["decompose", "--model", "minilm-l6", "--contexts", "16", "--length", "32"]
    assert main([*args, "--quiet", "--out", str(minilm_run.path)]) == 0
    out = capsys.readouterr().out
    assert "share_pos" in out and "decomposition written to" in out


def test_principal_coordinates_equal_the_svd():
    from geomlens.analyses.decomposition.figures import principal_coordinates

    rng = np.random.default_rng(0)
    for shape in ((30, 50), (50, 30)):
        x = rng.standard_normal(shape) * np.linspace(3, 1, shape[1])
        centred = x - x.mean(0)
        u, s, _ = np.linalg.svd(centred, full_matrices=False)
        expected = u[:, :3] * s[:3]
        got = principal_coordinates(x, 3)
        for j in range(3):  # equal up to the sign chosen for each axis
            sign = np.sign(got[:, j] @ expected[:, j])
            np.testing.assert_allclose(got[:, j], sign * expected[:, j], atol=1e-8)
        assert np.abs(got).max(0).tolist() == got.max(0).tolist()  # largest entry positive
