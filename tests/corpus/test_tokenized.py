"""The corpus tokenized once per (corpus, tokenizer): the same ids as tokenizing each
document whole, shared by tokenizers with the same content, bounded in memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import transformers

from geomlens.corpus import load_corpus, tokenized
from geomlens.models.loading import resolve_folder


@pytest.fixture(scope="module")
def tokenizer():
    return transformers.AutoTokenizer.from_pretrained(resolve_folder("minilm-l6"))


def test_ids_are_each_whole_document_tokenized(tokenizer, bbc) -> None:
    tokenized._memo.clear()
    got = list(tokenized.document_ids(bbc, tokenizer))
    assert len(got) == len(bbc.documents)
    for i in (0, 7, len(got) - 1):
        direct = tokenizer(bbc.documents[i].text, add_special_tokens=False, verbose=False)
        assert got[i].tolist() == direct["input_ids"]


def test_a_second_pass_and_a_copy_of_the_tokenizer_reuse_the_ids(
    tokenizer, bbc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenized._memo.clear()
    first = list(tokenized.document_ids(bbc, tokenizer))
    tokenizer.save_pretrained(tmp_path / "copy")
    copy = transformers.AutoTokenizer.from_pretrained(tmp_path / "copy")
    assert tokenized.tokenizer_key(copy) == tokenized.tokenizer_key(tokenizer)

    def refuse(*args, **kwargs):
        raise AssertionError("tokenized again")

    monkeypatch.setattr(tokenized, "_tokenize", refuse)
    again = list(tokenized.document_ids(bbc, copy))
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_a_corpus_over_the_budget_is_not_kept(
    tokenizer, bbc, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenized._memo.clear()
    monkeypatch.setattr(tokenized, "MEMO_TOKENS", 1000)
    n = sum(1 for _ in tokenized.document_ids(bbc, tokenizer))
    assert n == len(bbc.documents) and not tokenized._memo


def test_the_memo_keeps_the_last_pairs_only(
    tokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenized._memo.clear()
    monkeypatch.setattr(tokenized, "MEMO_ENTRIES", 1)
    corpora = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "doc.txt").write_text(f"corpus {name} says hello")
        corpora.append(load_corpus(tmp_path / name))
    for corpus in corpora:
        list(tokenized.document_ids(corpus, tokenizer))
    assert [fingerprint for fingerprint, _ in tokenized._memo] == [corpora[1].fingerprint]
