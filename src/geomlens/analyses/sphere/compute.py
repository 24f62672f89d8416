"""Layer norm as geometry: the sphere identity, the orientation of embeddings, top tokens.

Molina (2023, "Traveling Words") reads LayerNorm as three steps: project x onto the
hyperplane orthogonal to the all-ones vector (subtract the mean), rescale onto the sphere
of radius sqrt(d), then apply gamma (a per-axis stretch) and beta (a shift). RMSNorm skips
the projection: it rescales x itself onto the sphere of radius sqrt(d) (the sphere then
passes through every direction, the all-ones one included). With epsilon the radius is
``sqrt(d) * |x_c| / sqrt(|x_c|^2 + d * eps)``, a hair under sqrt(d).

Everything here is a pure function of tensors and a ``ModelView``; see docs/sphere.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from geomlens.analyses.common.vocab import Columns, per_token, scan_vocab
from geomlens.capturing.hooks import on_outputs
from geomlens.errors import GeomlensError
from geomlens.models.view import ModelView, NormView
from geomlens.stats.base import StateParts, check_state
from geomlens.stats.intervals import mean_difference
from geomlens.stats.rounding import sig

Array = npt.NDArray[np.float64]


def sphere_construction(x: torch.Tensor, norm: NormView, affine: bool = True) -> torch.Tensor:
    """The norm rebuilt as geometry, in float64.

    LayerNorm: ``x_c = x - (x . 1 / d) 1`` (projection onto the hyperplane orthogonal to
    1), ``y = sqrt(d) x_c / sqrt(|x_c|^2 + d eps)`` (onto the sphere of radius sqrt(d)),
    then ``gamma * y + beta``. RMSNorm: the same without the projection.

    Args:
        x: [..., d] inputs of the norm.
        norm: the norm (its gamma, beta, eps and kind are used; its module is not).
        affine: apply gamma and beta.

    Returns:
        [..., d] float64.
    """
    x = x.double()
    d = x.shape[-1]
    if norm.kind == "layernorm":
        ones = torch.ones(d, dtype=x.dtype, device=x.device) / math.sqrt(d)
        x = x - (x @ ones)[..., None] * ones
    y = math.sqrt(d) * x / torch.sqrt((x * x).sum(-1, keepdim=True) + d * norm.eps)
    if affine:
        y = y * norm.weight.double()
        if norm.bias is not None:
            y = y + norm.bias.double()
    return y


def norm_linear(v: torch.Tensor, norm: NormView | None) -> torch.Tensor:
    """The direction-carrying linear part of a norm: centre (LayerNorm), times gamma.

    The scale factor 1/rms depends on the whole vector, and beta on none of it, so this is
    what a norm does to an update ``v`` that is added to a residual stream.

    Args:
        v: [..., d].
        norm: the norm, or None (identity).
    """
    if norm is None:
        return v
    if norm.kind == "layernorm":
        v = v - v.mean(-1, keepdim=True)
    return v * norm.weight.to(v.dtype)


_NORM_COUNTS = ("n", "n_skip")
"""NormStats fields that count vectors (int64 in its state)."""

_NORM_SUMS = (
    "sum_norm",
    "sum_norm2",
    "sum_ones",
    "sum_out_radius",
    "sum_norm_skip",
    "sum_norm2_skip",
    "sum_ones_skip",
)
"""NormStats fields that sum over vectors (float64 in its state); ``max_rel_err`` is a max."""


@dataclass
class NormStats:
    """Streaming identity error and radius statistics of one norm's inputs.

    An ``Accumulator`` (``stats.base``): ``update(x, y, norm)`` per batch, ``merge``,
    ``state_dict``/``load_state_dict`` (the counts and sums; ``name``, ``kind``, ``d`` and
    ``hidden_layer`` are settings, given to the constructor) and ``finalize()``.

    Attributes:
        name: where the norm sits ("blocks.3.norm_attn", "final_norm", ...).
        kind: "layernorm" or "rmsnorm".
        d: the normalised width.
        hidden_layer: the hidden-state layer whose vectors it normalises directly (pre-norm
            input norms, the final norm, post-norm output norms), else None.
    """

    name: str
    kind: str
    d: int
    hidden_layer: int | None = None
    n: int = 0
    max_rel_err: float = 0.0
    sum_norm: float = 0.0
    sum_norm2: float = 0.0
    sum_ones: float = 0.0
    sum_out_radius: float = 0.0
    n_skip: int = 0
    sum_norm_skip: float = 0.0
    sum_norm2_skip: float = 0.0
    sum_ones_skip: float = 0.0

    def update(self, x: torch.Tensor, y: torch.Tensor, norm: NormView) -> None:
        """Add one batch of the norm's inputs ``x`` and outputs ``y``.

        Args:
            x: [..., d] inputs; when 3-D [B, T, d], position 0 is also left out in the
                ``*_skip_first`` statistics.
            y: [..., d] the module's outputs.
            norm: the norm.
        """
        built = sphere_construction(x, norm)
        y64 = y.double()
        err = (y64 - built).norm(dim=-1) / built.norm(dim=-1).clamp_min(1e-30)
        self.max_rel_err = max(self.max_rel_err, float(err.max()))
        x64 = x.double()
        r2 = (x64 * x64).sum(-1)
        r = r2.sqrt()
        s2 = x64.sum(-1) ** 2 / self.d
        ones = s2 / r2.clamp_min(1e-300)
        c2 = r2 - s2 if norm.kind == "layernorm" else r2  # |x_c|^2
        plain = math.sqrt(self.d) * c2.clamp_min(0).sqrt() / (c2 + self.d * norm.eps).sqrt()
        self.n += r.numel()
        self.sum_norm += float(r.sum())
        self.sum_norm2 += float((r * r).sum())
        self.sum_ones += float(ones.sum())
        self.sum_out_radius += float(plain.sum())
        if x.ndim == 3 and x.shape[1] > 1:
            rs, os_ = r[:, 1:], ones[:, 1:]
            self.n_skip += rs.numel()
            self.sum_norm_skip += float(rs.sum())
            self.sum_norm2_skip += float((rs * rs).sum())
            self.sum_ones_skip += float(os_.sum())

    def _settings(self) -> tuple[str, str, int, int | None]:
        return self.name, self.kind, self.d, self.hidden_layer

    def merge(self, other: NormStats) -> NormStats:
        """Add the statistics of the same norm over other vectors (in place); return self.

        Raises:
            GeomlensError: when ``other`` is another norm (name, kind, width or layer).
        """
        if other._settings() != self._settings():
            raise GeomlensError(
                "cannot merge norm statistics of different norms: "
                f"{other._settings()} into {self._settings()} (name, kind, d, hidden layer)."
            )
        for name in _NORM_COUNTS + _NORM_SUMS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.max_rel_err = max(self.max_rel_err, other.max_rel_err)
        return self

    def state_spec(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        """Name, shape and dtype of every tensor of ``state_dict()`` (all 0-d)."""
        spec: dict[str, tuple[tuple[int, ...], torch.dtype]] = {
            name: ((), torch.int64) for name in ("d", *_NORM_COUNTS)
        }
        spec.update({name: ((), torch.float64) for name in ("max_rel_err", *_NORM_SUMS)})
        return spec

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Counts, sums and the largest error as 0-d tensors (with ``d``, to check a load)."""
        return {
            name: torch.tensor(self.d if name == "d" else getattr(self, name), dtype=dtype)
            for name, (_, dtype) in self.state_spec().items()
        }

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore ``state_dict()`` exactly (float64 sums back to Python floats).

        Raises:
            GeomlensError: when it was saved for another width or is incomplete.
        """
        check_state(state, self.state_spec(), f"norm statistics ({self.name})")
        if int(state["d"]) != self.d:
            raise GeomlensError(
                f"the saved norm statistics of {self.name} are for width {int(state['d'])}, "
                f"not {self.d}."
            )
        for name in _NORM_COUNTS:
            setattr(self, name, int(state[name]))
        for name in ("max_rel_err", *_NORM_SUMS):
            setattr(self, name, float(state[name]))

    def finalize(self) -> dict[str, Any]:
        """The statistics as a JSON-able dict: the same as ``to_dict()``."""
        return self.to_dict()

    def to_dict(self) -> dict[str, Any]:
        def moments(n: int, s: float, s2: float) -> tuple[float | None, float | None]:
            if n == 0:
                return None, None
            mean = s / n
            return sig(mean), sig(math.sqrt(max(s2 / n - mean * mean, 0.0)))

        mean, std = moments(self.n, self.sum_norm, self.sum_norm2)
        mean_s, std_s = moments(self.n_skip, self.sum_norm_skip, self.sum_norm2_skip)
        return {
            "name": self.name,
            "kind": self.kind,
            "d": self.d,
            "hidden_layer": self.hidden_layer,
            "n_vectors": self.n,
            "max_rel_err": sig(self.max_rel_err, 6),
            "sqrt_d": sig(math.sqrt(self.d)),
            "input_norm_mean": mean,
            "input_norm_std": std,
            "ones_share_mean": sig(self.sum_ones / self.n) if self.n else None,
            "output_radius_mean": sig(self.sum_out_radius / self.n) if self.n else None,
            "input_norm_mean_skip_first": mean_s,
            "input_norm_std_skip_first": std_s,
            "ones_share_mean_skip_first": sig(self.sum_ones_skip / self.n_skip)
            if self.n_skip
            else None,
        }


def model_norms(view: ModelView) -> list[tuple[str, NormView, int | None]]:
    """Every norm of the model with its name and the hidden layer it reads or writes.

    Pre-norm (and sandwich): ``norm_attn`` of block i reads hidden layer i; parallel blocks:
    both norms read it (a shared norm is listed once); the final norm reads the last.
    Post-norm: ``norm_mlp`` of block i writes hidden layer i + 1; the embedding norm writes
    layer 0. Norms of sub-block outputs (sandwich, post-sublayer) read no hidden layer.

    Returns:
        (name, norm, hidden_layer or None) in forward order.
    """
    out: list[tuple[str, NormView, int | None]] = []
    if view.embedding_norm is not None:
        out.append(("embedding_norm", view.embedding_norm, 0))
    for b in view.blocks:
        pre = b.placement == "pre"
        if b.norm_attn.kind != "identity":  # ModernBERT's first block has none
            out.append((f"blocks.{b.index}.norm_attn", b.norm_attn, b.index if pre else None))
        reads = {"parallel": b.index, "post": b.index + 1}.get(b.layout)
        if b.norm_mlp.module is not b.norm_attn.module:
            out.append((f"blocks.{b.index}.norm_mlp", b.norm_mlp, reads))
        for key, norm in b.extra_norms.items():
            out.append((f"blocks.{b.index}.{key}", norm, None))
    if view.final_norm is not None:
        out.append(("final_norm", view.final_norm, view.n_layers))
    return out


class NormTap(StateParts):
    """Every norm's ``NormStats`` over the first ``windows`` windows of the capture (a
    ``Tap``, see ``capturing.taps``): hooks on each norm module feed it its inputs and
    outputs as the capture runs them."""

    attention = False
    what = "norm-statistics"

    def __init__(self, view: ModelView, windows: int):
        self.windows = windows
        self.norms = {name: norm for name, norm, _ in model_norms(view)}
        self.stats = {
            name: NormStats(name, norm.kind, int(norm.weight.shape[-1]), layer)
            for name, norm, layer in model_norms(view)
        }

    def during(self, view: ModelView) -> AbstractContextManager[None]:
        modules = {name: norm.module for name, norm in self.norms.items()}
        return on_outputs(modules, self._update)

    def _update(self, name: str, x: torch.Tensor, y: torch.Tensor) -> None:
        self.stats[name].update(x, y, self.norms[name])

    def after(self, attentions: Sequence[torch.Tensor] | None) -> None:
        """Nothing: the hooks did the work."""

    def merge(self, other: NormTap) -> NormTap:
        for name, stats in self.stats.items():
            stats.merge(other.stats[name])
        return self

    def parts(self) -> dict[str, NormStats]:
        return self.stats

    def finalize(self) -> list[NormStats]:
        """Each norm's statistics, in forward order."""
        return list(self.stats.values())


@dataclass(frozen=True)
class Identity:
    """The sphere identity over every norm: ``max_rel_err`` is the largest of all (None
    for a model with no norm read)."""

    max_rel_err: float | None
    norms: list[dict[str, Any]]
    n_windows: int
    dtype: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_rel_err": self.max_rel_err,
            "dtype": self.dtype,
            "n_windows": self.n_windows,
            "definition": "max over vectors of |norm(x) - construction(x)| / |construction(x)|",
            "norms": [
                {k: r[k] for k in ("name", "kind", "d", "n_vectors", "max_rel_err")}
                for r in self.norms
            ],
        }


def identity_result(stats: Sequence[NormStats], n_windows: int, dtype: str) -> Identity:
    """Collect per-norm statistics into the identity result."""
    rows = [s.finalize() for s in stats]
    worst = max((r["max_rel_err"] for r in rows), default=None)
    err = None if worst is None else sig(worst, 6)
    return Identity(max_rel_err=err, norms=rows, n_windows=n_windows, dtype=dtype)


def _summary(c: torch.Tensor) -> dict[str, float]:
    c64 = c.double().cpu().numpy()
    return {
        "mean": sig(c64.mean()),
        "p5": sig(np.percentile(c64, 5)),
        "min": sig(c64.min()),
    }


@dataclass(frozen=True)
class Orientation:
    """Cosines between token embeddings and their normalised versions, and radii per norm.

    Attributes:
        norms: per norm entry {"norm": name, "plain": summary, "affine": summary}, where
            summaries hold mean, p5 and min of cos(e, N(e)) without / with gamma and beta.
        cosines: name -> ("plain" | "affine") -> [vocab] cosines (for figures; not in JSON).
        layers: per norm, the radius of its inputs (mean, std) and the all-ones share.
    """

    norms: list[dict[str, Any]]
    layers: list[dict[str, Any]]
    cosines: dict[str, dict[str, Array]] = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"embeddings": self.norms, "layers": self.layers}


def embedding_norm_for(view: ModelView) -> tuple[str, NormView]:
    """The first norm token embeddings meet: the embedding norm, else block 0's input norm."""
    if view.embedding_norm is not None:
        return "embedding_norm", view.embedding_norm
    if view.blocks[0].norm_attn.kind == "identity" and view.blocks[0].mixing is not None:
        return readout_norm(view)  # the hidden-state tier knows the readout's norm only
    return "blocks.0.norm_attn", view.blocks[0].norm_attn


def readout_norm(view: ModelView) -> tuple[str, NormView]:
    """The last norm before the unembedding: the final norm, else (post-norm) the last block's."""
    if view.final_norm is not None:
        return "final_norm", view.final_norm
    last = view.blocks[-1]
    return f"blocks.{last.index}.norm_mlp", last.norm_mlp


def embedding_cosines(W_E: torch.Tensor, norm: NormView, scale: float = 1.0) -> dict[str, Array]:
    """cos(e, N(e)) for every embedding row, without ("plain") and with ("affine") gamma/beta.

    Computed over the vocabulary in chunks (``vocab.per_token``): the float64 copies of
    the embeddings and their images on the sphere exist one chunk at a time; only the
    [vocab] cosines are kept.

    Args:
        W_E: [vocab, d] embeddings.
        norm: the norm.
        scale: the embedding scale, multiplied in the embeddings' dtype as on input.
    """

    def cosines(ids: slice) -> list[torch.Tensor]:
        e = (W_E[ids] * scale if scale != 1.0 else W_E[ids]).double()
        out = []
        for affine in (False, True):
            y = sphere_construction(e, norm, affine=affine)
            out.append((e * y).sum(-1) / (e.norm(dim=-1) * y.norm(dim=-1)).clamp_min(1e-300))
        return out

    plain, affine = per_token(cosines, W_E.shape[0], 8 * 6 * W_E.shape[1])
    return {"plain": plain.cpu().numpy(), "affine": affine.cpu().numpy()}


def orientation(view: ModelView, stats: Sequence[NormStats]) -> Orientation:
    """Embedding orientation under the first and the readout norm; input radii per norm."""
    rows, cosines = [], {}
    seen = set()
    for name, norm in (embedding_norm_for(view), readout_norm(view)):
        if name in seen or norm.kind == "identity":  # a norm the view does not know
            continue
        seen.add(name)
        cos = embedding_cosines(view.W_E, norm, view.embedding_scale)
        cosines[name] = cos
        rows.append(
            {
                "norm": name,
                "kind": norm.kind,
                "plain": _summary(torch.from_numpy(cos["plain"])),
                "affine": _summary(torch.from_numpy(cos["affine"])),
            }
        )
    layers = []
    for s in stats:
        r = s.finalize()
        r.pop("max_rel_err")
        layers.append(r)
    return Orientation(norms=rows, layers=layers, cosines=cosines)


@dataclass(frozen=True)
class TopTokens:
    """Tokens whose embeddings score highest and lowest, three ways.

    Attributes:
        k: how many.
        readout_norm: the norm used for (b) and (c).
        tables: "norm" (raw |e|), "plain" (final norm without gamma/beta),
            "affine" (with them) -> {"top": [str], "bottom": [str], "top_ids": [int],
            "bottom_ids": [int], "top_scores": [float], "bottom_scores": [float]}.
        freq_rank: table -> mean corpus-frequency rank (1 = most frequent) of its top-k,
            and "vocab_mean" (the rank an average token has).
        zipf: table -> mean English Zipf frequency of its top-k, and "vocab_mean".
        zipf_shift: mean Zipf of the top-k with gamma/beta minus without, with a 95%
            bootstrap interval (each list of k resampled); None without frequencies.
        readout_has_beta: whether the readout norm has a beta (an RMSNorm has gamma only).
        compared: which lists ``zipf`` and ``zipf_shift`` read: whole words (tables
            "plain_words" and "affine_words", ``whole_words``), or every token where the
            vocabulary has too few whole words.
    """

    k: int
    readout_norm: str
    tables: dict[str, dict[str, list[Any]]]
    freq_rank: dict[str, float | None]
    zipf: dict[str, float | None]
    zipf_shift: dict[str, Any] | None
    readout_has_beta: bool | None = None
    compared: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"k": self.k, "readout_norm": self.readout_norm}
        if self.readout_has_beta is not None:
            out["readout_has_beta"] = self.readout_has_beta
        if self.compared is not None:
            out["zipf_compared"] = self.compared
        out.update(self.tables)
        out["mean_freq_rank"] = self.freq_rank
        out["mean_english_zipf"] = self.zipf
        out["english_zipf_shift"] = self.zipf_shift
        out["score"] = {
            "norm": "|W_E[i]|",
            "plain": "N0(e_i) . W_U[:, i], N0 = readout norm without gamma/beta",
            "affine": "N(e_i) . W_U[:, i], N = readout norm with gamma/beta",
        }
        return out


def frequency_ranks(counts: Array) -> Array:
    """Rank of each token by corpus count, 1 = most frequent (ties share their mean rank)."""
    from scipy.stats import rankdata

    return np.asarray(rankdata(-np.asarray(counts, dtype=np.float64), method="average"))


def top_tokens(
    view: ModelView,
    tokens: Sequence[str] | None = None,
    counts: Array | None = None,
    k: int = 10,
    zipf: Array | None = None,
    seed: int = 0,
) -> TopTokens:
    """Top and bottom k tokens by raw norm, and by the readout's score of their own embedding.

    The three scores are computed over the vocabulary in chunks and merged (``vocab``):
    no [vocab, d] float64 copy of the embeddings or the unembedding is held whole. Equal
    scores: the top lists ascending ids first, the bottom descending ids first (the two
    ends of one order).

    Args:
        view: the model.
        tokens: [vocab] token strings (None: ids as strings).
        counts: [vocab] corpus counts for the frequency ranks (None: no ranks).
        k: how many.
        zipf: [vocab] English Zipf frequencies (``english_zipf``; None: not compared).
        seed: seeds the bootstrap of the Zipf shift.
    """
    V = int(view.W_E.shape[0])
    name, norm = readout_norm(view)
    words = None if zipf is None or tokens is None else whole_words(tokens, zipf)
    if words is not None and int(words.sum()) < k:
        words = None
    mask = None if words is None else torch.from_numpy(words)
    (got,) = scan_vocab(
        lambda ids: [torch.stack(_own_scores(view, norm, ids, mask))],
        3 if mask is None else 5,
        V,
        column_bytes=8 * 6 * view.d_model,
        k=k,
        bottom=k,
    )
    top_ids, top_s = got.top_ids, got.top_scores
    low_ids, low_s = got.bottom_ids, got.bottom_scores
    assert top_ids is not None and top_s is not None and low_ids is not None
    assert low_s is not None
    ranks = frequency_ranks(counts) if counts is not None else None
    tables: dict[str, dict[str, list[Any]]] = {}
    freq: dict[str, float | None] = {}
    common: dict[str, float | None] = {}
    keys = ("norm", "plain", "affine") + (() if mask is None else ("plain_words", "affine_words"))
    for row, key in enumerate(keys):
        top, bottom = top_ids[row].tolist(), low_ids[row].tolist()
        tables[key] = _token_table(tokens, top, bottom, top_s[row], low_s[row], key)
        freq[key] = None if ranks is None else sig(ranks[top].mean())
        common[key] = None if zipf is None else sig(zipf[top].mean())
    freq["vocab_mean"] = None if ranks is None else sig(ranks.mean())
    common["vocab_mean"] = None if zipf is None else sig(zipf.mean())
    shift, compared = None, None
    if zipf is not None:
        affine, plain = ("affine", "plain") if mask is None else ("affine_words", "plain_words")
        compared = WORD_PIECES if mask is None else WHOLE_WORDS
        shift = mean_difference(
            zipf[tables[affine]["top_ids"]], zipf[tables[plain]["top_ids"]], seed
        )
        if mask is not None:  # the claim's means: of the lists it compares
            common["affine"] = sig(zipf[tables[affine]["top_ids"]].mean())
            common["plain"] = sig(zipf[tables[plain]["top_ids"]].mean())
    return TopTokens(
        k=k,
        readout_norm=name,
        tables=tables,
        freq_rank=freq,
        zipf=common,
        zipf_shift=shift,
        readout_has_beta=norm.bias is not None,
        compared=compared,
    )


def _token_table(
    tokens: Sequence[str] | None,
    top: list[int],
    bottom: list[int],
    top_scores: Any,
    bottom_scores: Any,
    key: str,
) -> dict[str, list[Any]]:
    """One ranked list of ``top_tokens``: tokens, ids and scores at both ends (a list of
    whole words keeps its top only: the bottom of it would be the rest of the vocabulary)."""
    table: dict[str, list[Any]] = {
        "top": [_tok(tokens, i) for i in top],
        "bottom": [_tok(tokens, i) for i in bottom],
        "top_ids": top,
        "bottom_ids": bottom,
        "top_scores": [sig(float(v)) for v in top_scores],
        "bottom_scores": [sig(float(v)) for v in bottom_scores],
    }
    if key.endswith("_words"):
        for end in ("bottom", "bottom_ids", "bottom_scores"):
            del table[end]
    return table


WHOLE_WORDS = (
    "whole words: the top tokens among those that start a word (decoded with a leading "
    "space), are letters only and are among wordfreq's 50,000 most frequent words of "
    "their language"
)
WORD_PIECES = (
    "every token, word pieces included: this vocabulary has fewer whole words (decoded with "
    "a leading space, letters only, among wordfreq's 50,000 most frequent words of their "
    "language) than the lists' length"
)


def whole_words(
    tokens: Sequence[str], zipf: Array, is_word: Callable[[str], bool] | None = None
) -> npt.NDArray[np.bool_]:
    """[vocab] whether each token is a whole word: it starts a word (its text alone begins
    with a space, as byte-level BPE writes a word's first piece), the rest is letters
    only, wordfreq scores it (a Zipf frequency above 0) and it is a word of its language
    (``is_word``, default ``word_frequency.is_word``: among wordfreq's 50,000 most
    frequent words). The first piece of a longer word (" elig", " preserv") is not one,
    though wordfreq gives such strings a small frequency of their own."""
    if is_word is None:
        from geomlens.analyses.sphere.word_frequency import is_word as listed

        is_word = listed
    out = np.zeros(len(tokens), dtype=bool)
    for i, t in enumerate(tokens):
        word = t[1:] if t[:1] == " " else ""
        out[i] = bool(word) and word.isalpha() and zipf[i] > 0 and is_word(word)
    return out


def _own_scores(
    view: ModelView, norm: NormView, ids: Columns, words: torch.Tensor | None = None
) -> list[torch.Tensor]:
    """For the tokens ``ids``, in float64: [c] each, |W_E[i]|, N0(s e_i) . W_U[:, i] and
    N(s e_i) . W_U[:, i] (``s`` the embedding scale; N0 without gamma/beta); with
    ``words`` ([vocab] bool), the last two again with every other token at -inf."""
    W_E = view.W_E[ids].double()
    W_U = view.W_U[:, ids].double()
    e = W_E * view.embedding_scale
    plain = (sphere_construction(e, norm, affine=False) * W_U.T).sum(-1)
    affine = (sphere_construction(e, norm, affine=True) * W_U.T).sum(-1)
    out = [W_E.norm(dim=-1), plain, affine]
    if words is not None:
        keep = words[ids]
        out += [x.masked_fill(~keep, -math.inf) for x in (plain, affine)]
    return out


def _tok(tokens: Sequence[str] | None, i: int) -> str:
    return str(i) if tokens is None else tokens[i]
