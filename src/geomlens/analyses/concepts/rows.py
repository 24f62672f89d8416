"""The rows a scorer reads and the model calls every scorer shares.

A row is a prefix (token ids or vectors) with the continuations scored after it; rows are
batched longest first under a token budget. The model calls here (input embedding, the
head's log-probabilities of target tokens, an encoder-decoder's encoder output) are the
ones the baseline's scorers (``baseline``), the prefix-cache scorers (``prefix_cache``)
and the layer vectors of the schemes (``encode``) all read, so they live below all three.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView

BATCH_TOKENS = 2048  # padded tokens per forward pass
MAX_ROWS = 64


@dataclass(frozen=True)
class Encoded:
    """One item's requests as tokens.

    Attributes:
        context: context token ids (one beginning-of-text token if empty, as lm-eval).
        continuations: one tuple of token ids per choice.
        context_text: the context string as tokenised (trailing whitespace removed).
    """

    context: tuple[int, ...]
    continuations: tuple[tuple[int, ...], ...]
    context_text: str


@dataclass(frozen=True)
class Row:
    """One packed row: a prefix (ids [L] or vectors [L, d]) and the continuations scored.

    ``encoder_output`` (encoder-decoders only): the prefix vectors are what the decoder
    cross-attends to (the encoder is skipped), not the encoder's input.
    """

    prefix: torch.Tensor
    continuations: tuple[tuple[int, ...], ...]
    encoder_output: bool = False

    @property
    def n_prefix(self) -> int:
        return int(self.prefix.shape[0])

    @property
    def is_ids(self) -> bool:
        """Whether the prefix is token ids (else vectors)."""
        return self.prefix.dtype in (torch.long, torch.int32, torch.int64)

    @property
    def n_packed(self) -> int:
        return self.n_prefix + sum(len(c) - 1 for c in self.continuations)


def pad_token(view: ModelView) -> int:
    """The id that right-pads a batch (never read by the tokens scored): the prefix token,
    or 0 for a model loaded without a tokenizer."""
    return 0 if view.tokenizer is None else prefix_token(view)


def prefix_token(view: ModelView) -> int:
    """The token an empty context is replaced by (beginning of text, else end of text)."""
    tok = view.tokenizer
    token = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    if token is None:
        raise GeomlensError(f"{view.name}'s tokenizer has no token to stand for an empty context.")
    return int(token)


def embed_ids(view: ModelView, ids: torch.Tensor) -> torch.Tensor:
    """The model's own input embedding of token ids (any scale it applies included)."""
    with torch.inference_mode():
        model: Any = view.model
        embedding = model.get_input_embeddings()
        return embedding(ids.to(view.device))


def head_logprobs(view: ModelView, hidden: torch.Tensor) -> torch.Tensor:
    """Log-probabilities of the next token from final hidden states [M, d] -> [M, vocab]."""
    model: Any = view.model
    head = model.get_output_embeddings()
    logits = head(hidden).float()
    cap = getattr(view.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return torch.log_softmax(logits, dim=-1)


LOGIT_BYTES = 64 * 2**20
"""Float32 logits held at once when scoring targets: rows go through the head in chunks."""


def target_logprobs(view: ModelView, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log p(target) of each row: final hidden states [M, d], target ids [M] -> [M] float64.

    The same numbers as ``head_logprobs(...).gather`` row by row (log-softmax is per row),
    with at most ``LOGIT_BYTES`` of [rows, vocab] logits alive: a 262k vocabulary (Gemma 3)
    times a batch's few hundred target tokens would otherwise hold about a gigabyte twice.
    """
    vocab = int(view.W_E.shape[0])
    rows = max(1, LOGIT_BYTES // (4 * vocab))
    out = [
        head_logprobs(view, hidden[i : i + rows])
        .gather(1, targets[i : i + rows, None].to(hidden.device))[:, 0]
        .double()
        .cpu()
        for i in range(0, hidden.shape[0], rows)
    ]
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.float64)


def prefix_vectors(view: ModelView, row: Row) -> torch.Tensor:
    """A row's prefix as the vectors the model reads [L, d]: ids through its input
    embedding, vectors as given (in the model's dtype, on its device)."""
    if row.is_ids:
        return embed_ids(view, row.prefix)
    return row.prefix.to(view.device, dtype=view.W_E.dtype)


def encoder_memory(view: ModelView, rows: Sequence[Row]) -> tuple[torch.Tensor, torch.Tensor]:
    """What the decoder cross-attends to for each row: [B, L, d] vectors and a [B, L] mask.

    A row of ids or input vectors goes through the encoder (right-padded, masked); a row
    marked ``encoder_output`` is taken as it is.
    """
    length = max(r.n_prefix for r in rows)
    memory = torch.zeros(len(rows), length, view.d_model, dtype=view.W_E.dtype, device=view.device)
    mask = torch.zeros(len(rows), length, dtype=torch.long, device=view.device)
    for b, row in enumerate(rows):
        memory[b, : row.n_prefix] = prefix_vectors(view, row)
        mask[b, : row.n_prefix] = 1
    todo = [b for b, r in enumerate(rows) if not r.encoder_output]
    if todo:
        model: Any = view.model
        with torch.inference_mode():
            out = model.get_encoder()(inputs_embeds=memory[todo], attention_mask=mask[todo])
        memory[todo] = out.last_hidden_state.to(memory.dtype)
    return memory, mask


def batches(sizes: Sequence[int], budget: int, max_rows: int = MAX_ROWS) -> list[list[int]]:
    """Row indices grouped longest first so that rows x longest <= budget (one row at least)."""
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    groups: list[list[int]] = []
    for i in order:
        last = groups[-1] if groups else None
        if last and len(last) < max_rows and (len(last) + 1) * sizes[last[0]] <= budget:
            last.append(i)
        else:
            groups.append([i])
    return groups
