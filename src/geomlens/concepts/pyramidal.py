"""Test 1, pyramidal generation: the context as aggregated vectors, then the choice's tokens.

Each item's context is split into segments, each segment is encoded and aggregated into
one vector (see ``encode``), and the resulting vectors followed by the choice's token
embeddings are fed to the model as ``inputs_embeds``; the choice's log-likelihood picks
the answer, exactly as in the baseline. With one-token segments at layer E and no
aggregation the vectors are the context's own token embeddings, and test 1 reproduces
the baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from geomlens.concepts.baseline import (
    BATCH_TOKENS,
    ChoiceScores,
    Prepared,
    Row,
    choice_scores,
    score_rows,
)
from geomlens.concepts.encode import aggregate_context, segment_token_vectors, segments_for
from geomlens.concepts.schemes import Scheme, resolve_layer
from geomlens.models.view import ModelView

CHUNK = 32  # items whose vectors are held at once


def pyramidal_scores(
    view: ModelView,
    scheme: Scheme,
    prepared: Sequence[Prepared],
    *,
    batch_tokens: int = BATCH_TOKENS,
    progress: Callable[[int], None] | None = None,
) -> list[ChoiceScores]:
    """Per item, the log-likelihood of each choice after the context's concept vectors."""
    scheme = scheme.validate()
    layer = resolve_layer(scheme.layer, view.n_layers)
    out: list[ChoiceScores] = []
    for start in range(0, len(prepared), CHUNK):
        chunk = prepared[start : start + CHUNK]
        spans = [segments_for(view, scheme, p.enc, p.prompt.blocks) for p in chunk]
        vecs = segment_token_vectors(
            view, scheme, layer, [p.enc for p in chunk], spans, batch_tokens
        )
        rows = [
            Row(aggregate_context(scheme, v), p.enc.continuations)
            for p, v in zip(chunk, vecs, strict=True)
        ]
        ll = score_rows(view, rows, batch_tokens=batch_tokens)
        out.extend(choice_scores(p.item.choices, s) for p, s in zip(chunk, ll, strict=True))
        if progress is not None:
            progress(len(chunk))
    return out
