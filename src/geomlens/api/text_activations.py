"""``geomlens.activations``: what a model computes on texts in memory, without a run folder.

Each text is tokenized on its own (special tokens as the model's tokenizer adds them, no
padding) and read in one forward pass. Its hidden states are the stack the analyses read:
layer 0 is the embedding output (what enters block 0), layer l the output of block l, the
last one *before* the final norm; so for a decoder they equal Hugging Face's
``output_hidden_states`` except the last, which Hugging Face gives after the final norm
(``final_norm`` applies it). On request: the attention probabilities (Hugging Face's own
``output_attentions``, read with eager attention), the logits (``ModelView.logits``, equal
to Hugging Face's), and the position/context parts of Song & Zhong (2023) over the
positions the texts share, ``h[c, t] = mu + pos[t] + ctx[c] + resid[c, t]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.errors import GeomlensError, api_boundary

if TYPE_CHECKING:
    import torch

    from geomlens.models.view import ModelView

MAX_TEXTS = 10_000
"""Most texts one call reads (each is a forward pass held in memory)."""


@dataclass(frozen=True)
class Parts:
    """The position/context decomposition of C texts over their first T shared positions.

    ``h[l, c, t] = mu[l] + pos[l, t] + ctx[l, c] + resid[l, c, t]`` exactly, with
    ``mu`` the mean over texts and positions, ``pos[t]`` the mean over texts at position t
    less ``mu``, ``ctx[c]`` the mean over positions of text c less ``mu`` (Song & Zhong
    2023; docs/decomposition.md).

    Attributes:
        mu: [layers + 1, d].
        pos: [layers + 1, T, d].
        ctx: [layers + 1, C, d].
        resid: [layers + 1, C, T, d].
    """

    mu: torch.Tensor
    pos: torch.Tensor
    ctx: torch.Tensor
    resid: torch.Tensor

    def shares(self) -> dict[str, torch.Tensor]:
        """Per layer, the share of ``sum |h - mu|^2`` in each part: [layers + 1] each
        ("pos", "ctx", "resid"; each in [0, 1], they sum to 1 up to rounding)."""
        C, T = self.ctx.shape[1], self.pos.shape[1]
        pos = C * self.pos.pow(2).sum(dim=(1, 2))
        ctx = T * self.ctx.pow(2).sum(dim=(1, 2))
        resid = self.resid.pow(2).sum(dim=(1, 2, 3))
        total = pos + ctx + resid
        # rounding may put a share a few ulps outside [0, 1] (1.0000000000000004, -4e-16)
        return {
            name: (part / total).clamp(0.0, 1.0)
            for name, part in (("pos", pos), ("ctx", ctx), ("resid", resid))
        }


def decompose_states(hidden: Sequence[torch.Tensor]) -> Parts:
    """``Parts`` of texts' hidden states ``[layers + 1, T_c, d]`` over their first
    ``min T_c`` positions (the positions every text has)."""
    import torch

    T = min(int(h.shape[1]) for h in hidden)
    h = torch.stack([s[:, :T].double() for s in hidden], dim=1)  # [L+1, C, T, d]
    mu = h.mean(dim=(1, 2))
    pos = h.mean(dim=1) - mu[:, None]
    ctx = h.mean(dim=2) - mu[:, None]
    resid = h - mu[:, None, None] - pos[:, None] - ctx[:, :, None]
    return Parts(mu=mu, pos=pos, ctx=ctx, resid=resid)


@dataclass(frozen=True)
class Activations:
    """What a model computed on each text, in memory (``geomlens.activations``).

    Attributes:
        model: the model's name as given.
        texts: the texts, in order.
        input_ids: per text, its token ids [T_i] (special tokens included).
        tokens: per text, its tokens as strings.
        hidden_states: per text, [layers + 1, T_i, d] float32 on the CPU: layer 0 the
            embedding output, layer l the output of block l (before the final norm).
        attentions: per text, [layers, heads, T_i, T_i] attention probabilities, when
            asked for (else None).
        logits: per text, [T_i, vocab], when asked for (else None).
        parts: the position/context parts over the shared positions, when asked for.
        final_norm: what puts the last layer where the unembedding reads it (Hugging
            Face's last hidden state is ``final_norm(hidden_states[i][-1])``), or None.
    """

    model: str
    texts: tuple[str, ...]
    input_ids: tuple[torch.Tensor, ...]
    tokens: tuple[tuple[str, ...], ...]
    hidden_states: tuple[torch.Tensor, ...]
    attentions: tuple[torch.Tensor, ...] | None = None
    logits: tuple[torch.Tensor, ...] | None = None
    parts: Parts | None = None
    final_norm: Any = None

    def __len__(self) -> int:
        return len(self.texts)

    def __repr__(self) -> str:
        lengths = ", ".join(str(len(ids)) for ids in self.input_ids[:8])
        more = ", ..." if len(self.input_ids) > 8 else ""
        extra = [
            name for name in ("attentions", "logits", "parts") if getattr(self, name) is not None
        ]
        shape = tuple(self.hidden_states[0].shape[::2]) if self.hidden_states else ()
        return (
            f"Activations(model={self.model!r}, texts={len(self)}, tokens=[{lengths}{more}], "
            f"layers+1 x d={shape}" + (f", with {', '.join(extra)}" if extra else "") + ")"
        )


def as_texts(texts: Any, distinct: int = 1) -> list[str]:
    """``texts`` as a non-empty list of texts (``api.checks.text_list``), at most
    ``MAX_TEXTS``, at least ``distinct`` of them different; or one sentence saying what is
    wrong in the caller's words."""
    from geomlens.api.checks import text_list

    where = "geomlens.activations()"
    if isinstance(texts, (list, tuple)) and len(texts) > MAX_TEXTS:
        raise GeomlensError(
            f"{where} reads at most {MAX_TEXTS} texts at once (got {len(texts)}); call it on "
            "smaller lists, or run a corpus command with corpus=."
        )
    return text_list(where, texts, "texts", distinct)


def tokenized(view: ModelView, texts: Sequence[str]) -> list[torch.Tensor]:
    """Each text's token ids [T] as the tokenizer makes them (special tokens included),
    checked against the model's positions before any forward pass."""
    ids = [view.tokenizer(t, return_tensors="pt")["input_ids"][0] for t in texts]
    for i, row in enumerate(ids):
        if len(row) == 0:
            raise GeomlensError(f"geomlens.activations(): text {i} makes no tokens.")
        if view.n_ctx is not None and len(row) > view.n_ctx:
            raise GeomlensError(
                f"geomlens.activations(): text {i} has {len(row)} tokens but {view.name} "
                f"takes at most {view.n_ctx} positions; give a shorter text."
            )
    return ids


def forward(
    view: ModelView, ids: torch.Tensor, attentions: bool
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:
    """One pass over one text's ids [T]: hidden states [layers + 1, T, d] float32 on the CPU,
    and the attention probabilities [layers, heads, T, T] when ``attentions``."""
    import torch

    from geomlens.capturing.hooks import base_kwargs, hidden_states, recording
    from geomlens.models.loading import eager_attention

    layers = list(range(view.n_layers + 1))
    if not attentions:
        record = hidden_states(view, ids[None], layers)
        return torch.stack([record[l][0].float().cpu() for l in layers]), None
    kwargs = base_kwargs(view)
    with (
        torch.inference_mode(),
        eager_attention(view),
        recording(view, layers, stop=False) as record,
    ):
        out = view.base(input_ids=ids[None].to(view.device), output_attentions=True, **kwargs)
    probs = tuple(a[0].float().cpu() for a in out.attentions)
    return torch.stack([record[l][0].float().cpu() for l in layers]), probs


def check_flags(**flags: Any) -> None:
    """Each flag is True or False, or one sentence naming it."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise GeomlensError(
                f"geomlens.activations(): {name} takes True or False (got {value!r})."
            )


def resolved_view(
    model: Any,
    device: str | None,
    dtype: str | None,
    trust_remote_code: bool,
    tokenizer: Any = None,
) -> ModelView:
    """``model`` as a loaded view (a name or folder is loaded now; a model object in memory
    is seen where and as it is, with ``tokenizer``)."""
    from geomlens.models.held import is_held_model
    from geomlens.models.loading import load_model, load_named
    from geomlens.models.view import ModelView

    if isinstance(model, ModelView):
        return model
    if is_held_model(model):
        return load_model(model, tokenizer=tokenizer, device=device, dtype=dtype)
    if not isinstance(model, (str, Path)):
        raise GeomlensError(
            "geomlens.activations(): model takes a bundled name, a folder, an HF id, a "
            "transformers model or a view from geomlens.load_model (got a "
            f"{type(model).__name__[:60]})."
        )
    if tokenizer is not None:
        raise GeomlensError(
            "geomlens.activations(): tokenizer= goes with a model object; a model named by "
            "a string or path loads its own tokenizer."
        )
    return load_named(  # read here and dropped: no weights hash at load
        model, device=device or "cpu", dtype=dtype or "float32", trust_remote_code=trust_remote_code
    )


def activations(
    model: Any,
    texts: str | Sequence[str],
    *,
    attentions: bool = False,
    logits: bool = False,
    parts: bool = False,
    device: str | None = None,
    dtype: str | None = None,
    trust_remote_code: bool = False,
    tokenizer: Any = None,
) -> Activations:
    """Hidden states (and on request attention, logits, position/context parts) of texts.

    Nothing is written: the result lives in memory. Each text is read on its own, unpadded.

    Args:
        model: a bundled name, a folder, a .gguf file, an HF id in the local cache, a
            transformers model in memory (used where and as it is), or a view already
            loaded (``geomlens.load_model``; pass one to read many calls without
            reloading).
        texts: one string or a list of strings.
        attentions: also return each block's attention probabilities.
        logits: also return the logits (decoder-only models).
        parts: also return the position/context parts over the positions all texts share
            (needs at least two texts).
        device: where a model given by name runs (default "cpu").
        dtype: "float32", "bfloat16" or "float16", for a model given by name (default
            "float32").
        trust_remote_code: let a model folder run its own Python code.
        tokenizer: with a model object, its tokenizer (found locally from the model's
            ``name_or_path`` when not given).

    Returns:
        ``Activations``: ``.hidden_states[i]`` is text i's [layers + 1, tokens, d].
    """
    with api_boundary("geomlens.activations"):  # GeomlensError subclasses only
        return read_texts(
            model, texts, attentions, logits, parts, device, dtype, trust_remote_code, tokenizer
        )


def read_texts(
    model: Any,
    texts: str | Sequence[str],
    attentions: bool,
    logits: bool,
    parts: bool,
    device: str | None,
    dtype: str | None,
    trust_remote_code: bool,
    tokenizer: Any = None,
) -> Activations:
    """``activations`` inside its error boundary."""
    import torch

    check_flags(
        attentions=attentions, logits=logits, parts=parts, trust_remote_code=trust_remote_code
    )
    if parts and isinstance(texts, str):
        raise GeomlensError(
            "geomlens.activations(parts=True) compares texts position by position, so it "
            "needs at least two different texts; give a list of two or more."
        )
    items = as_texts(texts, distinct=2 if parts else 1)
    view = resolved_view(model, device, dtype, trust_remote_code, tokenizer)
    if logits and view.kind != "decoder":
        raise GeomlensError(
            f"geomlens.activations(logits=True) reads a decoder-only model's next-token "
            f"logits; {view.name} is an {view.kind} model, so leave logits off."
        )
    ids = tokenized(view, items)  # every check before the first forward pass
    states: list[torch.Tensor] = []
    probs: list[torch.Tensor] = []
    scores: list[torch.Tensor] = []
    for row in ids:
        hidden, attn = forward(view, row, attentions)
        states.append(hidden)
        if attn is not None:
            probs.append(torch.stack(attn))
        if logits:
            with torch.inference_mode():
                scores.append(view.logits(hidden[-1].to(view.device)).float().cpu())
    tokens = tuple(tuple(view.tokenizer.convert_ids_to_tokens(row.tolist())) for row in ids)
    return Activations(
        model=view.name,
        texts=tuple(items),
        input_ids=tuple(ids),
        tokens=tokens,
        hidden_states=tuple(states),
        attentions=tuple(probs) if attentions else None,
        logits=tuple(scores) if logits else None,
        parts=decompose_states(states) if parts else None,
        final_norm=view.readout_norm,
    )
