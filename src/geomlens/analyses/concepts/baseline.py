"""Log-likelihood of answer choices, batched, compatible with lm-evaluation-harness.

A request is a context and a continuation (" " + choice, with the context's trailing
whitespace moved to its front), tokenised as lm-evaluation-harness's Hugging Face model
does: the context alone, the continuation as the tokens of context + continuation after
the context's. All choices of an item share their context, so they are scored in one
packed sequence: the context once, then each choice's tokens, each choice attending to the
context and to itself only (a block mask, positions restarting after the context). Rows are
sorted by length and batched by a token budget. A model that cannot take a custom mask and
positions falls back to one sequence per choice; a one-row self-check decides.

Prefixes may be token ids or vectors (``inputs_embeds``): the same scorer serves the
baseline and pyramidal generation.

Encoder-decoders (T5) follow lm-evaluation-harness's seq2seq model instead: the context is
tokenised with the tokenizer's special tokens (T5 appends ``</s>``), each continuation on
its own without them; the encoder reads the context once per item, the decoder reads
``decoder_start + continuation[:-1]`` for every choice (Hugging Face's shift of
``labels``), and a choice's score is the summed log-probability of its tokens. A prefix
may also be the encoder output itself (``Row.encoder_output``), which skips the encoder.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from geomlens.analyses.concepts.encode import context_recorder
from geomlens.analyses.concepts.prefix_cache import cached_batch, seq2seq_cached_batch
from geomlens.analyses.concepts.reuse import Reuse, digest, tensor_bytes
from geomlens.analyses.concepts.rows import (
    BATCH_TOKENS,
    Encoded,
    Row,
    batches,
    embed_ids,
    encoder_memory,
    pad_token,
    prefix_token,
    prefix_vectors,
    target_logprobs,
)
from geomlens.analyses.concepts.rows import (
    MAX_ROWS as MAX_ROWS,
)
from geomlens.analyses.concepts.rows import (
    head_logprobs as head_logprobs,
)
from geomlens.analyses.concepts.schemes import LayerRef
from geomlens.analyses.concepts.tasks import TARGET_DELIMITER, Item, Prompt, Task, build_prompt
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView, encoder_output
from geomlens.stats.finite import require_finite

PACK_TOLERANCE = 1e-3
_PACKING: dict[int, bool] = {}
FEEDS = ("encoder", "decoder")  # where an encoder-decoder reads the concept vectors


def check_decoder(view: ModelView) -> None:
    """Refuse encoder-only models (BERT, MiniLM): nothing in them scores a continuation.

    Decoder-only models and encoder-decoders (whose main stack is the encoder, with a
    decoder that scores continuations) are accepted.
    """
    if view.is_encoder and not getattr(view, "is_seq2seq", False):
        raise GeomlensError(
            f"the concept-space tests need a decoder-only or encoder-decoder language model; "
            f"{view.name} is an encoder ({view.family}) (use e.g. smollm2-135m or a T5)."
        )


def check_feed(view: ModelView, feed: str) -> None:
    """Refuse an unknown ``feed``, and ``feed="decoder"`` for a decoder-only model."""
    if feed not in FEEDS:
        raise GeomlensError(f"unknown feed {feed!r}; use one of {', '.join(FEEDS)}.")
    if feed == "decoder" and not view.is_seq2seq:
        raise GeomlensError(
            f"--feed decoder is for encoder-decoder models; {view.name} is decoder-only "
            "(drop --feed)."
        )


def tokenize(view: ModelView, text: str) -> list[int]:
    return list(view.tokenizer(text, add_special_tokens=False)["input_ids"])


def encode_requests(view: ModelView, context: str, continuations: Sequence[str]) -> Encoded:
    """Tokenise (context, continuation) requests sharing one context, as lm-eval's hf model.

    The context's trailing whitespace moves to the front of every continuation; the
    context is tokenised alone, each continuation as the tokens of context + continuation
    after the context's; an empty context becomes one beginning-of-text token.
    Encoder-decoders follow lm-eval's seq2seq convention instead (``encode_seq2seq``).
    """
    if view.is_seq2seq:
        return encode_seq2seq(view, context, continuations)
    ctx_text = context.rstrip()
    moved = context[len(ctx_text) :]
    ctx_ids = tokenize(view, ctx_text)
    conts: list[tuple[int, ...]] = []
    for cont in continuations:
        whole = tokenize(view, ctx_text + moved + cont)
        conts.append(tuple(whole[len(ctx_ids) :]))
        if not conts[-1]:
            raise GeomlensError(f"continuation {cont!r} tokenises to nothing after its context.")
    if not ctx_ids:
        ctx_ids = [prefix_token(view)]
    total = len(ctx_ids) + max(len(c) for c in conts)
    if view.n_ctx is not None and total > view.n_ctx:
        raise GeomlensError(
            f"a context with its answer has {total} tokens, more than {view.name} accepts "
            f"({view.n_ctx}); use fewer --shots or a task with shorter items."
        )
    return Encoded(tuple(ctx_ids), tuple(conts), ctx_text)


def context_tokens(view: ModelView, text: str) -> list[int]:
    """An encoder-decoder's context ids: with the tokenizer's special tokens (T5: ``</s>``),
    unless the text already starts with the prefix token's text (lm-eval's rule)."""
    tok = view.tokenizer
    special = not text.startswith(tok.decode(prefix_token(view)))
    return list(tok(text, add_special_tokens=special)["input_ids"])


def encode_seq2seq(view: ModelView, context: str, continuations: Sequence[str]) -> Encoded:
    """Requests for an encoder-decoder, tokenised as lm-eval's seq2seq model.

    The context's trailing whitespace moves to the front of every continuation; the
    context is tokenised with special tokens, each continuation on its own without them;
    an empty context becomes the prefix token. The encoder reads the context, the decoder
    the continuation, each with its own position limit (``view.n_ctx``).
    """
    ctx_text = context.rstrip()
    moved = context[len(ctx_text) :]
    conts = [tuple(tokenize(view, moved + c)) for c in continuations]
    for cont, ids in zip(continuations, conts, strict=True):
        if not ids:
            raise GeomlensError(f"continuation {cont!r} tokenises to nothing.")
    ctx_ids = context_tokens(view, ctx_text) if context else []
    if not ctx_ids:
        ctx_ids = [prefix_token(view)]
    longest = max(len(c) for c in conts)
    if view.n_ctx is not None and len(ctx_ids) > view.n_ctx:
        raise GeomlensError(
            f"a context has {len(ctx_ids)} tokens, more than {view.name}'s encoder accepts "
            f"({view.n_ctx}); use fewer --shots or a task with shorter items."
        )
    if view.n_ctx is not None and longest > view.n_ctx:
        raise GeomlensError(
            f"an answer has {longest} tokens, more than {view.name}'s decoder accepts "
            f"({view.n_ctx}); use a task with shorter answers."
        )
    return Encoded(tuple(ctx_ids), tuple(conts), ctx_text)


def encode_item(view: ModelView, context: str, choices: Sequence[str]) -> Encoded:
    """One item's requests: the context and " " + each choice (lm-evaluation-harness)."""
    return encode_requests(view, context, [TARGET_DELIMITER + c for c in choices])


def _last_hidden(view: ModelView, embeds: torch.Tensor, mask: torch.Tensor, pos: Any) -> Any:
    kwargs: dict[str, Any] = {"inputs_embeds": embeds, "attention_mask": mask, "use_cache": False}
    if pos is not None:
        kwargs["position_ids"] = pos
    return view.base(**kwargs).last_hidden_state


def _packed_batch(view: ModelView, rows: Sequence[Row]) -> list[list[float]]:
    """Score rows packed: prefix once, each continuation in its own attention block."""
    length = max(r.n_packed for r in rows)
    d = view.d_model
    dtype = view.W_E.dtype
    embeds = torch.zeros(len(rows), length, d, dtype=dtype, device=view.device)
    block = torch.full((len(rows), length), -1, dtype=torch.long)
    pos = torch.zeros(len(rows), length, dtype=torch.long)
    targets: list[tuple[int, int, int, int]] = []  # row, position, token, choice
    for b, row in enumerate(rows):
        p = row.n_prefix
        embeds[b, :p] = prefix_vectors(view, row)
        block[b, :p] = 0
        pos[b, :p] = torch.arange(p)
        at = p
        for j, cont in enumerate(row.continuations):
            targets.append((b, p - 1, cont[0], j))
            n = len(cont) - 1
            if n:
                ids = torch.tensor(cont[:-1], dtype=torch.long)
                embeds[b, at : at + n] = embed_ids(view, ids)
                block[b, at : at + n] = j + 1
                pos[b, at : at + n] = torch.arange(p, p + n)
                targets.extend((b, at + o, cont[o + 1], j) for o in range(n))
            at += n
    q = torch.arange(length)
    causal = q[None, :] <= q[:, None]
    same = (block[:, None, :] == 0) | (block[:, None, :] == block[:, :, None])
    allowed = causal[None] & same & (block[:, :, None] >= 0)
    allowed |= torch.eye(length, dtype=torch.bool)[None]
    mask = torch.zeros(allowed.shape, dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    with torch.inference_mode():
        hidden = _last_hidden(view, embeds, mask[:, None].to(view.device), pos.to(view.device))
        idx = torch.tensor([(b, t) for b, t, _, _ in targets])
        tok = torch.tensor([t for _, _, t, _ in targets])
        picked = target_logprobs(view, hidden[idx[:, 0], idx[:, 1]], tok).numpy()
    out = [[0.0] * len(r.continuations) for r in rows]
    for (b, _, _, j), v in zip(targets, picked, strict=True):
        out[b][j] += float(v)
    return out


def _plain_batch(view: ModelView, rows: Sequence[Row]) -> list[list[float]]:
    """Score each (prefix, continuation) as its own right-padded sequence."""
    seqs: list[tuple[int, int, torch.Tensor, tuple[int, ...]]] = []
    for b, row in enumerate(rows):
        pre = prefix_vectors(view, row)
        for j, cont in enumerate(row.continuations):
            tail = embed_ids(view, torch.tensor(cont[:-1], dtype=torch.long))
            seqs.append((b, j, torch.cat([pre, tail]), cont))
    length = max(s[2].shape[0] for s in seqs)
    embeds = torch.zeros(len(seqs), length, view.d_model, dtype=view.W_E.dtype, device=view.device)
    attn = torch.zeros(len(seqs), length, dtype=torch.long)
    for i, (_, _, x, _) in enumerate(seqs):
        embeds[i, : x.shape[0]] = x
        attn[i, : x.shape[0]] = 1
    out = [[0.0] * len(r.continuations) for r in rows]
    with torch.inference_mode():
        hidden = _last_hidden(view, embeds, attn.to(view.device), None)
        for i, (b, j, x, cont) in enumerate(seqs):
            start = x.shape[0] - len(cont)
            lp = target_logprobs(view, hidden[i, start : x.shape[0]], torch.tensor(cont))
            out[b][j] = float(lp.sum())
    return out


MODES = ("cached", "packed", "plain")
"""How a decoder-only model scores rows: behind a prefix KV cache (``prefix_cache``), all
choices packed behind the prefix in one pass, or one sequence per choice."""
SEQ2SEQ_MODES = ("cached", "plain")
"""How an encoder-decoder scores rows: the decoder's caches kept per row, or not."""
_MODE: dict[int, str] = {}
CHECK_PREFIX = 16
"""Prefix tokens of the row ``scoring_mode`` checks the faster scorings on."""


BatchScorer = Callable[[ModelView, Sequence[Row]], list[list[float]]]


def _batch_of(view: ModelView, mode: str) -> BatchScorer:
    pad = pad_token(view)
    if view.is_seq2seq:
        return seq2seq_cached_batch if mode == "cached" else _seq2seq_batch
    if mode == "cached":
        return lambda v, rows: cached_batch(v, rows, pad)
    return _packed_batch if mode == "packed" else _plain_batch


def sliding_window(view: ModelView) -> int | None:
    """The attention window of a model whose layers (some or all) attend locally, else None.

    Cached and packed scoring pass one attention mask for every layer, which cannot be
    local: a row longer than the window is scored one sequence per choice instead.
    """
    config = view.config
    window = getattr(config, "sliding_window", None)
    if not window or getattr(config, "use_sliding_window", True) is False:
        return None
    return int(window)


def beyond_window(view: ModelView, rows: Sequence[Row]) -> bool:
    """Whether a row (prefix and longest continuation) is longer than the model's window."""
    window = sliding_window(view)
    return window is not None and any(
        r.n_prefix + max(len(c) for c in r.continuations) > window for r in rows
    )


def scoring_mode(view: ModelView, row: Row) -> str:
    """The fastest way of scoring that matches the uncached computation on ``row``.

    Decoder-only models try the prefix cache, then packing, each against one sequence per
    choice; encoder-decoders try the cached decoder against the plain one. A model whose
    forward rejects the custom masks, positions or caches (or differs by more than
    ``PACK_TOLERANCE``) falls back. Decided once per model.
    """
    key = id(view.model)
    if key in _MODE:
        return _MODE[key]
    # What is checked is whether the model takes the masks, positions and caches, not the
    # length: the prefix's last CHECK_PREFIX tokens keep the check cheap.
    row = Row(row.prefix[-CHECK_PREFIX:], row.continuations, row.encoder_output)
    plain = (_seq2seq_batch if view.is_seq2seq else _plain_batch)(view, [row])[0]
    _MODE[key] = "plain"
    for mode in ("cached",) if view.is_seq2seq else ("cached", "packed"):
        try:
            scores = _batch_of(view, mode)(view, [row])[0]
        except (TypeError, ValueError, RuntimeError, AttributeError, IndexError, KeyError):
            continue
        if np.allclose(scores, plain, atol=PACK_TOLERANCE, rtol=1e-4):
            _MODE[key] = mode
            break
    return _MODE[key]


def packing_works(view: ModelView, row: Row) -> bool:
    """Whether a scoring faster than one sequence per choice matches it on ``row``."""
    return scoring_mode(view, row) != "plain"


def _seq2seq_batch(view: ModelView, rows: Sequence[Row]) -> list[list[float]]:
    """Score rows on an encoder-decoder: the encoder once per row, the decoder per choice.

    Every choice of every row is one decoder sequence ``start + continuation[:-1]``
    (right-padded: the decoder is causal), cross-attending to its row's encoder output.
    """
    memory, mask = encoder_memory(view, rows)
    pairs = [(b, j, c) for b, r in enumerate(rows) for j, c in enumerate(r.continuations)]
    width = max(len(c) for _, _, c in pairs)
    start = view.decoder_start()
    dec = torch.full((len(pairs), width), start, dtype=torch.long)
    for i, (_, _, cont) in enumerate(pairs):
        dec[i, 1 : len(cont)] = torch.tensor(cont[:-1], dtype=torch.long)
    owner = torch.tensor([b for b, _, _ in pairs], device=view.device)
    model: Any = view.model
    with torch.inference_mode():
        logits = model(
            encoder_outputs=encoder_output(memory[owner]),
            attention_mask=mask[owner],
            decoder_input_ids=dec.to(view.device),
            use_cache=False,
        ).logits
        lp = torch.log_softmax(logits.float(), dim=-1)
    out = [[0.0] * len(r.continuations) for r in rows]
    for i, (b, j, cont) in enumerate(pairs):
        tok = torch.tensor(cont, device=lp.device)
        out[b][j] = float(lp[i, : len(cont)].gather(1, tok[:, None]).double().sum())
    return out


def _seq2seq_size(row: Row) -> int:
    """Padded tokens a row costs on an encoder-decoder: its prefix and its choices."""
    return row.n_prefix + len(row.continuations) * max(len(c) for c in row.continuations)


def rows_key(view: ModelView, rows: Sequence[Row], mode: str, batch_tokens: int) -> bytes:
    """The digest of what ``score_rows`` computes: every row's prefix as the vectors the
    model reads (ids through its embedding: a row of ids and a row of their embeddings are
    the same computation), the continuations, the scoring mode and the batch budget."""
    parts: list[bytes | str] = [mode, str(batch_tokens)]
    for row in rows:
        vectors = prefix_vectors(view, row) if row.is_ids else row.prefix
        parts += [tensor_bytes(vectors.to(view.W_E.dtype)), str(row.encoder_output)]
        parts.append(";".join(",".join(map(str, c)) for c in row.continuations))
    return digest(parts)


def score_rows(
    view: ModelView,
    rows: Sequence[Row],
    *,
    batch_tokens: int = BATCH_TOKENS,
    pack: bool | None = None,
    mode: str | None = None,
    progress: Callable[[int], None] | None = None,
    reuse: Reuse | None = None,
    record: tuple[Sequence[int], Callable[[list[int], dict[int, torch.Tensor]], None]]
    | None = None,
) -> list[list[float]]:
    """Summed log-probability of every continuation of every row.

    Args:
        view: a decoder-only model or an encoder-decoder.
        rows: prefixes (ids or vectors) with their continuations.
        batch_tokens: padded tokens per forward pass.
        pack: True/False forces packed or plain scoring (decoder-only; older spelling of
            ``mode``).
        mode: "cached", "packed" or "plain" (see ``MODES``, ``SEQ2SEQ_MODES``); None
            decides by a self-check (``scoring_mode``).
        progress: called with the number of rows finished after each batch.
        reuse: answers a call made before in this run with the same rows (and keeps this
            one's scores).
        record: (layers, fn): in cached mode, each batch's prefix pass also calls
            ``fn(row indices, layer -> [B, P, d] hidden states)``.

    Returns:
        Per row, per continuation, sum_t log p(token_t | prefix, earlier tokens).
    """
    if not rows:
        return []
    if mode is None and pack is not None and not view.is_seq2seq:
        mode = "packed" if pack else "plain"
    if mode is None:
        mode = scoring_mode(view, rows[0])
    if mode != "plain" and not view.is_seq2seq and beyond_window(view, rows):
        mode = "plain"  # one mask for every layer cannot slide: the model's own masks
    key = rows_key(view, rows, mode, batch_tokens) if reuse is not None else b""
    found = reuse.get_scores(key) if reuse is not None else None
    if found is not None:
        if progress is not None:
            progress(len(rows))
        return found
    size = _size_of(view, mode)
    out: list[list[float]] = [[] for _ in rows]
    layers, on_group = record if record is not None else ((), None)
    for group in batches([size(r) for r in rows], batch_tokens):
        chunk = [rows[i] for i in group]
        if on_group is not None and mode == "cached" and not view.is_seq2seq:
            scores = cached_batch(
                view, chunk, pad_token(view), layers, functools.partial(on_group, group)
            )
        else:
            scores = _batch_of(view, mode)(view, chunk)
        for i, s in zip(group, scores, strict=True):
            require_finite(s, "the log-probabilities the model gives a row's choices")
            out[i] = s
        if progress is not None:
            progress(len(group))
    if reuse is not None:
        reuse.put_scores(key, out)
    return out


def _size_of(view: ModelView, mode: str) -> Callable[[Row], int]:
    """What a row costs in a batch: its prefix in cached mode (the prefix pass is the
    larger; ``encode.layer_vectors`` batches the same sequences the same way), else its
    packed, plain or encoder-decoder tokens."""
    if view.is_seq2seq:
        return _seq2seq_size
    return {"cached": _prefix_size, "packed": _packed_size}.get(mode, _plain_size)


def _prefix_size(row: Row) -> int:
    return row.n_prefix


def _packed_size(row: Row) -> int:
    return row.n_packed


def _plain_size(row: Row) -> int:
    return len(row.continuations) * (row.n_prefix + max(len(c) for c in row.continuations))


@dataclass(frozen=True)
class ChoiceScores:
    """Per-item scores of the baseline (or of any log-likelihood test).

    Attributes:
        loglik: [n_choices] summed log-probabilities.
        chars: [n_choices] length of each choice in characters (lm-eval's acc_norm).
        bytes: [n_choices] length of each choice in UTF-8 bytes (lm-eval's acc_bytes).
    """

    loglik: tuple[float, ...]
    chars: tuple[int, ...]
    bytes: tuple[int, ...]

    def predictions(self) -> dict[str, int]:
        """The chosen index under acc, acc_norm (per character) and acc_bytes (per byte)."""
        ll = np.array(self.loglik)
        return {
            "acc": int(np.argmax(ll)),
            "acc_norm": int(np.argmax(ll / np.array(self.chars, dtype=float))),
            "acc_bytes": int(np.argmax(ll / np.array(self.bytes, dtype=float))),
        }


def choice_scores(choices: Sequence[str], loglik: Sequence[float]) -> ChoiceScores:
    return ChoiceScores(
        loglik=tuple(float(x) for x in loglik),
        chars=tuple(max(1, len(c)) for c in choices),
        bytes=tuple(max(1, len(c.encode("utf-8"))) for c in choices),
    )


def baseline_rows(encoded: Sequence[Encoded]) -> list[Row]:
    return [Row(torch.tensor(e.context, dtype=torch.long), e.continuations) for e in encoded]


def plain_loglik(view: ModelView, context: Sequence[int], continuation: Sequence[int]) -> float:
    """One forward of the full model per (context, continuation): the reference scorer."""
    ids = torch.tensor([list(context) + list(continuation)], device=view.device)
    with torch.inference_mode():
        logits = view.model(input_ids=ids[:, :-1]).logits[0].float()
    lp = torch.log_softmax(logits[len(context) - 1 :], dim=-1)
    tok = torch.tensor(list(continuation), device=lp.device)
    return float(lp.gather(1, tok[:, None]).double().sum())


@dataclass(frozen=True)
class Prepared:
    """One evaluated item with its prompt and tokenised requests."""

    item: Item
    prompt: Prompt
    enc: Encoded


def prepare(
    view: ModelView, task: Task, items: Sequence[Item], shots: int, seed: int
) -> list[Prepared]:
    """Prompts (K-shot, seeded per item) and lm-evaluation-harness tokenisation of ``items``."""
    out = []
    for item in items:
        prompt = build_prompt(task, item, shots, seed)
        out.append(Prepared(item, prompt, encode_item(view, prompt.text, item.choices)))
    return out


ITEMS_PER_CALL = 32
"""Items scored (or encoded) per call: the baseline and every scheme cut the items into the
same runs, so that their batches (and a scheme's rows equal to the baseline's) match."""


def item_chunks(n: int) -> list[range]:
    """The runs of item indices scored together (``ITEMS_PER_CALL`` at a time)."""
    return [range(s, min(n, s + ITEMS_PER_CALL)) for s in range(0, n, ITEMS_PER_CALL)]


def baseline_scores(
    view: ModelView,
    prepared: Sequence[Prepared],
    *,
    batch_tokens: int = BATCH_TOKENS,
    pack: bool | None = None,
    progress: Callable[[int], None] | None = None,
    reuse: Reuse | None = None,
    layers: Sequence[LayerRef] = (),
    mode: str | None = None,
) -> list[ChoiceScores]:
    """Log-likelihood of every choice of every item given its context (the baseline).

    ``mode`` (or the older ``pack``) forces a scoring (``MODES``). ``layers``: with
    ``reuse``, the context pass of a decoder-only model also keeps the contexts' vectors at
    these layers, as ``encode.layer_vectors`` computes them for the ``concat_*`` schemes
    (which then need no pass of their own).
    """
    out: list[ChoiceScores] = []
    for run in item_chunks(len(prepared)):
        chunk = [prepared[i] for i in run]
        rows = baseline_rows([p.enc for p in chunk])
        record, file = None, None
        if reuse is not None and layers and not view.is_seq2seq:
            contexts = [p.enc.context for p in chunk]
            wanted, on_group, file = context_recorder(view, contexts, layers, batch_tokens, reuse)
            record = (wanted, on_group) if wanted else None
        ll = score_rows(
            view,
            rows,
            batch_tokens=batch_tokens,
            pack=pack,
            mode=mode,
            progress=progress,
            reuse=reuse,
            record=record,
        )
        if file is not None:
            file()
        out.extend(choice_scores(p.item.choices, s) for p, s in zip(chunk, ll, strict=True))
    return out


def no_context_scores(
    view: ModelView,
    prepared: Sequence[Prepared],
    *,
    batch_tokens: int = BATCH_TOKENS,
    progress: Callable[[int], None] | None = None,
) -> list[ChoiceScores]:
    """Each choice's log-likelihood after the beginning-of-text token alone (no context).

    The control every concept-space scheme should beat: what the choices' own
    probabilities pick without reading anything (lm-eval's unconditional request).
    """
    enc = [encode_item(view, "", p.item.choices) for p in prepared]
    ll = score_rows(view, baseline_rows(enc), batch_tokens=batch_tokens, progress=progress)
    return [choice_scores(p.item.choices, s) for p, s in zip(prepared, ll, strict=True)]
