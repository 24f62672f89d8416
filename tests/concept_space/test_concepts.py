"""Concept-space tests: tasks, lm-eval conventions, aggregations, scores, sweeps, the CLI.

Model tests use SmolLM2 on a few short BIG-bench items (the small copies in tests/data;
the tests marked ``bigbench`` read the full tasks where GEOMLENS_DATA names them).
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from task_data import FIXTURE_TASKS, FIXTURES

from geomlens.analyses.concepts import aggregate as agg
from geomlens.analyses.concepts.baseline import (
    baseline_scores,
    check_decoder,
    encode_item,
    encode_requests,
    plain_loglik,
    prepare,
)
from geomlens.analyses.concepts.data import extract_tasks, task_of_member
from geomlens.analyses.concepts.encode import segments_for
from geomlens.analyses.concepts.lmeval import score_requests
from geomlens.analyses.concepts.pyramidal import pyramidal_scores
from geomlens.analyses.concepts.schemes import PRESETS, Scheme, parse_scheme, resolve_layer
from geomlens.analyses.concepts.scores import accuracy_ci, ratio_ci
from geomlens.analyses.concepts.similarity import similarity_scores
from geomlens.analyses.concepts.step import ConceptsConfig, run_concepts
from geomlens.analyses.concepts.sweep import expand, read_grid
from geomlens.analyses.concepts.tasks import (
    build_prompt,
    fewshot_indices,
    load_task,
    read_task,
    split_answer,
)
from geomlens.cli import main
from geomlens.errors import GeomlensError

DATA = FIXTURES
"""The task folder: the small copies in tests/data (tests/task_data.py)."""


@pytest.fixture(autouse=True)
def data_env(monkeypatch):
    monkeypatch.setenv("GEOMLENS_DATA", str(DATA))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: these forwards are small, and on a shared 2-core machine two
    threads stall each other at every parallel region (5x the wall time, measured)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def step():
    return load_task("step_inference", DATA)


# tasks -----------------------------------------------------------------------------------
def test_reads_hellaswag_jsonl_as_lm_eval_formats_it(tmp_path):
    rec = {
        "activity_label": "Removing ice from car",
        "ctx_a": "Then, the man [header] writes over the snow [title] covering the window.",
        "ctx_b": "a woman wearing winter clothes smiles.",
        "ctx": "ignored",
        "endings": [" [title] then, the man adds wax.", "the man continues removing snow."],
        "label": "1",
    }
    path = tmp_path / "hs.jsonl"
    path.write_text(json.dumps(rec) + "\n\n" + json.dumps({**rec, "label": 0}) + "\n")
    task = read_task(path)
    assert task.format == "hellaswag" and task.name == "hs" and len(task.items) == 2
    item = task.items[0]
    assert item.query == (
        "Removing ice from car: Then, the man writes over the snow. covering the window. "
        "A woman wearing winter clothes smiles."
    )
    assert item.choices == (" then, the man adds wax.", "the man continues removing snow.")
    assert item.gold == 1 and task.items[1].gold == 0


def test_reads_bigbench_json_and_finds_tasks_by_name(step):
    assert step.format == "bigbench" and len(step.items) == 16
    assert step.name == "goal_step_wikihow/step_inference"
    first = step.items[0]
    assert first.query == "The most reasonable step of 'Solve an Algebraic Expression' is"
    assert first.choices[first.gold] == "Know the order of operations" and len(first.choices) == 4
    assert load_task("social_iqa").format == "bigbench"  # found through GEOMLENS_DATA
    assert step.take(3) == list(step.items[:3])


@pytest.mark.bigbench
def test_the_small_copies_are_the_start_of_the_full_tasks(bigbench_data):
    """Each task in tests/data is the first examples of its full BIG-bench task, read the
    same way (names, formats, items)."""
    full = load_task("step_inference", bigbench_data)
    assert len(full.items) == 2250 and full.name == "goal_step_wikihow/step_inference"
    for name, kept in FIXTURE_TASKS.items():
        small, whole = load_task(name, FIXTURES), load_task(name, bigbench_data)
        assert (small.name, small.format) == (whole.name, whole.format) == (name, "bigbench")
        assert len(small.items) == kept < len(whole.items)
        assert small.items == whole.items[:kept], name


@pytest.mark.bigbench
def test_the_packaged_step_inference_is_the_start_of_the_full_task(bigbench_data):
    from importlib import resources

    packaged = load_task(str(resources.files("geomlens") / "data" / "step_inference_200.json"))
    full = load_task("step_inference", bigbench_data)
    assert packaged.items == full.items[:200]


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        ("{not json", "not valid JSON"),
        ('{"examples": [{"input": "x"}]}', "neither a HellaSwag record"),
        ('{"examples": [{"input": "x", "target_scores": {"a": 1, "b": 1}}]}', "exactly one"),
        ('{"name": "t"}', "no list of 'examples'"),
    ],
)
def test_malformed_task_files_are_refused(tmp_path, content, phrase):
    path = tmp_path / "task.json"
    path.write_text(content)
    with pytest.raises(GeomlensError, match=phrase):
        read_task(path)


def test_unknown_task_name_lists_known_ones():
    with pytest.raises(GeomlensError, match="unknown task 'nope'.*social_iqa"):
        load_task("nope")


def test_fewshot_examples_are_seeded_and_never_the_item(step):
    picks = fewshot_indices(10, 3, 5, seed=7)
    assert picks == fewshot_indices(10, 3, 5, seed=7) and len(set(picks)) == 5
    assert 3 not in picks and all(0 <= p < 10 for p in picks)
    assert fewshot_indices(10, 3, 5, seed=8) != picks
    prompt = build_prompt(step, step.items[0], 2, seed=0)
    assert len(prompt.blocks) == 3 and prompt.blocks[-1] == step.items[0].query
    gold = step.items[prompt.shots[0]]
    assert prompt.blocks[0] == gold.query + " " + gold.choices[gold.gold]
    with pytest.raises(GeomlensError, match="needs more than"):
        fewshot_indices(3, 0, 3, seed=0)


# lm-eval conventions ---------------------------------------------------------------------
def test_trailing_whitespace_moves_to_the_continuation(smollm2, step):
    assert split_answer("Question: why?\n", "yes") == ("Question: why?", "\n yes")
    enc = encode_requests(smollm2, "The sky is ", [" blue"])
    tok = smollm2.tokenizer
    assert enc.context_text == "The sky is"
    assert list(enc.context) == tok("The sky is", add_special_tokens=False)["input_ids"]
    whole = tok("The sky is  blue", add_special_tokens=False)["input_ids"]
    assert list(enc.continuations[0]) == whole[len(enc.context) :]
    # BIG-bench: the input's trailing space is the space before the answer
    item = step.items[0]
    enc = encode_item(smollm2, item.query, item.choices)
    assert tok.decode(list(enc.continuations[0])) == " " + item.choices[0]
    with pytest.raises(GeomlensError, match="more than"):
        encode_requests(smollm2, "word " * 9000, [" end"])


def test_encoder_models_are_refused():
    fake = SimpleNamespace(is_encoder=True, family="bert", name="minilm-l6")
    with pytest.raises(GeomlensError, match="decoder-only"):
        check_decoder(fake)  # type: ignore[arg-type]


def test_baseline_equals_one_forward_per_choice(smollm2, step):
    items = step.take(2)
    prepared = prepare(smollm2, step, items, shots=1, seed=0)
    packed = baseline_scores(smollm2, prepared, pack=True)
    plain = baseline_scores(smollm2, prepared, pack=False)
    for p, a, b in zip(prepared, packed, plain, strict=True):
        ref = [plain_loglik(smollm2, p.enc.context, c) for c in p.enc.continuations]
        np.testing.assert_allclose(a.loglik, ref, atol=2e-3, rtol=1e-4)
        np.testing.assert_allclose(b.loglik, ref, atol=2e-3, rtol=1e-4)
    s = packed[0]
    assert s.chars == tuple(len(c) for c in items[0].choices)
    assert set(s.predictions()) == {"acc", "acc_norm", "acc_bytes"}
    # the lm-eval wrapper's scorer gives the same numbers
    pairs = [(prepared[0].prompt.text, " " + c) for c in items[0].choices]
    np.testing.assert_allclose(score_requests(smollm2, pairs), packed[0].loglik, atol=1e-4)


# test 1 and test 2 -----------------------------------------------------------------------
def test_one_token_segments_at_E_reproduce_the_baseline(smollm2, step):
    prepared = prepare(smollm2, step, step.take(2), shots=1, seed=0)
    base = baseline_scores(smollm2, prepared)
    sanity = PRESETS["sanity"].validate()
    assert sanity.segment == "segment_tokens" and sanity.layer == "E"
    test1 = pyramidal_scores(smollm2, sanity, prepared)
    for a, b in zip(test1, base, strict=True):
        np.testing.assert_allclose(a.loglik, b.loglik, atol=1e-4, rtol=1e-6)


def test_segments_cover_the_context_and_follow_blocks_and_sentences(smollm2):
    task = load_task("timedial")
    prepared = prepare(smollm2, task, task.take(1), shots=1, seed=0)[0]
    n = len(prepared.enc.context)
    for segment, n_blocks in [
        ("segment_sentences", 2),
        ("segment_each_example", 2),
        ("segment_each_block", 2),
        ("concat_each_example", 2),
        ("concat_all_examples", 1),
        ("segment_tokens", 2),
    ]:
        spans = segments_for(
            smollm2,
            Scheme(segment=segment),
            prepared.enc,
            prepared.prompt.blocks,
            prepared.prompt.completions,
        )
        flat = [s for block in spans for s in block]
        assert len(spans) == n_blocks, segment
        assert flat[0][0] == 0 and flat[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(flat, flat[1:], strict=False))
    sentences = segments_for(
        smollm2, Scheme(segment="segment_sentences"), prepared.enc, prepared.prompt.blocks
    )
    assert sum(len(b) for b in sentences) > 4  # a dialogue: several sentences per block


def test_other_layers_and_the_similarity_test_run(smollm2, step):
    prepared = prepare(smollm2, step, step.take(2), shots=1, seed=0)
    scheme = Scheme(segment="segment_sentences", layer="middle", word_agg="w1mean", norm="varNorm")
    out = pyramidal_scores(smollm2, scheme, prepared)
    assert [len(s.loglik) for s in out] == [4, 4]
    assert all(np.isfinite(s.loglik).all() for s in out)
    sim = Scheme(
        test="similarity",
        segment="segment_each_example",
        layer="-1",
        example_agg="soft_cluster",
        out_layer="E",
        similarity="dot",
    )
    scores = similarity_scores(smollm2, sim, prepared)
    assert [len(s) for s in scores] == [4, 4] and np.isfinite(scores).all()


# aggregations on planted arrays ----------------------------------------------------------
def test_word_aggregations_on_planted_vectors():
    x = torch.tensor([[1.0, -2.0], [3.0, 4.0], [-1.0, -6.0], [0.0, 2.0]])
    torch.testing.assert_close(agg.word_weights(4), torch.tensor([1.0, 2, 3, 4]) / 10)
    torch.testing.assert_close(agg.word_aggregate(x, "mean"), torch.tensor([0.75, -0.5]))
    torch.testing.assert_close(agg.word_aggregate(x, "w1mean"), torch.tensor([0.4, -0.4]))
    torch.testing.assert_close(agg.word_aggregate(x, "last"), torch.tensor([0.0, 2.0]))
    relu = (
        torch.relu
    )  # a ReLU model's FFN activation (tests/concept_space/test_concept_schemes.py: GELU)
    torch.testing.assert_close(agg.word_aggregate(x, "relu|mean", relu), torch.tensor([1.0, 1.5]))
    torch.testing.assert_close(
        agg.word_aggregate(x, "-relu|mean", relu), torch.tensor([-0.25, -2.0])
    )
    torch.testing.assert_close(agg.word_aggregate(x, "relu+|mean", relu), torch.tensor([1.75, 1.0]))
    torch.testing.assert_close(
        agg.word_aggregate(x, "-relu+|mean", relu), torch.tensor([0.5, -2.5])
    )
    one = torch.tensor([[5.0, -1.0]])
    for scheme in ("mean", "w1mean", "last"):
        torch.testing.assert_close(agg.word_aggregate(one, scheme), one[0])
    with pytest.raises(ValueError):
        agg.word_aggregate(x, "max")


def test_norms_on_planted_vectors():
    v = torch.tensor([[3.0, 4.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    l2 = agg.normalise(v, "L2")
    torch.testing.assert_close(l2[0].norm(), torch.tensor(1.0))
    torch.testing.assert_close(l2[1], v[1])  # zero stays zero
    var = agg.normalise(v, "varNorm")[0]
    torch.testing.assert_close(var.std(unbiased=False), torch.tensor(1.0))
    torch.testing.assert_close(var / var[0], v[0] / v[0, 0])  # not centred: direction kept
    z = agg.normalise(v, "zNorm")[0]
    torch.testing.assert_close(z.mean(), torch.tensor(0.0), atol=1e-6, rtol=0)
    torch.testing.assert_close(z.std(unbiased=False), torch.tensor(1.0))
    torch.testing.assert_close(agg.normalise(v, "none"), v)


def test_group_aggregation_and_soft_cluster():
    v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    torch.testing.assert_close(agg.group_aggregate(v, "mean"), torch.tensor([[2 / 3, 2 / 3]]))
    assert agg.group_aggregate(v, "none") is v
    q = torch.tensor([2.0, 0.0])
    w = torch.softmax(torch.tensor([2.0, 0.0, 2.0]), 0)
    torch.testing.assert_close(agg.soft_cluster(v, q), w @ v)


# scores ----------------------------------------------------------------------------------
def test_bootstrap_interval_contains_the_estimate():
    rng = np.random.default_rng(0)
    correct = rng.random(40) < 0.6
    acc, lo, hi = accuracy_ci(correct, seed=1)
    assert lo <= acc <= hi and acc == correct.mean() and 0 < hi - lo < 0.5
    assert accuracy_ci(correct, seed=1) == (acc, lo, hi)
    base = rng.random(40) < 0.8
    r, rlo, rhi = ratio_ci(correct, base, seed=1)
    assert r == pytest.approx(correct.mean() / base.mean()) and rlo <= r <= rhi
    assert ratio_ci(correct, np.zeros(40), seed=1) == (None, None, None)


# schemes ---------------------------------------------------------------------------------
def test_scheme_parsing_canonical_forms_and_layers():
    s = parse_scheme("TEST=similarity,SEGMENT_SCHEME=segment_sentences,ENCODING_LAYER=middle")
    assert s.test == "similarity" and s.out_layer == "E" and s.similarity == "dot"
    a = Scheme(segment="segment_each_block", segment_agg="mean").validate()
    b = Scheme(segment="segment_each_block", segment_agg="none").validate()
    assert a.key == b.key and a.out_layer is None
    assert (
        Scheme(segment="segment_sentences", segment_agg="mean").key
        != Scheme(segment="segment_sentences", segment_agg="none").key
    )
    assert len(expand([{"segment": "segment_each_block", "segment_agg": ["mean", "none"]}])) == 1
    assert len(expand([{"segment": "segment_each_example", "segment_agg": ["mean", "none"]}])) == 2
    with pytest.raises(GeomlensError, match="soft_cluster"):
        Scheme(example_agg="soft_cluster").validate()
    with pytest.raises(GeomlensError, match="unknown word_agg 'max'"):
        parse_scheme("word_agg=max")
    with pytest.raises(GeomlensError, match="unknown scheme 'nope'"):
        parse_scheme("nope")
    layers = [resolve_layer(x, 30) for x in ("E", "middle", "0", "12", "-1", "-30", "30")]
    assert [(r.index, r.embedding, r.final_norm) for r in layers] == [
        (0, True, False),
        (15, False, False),
        (0, False, False),
        (12, False, False),
        (30, False, False),
        (1, False, False),
        (30, False, True),
    ]
    for bad in ("31", "-31"):
        with pytest.raises(GeomlensError, match="outside"):
            resolve_layer(bad, 30)


def test_packaged_sweep_grid_reads():
    from importlib import resources

    grid = read_grid(Path(str(resources.files("geomlens") / "data" / "concept_sweep.yaml")))
    assert len(grid) > 500 and {s.test for s in grid} == {"pyramidal", "similarity"}
    assert len({s.key for s in grid}) == len(grid)


# run folder, sweep cache -----------------------------------------------------------------
def test_sweep_resumes_from_cache_and_metrics_are_deterministic(smollm2, tmp_path):
    grid = tmp_path / "grid.json"
    grid.write_text(
        json.dumps(
            [
                {"segment": "segment_tokens", "segment_agg": "none"},
                {"test": "similarity", "segment": "concat_all_examples", "layer": "E"},
            ]
        )
    )
    config = ConceptsConfig(task="step_inference", limit=2, shots=1, sweep=str(grid))
    out = tmp_path / "run"
    run = run_concepts(config, out, view=smollm2)
    m = run.metrics["concepts"]
    assert m["baseline"]["n"] == 2 and set(m["schemes"]) == {
        "P:tokens|E|mean|none|none|none",
        "S:concat_all|E|mean|none|none|none|out=E|mean|dot",
    }
    sanity = m["schemes"]["P:tokens|E|mean|none|none|none"]
    assert sanity["loglik_max_abs_diff_vs_baseline"] <= 1e-4 and sanity["normalised_vs_acc"] == 1.0
    assert run.manifest["schemes_computed"] == 2
    assert 0 <= m["baseline"]["no_context"]["acc"] <= 1  # the choices scored without context
    test = m["baseline"]["context_test"]  # the baseline against it, paired over the items
    assert test["n"] == 2 and test["qualifies"] is False  # two items decide nothing
    assert all("retained_gain" in s and "retained_gain_ci" in s for s in m["schemes"].values())
    lines = (out / "predictions.jsonl").read_text().splitlines()
    assert [json.loads(x)["index"] for x in lines] == [0, 1]
    assert all(len(json.loads(x)["no_context_scores"]) == 4 for x in lines)
    for name in ("sweep_table.md", "sweep_table.csv", "top10.md", "figures/concepts_schemes.png"):
        assert (out / name).exists(), name
    first = (out / "metrics.json").read_bytes()

    def interrupt() -> None:  # as if the run had been killed before finishing
        manifest = json.loads((out / "manifest.json").read_text())
        manifest["status"] = "running"
        (out / "manifest.json").write_text(json.dumps(manifest))

    interrupt()
    again = run_concepts(config, out, view=smollm2, figures=False)
    assert again.manifest["schemes_computed"] == 0 and again.manifest["schemes_cached"] == 2
    assert "baseline_seconds" not in again.manifest["timing"]  # read back, not recomputed
    assert (out / "metrics.json").read_bytes() == first
    interrupt()
    next(iter((out / "schemes").glob("*.json"))).unlink()
    third = run_concepts(config, out, view=smollm2, figures=False)
    assert third.manifest["schemes_computed"] == 1
    assert (out / "metrics.json").read_bytes() == first


# CLI -------------------------------------------------------------------------------------
def assert_one_sentence(capsys, argv: list[str], *phrases: str) -> None:
    code = main(argv)
    _, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("geomlens: error: ") and "Traceback" not in err
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])


def test_cli_bad_inputs_exit_2_with_one_sentence(capsys, tmp_path):
    out = ["--out", str(tmp_path / "r")]
    assert_one_sentence(capsys, ["concepts", "--task", "nope", *out], "unknown task 'nope'")
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    assert_one_sentence(capsys, ["concepts", "--task", str(bad), *out], "not valid JSON")
    assert_one_sentence(capsys, ["concepts", "--limit", "0", *out], "--limit must be at least 1")
    grid = tmp_path / "grid.yaml"
    grid.write_text("segment: [segment_sentences, segment_words]\n")
    assert_one_sentence(
        capsys, ["concepts", "--sweep", str(grid), *out], "unknown segment 'segment_words'"
    )
    assert_one_sentence(capsys, ["concepts", "--scheme", "layer=top", *out], "unknown layer 'top'")
    missing = str(tmp_path / "none.tar.gz")
    assert_one_sentence(
        capsys,
        ["data", "bigbench", "--archive", missing, "--out", str(tmp_path / "d")],
        "does not exist",
    )


# data bigbench ---------------------------------------------------------------------------
def test_extracts_only_the_chosen_task_files(tmp_path):
    archive = tmp_path / "bigbench-1.0.0.tar.gz"
    files = {
        "bigbench-1.0.0/bigbench/benchmark_tasks/social_iqa/task.json": b'{"examples": []}',
        "bigbench-1.0.0/bigbench/benchmark_tasks/a/b/task.json": b'{"x": 1}',
        "bigbench-1.0.0/bigbench/benchmark_tasks/other/task.json": b"{}",
        "bigbench-1.0.0/bigbench/api/task.py": b"print()",
    }
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out = tmp_path / "out"
    written = extract_tasks(archive, out, ["social_iqa", "a/b"])
    assert set(written) == {"social_iqa", "a/b"}
    assert (out / "a" / "b" / "task.json").read_bytes() == b'{"x": 1}'
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "a/b/task.json",
        "social_iqa/task.json",
    ]
    assert task_of_member("x/bigbench/benchmark_tasks/t/task.json") == "t"
    assert task_of_member("x/bigbench/api/task.json") is None
    with pytest.raises(GeomlensError, match="no task.json for: missing"):
        extract_tasks(archive, tmp_path / "o2", ["missing"])


def test_target_logprobs_in_row_chunks_equal_the_whole_head(monkeypatch):
    """Scoring targets through the head a few rows at a time gives the same numbers as
    one log-softmax over every row (what keeps a 262k vocabulary's logits small), up to
    float32 rounding: a BLAS whose order of summation follows the matrix's shape may
    round a product of 7 rows differently from one of 100."""
    from types import SimpleNamespace

    import geomlens.analyses.concepts.rows as rows

    g = torch.Generator().manual_seed(0)
    vocab, d = 5000, 16
    head = torch.nn.Linear(d, vocab, bias=False)
    view = SimpleNamespace(
        model=SimpleNamespace(get_output_embeddings=lambda: head),
        config=SimpleNamespace(final_logit_softcapping=30.0),
        W_E=torch.zeros(vocab, d),
    )
    hidden = torch.randn(100, d, generator=g)
    targets = torch.randint(0, vocab, (100,), generator=g)
    with torch.no_grad():
        whole = rows.head_logprobs(view, hidden).gather(1, targets[:, None])[:, 0].double()
        monkeypatch.setattr(rows, "LOGIT_BYTES", 4 * vocab * 7)  # 7 rows a chunk
        chunked = rows.target_logprobs(view, hidden, targets)
        torch.testing.assert_close(chunked, whole, rtol=1e-6, atol=1e-5)


def test_each_step_has_an_item_bar_and_no_running_line(smollm2, tmp_path, capsys):
    config = ConceptsConfig(task="step_inference", limit=2, shots=1, schemes=("sanity",))
    run_concepts(config, tmp_path / "run", view=smollm2, progress=True, figures=False)
    err = capsys.readouterr().err
    assert "(running)" not in err
    for step in ("baseline", "choices alone (no context)", "scheme 1/1"):
        bar = [line for line in err.replace("\r", "\n").splitlines() if line.startswith(step)]
        assert bar and "2/2" in bar[-1] and "item" in bar[-1], (step, err)
