"""Choices scored behind a cached prefix equal the uncached computation; passes shared by
the baseline and the schemes give the numbers recomputing them gives, bit for bit.

The references are Hugging Face's own forward of each (context, choice) as one sequence
(decoder-only) or ``model(input_ids=context, labels=choice)`` (encoder-decoders), on tiny
random models built from a config; the sharing is checked on SmolLM2 with two short items.
"""

from __future__ import annotations

from importlib import resources

import pytest
import torch
from seq2seq_models import tiny_t5
from task_data import FIXTURES
from tiny_models import VOCAB, _tiny

from geomlens.analyses.concepts import baseline
from geomlens.analyses.concepts.baseline import (
    Row,
    baseline_rows,
    baseline_scores,
    prepare,
    score_rows,
    scoring_mode,
)
from geomlens.analyses.concepts.encode import layer_vectors
from geomlens.analyses.concepts.pyramidal import pyramidal_scores
from geomlens.analyses.concepts.reuse import Reuse
from geomlens.analyses.concepts.schemes import PRESETS, resolve_layer
from geomlens.analyses.concepts.similarity import similarity_scores
from geomlens.analyses.concepts.sweep import context_layers
from geomlens.analyses.concepts.tasks import load_task
from geomlens.models import ModelView, load_model
from geomlens.models.families.llama import LLAMA

TOL = 1e-5
DATA = FIXTURES  # the small task copies in tests/data
TIMEDIAL = str(resources.files("geomlens") / "data" / "timedial_200.json")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def llama() -> ModelView:
    from transformers import LlamaConfig

    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return _tiny(LLAMA, config, seed=3)


def random_rows(n: int, seed: int, longest: int = 14) -> list[Row]:
    """Rows of random ids: prefixes of 1..longest tokens, 2-4 continuations of 1-5 tokens
    (some of one token, scored from the prefix pass alone)."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n):
        p = int(torch.randint(1, longest + 1, (1,), generator=g))
        k = int(torch.randint(2, 5, (1,), generator=g))
        conts = tuple(
            tuple(
                torch.randint(
                    1, VOCAB, (int(torch.randint(1, 6, (1,), generator=g)),), generator=g
                ).tolist()
            )
            for _ in range(k)
        )
        rows.append(Row(torch.randint(1, VOCAB, (p,), generator=g), conts))
    return rows


def reference(view: ModelView, row: Row) -> list[float]:
    """Each continuation after the prefix as one sequence through the whole HF model."""
    out = []
    for cont in row.continuations:
        ids = torch.cat([row.prefix, torch.tensor(cont)])[None]
        with torch.inference_mode():
            logits = view.model(input_ids=ids).logits[0].float()
        lp = torch.log_softmax(logits[row.n_prefix - 1 : -1], dim=-1)
        out.append(float(lp.gather(1, torch.tensor(cont)[:, None]).double().sum()))
    return out


def max_diff(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for r, s in zip(a, b, strict=True) for x, y in zip(r, s, strict=True))


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_cached_scores_equal_one_sequence_per_choice(name, request):
    view = request.getfixturevalue(name)
    rows = random_rows(9, seed=len(name))
    assert scoring_mode(view, rows[0]) == "cached"
    cached = score_rows(view, rows, mode="cached", batch_tokens=64)  # several batches
    assert max_diff(cached, [reference(view, r) for r in rows]) <= TOL


def test_a_row_longer_than_a_sliding_window_is_scored_with_the_models_own_masks(gemma3):
    rows = random_rows(4, seed=5, longest=12)  # gemma3's window is 4 tokens
    assert baseline.beyond_window(gemma3, rows)
    scores = score_rows(gemma3, rows, mode="cached")
    assert max_diff(scores, [reference(gemma3, r) for r in rows]) <= TOL


@pytest.fixture(scope="module")
def t5_view(tmp_path_factory) -> ModelView:
    return load_model(str(tiny_t5(tmp_path_factory.mktemp("t5"), "t5-v1_0")))


def t5_reference(view: ModelView, row: Row) -> list[float]:
    out = []
    for cont in row.continuations:
        with torch.inference_mode():
            logits = view.model(input_ids=row.prefix[None], labels=torch.tensor([cont])).logits
        lp = torch.log_softmax(logits[0].float(), dim=-1)
        out.append(float(lp.gather(1, torch.tensor(cont)[:, None]).double().sum()))
    return out


def test_encoder_decoder_cached_scores_equal_the_uncached_model(t5_view):
    task = load_task(TIMEDIAL)
    prepared = prepare(t5_view, task, task.take(3), 0, 0)
    rows = baseline_rows([p.enc for p in prepared])
    assert scoring_mode(t5_view, rows[0]) == "cached"
    cached = score_rows(t5_view, rows, mode="cached")
    assert max_diff(cached, [t5_reference(t5_view, r) for r in rows]) <= TOL
    plain = score_rows(t5_view, rows, mode="plain")
    assert max_diff(cached, plain) <= TOL


def test_shared_passes_give_the_numbers_recomputing_gives(smollm2):
    """The baseline's context pass kept at a scheme's layer equals that scheme's own
    encoding bit for bit; the sanity scheme's rows are the baseline's (0 difference), read
    back from the baseline's scoring; every scheme scores the same with and without reuse."""
    task = load_task("step_inference", DATA)
    prepared = prepare(smollm2, task, task.take(2), 1, 0)
    schemes = [PRESETS[name] for name in ("sanity", "examples_mid", "similarity_mid")]
    layers = context_layers(smollm2, schemes)
    assert [ref.index for ref in layers] == [smollm2.n_layers // 2]
    reuse = Reuse()
    base = baseline_scores(smollm2, prepared, reuse=reuse, layers=layers)
    contexts = [p.enc.context for p in prepared]
    middle = resolve_layer("middle", smollm2.n_layers)
    kept = layer_vectors(smollm2, contexts, middle, reuse=reuse)
    assert reuse.hits == 1
    fresh = layer_vectors(smollm2, contexts, middle)
    assert all(torch.equal(a, b) for a, b in zip(kept, fresh, strict=True))
    assert base == baseline_scores(smollm2, prepared)  # the same without recording

    sanity = pyramidal_scores(smollm2, PRESETS["sanity"], prepared, reuse=reuse)
    assert [s.loglik for s in sanity] == [b.loglik for b in base]
    alone = pyramidal_scores(smollm2, PRESETS["sanity"], prepared)
    assert [s.loglik for s in alone] == [b.loglik for b in base]
    mid = pyramidal_scores(smollm2, PRESETS["examples_mid"], prepared, reuse=reuse)
    assert mid == pyramidal_scores(smollm2, PRESETS["examples_mid"], prepared)
    sim = similarity_scores(smollm2, PRESETS["similarity_mid"], prepared, reuse=reuse)
    assert sim == similarity_scores(smollm2, PRESETS["similarity_mid"], prepared)
