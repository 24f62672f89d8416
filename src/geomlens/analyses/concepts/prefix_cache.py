"""Choices scored behind a prefix that goes through the model once, its key/value cache kept.

Decoder-only models: a batch of rows (each a prefix of ids or vectors and its
continuations) runs in two passes. The *prefix pass* reads every row's prefix alone,
right-padded (a causal model never reads what follows a token), and keeps each layer's
keys and values. The *choice pass* then reads each row's continuation tokens (all but the
last of each choice, the choices one after another in their own attention blocks) against
that cache: a choice token attends to its row's real prefix tokens and to the earlier
tokens of its own choice, its position continuing from the end of the prefix. A choice's
first token is scored from the prefix pass's last hidden state, the others from the
choice pass. The prefix pass can also record hidden states at chosen layers, which the
``concat_*`` schemes read (``baseline.score_rows``'s ``record``).

Encoder-decoders: the encoder reads each row's prefix once; the decoder reads its start
token once per row, keeping its self-attention cache and the cross-attention's keys and
values of the encoder output; every choice then reads its tokens against a copy of its
row's cache, so the encoder output is projected once per row instead of once per choice.

Both are checked against the uncached computation (one sequence per choice) before the
first batch of a model (``baseline.scoring_mode``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

from geomlens.analyses.concepts.rows import Row, embed_ids, encoder_memory, target_logprobs
from geomlens.capturing.hooks import recording
from geomlens.models.view import ModelView, encoder_output


def cache_keyword(module: torch.nn.Module) -> str:
    """The forward's name for the KV cache (``cache`` in recent transformers releases)."""
    params = inspect.signature(module.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def returned_cache(out: Any) -> Any:
    """The cache a forward returned, under either name."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def cache_tensors(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each layer's (keys, values) [B, H_kv, S, d_head] of a ``DynamicCache``."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        return [(layer.keys, layer.values) for layer in layers]
    return list(zip(cache.key_cache, cache.value_cache, strict=True))


def dynamic_cache(tensors: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> Any:
    """A new ``DynamicCache`` holding ``tensors`` (the tensors are not modified by use:
    each update concatenates into new ones)."""
    from transformers import DynamicCache

    return DynamicCache(list(tensors))


def pad_embedding(view: ModelView, pad: int) -> torch.Tensor:
    """The model's input embedding [d] of the padding token."""
    return embed_ids(view, torch.tensor([pad], dtype=torch.long))[0]


def prefix_embeds(view: ModelView, rows: Sequence[Row], pad: int) -> torch.Tensor:
    """[B, P, d] every row's prefix as input vectors, right-padded with the padding token's
    embedding (rows of ids: exactly what the model's own embedding of the padded ids is)."""
    width = max(r.n_prefix for r in rows)
    if all(r.is_ids for r in rows):
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        for b, row in enumerate(rows):
            ids[b, : row.n_prefix] = row.prefix
        return embed_ids(view, ids)
    out = pad_embedding(view, pad).expand(len(rows), width, -1).clone()
    for b, row in enumerate(rows):
        if row.is_ids:
            out[b, : row.n_prefix] = embed_ids(view, row.prefix)
        else:
            out[b, : row.n_prefix] = row.prefix.to(view.device, dtype=out.dtype)
    return out


def prefix_pass(
    view: ModelView,
    rows: Sequence[Row],
    pad: int,
    layers: Sequence[int] = (),
    keep_cache: bool = True,
) -> tuple[torch.Tensor, Any, dict[int, torch.Tensor]]:
    """The rows' prefixes alone, right-padded, as one batch.

    Returns:
        (final hidden states [B, P, d], the KV cache (None unless ``keep_cache``),
        layer -> [B, P, d] hidden states at ``layers``).
    """
    embeds = prefix_embeds(view, rows, pad)
    hooks: AbstractContextManager[dict[int, torch.Tensor]] = (
        recording(view, layers, stop=False) if layers else nullcontext({})
    )
    with torch.inference_mode(), hooks as record:
        out = view.base(inputs_embeds=embeds, use_cache=keep_cache)
    cache = returned_cache(out) if keep_cache else None
    return out.last_hidden_state, cache, {l: record[l] for l in layers}


@dataclass(frozen=True)
class ChoiceBlock:
    """The choice pass of a batch: inputs, positions, mask and where each target is.

    Attributes:
        embeds: [B, Q, d] continuation tokens (all but each choice's last), packed per row.
        positions: [B, Q] position ids, continuing from each row's prefix.
        mask: [B, 1, Q, P + Q] additive mask over the cached prefix and the packed tokens.
        targets: (row, query index or -1 for the prefix's last token, token, choice).
    """

    embeds: torch.Tensor
    positions: torch.Tensor
    mask: torch.Tensor
    targets: list[tuple[int, int, int, int]]


def choice_block(view: ModelView, rows: Sequence[Row], width: int, pad: int) -> ChoiceBlock:
    """The packed continuation tokens of ``rows`` against a prefix cache ``width`` wide."""
    dtype = view.W_E.dtype
    q_len = max(1, max(sum(len(c) - 1 for c in r.continuations) for r in rows))
    ids = torch.full((len(rows), q_len), pad, dtype=torch.long)
    block = torch.full((len(rows), q_len), -1, dtype=torch.long)
    pos = torch.zeros(len(rows), q_len, dtype=torch.long)
    targets: list[tuple[int, int, int, int]] = []
    for b, row in enumerate(rows):
        p, at = row.n_prefix, 0
        for j, cont in enumerate(row.continuations):
            targets.append((b, -1, cont[0], j))
            n = len(cont) - 1
            if n:
                ids[b, at : at + n] = torch.tensor(cont[:-1], dtype=torch.long)
                block[b, at : at + n] = j
                pos[b, at : at + n] = torch.arange(p, p + n)
                targets.extend((b, at + o, cont[o + 1], j) for o in range(n))
            at += n
    lengths = torch.tensor([r.n_prefix for r in rows])
    keys = torch.arange(width)
    on_prefix = (keys[None, :] < lengths[:, None])[:, None, :].expand(-1, q_len, -1)
    q = torch.arange(q_len)
    causal = q[None, :] <= q[:, None]
    same = (block[:, None, :] == block[:, :, None]) & (block[:, :, None] >= 0)
    own = causal[None] & same
    own |= torch.eye(q_len, dtype=torch.bool)[None]  # padding rows see themselves (no NaN)
    on_prefix = on_prefix & (block[:, :, None] >= 0)
    allowed = torch.cat([on_prefix, own], dim=-1)
    mask = torch.zeros(allowed.shape, dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return ChoiceBlock(embed_ids(view, ids), pos, mask[:, None], targets)


def cached_batch(
    view: ModelView,
    rows: Sequence[Row],
    pad: int,
    layers: Sequence[int] = (),
    on_record: Callable[[dict[int, torch.Tensor]], None] | None = None,
) -> list[list[float]]:
    """Score rows (decoder-only): the prefixes once with their KV cache, then the choices.

    ``on_record`` receives the prefix pass's hidden states at ``layers`` (layer -> [B, P, d]).
    """
    needs_choices = any(len(c) > 1 for r in rows for c in r.continuations)
    final, cache, record = prefix_pass(view, rows, pad, layers, keep_cache=needs_choices)
    if on_record is not None:
        on_record(record)
    width = final.shape[1]
    blk = choice_block(view, rows, width, pad)
    hidden = None
    if needs_choices:
        kwargs = {
            "inputs_embeds": blk.embeds,
            "attention_mask": blk.mask.to(view.device),
            "position_ids": blk.positions.to(view.device),
            "use_cache": True,
            cache_keyword(view.base): dynamic_cache(cache_tensors(cache)),
        }
        with torch.inference_mode():
            hidden = view.base(**kwargs).last_hidden_state
    last = torch.tensor([r.n_prefix - 1 for r in rows])
    with torch.inference_mode():
        vecs = torch.stack(
            [
                final[b, int(last[b])] if t < 0 else hidden[b, t]  # type: ignore[index]
                for b, t, _, _ in blk.targets
            ]
        )
        tok = torch.tensor([tok for _, _, tok, _ in blk.targets])
        picked = target_logprobs(view, vecs, tok).numpy()
    out = [[0.0] * len(r.continuations) for r in rows]
    for (b, _, _, j), v in zip(blk.targets, picked, strict=True):
        out[b][j] += float(v)
    return out


def _index_cache(
    tensors: Sequence[tuple[torch.Tensor, torch.Tensor]], owner: torch.Tensor
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(k[owner], v[owner]) for k, v in tensors]


def seq2seq_cached_batch(view: ModelView, rows: Sequence[Row]) -> list[list[float]]:
    """Score rows on an encoder-decoder: the encoder and the decoder's start token once per
    row (its self-attention cache and the cross-attention's keys and values kept), then
    every choice's tokens against a copy of its row's cache."""
    from transformers import EncoderDecoderCache

    model: Any = view.model
    memory, mask = encoder_memory(view, rows)
    start = torch.full((len(rows), 1), view.decoder_start(), dtype=torch.long)
    key = cache_keyword(model)
    with torch.inference_mode():
        first = model(
            encoder_outputs=encoder_output(memory),
            attention_mask=mask,
            decoder_input_ids=start.to(view.device),
            use_cache=True,
        )
        lp0 = torch.log_softmax(first.logits[:, 0].float(), dim=-1)
    out = [[float(lp0[b, c[0]].double()) for c in r.continuations] for b, r in enumerate(rows)]
    pairs = [
        (b, j, c) for b, r in enumerate(rows) for j, c in enumerate(r.continuations) if len(c) > 1
    ]
    if not pairs:
        return out
    cache = returned_cache(first)
    width = max(len(c) - 1 for _, _, c in pairs)
    dec = torch.zeros((len(pairs), width), dtype=torch.long)
    for i, (_, _, cont) in enumerate(pairs):
        dec[i, : len(cont) - 1] = torch.tensor(cont[:-1], dtype=torch.long)
    owner = torch.tensor([b for b, _, _ in pairs], device=view.device)
    copy = EncoderDecoderCache(
        dynamic_cache(_index_cache(cache_tensors(cache.self_attention_cache), owner)),
        dynamic_cache(_index_cache(cache_tensors(cache.cross_attention_cache), owner)),
    )
    with torch.inference_mode():
        logits = model(
            encoder_outputs=encoder_output(memory[owner]),
            attention_mask=mask[owner],
            decoder_input_ids=dec.to(view.device),
            use_cache=True,
            **{key: copy},
        ).logits
        lp = torch.log_softmax(logits.float(), dim=-1)
    for i, (b, j, cont) in enumerate(pairs):
        tok = torch.tensor(cont[1:], device=lp.device)
        out[b][j] += float(lp[i, : len(cont) - 1].gather(1, tok[:, None]).double().sum())
    return out
