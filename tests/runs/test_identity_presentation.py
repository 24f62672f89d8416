"""A run's identity holds only what can change a number: a rerun that changes only the
figures reuses the statistics (no forward pass) and redraws; a missing corpus is named
before any comparison with the folder's run."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from tiny_models import VOCAB, char_tokenizer

import geomlens.capturing.capture as capture_module
from geomlens.cli import main


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GPT-2 folder and a 20-document corpus beside it."""
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = tmp_path_factory.mktemp("tiny-gpt2")
    config = GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=2)
    torch.manual_seed(0)
    GPT2LMHeadModel(config).save_pretrained(folder / "model")
    char_tokenizer(VOCAB).save_pretrained(folder / "model")
    words = ["river", "stone", "market", "engine", "garden", "signal", "harbour", "winter"]
    texts = [" ".join(random.Random(i).choices(words, k=12)) for i in range(20)]
    lines = [json.dumps({"text": text}) for text in texts]
    (folder / "docs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def argv(tiny: Path, out: Path, *more: str) -> list[str]:
    return [
        "decompose",
        "--model",
        str(tiny / "model"),
        "--corpus",
        str(tiny / "docs.jsonl"),
        "--contexts",
        "16",
        "--length",
        "8",
        "--quiet",
        "--out",
        str(out),
        *more,
    ]


def test_other_figures_reuse_the_statistics_and_redraw(tiny, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    assert main(argv(tiny, out, "--figures", "none")) == 0, capsys.readouterr().err
    numbers = (out / "metrics.json").read_bytes()
    assert not list((out / "figures").glob("*.png")) if (out / "figures").exists() else True
    forwards: list[int] = []
    real = capture_module.batch_hidden_states

    def counted(view, ids, *args, **kwargs):
        forwards.append(len(ids))
        return real(view, ids, *args, **kwargs)

    monkeypatch.setattr(capture_module, "batch_hidden_states", counted)
    capsys.readouterr()
    assert main(argv(tiny, out, "--figures", "all")) == 0
    err = capsys.readouterr().err
    assert "drawing 'all' from its saved statistics" in err and "different config" not in err
    assert forwards == []  # no capture again
    assert (out / "metrics.json").read_bytes() == numbers
    assert list((out / "figures").glob("*.png"))  # the static figures, drawn now
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["figures"] == "all" and "figures" not in manifest["config"]
    # the same figures again: reused as it is
    assert main(argv(tiny, out, "--figures", "all")) == 0
    assert "already holds this run; reusing it" in capsys.readouterr().err


def test_a_missing_corpus_is_named_before_the_folder_is_compared(tiny, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(argv(tiny, out, "--figures", "none")) == 0, capsys.readouterr().err
    capsys.readouterr()
    given = argv(tiny, out, "--figures", "none")
    given[given.index("--corpus") + 1] = str(tmp_path / "no-such.jsonl")
    assert main(given) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "different config" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_report_with_other_figures_runs_its_stages_again_on_the_saved_capture(
    tmp_path, capsys, monkeypatch
):
    """The report records its finished stages; other figures run them again (each stage
    draws its own) on the capture it saved: no capture forward pass, and metrics.json
    keeps the first run's numbers byte for byte (its statistics were compacted)."""
    import transformers
    from tiny_models import small_tokenizer

    tokenizer = small_tokenizer(True)
    config = transformers.BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=48,
    )
    torch.manual_seed(0)
    model = tmp_path / "bert"
    transformers.BertModel(config).save_pretrained(model)
    tokenizer.save_pretrained(model)
    out = tmp_path / "run"
    argv = ["report", "--model", str(model), "--contexts", "8", "--length", "16", "--quiet"]
    assert main([*argv, "--figures", "none", "--out", str(out)]) == 0, capsys.readouterr().err
    numbers = (out / "metrics.json").read_bytes()
    assert not list(out.glob("figures/*.png"))
    captured: list[int] = []
    real = capture_module.stream_batches

    def counted(*args, **kwargs):
        captured.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(capture_module, "stream_batches", counted)
    capsys.readouterr()
    assert main([*argv, "--figures", "all", "--out", str(out)]) == 0
    assert "drawing 'all' from its saved statistics" in capsys.readouterr().err
    assert captured == []  # the capture loop did not run again
    assert (out / "metrics.json").read_bytes() == numbers
    assert list(out.glob("figures/*.png"))
