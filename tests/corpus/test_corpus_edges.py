"""Corpus edges: bytes that are not quite UTF-8, file names in any case, documents of
whitespace only, and JSONL lines too long to hold; each is read, recorded or refused in one
sentence, never silently."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

import geomlens.corpus.sources as sources
from geomlens.corpus import load_corpus
from geomlens.errors import GeomlensError

UTF8 = "Café naïve — Zürich, Ærø and São Paulo. " * 20


@pytest.mark.parametrize("where", [0, 0.5, 1], ids=["first byte", "middle", "last byte"])
@pytest.mark.parametrize("stray", [b"\xff", b"\xe9", b"\x80"])
def test_a_utf8_file_with_a_stray_byte_stays_utf8_and_is_recorded(tmp_path, where, stray):
    data = UTF8.encode("utf-8")
    at = data.index(b" ", int(where * (len(data) - 1))) if where < 1 else len(data)  # between
    (tmp_path / "a.txt").write_bytes(data[:at] + stray + data[at:])
    corpus = load_corpus(tmp_path)
    doc = corpus.documents[0]
    assert doc.decoding == "utf-8, replaced"
    assert doc.text.count("\ufffd") == 1 and doc.text.replace("\ufffd", "") == UTF8
    record = corpus.record()
    assert record["documents_not_utf8"] == 1
    assert record["not_utf8_examples"] == ["a.txt: utf-8, replaced"]


@pytest.mark.parametrize("text", ["Café crème à la française. " * 10, "£5 ¼ ½ ¾ °C " * 10])
def test_a_latin1_file_is_latin1_and_is_recorded(tmp_path, text):
    (tmp_path / "a.txt").write_bytes(text.encode("latin-1"))
    corpus = load_corpus(tmp_path)
    assert corpus.documents[0].text == text and corpus.documents[0].decoding == "latin-1"
    assert corpus.record()["not_utf8_examples"] == ["a.txt: latin-1"]


def test_a_clean_corpus_records_nothing_new(tmp_path):
    (tmp_path / "a.txt").write_text(UTF8, encoding="utf-8")
    assert "documents_not_utf8" not in load_corpus(tmp_path).record()


@pytest.mark.parametrize("name", ["B.TXT", "c.Txt", "d.tXt", "sub/E.TXT"])
def test_txt_in_any_case_is_a_document(tmp_path, name):
    (tmp_path / "a.txt").write_text("one document here")
    path = tmp_path / name
    path.parent.mkdir(exist_ok=True)
    path.write_text("another document here")
    assert sorted(d.doc_id for d in load_corpus(tmp_path).documents) == sorted(["a.txt", name])


@pytest.mark.parametrize("blank", ["", " ", "\n\n\t", "\u3000 \u00a0"])
def test_whitespace_only_documents_are_left_out_and_recorded(tmp_path, blank):
    (tmp_path / "a.txt").write_text("real words here")
    (tmp_path / "b.txt").write_text(blank, encoding="utf-8")
    corpus = load_corpus(tmp_path)
    assert [d.doc_id for d in corpus.documents] == ["a.txt"]
    assert corpus.record()["blank_examples"] == ["b.txt"]
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text(json.dumps({"text": "words"}) + "\n" + json.dumps({"text": blank}) + "\n")
    assert [d.doc_id for d in load_corpus(jsonl).documents] == ["line 1"]


def test_a_corpus_of_whitespace_only_says_so(tmp_path):
    (tmp_path / "a.txt").write_text("   \n")
    with pytest.raises(GeomlensError, match="1 hold only whitespace"):
        load_corpus(tmp_path)


def test_a_jsonl_line_over_the_limit_is_refused_without_holding_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "MAX_JSONL_LINE", 1 << 20)
    path = tmp_path / "big.jsonl"
    with path.open("w") as f:
        f.write(json.dumps({"text": "fine"}) + "\n")
        f.write(json.dumps({"text": "x" * (30 << 20)}) + "\n")  # 30 MiB on line 2
    tracemalloc.start()
    try:
        with pytest.raises(GeomlensError, match="line 2 of .* longer than 1 MiB"):
            load_corpus(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # the 30 MiB line is never held whole


def test_a_jsonl_line_under_the_limit_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "MAX_JSONL_LINE", 1 << 20)
    path = tmp_path / "ok.jsonl"
    path.write_text(json.dumps({"text": "y" * 500_000}) + "\n")
    assert len(load_corpus(path).documents[0].text) == 500_000


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["plain", "bom"])
def test_a_jsonl_byte_offset_counts_from_the_file_start(tmp_path, bom):
    lines = [b'{"text": "one"}\n', b'{"text": "two"}\n', b'{"text": "caf\xe9"}\n']
    path = tmp_path / "x.jsonl"
    path.write_bytes(bom + b"".join(lines))
    offset = len(bom) + len(lines[0]) + len(lines[1]) + lines[2].index(b"\xe9")
    assert Path(path).read_bytes()[offset] == 0xE9
    with pytest.raises(GeomlensError, match=rf"not valid UTF-8 \(byte {offset}\)"):
        load_corpus(path)
