"""A ``datasets.Dataset`` / ``IterableDataset`` (or a ``save_to_disk`` folder) as a corpus:
streamed row by row, named by its fingerprint, its labels feeding the topic claim as a
.jsonl file's do; and no corpus error quotes more than 80 characters of one item."""

from __future__ import annotations

import json
from typing import Any

import datasets
import pytest

import geomlens
from geomlens.cli import main
from geomlens.corpus import dataset_rows, load_corpus
from geomlens.errors import QUOTED_CHARS, GeomlensError
from geomlens.models import ModelView

LONG = "ab" * 5_000
"""A 10,000-character item: no error may quote more than 80 characters of it."""


@pytest.fixture(scope="module")
def articles() -> list[tuple[str, str]]:
    """(text, topic) of every 25th BBC article (89 articles, all five topics)."""
    bbc = load_corpus("bbc")
    return [(d.text, d.label) for d in bbc.documents[::25]]


@pytest.fixture(scope="module")
def bbc_dataset(articles: list[tuple[str, str]]) -> datasets.Dataset:
    return datasets.Dataset.from_dict(
        {"body": [t for t, _ in articles], "topic": [label for _, label in articles]}
    )


class Rows:
    """A dataset that only streams: any access beyond ``iter`` and ``select_columns``
    (``ds[:]``, ``to_pandas``, ``to_list``, indexing) fails the test; it counts the rows
    handed out per batch."""

    def __init__(self, inner: datasets.Dataset) -> None:
        self.inner = inner
        self.column_names = inner.column_names
        self.features = inner.features
        self._fingerprint = inner._fingerprint
        self.batches: list[int] = []

    def select_columns(self, columns: list[str]) -> Rows:
        rows = Rows(self.inner.select_columns(columns))
        rows.batches = self.batches
        return rows

    def iter(self, batch_size: int) -> Any:
        for batch in self.inner.iter(batch_size=batch_size):
            self.batches.append(len(next(iter(batch.values()))))
            yield batch

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the corpus read the dataset's {name!r}, not its rows")

    def __getitem__(self, key: Any) -> Any:
        raise AssertionError("the corpus indexed the dataset instead of streaming it")


def test_rows_are_streamed_in_batches(bbc_dataset, articles, monkeypatch):
    monkeypatch.setattr(dataset_rows, "ROW_BATCH", 16)
    rows = Rows(bbc_dataset)
    corpus = load_corpus(rows, "body", "topic")
    assert max(rows.batches) == 16 and sum(rows.batches) == len(articles)  # one checking pass
    texts = [d.text for d in corpus.documents]  # a second pass, for the texts
    assert texts == [t for t, _ in articles] and sum(rows.batches) == 2 * len(articles)
    assert corpus.labels == tuple(label for _, label in articles)
    assert corpus.doc_ids == tuple(f"row {i}" for i in range(len(articles)))
    assert corpus.documents[3].text == articles[3][0]


def test_class_labels_blank_rows_and_missing_labels():
    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=["arts", "news"])}
    )
    ds = datasets.Dataset.from_dict(
        {"text": ["one two", "   ", "three", "four"], "label": [1, 0, -1, 0]}, features=features
    )
    corpus = load_corpus(ds)
    assert corpus.doc_ids == ("row 0", "row 2", "row 3") and corpus.blank == ("row 1",)
    assert corpus.labels == ("news", "", "arts")  # -1: no label
    assert corpus.label_names == ("", "arts", "news")
    plain = load_corpus(datasets.Dataset.from_dict({"text": ["a b", "c d"]}))
    assert plain.labels == ("", "")  # no "label" column: no labels


def test_an_iterable_dataset_is_the_same_corpus_named_by_its_rows(bbc_dataset):
    mapped = load_corpus(bbc_dataset, "body", "topic")
    streamed = load_corpus(bbc_dataset.to_iterable_dataset(num_shards=1), "body", "topic")
    assert streamed.labels == mapped.labels and streamed.doc_ids == mapped.doc_ids
    assert [d.text for d in streamed.documents] == [d.text for d in mapped.documents]
    # no _fingerprint of its own: the hash of the rows streamed
    again = load_corpus(bbc_dataset.to_iterable_dataset(num_shards=1), "body", "topic")
    assert again.fingerprint == streamed.fingerprint and again.name == streamed.name
    changed = bbc_dataset.map(
        lambda row, i: {"body": row["body"] + ("!" if i == 5 else "")}, with_indices=True
    )
    other = load_corpus(changed.to_iterable_dataset(num_shards=1), "body", "topic")
    assert other.fingerprint != streamed.fingerprint


def test_a_dataset_giving_other_rows_on_a_second_pass_is_refused():
    passes = []

    def rows():  # each pass over the rows yields other texts
        passes.append(1)
        for i in range(4):
            yield {"text": f"document {i} read on pass {len(passes)}"}

    corpus = load_corpus(datasets.IterableDataset.from_generator(rows))
    with pytest.raises(GeomlensError, match="gave other rows when read again"):
        list(corpus.documents)


def test_the_name_follows_the_datasets_fingerprint_and_columns(bbc_dataset):
    first = load_corpus(bbc_dataset, "body", "topic")
    assert first.name.startswith("dataset:") and load_corpus(first.name) is first
    copy = datasets.Dataset.from_dict(bbc_dataset.to_dict())
    assert load_corpus(copy, "body", "topic").name == first.name
    assert load_corpus(bbc_dataset.select(range(10)), "body", "topic").name != first.name
    assert load_corpus(bbc_dataset, "topic", "body").name != first.name
    with pytest.raises(GeomlensError, match="another process; pass that dataset again"):
        load_corpus("dataset:0123456789abcdef")


def test_a_saved_dataset_folder_is_a_corpus(bbc_dataset, tmp_path):
    bbc_dataset.save_to_disk(tmp_path / "saved")
    on_disk = load_corpus(tmp_path / "saved", "body", "topic")
    in_memory = load_corpus(bbc_dataset, "body", "topic")
    assert on_disk.name == str(tmp_path / "saved")
    assert on_disk.labels == in_memory.labels
    assert [d.text for d in on_disk.documents] == [d.text for d in in_memory.documents]
    datasets.DatasetDict({"train": bbc_dataset, "test": bbc_dataset}).save_to_disk(
        tmp_path / "splits"
    )
    with pytest.raises(GeomlensError, match=r"several splits \[test, train\]; give one split"):
        load_corpus(tmp_path / "splits")


def _check_short(message: str) -> None:
    """The message quotes at most ``QUOTED_CHARS`` characters of ``LONG``."""
    assert LONG[: QUOTED_CHARS + 1] not in message, message[:200]
    assert len(message) < 400, message[:200]


@pytest.mark.parametrize(
    "call",
    [
        lambda ds, p: load_corpus(ds, LONG, "label"),  # no such text column
        lambda ds, p: load_corpus(ds, "text", LONG),  # no such label column
        lambda ds, p: load_corpus(datasets.Dataset.from_dict({"text": [LONG, None]})),
        lambda ds, p: load_corpus(datasets.Dataset.from_dict({"text": ["a"], "label": [1.5]})),
        lambda ds, p: load_corpus(
            datasets.Dataset.from_dict({"text": ["a"], LONG: [1.5]}), "text", LONG
        ),
        lambda ds, p: load_corpus(p / f"{LONG[:200]}.jsonl"),  # a long path that is not there
        lambda ds, p: load_corpus(p / "long.jsonl", LONG),  # a JSONL without that field
        lambda ds, p: load_corpus(p / "long.jsonl", "text", LONG),  # a label of a bad type
        lambda ds, p: geomlens.decompose(corpus=ds["text"], figures="none"),  # a column
        lambda ds, p: geomlens.decompose(corpus=[LONG, 7], figures="none"),
        lambda ds, p: geomlens.make_windows(load_corpus(ds), None, LONG, 8),
    ],
)
def test_no_corpus_error_quotes_more_than_80_characters_of_an_item(call, tmp_path):
    ds = datasets.Dataset.from_dict({"text": [LONG, LONG + "x"], "label": ["a", "b"]})
    (tmp_path / "long.jsonl").write_text(
        json.dumps({"text": LONG, LONG: [1], "label": 1}) + "\n", encoding="utf-8"
    )
    with pytest.raises(GeomlensError) as caught:
        call(ds, tmp_path)
    _check_short(str(caught.value))


SMALL = dict(contexts=20, length=32, layers=[0, 3, 6], batch_size=10, balance=True)


def _topics(metrics: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in metrics["claims"] if c["id"] == "song.context_topics")


def test_a_labelled_dataset_decides_the_topic_claim_as_the_same_jsonl_does(
    bbc_dataset, articles, minilm: ModelView, tmp_path, capsys
):
    jsonl = tmp_path / "articles.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"body": t, "topic": label}) + "\n" for t, label in articles),
        encoding="utf-8",
    )
    options = dict(model="minilm-l6", text_column="body", label_column="topic", **SMALL)
    options |= dict(progress=False, figures="none", view=minilm)
    from_dataset = geomlens.decompose(corpus=bbc_dataset, out=tmp_path / "ds", **options)
    from_file = geomlens.decompose(corpus=jsonl, out=tmp_path / "file", **options)
    topics = _topics(from_dataset.metrics)
    assert topics == _topics(from_file.metrics)
    assert topics["verdict"] in ("reproduced", "not reproduced")  # decided, with labels
    assert from_dataset.metrics["decomposition"] == from_file.metrics["decomposition"]
    assert from_dataset.metrics["claims"] == from_file.metrics["claims"]
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert manifest["config"]["corpus"].startswith("dataset:")
    # the same dataset again reuses its run folder
    geomlens.decompose(corpus=bbc_dataset, out=tmp_path / "ds", **options)
    assert "reusing it" in capsys.readouterr().err


def test_the_command_line_reads_a_saved_dataset_with_its_columns(
    bbc_dataset, minilm: ModelView, tmp_path, capsys
):
    bbc_dataset.save_to_disk(tmp_path / "saved")
    small = ["--contexts", "6", "--length", "16", "--layers", "0-2", "--quiet"]
    argv = ["capture", "--model", "minilm-l6", *small, "--corpus", str(tmp_path / "saved")]
    argv += ["--text-column", "body", "--label-column", "topic", "--out", str(tmp_path / "cli")]
    assert main(argv) == 0, capsys.readouterr().err
    api = geomlens.capture(
        model="minilm-l6",
        corpus=bbc_dataset,
        text_column="body",
        label_column="topic",
        contexts=6,
        length=16,
        layers=[0, 1, 2],
        progress=False,
        out=tmp_path / "api",
        view=minilm,
    )
    cli = json.loads((tmp_path / "cli" / "metrics.json").read_text())
    assert cli["capture"] == api.metrics["capture"]
    no_column = [a for a in argv[:-2] if a not in ("--text-column", "body")]
    assert main([*no_column, "--out", str(tmp_path / "bad")]) == 2  # no column "text"
    assert "has no column 'text'" in capsys.readouterr().err
