"""Outlier windows: found from the norms the capture keeps, taken out of the sums exactly,
recorded in metrics.json, and the claims read the numbers without them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from synthetic import planted
from tiny_models import VOCAB, gpt2  # noqa: F401 (module fixture)

from geomlens.analyses.decomposition import outliers, schema, section
from geomlens.analyses.decomposition import step as decomposition_step
from geomlens.analyses.decomposition.claims import position_claims
from geomlens.analyses.decomposition.compute import analyse_layers
from geomlens.capturing.capture import capture_contexts
from geomlens.capturing.hooks import hidden_states
from geomlens.corpus import Windows
from geomlens.engines.merge import merge_shards
from geomlens.engines.shards import Shard, ShardResult
from geomlens.runs.runfolder import RunFolder
from geomlens.stats import CapturedBatch, DecompositionAccumulator
from geomlens.stats.decomposition import NORMS, OPTIONAL_STATE, state_spec

C, T, D = 40, 24, 32
LAYERS = [0, 1]
OUTLIERS = (5, 22)
"""The windows given a massive state at position 1 (in layer 1 only)."""


def hidden() -> dict[int, np.ndarray]:
    """[C, T, d] per layer: planted structure, position 0 large in every window, and a
    state 100 times the others' norm at position 1 of windows ``OUTLIERS`` in layer 1."""
    out = {}
    for layer in LAYERS:
        p = planted(n_contexts=C, length=T, d_model=D, exact=False, seed=10 + layer)
        h = p.hidden.astype(np.float32).copy()
        h[:, 0] *= 50.0
        if layer == 1:
            for c in OUTLIERS:
                h[c, 1] *= 100.0
        out[layer] = h
    return out


HIDDEN = hidden()
LABELS = planted(n_contexts=C, length=T, d_model=D, exact=False, seed=10).labels


def feed(acc: DecompositionAccumulator, rows: list[int], at: list[int] | None = None) -> None:
    """Windows ``rows`` of HIDDEN, one window per batch, as rows ``at`` (default: rows)."""
    for row, index in zip(rows, rows if at is None else at, strict=True):
        batch = {layer: torch.from_numpy(HIDDEN[layer][[row]]) for layer in LAYERS}
        acc.update(CapturedBatch(batch, torch.tensor([index])))


def full_accumulator(groups: int = 8) -> DecompositionAccumulator:
    acc = DecompositionAccumulator(LAYERS, C, T, D, second_moment=True, groups=groups)
    feed(acc, list(range(C)))
    return acc


def rerun(acc: DecompositionAccumulator):
    def run(rows: list[int]) -> DecompositionAccumulator:
        removed = acc.empty_like()
        feed(removed, rows)
        return removed

    return run


def test_norms_kept_per_window_layer_and_position():
    acc = full_accumulator()
    assert acc.window_norms is not None and acc.window_norms.shape == (len(LAYERS), C, T)
    for i, layer in enumerate(LAYERS):
        direct = np.linalg.norm(HIDDEN[layer].astype(np.float64), axis=2)
        np.testing.assert_allclose(acc.window_norms[i].numpy(), direct, rtol=1e-6)


def test_rule_flags_the_planted_windows_only():
    acc = full_accumulator()
    norms = acc.window_norms.numpy()
    found = outliers.find_outliers(norms, LAYERS)
    assert {(o.window, o.layer, o.position) for o in found} == {(c, 1, 1) for c in OUTLIERS}
    for o in found:
        assert o.norm / o.median > 50
        assert o.median == pytest.approx(float(np.median(norms[1, :, 1])))
    # position 0, large in every window, is never flagged; neither is anything at k = 1000
    assert all(o.position >= 1 for o in found)
    assert outliers.find_outliers(norms, LAYERS, k=1000.0) == []
    summary = outliers.ratio_summary(norms, list(OUTLIERS))
    assert summary["largest_ratio_kept"] < 3 < 50 < summary["smallest_ratio_set_aside"]
    # too few windows for a median: no check
    assert outliers.find_outliers(norms[:, : outliers.MIN_WINDOWS - 1], LAYERS) == []


def test_without_equals_an_accumulator_that_never_saw_them():
    acc = full_accumulator()
    clean = acc.without(rerun(acc)(list(OUTLIERS)))
    kept = [c for c in range(C) if c not in OUTLIERS]
    direct = DecompositionAccumulator(LAYERS, C - 2, T, D, second_moment=True, groups=8)
    direct.group_of = acc.group_of[kept]  # each window in the group it had
    feed(direct, kept, list(range(C - 2)))
    mine, theirs = clean.state_dict(), direct.state_dict()
    assert set(mine) == set(theirs) and NORMS in mine
    for name, want in theirs.items():
        got = mine[name]
        assert got.shape == want.shape and got.dtype == want.dtype, name
        # the group positional sums are float32 state; everything else float64 (or exact)
        rtol = 1e-5 if name == "group_pos_sum" else 1e-9
        scale = float(want.double().abs().max()) or 1.0
        assert float((got.double() - want.double()).abs().max()) <= rtol * scale, name
    assert torch.equal(clean.group_of, direct.group_of)
    for layer in LAYERS:
        a, b = clean.finalize(layer, skip_first=True), direct.finalize(layer, skip_first=True)
        np.testing.assert_allclose(a.pos, b.pos, rtol=1e-9, atol=1e-12)
        assert a.total_ss == pytest.approx(b.total_ss, rel=1e-9)
        np.testing.assert_allclose(a.second_moment, b.second_moment, rtol=1e-9, atol=1e-9)


def test_without_drops_a_group_left_empty_and_refuses_another_grid():
    acc = full_accumulator(groups=C // 2)  # two windows a group: 5 and 22 share none
    pair = [4, 5]  # group 2 entirely
    assert int(acc.group_of[4]) == int(acc.group_of[5])
    clean = acc.without(rerun(acc)(pair))
    assert clean.groups == C // 2 - 1 and clean.n_contexts == C - 2
    assert int(clean.group_of.max()) == clean.groups - 1
    assert np.bincount(clean.group_of.numpy()).min() >= 1
    other = DecompositionAccumulator(LAYERS, C, T, D, second_moment=True, groups=4)
    with pytest.raises(ValueError, match="another grid"):
        acc.without(other)


def test_set_aside_records_rule_windows_and_rerun_agreement():
    acc = full_accumulator()
    found = outliers.set_aside(acc, rerun(acc))
    assert found.windows == list(OUTLIERS) and found.checked
    assert found.record["k"] == outliers.K and found.record["windows_set_aside"] == [5, 22]
    assert found.record["rerun_max_rel_diff"] == 0.0
    assert list(found.kept) == [c for c in range(C) if c not in OUTLIERS]
    assert found.clean.n_contexts == C - 2
    nothing = outliers.set_aside(acc, rerun(acc), k=1000.0)
    assert nothing.clean is acc and nothing.windows == []


def test_state_without_norms_loads_as_no_outlier_information(tmp_path):
    acc = full_accumulator()
    state = acc.state_dict()
    assert NORMS in state and NORMS in acc.state_spec()
    old = {k: v for k, v in state.items() if k != NORMS}
    loaded = DecompositionAccumulator.from_state_dict(old)
    assert loaded.window_norms is None and NORMS not in loaded.state_spec()
    assert NORMS not in loaded.state_dict()
    found = outliers.set_aside(loaded, rerun(loaded))
    assert not found.checked and found.clean is loaded and "why" in found.record
    # a finished run folder saved before the norms existed still loads
    folder = RunFolder(tmp_path)
    folder.save_stats("decomposition", old)
    spec = state_spec(LAYERS, C, T, D, True, 8)
    assert folder.load_stats("decomposition", spec, LAYERS, optional=OPTIONAL_STATE) is not None
    # and round trips keep them where they exist
    again = DecompositionAccumulator.from_state_dict(state)
    assert torch.equal(again.window_norms, acc.window_norms)


def test_checkpoint_without_norms_resumes_without_them(tmp_path):
    acc = DecompositionAccumulator(LAYERS, C, T, D, second_moment=True, groups=8)
    feed(acc, list(range(8)))
    folder = RunFolder(tmp_path)
    folder.path.mkdir(exist_ok=True)
    folder.save_checkpoint({k: v for k, v in acc.state_dict().items() if k != NORMS}, 1)
    fresh = DecompositionAccumulator(LAYERS, C, T, D, second_moment=True, groups=8)
    assert folder.resume_into(fresh, 8) == 1
    assert fresh.window_norms is None
    feed(fresh, list(range(8, C)))  # the rest goes on without norms
    assert fresh.complete


def test_shards_merge_their_norms():
    whole = full_accumulator()
    parts = []
    for start, stop in ((0, 16), (16, C)):
        part = DecompositionAccumulator(
            LAYERS, stop - start, T, D, True, groups=8, context_offset=start, total_contexts=C
        )
        feed(part, list(range(start, stop)), list(range(stop - start)))
        parts.append(part)
    base = DecompositionAccumulator(LAYERS, C, T, D, True, groups=8)
    shards = [Shard(0, range(0, 2), range(0, 16)), Shard(1, range(2, 5), range(16, C))]
    results = [ShardResult(i, p.state_dict()) for i, p in enumerate(parts)]
    merged = merge_shards(base, results, shards)
    assert torch.equal(merged.window_norms, whole.window_norms)
    # in-process merge too: zeros elsewhere, so adding places each shard's rows
    a = DecompositionAccumulator(LAYERS, C, T, D, True, groups=8)
    feed(a, list(range(16)))
    b = DecompositionAccumulator(LAYERS, C, T, D, True, groups=8)
    feed(b, list(range(16, C)))
    assert torch.equal(a.merge(b).window_norms, whole.window_norms)


def windows_of(n: int, length: int, labels: np.ndarray | None = None) -> Windows:
    """Random token windows (labels 0/1 alternating unless given)."""
    ids = np.random.default_rng(3).integers(1, VOCAB, size=(n, length))
    labels = np.arange(n) % 2 if labels is None else np.asarray(labels)
    names = tuple(str(i) for i in range(int(labels.max()) + 1))
    return Windows(ids, labels, names, tuple(map(str, range(n))), 0, "none", "test")


@pytest.fixture(scope="module")
def decomposed(tmp_path_factory):
    """The decomposition step on the planted windows (the rerun fed from HIDDEN)."""
    path = tmp_path_factory.mktemp("outliers")
    acc = full_accumulator()
    windows = windows_of(C, T, LABELS)
    original = decomposition_step.capture_contexts
    decomposition_step.capture_contexts = lambda view, w, like, rows, b: rerun(like)(rows)
    try:
        decomposition_step.DecompositionAnalysis(True, 0)(RunFolder(path), None, windows, acc)
    finally:
        decomposition_step.capture_contexts = original
    return acc, json.loads((path / "metrics.json").read_text())


def test_metrics_record_outliers_and_both_views(decomposed):
    acc, metrics = decomposed
    dec = metrics["decomposition"]
    listed = dec["outlier_windows"]
    assert {(o["window"], o["layer"], o["position"]) for o in listed} == {(5, 1, 1), (22, 1, 1)}
    assert all(set(o) == {"window", "layer", "position", "norm", "median"} for o in listed)
    assert dec["outlier_rule"]["k"] == outliers.K
    assert dec["outlier_rule"]["windows_set_aside"] == [5, 22]
    rows = schema.skip_first_layers(metrics)
    assert rows and all(r["n_contexts"] == C - 2 for r in rows)
    assert all(r["n_contexts"] == C - 2 for r in dec["other_view"]["layers"])
    before = schema.with_outliers_layers(metrics)
    assert before and all(r["n_contexts"] == C and r["skip_first"] for r in before)
    assert schema.with_outliers_intervals(metrics).get("method")
    assert schema.skip_first_intervals(metrics).get("method")
    # the view the claims read is the one on the windows left, exactly
    kept = [c for c in range(C) if c not in OUTLIERS]
    direct = DecompositionAccumulator(LAYERS, C - 2, T, D, second_moment=True, groups=8)
    direct.group_of = acc.group_of[kept]
    feed(direct, kept, list(range(C - 2)))
    expected = analyse_layers(direct, LABELS[kept], True, 0)
    for row, want in zip(rows, expected, strict=True):
        assert row["share_pos"] == pytest.approx(want.share_pos, rel=1e-9)
        assert row["pos_noise_share"] == pytest.approx(want.pos_noise_share, rel=1e-6)
    # the outlier shows in the layer-1 numbers with it, not without
    assert before[1]["share_pos"] != pytest.approx(rows[1]["share_pos"], rel=1e-3)


def test_claims_and_page_read_the_view_without_outliers(decomposed):
    _, metrics = decomposed
    claims = position_claims(metrics, {})
    assert claims
    sentence = section.outliers_reading(metrics)
    assert sentence is not None
    assert "2 of 40 windows" in sentence and f"{outliers.K}x the median" in sentence
    assert "5, 22" in sentence


def test_old_metrics_without_outlier_keys_still_read(decomposed):
    _, metrics = decomposed
    dec = dict(metrics["decomposition"])
    for key in ("outlier_windows", "outlier_rule", "with_outliers"):
        dec.pop(key)
    old = {**metrics, "decomposition": dec}
    assert schema.outlier_windows(old) is None and schema.outlier_rule(old) == {}
    assert schema.with_outliers_layers(old) == [] and schema.with_outliers_intervals(old) == {}
    assert section.outliers_reading(old) is None
    assert len(position_claims(old, {})) == len(position_claims(metrics, {}))


def test_rerun_through_a_model_reproduces_and_subtracts(gpt2):  # noqa: F811
    """capture_contexts on a real (tiny) model: the rerun's states equal the capture's,
    and the windows come out of the sums."""
    n, length = 10, 12
    windows = windows_of(n, length)
    layers = list(range(gpt2.n_layers + 1))
    acc = DecompositionAccumulator(layers, n, length, gpt2.d_model, True, groups=0)
    ids = torch.from_numpy(np.asarray(windows.input_ids, dtype=np.int64))
    for start in range(0, n, 4):
        index = torch.arange(start, min(n, start + 4))
        acc.update(CapturedBatch(hidden_states(gpt2, ids[index], layers), index))
    removed = capture_contexts(gpt2, windows, acc, [3, 7], batch_size=4)
    assert removed.seen.tolist() == [1 if c in (3, 7) else 0 for c in range(n)]
    assert outliers.rerun_difference(acc, removed, [3, 7]) < 1e-6
    clean = acc.without(removed)
    direct = DecompositionAccumulator(layers, n - 2, length, gpt2.d_model, True, groups=0)
    kept = torch.tensor([c for c in range(n) if c not in (3, 7)])
    direct.update(CapturedBatch(hidden_states(gpt2, ids[kept], layers), torch.arange(n - 2)))
    for layer in layers:
        a, b = clean.finalize(layer, skip_first=True), direct.finalize(layer, skip_first=True)
        np.testing.assert_allclose(a.pos, b.pos, rtol=1e-6, atol=1e-6)
        assert a.total_ss == pytest.approx(b.total_ss, rel=1e-6)
