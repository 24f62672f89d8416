"""Concept-space tests on encoder-decoders: lm-eval's seq2seq scoring, tests 1 and 2, the run.

Tiny random T5s (``seq2seq_models.tiny_t5``: v1.1 gated-GELU untied, v1.0 ReLU tied) with a
real tokenizer that appends ``</s>``, on the packaged timedial items (zero-shot) and
BIG-bench step_inference (1-shot, short enough for a 512-token encoder). T5 v1.1's untied
head at T5's default initialisation gives log-likelihoods near -150 nats, where float32
rounding alone reaches 1e-5, so that row's weights are scaled by 0.5
(``initializer_factor``; the context still moves a choice's score by 2-3 nats, at 0.1 it
hardly does) and agreements are checked at 1e-5. lm-eval returns its sums in
float32 (a unit in the last place is 1.5e-5 at 173 nats), so against lm-eval the bound is
1e-5 plus 2e-7 of the log-likelihood's size.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
import torch
from seq2seq_models import tiny_t5
from task_data import FIXTURES

from geomlens.analyses.concepts.baseline import Prepared, baseline_scores, check_decoder, prepare
from geomlens.analyses.concepts.lmeval import score_requests
from geomlens.analyses.concepts.pyramidal import pyramidal_scores
from geomlens.analyses.concepts.schemes import PRESETS, Scheme, parse_scheme
from geomlens.analyses.concepts.similarity import similarity_scores
from geomlens.analyses.concepts.step import ConceptsConfig, run_concepts
from geomlens.analyses.concepts.tasks import Task, load_task
from geomlens.errors import GeomlensError
from geomlens.models import ModelView, load_model

DATA = FIXTURES  # the small task copies in tests/data
TIMEDIAL = str(resources.files("geomlens") / "data" / "timedial_200.json")
INIT = {"t5-v1_1": 0.5, "t5-v1_0": 1.0}
TOL = 1e-5
CONCAT_DECODER = "segment=concat_tokens,layer=-1,word_agg=mean,norm=none,segment_agg=none"


@pytest.fixture(autouse=True)
def data_env(monkeypatch):
    monkeypatch.setenv("GEOMLENS_DATA", str(DATA))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: small forwards on a shared 2-core machine (see test_concepts.py)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def t5_folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("t5")
    return {row: tiny_t5(root, row, initializer_factor=f) for row, f in INIT.items()}


@pytest.fixture(scope="module")
def t5_views(t5_folders) -> dict[str, ModelView]:
    return {row: load_model(str(folder)) for row, folder in t5_folders.items()}


@pytest.fixture(scope="module")
def tasks() -> dict[int, Task]:
    """The task of each shot count: timedial zero-shot, step_inference 1-shot."""
    return {0: load_task(TIMEDIAL), 1: load_task("step_inference", DATA)}


def prepared_items(view: ModelView, tasks: dict[int, Task], shots: int) -> list[Prepared]:
    task = tasks[shots]
    return prepare(view, task, task.take(4), shots, 0)


def reference_loglik(view: ModelView, context: tuple[int, ...], cont: tuple[int, ...]) -> float:
    """One unbatched ``model(input_ids=context, labels=continuation)``: summed log-probs."""
    with torch.inference_mode():
        logits = view.model(input_ids=torch.tensor([context]), labels=torch.tensor([cont])).logits
    lp = torch.log_softmax(logits[0].float(), dim=-1)
    return float(lp.gather(1, torch.tensor(cont)[:, None]).double().sum())


def max_diff(a: list, b: list, rel: float = 0.0) -> float:
    """The largest |a - b| over items and choices, less ``rel`` x |b| (float32 rounding)."""
    return max(
        abs(x - y) - rel * abs(y)
        for s, t in zip(a, b, strict=True)
        for x, y in zip(s, t, strict=True)
    )


# baseline ---------------------------------------------------------------------------------
@pytest.mark.parametrize("row", list(INIT))
@pytest.mark.parametrize("shots", [0, 1])
def test_baseline_equals_one_model_call_per_choice(t5_views, tasks, row, shots):
    view = t5_views[row]
    prep = prepared_items(view, tasks, shots)
    eos = view.tokenizer.eos_token_id
    assert all(p.enc.context[-1] == eos for p in prep)  # T5 appends </s> to the context
    assert all(eos not in c for p in prep for c in p.enc.continuations)
    scores = baseline_scores(view, prep)
    ref = [[reference_loglik(view, p.enc.context, c) for c in p.enc.continuations] for p in prep]
    assert max_diff([list(s.loglik) for s in scores], ref) < TOL


def test_tokenisation_moves_trailing_space_and_tokenises_continuations_alone(t5_views):
    view = t5_views["t5-v1_1"]
    from geomlens.analyses.concepts.baseline import encode_requests, prefix_token

    tok = view.tokenizer
    enc = encode_requests(view, "The answer is ", ["yes", "no"])
    assert enc.context == tuple(tok("The answer is")["input_ids"])
    assert enc.continuations == tuple(
        tuple(tok(" " + c, add_special_tokens=False)["input_ids"]) for c in ("yes", "no")
    )
    empty = encode_requests(view, "", [" yes"])
    assert empty.context == (prefix_token(view),)


@pytest.mark.parametrize("row", list(INIT))
def test_baseline_agrees_with_lm_eval_seq2seq_model(t5_views, t5_folders, tasks, row):
    try:
        from lm_eval.api.instance import Instance
        from lm_eval.models.huggingface import HFLM
    except ImportError as err:  # lm-eval is in the test extras: its absence is a failure
        pytest.fail(f"lm-evaluation-harness cannot be imported ({err}); install geomlens[test]")
    view = t5_views[row]
    lm = HFLM(pretrained=str(t5_folders[row]), backend="seq2seq", batch_size=4, device="cpu")
    for shots in (0, 1):
        prep = prepared_items(view, tasks, shots)
        requests = [
            Instance(
                request_type="loglikelihood", doc={}, arguments=(p.prompt.text, " " + c), idx=i
            )
            for p in prep
            for i, c in enumerate(p.item.choices)
        ]
        answers = iter(ll for ll, _ in lm.loglikelihood(requests, disable_tqdm=True))
        theirs = [[next(answers) for _ in p.item.choices] for p in prep]
        ours = baseline_scores(view, prep)
        assert max_diff([list(s.loglik) for s in ours], theirs, rel=2e-7) < TOL
        for s, t, p in zip(ours, theirs, prep, strict=True):
            assert s.predictions() == type(s)(tuple(t), s.chars, s.bytes).predictions(), p
        # geomlens's own lm-eval model answers the same requests the same way
        pairs = [tuple(r.args) for r in requests]
        mine = iter(score_requests(view, pairs))
        assert (
            max_diff([list(s.loglik) for s in ours], [[next(mine) for _ in t] for t in theirs])
            < TOL
        )


# test 1 and test 2 ------------------------------------------------------------------------
@pytest.mark.parametrize("shots", [0, 1])
def test_sanity_and_concat_tokens_reproduce_the_baseline(t5_views, tasks, shots):
    for view in t5_views.values():
        prep = prepared_items(view, tasks, shots)
        base = [list(s.loglik) for s in baseline_scores(view, prep)]
        sanity = pyramidal_scores(view, PRESETS["sanity"], prep, feed="encoder")
        assert max_diff([list(s.loglik) for s in sanity], base) < 1e-4
        concat = pyramidal_scores(view, parse_scheme(CONCAT_DECODER), prep, feed="decoder")
        assert max_diff([list(s.loglik) for s in concat], base) < 1e-4
        # fed to the encoder instead, the same vectors are something else entirely
        other = pyramidal_scores(view, parse_scheme(CONCAT_DECODER), prep, feed="encoder")
        assert max_diff([list(s.loglik) for s in other], base) > 1e-2


@pytest.mark.parametrize("shots", [0, 1])
def test_pyramidal_and_similarity_schemes_run(t5_views, tasks, shots):
    view = t5_views["t5-v1_1"]
    prep = prepared_items(view, tasks, shots)
    gold = [p.item.gold for p in prep]
    schemes = [PRESETS["sentences_E"], PRESETS["examples_mid"], parse_scheme("layer=-1")]
    for scheme in schemes:
        for feed in ("encoder", "decoder"):
            scores = pyramidal_scores(view, scheme, prep, feed=feed)
            acc = sum(s.predictions()["acc"] == g for s, g in zip(scores, gold, strict=True))
            assert 0 <= acc / len(prep) <= 1
    for spec in ("similarity_mid", "test=similarity,segment=segment_sentences,out_layer=E"):
        sims = similarity_scores(view, parse_scheme(spec), prep)
        assert [len(s) for s in sims] == [len(p.item.choices) for p in prep]
        assert all(torch.isfinite(torch.tensor(s)).all() for s in sims)


def test_concat_tokens_is_a_scheme_of_its_own():
    s = Scheme(segment="concat_tokens", segment_agg="none").validate()
    assert s.label == "P:concat_tokens|E|mean|none|none|none"
    assert s.key != Scheme(segment="segment_tokens", segment_agg="none").key
    # existing schemes keep their hashes
    assert PRESETS["sanity"].key == Scheme(segment="segment_tokens", segment_agg="none").key


# the run ----------------------------------------------------------------------------------
def test_run_concepts_on_t5_writes_model_kind_and_feed(t5_views, tmp_path):
    view = t5_views["t5-v1_0"]
    base = dict(model=view.source, task=TIMEDIAL, limit=3, schemes=("sanity", "similarity_mid"))
    for feed in ("encoder", "decoder"):
        config = ConceptsConfig(**base, feed=feed)
        run = run_concepts(config, tmp_path / feed, view=view, figures=feed == "encoder")
        c = run.metrics["concepts"]
        assert c["model_kind"] == "encoder-decoder" and c["feed"] == feed
        assert 0 <= c["baseline"]["acc"] <= 1 and "no_context" in c["baseline"]
        lines = (tmp_path / feed / "predictions.jsonl").read_text().splitlines()
        assert len(lines) == 3 and "no_context_scores" in json.loads(lines[0])
        cached = json.loads(next((tmp_path / feed / "schemes").glob("*.json")).read_text())
        assert cached["identity"]["feed"] == feed
    sanity = run_concepts(ConceptsConfig(**base), tmp_path / "encoder", view=view)
    label = PRESETS["sanity"].label
    assert sanity.metrics["concepts"]["schemes"][label]["loglik_max_abs_diff_vs_baseline"] < 1e-4
    assert (tmp_path / "encoder" / "figures" / "concepts_schemes.png").exists()


def test_refusals(t5_views, smollm2, tmp_path_factory):
    from types import SimpleNamespace

    with pytest.raises(GeomlensError, match="is an encoder") as err:
        check_decoder(SimpleNamespace(is_encoder=True, is_seq2seq=False, family="bert", name="m"))
    assert "\n" not in str(err.value) and str(err.value).endswith(").")
    check_decoder(t5_views["t5-v1_0"])  # encoder-decoders pass
    out = tmp_path_factory.mktemp("runs")
    config = ConceptsConfig(model=smollm2.source, task=TIMEDIAL, limit=2, feed="decoder")
    with pytest.raises(GeomlensError, match="--feed decoder is for encoder-decoder models"):
        run_concepts(config, out / "smol", view=smollm2)
    assert not (out / "smol" / "predictions.jsonl").exists()
    short = load_model(str(tiny_t5(tmp_path_factory.mktemp("short"), "t5-v1_0", n_positions=24)))
    config = ConceptsConfig(model=short.source, task=TIMEDIAL, limit=2)
    with pytest.raises(GeomlensError, match=r"encoder accepts \(24\); use fewer --shots"):
        run_concepts(config, out / "short", view=short)
