"""Contexts as segments of tokens, and the vectors of the concept-space tests.

The context text (the K solved examples and the query, joined by blank lines) is
tokenised once, exactly as the baseline tokenises it; segments are runs of those tokens
(a token belongs to the block and sentence holding its first non-space character), so
the segments of a context always concatenate to the baseline's context tokens.

On an encoder-decoder the vectors come from the encoder stack (its hidden-state layers,
0 = the encoder's input embedding); the context tokens there end with the tokenizer's
special tokens (T5's ``</s>``), which join the last segment.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from geomlens.capture.hooks import hidden_states
from geomlens.concepts.aggregate import group_aggregate, normalise, word_aggregate
from geomlens.concepts.baseline import BATCH_TOKENS, Encoded, batches, embed_ids, prefix_token
from geomlens.concepts.schemes import Scheme
from geomlens.concepts.tasks import FEWSHOT_DELIMITER
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


def token_segments(
    view: ModelView, enc: Encoded, blocks: Sequence[str], by_sentence: bool
) -> list[list[Span]]:
    """Token spans per block: one span per block, or one per sentence of each block."""
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
    char_blocks = block_ranges(blocks, len(text))
    pieces: list[tuple[int, int]] = []  # (block, char start) of each segment
    for k, (s, e) in enumerate(char_blocks):
        ranges = sentence_ranges(text, s, e) if by_sentence else [(s, e)]
        pieces.extend((k, a) for a, _ in ranges)
    starts = [a for _, a in pieces]
    seg_of: list[int] = []
    for a, b in offsets:
        p = _anchor(text, a, b)
        seg = 0
        while seg + 1 < len(starts) and starts[seg + 1] <= p:
            seg += 1
        seg_of.append(max(seg, seg_of[-1] if seg_of else 0))
    result: list[list[Span]] = [[] for _ in char_blocks]
    t = 0
    while t < n:
        u = t
        while u < n and seg_of[u] == seg_of[t]:
            u += 1
        result[pieces[seg_of[t]][0]].append((t, u))
        t = u
    return [spans for spans in result if spans]


def segments_for(
    view: ModelView, scheme: Scheme, enc: Encoded, blocks: Sequence[str]
) -> list[list[Span]]:
    """Token spans per block for the scheme's segmentation."""
    if scheme.segment == "concat_all_examples":
        return [[(0, len(enc.context))]]
    if scheme.segment in ("segment_tokens", "concat_tokens"):
        spans = token_segments(view, enc, blocks, by_sentence=False)
        return [[(t, t + 1) for a, b in block for t in range(a, b)] for block in spans]
    return token_segments(view, enc, blocks, by_sentence=scheme.segment == "segment_sentences")


def layer_vectors(
    view: ModelView, seqs: Sequence[Sequence[int]], layer: int, batch_tokens: int = BATCH_TOKENS
) -> list[torch.Tensor]:
    """Hidden vectors [n_i, d] of each token sequence encoded on its own at ``layer``.

    Layer 0 is the model's input embedding of the tokens; layer l >= 1 is block l's
    output (no final norm). Sequences are right-padded in length-sorted batches (the
    model is causal, so padding after a sequence does not change its vectors; an
    encoder-decoder's encoder is not causal, so it gets an attention mask).
    """
    if layer == 0:
        return [embed_ids(view, torch.tensor(list(s), dtype=torch.long)) for s in seqs]
    out: list[torch.Tensor] = [torch.empty(0)] * len(seqs)
    pad = prefix_token(view)
    for group in batches([len(s) for s in seqs], batch_tokens):
        width = len(seqs[group[0]])
        ids = torch.full((len(group), width), pad, dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for r, i in enumerate(group):
            ids[r, : len(seqs[i])] = torch.tensor(list(seqs[i]), dtype=torch.long)
            mask[r, : len(seqs[i])] = 1
        h = hidden_states(view, ids, [layer], mask if view.is_seq2seq else None)[layer]
        for r, i in enumerate(group):
            out[i] = h[r, : len(seqs[i])]
    return out


def segment_token_vectors(
    view: ModelView,
    scheme: Scheme,
    layer: int,
    encoded: Sequence[Encoded],
    spans: Sequence[list[list[Span]]],
    batch_tokens: int = BATCH_TOKENS,
) -> list[list[list[torch.Tensor]]]:
    """Token vectors of every segment of every item: [item][block][segment] -> [n, d]."""
    concat = scheme.segment.startswith("concat_")
    if concat:
        whole = layer_vectors(view, [e.context for e in encoded], layer, batch_tokens)
        return [
            [[whole[i][a:b] for a, b in block] for block in spans[i]] for i in range(len(encoded))
        ]
    flat: list[Sequence[int]] = []
    for e, item_spans in zip(encoded, spans, strict=True):
        for block in item_spans:
            flat.extend(e.context[a:b] for a, b in block)
    vecs = iter(layer_vectors(view, flat, layer, batch_tokens))
    return [[[next(vecs) for _ in block] for block in item_spans] for item_spans in spans]


def aggregate_context(scheme: Scheme, token_vecs: list[list[torch.Tensor]]) -> torch.Tensor:
    """WORD_AGG and NORM per segment, SEGMENT_AGG per block, EXAMPLE_AGG over blocks.

    Returns:
        [M, d] the vectors kept (M = 1 when everything is averaged). With EXAMPLE_AGG
        "soft_cluster" the vectors before it are returned (weighted later per choice).
    """
    per_block = []
    for block in token_vecs:
        segs = torch.stack(
            [normalise(word_aggregate(x, scheme.word_agg), scheme.norm) for x in block]
        )
        per_block.append(group_aggregate(segs, scheme.segment_agg))
    kept = torch.cat(per_block)
    if scheme.example_agg == "mean":
        return kept.mean(dim=0, keepdim=True)
    return kept
