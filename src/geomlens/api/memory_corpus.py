"""In-memory texts or a dataset as a corpus: ``geomlens.decompose(corpus=["...", "..."])``,
``geomlens.decompose(corpus=dataset, text_column="body", label_column="topic")``.

The commands read a corpus by name (``"bbc"``, a folder or a ``.jsonl`` file) and record
that name in the run's config, so a list of texts becomes a ``.jsonl`` file (one
``{"text": ...}`` per line) in the user cache, named by the SHA-256 of its content: the
same texts always give the same file, so a rerun with the same list reuses its run folder,
and a different list is a different corpus.

A ``datasets.Dataset`` or ``IterableDataset`` is not copied: its rows are streamed
(``corpus.dataset_rows``), and it goes by ``dataset:`` and its fingerprint (the dataset's
own ``_fingerprint`` with the columns read, or, without one, the hash of the rows), so the
same dataset reuses its run folder and another one is another corpus.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from geomlens.corpus.dataset_rows import Dataset, register

FOLDER = "texts"
"""Where the files lie, under the geomlens cache (``$GEOMLENS_CACHE``)."""


def corpus_file(texts: Sequence[str], text_column: str = "text") -> Path:
    """The ``.jsonl`` corpus file of ``texts`` (written once, atomically), each text under
    ``text_column``."""
    from geomlens.api.checks import text_list
    from geomlens.io.files import cache_root

    texts = text_list("", list(texts) if isinstance(texts, tuple) else texts, "corpus")
    body = "".join(json.dumps({text_column: t}, ensure_ascii=False) + "\n" for t in texts)
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()[:20]
    path = cache_root() / FOLDER / f"texts-{digest}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(body, encoding="utf-8")
        os.replace(tmp, path)
    return path


def corpus_name(
    corpus: str | Path | Sequence[str] | Dataset,
    text_column: str = "text",
    label_column: str = "label",
) -> str | Path:
    """``corpus`` as the commands take it: a list of texts becomes its cached file, a
    dataset the name it is registered under (its rows checked in one pass)."""
    if isinstance(corpus, (str, Path)):
        return corpus
    if isinstance(corpus, Dataset):
        return register(corpus, text_column, label_column).name
    if not isinstance(corpus, (list, tuple)):  # bytes, a number, None: the caller's words
        from geomlens.api.checks import text_list

        text_list("", corpus, "corpus")
    return corpus_file(list(corpus), text_column)
