"""No Python code from a model folder runs without --trust-remote-code: every file that can
name a class to import is checked before anything loads, and Hugging Face is told
``trust_remote_code=False`` so it never asks at a prompt (where an answer of "y" on stdin
ran the folder's code)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch
from tiny_models import char_tokenizer
from transformers import LlamaConfig, LlamaForCausalLM

from geomlens.cli import main
from geomlens.errors import GeomlensError
from geomlens.models import load_model

CODE_FILES = (  # every file Hugging Face reads a class to import from
    "config.json",
    "tokenizer_config.json",
    "processor_config.json",
    "preprocessor_config.json",
    "video_preprocessor_config.json",
    "audio_tokenizer_config.json",
    "generation_config.json",
)
TOKENIZER_CODE = {"AutoTokenizer": [None, "tokenization_marker.MarkerTokenizer"]}


def llama_folder(root: Path) -> Path:
    """A tiny Llama folder (a model type Hugging Face has no tokenizer class of its own for,
    so a tokenizer ``auto_map`` is asked about at a prompt) and a .py file that writes
    ``MARKER`` when imported."""
    torch.manual_seed(0)
    config = LlamaConfig(
        num_hidden_layers=2,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=64,
        max_position_embeddings=32,
        bos_token_id=0,
        eos_token_id=1,
    )
    folder = root / "tiny-llama"
    LlamaForCausalLM(config).save_pretrained(folder)
    char_tokenizer(64).save_pretrained(folder)
    marker = folder / "MARKER"
    (folder / "tokenization_marker.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "from transformers import PreTrainedTokenizerFast\n\n\n"
        "class MarkerTokenizer(PreTrainedTokenizerFast):\n    pass\n"
    )
    return folder


def edit(path: Path, **fields) -> None:
    raw = json.loads(path.read_text()) if path.exists() else {}
    raw.update(fields)
    path.write_text(json.dumps(raw))


@pytest.fixture
def folder(tmp_path) -> Path:
    folder = llama_folder(tmp_path)
    load_model(folder)  # loads as it is: what follows is the planted code alone
    return folder


@pytest.mark.parametrize("name", CODE_FILES)
def test_code_named_in_any_file_is_refused_naming_it(folder, name, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n" * 10))
    edit(folder / "tokenizer_config.json", tokenizer_class=None)
    edit(folder / name, auto_map=TOKENIZER_CODE)
    with pytest.raises(GeomlensError) as info:
        load_model(folder)
    assert f"(auto_map in {name})" in str(info.value) and "--trust-remote-code" in str(info.value)
    assert not (folder / "MARKER").exists()


@pytest.mark.parametrize(
    "name, key, value",
    [
        ("tokenizer_config.json", "tokenizer_class", "tokenization_marker.MarkerTokenizer"),
        ("preprocessor_config.json", "image_processor_type", "someone/repo--proc.Processor"),
        ("processor_config.json", "processor_class", "processing_marker.MarkerProcessor"),
        ("config.json", "custom_pipelines", {"text": {"impl": "pipe.Pipe"}}),
    ],
)
def test_a_class_named_by_module_path_is_refused(folder, name, key, value):
    edit(folder / name, **{key: value})
    with pytest.raises(GeomlensError, match=rf"\({key} in {name}\)"):
        load_model(folder)
    assert not (folder / "MARKER").exists()


def test_the_prompt_answered_yes_on_the_command_line_runs_nothing(folder, monkeypatch, capsys):
    """``echo y | geomlens capture --model DIR``: refused with exit 2, the code never runs."""
    edit(folder / "tokenizer_config.json", tokenizer_class=None, auto_map=TOKENIZER_CODE)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n" * 10))
    argv = ["capture", "--model", str(folder), "--contexts", "2", "--length", "8", "--quiet"]
    assert main([*argv, "--out", str(folder.parent / "run")]) == 2
    err = capsys.readouterr().err
    assert "auto_map in tokenizer_config.json" in err and "Traceback" not in err
    assert not (folder / "MARKER").exists()


def test_hugging_face_is_told_no_even_past_the_check(folder, monkeypatch):
    """With geomlens' own check out of the way, Hugging Face receives
    ``trust_remote_code=False`` and refuses: no prompt, so "y" on stdin runs nothing."""
    edit(folder / "tokenizer_config.json", tokenizer_class=None, auto_map=TOKENIZER_CODE)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n" * 10))
    monkeypatch.setattr("geomlens.models.loading.check_no_code", lambda folder, trust: None)
    with pytest.raises(GeomlensError, match="could not load the tokenizer"):
        load_model(folder)
    assert not (folder / "MARKER").exists()


def test_an_unreadable_tokenizer_config_is_refused_in_one_sentence(folder):
    (folder / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(GeomlensError, match=r"tokenizer_config.json is not a readable JSON file"):
        load_model(folder)
