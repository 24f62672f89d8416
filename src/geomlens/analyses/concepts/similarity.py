"""Test 2, concept similarity: the choice whose vector best matches the context's wins.

The context is aggregated into vectors as in test 1 (ENCODING_LAYER, WORD_AGG, NORM,
SEGMENT_AGG, EXAMPLE_AGG); each choice's tokens are encoded on their own and aggregated
into one vector (OUT_ENCODING_LAYER, OUT_WORD_AGG, the same NORM). A choice's score is
its best similarity over the context vectors: the dot product, as the paper compares them
(section 5.1.2), or the cosine where a scheme names it; with EXAMPLE_AGG
"soft_cluster" the context vectors are first averaged with weights
``softmax_i(v_i . c)`` against the choice vector c.

On an encoder-decoder both the context and the choices are encoded by the encoder (its
hidden-state layers); nothing is fed to the decoder, so the run's ``feed`` plays no part.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from geomlens.analyses.concepts.aggregate import normalise, soft_cluster, word_aggregate
from geomlens.analyses.concepts.baseline import BATCH_TOKENS, Prepared, item_chunks
from geomlens.analyses.concepts.encode import (
    aggregate_context,
    layer_vectors,
    scheme_activation,
    segment_token_vectors,
    segments_for,
)
from geomlens.analyses.concepts.reuse import Reuse
from geomlens.analyses.concepts.schemes import DEFAULT_SIMILARITY, Scheme, resolve_layer
from geomlens.models.view import ModelView

EPS = 1e-12


def similarity(a: torch.Tensor, b: torch.Tensor, kind: str) -> torch.Tensor:
    """Similarity of rows of ``a`` [M, d] with ``b`` [d]: dot product or cosine -> [M]."""
    a, b = a.double(), b.double()
    dots = a @ b
    if kind == "dot":
        return dots
    return dots / (a.norm(dim=-1) * b.norm()).clamp(min=EPS)


def match_scores(context: torch.Tensor, choices: torch.Tensor, scheme: Scheme) -> list[float]:
    """Score of each choice vector [C, d] against the context vectors [M, d]."""
    kind = scheme.similarity or DEFAULT_SIMILARITY
    out = []
    for c in choices:
        if scheme.example_agg == "soft_cluster":
            out.append(float(similarity(soft_cluster(context, c)[None], c, kind)[0]))
        else:
            out.append(float(similarity(context, c, kind).max()))
    return out


def similarity_scores(
    view: ModelView,
    scheme: Scheme,
    prepared: Sequence[Prepared],
    *,
    batch_tokens: int = BATCH_TOKENS,
    progress: Callable[[int], None] | None = None,
    reuse: Reuse | None = None,
) -> list[tuple[float, ...]]:
    """Per item, the similarity score of each choice (the highest is the prediction).

    ``progress`` hears the items done; ``reuse`` answers encodings made before in the run.
    """
    scheme = scheme.validate()
    layer = resolve_layer(scheme.layer, view.n_layers)
    out_layer = resolve_layer(scheme.out_layer or "E", view.n_layers)
    act = scheme_activation(view, scheme)
    out_agg = scheme.out_word_agg or "mean"
    out: list[tuple[float, ...]] = []
    for run in item_chunks(len(prepared)):
        chunk = [prepared[i] for i in run]
        spans = [
            segments_for(view, scheme, p.enc, p.prompt.blocks, p.prompt.completions) for p in chunk
        ]
        vecs = segment_token_vectors(
            view, scheme, layer, [p.enc for p in chunk], spans, batch_tokens, reuse
        )
        conts = [c for p in chunk for c in p.enc.continuations]
        cvecs = iter(layer_vectors(view, conts, out_layer, batch_tokens, reuse))
        for p, v in zip(chunk, vecs, strict=True):
            ctx = aggregate_context(scheme, v, act)
            choice = torch.stack(
                [
                    normalise(word_aggregate(next(cvecs), out_agg, act), scheme.norm)
                    for _ in p.enc.continuations
                ]
            )
            out.append(tuple(match_scores(ctx, choice, scheme)))
        if progress is not None:
            progress(len(chunk))
    return out
