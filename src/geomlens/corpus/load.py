"""``load_corpus``: any corpus source by what it is (a name, a path, a dataset)."""

from __future__ import annotations

import os
from pathlib import Path

from geomlens.corpus import dataset_rows
from geomlens.corpus.sources import Corpus, load_files


def load_corpus(
    source: str | os.PathLike[str] | dataset_rows.Dataset,
    text_field: str = "text",
    label_field: str = "label",
) -> Corpus:
    """Load a corpus from "bbc", a folder of .txt files, a .jsonl file, a folder written by
    ``datasets``' ``save_to_disk``, a ``datasets.Dataset`` or ``IterableDataset``, or the
    name a dataset passed to the Python API goes by in this process.

    Args:
        source: "bbc" for the bundled BBC news corpus (2,225 articles, 5 topics); a folder,
            where every *.txt below it is a document labelled by its top-level subfolder
            ("" for files in the folder itself); a .jsonl file with one JSON object per
            line; a saved dataset's folder or a dataset in memory (streamed, one document
            per row, ids "row N").
        text_field: JSONL and datasets: the field (column) holding the text.
        label_field: JSONL and datasets: the field (column) holding the label (optional
            per line; a dataset's label column other than "label" must exist).

    Returns:
        The corpus; its ``name`` is "bbc", the path as given, or ``dataset:`` and 16 hex
        digits of a dataset's fingerprint.

    Raises:
        GeomlensError: for a missing or unsupported source, an empty one, a bad JSONL line
            or row, or a missing column.
    """
    if isinstance(source, dataset_rows.Dataset):
        return dataset_rows.register(source, text_field, label_field)
    if isinstance(source, str):
        corpus = dataset_rows.registered(source)
        if corpus is not None:
            return corpus
    name = os.fspath(source)
    path = Path(name).expanduser()
    if path.is_dir() and dataset_rows.is_dataset_folder(path):
        return dataset_rows.load_dataset_folder(path, name, text_field, label_field)
    return load_files(source, text_field, label_field)
