"""Scheme parameters with the paper's definitions, each against an independent computation.

Tiny random decoders built from a config (GPT-2: learned absolute positions, GELU FFN,
final LayerNorm; Llama: rotary, SiLU-gated FFN, final RMSNorm) and a tiny random T5, all
with SmolLM2's tokenizer (no download), on a few BIG-bench items. The definitions are
those of docs/concepts.md ("Scheme parameters"): the relu filters are the model's FFN
activation, ``+`` adds the vector back, w1mean weighs token t of N by t/N, layer N is the
top of the stack after the final norm, -1 the last block's output before it, 0 the token
vectors plus global positions, segment_each_example cuts each solved example into its
context and completion passages, merge_all_segments leaves one vector.
"""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import pytest
import torch
import transformers
from seq2seq_models import tiny_t5
from task_data import FIXTURES

from geomlens.analyses.concepts import aggregate as agg
from geomlens.analyses.concepts import encode
from geomlens.analyses.concepts.baseline import prepare
from geomlens.analyses.concepts.pyramidal import pyramidal_scores
from geomlens.analyses.concepts.schemes import LayerRef, Scheme, parse_scheme, resolve_layer
from geomlens.analyses.concepts.similarity import similarity_scores
from geomlens.analyses.concepts.sweep import read_grid
from geomlens.analyses.concepts.tasks import load_task
from geomlens.errors import GeomlensError
from geomlens.models import ModelView, load_model
from geomlens.models.loading import resolve_folder

DATA = FIXTURES  # the small task copies in tests/data
LAYERS = 3


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: small forwards on a shared 2-core machine (see test_concepts.py)."""
    threads, _ = torch.get_num_threads(), torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_decoder(root: Path, family: str) -> ModelView:
    """A tiny random decoder of ``family`` with SmolLM2's tokenizer, loaded as a folder."""
    tok = transformers.AutoTokenizer.from_pretrained(resolve_folder("smollm2-135m"))
    ids = dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    if family == "gpt2":
        config: transformers.PretrainedConfig = transformers.GPT2Config(
            vocab_size=len(tok), n_positions=512, n_embd=32, n_layer=LAYERS, n_head=4, **ids
        )
        model_class: type = transformers.GPT2LMHeadModel
    else:
        config = transformers.LlamaConfig(
            vocab_size=len(tok),
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=LAYERS,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=512,
            **ids,
        )
        model_class = transformers.LlamaForCausalLM
    torch.manual_seed(0)
    model = model_class(config)
    folder = root / family
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return load_model(str(folder))


@pytest.fixture(scope="module")
def views(tmp_path_factory) -> dict[str, ModelView]:
    root = tmp_path_factory.mktemp("tiny")
    return {family: tiny_decoder(root, family) for family in ("gpt2", "llama")}


@pytest.fixture(scope="module")
def step():
    return load_task("step_inference", DATA)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's FFN activation (``gelu_new``), written out."""
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def hf_states(view: ModelView, ids: list[int]) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Hugging Face's own hidden states and the last block's output (a hook of our own)."""
    kept: list[torch.Tensor] = []
    blocks = view.base.h if view.family == "gpt2" else view.base.layers  # type: ignore[union-attr]
    handle = blocks[-1].register_forward_hook(
        lambda m, a, out: kept.append(out[0] if isinstance(out, tuple) else out)
    )
    try:
        with torch.inference_mode():
            out = view.model(torch.tensor([ids]), output_hidden_states=True)
    finally:
        handle.remove()
    return [h[0] for h in out.hidden_states], kept[0][0]


# WORD_AGG --------------------------------------------------------------------------------
def test_w1mean_weighs_token_t_of_n_by_t_over_n():
    torch.manual_seed(1)
    x = torch.randn(5, 3)
    n = x.shape[0]
    weights = [(t / n) for t in range(1, n + 1)]
    hand = sum(w * x[t] for t, w in enumerate(weights)) / sum(weights)
    torch.testing.assert_close(agg.word_aggregate(x, "w1mean"), hand)


def test_relu_filters_are_the_models_ffn_activation(views):
    assert views["gpt2"].blocks[0].mlp().activation == "gelu_new"
    act = encode.model_activation(views["gpt2"])
    silu = encode.model_activation(views["llama"])
    torch.manual_seed(2)
    x = torch.randn(6, 4) * 2
    torch.testing.assert_close(act(x), gelu_tanh(x))
    torch.testing.assert_close(silu(x), x * torch.sigmoid(x))
    w = torch.arange(1.0, 7.0) / 6
    w = w / w.sum()
    expected = {
        "relu|mean": gelu_tanh(x).mean(0),
        "relu+|mean": (gelu_tanh(x) + x).mean(0),
        "-relu|mean": (-gelu_tanh(-x)).mean(0),
        "-relu+|mean": (-gelu_tanh(-x) + x).mean(0),
        "relu|w1mean": w @ gelu_tanh(x),
        "relu+|w1mean": w @ (gelu_tanh(x) + x),
        "-relu+|w1mean": w @ (-gelu_tanh(-x) + x),
    }
    for scheme, value in expected.items():
        torch.testing.assert_close(agg.word_aggregate(x, scheme, act), value, msg=scheme)
    torch.testing.assert_close(
        agg.word_aggregate(x, "relu|mean", silu), (x * torch.sigmoid(x)).mean(0)
    )
    with pytest.raises(ValueError, match="FFN activation"):
        agg.word_aggregate(x, "relu|mean")


def test_fixed_relu_parts_keep_the_former_definitions():
    x = torch.tensor([[1.0, -2.0], [3.0, 4.0], [-1.0, -6.0], [0.0, 2.0]])
    torch.testing.assert_close(agg.word_aggregate(x, "max0|mean"), torch.tensor([1.0, 1.5]))
    torch.testing.assert_close(agg.word_aggregate(x, "min0|mean"), torch.tensor([-0.25, -2.0]))
    torch.testing.assert_close(agg.word_aggregate(x, "max0|active_mean"), torch.tensor([2.0, 3.0]))
    torch.testing.assert_close(
        agg.word_aggregate(x, "min0|active_mean"), torch.tensor([-1.0, -4.0])
    )
    # on a ReLU model the paper's relu|mean is the same as max0|mean
    torch.testing.assert_close(
        agg.word_aggregate(x, "relu|mean", torch.relu), torch.tensor([1.0, 1.5])
    )


# ENCODING_LAYER --------------------------------------------------------------------------
def test_layer_specs_resolve_to_the_papers_layers():
    n = 30
    assert resolve_layer("0", n) == LayerRef(0)
    assert resolve_layer("E", n) == LayerRef(0, embedding=True)
    assert resolve_layer("12", n) == LayerRef(12)
    assert resolve_layer("30", n) == resolve_layer("N", n) == LayerRef(30, final_norm=True)
    assert resolve_layer("-1", n) == LayerRef(30)
    assert resolve_layer("-30", n) == LayerRef(1)
    assert resolve_layer("middle", n) == LayerRef(15)
    for bad in ("31", "-31"):
        with pytest.raises(GeomlensError, match="outside"):
            resolve_layer(bad, n)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_layer_n_is_after_the_final_norm_and_minus_one_before_it(views, family):
    view = views[family]
    ids = view.tokenizer("The most reasonable step of 'Bake a cake' is")["input_ids"]
    states, last_block = hf_states(view, ids)
    top = encode.layer_vectors(view, [ids], resolve_layer("N", view.n_layers))[0]
    torch.testing.assert_close(top, states[-1])  # HF's last entry is after the final norm
    torch.testing.assert_close(
        encode.layer_vectors(view, [ids], resolve_layer(str(LAYERS), LAYERS))[0], top
    )
    before = encode.layer_vectors(view, [ids], resolve_layer("-1", view.n_layers))[0]
    torch.testing.assert_close(before, last_block)
    assert not torch.allclose(before, top)
    middle = encode.layer_vectors(view, [ids], resolve_layer("1", view.n_layers))[0]
    torch.testing.assert_close(middle, states[1])


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_layer_0_is_token_vectors_plus_global_positions(views, family):
    view = views[family]
    ids = view.tokenizer("Know the order of operations")["input_ids"]
    zero = encode.layer_vectors(view, [ids], resolve_layer("0", view.n_layers))[0]
    e = encode.layer_vectors(view, [ids], resolve_layer("E", view.n_layers))[0]
    tokens = view.W_E[torch.tensor(ids)]
    torch.testing.assert_close(e, tokens)
    if family == "gpt2":  # learned absolute positions are added
        assert view.W_pos is not None
        torch.testing.assert_close(zero, tokens + view.W_pos[: len(ids)])
    else:  # rotary: no global position encodings, 0 is the token vectors
        torch.testing.assert_close(zero, tokens)
    torch.testing.assert_close(zero, hf_states(view, ids)[0][0])


def test_t5_layer_n_is_the_encoders_output(tmp_path):
    view = load_model(str(tiny_t5(tmp_path, "t5-v1_1")))
    ids = view.tokenizer("The most reasonable step of 'Bake a cake' is")["input_ids"]
    with torch.inference_mode():
        ref = view.model.encoder(input_ids=torch.tensor([ids])).last_hidden_state[0]  # type: ignore[union-attr]
    top = encode.layer_vectors(view, [ids], resolve_layer("N", view.n_layers))[0]
    torch.testing.assert_close(top, ref)
    assert encode.model_activation(view)(torch.tensor([1.0])).item() == pytest.approx(
        0.8412, abs=1e-4
    )


# SEGMENT_SCHEME, SEGMENT_AGG -------------------------------------------------------------
def test_segment_each_example_cuts_context_and_completion_passages(views, step):
    view = views["gpt2"]
    p = prepare(view, step, step.take(1), shots=2, seed=0)[0]
    blocks, completions = p.prompt.blocks, p.prompt.completions
    spans = encode.segments_for(
        view, Scheme(segment="segment_each_example"), p.enc, blocks, completions
    )
    assert [len(b) for b in spans] == [2, 2, 1]  # two solved examples, then the query
    flat = [s for block in spans for s in block]
    assert flat[0][0] == 0 and flat[-1][1] == len(p.enc.context)
    assert all(a[1] == b[0] for a, b in zip(flat, flat[1:], strict=False))
    for k in range(2):
        (a, b), (c, d) = spans[k]
        gold = step.items[p.prompt.shots[k]]
        assert view.tokenizer.decode(p.enc.context[c:d]).strip() == gold.choices[gold.gold]
        assert view.tokenizer.decode(p.enc.context[a:b]).strip() == gold.query
    whole = encode.segments_for(
        view, Scheme(segment="segment_each_block"), p.enc, blocks, completions
    )
    assert [len(b) for b in whole] == [1, 1, 1]


def test_merge_all_segments_leaves_one_vector():
    a, b, c = (
        torch.tensor([[1.0, 0.0]]),
        torch.tensor([[0.0, 3.0], [0.0, 1.0]]),
        torch.tensor([[5.0, 5.0]]),
    )
    merged = encode.aggregate_context(
        Scheme(segment_agg="merge_all_segments").validate(), [[a, b], [c]]
    )
    torch.testing.assert_close(merged, torch.tensor([[2.0, 7 / 3]]))  # 3 segments, each 1/3
    per_block = encode.aggregate_context(
        Scheme(segment_agg="mean", example_agg="mean"), [[a, b], [c]]
    )
    torch.testing.assert_close(per_block, torch.tensor([[2.75, 3.0]]))  # blocks weigh the same
    one_per_block = Scheme(segment="concat_each_example", segment_agg="merge_all_segments")
    assert one_per_block.key == Scheme(segment="concat_each_example", example_agg="mean").key
    sim = Scheme(test="similarity", segment_agg="merge_all_segments", example_agg="soft_cluster")
    assert sim.validate().example_agg == "none"


def test_standard_and_merge_run_on_both_tests(views, step):
    view = views["gpt2"]
    prepared = prepare(view, step, step.take(2), shots=1, seed=0)
    out = pyramidal_scores(view, parse_scheme("standard"), prepared)
    assert [len(s.loglik) for s in out] == [4, 4]
    sim = parse_scheme(
        "test=similarity,segment=segment_each_example,layer=N,word_agg=relu+|mean,"
        "norm=zNorm,segment_agg=merge_all_segments,out_layer=0"
    )
    scores = similarity_scores(view, sim, prepared)
    assert [len(s) for s in scores] == [4, 4]
    assert all(math.isfinite(x) for s in scores for x in s)


# presets, parsing, hashes, the grid ------------------------------------------------------
def test_standard_preset_parses():
    s = parse_scheme("standard")
    assert (s.test, s.segment, s.layer, s.word_agg, s.norm) == (
        "pyramidal",
        "segment_each_example",
        "N",
        "mean",
        "none",
    )
    assert (s.segment_agg, s.example_agg) == ("none", "none")
    assert s.label == "P:each_example|N|mean|none|none|none"


def test_unknown_scheme_parts_name_the_part_and_its_values():
    cases = [
        ("word_agg=gelu|mean", "unknown word_agg 'gelu|mean'.*relu\\+\\|mean.*max0\\|mean"),
        ("segment_agg=merge", "unknown segment_agg 'merge'.*merge_all_segments"),
        ("segment=passages", "unknown segment 'passages'.*segment_each_block"),
        ("layer=top", "unknown layer 'top'.*N"),
    ]
    for text, message in cases:
        with pytest.raises(GeomlensError, match=message):
            parse_scheme(text)


def test_hashes_change_only_where_the_meaning_changed():
    unchanged = {  # keys computed before the revision; their cached results stay valid
        "fc016b5e7731": parse_scheme("sanity"),
        "b3badccb100b": parse_scheme("examples_mid"),
        "a37e7949f1d5": parse_scheme("similarity_mid"),
        "fd53d448b079": parse_scheme(
            "segment=segment_sentences,layer=-1,word_agg=w1mean,norm=zNorm,example_agg=mean"
        ),
        "055a30a1d89e": Scheme(segment="concat_tokens", layer="-1", segment_agg="none"),
    }
    for key, scheme in unchanged.items():
        assert scheme.key == key and scheme.revisions() == []
    changed = {
        "efb8b4258e54": Scheme(layer="E", word_agg="relu|mean"),
        "923a623af8d4": Scheme(layer="12"),
        "5a06012cd033": Scheme(segment="segment_each_example", layer="E", segment_agg="none"),
    }
    for key, scheme in changed.items():
        assert scheme.key != key and scheme.revisions()


def test_paper_grid_varies_norm_and_merges_segments_in_test_2():
    grid = read_grid(Path(str(resources.files("geomlens") / "data" / "concept_sweep.yaml")))
    test2 = [s for s in grid if s.test == "similarity"]
    assert {s.norm for s in test2} == {"none", "L2", "varNorm", "zNorm"}
    assert "merge_all_segments" in {s.segment_agg for s in test2}
    assert {"0", "middle", "-1", "N"} <= {s.layer for s in grid}
    assert len({s.key for s in grid}) == len(grid) == 6544
