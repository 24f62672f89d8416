"""The on-load check: one short probe through Hugging Face's own forward pass, rebuilt from
the ``ModelView`` alone.

Every load runs it before anything is captured. A probe of ``PROBE_TOKENS`` token ids goes
through the model once (eager attention, so that the attention probabilities come back);
hooks keep what each block received and returned. From the view alone, then:

- each block's attention probabilities (the view's per-head Q/K, rotary, scale, bias,
  soft-cap, window; an encoder-decoder's cross-attention too) against Hugging Face's;
- each block's output, rebuilt from its input by the block's layout, norms, per-head
  attention and MLP (or experts), against the block's real output;
- every norm's declared kind, gain, bias and epsilon: the sphere construction they define
  (centre for LayerNorm, scale onto the sqrt(d) sphere, gain, bias) against the norm
  module's own output on the block's input;
- the logits (or, for a model without a language-model head, the final hidden state), and
  an encoder-decoder's encoder output through the view's encoder final norm;
- block 0's input (hidden-state layer 0) rebuilt by ``ModelView.block_input`` from the
  declared embedding (token table, token type, scale, positions, embedding norm,
  factorised projection) against the input Hugging Face's block 0 received.

A difference beyond float tolerance stops the load with one sentence naming the block and
the quantity: the family's declaration does not describe this model, and every number
computed from it would be wrong.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from geomlens.errors import GeomlensError
from geomlens.models.threads import own_thread
from geomlens.models.view import BlockView, DecoderBlockView, HeadWeights, ModelView, NormView

PROBE_TOKENS = 24
"""Tokens of the probe (the decoder of an encoder-decoder reads as many)."""

TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-8, torch.bfloat16: 6e-2, torch.float16: 1e-2}
"""Largest difference accepted, relative to the quantity's magnitude (at least 1), by the
model's dtype: float32 rounding across a few dozen operations, 16-bit rounding likewise."""


@dataclass(frozen=True)
class LoadCheck:
    """What the on-load check compared and how far apart the two computations were.

    Attributes:
        tokens: probe length.
        blocks: blocks rebuilt (both stacks of an encoder-decoder).
        max_error: quantity -> the largest difference relative to its magnitude.
        tolerance: the bound every difference stayed within.
        seconds: wall time of the check.
    """

    tokens: int
    blocks: int
    max_error: dict[str, float]
    tolerance: float
    seconds: float


class CheckFailed(GeomlensError):
    """The view and Hugging Face disagree (the message names block and quantity).

    Attributes:
        where: the block or part ("block 3", "the embedding"); quantity: what differed;
        error: by how much, relative to its magnitude (inf: a different shape).
    """

    def __init__(self, message: str, where: str = "", quantity: str = "", error: float = 0.0):
        super().__init__(message)
        self.where, self.quantity, self.error = where, quantity, error

    def short(self) -> str:
        """The difference in a few words ("block 0: output differs by 0.41")."""
        if self.error == float("inf"):
            return f"{self.where}: {self.quantity} of a different shape"
        verb = "differ" if self.quantity.endswith(("ies", "logits")) else "differs"
        return f"{self.where}: {self.quantity} {verb} by {self.error:.2g}"


@contextmanager
def eager_attention(view: ModelView) -> Iterator[None]:
    """Switch a loaded model to eager attention (attention weights) and back, holding the
    view's lock meanwhile (no other thread's pass runs under the switched setting)."""
    model: Any = view.model
    with view.lock:
        previous = view.config._attn_implementation
        if previous == "eager":
            yield
            return
        model.set_attn_implementation("eager")
        try:
            yield
        finally:
            model.set_attn_implementation(previous)


def probe_ids(view: ModelView, tokens: int = PROBE_TOKENS) -> torch.Tensor:
    """[1, T] fixed pseudo-random token ids (T at most the model's context), without the
    padding token (RoBERTa numbers positions by the tokens that are not padding)."""
    T = tokens if view.n_ctx is None else min(tokens, view.n_ctx)
    vocab = int(view.W_E.shape[0])
    g = torch.Generator().manual_seed(20240)
    ids = torch.randint(0, vocab, (1, T), generator=g)
    pad = getattr(view.config, "pad_token_id", None)
    if isinstance(pad, int) and vocab > 1:
        ids[ids == pad] = (pad + 1) % vocab
    return ids


def _first(value: Any) -> torch.Tensor:
    return value if isinstance(value, torch.Tensor) else value[0]


def _input(args: tuple, kwargs: dict) -> torch.Tensor:
    if args:
        return args[0]
    return kwargs["hidden_states"] if "hidden_states" in kwargs else next(iter(kwargs.values()))


@contextmanager
def block_calls(modules: list[Any]) -> Iterator[dict[int, list[tuple[torch.Tensor, Any]]]]:
    """While open, every call of each module (by id) appends (input, output) in order; a
    module shared by several blocks (ALBERT) is called once per block."""
    calls: dict[int, list[tuple[torch.Tensor, Any]]] = {}
    with ExitStack() as stack:
        for module in {id(m): m for m in modules}.values():

            def hook(mod: Any, args: tuple, kwargs: dict, output: Any) -> None:
                calls.setdefault(id(mod), []).append((_input(args, kwargs).detach(), output))

            stack.callback(module.register_forward_hook(own_thread(hook), with_kwargs=True).remove)
        yield calls


def stack_record(
    blocks: tuple[BlockView, ...], calls: dict[int, list[tuple[torch.Tensor, Any]]]
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(input, output) of each block of a stack, in block order."""
    seen: dict[int, int] = {}
    out = []
    for block in blocks:
        k = seen.get(id(block.module), 0)
        seen[id(block.module)] = k + 1
        h, y = calls[id(block.module)][k]
        out.append((h, _first(y).detach()))
    return out


# --------------------------------------------------------------------------- rebuilding


def values(block: BlockView, x: torch.Tensor, probs: torch.Tensor, w: HeadWeights) -> Any:
    """sum_h A_h (x W_V,h + b_V,h) W_O,h + b_O: [B, T, d] from [B, S, d] values, [B, H, T, S]
    probabilities and the heads ``w`` (the block's self-attention, or its cross-attention)."""
    W_V, W_O = w.W_V.to(x.dtype), w.W_O.to(x.dtype)
    v = torch.einsum("btd,hde->bhte", x, W_V)
    if w.b_V is not None:
        v = v + w.b_V.to(x.dtype)[None, :, None, :]
    out = torch.einsum("bhte,hed->btd", probs.to(x.dtype) @ v, W_O)
    return out if w.b_O is None else out + w.b_O.to(x.dtype)


def cross_probabilities(
    block: DecoderBlockView, x: torch.Tensor, memory: torch.Tensor, w: HeadWeights
) -> Any:
    """[B, H, T, S] cross-attention probabilities: softmax(scale * q . k) with q from the
    decoder's normalised stream ``x``, k from the encoder's output ``memory`` and the
    cross-attention's heads ``w``."""

    def project(v: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        out = torch.einsum("btd,hde->bhte", v, W.to(v.dtype))
        return out if b is None else out + b.to(v.dtype)[None, :, None, :]

    q, k = project(x, w.W_Q, w.b_Q), project(memory, w.W_K, w.b_K)
    return (block.attn.scale * (q @ k.transpose(-1, -2))).softmax(-1)


def rebuild_block(
    block: BlockView,
    h: torch.Tensor,
    memory: torch.Tensor | None = None,
    heads: HeadWeights | None = None,
) -> torch.Tensor:
    """A block's output from its input ``h`` [B, T, d] by the view alone: its layout,
    norms, residual scale, per-head attention (``heads``, if already at hand), MLP and, for
    a decoder block of an encoder-decoder, its cross-attention on the encoder's output
    ``memory`` [B, S, d]."""
    n1, n2, mlp, r = block.norm_attn, block.norm_mlp, block.mlp(), block.residual_scale
    w = heads or block.heads()
    has_cross = isinstance(block, DecoderBlockView) and block.cross_attention is not None
    cw = block.cross_heads() if has_cross else None  # type: ignore[attr-defined]

    def attend(x: torch.Tensor) -> torch.Tensor:
        return values(block, x, block.attn.probabilities(x, w), w)

    def cross(x: torch.Tensor) -> torch.Tensor:
        assert isinstance(block, DecoderBlockView) and memory is not None and cw is not None
        return values(block, memory, cross_probabilities(block, x, memory, cw), cw)

    if block.layout == "post":
        h1 = n1(h + attend(h))
        if has_cross:
            h1 = block.extra_norms["cross_attn"](h1 + cross(h1))
        return n2(h1 + mlp(h1))
    if block.layout == "parallel":
        return h + r * (attend(n1(h)) + mlp(n2(h)))
    if block.layout == "post-sublayer":
        h1 = h + r * n1(attend(h))
        return h1 + r * n2(mlp(h1))
    if block.layout == "sandwich":
        post_attn, post_mlp = block.extra_norms["post_attn"], block.extra_norms["post_mlp"]
        h1 = h + r * post_attn(attend(n1(h)))
        return h1 + r * post_mlp(mlp(n2(h1)))
    h1 = h + r * attend(n1(h))  # "pre"
    if has_cross:
        h1 = h1 + cross(block.extra_norms["cross_attn"](h1))
    return h1 + r * mlp(n2(h1))


def construction(norm: NormView, x: torch.Tensor) -> torch.Tensor:
    """A norm as its declaration defines it (Molina's construction), in float64: centre
    (LayerNorm), scale onto the sphere of radius sqrt(d), then the gain and bias."""
    x = x.double()
    d = x.shape[-1]
    if norm.kind == "layernorm":
        x = x - x.mean(-1, keepdim=True)
    y = x * (d**0.5) / torch.sqrt((x * x).sum(-1, keepdim=True) + d * norm.eps)
    y = y * norm.weight.double().to(y.device)
    return y if norm.bias is None else y + norm.bias.double().to(y.device)


def block_norms(block: BlockView) -> dict[str, NormView]:
    """The block's norms over the residual width, by name (q/k norms act within heads)."""
    named = {"norm_attn": block.norm_attn, "norm_mlp": block.norm_mlp, **block.extra_norms}
    return {
        k: n for k, n in named.items() if k not in ("q_norm", "k_norm") and n.kind != "identity"
    }


def attention_input(block: BlockView, h: torch.Tensor) -> torch.Tensor:
    """What the block's attention scores are computed from: its normalised input (pre-norm
    layouts) or its input."""
    norm = block.attn_input_norm
    return h if norm is None else norm(h)


def cross_input(block: DecoderBlockView, h: torch.Tensor, w: HeadWeights) -> torch.Tensor:
    """The cross-attention's query input: the stream after self-attention (heads ``w``),
    through the cross-attention's norm where it comes first (pre-norm)."""
    n1 = block.norm_attn
    if block.layout == "post":
        return n1(h + values(block, h, block.attn.probabilities(h, w), w))
    x = n1(h)
    h1 = h + block.residual_scale * values(block, x, block.attn.probabilities(x, w), w)
    return block.extra_norms["cross_attn"](h1)


# --------------------------------------------------------------------------- the check


class _Errors:
    """Relative differences by quantity; the first beyond tolerance raises."""

    def __init__(self, view: ModelView, tolerance: float):
        self.view, self.tolerance = view, tolerance
        self.worst: dict[str, float] = {}

    def __call__(self, where: str, quantity: str, ours: torch.Tensor, theirs: torch.Tensor) -> None:
        theirs = theirs.double().cpu()
        ours = ours.double().cpu()
        scale = max(1.0, float(theirs.abs().max()))
        if ours.shape != theirs.shape:
            err = float("inf")
        else:
            err = float((ours - theirs).abs().max()) / scale
        if not err <= self.tolerance:  # NaN fails too
            shown = "a different shape" if err == float("inf") else f"{err:.2g}"
            verb = "differ" if quantity.endswith(("ies", "logits")) else "differs"
            raise CheckFailed(
                f"the on-load check of {self.view.name} failed at {where}: its {quantity} "
                f"rebuilt from the {self.view.family} mapping {verb} from Hugging Face's by "
                f"{shown} (tolerance {self.tolerance:.0g}), so the mapping does not describe "
                "this model; use a model of a supported family or extend its mapping.",
                where,
                quantity,
                err,
            )
        self.worst[quantity] = max(self.worst.get(quantity, 0.0), err)


def _stack(
    errors: _Errors,
    name: str,
    blocks: tuple[BlockView, ...],
    record: list[tuple[torch.Tensor, torch.Tensor]],
    attentions: Any,
    memory: torch.Tensor | None = None,
    cross_attentions: Any = None,
) -> None:
    for block, (h, y) in zip(blocks, record, strict=True):
        where = f"{name}block {block.index}"
        w = block.heads()
        if attentions is not None and attentions[block.index] is not None:
            probs = block.attn.probabilities(attention_input(block, h), w)
            errors(where, "attention probabilities", probs, attentions[block.index])
        if (
            cross_attentions is not None
            and isinstance(block, DecoderBlockView)
            and memory is not None
        ):
            x = cross_input(block, h, w)
            ours = cross_probabilities(block, x, memory, block.cross_heads())
            errors(where, "cross-attention probabilities", ours, cross_attentions[block.index])
        errors(where, "output", rebuild_block(block, h, memory, w), y)
        for key, norm in block_norms(block).items():
            errors(where, f"{key} construction", construction(norm, h), norm(h))


def check_view(
    view: ModelView, tokens: int = PROBE_TOKENS, tolerance: float | None = None
) -> LoadCheck:
    """Run the on-load check (see the module docstring) and return what it measured;
    ``tolerance`` widens the dtype's (``TOLERANCE``) where given (quantised weights).

    Raises:
        CheckFailed: naming the first block and quantity that differ beyond tolerance.
    """
    start = time.perf_counter()
    tolerance = max(TOLERANCE.get(view.W_E.dtype, 1e-2), tolerance or 0.0)
    errors = _Errors(view, tolerance)
    ids = probe_ids(view, tokens).to(view.device)
    modules = [b.module for b in view.blocks + view.decoder_blocks]
    with (
        one_thread(view.device),
        torch.inference_mode(),
        eager_attention(view),
        block_calls(modules) as calls,
    ):
        if view.is_seq2seq:
            start_id = view.decoder_start_token_id or 0
            dec = torch.cat([torch.full_like(ids[:, :1], start_id), ids[:, :-1]], dim=1)
            out = view.model(
                input_ids=ids, decoder_input_ids=dec, output_attentions=True, use_cache=False
            )
        else:
            out = view.model(input_ids=ids, output_attentions=True, **_no_cache(view))
        with torch.inference_mode():
            _compare(view, errors, out, calls, ids)
    return LoadCheck(
        tokens=int(ids.shape[1]),
        blocks=len(view.blocks) + len(view.decoder_blocks),
        max_error=dict(errors.worst),
        tolerance=tolerance,
        seconds=time.perf_counter() - start,
    )


@contextmanager
def one_thread(device: torch.device) -> Iterator[None]:
    """One CPU thread while the probe runs: its operations are a few dozen tokens wide,
    too small to gain from more, and on a busy machine extra threads only wait."""
    if device.type != "cpu":
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _no_cache(view: ModelView) -> dict[str, Any]:
    return {} if view.is_encoder else {"use_cache": False}


def _compare(view: ModelView, errors: _Errors, out: Any, calls: Any, ids: torch.Tensor) -> None:
    main = stack_record(view.blocks, calls)
    h = main[0][0]
    errors("the embedding", "block-0 input", view.block_input(ids), h)
    for where, norm in (
        ("the embedding norm", view.embedding_norm),
        ("the final norm", view.final_norm),
        ("the encoder's final norm", view.encoder_final_norm),
    ):
        if norm is not None and norm.kind != "identity":
            errors(where, "construction", construction(norm, h), norm(h))
    if view.is_seq2seq:
        _stack(errors, "encoder ", view.blocks, main, out.encoder_attentions)
        memory = out.encoder_last_hidden_state
        enc = main[-1][1]
        enc = enc if view.encoder_final_norm is None else view.encoder_final_norm(enc)
        errors("the encoder", "output", enc, memory)
        dec = stack_record(view.decoder_blocks, calls)
        _stack(
            errors,
            "decoder ",
            view.decoder_blocks,
            dec,
            out.decoder_attentions,
            memory,
            out.cross_attentions,
        )
        last = dec[-1][1]
    else:
        _stack(errors, "", view.blocks, main, getattr(out, "attentions", None))
        last = main[-1][1]
    logits = getattr(out, "logits", None)
    where = "the final layer"
    if logits is not None:
        errors(where, "logits", view.logits(last), logits)
        return
    final = last if view.final_norm is None else view.final_norm(last)
    errors(where, "hidden state", final, out.last_hidden_state)
