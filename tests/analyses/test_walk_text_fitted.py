"""The report's packaged walk text on a model of fewer positions than its tokens: cut to
its leading lines that fit (with the generated tokens after it), said on the page, instead
of refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from tiny_models import small_tokenizer

from geomlens.analyses.walk.step import WALK_GENERATE, default_text, fitted_default_text
from geomlens.cli import main
from geomlens.models import load_model

POSITIONS = 96


@pytest.fixture(scope="module")
def short_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT of 96 positions with a real (WordPiece) tokenizer."""
    tokenizer = small_tokenizer(True)
    config = transformers.BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=48,
        max_position_embeddings=POSITIONS,
    )
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("short-bert")
    transformers.BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def n_tokens(view, text: str) -> int:
    return len(view.tokenizer(text)["input_ids"])


@pytest.mark.parametrize("generate", [0, WALK_GENERATE])
def test_the_cut_text_is_the_longest_run_of_leading_lines_that_fits(short_bert, generate):
    view = load_model(str(short_bert))
    whole = default_text()
    assert n_tokens(view, whole) > POSITIONS  # the packaged text does not fit whole
    cut, note = fitted_default_text(view, generate)
    lines = cut.rstrip("\n").split("\n")
    assert whole.startswith(cut.rstrip("\n"))
    assert n_tokens(view, cut) + generate <= POSITIONS + (1 if generate else 0)
    longer = "\n".join(whole.split("\n")[: len(lines) + 1]) + "\n"
    assert n_tokens(view, longer) + generate > POSITIONS + (1 if generate else 0)
    total = len(whole.rstrip("\n").split("\n"))
    assert note is not None
    assert f"first {len(lines)} of {total} lines" in note and f"{POSITIONS} positions" in note


def test_the_report_walks_the_cut_text_and_says_so(short_bert, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["report", "--model", str(short_bert), "--contexts", "8", "--length", "16"]
    code = main([*argv, "--batch-size", "8", "--figures", "none", "--quiet", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    walked = (out / "walk_text.txt").read_text(encoding="utf-8")
    view = load_model(str(short_bert))
    assert walked == fitted_default_text(view)[0] and walked != default_text()
    text = json.loads((out / "metrics.json").read_text())["walk"]["text"]
    assert text["n_tokens"] == n_tokens(view, walked) <= POSITIONS
    assert "was cut to its first" in text["shortened"]
    assert text["shortened"] in (out / "report.html").read_text(encoding="utf-8")
