"""Windowing a corpus into C x T token windows, one per document, chosen reproducibly by seed.

The windows are what the model sees: a [C, T] array of token ids where every row is exactly
T tokens from the start (after an optional offset) of one document, with that document's
label. Encoders get the special tokens they were trained with ([CLS] ... [SEP] for BERT).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from geomlens.corpus.sources import Corpus, _feed
from geomlens.corpus.tokenized import document_ids
from geomlens.errors import GeomlensError, clipped

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

SPECIAL_TOKEN_MODES = ("auto", "model", "none")
"""Accepted values of `make_windows(special_tokens=...)`."""

_PROBE_TEXT = "the geometry of language"


@dataclass(frozen=True, eq=False)
class Windows:
    """Token windows of a corpus, one per chosen document, ready for a forward pass.

    The arrays are read-only so that the fingerprint stays true; copy them to modify
    (e.g. `torch.tensor(windows.input_ids)` rather than `torch.from_numpy`).

    Attributes:
        input_ids: [C, T] int64 token ids; every row exactly T tokens.
        labels: [C] int64 index of each window's label in `label_names`.
        label_names: sorted unique labels of the whole corpus.
        doc_ids: [C] the document each window came from, in corpus order.
        n_skipped_short: documents of the corpus too short for a window (not used).
        special_tokens: what was applied: "model" (the tokenizer's own special tokens,
            counted within T) or "none" (T raw text tokens).
        fingerprint: sha256 hex over the shape, input_ids bytes, labels, label_names, doc_ids.
    """

    input_ids: np.ndarray
    labels: np.ndarray
    label_names: tuple[str, ...]
    doc_ids: tuple[str, ...]
    n_skipped_short: int
    special_tokens: str
    fingerprint: str

    @property
    def n_contexts(self) -> int:
        """C, the number of windows."""
        return int(self.input_ids.shape[0])

    @property
    def length(self) -> int:
        """T, the tokens per window (special tokens included)."""
        return int(self.input_ids.shape[1])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Windows):
            return NotImplemented
        return (
            self.fingerprint == other.fingerprint
            and self.n_skipped_short == other.n_skipped_short
            and self.special_tokens == other.special_tokens
            and np.array_equal(self.input_ids, other.input_ids)
            and np.array_equal(self.labels, other.labels)
            and self.label_names == other.label_names
            and self.doc_ids == other.doc_ids
        )

    def __hash__(self) -> int:
        return hash(self.fingerprint)


def make_windows(
    corpus: Corpus,
    tokenizer: PreTrainedTokenizerBase,
    n_contexts: int,
    length: int,
    seed: int = 0,
    offset: int = 0,
    balance: bool = False,
    special_tokens: str = "auto",
    chunks: Sequence[int] | None = None,
) -> Windows:
    """Cut one window of `length` tokens from each of `n_contexts` documents chosen by seed.

    A window is a document's first tokens after skipping `offset` text tokens. Documents with
    too few tokens are skipped (counted in `n_skipped_short`). The choice is a seeded
    permutation of the eligible documents (first C taken), or with `balance` a round-robin
    over the sorted labels of seeded per-label shuffles, so label counts differ by at most one
    where the corpus allows. Windows come back in corpus order (per chunk); the same inputs
    and seed give identical windows, and a larger C keeps the documents of a smaller one.

    Args:
        corpus: the documents.
        tokenizer: a Hugging Face tokenizer; the only part of the model used here.
        n_contexts: C, windows to make.
        length: T, tokens per window, special tokens included.
        seed: seed of `np.random.default_rng` for the choice of documents.
        offset: text tokens to skip at the start of each document.
        balance: choose near-equal numbers of documents per label.
        special_tokens: "auto" ("model" when the tokenizer adds special tokens to a single
            sequence, else "none"), "model" (T - n_special text tokens wrapped by the
            tokenizer's own special tokens, as the model saw in training) or "none"
            (T raw text tokens).
        chunks: increasing window counts ending at ``n_contexts`` (``--contexts auto``'s
            looks): chunks each in corpus order, so the first ``chunks[k]`` windows are
            those of ``chunks[k]`` contexts (None: one chunk).

    Returns:
        The windows: input_ids [C, T] int64, labels [C] int64.

    Raises:
        GeomlensError: for bad arguments, or when fewer than C documents are long enough.
    """
    _check_int("n_contexts", n_contexts, minimum=1)
    _check_int("length", length, minimum=1)
    _check_int("offset", offset, minimum=0)
    _check_int("seed", seed, minimum=0)
    mode, n_added = _special_mode(tokenizer, special_tokens, length)
    n_text = length - n_added
    prefixes = _text_prefixes(corpus, tokenizer, offset + n_text)
    eligible = [i for i, ids in enumerate(prefixes) if ids is not None]
    if len(eligible) < n_contexts:
        raise GeomlensError(
            _too_few_message(corpus.name, len(eligible), n_contexts, length, n_added, offset)
        )

    label_names = corpus.label_names
    label_index = {name: k for k, name in enumerate(label_names)}
    doc_labels = [label_index[label] for label in corpus.labels]
    rng = np.random.default_rng(seed)
    if balance:
        chosen = _choose_balanced(eligible, doc_labels, len(label_names), n_contexts, rng)
    else:
        chosen = [eligible[k] for k in rng.permutation(len(eligible))[:n_contexts]]
    chosen = _in_chunks(chosen, chunks or (n_contexts,))

    wrap = _special_wrapper(tokenizer, n_added) if mode == "model" else None
    input_ids = _cut([prefixes[i] for i in chosen], offset, length, wrap)
    labels = np.array([doc_labels[i] for i in chosen], dtype=np.int64)
    doc_ids = tuple(corpus.doc_ids[i] for i in chosen)
    input_ids.flags.writeable = False
    labels.flags.writeable = False
    return Windows(
        input_ids=input_ids,
        labels=labels,
        label_names=label_names,
        doc_ids=doc_ids,
        n_skipped_short=len(corpus) - len(eligible),
        special_tokens=mode,
        fingerprint=_fingerprint(input_ids, labels, label_names, doc_ids),
    )


def _in_chunks(chosen: list[int], chunks: Sequence[int]) -> list[int]:
    """``chosen`` (a prefix-stable choice: the documents of fewer windows come first) cut at
    the window counts ``chunks`` (the last is ``len(chosen)``), each chunk sorted."""
    if list(chunks) != sorted(set(chunks)) or chunks[-1] != len(chosen) or chunks[0] < 1:
        raise GeomlensError(
            f"chunks must be increasing window counts ending at {len(chosen)} (got {chunks})."
        )
    bounds = [0, *chunks]
    return [
        i for lo, hi in zip(bounds[:-1], bounds[1:], strict=True) for i in sorted(chosen[lo:hi])
    ]


def windows_available(
    corpus: Corpus,
    tokenizer: PreTrainedTokenizerBase,
    length: int,
    offset: int = 0,
    special_tokens: str = "auto",
) -> int:
    """How many windows of ``length`` tokens after ``offset`` the corpus holds (its
    documents long enough): the most ``make_windows`` can make."""
    _, n_added = _special_mode(tokenizer, special_tokens, length)
    needed = offset + length - n_added
    return sum(len(ids) >= needed for ids in document_ids(corpus, tokenizer))


def window_range(windows: Windows, start: int, stop: int) -> Windows:
    """Windows ``start`` to ``stop - 1`` of ``windows`` (a chunk, or the windows of a look,
    of ``--contexts auto``), fingerprinted anew."""
    ids, labels = windows.input_ids[start:stop], windows.labels[start:stop]
    doc_ids = windows.doc_ids[start:stop]
    return Windows(
        input_ids=ids,
        labels=labels,
        label_names=windows.label_names,
        doc_ids=doc_ids,
        n_skipped_short=windows.n_skipped_short,
        special_tokens=windows.special_tokens,
        fingerprint=_fingerprint(ids, labels, windows.label_names, doc_ids),
    )


def _special_mode(
    tokenizer: PreTrainedTokenizerBase, special_tokens: str, length: int
) -> tuple[str, int]:
    """(the special-token mode applied, tokens it adds per window), checked against T."""
    if special_tokens not in SPECIAL_TOKEN_MODES:
        raise GeomlensError(
            f"special_tokens must be one of {', '.join(SPECIAL_TOKEN_MODES)}, "
            f"not {special_tokens!r}."
        )
    n_special = int(tokenizer.num_special_tokens_to_add(pair=False))
    # "model" on a tokenizer that adds nothing applies nothing: record what was applied.
    mode = "model" if special_tokens != "none" and n_special > 0 else "none"
    n_added = n_special if mode == "model" else 0
    if length <= n_added:
        raise GeomlensError(
            f"length {length} leaves no room for text next to the {n_added} special tokens "
            f"this tokenizer adds; use a length above {n_added}."
        )
    return mode, n_added


def _cut(
    prefixes: list[list[int] | None],
    offset: int,
    length: int,
    wrap: Callable[[Sequence[int]], list[int]] | None,
) -> np.ndarray:
    """The windows [C, T]: each chosen document's text tokens after ``offset``, wrapped in
    the tokenizer's special tokens when ``wrap`` is given."""
    input_ids = np.empty((len(prefixes), length), dtype=np.int64)
    for row, prefix in enumerate(prefixes):
        assert prefix is not None  # chosen from the eligible documents
        ids = wrap(prefix[offset:]) if wrap is not None else prefix[offset:]
        if len(ids) != length:
            raise GeomlensError(
                f"the tokenizer's special tokens made a window of {len(ids)} tokens instead of "
                f"{length}; use special_tokens='none'."
            )
        input_ids[row] = ids
    return input_ids


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise GeomlensError(
            f"{name} must be a whole number of at least {minimum}, not {clipped(repr(value))}."
        )


def _text_prefixes(
    corpus: Corpus, tokenizer: PreTrainedTokenizerBase, needed: int
) -> list[list[int] | None]:
    """Per document, its first `needed` text-token ids, or None when it has fewer.

    Whole texts are tokenized (no truncation in the tokenizer, no cutting of the text), so
    the kept prefix is exactly the tokenizer's own tokens of the document.
    """
    return [
        [int(i) for i in ids[:needed]] if len(ids) >= needed else None
        for ids in document_ids(corpus, tokenizer)
    ]


def _choose_balanced(
    eligible: list[int],
    doc_labels: list[int],
    n_labels: int,
    n: int,
    rng: np.random.Generator,
) -> list[int]:
    """Round-robin over labels (in sorted order) of each label's seeded shuffled documents."""
    queues = []
    for label in range(n_labels):
        pool = [i for i in eligible if doc_labels[i] == label]
        queues.append([pool[k] for k in rng.permutation(len(pool))])
    chosen: list[int] = []
    depth = 0
    while len(chosen) < n:  # terminates: the caller checked len(eligible) >= n
        for queue in queues:
            if depth < len(queue) and len(chosen) < n:
                chosen.append(queue[depth])
        depth += 1
    return chosen


def _special_wrapper(
    tokenizer: PreTrainedTokenizerBase, n_special: int
) -> Callable[[Sequence[int]], list[int]]:
    """A function adding the tokenizer's single-sequence special tokens to text ids.

    Python tokenizers have `build_inputs_with_special_tokens`; fast (Rust-backed) ones in
    transformers 5 do not, so their template is read off a probe text: the ids with special
    tokens minus the ids without them leaves a prefix and a suffix ([CLS] and [SEP]).
    """
    build: Any = getattr(tokenizer, "build_inputs_with_special_tokens", None)
    if callable(build):
        return lambda ids: [int(t) for t in build(list(ids))]
    plain = list(tokenizer(_PROBE_TEXT, add_special_tokens=False)["input_ids"])
    full = list(tokenizer(_PROBE_TEXT, add_special_tokens=True)["input_ids"])
    if plain and len(full) == len(plain) + n_special:
        for start in range(n_special + 1):
            if full[start : start + len(plain)] == plain:
                prefix, suffix = full[:start], full[start + len(plain) :]
                return lambda ids: [*prefix, *(int(t) for t in ids), *suffix]
    raise GeomlensError(
        "this tokenizer places its special tokens in a way geomlens cannot rebuild from "
        "token ids; use special_tokens='none'."
    )


def _too_few_message(
    name: str, n_eligible: int, n_contexts: int, length: int, n_added: int, offset: int
) -> str:
    n_text = length - n_added
    if n_added:
        need = f"{n_text} text tokens ({length} less {n_added} special tokens)"
    else:
        need = f"{length} tokens"
    lower = "--contexts, --length or --offset" if offset else "--contexts or --length"
    return (
        f"corpus '{clipped(name)}' has only {n_eligible} documents with at least {need} after "
        f"an offset of {offset}, but {n_contexts} contexts were asked for; lower {lower}."
    )


def _fingerprint(
    input_ids: np.ndarray,
    labels: np.ndarray,
    label_names: tuple[str, ...],
    doc_ids: tuple[str, ...],
) -> str:
    hasher = hashlib.sha256(b"geomlens.windows.v1")
    for dim in input_ids.shape:
        hasher.update(int(dim).to_bytes(8, "little"))
    _feed(hasher, np.ascontiguousarray(input_ids, dtype="<i8").tobytes())
    _feed(hasher, np.ascontiguousarray(labels, dtype="<i8").tobytes())
    hasher.update(len(label_names).to_bytes(8, "little"))
    for label in label_names:
        _feed(hasher, label)
    for doc_id in doc_ids:
        _feed(hasher, doc_id)
    return hasher.hexdigest()
