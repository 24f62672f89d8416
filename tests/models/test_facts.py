"""The facts read from a model's files before its weights load (``models.facts``) equal the
loaded model's, and a text too long for the model is refused on them: at once, in one line,
with exit 2, no run folder, and neither the weights nor the modelling code loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from family_cases import CASES
from tiny_models import small_tokenizer

from geomlens import cli
from geomlens.analyses.concepts.tasks import load_task
from geomlens.analyses.sphere.step import DEFAULT_PROMPT
from geomlens.analyses.walk.step import default_text
from geomlens.models.facts import model_facts
from geomlens.models.families import family_for

LONG = "The cat sat on the mat. " * 1400
"""About 9,800 SmolLM2 tokens (it accepts 8,192) and as many MiniLM tokens (512)."""


def texts() -> list[str]:
    """What the checks before a run tokenise: the walk text, the sphere prompt, task items
    with their answers, and text with odd spacing, accents and special-token strings."""
    task = load_task("timedial")
    items = [i.query + " " + c for i in task.take(20) for c in i.choices]
    odd = ["Ünïcödé  tabs\t\tand\n\nnewlines  ", " x", "[CLS] a [SEP] <|im_start|> b"]
    return [default_text(), DEFAULT_PROMPT, LONG, *items, *odd]


@pytest.mark.parametrize("fixture", ["smollm2", "minilm"])
def test_bundled_facts_equal_the_loaded_model(fixture, request):
    view = request.getfixturevalue(fixture)
    facts = model_facts(view.name)
    assert facts is not None
    assert (facts.n_ctx, facts.n_layers, facts.kind) == (view.n_ctx, view.n_layers, view.kind)
    assert facts.is_seq2seq == view.is_seq2seq and facts.family == view.family
    hf = view.tokenizer
    assert (facts.tokenizer.bos_token_id, facts.tokenizer.eos_token_id) == (
        hf.bos_token_id,
        hf.eos_token_id,
    )
    for text in texts():
        for special in (True, False):
            ours = facts.tokenizer(text, add_special_tokens=special, return_offsets_mapping=True)
            theirs = hf(text, add_special_tokens=special, return_offsets_mapping=True)
            assert ours["input_ids"] == list(theirs["input_ids"])
            assert ours["offset_mapping"] == [tuple(o) for o in theirs["offset_mapping"]]


def test_every_family_case_has_the_sizes_its_config_class_gives(tmp_path):
    """Facts from a saved config.json equal the sizes the family reads from Hugging Face's
    config object (what the view is built from), or are absent; never different."""
    tokenizers = {enc: small_tokenizer(enc) for enc in (False, True)}
    found = set()
    for case in CASES:
        config = case.config()
        family = family_for(config)
        folder = tmp_path / case.id
        config.save_pretrained(folder)
        tokenizers[family.is_encoder].save_pretrained(folder)
        facts = model_facts(str(folder))
        if facts is None:
            continue
        dims = family.dims(config)
        assert (facts.n_ctx, facts.n_layers) == (dims.n_ctx, dims.n_layers), case.id
        assert (facts.family, facts.is_encoder) == (family.name, family.is_encoder), case.id
        found.add(case.id)
    assert {"llama", "gpt2", "bert", "mistral", "qwen3"} <= found


def test_a_tokenizer_that_rebuilds_its_special_tokens_gives_no_facts(tmp_path):
    config = CASES[0].config()
    config.save_pretrained(tmp_path)
    small_tokenizer(False).save_pretrained(tmp_path)
    assert model_facts(str(tmp_path)) is not None
    settings = json.loads((tmp_path / "tokenizer_config.json").read_text())
    settings["add_bos_token"] = True
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(settings))
    assert model_facts(str(tmp_path)) is None


def refused(capsys, argv: list[str]) -> str:
    """The one line a refused command prints (exit 2)."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    return err


def never_loads(monkeypatch):
    def load(*args, **kwargs):
        raise AssertionError("the model's weights were loaded")

    loaders = (
        "commands.report",
        "analyses.walk.command",
        "analyses.sphere.command",
        "analyses.concepts.step",
        "pipeline.run",
    )
    for module in loaders:
        monkeypatch.setattr(f"geomlens.{module}.load_configured", load)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["report", "--text", LONG], "the walk text has 9801 tokens, more than smollm2-135m"),
        (["walk", "--text", LONG], "the walk text has 9801 tokens, more than smollm2-135m"),
        (["sphere", "--prompt", LONG], "has 9801 tokens, more than smollm2-135m allows (8192"),
        (["decompose", "--length", "9000"], "--length 9000 is longer than smollm2-135m allows"),
        (
            ["report", "--layers", "0,31"],
            "out of range: smollm2-135m has hidden-state layers 0..30",
        ),
    ],
)
def test_too_long_for_smollm2_is_refused_before_loading(
    command, expected, tmp_path, capsys, monkeypatch
):
    never_loads(monkeypatch)
    out = tmp_path / "run"
    argv = [command[0], "--model", "smollm2-135m", *command[1:], "--out", str(out)]
    assert expected in refused(capsys, [*argv, "--figures", "none"])
    assert not out.exists()


def test_report_refusal_imports_no_modelling_code(tmp_path):
    """A fresh interpreter: ``report`` on MiniLM with a text over its 512 positions."""
    out = tmp_path / "run"
    script = (
        "import sys\n"
        "from geomlens import cli\n"
        f"code = cli.main(['report', '--model', 'minilm-l6', '--text', {LONG!r}, "
        f"'--out', {str(out)!r}, '--figures', 'none'])\n"
        "print(code, 'transformers.models.bert.modeling_bert' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.split() == ["2", "False"], done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "geomlens: error: the walk text has 9802 tokens, more than minilm-l6 accepts (512); "
        "give a shorter text."
    ]
    assert not Path(out).exists()


def test_unknown_model_is_refused_without_loading(tmp_path, capsys, monkeypatch):
    never_loads(monkeypatch)
    out = tmp_path / "run"
    err = refused(capsys, ["report", "--model", "no-such-model", "--out", str(out)])
    assert "unknown model 'no-such-model'" in err
    assert not out.exists()


def test_concepts_refuse_an_encoder_and_a_long_item_before_loading(tmp_path, capsys, monkeypatch):
    never_loads(monkeypatch)
    out = tmp_path / "run"
    err = refused(capsys, ["concepts", "--model", "minilm-l6", "--out", str(out)])
    assert "need a decoder-only or encoder-decoder language model; minilm-l6 is an" in err
    task = tmp_path / "long.json"
    examples = [{"input": text, "target_scores": {"yes": 1, "no": 0}} for text in (LONG, "Ok?")]
    task.write_text(json.dumps({"name": "long", "examples": examples}))
    argv = ["concepts", "--model", "smollm2-135m", "--task", str(task), "--out", str(out)]
    assert "a context with its answer has 9801 tokens, more than smollm2" in refused(capsys, argv)
    assert not out.exists()


def test_sizes_no_model_can_have_give_no_facts(tmp_path):
    """The loader refuses them in its own sentence; the facts do not guess."""
    config = CASES[0].config()
    config.save_pretrained(tmp_path)
    small_tokenizer(False).save_pretrained(tmp_path)
    raw = json.loads((tmp_path / "config.json").read_text())
    for bad in (True, 0, -4):
        (tmp_path / "config.json").write_text(json.dumps({**raw, "max_position_embeddings": bad}))
        assert model_facts(str(tmp_path)) is None
