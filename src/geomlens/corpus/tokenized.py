"""Each document's token ids under one tokenizer, tokenized once per process.

Choosing windows and counting token frequencies both tokenize every document of the
corpus whole (about 5 s for BBC news on the reference machine), so a report did it twice
and a process that builds several runs on one corpus did it for each. The ids of the last
few (corpus, tokenizer) pairs are kept in memory as int32, but only while a corpus holds
at most ``MEMO_TOKENS`` tokens: a bigger one is tokenized again each time, in chunks, so
memory stays bounded by the chunk, not the corpus.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from geomlens.corpus.sources import Corpus

TOKENIZE_CHUNK = 256
"""Documents per batched tokenizer call; bounds memory on big corpora."""
MEMO_TOKENS = 16_000_000
"""A corpus of at most this many tokens keeps its ids in memory (64 MB as int32)."""
MEMO_ENTRIES = 4
"""(corpus, tokenizer) pairs kept, the least recently used dropped first."""

_memo: OrderedDict[tuple[str, str], list[npt.NDArray[np.int32]]] = OrderedDict()


def tokenizer_key(tokenizer: Any) -> str | None:
    """A content key of a fast tokenizer (its whole serialised state: vocabulary, merges,
    normaliser, added tokens), so two folders holding the same tokenizer share ids; None
    for a tokenizer that cannot serialise itself (it is never memoised)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    return hashlib.sha256(backend.to_str().encode()).hexdigest()


def _tokenize(corpus: Corpus, tokenizer: Any) -> Iterator[npt.NDArray[np.int32]]:
    documents = iter(corpus.documents)  # a dataset's are read a batch at a time
    while texts := [d.text for d in itertools.islice(documents, TOKENIZE_CHUNK)]:
        encoded = tokenizer(
            texts,
            add_special_tokens=False,
            return_attention_mask=False,
            return_token_type_ids=False,
            verbose=False,  # silences "longer than the model's maximum length"
        )["input_ids"]
        yield from (np.asarray(ids, dtype=np.int32) for ids in encoded)


def document_ids(corpus: Corpus, tokenizer: Any) -> Iterator[npt.NDArray[np.int32]]:
    """Yield each document's text-token ids [n_i] in corpus order (no special tokens, no
    truncation: the tokenizer's own tokens of the whole text)."""
    key = tokenizer_key(tokenizer)
    memo_key = None if key is None else (corpus.fingerprint, key)
    if memo_key is not None and memo_key in _memo:
        _memo.move_to_end(memo_key)
        yield from _memo[memo_key]
        return
    kept: list[npt.NDArray[np.int32]] | None = [] if memo_key is not None else None
    total = 0
    for ids in _tokenize(corpus, tokenizer):
        if kept is not None:
            total += len(ids)
            kept.append(ids)
            if total > MEMO_TOKENS:
                kept = None
        yield ids
    if kept is not None and memo_key is not None:
        _memo[memo_key] = kept
        while len(_memo) > MEMO_ENTRIES:
            _memo.popitem(last=False)
