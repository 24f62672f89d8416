"""The addition study: data, exact-match counting, training, resume, the command end to end."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch

from geomlens.analyses.arithmetic import data as D
from geomlens.analyses.arithmetic.command import run_arithmetic
from geomlens.analyses.arithmetic.config import make_config
from geomlens.analyses.arithmetic.evaluate import (
    accuracy_by_length,
    exact_match,
    greedy_answers,
    in_float64,
)
from geomlens.analyses.arithmetic.geometry import untrained_block
from geomlens.analyses.arithmetic.model import build_model, model_view
from geomlens.analyses.arithmetic.seeds import seed_spread, side_means, spread
from geomlens.analyses.arithmetic.train import (
    BatchSource,
    TrainFolder,
    loss_on,
    lr_factor,
    offset_position_ids,
    train,
)
from geomlens.cli import main
from geomlens.errors import GeomlensError


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models train faster on one thread than on two contended ones."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def tiny(**overrides):
    """A config small enough to train in a second or two."""
    values = dict(
        train_digits="2-3",
        test_digits="1-4",
        layers=1,
        heads=2,
        d_model=16,
        steps=6,
        batch_size=16,
        lr=3e-3,
        warmup=2,
        train_samples=0,
        checkpoint_every=3,
        checkpoint_eval_samples=4,
        eval_samples=8,
        geometry_contexts=8,
        attention_contexts=3,
        control=False,
        threads=1,
        seed=3,
        seeds=1,
    )
    values.update(overrides)
    return make_config("quick", **values)


# --------------------------------------------------------------------------- data


@pytest.mark.parametrize("reverse", [True, False])
@pytest.mark.parametrize("carry", [True, False])
def test_every_generated_answer_is_right(reverse, carry):
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 12):
        p = D.make_problems(rng, n, 300, reverse=reverse, carry=carry)
        assert p.tokens.shape == (300, D.sequence_length(n))
        for row in p.tokens:
            text = D.decode(row)
            a, rest = text.split("+")
            b, answer = rest.split("=")
            assert len(a) == len(b) == n and len(answer) == n + 1
            if n > 1:
                assert a[0] != "0" and b[0] != "0"
            written = answer[::-1] if reverse else answer
            assert int(written) == int(a) + int(b)
            if not carry:
                assert all(int(x) + int(y) <= 9 for x, y in zip(a, b, strict=True))
        digits = D.answer_digits(p.answers, reverse)
        a_int = D.digits_to_int(p.tokens[:, :n])
        b_int = D.digits_to_int(p.tokens[:, n + 1 : 2 * n + 1])
        assert D.digits_to_int(digits) == [x + y for x, y in zip(a_int, b_int, strict=True)]


def test_carries_happen_only_when_asked():
    rng = np.random.default_rng(1)
    a, b = D.random_operands(rng, 6, 500, carry=True)
    assert D.add_digits(a, b)[1].max() > 0
    a, b = D.random_operands(rng, 6, 500, carry=False)
    assert D.add_digits(a, b)[1].max() == 0


def _digit_length(rows: np.ndarray) -> np.ndarray:
    """Digits of each number, leading zeros not counted (0 has one digit)."""
    nonzero = rows != 0
    return np.where(nonzero.any(1), rows.shape[1] - nonzero.argmax(1), 1)


@pytest.mark.parametrize("carry", [True, False])
def test_unequal_operands_pair_an_n_digit_number_with_a_shorter_one(carry: bool) -> None:
    n, count = 6, 4000
    a, b = D.random_operands(np.random.default_rng(5), n, count, carry=carry, unequal=True)
    la, lb = _digit_length(a), _digit_length(b)
    assert (np.maximum(la, lb) == n).all()  # the longer operand keeps n digits
    shorter = np.minimum(la, lb)
    # m uniform over 1..n: every length drawn, each about count / n times (no-carry pairs
    # lose a few leading digits where the other operand's digit is 9)
    counts = np.bincount(shorter, minlength=n + 1)[1:]
    assert counts.min() > 0.6 * count / n and counts.max() < 1.4 * count / n
    assert 0.4 < (la < lb).mean() / max((lb < la).mean(), 1e-9) < 2.5  # a or b at random
    if not carry:
        assert D.add_digits(a, b)[1].max() == 0
    p = D.make_problems(np.random.default_rng(5), n, 50, carry=carry, unequal=True)
    a_int = D.digits_to_int(p.tokens[:, :n])
    b_int = D.digits_to_int(p.tokens[:, n + 1 : 2 * n + 1])
    total = D.digits_to_int(D.answer_digits(p.answers, p.reverse))
    assert total == [x + y for x, y in zip(a_int, b_int, strict=True)]
    assert p.tokens.shape == (50, D.sequence_length(n))


def test_reversal_round_trips():
    p = D.make_problems(np.random.default_rng(2), 4, 50, reverse=True)
    q = D.make_problems(np.random.default_rng(2), 4, 50, reverse=False)
    assert np.array_equal(p.prompts, q.prompts)
    assert np.array_equal(D.answer_digits(p.answers, True), q.answers)
    assert np.array_equal(D.answer_digits(D.answer_digits(p.answers, True), True), p.answers)
    assert D.decode(D.encode("12+34=640")) == "12+34=640"


def test_batches_pad_right_and_predict_only_answers():
    batch = D.train_batch(np.random.default_rng(0), range(2, 4), 8)
    assert batch.tokens.shape == (8, D.sequence_length(3))
    short = batch.tokens[0]  # lengths are in order: the first rows have 2 digits
    assert D.decode(short).endswith("___") and D.decode(short)[2] == "+"
    targets = batch.targets[0]
    kept = np.nonzero(targets != -100)[0]
    assert kept.tolist() == list(range(D.prompt_length(2) - 1, D.sequence_length(2) - 1))
    assert np.array_equal(targets[kept], short[kept + 1])


def test_fixed_dataset_gives_each_step_the_same_batch():
    ds = D.Dataset(5, range(2, 4), 40)
    first = ds.batch(7, 16)
    again = D.Dataset(5, range(2, 4), 40).batch(7, 16)
    assert np.array_equal(first.tokens, again.tokens)
    assert not np.array_equal(ds.batch(8, 16).tokens, first.tokens)


# --------------------------------------------------------------------------- evaluation


def test_exact_match_on_planted_outputs():
    target = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9], [0, 0, 1]])
    predicted = np.array([[1, 2, 3], [4, 5, 0], [7, 8, 9], [1, 0, 0]])
    assert exact_match(predicted, target).tolist() == [True, False, True, False]
    with pytest.raises(ValueError):
        exact_match(predicted[:, :2], target)


class Oracle(torch.nn.Module):
    """A fake LM that writes the right answer digits of planted problems, except where told."""

    def __init__(self, problems: D.Problems, wrong_rows: set[int]) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.full = torch.from_numpy(problems.tokens)
        self.wrong = wrong_rows

    def forward(self, input_ids, use_cache=False):
        batch, width = input_ids.shape
        logits = torch.zeros(batch, width, len(D.VOCAB))
        for i in range(batch):
            row = int(np.nonzero((self.full[:, :width] == input_ids[i]).all(1).numpy())[0][0])
            nxt = int(self.full[row, width])
            if row in self.wrong and width == self.full.shape[1] - 1:
                nxt = (nxt + 1) % 10
            logits[i, -1, nxt] = 1.0
        return type("Out", (), {"logits": logits})()


def test_accuracy_counts_planted_mistakes():
    p = D.make_problems(np.random.default_rng(4), 3, 10)
    oracle = Oracle(p, wrong_rows={1, 5, 7})
    answers = greedy_answers(oracle, p.prompts, 4, batch_size=4)
    assert exact_match(answers, p.answers).tolist() == [i not in {1, 5, 7} for i in range(10)]
    assert accuracy_by_length(oracle, {3: p}) == {3: pytest.approx(0.7)}


# --------------------------------------------------------------------------- training


def test_a_few_steps_reduce_the_loss():
    config = tiny(d_model=32, heads=4, layers=2, lr=1e-2)
    torch.manual_seed(0)
    model = build_model(config.shape, seed=0)
    source = BatchSource(config, randomise_positions=False)
    batch, _ = source(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with torch.no_grad():
        before = float(loss_on(model, batch, None, torch.device("cpu")))
    for _ in range(15):
        loss = loss_on(model, batch, None, torch.device("cpu"))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        after = float(loss_on(model, batch, None, torch.device("cpu")))
    assert after < 0.8 * before


def test_randomised_position_ids_are_sorted_subsets():
    config = tiny(control=True)
    batch, positions = BatchSource(config, randomise_positions=True)(0)
    assert positions is not None and positions.shape == batch.tokens.shape
    assert bool((positions[:, 1:] > positions[:, :-1]).all())
    assert int(positions.max()) < config.shape.n_positions


def test_offset_position_ids_are_windows_that_fit_and_reach_every_row():
    config = tiny(control=True, control_positions="offset")
    n_positions = config.shape.n_positions
    source = BatchSource(config, randomise_positions=True)
    starts = set()
    for step in range(4):
        batch, positions = source(step)
        assert positions is not None and positions.shape == batch.tokens.shape
        width = batch.tokens.shape[1]
        first = positions[:, :1]
        assert torch.equal(positions - first, torch.arange(width).expand_as(positions))
        assert int(positions.min()) >= 0 and int(positions.max()) <= n_positions - 1
        starts |= {int(k) for k in first.flatten()}
    # 64 windows of width 12 over 15 ids: every offset 0..3, so every row, is drawn
    assert starts == set(range(n_positions - width + 1))
    # the same step gives the same ids; the subset scheme still gives gapped subsets
    assert torch.equal(source(2)[1], BatchSource(config, randomise_positions=True)(2)[1])
    _, subset = BatchSource(tiny(control=True), randomise_positions=True)(0)
    assert subset is not None and not torch.equal(subset - subset[:, :1], positions - first)


def test_offset_window_wider_than_the_table_is_refused():
    with pytest.raises(ValueError, match="does not fit"):
        offset_position_ids(np.random.default_rng(0), 2, 12, 11)
    assert (
        offset_position_ids(np.random.default_rng(0), 3, 11, 11).tolist() == [list(range(11))] * 3
    )


def test_view_of_the_model_is_the_gpt2_mapping():
    config = tiny()
    view = model_view(build_model(config.shape, seed=0))
    assert view.family == "gpt2" and view.position.kind == "learned"
    assert view.W_pos is not None and view.W_pos.shape == (D.sequence_length(4), 16)


def test_resume_after_interruption_continues_from_the_checkpoint(tmp_path):
    config = tiny(steps=6, checkpoint_every=2, check_every=2, check_samples=4, target_accuracy=1.0)
    problems = {3: D.make_problems(np.random.default_rng(0), 3, 4)}
    whole = train(config, tmp_path / "whole", problems, progress=False)

    def interrupt(done, stop):
        if done == 3:
            stop.requested, stop.signal_name = True, "SIGINT"

    with pytest.raises(GeomlensError, match="step 3 of at most 6.*rerun the same command"):
        train(config, tmp_path / "cut", problems, progress=False, on_step=interrupt)
    saved = TrainFolder(tmp_path / "cut").load_checkpoint()
    assert saved is not None and saved["step"] == 3
    resumed = train(config, tmp_path / "cut", problems, progress=False)
    assert resumed.resumed_from == 3
    for (name, a), (_, b) in zip(
        whole.model.state_dict().items(), resumed.model.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    assert resumed.history.loss == whole.history.loss
    assert resumed.history.evals == whole.history.evals
    assert resumed.history.checks == whole.history.checks and len(whole.history.checks) == 3
    assert not TrainFolder(tmp_path / "cut").checkpoint.exists()


def test_constant_schedule_holds_the_peak_rate_after_warm_up():
    assert [lr_factor(s, 4, 10, "constant") for s in (0, 3, 4, 9, 500)] == [0.25, 1, 1, 1, 1]
    assert lr_factor(10, 4, 10, "cosine") == pytest.approx(0.0)


def test_training_stops_at_the_first_check_that_meets_the_target(tmp_path, monkeypatch):
    # planted criterion scores: the first at or above 0.99 is the fourth check (step 8)
    planted = iter([0.2, 0.5, 0.985, 0.99, 1.0, 1.0])
    monkeypatch.setattr(
        "geomlens.analyses.arithmetic.train.criterion_score",
        lambda model, config, held: next(planted),
    )
    config = tiny(steps=20, check_every=2, checkpoint_every=5, target_accuracy=0.99)
    problems = {3: D.make_problems(np.random.default_rng(0), 3, 4)}
    trained = train(config, tmp_path / "planted", problems, progress=False)
    h = trained.history
    assert [c[0] for c in h.checks] == [2, 4, 6, 8] and h.checks[-1][1] == 0.99
    assert (h.steps, h.stopped) == (8, "target")
    assert [e["step"] for e in h.evals] == [5, 8]  # the last evaluation is where it stopped
    assert TrainFolder(tmp_path / "planted").weights.exists()


def test_an_unmet_target_trains_to_the_cap_and_checks_real_accuracy(tmp_path):
    config = tiny(steps=6, check_every=3, check_samples=5, target_accuracy=1.0)
    problems = {3: D.make_problems(np.random.default_rng(0), 3, 4)}
    trained = train(config, tmp_path / "cap", problems, progress=False)
    h = trained.history
    assert (h.steps, h.stopped) == (6, "steps") and [c[0] for c in h.checks] == [3, 6]
    # the check is the lowest held-out exact match over the training lengths, recomputed
    from geomlens.analyses.arithmetic.train import held_out_problems

    held = held_out_problems(config)
    assert sorted(held) == [2, 3] and all(len(p.tokens) == 5 for p in held.values())
    assert h.checks[-1][1] == min(accuracy_by_length(trained.model, held).values())
    # a target of 0 is met at the first check
    met = train(replace(config, target_accuracy=0.0), tmp_path / "zero", problems, progress=False)
    assert (met.history.steps, met.history.stopped) == (3, "target")


def _trained_weights(config, folder, problems, nudge: float) -> dict[str, torch.Tensor]:
    """Train ``config`` with every initial weight scaled by 1 + nudge * N(0, 1)."""
    built = build_model

    def nudged(shape, seed):
        model = built(shape, seed)
        noise = torch.Generator().manual_seed(99)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 + nudge * torch.randn(p.shape, generator=noise))
        return model

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("geomlens.analyses.arithmetic.train.build_model", nudged)
        trained = train(config, folder, problems, progress=False)
    return {k: v.detach().clone() for k, v in trained.model.state_dict().items()}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_quick_training_shrugs_off_float32_rounding(tmp_path, dtype):
    # A machine with other float32 rounding starts every step from slightly different
    # numbers. Trained in float64 (the quick preset's precision), a relative nudge of
    # 2^-24 to every initial weight moves the weights after 30 AdamW steps by about 1e-6
    # of their size (measured: 1.4e-6); in float32, where such differences arise at every
    # operation and AdamW's normalisation blows up those in near-zero gradients, by about
    # 1e-2 (measured: 1e-2). A quick preset whose result hangs on the CPU fails here.
    config = tiny(steps=30, batch_size=32, lr=1e-2, checkpoint_every=30, dtype=dtype)
    if dtype == "float64":
        assert make_config("quick").dtype == "float64"
    problems = {n: D.make_problems(np.random.default_rng(n), n, 16) for n in (2, 3)}
    plain = _trained_weights(config, tmp_path / "plain", problems, 0.0)
    nudged = _trained_weights(config, tmp_path / "nudged", problems, 2.0**-24)
    moved = max(float((plain[k] - nudged[k]).abs().max() / plain[k].abs().max()) for k in plain)
    if dtype == "float64":
        assert moved < 1e-4
    else:  # the check can fail: float32 training moves far more
        assert moved > 1e-3


def test_float64_decoding_leaves_the_model_as_it_was():
    model = build_model(tiny().shape, seed=0)
    copy = in_float64(model)
    assert copy is not model and next(copy.parameters()).dtype == torch.float64
    assert next(model.parameters()).dtype == torch.float32
    assert in_float64(copy) is copy


def test_untrained_block_cosines_match_a_planted_gram():
    # trained ids 0-2, untrained 3-5: planted cosines 0.6 among the untrained, -0.2
    # between the two groups, 0.1 among the trained
    gram = np.full((6, 6), 0.1)
    gram[3:, 3:] = 0.6
    gram[:3, 3:] = gram[3:, :3] = -0.2
    np.fill_diagonal(gram, 1.0)
    within, across = untrained_block(gram, 3)
    assert within == pytest.approx(0.6) and across == pytest.approx(-0.2)
    assert untrained_block(gram, 6) == (None, None)
    # one untrained id (5): no pair among the untrained; rows 0-2 give -0.2, rows 3-4 0.6
    assert untrained_block(gram, 5) == (None, pytest.approx((3 * -0.2 + 2 * 0.6) / 5))


# --------------------------------------------------------------------------- seeds


def test_spread_matches_numpy_and_skips_missing_values():
    values = [0.2, None, 0.9, 0.5, float("nan"), 0.4]
    kept = np.array([0.2, 0.9, 0.5, 0.4])
    got = spread(values)
    assert got["n"] == 4 and got["min"] == 0.2 and got["max"] == 0.9
    assert got["median"] == pytest.approx(0.45) and got["mean"] == pytest.approx(kept.mean())
    assert got["sd"] == pytest.approx(np.sqrt(((kept - kept.mean()) ** 2).sum() / 3))
    assert spread([0.7])["sd"] is None and spread([None])["n"] == 0
    assert side_means({1: 0.1, 2: 1.0, 3: 0.9, 4: 0.3, 5: 0.1}, (2, 3)) == (
        0.1,
        pytest.approx(0.2),
    )
    assert side_means({2: 1.0}, (2, 3)) == (None, None)


# --------------------------------------------------------------------------- command


def test_command_writes_metrics_and_figures_deterministically(tmp_path, monkeypatch):
    config = tiny(control=True)
    run = run_arithmetic(config, tmp_path / "a", progress=False)
    m = run.metrics["arithmetic"]
    assert m["train_range"] == [2, 3] and m["test_range"] == [1, 4] and m["seeds"] == [3]
    (r,) = m["runs"]
    assert sorted(r["accuracy_by_length"], key=int) == ["1", "2", "3", "4"]
    assert all(0.0 <= a <= 1.0 for a in r["accuracy_by_length"].values())
    assert r["accuracy_shorter"] == r["accuracy_by_length"]["1"]
    assert r["accuracy_longer"] == r["accuracy_by_length"]["4"]
    assert [e["step"] for e in r["checkpoints"]] == [3, 6]
    assert r["steps"] == 6 and r["stopped"] == "steps"
    geo = r["geometry"]
    assert [g["operand_length"] for g in geo] == [3, 4]
    assert geo[0]["n_positions"] == 11 and len(geo[0]["layers"]) == 2
    row = geo[0]["layers"][1]
    shares = row["share_pos"] + row["share_ctx"] + row["share_resid"]
    assert shares == pytest.approx(1.0)
    for key in ("pos_rank", "pos_low_freq", "pos_smoothness"):
        assert key in row
    # the 3-digit grid is all trained; the 4-digit one has 14 - 11 = 3 untrained ids
    assert row["untrained_cos_within"] is None and row["untrained_cos_across"] is None
    longer = geo[1]["layers"][1]
    assert -1.0 <= longer["untrained_cos_within"] <= 1.0
    assert -1.0 <= longer["untrained_cos_across"] <= 1.0
    assert len(geo[0]["attention"][0]["pos_pos_share"]) == 2
    assert m["control"]["position_ids"].startswith("sorted random")
    assert len(m["control"]["runs"][0]["geometry"]) == 2
    for name in ("accuracy", "training", "gram", "pos_pos"):
        assert (run.path / "figures" / f"arithmetic_{name}.png").stat().st_size > 1000
    # finished weights are reused after an interruption past training, and the analyses
    # give the same bytes again (training itself is checked bit for bit above; the
    # figures were checked once)
    copy = tmp_path / "b"
    shutil.copytree(run.path, copy)
    (copy / "metrics.json").unlink()
    shutil.rmtree(copy / "figures")
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    monkeypatch.setattr("geomlens.analyses.arithmetic.command.save_all", lambda figures: None)
    again = run_arithmetic(config, copy, progress=False)
    assert (run.path / "metrics.json").read_bytes() == (again.path / "metrics.json").read_bytes()
    # rerunning into a finished folder reuses it
    assert run_arithmetic(config, tmp_path / "a", progress=False).path == run.path


def test_seeds_are_trained_apart_and_spread(tmp_path):
    config = tiny(seeds=2, steps=4, checkpoint_every=2)
    run = run_arithmetic(config, tmp_path / "seeds", progress=False)
    m = run.metrics["arithmetic"]
    assert m["seeds"] == [3, 4] and [r["seed"] for r in m["runs"]] == [3, 4]
    for seed in (3, 4):
        assert (run.path / f"seed-{seed}" / "model" / "model.safetensors").exists()
    a, b = m["runs"]
    assert a["loss_curve"] != b["loss_curve"]
    s = m["spread"]
    assert s["seeds"] == 2 and s["criterion_met"] == 0
    for key in ("accuracy_in_range", "accuracy_shorter", "accuracy_longer"):
        assert (s[key]["min"], s[key]["max"]) == (min(a[key], b[key]), max(a[key], b[key]))
    smooth = [r["geometry"][0]["layers"][1]["pos_smoothness"] for r in (a, b)]
    got = s["geometry"][0]["layers"][1]["pos_smoothness"]
    assert got["mean"] == pytest.approx(np.mean(smooth), abs=1e-8)
    assert got["sd"] == pytest.approx(np.std(smooth, ddof=1), abs=1e-8)
    recomputed = seed_spread(m["runs"])["accuracy_by_length"]
    assert recomputed == s["accuracy_by_length"]


def test_config_errors_are_one_sentence(capsys, tmp_path):
    for argv, phrase in (
        (["--train-digits", "10-5"], "1 <= lo <= hi"),
        (["--steps", "0"], "--steps must be at least 1"),
        (["--train-digits", "five"], "range of operand lengths"),
        (["--d-model", "30", "--heads", "4"], "not a multiple"),
        (["--target-accuracy", "1.5"], "between 0 and 1"),
        (["--seeds", "0"], "--seeds must be at least 1"),
        (["--check-every", "0"], "--check-every must be at least 1"),
        (["--control-positions", "random"], "--control-positions must be one of subset, offset"),
    ):
        code = main(["arithmetic", "--preset", "quick", *argv, "--out", str(tmp_path / "r")])
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1, err
        assert lines[0].startswith("geomlens: error: ") and phrase in lines[0]


def test_presets_hold_the_original_setting():
    full = make_config("full")
    assert (full.layers, full.heads, full.d_model) == (8, 8, 512)
    assert full.train_digits == (5, 10) and full.train_samples == 1_000_000
    assert full.reverse_output
    assert full.target_accuracy is None and full.seeds == 1 and full.lr_schedule == "cosine"
    assert full.dtype == "float32" and full.control
    quick = make_config("quick", steps=5)
    assert quick.steps == 5 and quick.train_digits == (2, 3)
    assert quick.target_accuracy == 0.99 and quick.lr_schedule == "constant"
    assert quick.seeds == 5 and quick.seed_list == [0, 1, 2, 3, 4]
    assert quick.dtype == "float64" and quick.threads == 1
    assert replace(quick, seed=1).to_dict()["seed"] == 1
    assert json.dumps(quick.to_dict())
