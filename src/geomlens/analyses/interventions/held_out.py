"""Held-out windows: windows of the corpus whose documents the estimation windows (the
capture the subspaces were estimated on) do not hold, so that an edit is measured on text
its directions were not fitted to."""

from __future__ import annotations

from typing import Any

import numpy as np

from geomlens.corpus import Corpus, Windows, make_windows
from geomlens.corpus.windows import window_range
from geomlens.errors import GeomlensError


def held_out_windows(
    corpus: Corpus,
    tokenizer: Any,
    estimation: Windows,
    n_windows: int,
    seed: int = 0,
    offset: int = 0,
    special_tokens: str = "auto",
) -> Windows:
    """``n_windows`` windows as long as ``estimation``'s, cut from documents it does not hold.

    The windows are those ``make_windows`` makes for C + n contexts with the same seed (a
    larger C keeps the documents of a smaller one), less the estimation's documents, first
    n kept (in corpus order).

    Raises:
        GeomlensError: when the corpus holds fewer than n other documents long enough.
    """
    wanted = estimation.n_contexts + n_windows
    try:
        more = make_windows(
            corpus,
            tokenizer,
            wanted,
            estimation.length,
            seed=seed,
            offset=offset,
            special_tokens=special_tokens,
        )
    except GeomlensError as error:
        raise GeomlensError(
            f"the corpus has too few documents for {n_windows} held-out windows besides the "
            f"{estimation.n_contexts} estimation windows ({error})"
        ) from None
    used = set(estimation.doc_ids)
    keep = [i for i, doc in enumerate(more.doc_ids) if doc not in used][:n_windows]
    if len(keep) < n_windows:
        raise GeomlensError(
            f"only {len(keep)} held-out windows are left besides the {estimation.n_contexts} "
            f"estimation windows; ask for fewer (--held-out)."
        )
    return _rows(more, np.asarray(keep))


def _rows(windows: Windows, rows: np.ndarray) -> Windows:
    """The windows at ``rows`` (a contiguous range goes through ``window_range``)."""
    if rows.size and np.array_equal(rows, np.arange(rows[0], rows[0] + rows.size)):
        return window_range(windows, int(rows[0]), int(rows[0] + rows.size))
    from geomlens.corpus.windows import _fingerprint

    ids, labels = windows.input_ids[rows], windows.labels[rows]
    ids.flags.writeable = False
    labels.flags.writeable = False
    docs = tuple(windows.doc_ids[i] for i in rows)
    return Windows(
        input_ids=ids,
        labels=labels,
        label_names=windows.label_names,
        doc_ids=docs,
        n_skipped_short=windows.n_skipped_short,
        special_tokens=windows.special_tokens,
        fingerprint=_fingerprint(ids, labels, windows.label_names, docs),
    )
