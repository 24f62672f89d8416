"""Readouts over the vocabulary in chunks: merged top-k, ranks of given ids, logsumexp.

A readout scores M vectors against every token (logits, inner products, cosines). Doing it
in one matrix product holds an [M, vocab] score matrix, which for a 262k vocabulary
(Gemma 3) is what set the peak memory of a report. Here the vocabulary is walked in chunks
of columns whose scores fit a byte budget (``CHUNK_BYTES``), and only what the analyses
keep is carried from chunk to chunk:

- the k best and/or worst ids per row, merged chunk by chunk;
- the rank of one given id per row: the number of tokens scoring strictly higher, counted
  chunk by chunk;
- the logsumexp of each row (for log-softmax), merged with ``logaddexp``.

**Tie rule.** The vocabulary's order is by descending score, equal scores by ascending id.
``top`` is the first k of that order; ``bottom`` its last k read from the end (ascending
score, equal scores by descending id), so that top and bottom are the two ends of one
order. ``reference_order`` applies the same rule to a whole score row (tests, and any
caller that already holds one); torch.topk alone does not fix the order of equal scores.

The score function gets the columns as a slice (a chunk) or an id tensor (the targets of
ranks) and returns one or several score matrices computed from one product (the walk's
inner products and cosines share theirs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from geomlens.models.view import ModelView

CHUNK_BYTES = 64 * 2**20
"""Bytes of scores per chunk (all score matrices of one chunk together); read at call time,
so tests can lower it to force many chunks."""

Columns = slice | torch.Tensor
ScoreFn = Callable[[Columns], Sequence[torch.Tensor]]
"""columns (a slice of ids, or [n] ids) -> score matrices [M, n] (one or several)."""


@dataclass(frozen=True)
class Readout:
    """What one score matrix leaves after the scan (each field None unless asked for).

    Attributes:
        top_ids, top_scores: [M, k] best tokens, best first (tie rule in the module doc).
        bottom_ids, bottom_scores: [M, k] worst tokens, worst first.
        ranks: [M] int64, the number of tokens scoring strictly higher than the given id.
        logsumexp: [M] float64, log sum over the vocabulary of exp(score).
    """

    top_ids: torch.Tensor | None = None
    top_scores: torch.Tensor | None = None
    bottom_ids: torch.Tensor | None = None
    bottom_scores: torch.Tensor | None = None
    ranks: torch.Tensor | None = None
    logsumexp: torch.Tensor | None = None


def chunk_columns(vocab: int, column_bytes: int) -> int:
    """Tokens per chunk so that a chunk's tensors (``column_bytes`` per token) fit
    ``CHUNK_BYTES``; at least one token."""
    return max(1, min(vocab, CHUNK_BYTES // max(1, column_bytes)))


def chunks(vocab: int, column_bytes: int) -> list[slice]:
    """The vocabulary ids 0..vocab-1 as consecutive slices of ``chunk_columns`` tokens."""
    step = chunk_columns(vocab, column_bytes)
    return [slice(start, min(start + step, vocab)) for start in range(0, vocab, step)]


def per_token(
    fn: Callable[[slice], Sequence[torch.Tensor]], vocab: int, column_bytes: int
) -> list[torch.Tensor]:
    """Per-token values computed chunk by chunk: ``fn(ids)`` -> tensors [c] (one or more),
    concatenated to [vocab] each. For scores whose inputs are [vocab, d] matrices (the
    embeddings through a norm, in float64), of which only one chunk is held at a time."""
    parts = [list(fn(ids)) for ids in chunks(vocab, column_bytes)]
    return [torch.cat([p[j] for p in parts]) for j in range(len(parts[0]))]


def ordered(
    scores: torch.Tensor, ids: torch.Tensor, high_id_first: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort each row by descending score, equal scores by id (ascending, or descending).

    Two stable sorts: by id, then by score, so the order does not depend on how the
    candidates were gathered. ``scores`` and ``ids`` are [M, n]; returns both reordered.
    """
    by_id = torch.argsort(-ids if high_id_first else ids, dim=-1, stable=True)
    s, i = scores.gather(-1, by_id), ids.gather(-1, by_id)
    by_score = torch.argsort(s, dim=-1, descending=True, stable=True)
    return s.gather(-1, by_score), i.gather(-1, by_score)


def _chunk_best(
    s: torch.Tensor, start: int, k: int, high_id_first: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """The k best of a chunk's scores [M, c] under the tie rule: ([M, k], [M, k] ids).

    torch.topk finds the k-th score; every score at least as high is a candidate. Rows
    without a tie at that threshold have exactly k candidates, torch.topk's own k: one
    topk of k + 1 shows it (the (k+1)-th score is below the k-th), with no [M, c] mask
    to count. The rare rows with a tie pick among all their candidates.
    """
    kk = min(k, s.shape[-1])
    if kk == s.shape[-1]:  # every column is a candidate
        cols = torch.arange(kk).expand(s.shape[0], kk)
        return ordered(s.gather(-1, cols), cols + start, high_id_first)
    values, found = torch.topk(s, kk + 1, dim=-1)
    kth = values[:, kk - 1 : kk]
    if bool((values[:, kk:] < kth).all()):  # no tie at the k-th score: the candidates
        cols = found[:, :kk]  # (``ordered`` sorts them by id, then by score)
        return ordered(s.gather(-1, cols), cols + start, high_id_first)
    mask = s >= kth
    out_s = torch.empty(s.shape[0], kk, dtype=s.dtype)
    out_i = torch.empty(s.shape[0], kk, dtype=torch.long)
    for row in range(s.shape[0]):
        cols = mask[row].nonzero()[:, 0]
        rs, ri = ordered(s[row, cols][None], cols[None] + start, high_id_first)
        out_s[row], out_i[row] = rs[0, :kk], ri[0, :kk]
    return out_s, out_i


def _merge(
    best: tuple[torch.Tensor, torch.Tensor] | None,
    new: tuple[torch.Tensor, torch.Tensor],
    k: int,
    high_id_first: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The k best of two candidate sets ([M, n] scores and ids each) under the tie rule."""
    if best is None:
        return new[0][:, :k], new[1][:, :k]
    s, i = ordered(
        torch.cat([best[0], new[0]], -1), torch.cat([best[1], new[1]], -1), high_id_first
    )
    return s[:, :k], i[:, :k]


class _Scan:
    """Running state of one score matrix over the chunks."""

    def __init__(self, k: int, bottom: int, target: torch.Tensor | None, lse: bool) -> None:
        self.k, self.bottom, self.lse = k, bottom, lse
        self.top: tuple[torch.Tensor, torch.Tensor] | None = None
        self.low: tuple[torch.Tensor, torch.Tensor] | None = None
        self.target = target  # [M, R] the targets' scores, as scored alone
        self.above = None if target is None else torch.zeros(target.shape, dtype=torch.long)
        self.logsum: torch.Tensor | None = None

    def add(self, s: torch.Tensor, start: int) -> None:
        """Fold in the scores [M, c] of the chunk that begins at id ``start``."""
        if self.k:
            self.top = _merge(self.top, _chunk_best(s, start, self.k, False), self.k, False)
        if self.bottom:
            low = _chunk_best(-s, start, self.bottom, True)
            self.low = _merge(self.low, low, self.bottom, True)
        if self.target is not None and self.above is not None:
            for j in range(self.target.shape[1]):  # one [M, c] comparison at a time
                self.above[:, j] += torch.count_nonzero(s > self.target[:, j : j + 1], dim=-1)
        if self.lse:
            chunk = torch.logsumexp(s.double(), dim=-1)
            self.logsum = chunk if self.logsum is None else torch.logaddexp(self.logsum, chunk)

    def result(self) -> Readout:
        return Readout(
            top_ids=None if self.top is None else self.top[1],
            top_scores=None if self.top is None else self.top[0],
            bottom_ids=None if self.low is None else self.low[1],
            bottom_scores=None if self.low is None else -self.low[0],
            ranks=self.above,
            logsumexp=self.logsum,
        )


def _target_scores(score: ScoreFn, ids: torch.Tensor) -> list[torch.Tensor]:
    """[M, R] score of each row's own ids [M, R], per score matrix, from one product over
    the distinct ids (M x n_distinct scores, not M x vocab)."""
    unique, where = torch.unique(ids, return_inverse=True)
    return [s.gather(-1, where) for s in score(unique)]


def scan_vocab(
    score: ScoreFn,
    n_rows: int,
    vocab: int,
    *,
    n_scores: int = 1,
    column_bytes: int | None = None,
    k: int = 0,
    bottom: int = 0,
    rank_ids: torch.Tensor | None = None,
    logsumexp: bool = False,
) -> list[Readout]:
    """Walk the vocabulary in chunks and keep, per score matrix, what is asked for.

    Args:
        score: columns -> ``n_scores`` score matrices [n_rows, n_columns] (CPU tensors).
        n_rows: M, the vectors scored; vocab: V, the tokens.
        n_scores: how many matrices ``score`` returns (the chunk budget covers all).
        column_bytes: bytes a chunk holds per token (default: the float32 scores,
            ``4 * n_rows * n_scores``); larger where ``score`` builds per-token inputs.
        k: best tokens kept per row (0: none); bottom: worst tokens kept (0: none).
        rank_ids: [M] or [M, R] ids per row whose rank (the number of tokens scoring
            strictly higher) is counted; ``ranks`` has the same shape.
        logsumexp: also merge each row's logsumexp (in float64).

    Ranks compare with each target's score as ``score`` gives it for the target alone; a
    chunk's product can round that score differently by an ulp, so the chunk holding the
    target checks it, and rows where the two differ are counted again with the chunk's
    own value. Each rival keeps the value of its own chunk's product: where the BLAS sums
    in an order that follows the matrix's shape, a rival within a rounding step of the
    target can fall the other way than in the whole-vocabulary product (a rank off by
    one, of 49,152, was seen so on an AMD EPYC machine).
    """
    ids = None if rank_ids is None else rank_ids.long().reshape(n_rows, -1)
    targets = None if ids is None else _target_scores(score, ids)
    scans = [
        _Scan(k, bottom, None if targets is None else targets[j], logsumexp)
        for j in range(n_scores)
    ]
    seen: list[torch.Tensor | None] = [None] * n_scores
    parts = chunks(vocab, column_bytes or 4 * n_rows * n_scores)
    for cols in parts:
        for j, s in enumerate(score(cols)):
            scans[j].add(s, cols.start)
            if ids is not None:
                seen[j] = _seen_target(seen[j], s, ids, cols.start, cols.stop)
    results = [scan.result() for scan in scans]
    if ids is not None and targets is not None:
        results = _recount(score, results, targets, seen, parts)
    if rank_ids is not None and rank_ids.ndim == 1:
        results = [dataclasses.replace(r, ranks=_flat(r.ranks)) for r in results]
    return results


def _flat(ranks: torch.Tensor | None) -> torch.Tensor | None:
    return None if ranks is None else ranks[:, 0]


def _seen_target(
    seen: torch.Tensor | None, s: torch.Tensor, ids: torch.Tensor, start: int, stop: int
) -> torch.Tensor:
    """Record [M, R] each target's score (ids [M, R]) as the chunk holding it computed it."""
    out = torch.full(ids.shape, float("nan"), dtype=s.dtype) if seen is None else seen
    rows, which = ((ids >= start) & (ids < stop)).nonzero(as_tuple=True)
    out[rows, which] = s[rows, ids[rows, which] - start]
    return out


def _recount(
    score: ScoreFn,
    results: list[Readout],
    targets: list[torch.Tensor],
    seen: list[torch.Tensor | None],
    parts: list[slice],
) -> list[Readout]:
    """Count ranks again, against the in-chunk target scores, for rows where the target's
    own score differed from it (rounding); no pass at all when none did."""
    bad = [(t != s) for t, s in zip(targets, seen, strict=True) if s is not None]
    if not any(bool(b.any()) for b in bad):
        return results
    counts = [torch.zeros_like(t, dtype=torch.long) for t in targets]
    for cols in parts:
        for j, s in enumerate(score(cols)):
            ref = seen[j]
            for col in range(0 if ref is None else ref.shape[1]):
                assert ref is not None
                counts[j][:, col] += torch.count_nonzero(s > ref[:, col : col + 1], dim=-1)
    out = []
    for got, b, c in zip(results, bad, counts, strict=True):
        assert got.ranks is not None
        out.append(dataclasses.replace(got, ranks=torch.where(b, c, got.ranks)))
    return out


def reference_order(scores: torch.Tensor) -> torch.Tensor:
    """[..., V] scores -> [..., V] ids in the tie rule's order (best first), whole rows."""
    return torch.argsort(scores, dim=-1, descending=True, stable=True)


def matrix_scores(x: torch.Tensor, W: torch.Tensor) -> ScoreFn:
    """The plain readout ``x @ W[:, columns]`` in float32: x [M, d], W [d, V] (any dtype)."""
    x32 = x.float()

    def score(cols: Columns) -> list[torch.Tensor]:
        return [(x32 @ W[:, cols].float()).cpu()]

    return score


def unembed_scores(view: ModelView, x: torch.Tensor, dtype: torch.dtype | None = None) -> ScoreFn:
    """``view.unembed(x, dtype)`` restricted to columns: the same operations in the same
    order (head transform, output scale, product, bias, soft-capping), on one chunk of
    W_U at a time.

    Args:
        x: [M, d] vectors already through the readout norm.
        dtype: the product's dtype (default: the unembedding's own).
    """
    dtype = dtype or view.W_U.dtype
    x = view.transformed(x)
    if view.unembedding_scale != 1.0:
        x = x * view.unembedding_scale
    xd = x.to(dtype)

    def score(cols: Columns) -> list[torch.Tensor]:
        logits = xd @ view.W_U[:, cols].to(dtype)
        if view.b_U is not None:
            logits = logits + view.b_U[cols].to(dtype)
        if view.logit_softcap is not None:
            logits = view.logit_softcap * torch.tanh(logits / view.logit_softcap)
        return [logits.cpu()]

    return score
