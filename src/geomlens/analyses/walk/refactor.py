"""Per-head refactoring of attention: O = sum_h A_h X W_vo,h (+ biases).

Singh (2023) reads an attention layer as filter-then-aggregate: each head h mixes the
rows of its input X with its attention A_h and maps them with W_vo,h = W_v,h W_o,h. This
module records, in one forward pass with eager attention, each block's attention
probabilities, the input its value projection actually received (after the block's own
norm) and the output of its output projection, and checks the identity against them.
For encoder-decoders it also records what the decoder's self- and cross-attention saw
(``record_seq2seq_attention``), for their position kernels. See docs/walk.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.analyses.attention.induction import layer_attention_weights
from geomlens.analyses.attention.parts import block_scores
from geomlens.analyses.walk.kernels import EmpiricalKernel, KernelAccumulator
from geomlens.analyses.walk.similarity import seq2seq_forward
from geomlens.capturing.hooks import (
    AttentionRecord,
    attention_record,
    attention_sites,
    on_calls,
    recording_inputs,
)
from geomlens.errors import GeomlensError
from geomlens.models.loading import eager_attention
from geomlens.models.view import HeadWeights, ModelView, encoder_output
from geomlens.stats.base import StateParts, check_state
from geomlens.stats.rounding import sig

Array = npt.NDArray[np.float64]


def record_attention(view: ModelView, input_ids: torch.Tensor) -> AttentionRecord:
    """One eager forward pass of ``view.base`` on [B, T] ids, recording every block.

    The hook sites are the view's: each block's ``attn.value_in`` (its input is X) and
    ``attn.output`` (its output is O).

    Raises:
        GeomlensError: without eager attention.
    """
    with attention_sites(view) as sites:
        attn = layer_attention_weights(view, input_ids)
    return attention_record(sites, attn, view.n_layers)


@dataclass(frozen=True)
class Seq2SeqAttentionRecord:
    """What one teacher-forced forward pass of an encoder-decoder fed its decoder's attention.

    Attributes:
        decoder_in: [L, B, T, d] the residual stream entering each decoder block.
        self_attn: [L, B, H, T, T] the decoder's self-attention probabilities (causal).
        cross_x: [L, B, T, d] each cross-attention's query input (after its norm).
        cross_attn: [L, B, H, T, S] cross-attention probabilities (decoder query, encoder key).
        encoded: [B, S, d] the encoder's output (keys and values of the cross-attention).
    """

    decoder_in: torch.Tensor
    self_attn: torch.Tensor
    cross_x: torch.Tensor
    cross_attn: torch.Tensor
    encoded: torch.Tensor


def record_seq2seq_attention(
    view: ModelView,
    input_ids: torch.Tensor,
    decoder_input_ids: torch.Tensor,
    encoded: torch.Tensor | None = None,
) -> Seq2SeqAttentionRecord:
    """One eager forward pass of an encoder-decoder on [B, S] / [B, T] ids, through the
    top-level API; each decoder block's ``cross_attention`` module is hooked for its input.
    ``encoded`` [B, S, d]: the encoder's output of ``input_ids`` where it has already run
    (the decoder alone runs then).

    Raises:
        GeomlensError: when the model returns no attention weights (no eager attention).
    """
    modules = {b.index: b.cross_attention for b in view.decoder_blocks}  # type: ignore[attr-defined]
    flags = {"output_hidden_states": True, "output_attentions": True}
    with recording_inputs(modules) as cross:  # type: ignore[arg-type]
        if encoded is None:
            out = seq2seq_forward(view, input_ids, decoder_input_ids, **flags)
        else:
            with torch.inference_mode():
                out = view.model(
                    encoder_outputs=encoder_output(encoded.to(view.device)),
                    decoder_input_ids=decoder_input_ids.to(view.device),
                    use_cache=False,
                    **flags,
                )
    attentions = (out.decoder_attentions or ()) + (out.cross_attentions or ())
    if not attentions or any(a is None for a in attentions):
        raise GeomlensError(
            f"{view.name} returned no attention weights: load it with "
            'load_model(name, attention="eager")'
        )
    L = len(view.decoder_blocks)
    return Seq2SeqAttentionRecord(
        decoder_in=torch.stack([h.float().cpu() for h in out.decoder_hidden_states[:L]]),
        self_attn=torch.stack([a.float().cpu() for a in out.decoder_attentions]),
        cross_x=torch.stack([cross[i].float().cpu() for i in range(L)]),
        cross_attn=torch.stack([a.float().cpu() for a in out.cross_attentions]),
        encoded=(out.encoder_last_hidden_state if encoded is None else encoded).float().cpu(),
    )


def head_outputs(heads: HeadWeights, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
    """Each head's output A_h X W_vo,h + b_v,h W_o,h, in float64: [B, H, T, d].

    Args:
        heads: the block's per-head weights (grouped-query heads expanded).
        x: [B, T, d] the value projection's input.
        attn: [B, H, T, T] attention probabilities (the value bias enters as b_v,h W_o,h
            times each row's sum: 1, or less where heads have sink logits, GPT-OSS).
    """
    W_V, W_O = heads.W_V.double().cpu(), heads.W_O.double().cpu()  # [H, d, dh], [H, dh, d]
    # (A_h (X W_v,h)) W_o,h: the same product as A_h X W_vo,h, with the T x T attention
    # applied to dh-wide values instead of d-wide ones (d / dh times less arithmetic).
    v = torch.einsum("btd,hde->bhte", x.double(), W_V)  # [B, H, T, dh]
    o = (attn.double() @ v) @ W_O[None]
    if heads.b_V is not None:
        bias = (heads.b_V.double().cpu()[:, None, :] @ W_O)[None]  # [1, H, 1, d]
        o = o + attn.double().sum(-1, keepdim=True) * bias
    return o


@dataclass(frozen=True)
class RefactorResult:
    """The refactoring check and how far each head moves the vector.

    Attributes:
        max_abs_err: [L] max |O - (sum_h O_h + b_O)| per layer.
        max_abs_out: [L] max |O| per layer.
        head_norm: [L, H] mean over tokens of |O_h|.
        head_norm_rel: [L, H] mean over tokens of |O_h| / |block input|.
        n_tokens: tokens checked (windows x positions).
    """

    max_abs_err: Array
    max_abs_out: Array
    head_norm: Array
    head_norm_rel: Array
    n_tokens: int

    @property
    def rel_err(self) -> Array:
        return self.max_abs_err / np.maximum(self.max_abs_out, 1e-30)

    @property
    def max_rel_err(self) -> float:
        """max over layers of max |O - refactored| / max |O|."""
        return float(self.rel_err.max())

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_rel_err": sig(self.max_rel_err, 4),
            "n_tokens": self.n_tokens,
            "layers": [
                {
                    "layer": i,
                    "rel_err": sig(self.rel_err[i], 4),
                    "head_norm": [sig(x, 6) for x in self.head_norm[i]],
                    "head_norm_rel": [sig(x, 6) for x in self.head_norm_rel[i]],
                }
                for i in range(len(self.max_abs_err))
            ],
        }


_REFACTOR_MAXIMA = ("err", "out")
"""RefactorAccumulator fields that keep a maximum per layer ([L] float64)."""

_REFACTOR_SUMS = ("norm", "rel")
"""RefactorAccumulator fields that sum over tokens ([L, H] float64)."""


class RefactorAccumulator:
    """Checks the identity batch by batch and averages the per-head output norms.

    An ``Accumulator`` (``stats.base``): ``update(record)`` per ``AttentionRecord``,
    ``merge``, ``state_dict``/``load_state_dict`` (maxima, sums and the token count) and
    ``finalize()``. The blocks' weights (``heads``) come from the view given to the
    constructor and are not state.
    """

    def __init__(self, view: ModelView):
        self.heads = [b.heads() for b in view.blocks]
        L, H = view.n_layers, view.n_heads
        self.err = np.zeros(L)
        self.out = np.zeros(L)
        self.norm = np.zeros((L, H))
        self.rel = np.zeros((L, H))
        self.tokens = 0

    def update(self, record: AttentionRecord) -> None:
        for l in range(len(self.heads)):
            self.update_layer(l, record.block_in[l], record.x[l], record.out[l], record.attn[l])

    def update_layer(
        self,
        layer: int,
        block_in: torch.Tensor,
        x: torch.Tensor,
        out: torch.Tensor,
        attn: torch.Tensor,
    ) -> None:
        """Add one block of one pass: its input [B, T, d], its value projection's input
        [B, T, d], its output projection's output [B, T, d], its attention [B, H, T, T]
        (block 0 counts the tokens)."""
        heads = self.heads[layer]
        o_h = head_outputs(heads, x, attn)
        total = o_h.sum(1)
        if heads.b_O is not None:
            total = total + heads.b_O.double().cpu()
        ref = out.double()
        self.err[layer] = max(self.err[layer], float((total - ref).abs().max()))
        self.out[layer] = max(self.out[layer], float(ref.abs().max()))
        n = o_h.norm(dim=-1)  # [B, H, T]
        h_in = block_in.double().norm(dim=-1).clamp(min=1e-30)  # [B, T]
        self.norm[layer] += n.sum((0, 2)).numpy()
        self.rel[layer] += (n / h_in[:, None, :]).sum((0, 2)).numpy()
        if layer == 0:
            self.tokens += int(x.shape[0] * x.shape[1])

    def _shapes(self) -> list[tuple[int, ...]]:
        """[H, d, d_head] of each block's value weights: what a merge must agree on."""
        return [tuple(heads.W_V.shape) for heads in self.heads]

    def merge(self, other: RefactorAccumulator) -> RefactorAccumulator:
        """Add a check run on other windows (in place) and return self: maxima take the
        max, sums and tokens add.

        Raises:
            GeomlensError: when the two were built for models of other shapes.
        """
        if other._shapes() != self._shapes():
            raise GeomlensError(
                "cannot merge refactoring checks of models of different shapes: blocks' "
                f"[heads, d, d_head] {other._shapes()} into {self._shapes()}."
            )
        for name in _REFACTOR_MAXIMA:
            np.maximum(getattr(self, name), getattr(other, name), out=getattr(self, name))
        for name in _REFACTOR_SUMS:
            getattr(self, name)[...] += getattr(other, name)
        self.tokens += other.tokens
        return self

    def state_spec(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        """Name, shape and dtype of every tensor of ``state_dict()``."""
        L, H = self.norm.shape
        return {
            "err": ((L,), torch.float64),
            "out": ((L,), torch.float64),
            "norm": ((L, H), torch.float64),
            "rel": ((L, H), torch.float64),
            "tokens": ((), torch.int64),
        }

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Maxima and sums (float64 copies) and the token count (0-d int64)."""
        state = {
            name: torch.from_numpy(getattr(self, name).copy())
            for name in _REFACTOR_MAXIMA + _REFACTOR_SUMS
        }
        state["tokens"] = torch.tensor(self.tokens, dtype=torch.int64)
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore ``state_dict()`` exactly.

        Raises:
            GeomlensError: when it was saved for another number of layers or heads.
        """
        check_state(state, self.state_spec(), "refactoring-check")
        for name in _REFACTOR_MAXIMA + _REFACTOR_SUMS:
            setattr(self, name, state[name].cpu().numpy().copy())
        self.tokens = int(state["tokens"])

    def finalize(self) -> RefactorResult:
        return RefactorResult(
            max_abs_err=self.err.copy(),
            max_abs_out=self.out.copy(),
            head_norm=self.norm / max(self.tokens, 1),
            head_norm_rel=self.rel / max(self.tokens, 1),
            n_tokens=self.tokens,
        )


def refactor_check(view: ModelView, input_ids: torch.Tensor) -> RefactorResult:
    """The refactoring check on one batch of ids [B, T] (eager attention needed)."""
    acc = RefactorAccumulator(view)
    acc.update(record_attention(view, input_ids))
    return acc.finalize()


def attention_weight_modules(view: ModelView) -> dict[int, tuple[torch.nn.Module, int]] | None:
    """Per main-stack block, the module whose output holds its attention probabilities and
    their place in that output: what Hugging Face's own ``output_attentions`` reads (the
    model's ``_can_record_outputs["attentions"]``). None where the model does not say, or
    where a block holds no such module or more than one."""
    spec = getattr(type(view.base), "_can_record_outputs", None) or {}
    spec = spec.get("attentions")
    if spec is None:
        return None
    target = getattr(spec, "target_class", spec if isinstance(spec, type) else None)
    class_name = spec if isinstance(spec, str) else getattr(spec, "class_name", None)
    index = getattr(spec, "index", 1)
    suffix = getattr(spec, "layer_name", None)
    found: dict[int, tuple[torch.nn.Module, int]] = {}
    for block in view.blocks:
        hits = [
            module
            for name, module in block.module.named_modules()
            if (target is not None and isinstance(module, target))
            or (class_name is not None and type(module).__name__.endswith(class_name))
            if suffix is None or f".{name}".endswith(suffix)
        ]
        if len(hits) != 1:
            return None
        found[block.index] = (hits[0], index)
    return found


class AttentionTap(StateParts):
    """The position kernels and the refactoring check of the main stack over the first
    ``windows`` windows of the capture (a ``Tap``, see ``capturing.taps``).

    An encoder-decoder's tap also holds its decoder's self-attention and cross-attention
    kernels (``decoder_finalize``): after each tapped encoder pass, the decoder reads the
    windows teacher-forced against that pass's encoder output, so the kernel windows go
    through the encoder once.

    Each tapped pass is read block by block as it runs (``streams``): when a block's
    attention returns, its probabilities, the block's input and what its value and output
    projections saw go into the kernels and the check, and are dropped, so one block's
    attention is held at a time, not every layer's. Where the model does not say which
    module returns its attention (``attention_weight_modules``), the pass returns every
    layer's attention at its end (``after``), as Hugging Face's ``output_attentions``."""

    attention = True
    what = "attention-tap"

    def __init__(self, view: ModelView, windows: int):
        self.windows = windows
        self.view = view
        self.kernels = KernelAccumulator(view.n_layers, view.n_heads, causal=not view.is_encoder)
        self.refactor = RefactorAccumulator(view)
        self._sites: dict[str, dict[int, torch.Tensor]] = {}
        self._pending: dict[int, torch.Tensor] = {}
        self._weights = attention_weight_modules(view)
        self.streams = self._weights is not None
        self.decoder: KernelAccumulator | None = None
        self.cross: KernelAccumulator | None = None
        if view.is_seq2seq:
            L = len(view.decoder_blocks)
            self.decoder = KernelAccumulator(L, view.n_heads, causal=True)
            self.cross = KernelAccumulator(L, view.n_heads, causal=False)
        self._encoder_io: dict[str, torch.Tensor] = {}

    @contextmanager
    def during(self, view: ModelView) -> Iterator[None]:
        with attention_sites(view) as sites, ExitStack() as stack:
            self._sites, self._pending = sites, {}
            if self.decoder is not None:  # the encoder's input ids and its output
                stack.enter_context(on_calls({"base": view.base}, self._encoder_pass))
            weights = self._weights or {}
            attention = {layer: module for layer, (module, _) in weights.items()}
            stack.enter_context(on_calls(attention, self._weights_of))
            # after attention_sites' own hook on the output projection (registered first)
            outputs = {layer: view.blocks[layer].attn.output for layer in weights}
            stack.enter_context(on_calls(outputs, lambda layer, *_: self._maybe_done(layer)))
            yield

    def _encoder_pass(self, _key: str, args: tuple, kwargs: dict, output: Any) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None:
            self._encoder_io = {"ids": ids.detach(), "encoded": output[0].detach()}

    def _decoder_pass(self) -> None:
        """The decoder's kernels on the windows the encoder just read, from its output."""
        from geomlens.analyses.attention.parts import self_scores
        from geomlens.analyses.walk.kernels import cross_scores
        from geomlens.analyses.walk.similarity import decoder_inputs
        from geomlens.capturing.taps import attention_chunk

        assert self.decoder is not None and self.cross is not None
        ids, encoded = self._encoder_io["ids"], self._encoder_io["encoded"]
        size = attention_chunk(self.view, ids.shape[1], stacks=2, batch=len(ids))
        for at in range(0, len(ids), size):
            part, enc = ids[at : at + size], encoded[at : at + size]
            rec = record_seq2seq_attention(self.view, part, decoder_inputs(self.view, part), enc)
            for l, block in enumerate(self.view.decoder_blocks):
                self.decoder.update(l, rec.self_attn[l], self_scores(block, rec.decoder_in[l]))
                scores = cross_scores(block, rec.cross_x[l], rec.encoded)
                self.cross.update(l, rec.cross_attn[l], scores)

    def _weights_of(self, layer: int, args: tuple, kwargs: dict, output: Any) -> None:
        """Keep block ``layer``'s attention probabilities as its attention returns them."""
        index = (self._weights or {})[layer][1]
        weights = output[index] if isinstance(output, (tuple, list)) else None
        if not isinstance(weights, torch.Tensor) or weights.ndim != 4:
            raise GeomlensError(
                f"{self.view.name} returned no attention weights under eager attention."
            )
        self._pending[layer] = weights.detach().float().cpu()
        self._maybe_done(layer)

    def _maybe_done(self, layer: int) -> None:
        """Add block ``layer`` of the pass running now once its attention and its output
        projection have both run (in either order), then drop what it recorded."""
        sites = self._sites
        if layer not in self._pending or layer not in sites["out"]:
            return
        block_in, x, out = (sites[kind].pop(layer) for kind in ("block_in", "x", "out"))
        attn = self._pending.pop(layer)
        self.refactor.update_layer(layer, block_in, x, out, attn)
        self.kernels.update(layer, attn, block_scores(self.view, layer, block_in))

    def after(self, attentions: Sequence[torch.Tensor] | None) -> None:
        """Add the pass just run (where it was not read block by block)."""
        if not self.streams:
            assert attentions is not None
            self.update(attention_record(self._sites, attentions, self.view.n_layers))
        elif self._pending or any(self._sites.values()):
            raise GeomlensError(
                f"{self.view.name}'s attention ran without its output projection (or the "
                "reverse) in a tapped pass; the kernels cannot be read block by block."
            )
        self._sites, self._pending = {}, {}
        if self.decoder is not None:
            with eager_attention(self.view):
                self._decoder_pass()
            self._encoder_io = {}

    def update(self, rec: AttentionRecord) -> None:
        self.refactor.update(rec)
        for l in range(self.view.n_layers):
            self.kernels.update(l, rec.attn[l], block_scores(self.view, l, rec.block_in[l]))

    def merge(self, other: AttentionTap) -> AttentionTap:
        for name, part in self.parts().items():
            part.merge(other.parts()[name])
        return self

    def parts(self) -> dict[str, Any]:
        parts: dict[str, Any] = {"kernels": self.kernels, "refactor": self.refactor}
        if self.decoder is not None and self.cross is not None:
            parts.update(decoder_kernels=self.decoder, cross_kernels=self.cross)
        return parts

    def finalize(self) -> tuple[EmpiricalKernel, RefactorResult]:
        return self.kernels.finalize(), self.refactor.finalize()

    def decoder_finalize(self) -> tuple[EmpiricalKernel, EmpiricalKernel]:
        """An encoder-decoder's decoder self-attention and cross-attention kernels."""
        if self.decoder is None or self.cross is None:
            raise GeomlensError(f"{self.view.name} has no decoder: it has no decoder kernels.")
        return self.decoder.finalize(), self.cross.finalize()
