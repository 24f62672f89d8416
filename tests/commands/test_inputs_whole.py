"""Inputs are checked whole: models, tokenizers, corpora, tasks and option values.

Each bad input is one sentence through ``geomlens.cli.main``: exit code 2, one line on
stderr, no traceback, and no ``metrics.json`` written. A model loads whole or not at all
(a weight missing, of another shape, or from another config is refused, not filled with
random values), while what Hugging Face legitimately leaves out (tied weights, heads a
base model does not have) still loads. Tiny models are built from configs here and saved
with a small character-level tokenizer (``char_tokenizer``) whose ids the embedding covers.
docs/errors.md ("Inputs checked whole") lists the same cases.
"""

from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file
from tiny_models import char_tokenizer
from tokenizers import Tokenizer, models, pre_tokenizers

import geomlens.analyses.compare as compare
from geomlens.cli import main
from geomlens.corpus import load_corpus
from geomlens.corpus.sources import MAX_DOCUMENT_CHARS
from geomlens.models import load_model

VOCAB = 64

LLAMA: dict[str, Any] = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)


def save_model(folder: Path, config: Any, tokenizer: Any | None = None, head: Any = None) -> Path:
    """A random model of ``config`` saved with a tokenizer (default: a covering one)."""
    torch.manual_seed(0)
    model = (head or transformers.AutoModelForCausalLM).from_config(config)
    model.save_pretrained(folder)
    (tokenizer if tokenizer is not None else char_tokenizer(config.vocab_size)).save_pretrained(
        folder
    )
    return folder


def tiny_llama(folder: Path, **options: Any) -> Path:
    return save_model(folder, transformers.LlamaConfig(**{**LLAMA, **options}))


def edit_config(folder: Path, **changes: Any) -> None:
    path = folder / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def refused(
    argv: str, phrases: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> str:
    """Run ``argv`` (plus --out and --quiet); check the one-sentence refusal, return it."""
    out = tmp_path / "run"
    args = shlex.split(argv)
    if args[0] != "compare":
        args += ["--out", str(out), "--quiet"]
    capsys.readouterr()
    code = main(args)
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert code == 2, err
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    assert lines[0].startswith("geomlens: error: ") and lines[0].endswith("."), lines[0]
    assert len(lines[0]) < 700, lines[0]  # key and layer lists are bounded
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])
    assert not list(tmp_path.rglob("metrics.json")), "metrics.json written"
    return lines[0]


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small corpus folder (a capture that got this far would run on it)."""
    d = tmp_path_factory.mktemp("docs")
    for k in range(4):
        (d / f"{k}.txt").write_text(f"document {k} on the geometry of language " * 8)
    return d


def capture_with(model: Path, docs: Path) -> str:
    return f"capture --model {model} --corpus {docs} --contexts 2 --length 8"


# whole models or nothing -----------------------------------------------------------------


def test_untied_and_tied_tiny_models_load_whole(tmp_path: Path) -> None:
    for tied in (False, True):
        folder = tiny_llama(tmp_path / f"tied-{tied}", tie_word_embeddings=tied)
        if tied:  # the checkpoint holds the embedding once; HF ties the head to it
            assert "lm_head.weight" not in load_file(folder / "model.safetensors")
        view = load_model(folder)
        assert view.n_layers == 2 and int(view.W_E.shape[0]) == VOCAB
        assert (view.model.lm_head.weight.data_ptr() == view.W_E.data_ptr()) is tied


def test_real_tied_model_loads_whole(smollm2: Any) -> None:
    """SmolLM2 ties its head to the embedding: the head is absent from its weights."""
    assert smollm2.config.tie_word_embeddings
    assert smollm2.model.lm_head.weight.data_ptr() == smollm2.W_E.data_ptr()


def test_masked_lm_checkpoint_loads_as_a_base_model(tmp_path: Path) -> None:
    """Weights of a head the base model does not have (``cls.*``) are not foreign."""
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=64,
    )
    folder = save_model(tmp_path / "mlm", config, head=transformers.AutoModelForMaskedLM)
    assert any(k.startswith("cls.") for k in load_file(folder / "model.safetensors"))
    assert load_model(folder).family == "bert"


def test_model_missing_one_weight(tmp_path: Path, docs: Path, capsys: Any) -> None:
    folder = tiny_llama(tmp_path / "m", tie_word_embeddings=False)
    weights = load_file(folder / "model.safetensors")
    del weights["model.layers.1.self_attn.k_proj.weight"]
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    refused(
        capture_with(folder, docs),
        ("lack 1 of the", "model.layers.1.self_attn.k_proj.weight", "random values"),
        tmp_path,
        capsys,
    )


def test_safetensors_with_none_of_the_weights(tmp_path: Path, docs: Path, capsys: Any) -> None:
    folder = tiny_llama(tmp_path / "m")
    save_file({"encoder.foo.weight": torch.zeros(3)}, folder / "model.safetensors")
    refused(
        capture_with(folder, docs),
        ("hold none of the", "weights its config.json describes", "and 1"),
        tmp_path,
        capsys,
    )


def test_config_of_another_model_type(tmp_path: Path, docs: Path, capsys: Any) -> None:
    folder = tiny_llama(tmp_path / "m")
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4)
    (folder / "config.json").unlink()
    config.save_pretrained(folder)
    refused(
        capture_with(folder, docs),
        ("do not fit its config.json (a gpt2 model)", "transformer.h.0", "model.layers.0"),
        tmp_path,
        capsys,
    )


def test_config_with_fewer_layers_than_the_weights(tmp_path: Path, docs: Path, capsys: Any):
    folder = tiny_llama(tmp_path / "m")
    edit_config(folder, num_hidden_layers=1)
    refused(
        capture_with(folder, docs),
        ("tensors its config.json has no place for", "model.layers.1."),
        tmp_path,
        capsys,
    )


def test_config_with_other_sizes_than_the_weights(tmp_path: Path, docs: Path, capsys: Any):
    folder = tiny_llama(tmp_path / "m")
    edit_config(folder, intermediate_size=64)
    refused(
        capture_with(folder, docs),
        ("do not match its config.json", "[32, 48] in the files but [32, 64]"),
        tmp_path,
        capsys,
    )


@pytest.mark.parametrize(
    ("change", "phrases"),
    [
        (dict(num_attention_heads=0), ("num_attention_heads = 0", "at least 1")),
        (dict(hidden_size=-32), ("hidden_size = -32",)),
        (dict(num_key_value_heads=3), ("4 attention heads, which 3 key/value heads",)),
        (dict(vocab_size="64"), ("vocab_size = '64'",)),
    ],
    ids=["zero-heads", "negative-width", "kv-heads-do-not-divide", "size-as-text"],
)
def test_config_values_no_model_can_have(
    change: dict[str, Any], phrases: tuple[str, ...], tmp_path: Path, docs: Path, capsys: Any
) -> None:
    folder = tiny_llama(tmp_path / "m")
    edit_config(folder, **change)
    refused(capture_with(folder, docs), phrases, tmp_path, capsys)


def test_hidden_size_heads_do_not_divide(tmp_path: Path, docs: Path, capsys: Any) -> None:
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4)
    folder = save_model(tmp_path / "m", config)
    edit_config(folder, n_head=5)
    refused(
        capture_with(folder, docs), ("hidden size of 32", "5 attention heads"), tmp_path, capsys
    )


def test_empty_tokenizer(tmp_path: Path, docs: Path, capsys: Any) -> None:
    """No tokenizer files: Hugging Face builds an empty GPT-2 tokenizer."""
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "m")
    refused(capture_with(tmp_path / "m", docs), ("tokenizer", "is empty"), tmp_path, capsys)


def test_tokenizer_larger_than_the_embedding(tmp_path: Path, docs: Path, capsys: Any) -> None:
    folder = save_model(tmp_path / "m", transformers.LlamaConfig(**LLAMA), char_tokenizer(200))
    refused(
        capture_with(folder, docs),
        ("has ids up to 199", "only 64 rows", "does not cover the tokenizer"),
        tmp_path,
        capsys,
    )


def test_tokenizer_mapping_words_to_one_id(tmp_path: Path, docs: Path, capsys: Any) -> None:
    tok = Tokenizer(models.WordLevel(vocab={"[UNK]": 0, "zzz": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    folder = save_model(tmp_path / "m", transformers.LlamaConfig(**LLAMA), tokenizer)
    refused(capture_with(folder, docs), ("all to one id (0)",), tmp_path, capsys)


# corpora and task files --------------------------------------------------------------------

CORPORA = {
    "deep-nesting": ('{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n", "nested too deeply"),
    "huge-integer": ('{"text": "a", "label": ' + "9" * 5000 + "}\n", "too many digits"),
    "lone-surrogate": ('{"text": "broken \\ud800 text"}\n', "lone surrogate \\ud800"),
    "nan-literal": ('{"text": "a", "label": NaN}\n', "NaN, which is not a number"),
}


@pytest.mark.parametrize("name", list(CORPORA))
def test_malformed_corpus_line(name: str, tmp_path: Path, capsys: Any) -> None:
    text, phrase = CORPORA[name]
    path = tmp_path / f"{name}.jsonl"
    path.write_text('{"text": "a fine first line"}\n' + text, encoding="utf-8")
    refused(
        f"capture --model minilm-l6 --corpus {path} --contexts 2 --length 8",
        (f"line 2 of '{path}'", phrase),
        tmp_path,
        capsys,
    )


def test_long_documents_are_cut_and_recorded(tmp_path: Path) -> None:
    """A 20 MB line and a 6 MB file are cut to MAX_DOCUMENT_CHARS; the corpus says so."""
    jsonl = tmp_path / "long.jsonl"
    jsonl.write_text(
        json.dumps({"text": "word " * 4_000_000}) + "\n" + json.dumps({"text": "short"}) + "\n"
    )
    corpus = load_corpus(jsonl)
    assert [len(d.text) for d in corpus.documents] == [MAX_DOCUMENT_CHARS, 5]
    assert corpus.cut_documents == ("line 1",)
    record = corpus.record()
    assert record["documents_cut"] == 1 and record["cut_examples"] == ["line 1"]
    assert record["max_document_chars"] == MAX_DOCUMENT_CHARS
    folder = tmp_path / "txt"
    folder.mkdir()
    (folder / "big.txt").write_text("caf\u00e9 " * 1_200_000, encoding="utf-8")  # 7.2 MB
    (folder / "small.txt").write_text("caf\u00e9", encoding="utf-8")
    corpus = load_corpus(folder)
    big = corpus.documents[0]
    assert big.cut and len(big.text) == MAX_DOCUMENT_CHARS and big.text.startswith("caf\u00e9 ")
    assert corpus.documents[1].text == "caf\u00e9" and not corpus.documents[1].cut


def bigbench(example: dict[str, Any]) -> str:
    good = {"input": "The sky is", "target_scores": {"blue": 1, "green": 0}}
    return json.dumps({"examples": [good, example]})


def hellaswag(**changes: Any) -> str:
    good = {"ctx_a": "A man", "ctx_b": "walks", "endings": ["in.", "out."], "label": 0}
    return json.dumps(good) + "\n" + json.dumps({**good, **changes}) + "\n"


TASKS = {
    "deep-nesting": ("json", '{"examples": ' + "[" * 100_000, "nested too deeply"),
    "huge-integer": (
        "json",
        '{"examples": [{"input": "x", "target_scores": {"a": ' + "1" * 5000 + ', "b": 0}}]}',
        "too many digits",
    ),
    "lone-surrogate": (
        "json",
        bigbench({"input": "The \ud800 sky", "target_scores": {"a": 1, "b": 0}}),
        "example 1 has a lone surrogate \\ud800",
    ),
    "label-not-whole": ("jsonl", hellaswag(label=1.7), "line 2 has label 1.7, which is not"),
    "label-text": ("jsonl", hellaswag(label="one"), "line 2 has label 'one'"),
    "endings-a-string": ("jsonl", hellaswag(endings="abcd"), "endings that are not a list"),
    "nan-score": (
        "json",
        bigbench({"input": "x", "target_scores": {"a": 0, "b": 1}}).replace("1}}]", "NaN}}]"),
        "NaN, which is not a number",
    ),
    "infinite-score": (
        "json",
        bigbench({"input": "x", "target_scores": {"a": 0, "b": 1}}).replace("1}}]", "1e999}}]"),
        "the number 1e999 is too large",
    ),
}


@pytest.mark.parametrize("name", list(TASKS))
def test_malformed_task_file(name: str, tmp_path: Path, capsys: Any) -> None:
    suffix, text, phrase = TASKS[name]
    path = tmp_path / f"{name}.{suffix}"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    sentence = refused(f"concepts --task {path}", (phrase,), tmp_path, capsys)
    assert str(path) in sentence


def test_report_checks_its_task_before_the_capture(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "task.jsonl"
    path.write_text(hellaswag(label=1.7))
    refused(
        f"report --model minilm-l6 --task {path} --contexts 2 --length 8",
        ("label 1.7",),
        tmp_path,
        capsys,
    )


# option values, before minutes of work ----------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "phrases"),
    [
        ("capture --model minilm-l6 --layers 5-2", ("--layers names no layer",)),
        (
            "capture --model minilm-l6 --layers 0-100000",
            ("--layers [7, 8, 9, 10, 11, ... and 99989 more] out of range", "0..6"),
        ),
        ("sphere --model minilm-l6 --probe-layers 5-2", ("--probe-layers names no block",)),
        (
            "sphere --model minilm-l6 --probe-layers 0-100000",
            ("--probe-layers [6, 7, 8, 9, 10, ... and 99990 more]", "blocks are 0..5"),
        ),
        ("arithmetic --preset quick --lr inf", ("--lr must be a positive finite number",)),
        ("arithmetic --preset quick --lr nan", ("--lr must be a positive finite number",)),
    ],
    ids=[
        "empty-layers",
        "huge-layers",
        "empty-probe-layers",
        "huge-probe-layers",
        "lr-inf",
        "lr-nan",
    ],
)
def test_option_values(argv: str, phrases: tuple[str, ...], tmp_path: Path, capsys: Any) -> None:
    refused(argv, phrases, tmp_path, capsys)


def test_prompt_longer_than_the_positions(tmp_path: Path, capsys: Any) -> None:
    prompt = " ".join(["word"] * 600)
    refused(
        f"sphere --model minilm-l6 --contexts 2 --length 8 --prompt '{prompt}'",
        ("--prompt 'word word", "more than minilm-l6 allows (512 positions)"),
        tmp_path,
        capsys,
    )


def test_generate_past_the_positions(tmp_path: Path, capsys: Any) -> None:
    folder = tiny_llama(tmp_path / "m")  # 64 positions
    refused(
        f"walk --model {folder} --text 'the cat sat on the mat' --generate 60",
        ("--generate 60 runs past the 64 positions", "use --generate 42 or less"),
        tmp_path,
        capsys,
    )


# compare.csv ----------------------------------------------------------------------------


def test_compare_csv_quotes_formulas_but_not_numbers(tmp_path: Path, monkeypatch: Any) -> None:
    layer = {
        "layer": 0,
        "share_pos": -0.5,
        "share_ctx": 0.25,
        "rel_norm_pos": 0.1,
        "pos_rank": 3,
        "pos_explained": 0.9,
        "pos_low_freq": 0.8,
    }
    run = SimpleNamespace(
        path=tmp_path / "-1.5",
        config={},
        manifest={"model": {"name": '=HYPERLINK("http://x")'}},
        metrics={"decomposition": {"skip_first": True, "layers": [layer, {**layer, "layer": 1}]}},
    )
    monkeypatch.setattr(compare, "load_runs", lambda paths: [run])
    compare.write_compare(["ignored"], tmp_path / "out")
    with open(tmp_path / "out" / "compare.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[1][0] == '\'=HYPERLINK("http://x") (-1.5)'
    assert rows[1][3] == "-0.5"  # a negative number stays a number
    for cell, quoted in [("+1", "+1"), ("-0.5", "-0.5"), ("@SUM(A1)", "'@SUM(A1)"), ("-x", "'-x")]:
        assert compare.spreadsheet_cell(cell) == quoted
    assert compare.spreadsheet_cell(-2.0) == -2.0
