"""Encoding and decoding walks among the token vectors (Singh, 2023, section 3).

A hidden vector is made comparable with the token vectors by the readout the model itself
uses: the final norm (``similarity.readout_norm``; none for post-norm encoders, whose block
outputs are already normalised), then compared with the rows of the unembedding ``W_U^T``
(which is ``W_E`` for tied models) by inner product (the logit lens) and by cosine.

- Encoding walk: every position of one text at every layer 0..L; its k nearest tokens,
  the rank of its own input token and of the next token; the layer from which the own
  token stays out of the k nearest (the walk leaves its own neighbourhood).
- Decoding walk: greedy or seeded sampled generation (an encoder-decoder's decoder
  generates from its start token, its cross-attention reading the encoded text); the final
  vectors d_t that chose each token, their nearest tokens, and a 2-D projection of the path.

For an encoder-decoder the main stack is the encoder; ``stack="decoder"`` walks the decoder
stack, read teacher-forced on the same text, through the decoder's readout.

See docs/walk.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.analyses.common.vocab import (
    Columns,
    Readout,
    ScoreFn,
    per_token,
    scan_vocab,
    unembed_scores,
)
from geomlens.analyses.walk.similarity import FINAL_NORM, readout_norm
from geomlens.capturing.hooks import cache_keyword
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView
from geomlens.stats.intervals import block_bootstrap_mean
from geomlens.stats.rounding import sig

Array = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class TokenSpace:
    """The token vectors hidden vectors are compared with.

    Attributes:
        vectors: [V, d] rows of ``W_U^T`` (``W_E`` when tied), on the CPU in the model's
            dtype: a view of the weights, not a copy (float32 model on the CPU).
        norms: [V] float32 their norms.
    """

    vectors: torch.Tensor
    norms: torch.Tensor

    @classmethod
    def of(cls, view: ModelView) -> TokenSpace:
        u = view.W_U.T.cpu()
        (norms,) = per_token(
            lambda ids: [u[ids].float().norm(dim=-1)], u.shape[0], 4 * (u.shape[1] + 1)
        )
        return cls(vectors=u, norms=norms.clamp(min=1e-30))

    def score_fn(self, r: torch.Tensor) -> ScoreFn:
        """Inner products and cosines of vectors r [M, d] with the tokens of some columns:
        ([M, n], [M, n]), computed as ``scores`` computes them (one product for both)."""
        r32 = r.float()
        r_norm = r32.norm(dim=-1, keepdim=True).clamp(min=1e-30)

        def score(cols: Columns) -> list[torch.Tensor]:
            dot = r32 @ self.vectors[cols].float().T
            return [dot, dot / (r_norm * self.norms[cols])]

        return score

    def scores(self, r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Inner products and cosines of vectors r [..., d] with every token: [..., V] each.

        The whole-vocabulary matrices (tests and small vocabularies); the walks read the
        vocabulary in chunks through ``readouts``.
        """
        dot = r.float() @ self.vectors.float().T
        cos = dot / (r.float().norm(dim=-1, keepdim=True).clamp(min=1e-30) * self.norms)
        return dot, cos

    def readouts(
        self, r: torch.Tensor, k: int, rank_ids: torch.Tensor | None = None
    ) -> tuple[Readout, Readout]:
        """Top-k tokens (and ranks of ``rank_ids`` [M]) of vectors r [M, d] by inner
        product and by cosine, over the vocabulary in chunks (``analyses.common.vocab``)."""
        dot, cos = scan_vocab(
            self.score_fn(r),
            r.shape[0],
            self.vectors.shape[0],
            n_scores=2,
            column_bytes=4 * (3 * r.shape[0] + self.vectors.shape[1]),
            k=min(k, self.vectors.shape[0]),
            rank_ids=rank_ids,
        )
        return dot, cos


def comparable(
    view: ModelView, hidden: torch.Tensor, layer_names: tuple[str, ...], stack: str = "main"
) -> torch.Tensor:
    """Hidden vectors of layers 0..L put through the readout: [L+1, T, d] float32.

    Args:
        view: the model.
        hidden: [n, T, d] from ``similarity.layer_stack`` (a trailing "final_norm" layer,
            which equals the normalised layer L, is dropped).
        layer_names: its n layer names.
        stack: "main" (the readout norm) or "decoder" (an encoder-decoder's decoder: its
            final norm, then the output scale ``unembed`` applies, so that the inner
            products at layer L are the decoder's logits).
    """
    h = hidden[:-1] if layer_names[-1] == FINAL_NORM else hidden
    norm = readout_norm(view, stack)
    scale = view.unembedding_scale if stack == "decoder" else 1.0
    if norm is None:
        return h.float() * scale
    with torch.inference_mode():
        return norm(h.to(view.device, view.W_E.dtype)).float().cpu() * scale


def _leave(in_top: npt.NDArray[np.bool_]) -> IntArray:
    """[T] first layer from which the token stays out of the top k for good (-1: never)."""
    n = in_top.shape[0]
    last_in = np.where(in_top.any(0), n - 1 - np.argmax(in_top[::-1], axis=0), -1)
    return np.where(in_top[-1], -1, last_in + 1).astype(np.int64)


def _arrive(in_top: npt.NDArray[np.bool_]) -> IntArray:
    """[T] first layer from which the token stays in the top k for good (-1: never)."""
    return _leave(~in_top)


@dataclass(frozen=True)
class EncodingWalk:
    """Nearest tokens of every position at every layer, and the ranks of its own and next token.

    Attributes:
        layer_names: the L+1 layers "0".."L" (vectors through the readout norm).
        k: neighbours kept.
        input_ids: [T] the stack's input (the decoder's: start token + text[:-1]).
        top_dot, top_cos: [L+1, T, k] nearest token ids by inner product / cosine.
        own_rank_dot, own_rank_cos: [L+1, T] rank of the input token (0 = nearest).
        next_rank_dot, next_rank_cos: [L+1, N] rank of the next token (N = T-1: the next
            input token; the decoder stack: N = T, the token it must predict).
        leave_dot, leave_cos: [T] first layer from which the own token stays out of the top
            k (-1: still in it at the last layer).
        arrive_dot, arrive_cos: [N] first layer from which the next token stays in the top
            k (-1: not in it at the last layer).
        stack: the stack walked ("main", or "decoder" for an encoder-decoder's decoder).
    """

    layer_names: tuple[str, ...]
    k: int
    input_ids: IntArray
    top_dot: IntArray
    top_cos: IntArray
    own_rank_dot: IntArray
    own_rank_cos: IntArray
    next_rank_dot: IntArray
    next_rank_cos: IntArray
    leave_dot: IntArray
    leave_cos: IntArray
    arrive_dot: IntArray
    arrive_cos: IntArray
    stack: str = "main"

    def summary(self, metric: str) -> dict[str, Any]:
        """Leave/arrive layers by "dot" or "cos": medians over the positions that do.

        The never-leave/never-arrive fractions carry 95% intervals (``*_ci``) by the
        circular block bootstrap over positions, seed 0: neighbouring positions of a text
        are dependent, so an interval over independent positions would be too narrow.
        """
        leave = getattr(self, f"leave_{metric}")
        arrive = getattr(self, f"arrive_{metric}")
        left, came = leave[leave >= 0], arrive[arrive >= 0]
        return {
            "leave_layer_median": None if not len(left) else sig(np.median(left)),
            "frac_never_leave": sig(np.mean(leave < 0)),
            "arrive_layer_median": None if not len(came) else sig(np.median(came)),
            "frac_never_arrive": sig(np.mean(arrive < 0)),
            "frac_never_leave_ci": block_bootstrap_mean(leave < 0, seed=0),
            "frac_never_arrive_ci": block_bootstrap_mean(arrive < 0, seed=0),
        }

    def to_dict(self) -> dict[str, Any]:
        """Per-layer fractions and median ranks, and the leave/arrive summaries."""
        rows = []
        for i, name in enumerate(self.layer_names):
            row: dict[str, Any] = {"layer": name}
            for m in ("dot", "cos"):
                own, nxt = getattr(self, f"own_rank_{m}")[i], getattr(self, f"next_rank_{m}")[i]
                row[f"frac_own_in_top_{m}"] = sig(np.mean(own < self.k))
                row[f"frac_next_in_top_{m}"] = sig(np.mean(nxt < self.k))
                row[f"median_own_rank_{m}"] = sig(np.median(own))
                row[f"median_next_rank_{m}"] = sig(np.median(nxt))
            rows.append(row)
        return {
            "k": self.k,
            "n_positions": int(len(self.input_ids)),
            "layers": rows,
            "cos": self.summary("cos"),
            "dot": self.summary("dot"),
        }


def encoding_walk(
    view: ModelView,
    hidden: torch.Tensor,
    layer_names: tuple[str, ...],
    input_ids: torch.Tensor,
    k: int = 10,
    space: TokenSpace | None = None,
    next_ids: torch.Tensor | None = None,
    stack: str = "main",
    progress: Callable[[int], object] | None = None,
) -> EncodingWalk:
    """The encoding walk of one text through one stack.

    Args:
        view: the model.
        hidden: [n, T, d] from ``similarity.layer_stack`` (of ``stack``).
        layer_names: its layer names.
        input_ids: [T] the stack's input token ids (each position's own token).
        k: neighbours kept (and the size of the "neighbourhood" for leave/arrive).
        space: token vectors (default ``TokenSpace.of(view)``).
        next_ids: [N] the next token of positions 0..N-1 (default ``input_ids[1:]``; the
            decoder stack: the text, which it must predict at every position).
        stack: "main" or "decoder" (chooses the readout, see ``comparable``).
        progress: called with 1 after each layer (a progress bar's ``update``).
    """
    space = space or TokenSpace.of(view)
    r = comparable(view, hidden, layer_names, stack)
    ids = input_ids.cpu().long()
    nxt = ids[1:] if next_ids is None else next_ids.cpu().long()
    names = tuple(n for n in layer_names if n != FINAL_NORM)
    out: dict[str, list[torch.Tensor]] = {
        key: [] for key in ("top_dot", "top_cos", "own_dot", "own_cos", "next_dot", "next_cos")
    }
    # own and next token ranked in one scan; positions without a next token rank their
    # own token twice (dropped)
    targets = torch.stack([ids, torch.cat([nxt, ids[len(nxt) :]])], dim=1)  # [T, 2]
    for layer in r:
        for m, got in zip(("dot", "cos"), space.readouts(layer, k, targets), strict=True):
            assert got.top_ids is not None and got.ranks is not None
            out[f"top_{m}"].append(got.top_ids)
            out[f"own_{m}"].append(got.ranks[:, 0])
            out[f"next_{m}"].append(got.ranks[: len(nxt), 1])
        if progress is not None:
            progress(1)
    arr = {key: torch.stack(v).numpy().astype(np.int64) for key, v in out.items()}
    return EncodingWalk(
        layer_names=names,
        k=k,
        input_ids=ids.numpy().astype(np.int64),
        top_dot=arr["top_dot"],
        top_cos=arr["top_cos"],
        own_rank_dot=arr["own_dot"],
        own_rank_cos=arr["own_cos"],
        next_rank_dot=arr["next_dot"],
        next_rank_cos=arr["next_cos"],
        leave_dot=_leave(arr["own_dot"] < k),
        leave_cos=_leave(arr["own_cos"] < k),
        arrive_dot=_arrive(arr["next_dot"] < k),
        arrive_cos=_arrive(arr["next_cos"] < k),
        stack=stack,
    )


SHUFFLED = "the same model on the walk text shuffled at token level (first token kept)"


def shuffled_ids(input_ids: torch.Tensor, seed: int) -> torch.Tensor:
    """[T] the same tokens in a seeded random order, the first one kept in place (a
    beginning-of-text token stays where the model expects it).

    The walk of a shuffled text is the control of the walk claims: every position keeps
    its own token, so "leaving its own token's neighbourhood" is measured on the same
    tokens, but no text is left to read, so what survives is what the model's pass does to
    any token whatever surrounds it.
    """
    ids = input_ids.cpu().long()
    if len(ids) < 3:
        return ids.clone()
    gen = torch.Generator().manual_seed(int(seed))
    order = torch.randperm(len(ids) - 1, generator=gen) + 1
    return torch.cat([ids[:1], ids[order]])


def control_summary(walk: EncodingWalk, seed: int) -> dict[str, Any]:
    """The "control" record of a shuffled-text walk (``schema.WalkControl``)."""
    never = walk.leave_cos < 0
    return {
        "kind": SHUFFLED,
        "seed": int(seed),
        "frac_never_leave": sig(np.mean(never)),
        "frac_never_leave_ci": block_bootstrap_mean(never, seed=0),
    }


# --------------------------------------------------------------------------- decoding


@dataclass(frozen=True)
class DecodingWalk:
    """Generated tokens and the final vectors d_t that chose them.

    Attributes:
        mode: "greedy" or "sample".
        seed: the torch generator seed of sampling (None for greedy).
        temperature: sampling temperature (1.0 for greedy, unused).
        prompt_length: tokens of the prompt (an encoder-decoder: of the encoder's input).
        tokens: [N] generated token ids.
        vectors: [N, d] float32 d_t, the final-norm output at the last position (of the
            decoder for an encoder-decoder).
        logprob: [N] log-probability of each chosen token.
        top_dot, top_cos: [N, k] nearest tokens of d_t (top_dot is the top of the logits).
    """

    mode: str
    seed: int | None
    temperature: float
    prompt_length: int
    tokens: IntArray
    vectors: npt.NDArray[np.float32]
    logprob: Array
    top_dot: IntArray
    top_cos: IntArray

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "seed": self.seed,
            "temperature": self.temperature,
            "prompt_length": self.prompt_length,
            "tokens": [int(t) for t in self.tokens],
            "logprob": [sig(x) for x in self.logprob],
            "mean_logprob": sig(np.mean(self.logprob)) if len(self.logprob) else None,
            "top1_cos_is_chosen": sig(np.mean(self.top_cos[:, 0] == self.tokens))
            if len(self.tokens)
            else None,
        }


Stepper = Callable[[torch.Tensor], torch.Tensor]
"""Feeds new token ids [1, t] to a model holding its KV cache; returns the final vector
d [d] (float32, CPU) at the last position, after the final norm."""


def _decoder_only_stepper(view: ModelView) -> Stepper:
    """Steps of a decoder-only model's base, with its KV cache (first call: the prompt)."""
    keyword = cache_keyword(view)
    past: Any = None  # the model's KV cache

    def step(ids: torch.Tensor) -> torch.Tensor:
        nonlocal past
        out = view.base(input_ids=ids.to(view.device), use_cache=True, **{keyword: past})
        past = getattr(out, keyword)
        return out.last_hidden_state[0, -1].float().cpu()

    return step


def _seq2seq_stepper(view: ModelView, input_ids: torch.Tensor) -> Stepper:
    """Steps of an encoder-decoder's decoder, with its KV cache, through the top-level API.

    The encoder reads ``input_ids`` [T] once; each step's decoder tokens attend to that
    output through cross-attention. d is the decoder's last hidden state (after its final
    norm, as Hugging Face returns it), which ``view.unembed`` turns into the logits.
    """
    keyword = cache_keyword(view)
    with torch.inference_mode():
        encoded = view.base(input_ids=input_ids.long().to(view.device)[None]).last_hidden_state
    past: Any = None

    def step(ids: torch.Tensor) -> torch.Tensor:
        nonlocal past
        out = view.model(
            encoder_outputs=(encoded,),
            decoder_input_ids=ids.to(view.device),
            use_cache=True,
            output_hidden_states=True,
            **{keyword: past},
        )
        past = getattr(out, keyword)
        return out.decoder_hidden_states[-1][0, -1].float().cpu()

    return step


def _start(view: ModelView, input_ids: torch.Tensor) -> tuple[Stepper, torch.Tensor]:
    """The stepper of a generation and its first input [1, t]: the prompt for a decoder-only
    model, the start token for an encoder-decoder's decoder (the prompt goes to its encoder)."""
    if view.is_seq2seq:
        return _seq2seq_stepper(view, input_ids), torch.tensor([[view.decoder_start()]])
    return _decoder_only_stepper(view), input_ids.long()[None]


def _logits64(view: ModelView, d: torch.Tensor) -> torch.Tensor:
    """[V] float64 logits of one final vector d [d]: ``view.unembed(d, float64)`` chunk by
    chunk, so that W_U is never converted to float64 whole (a [d, V] copy per step)."""
    score = unembed_scores(view, d.to(view.device)[None], torch.float64)
    (logits,) = per_token(lambda ids: [score(ids)[0][0]], int(view.W_U.shape[1]), 8 * view.d_model)
    return logits


def _choose(logits: torch.Tensor, mode: str, temperature: float, gen: torch.Generator) -> int:
    """The next token from logits [V]: the argmax, or a draw from softmax(logits / T)."""
    if mode == "greedy":
        return int(logits.argmax())
    probs = torch.softmax(logits / temperature, -1)
    return int(torch.multinomial(probs, 1, generator=gen))


def decoding_walk(
    view: ModelView,
    input_ids: torch.Tensor,
    n: int,
    mode: str = "greedy",
    seed: int = 0,
    temperature: float = 1.0,
    k: int = 10,
    space: TokenSpace | None = None,
) -> DecodingWalk:
    """Generate n tokens, recording each final vector d_t (decoder-only and encoder-decoders).

    A decoder-only model continues the prompt; an encoder-decoder's decoder generates from
    its start token, the encoder reading the prompt. KV cache on; d_t (after the final norm)
    through ``view.unembed`` gives the logits; sampling draws from softmax(logits / T) with
    a ``torch.Generator`` seeded by ``seed``.

    Args:
        view: a decoder-only model or an encoder-decoder.
        input_ids: [T] the prompt.
        n: tokens to generate.
        mode: "greedy" or "sample".
        seed: generator seed for sampling.
        temperature: sampling temperature.
        k: nearest tokens kept per step.
        space: token vectors (default ``TokenSpace.of(view)``).
    """
    if view.is_encoder and not view.is_seq2seq:
        raise GeomlensError(
            f"the decoding walk generates text, which needs a decoder-only model or an "
            f"encoder-decoder; {view.name} is an encoder (drop --generate)."
        )
    if mode not in ("greedy", "sample"):
        raise GeomlensError(f"decoding mode must be 'greedy' or 'sample', not {mode!r}.")
    space, gen = space or TokenSpace.of(view), torch.Generator().manual_seed(seed)
    step, ids = _start(view, input_ids)
    tokens, vectors, logprobs = [], [], []
    with torch.inference_mode():
        for _ in range(n):
            d = step(ids)
            logits = _logits64(view, d)
            token = _choose(logits, mode, temperature, gen)
            tokens.append(token)
            vectors.append(d)
            logprobs.append(float(torch.log_softmax(logits, -1)[token]))
            ids = torch.tensor([[token]])
    v = torch.stack(vectors) if vectors else torch.zeros(0, view.d_model)
    dot, cos = space.readouts(v, k)
    assert dot.top_ids is not None and cos.top_ids is not None
    return DecodingWalk(
        mode=mode,
        seed=None if mode == "greedy" else seed,
        temperature=1.0 if mode == "greedy" else temperature,
        prompt_length=int(input_ids.shape[0]),
        tokens=np.array(tokens, dtype=np.int64),
        vectors=v.numpy().astype(np.float32),
        logprob=np.array(logprobs, dtype=np.float64),
        top_dot=dot.top_ids.numpy().astype(np.int64),
        top_cos=cos.top_ids.numpy().astype(np.int64),
    )


@dataclass(frozen=True)
class WalkProjection:
    """A 2-D view of decoding walks among the token vectors (unit vectors, PCA).

    Attributes:
        token_ids: [m] the tokens drawn: the prompt's last tokens, every generated token
            and the nearest tokens (by cosine) of every d_t.
        token_xy: [m, 2] their unit vectors projected on the first two principal axes.
        paths: mode -> [N, 2] the unit d_t of that walk on the same axes.
        explained: [2] share of the tokens' variance on each axis.
    """

    token_ids: IntArray
    token_xy: Array
    paths: dict[str, Array]
    explained: Array


def walk_projection(
    space: TokenSpace,
    walks: list[DecodingWalk],
    context_ids: torch.Tensor,
    n_context: int = 8,
    n_neighbours: int = 3,
) -> WalkProjection:
    """Project decoding walks and the tokens around them onto two principal axes.

    Vectors are scaled to unit length (the cosine geometry of the walk); the axes are the
    principal axes of the drawn tokens' unit vectors, signs fixed so that each axis's
    largest loading is positive.

    Args:
        space: the token vectors.
        walks: decoding walks of one prompt.
        context_ids: [T] the prompt.
        n_context: last prompt tokens drawn.
        n_neighbours: nearest tokens by cosine drawn per step.
    """
    chosen: list[int] = [int(t) for t in context_ids[-n_context:]]
    for w in walks:
        chosen += [int(t) for t in w.tokens]
        chosen += [int(t) for t in w.top_cos[:, :n_neighbours].reshape(-1)]
    ids = np.array(sorted(set(chosen)), dtype=np.int64)
    u = space.vectors[torch.as_tensor(ids)].double()
    u = u / u.norm(dim=-1, keepdim=True).clamp(min=1e-30)
    centre = u.mean(0)
    _, s, vt = torch.linalg.svd(u - centre, full_matrices=False)
    axes = vt[:2]
    big = axes.abs().argmax(-1)
    axes = axes * torch.sign(axes[torch.arange(axes.shape[0]), big])[:, None]
    paths = {}
    for w in walks:
        d = torch.as_tensor(w.vectors).double()
        d = d / d.norm(dim=-1, keepdim=True).clamp(min=1e-30)
        paths[w.mode] = ((d - centre) @ axes.T).numpy()
    var = s.pow(2)
    return WalkProjection(
        token_ids=ids,
        token_xy=((u - centre) @ axes.T).numpy(),
        paths=paths,
        explained=(var[:2] / var.sum().clamp(min=1e-30)).numpy(),
    )
