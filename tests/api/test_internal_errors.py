"""Failures that surfaced as internal errors (a traceback's exception type, exit 1) are one
sentence naming the real cause (exit 2 on the command line, ``GeomlensError`` in Python):
command-line text that is not UTF-8, a run folder deleted after it was opened, and a layer
the statistics never captured. (A full disk under the conversion cache:
tests/models/test_gguf.py.)"""

from __future__ import annotations

import shutil

import pytest

import geomlens
from geomlens.cli import main
from geomlens.errors import GeomlensError, InternalError
from geomlens.models import ModelView

NOT_UTF8 = b"the cat \xff sat".decode("utf-8", "surrogateescape")
"""What Python makes of a command-line argument holding the byte 0xff (as sys.argv does)."""

TEXTS = [
    "The river rose through the night and by morning the bridge was under water again.",
    "She opened the old piano, pressed a key, and listened to the note fade slowly away.",
    "Markets fell sharply after the bank raised its rates for the third time this year.",
]


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["walk", "--text", NOT_UTF8], "--text"),
        (["report", "--text", NOT_UTF8], "--text"),
        (["sphere", "--prompt", NOT_UTF8], "--prompt"),
    ],
)
def test_text_arguments_that_are_not_utf8(argv, flag, tmp_path, capsys):
    out = tmp_path / "run"
    small = ["--model", "minilm-l6", "--contexts", "2", "--length", "8", "--quiet"]
    assert main([*argv, *small, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"geomlens: error: {flag} holds bytes that are not UTF-8 (at character 8); give UTF-8 "
        f"text{', or save it in a UTF-8 file for --text-file' if flag == '--text' else ''}.\n"
    )
    assert not out.exists()  # refused before anything was written


def test_the_api_refuses_the_same_text_in_one_sentence(tmp_path):
    with pytest.raises(GeomlensError, match="--text holds bytes that are not UTF-8") as info:
        geomlens.walk(model="minilm-l6", text=NOT_UTF8, out=tmp_path / "w", progress=False)
    assert not isinstance(info.value, InternalError)


@pytest.fixture
def run_folder(minilm: ModelView, tmp_path):
    small = dict(contexts=3, length=8, layers=[0, 2], progress=False, figures="none")
    out = tmp_path / "run"
    geomlens.capture(model="minilm-l6", corpus=TEXTS, out=out, view=minilm, **small)
    return out


def test_a_run_deleted_after_it_was_opened(run_folder):
    run = geomlens.open_run(run_folder)
    shutil.rmtree(run_folder)
    for read in (lambda: run.decomposition, lambda: run.metrics, lambda: run.windows):
        with pytest.raises(
            GeomlensError, match="is gone .deleted or moved since it was opened"
        ) as info:
            read()
        assert not isinstance(info.value, InternalError)


def test_a_layer_that_was_not_captured(run_folder):
    decomposition = geomlens.open_run(run_folder).decomposition
    assert decomposition.finalize(layer=2).layer == 2  # a captured layer reads
    message = (
        "layer 1 was not captured: these statistics hold layers [0, 2]; ask for one of them, "
        "or capture again with --layers including 1."
    )
    with pytest.raises(GeomlensError) as info:
        decomposition.finalize(layer=1)
    assert str(info.value) == message
