"""Every check against the model's positions runs before the first forward pass and before
a run folder exists: the walk text (the report's packaged prompt or --text), generated
tokens, the sphere prompt, the concept items; a refused command exits 2 with one sentence
and leaves no --out folder behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_models import VOCAB, char_tokenizer

from geomlens.cli import main

N_POSITIONS = 64
SMALL = ["--contexts", "2", "--length", "8", "--batch-size", "2", "--quiet", "--figures", "none"]


@pytest.fixture(scope="module")
def short_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GPT-2 folder (64 positions, a character tokenizer of its vocabulary)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = tmp_path_factory.mktemp("short-model")
    config = GPT2Config(
        vocab_size=VOCAB, n_positions=N_POSITIONS, n_embd=32, n_layer=2, n_head=2, n_inner=48
    )
    torch.manual_seed(0)
    GPT2LMHeadModel(config).save_pretrained(folder)
    char_tokenizer(VOCAB).save_pretrained(folder)
    return folder


def refused(capsys, out: Path, *argv: str) -> str:
    """Run the command line; it must exit 2 with one line and leave no ``out``."""
    code = main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists(), sorted(p.name for p in out.iterdir())
    return err


def test_report_default_text_is_cut_to_the_positions(short_model, tmp_path, capsys):
    """The packaged walk text (about 1,000 characters) is cut to the model's 64 positions
    instead of refused; what is refused is the concept task's first item."""
    err = refused(capsys, tmp_path / "run", "report", "--model", str(short_model), *SMALL)
    assert "walk text" not in err
    assert "more than" in err and f"({N_POSITIONS})" in err and "shorter items" in err


def test_report_generated_tokens_past_the_positions(short_model, tmp_path, capsys):
    text = "walk" * 15  # 61 tokens: the 8 generated ones do not fit in 64 positions
    err = refused(
        capsys, tmp_path / "run", "report", "--model", str(short_model), *SMALL, "--text", text
    )
    assert "--generate 8 runs past the 64 positions" in err


def test_report_concept_items_too_long(short_model, tmp_path, capsys):
    """The walk text and the sphere prompt fit; the task's first item does not."""
    err = refused(
        capsys,
        tmp_path / "run",
        "report",
        "--model",
        str(short_model),
        *SMALL,
        "--text",
        "a short text",
        "--limit",
        "2",
    )
    assert "more than" in err and f"({N_POSITIONS})" in err and "shorter items" in err


def test_report_text_file_is_read(short_model, tmp_path, capsys):
    long_text = tmp_path / "long.txt"
    long_text.write_text("word " * 40, encoding="utf-8")
    err = refused(
        capsys,
        tmp_path / "run",
        "report",
        "--model",
        str(short_model),
        *SMALL,
        "--text-file",
        str(long_text),
    )
    assert "the walk text has" in err and "give a shorter text" in err


def test_sphere_prompt_and_walk_text_refused_before_the_capture(short_model, tmp_path, capsys):
    model = ["--model", str(short_model), *SMALL]
    err = refused(capsys, tmp_path / "sphere", "sphere", *model, "--prompt", "x" * 80)
    assert "shorter prompt" in err
    err = refused(capsys, tmp_path / "walk", "walk", *model, "--text", "y" * 80)
    assert "give a shorter text" in err


def test_bare_name_says_how_to_use_the_hub_cache(tmp_path, capsys):
    err = refused(capsys, tmp_path / "run", "report", "--model", "gpt2", *SMALL)
    assert "unknown model 'gpt2'" in err
    assert "--model OWNER/NAME" in err and "folder" in err


@pytest.mark.parametrize("command", ["capture", "decompose", "walk", "sphere"])
def test_refused_model_leaves_no_run_folder(command, tmp_path, capsys):
    refused(capsys, tmp_path / "run", command, "--model", "no-such-model", *SMALL)


@pytest.mark.parametrize(
    ("command", "option", "words"),
    [
        ("decompose", ["--contexts", "1"], "needs at least 2"),
        ("report", ["--contexts", "1"], "needs at least 2"),
        ("decompose", ["--length", "4"], "--length 5 or more"),
    ],
)
def test_too_few_or_too_short_windows_refused_before_loading(
    command, option, words, tmp_path, capsys
):
    argv = [command, "--model", "no-such-model", *SMALL, *option]
    err = refused(capsys, tmp_path / "run", *argv)  # refused before the model is looked up
    assert words in err and "unknown model" not in err


def test_identical_windows_refused_before_the_capture(short_model, tmp_path, capsys):
    """A corpus repeating one text gives windows with the same tokens: no context part."""
    corpus = tmp_path / "same.jsonl"
    corpus.write_text(('{"text": "' + "a" * 300 + '"}\n') * 6, encoding="utf-8")
    argv = ["capture", "--model", str(short_model), *SMALL, "--corpus", str(corpus)]
    err = refused(capsys, tmp_path / "run", *argv)
    assert "hold the same 8 tokens" in err and "different documents" in err
