"""Capture: hidden states equal Hugging Face's, statistics equal a direct computation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from geomlens.capturing import CaptureConfig, hidden_states
from geomlens.commands.capture import run_capture
from geomlens.corpus import make_windows
from geomlens.errors import GeomlensError
from geomlens.runs.runfolder import open_run


@pytest.mark.parametrize("name", ["smollm2", "minilm"])
def test_hidden_states_equal_hf_output_hidden_states(name, request, bbc):
    view = request.getfixturevalue(name)
    windows = make_windows(bbc, view.tokenizer, 3, 40, seed=1)
    ids = torch.tensor(windows.input_ids)
    ours = hidden_states(view, ids, range(view.n_layers + 1))
    with torch.inference_mode():
        theirs = view.base(input_ids=ids, output_hidden_states=True).hidden_states
    assert len(theirs) == view.n_layers + 1 == len(ours)
    for layer in range(view.n_layers):
        assert torch.allclose(ours[layer], theirs[layer], atol=1e-5, rtol=0), layer
    last = ours[view.n_layers]
    if view.final_norm is not None:  # HF applies the final norm to its last entry
        last = view.final_norm(last)
    assert (last - theirs[-1]).abs().max() <= 1e-5


def test_early_layers_stop_the_forward_pass(smollm2, bbc):
    windows = make_windows(bbc, smollm2.tokenizer, 2, 16)
    calls = []
    handle = smollm2.blocks[5].module.register_forward_hook(lambda *a: calls.append(1))
    try:
        out = hidden_states(smollm2, torch.tensor(windows.input_ids), [0, 3])
    finally:
        handle.remove()
    assert sorted(out) == [0, 3] and calls == []


SMOL_CONFIG = CaptureConfig(
    model="smollm2-135m",
    contexts=7,
    length=24,
    batch_size=3,
    save_activations=True,
    second_moment=True,
)


@pytest.fixture(scope="module")
def smol_run(smollm2, tmp_path_factory):
    """A real SmolLM2 capture with an activation store (uneven last batch)."""
    config = SMOL_CONFIG
    out = tmp_path_factory.mktemp("smol") / "run"
    return run_capture(config, out, view=smollm2, progress=False)


def test_finalized_statistics_equal_numpy_on_stacked_activations(smol_run):
    store = smol_run.activations
    assert store is not None and len(store) == 3
    acc = smol_run.decomposition
    for layer in (0, 1, 15, 30):
        h = store.layer(layer).double().numpy()  # [C, T, d]
        for skip in (False, True):
            x = h[:, 1:] if skip else h
            n_c, n_t, d = x.shape
            mu = x.mean((0, 1))
            pos = x.mean(0) - mu
            ctx = x.mean(1) - mu
            total = ((x - mu) ** 2).sum()
            resid = x - mu - pos[None] - ctx[:, None]
            stats = acc.finalize(layer, skip_first=skip)
            scale = np.abs(x).max()
            np.testing.assert_allclose(stats.mean, mu, atol=1e-6 * scale)
            np.testing.assert_allclose(stats.pos, pos, atol=1e-6 * scale)
            np.testing.assert_allclose(stats.ctx, ctx, atol=1e-6 * scale)
            np.testing.assert_allclose(stats.total_ss, total, rtol=1e-6)
            flat = x.reshape(-1, d)
            np.testing.assert_allclose(
                stats.second_moment, flat.T @ flat, atol=1e-6 * np.abs(flat.T @ flat).max()
            )
            s_pos, s_ctx, s_res = stats.shares
            np.testing.assert_allclose(s_pos, n_c * (pos**2).sum() / total, rtol=1e-6)
            np.testing.assert_allclose(s_ctx, n_t * (ctx**2).sum() / total, rtol=1e-6)
            np.testing.assert_allclose(s_res, (resid**2).sum() / total, rtol=1e-5, atol=1e-9)


def test_position_zero_massive_activation_is_visible_in_both_views(smol_run):
    rows = {r["layer"]: r for r in smol_run.metrics["capture"]["layers"]}
    assert rows[15]["share_pos"] > 0.9  # the position-0 outlier dominates the variance
    assert rows[15]["share_pos_skip_first"] < 0.5


def test_open_run_reads_back_manifest_windows_and_store(smol_run):
    run = open_run(smol_run.path)
    assert run.manifest["status"] == "complete"
    assert run.config["contexts"] == 7 and run.manifest["model"]["family"] == "llama"
    assert len(run.windows["doc_ids"]) == 7
    store = run.activations
    assert store is not None
    assert store.layer(4).shape == (7, 24, 576)
    shard = next(store.iter_shards([2]))
    assert set(shard) == {"input_ids", "context_index", "labels", "layer_2"}
    assert shard["input_ids"].shape == (3, 24)


def test_same_config_reuses_the_finished_run(smol_run, smollm2):
    before = (smol_run.path / "metrics.json").read_bytes()
    config = SMOL_CONFIG
    again = run_capture(config, smol_run.path, view=smollm2, progress=False)
    assert (again.path / "metrics.json").read_bytes() == before


def test_same_config_twice_gives_identical_metrics(minilm, tmp_path):
    config = CaptureConfig(model="minilm-l6", contexts=6, length=20, batch_size=4, seed=3)
    a = run_capture(config, tmp_path / "a", view=minilm, progress=False)
    b = run_capture(config, tmp_path / "b", view=minilm, progress=False)
    assert (a.path / "metrics.json").read_bytes() == (b.path / "metrics.json").read_bytes()
    assert (a.path / "stats" / "decomposition.safetensors").read_bytes() == (
        b.path / "stats" / "decomposition.safetensors"
    ).read_bytes()


def test_nan_in_activations_stops_with_a_sentence_and_keeps_earlier_batches(minilm, tmp_path):
    config = CaptureConfig(model="minilm-l6", contexts=6, length=20, batch_size=2)
    calls = {"n": 0}

    def poison(module, args, output):
        calls["n"] += 1
        if calls["n"] == 2:
            return torch.full_like(output, float("nan"))
        return None

    handle = minilm.blocks[2].module.register_forward_hook(poison)
    try:
        with pytest.raises(GeomlensError, match="layer 3 holds NaN.*batch 2 of 3"):
            run_capture(config, tmp_path / "r", view=minilm, progress=False)
    finally:
        handle.remove()
    progress = (tmp_path / "r" / "checkpoint" / "progress.json").read_text()
    assert '"batches_done": 1' in progress
    resumed = run_capture(config, tmp_path / "r", view=minilm, progress=False)
    clean = run_capture(config, tmp_path / "clean", view=minilm, progress=False)
    assert (resumed.path / "stats" / "decomposition.safetensors").read_bytes() == (
        clean.path / "stats" / "decomposition.safetensors"
    ).read_bytes()
