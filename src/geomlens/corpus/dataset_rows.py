"""A ``datasets.Dataset`` or ``IterableDataset`` as a corpus, streamed row by row.

One pass over the rows (in batches of ``ROW_BATCH``) checks them and keeps what choosing
windows needs of each document: its id ("row N", counting from 0), its label, whether it
was cut. The texts are read again, a batch at a time, each time the documents are
iterated (tokenizing them for the windows); no list of every text is ever held, and the
dataset is never turned into a table or a list (``ds[:]``, ``to_pandas``).

A dataset saved with ``save_to_disk`` is a corpus by its folder (``--corpus DIR``); one
in memory, passed to the Python API, goes by a name made of its fingerprint
(``DATASET_PREFIX``), which resolves in the process that registered it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, overload, runtime_checkable

from geomlens.corpus.sources import (
    Corpus,
    Document,
    _cut,
    _feed,
    check_documents,
)
from geomlens.errors import GeomlensError, clipped, short_list
from geomlens.io.jsontext import bad_text

ROW_BATCH = 256
"""Rows read per batch: bounds the texts held at once."""

DATASET_PREFIX = "dataset:"
"""How the name of a dataset in memory starts: ``dataset:`` and 16 hex digits of its
fingerprint (the run's config records it, so the same dataset reuses its run folder)."""

DEFAULT_LABEL = "label"
"""The label column read when none is named; a dataset without it has no labels. A label
column named otherwise must exist."""

ROWS_HASH = b"geomlens.corpus.v1.streamed"
"""What the hash of a dataset's rows (id, label, text of each document) starts from."""

MAX_REGISTERED = 8
"""Datasets in memory remembered by name, the least recently registered dropped first."""

_registered: OrderedDict[str, Corpus] = OrderedDict()


@runtime_checkable
class Dataset(Protocol):
    """A ``datasets.Dataset`` or ``IterableDataset``: what geomlens reads of it."""

    def iter(self, batch_size: int) -> Iterator[dict[str, list[Any]]]:
        """Yield the rows in batches, as columns of values."""
        ...

    def select_columns(self, column_names: list[str]) -> Any:
        """The dataset with only these columns."""
        ...


def is_dataset_folder(path: Path) -> bool:
    """Whether ``path`` is a folder ``save_to_disk`` wrote (a dataset or a dict of splits)."""
    return (path / "state.json").is_file() or (path / "dataset_dict.json").is_file()


def load_dataset_folder(path: Path, name: str, text_column: str, label_column: str) -> Corpus:
    """The corpus of a dataset folder written by ``datasets``' ``save_to_disk`` (memory-mapped,
    not read whole)."""
    if (path / "dataset_dict.json").is_file():
        splits = sorted(p.name for p in path.iterdir() if (p / "state.json").is_file())
        raise GeomlensError(
            f"corpus folder '{clipped(name)}' holds a dataset of several splits "
            f"{clipped(short_list(splits))}; give one split's folder, e.g. "
            f"'{clipped(path / (splits[0] if splits else 'train'))}'."
        )
    try:
        import datasets
    except ImportError:
        raise GeomlensError(
            f"corpus folder '{clipped(name)}' is a saved dataset, which needs the package "
            "datasets; run `pip install datasets`."
        ) from None
    try:
        dataset = datasets.load_from_disk(str(path))
    except (OSError, ValueError, KeyError) as exc:
        raise GeomlensError(
            f"corpus folder '{clipped(name)}' looks like a saved dataset but cannot be read "
            f"({clipped(exc)}); save it again with save_to_disk."
        ) from None
    return dataset_corpus(dataset, name, text_column, label_column)


def register(dataset: Dataset, text_column: str, label_column: str) -> Corpus:
    """The corpus of a dataset in memory (one pass, checking every row), named by its
    fingerprint and kept for ``registered``."""
    corpus = dataset_corpus(dataset, "dataset", text_column, label_column)
    corpus = dataclasses.replace(corpus, name=DATASET_PREFIX + corpus.fingerprint[:16])
    _registered[corpus.name] = corpus
    _registered.move_to_end(corpus.name)
    while len(_registered) > MAX_REGISTERED:
        _registered.popitem(last=False)
    return corpus


def registered(name: str) -> Corpus | None:
    """The corpus of a dataset registered under ``name`` in this process, if any."""
    if not name.startswith(DATASET_PREFIX):
        return None
    corpus = _registered.get(name)
    if corpus is None:
        raise GeomlensError(
            f"corpus '{clipped(name)}' names a dataset passed to the Python API in another "
            "process; pass that dataset again as corpus=, or save it with save_to_disk and "
            "give its folder."
        )
    return corpus


def dataset_corpus(dataset: Dataset, name: str, text_column: str, label_column: str) -> Corpus:
    """A corpus reading ``dataset``'s rows (``text_column`` the text, ``label_column`` the
    label: a string, an integer or a ``ClassLabel``'s name; "" where absent or None).

    Raises:
        GeomlensError: for a missing column, a row whose text is not a string (or not
            valid Unicode), a label of another type, or no rows with text.
    """
    columns = _columns(dataset, name, text_column, label_column)
    label_of = _label_reader(dataset, name, label_column)
    doc_ids: list[str] = []
    labels: list[str] = []
    cut: list[str] = []
    blank: list[str] = []
    hasher = hashlib.sha256(ROWS_HASH)
    for row, text, label in _rows(dataset, columns, name, text_column, label_column):
        doc_id = f"row {row}"
        if not text.strip():
            blank.append(doc_id)
            continue
        kept, was_cut = _cut(text)
        label_name = label_of(label, row)
        doc_ids.append(doc_id)
        labels.append(label_name)
        if was_cut:
            cut.append(doc_id)
        for value in (doc_id, label_name, kept):
            _feed(hasher, value)
    check_documents(name, doc_ids, tuple(blank))
    digest = hasher.hexdigest()
    documents = DatasetDocuments(dataset, columns, tuple(doc_ids), tuple(labels), name, digest)
    return Corpus(
        name=name,
        documents=documents,
        fingerprint=_fingerprint(dataset, text_column, label_column, digest, len(doc_ids)),
        blank=tuple(blank),
        doc_ids=documents.doc_ids,
        labels=documents.labels,
        cut_documents=tuple(cut),
    )


class DatasetDocuments(Sequence[Document]):
    """A dataset's documents, read anew from its rows on each pass (blank rows skipped);
    their ids and labels held."""

    def __init__(
        self,
        dataset: Dataset,
        columns: list[str],
        doc_ids: tuple[str, ...],
        labels: tuple[str, ...],
        name: str,
        rows_digest: str,
    ) -> None:
        self.dataset, self.columns, self.name = dataset, columns, name
        self.doc_ids, self.labels = doc_ids, labels
        self.rows_digest = rows_digest
        """The hash of the rows the first pass read: every later pass must read them again."""

    def __len__(self) -> int:
        return len(self.doc_ids)

    def __iter__(self) -> Iterator[Document]:
        text_column = self.columns[0]
        rows = _rows(self.dataset, self.columns, self.name, text_column, "")
        hasher = hashlib.sha256(ROWS_HASH)
        k = 0
        for row, text, _ in rows:
            if k < len(self.doc_ids) and self.doc_ids[k] == f"row {row}":
                kept, was_cut = _cut(text)
                for value in (self.doc_ids[k], self.labels[k], kept):
                    _feed(hasher, value)
                yield Document(text=kept, label=self.labels[k], doc_id=self.doc_ids[k], cut=was_cut)
                k += 1
        if k == len(self.doc_ids) and hasher.hexdigest() != self.rows_digest:
            raise GeomlensError(
                f"corpus '{clipped(self.name)}' gave other rows when read again (a shuffled or "
                "random IterableDataset?); give a dataset that yields the same rows each time."
            )

    @overload
    def __getitem__(self, index: int) -> Document: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Document]: ...

    def __getitem__(self, index: int | slice) -> Document | Sequence[Document]:
        """A document by position (read by streaming up to it: a dataset may have no random
        access); a slice as a tuple."""
        if isinstance(index, slice):
            return tuple(itertools.islice(self, *index.indices(len(self))))
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return next(itertools.islice(self, index % len(self), None))


def _columns(dataset: Dataset, name: str, text_column: str, label_column: str) -> list[str]:
    """The columns read: the text's, and the label's when the dataset has it (a label
    column other than ``DEFAULT_LABEL`` must exist)."""
    present = getattr(dataset, "column_names", None)
    if present is None:  # an IterableDataset of unknown features: read its first row
        first = next(iter(dataset.iter(batch_size=1)), {})
        present = list(first)
    if text_column not in present:
        raise GeomlensError(
            f"corpus '{clipped(name)}' has no column '{clipped(text_column)}' (its columns: "
            f"{clipped(short_list(present))}); name the text's with text_column."
        )
    if label_column in present and label_column != text_column:
        return [text_column, label_column]
    if label_column != DEFAULT_LABEL:
        raise GeomlensError(
            f"corpus '{clipped(name)}' has no column '{clipped(label_column)}' (its columns: "
            f"{clipped(short_list(present))}); name the labels' with label_column."
        )
    return [text_column]


def _rows(
    dataset: Dataset, columns: list[str], name: str, text_column: str, label_column: str
) -> Iterator[tuple[int, str, Any]]:
    """(row number from 0, text, label value or None) of every row, a batch at a time."""
    row = 0
    for batch in dataset.select_columns(columns).iter(batch_size=ROW_BATCH):
        texts = batch[columns[0]]
        values = batch[columns[1]] if len(columns) > 1 else [None] * len(texts)
        for text, label in zip(texts, values, strict=True):
            if not isinstance(text, str):
                raise GeomlensError(
                    f"row {row} of corpus '{clipped(name)}' has a '{clipped(text_column)}' "
                    f"that is {type(text).__name__}, not a string; give the text's column."
                )
            problem = bad_text(text)
            if problem is not None:
                raise GeomlensError(
                    f"row {row} of corpus '{clipped(name)}' has {problem} in its "
                    f"'{clipped(text_column)}', which is not text; fix that row."
                )
            yield row, text, label
            row += 1


def _label_reader(dataset: Dataset, name: str, label_column: str) -> Callable[[Any, int], str]:
    """A function from a row's label value (and its row number, for errors) to its label:
    a ``ClassLabel``'s name, an integer's digits, a string as it is, None as ""."""
    features = getattr(dataset, "features", None) or {}
    names = getattr(features.get(label_column), "names", None)

    def label(value: Any, row: int) -> str:
        if value is None:
            return ""
        if isinstance(value, int) and not isinstance(value, bool):
            if names is None:
                return str(value)
            return names[value] if 0 <= value < len(names) else ""  # -1: no label
        if isinstance(value, str) and bad_text(value) is None:
            return value
        raise GeomlensError(
            f"row {row} of corpus '{clipped(name)}' has a label '{clipped(label_column)}' "
            f"that is {type(value).__name__}, neither a string nor an integer."
        )

    return label


def _fingerprint(
    dataset: Dataset, text_column: str, label_column: str, streamed: str, n: int
) -> str:
    """The dataset's own fingerprint with the columns read, or (none) the hash of its rows."""
    own = getattr(dataset, "_fingerprint", None)
    if not isinstance(own, str) or not own:
        return streamed
    hasher = hashlib.sha256(b"geomlens.corpus.v1.dataset")
    for value in (own, text_column, label_column, str(n)):
        _feed(hasher, value)
    return hasher.hexdigest()
