"""Aggregations of the concept-space tests: many vectors into one, and norms.

Token vectors of a segment become one vector by a WORD_AGG scheme; a vector is then
normalised by a NORM scheme; segment and example vectors are averaged (or kept) by
SEGMENT_AGG and EXAMPLE_AGG. Every function takes and returns float tensors whose last
dimension is the model width d.
"""

from __future__ import annotations

import torch

WORD_AGGS = ("mean", "w1mean", "last", "relu|mean", "relu+|mean", "-relu|mean", "-relu+|mean")
NORMS = ("none", "L2", "varNorm", "zNorm")
GROUP_AGGS = ("mean", "none")
EPS = 1e-12


def word_weights(n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The ``w1mean`` weights of N positions: position t (1-based) gets t / N, then sum to 1.

    Args:
        n: number of positions.
        dtype: the weights' dtype.

    Returns:
        [n] weights proportional to 1/N, 2/N, ..., N/N, normalised to sum to 1.
    """
    w = torch.arange(1, n + 1, dtype=dtype) / n
    return w / w.sum()


def _active_mean(parts: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    """Per coordinate, the mean over the rows where ``active`` holds (0 where none does)."""
    count = active.sum(dim=0).to(parts.dtype)
    return parts.sum(dim=0) / count.clamp(min=1.0)


def word_aggregate(x: torch.Tensor, scheme: str) -> torch.Tensor:
    """Aggregate the token vectors of one segment into one vector.

    Args:
        x: [N, d] token vectors in order (N >= 1).
        scheme: one of ``WORD_AGGS``:
            "mean": (1/N) sum_t x_t.
            "w1mean": sum_t w_t x_t with w_t proportional to t/N (later tokens weigh more).
            "last": x_N.
            "relu|mean": (1/N) sum_t max(x_t, 0) (positive features, averaged over all tokens).
            "-relu|mean": (1/N) sum_t min(x_t, 0) (negative features, sign kept).
            "relu+|mean", "-relu+|mean": the same parts averaged per coordinate only over
                the tokens where that coordinate is positive (negative), i.e. the mean
                strength of a feature where it is present.

    Returns:
        [d] the segment vector.
    """
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"word_aggregate needs [N>=1, d] vectors, got {tuple(x.shape)}")
    if scheme == "mean":
        return x.mean(dim=0)
    if scheme == "w1mean":
        return word_weights(x.shape[0], x.dtype).to(x.device) @ x
    if scheme == "last":
        return x[-1]
    if scheme == "relu|mean":
        return torch.relu(x).mean(dim=0)
    if scheme == "-relu|mean":
        return -torch.relu(-x).mean(dim=0)
    if scheme == "relu+|mean":
        return _active_mean(torch.relu(x), x > 0)
    if scheme == "-relu+|mean":
        return -_active_mean(torch.relu(-x), x < 0)
    raise ValueError(f"unknown word aggregation {scheme!r}; use one of {', '.join(WORD_AGGS)}")


def normalise(v: torch.Tensor, scheme: str) -> torch.Tensor:
    """Normalise vectors along the last dimension.

    Args:
        v: [..., d] vectors.
        scheme: one of ``NORMS``:
            "none": v.
            "L2": v / ||v||_2.
            "varNorm": v / std(v) (unit variance over the d coordinates, not centred).
            "zNorm": (v - mean(v)) / std(v) (zero mean, unit variance over coordinates).

    Returns:
        [..., d] normalised vectors (a zero vector stays zero).
    """
    if scheme == "none":
        return v
    if scheme == "L2":
        return v / v.norm(dim=-1, keepdim=True).clamp(min=EPS)
    if scheme == "varNorm":
        return v / v.std(dim=-1, unbiased=False, keepdim=True).clamp(min=EPS)
    if scheme == "zNorm":
        c = v - v.mean(dim=-1, keepdim=True)
        return c / c.std(dim=-1, unbiased=False, keepdim=True).clamp(min=EPS)
    raise ValueError(f"unknown norm {scheme!r}; use one of {', '.join(NORMS)}")


def group_aggregate(vectors: torch.Tensor, scheme: str) -> torch.Tensor:
    """Aggregate a group of vectors (a block's segments, or the blocks of a context).

    Args:
        vectors: [n, d].
        scheme: "mean" (one vector, [1, d]) or "none" (kept, [n, d]).
    """
    if scheme == "mean":
        return vectors.mean(dim=0, keepdim=True)
    if scheme == "none":
        return vectors
    raise ValueError(f"unknown aggregation {scheme!r}; use one of {', '.join(GROUP_AGGS)}")


def soft_cluster(vectors: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """One vector: ``sum_i softmax_i(v_i . q) v_i`` (attention of ``query`` over ``vectors``).

    Args:
        vectors: [n, d] candidate vectors.
        query: [d] the vector they are weighted against (a choice's vector).

    Returns:
        [d].
    """
    weights = torch.softmax(vectors.double() @ query.double(), dim=0).to(vectors.dtype)
    return weights @ vectors
