"""In-memory texts as a corpus: ``geomlens.decompose(corpus=["...", "..."])``.

The commands read a corpus by name (``"bbc"``, a folder or a ``.jsonl`` file) and record
that name in the run's config, so a list of texts becomes a ``.jsonl`` file (one
``{"text": ...}`` per line) in the user cache, named by the SHA-256 of its content: the
same texts always give the same file, so a rerun with the same list reuses its run folder,
and a different list is a different corpus.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

FOLDER = "texts"
"""Where the files lie, under the geomlens cache (``$GEOMLENS_CACHE``)."""


def corpus_file(texts: Sequence[str]) -> Path:
    """The ``.jsonl`` corpus file of ``texts`` (written once, atomically)."""
    from geomlens.api.checks import text_list
    from geomlens.io.files import cache_root

    texts = text_list("", list(texts) if isinstance(texts, tuple) else texts, "corpus")
    body = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts)
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()[:20]
    path = cache_root() / FOLDER / f"texts-{digest}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(body, encoding="utf-8")
        os.replace(tmp, path)
    return path


def corpus_name(corpus: str | Path | Sequence[str]) -> str | Path:
    """``corpus`` as the commands take it: a list of texts becomes its cached file."""
    if isinstance(corpus, (str, Path)):
        return corpus
    if not isinstance(corpus, (list, tuple)):  # bytes, a number, None: the caller's words
        from geomlens.api.checks import text_list

        text_list("", corpus, "corpus")
    return corpus_file(list(corpus))
