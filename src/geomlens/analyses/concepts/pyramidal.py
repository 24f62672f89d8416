"""Test 1, pyramidal generation: the context as aggregated vectors, then the choice's tokens.

Each item's context is split into segments, each segment is encoded and aggregated into
one vector (see ``encode``), and the resulting vectors followed by the choice's token
embeddings are fed to the model as ``inputs_embeds``; the choice's log-likelihood picks
the answer, exactly as in the baseline. With one-token segments at layer E and no
aggregation the vectors are the context's own token embeddings, and test 1 reproduces
the baseline.

On an encoder-decoder the vectors come from the encoder and go where ``feed`` says:
"encoder" (the encoder's ``inputs_embeds`` in place of the context's token embeddings;
the decoder reads the encoder's output as usual) or "decoder" (through the encoder's
final norm, they are the encoder output the decoder cross-attends to; the encoder is
skipped). The decoder then scores each choice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from geomlens.analyses.concepts.baseline import (
    BATCH_TOKENS,
    ChoiceScores,
    Prepared,
    Row,
    check_feed,
    choice_scores,
    item_chunks,
    score_rows,
)
from geomlens.analyses.concepts.encode import (
    aggregate_context,
    scheme_activation,
    segment_token_vectors,
    segments_for,
)
from geomlens.analyses.concepts.reuse import Reuse
from geomlens.analyses.concepts.schemes import Scheme, resolve_layer
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView


def context_row(view: ModelView, vectors: torch.Tensor, prepared: Prepared, feed: str) -> Row:
    """The scored row of one item: its concept vectors [M, d] and its continuations.

    With ``feed="decoder"`` (encoder-decoders) the vectors pass through the encoder's final
    norm and are marked as the encoder output.
    """
    if feed != "decoder":
        return Row(vectors, prepared.enc.continuations)
    norm = view.encoder_final_norm
    if norm is None:
        raise GeomlensError(f"{view.name} has no encoder final norm to feed the decoder with.")
    with torch.inference_mode():
        memory = norm(vectors.to(view.device, dtype=view.W_E.dtype))
    return Row(memory, prepared.enc.continuations, encoder_output=True)


def pyramidal_scores(
    view: ModelView,
    scheme: Scheme,
    prepared: Sequence[Prepared],
    *,
    batch_tokens: int = BATCH_TOKENS,
    progress: Callable[[int], None] | None = None,
    feed: str = "encoder",
    reuse: Reuse | None = None,
) -> list[ChoiceScores]:
    """Per item, the log-likelihood of each choice after the context's concept vectors.

    ``feed`` (encoder-decoders): "encoder" or "decoder", see the module docstring.
    ``progress`` hears the items scored after each batch; ``reuse`` answers encodings and
    scorings made before in the run (the baseline's context pass, another scheme's).
    """
    check_feed(view, feed)
    scheme = scheme.validate()
    layer = resolve_layer(scheme.layer, view.n_layers)
    act = scheme_activation(view, scheme)
    out: list[ChoiceScores] = []
    for run in item_chunks(len(prepared)):
        chunk = [prepared[i] for i in run]
        spans = [
            segments_for(view, scheme, p.enc, p.prompt.blocks, p.prompt.completions) for p in chunk
        ]
        vecs = segment_token_vectors(
            view, scheme, layer, [p.enc for p in chunk], spans, batch_tokens, reuse
        )
        rows = [
            context_row(view, aggregate_context(scheme, v, act), p, feed)
            for p, v in zip(chunk, vecs, strict=True)
        ]
        ll = score_rows(view, rows, batch_tokens=batch_tokens, progress=progress, reuse=reuse)
        out.extend(choice_scores(p.item.choices, s) for p, s in zip(chunk, ll, strict=True))
    return out
