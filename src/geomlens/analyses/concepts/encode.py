"""Contexts as segments of tokens, and the vectors of the concept-space tests.

The context text (the K solved examples and the query, joined by blank lines) is
tokenised once, exactly as the baseline tokenises it; segments are runs of those tokens
(a token belongs to the block and sentence holding its first non-space character), so
the segments of a context always concatenate to the baseline's context tokens.

On an encoder-decoder the vectors come from the encoder stack (its hidden-state layers,
0 = the input of the encoder's first block); the context tokens there end with the
tokenizer's special tokens (T5's ``</s>``), which join the last segment.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import torch
from transformers.activations import ACT2FN

from geomlens.analyses.concepts.aggregate import (
    Activation,
    group_aggregate,
    needs_activation,
    normalise,
    word_aggregate,
)
from geomlens.analyses.concepts.reuse import Reuse, sequences_key
from geomlens.analyses.concepts.rows import BATCH_TOKENS, Encoded, batches, embed_ids, pad_token
from geomlens.analyses.concepts.schemes import LayerRef, Scheme
from geomlens.analyses.concepts.tasks import FEWSHOT_DELIMITER
from geomlens.capturing.hooks import hidden_states
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView

Span = tuple[int, int]
SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*\s+|\n+")


def block_ranges(blocks: Sequence[str], text_len: int) -> list[Span]:
    """Character ranges of the blocks in the joined text (a delimiter joins the block before)."""
    starts = [0]
    for b in blocks[:-1]:
        starts.append(starts[-1] + len(b) + len(FEWSHOT_DELIMITER))
    ends = starts[1:] + [text_len]
    return [(s, max(s, e)) for s, e in zip(starts, ends, strict=True)]


def sentence_ranges(text: str, start: int, end: int) -> list[Span]:
    """Sentence ranges inside ``text[start:end]``: ends after . ! ? (and quotes) or newlines."""
    cuts = [start]
    for m in SENTENCE_END.finditer(text, start, end):
        if start < m.end() < end:
            cuts.append(m.end())
    cuts.append(end)
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True) if b > a]


def _anchor(text: str, a: int, b: int) -> int:
    """The first non-space character of a token's span (its start if all space)."""
    for i in range(a, min(b, len(text))):
        if not text[i].isspace():
            return i
    return a


def passage_ranges(block: str, completion: str, start: int, end: int) -> list[Span]:
    """An example block's context passage and completion passage (the completion is the
    block's tail); one range when there is no completion (the query) or it is unknown."""
    if not completion or not block.endswith(completion) or len(completion) >= len(block):
        return [(start, end)]
    cut = start + len(block) - len(completion)
    return [(start, cut), (cut, end)]


def _pieces(
    text: str, blocks: Sequence[str], mode: str, completions: Sequence[str]
) -> list[tuple[int, int]]:
    """(block, character start) of every segment: per block, sentence or passage."""
    pieces: list[tuple[int, int]] = []
    for k, (s, e) in enumerate(block_ranges(blocks, len(text))):
        if mode == "sentence":
            ranges = sentence_ranges(text, s, e)
        elif mode == "passage":
            done = completions[k] if k < len(completions) else ""
            ranges = passage_ranges(blocks[k], done, s, e)
        else:
            ranges = [(s, e)]
        pieces.extend((k, a) for a, _ in ranges)
    return pieces


def token_segments(
    view: ModelView,
    enc: Encoded,
    blocks: Sequence[str],
    mode: str = "block",
    completions: Sequence[str] = (),
) -> list[list[Span]]:
    """Token spans per block: one span per block ("block"), one per sentence of each block
    ("sentence"), or an example's context and completion passages ("passage")."""
    text = enc.context_text
    n = len(enc.context)
    special = view.is_seq2seq  # an encoder-decoder's context keeps its special tokens
    try:
        out = view.tokenizer(text, add_special_tokens=special, return_offsets_mapping=True)
        offsets = list(out["offset_mapping"])
        ids = list(out["input_ids"])
    except (NotImplementedError, KeyError, TypeError, ValueError):
        offsets, ids = [], []
    if not text or ids != list(enc.context) or len(offsets) != n:
        return [[(0, n)]]  # no offsets (or an empty context): one block, one segment
    pieces = _pieces(text, blocks, mode, completions)  # (block, char start) per segment
    starts = [a for _, a in pieces]
    seg_of: list[int] = []
    for a, b in offsets:
        p = _anchor(text, a, b)
        seg = 0
        while seg + 1 < len(starts) and starts[seg + 1] <= p:
            seg += 1
        seg_of.append(max(seg, seg_of[-1] if seg_of else 0))
    result: list[list[Span]] = [[] for _ in blocks]
    t = 0
    while t < n:
        u = t
        while u < n and seg_of[u] == seg_of[t]:
            u += 1
        result[pieces[seg_of[t]][0]].append((t, u))
        t = u
    return [spans for spans in result if spans]


def segments_for(
    view: ModelView,
    scheme: Scheme,
    enc: Encoded,
    blocks: Sequence[str],
    completions: Sequence[str] = (),
) -> list[list[Span]]:
    """Token spans per block for the scheme's segmentation.

    ``completions``: each block's completion passage (``Prompt.completions``), which
    ``segment_each_example`` cuts off; without it every block is one passage.
    """
    if scheme.segment == "concat_all_examples":
        return [[(0, len(enc.context))]]
    if scheme.segment in ("segment_tokens", "concat_tokens"):
        spans = token_segments(view, enc, blocks)
        return [[(t, t + 1) for a, b in block for t in range(a, b)] for block in spans]
    mode = {"segment_sentences": "sentence", "segment_each_example": "passage"}
    return token_segments(view, enc, blocks, mode.get(scheme.segment, "block"), completions)


def model_activation(view: ModelView) -> Activation:
    """The model's own FFN activation (ReLU, GELU, SiLU, ...), as its MLP view names it.

    Gated MLPs apply it to the gate; a T5 stack's is its ``dense_act_fn``.
    """
    names = {block.mlp().activation for block in view.blocks}
    if len(names) != 1:
        raise GeomlensError(
            f"{view.name}'s blocks use different FFN activations ({', '.join(sorted(names))}); "
            "a relu filter needs one."
        )
    return ACT2FN[names.pop()]


def scheme_activation(view: ModelView, scheme: Scheme) -> Activation | None:
    """The model's FFN activation when the scheme's WORD_AGG (or OUT_WORD_AGG) needs it."""
    if needs_activation(scheme.word_agg) or needs_activation(scheme.out_word_agg):
        return model_activation(view)
    return None


def layer_vectors(
    view: ModelView,
    seqs: Sequence[Sequence[int]],
    layer: LayerRef,
    batch_tokens: int = BATCH_TOKENS,
    reuse: Reuse | None = None,
) -> list[torch.Tensor]:
    """Vectors [n_i, d] of each token sequence encoded on its own at ``layer``.

    ``E`` is the model's input embedding of the tokens; hidden-state layer 0 is the input
    of the first block (with learned absolute positions added); layer l >= 1 is block l's
    output; at the top (``final_norm``) the final norm is applied (the encoder's on an
    encoder-decoder). Sequences are right-padded in length-sorted batches (the model is
    causal, so padding after a sequence does not change its vectors; an encoder-decoder's
    encoder is not causal, so it gets an attention mask). ``reuse`` answers a call made
    before in this run (or a baseline pass that recorded these sequences, see
    ``vectors_key``) and keeps this one's vectors.
    """
    if layer.embedding:
        return [embed_ids(view, torch.tensor(list(s), dtype=torch.long)) for s in seqs]
    key = vectors_key(seqs, layer, batch_tokens)
    found = reuse.get_vectors(key) if reuse is not None else None
    if found is not None:
        return found
    out: list[torch.Tensor] = [torch.empty(0)] * len(seqs)
    pad = pad_token(view)
    for group in batches([len(s) for s in seqs], batch_tokens):
        width = len(seqs[group[0]])
        ids = torch.full((len(group), width), pad, dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for r, i in enumerate(group):
            ids[r, : len(seqs[i])] = torch.tensor(list(seqs[i]), dtype=torch.long)
            mask[r, : len(seqs[i])] = 1
        h = hidden_states(view, ids, [layer.index], mask if view.is_seq2seq else None)[layer.index]
        place_vectors(view, out, group, [len(seqs[i]) for i in group], h, layer)
    if reuse is not None:
        reuse.put_vectors(key, out)
    return out


def vectors_key(seqs: Sequence[Sequence[int]], layer: LayerRef, batch_tokens: int) -> bytes:
    """What ``layer_vectors(view, seqs, layer, batch_tokens)`` computes, as a digest."""
    return sequences_key(seqs, f"{layer.index}|{layer.final_norm}", str(batch_tokens))


def place_vectors(
    view: ModelView,
    out: list[torch.Tensor],
    group: Sequence[int],
    lengths: Sequence[int],
    hidden: torch.Tensor,
    layer: LayerRef,
) -> None:
    """Each sequence's vectors from a padded batch's hidden states [B, W, d] at ``layer``
    (through the final norm at the top), into ``out`` at the batch's indices."""
    if layer.final_norm:
        hidden = _top(view, hidden)
    for r, (i, n) in enumerate(zip(group, lengths, strict=True)):
        out[i] = hidden[r, :n]


def context_recorder(
    view: ModelView,
    contexts: Sequence[Sequence[int]],
    layers: Sequence[LayerRef],
    batch_tokens: int,
    reuse: Reuse,
) -> tuple[list[int], Callable[[list[int], dict[int, torch.Tensor]], None], Callable[[], None]]:
    """Hidden states of a decoder's context pass (``baseline.score_rows``'s ``record``)
    kept in ``reuse`` as ``layer_vectors(view, contexts, layer, batch_tokens)`` of each
    layer. The baseline's cached scoring batches the contexts as ``layer_vectors`` does
    and reads them through the same model call, so what it records equals what those
    calls compute.

    Returns:
        (hidden-state layers to record, the per-batch callback, a function that files what
        was recorded into ``reuse`` once every batch has run).
    """
    wanted = [ref for ref in layers if not ref.embedding]
    kept = {(ref.index, ref.final_norm): [torch.empty(0)] * len(contexts) for ref in wanted}
    filled: set[int] = set()

    def on_group(group: list[int], record: dict[int, torch.Tensor]) -> None:
        lengths = [len(contexts[i]) for i in group]
        for ref in wanted:
            vecs = kept[(ref.index, ref.final_norm)]
            place_vectors(view, vecs, group, lengths, record[ref.index], ref)
        filled.update(group)

    def file() -> None:
        if len(filled) != len(contexts):
            return
        for ref in wanted:
            vecs = [v.clone() for v in kept[(ref.index, ref.final_norm)]]
            reuse.put_vectors(vectors_key(contexts, ref, batch_tokens), vecs)

    return sorted({ref.index for ref in wanted}), on_group, file


def _top(view: ModelView, h: torch.Tensor) -> torch.Tensor:
    """The last block's output through the stack's final norm (the top of the stack)."""
    norm = view.readout_norm
    if norm is None:
        raise GeomlensError(f"{view.name} has no final norm to read the top of its stack.")
    with torch.inference_mode():
        return norm(h.to(view.W_E.dtype))


def segment_token_vectors(
    view: ModelView,
    scheme: Scheme,
    layer: LayerRef,
    encoded: Sequence[Encoded],
    spans: Sequence[list[list[Span]]],
    batch_tokens: int = BATCH_TOKENS,
    reuse: Reuse | None = None,
) -> list[list[list[torch.Tensor]]]:
    """Token vectors of every segment of every item: [item][block][segment] -> [n, d]."""
    concat = scheme.segment.startswith("concat_")
    if concat:
        contexts = [e.context for e in encoded]
        whole = layer_vectors(view, contexts, layer, batch_tokens, reuse)
        return [
            [[whole[i][a:b] for a, b in block] for block in spans[i]] for i in range(len(encoded))
        ]
    flat: list[Sequence[int]] = []
    for e, item_spans in zip(encoded, spans, strict=True):
        for block in item_spans:
            flat.extend(e.context[a:b] for a, b in block)
    vecs = iter(layer_vectors(view, flat, layer, batch_tokens, reuse))
    return [[[next(vecs) for _ in block] for block in item_spans] for item_spans in spans]


def aggregate_context(
    scheme: Scheme, token_vecs: list[list[torch.Tensor]], act: Activation | None = None
) -> torch.Tensor:
    """WORD_AGG and NORM per segment, SEGMENT_AGG per block, EXAMPLE_AGG over blocks.

    ``act``: the model's FFN activation, for the relu filters (``scheme_activation``).
    SEGMENT_AGG "merge_all_segments" averages the segment vectors of every block into one.

    Returns:
        [M, d] the vectors kept (M = 1 when everything is averaged). With EXAMPLE_AGG
        "soft_cluster" the vectors before it are returned (weighted later per choice).
    """
    per_block = []
    for block in token_vecs:
        segs = torch.stack(
            [normalise(word_aggregate(x, scheme.word_agg, act), scheme.norm) for x in block]
        )
        per_block.append(segs)
    if scheme.segment_agg == "merge_all_segments":
        return torch.cat(per_block).mean(dim=0, keepdim=True)
    kept = torch.cat([group_aggregate(segs, scheme.segment_agg) for segs in per_block])
    if scheme.example_agg == "mean":
        return kept.mean(dim=0, keepdim=True)
    return kept
