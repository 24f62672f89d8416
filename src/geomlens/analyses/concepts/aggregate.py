"""Aggregations of the concept-space tests: many vectors into one, and norms.

Token vectors of a segment become one vector by a WORD_AGG scheme; a vector is then
normalised by a NORM scheme; segment and example vectors are averaged (or kept) by
SEGMENT_AGG and EXAMPLE_AGG. Every function takes and returns float tensors whose last
dimension is the model width d.

WORD_AGG values are a pooling (``mean``, ``w1mean``, ``last``), or ``filter|pooling``:
the paper's filters apply the model's own FFN activation ``act`` (ReLU, GELU, SiLU, ...):
``relu`` is ``act(x)``, ``relu+`` is ``act(x) + x`` (the original vector added back),
``-relu`` is ``-act(-x)`` and ``-relu+`` is ``-act(-x) + x``. geomlens's fixed filters,
whatever the model, are ``max0`` (``max(x, 0)``) and ``min0`` (``min(x, 0)``), pooled by
``mean`` or by ``active_mean`` (per coordinate, the mean over the tokens where the
coordinate is positive, resp. negative; 0 where it never is).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Activation = Callable[[torch.Tensor], torch.Tensor]

POOLINGS = ("mean", "w1mean", "last")
ACTIVATION_FILTERS = ("relu", "relu+", "-relu", "-relu+")
"""The paper's filters: the model's FFN activation (``+``: the original vector added back)."""
FIXED_FILTERS = ("max0", "min0")
"""geomlens's filters: the positive (negative) part of each coordinate, whatever the model."""
WORD_AGGS = (
    POOLINGS
    + tuple(f"{f}|{p}" for f in ACTIVATION_FILTERS for p in ("mean", "w1mean"))
    + tuple(f"{f}|{p}" for f in FIXED_FILTERS for p in ("mean", "active_mean"))
)
NORMS = ("none", "L2", "varNorm", "zNorm")
GROUP_AGGS = ("mean", "none")
EPS = 1e-12


def needs_activation(scheme: str | None) -> bool:
    """Whether a WORD_AGG value filters through the model's FFN activation."""
    return scheme is not None and scheme.split("|")[0] in ACTIVATION_FILTERS


def word_weights(n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The ``w1mean`` weights of N positions: position t (1-based) weighs t / N.

    Args:
        n: number of positions.
        dtype: the weights' dtype.

    Returns:
        [n] the weights 1/N, 2/N, ..., N/N divided by their sum (N + 1) / 2, so that
        ``weights @ x`` is the mean of the x_t weighted by t/N.
    """
    w = torch.arange(1, n + 1, dtype=dtype) / n
    return w / w.sum()


def _active_mean(parts: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    """Per coordinate, the mean over the rows where ``active`` holds (0 where none does)."""
    count = active.sum(dim=0).to(parts.dtype)
    return parts.sum(dim=0) / count.clamp(min=1.0)


def _pool(x: torch.Tensor, pooling: str) -> torch.Tensor:
    if pooling == "mean":
        return x.mean(dim=0)
    if pooling == "w1mean":
        return word_weights(x.shape[0], x.dtype).to(x.device) @ x
    return x[-1]


def apply_filter(x: torch.Tensor, name: str, act: Activation | None = None) -> torch.Tensor:
    """A WORD_AGG filter of token vectors [N, d] (``act``: the model's FFN activation)."""
    if name == "max0":
        return torch.relu(x)
    if name == "min0":
        return -torch.relu(-x)
    if act is None:
        raise ValueError(f"the filter {name!r} needs the model's FFN activation (act)")
    sign = -1.0 if name.startswith("-") else 1.0
    out = sign * act(sign * x)
    return out + x if name.endswith("+") else out


def word_aggregate(x: torch.Tensor, scheme: str, act: Activation | None = None) -> torch.Tensor:
    """Aggregate the token vectors of one segment into one vector.

    Args:
        x: [N, d] token vectors in order (N >= 1).
        scheme: one of ``WORD_AGGS``:
            "mean": (1/N) sum_t x_t.
            "w1mean": sum_t (t/N) x_t / sum_t (t/N) (later tokens weigh more).
            "last": x_N.
            "relu|P", "relu+|P", "-relu|P", "-relu+|P" (P: mean or w1mean): the pooling P of
                act(x_t), act(x_t) + x_t, -act(-x_t), -act(-x_t) + x_t.
            "max0|mean", "min0|mean": the mean of max(x_t, 0), min(x_t, 0) (any model).
            "max0|active_mean", "min0|active_mean": the same parts averaged per coordinate
                only over the tokens where that coordinate is positive (negative).
        act: the model's FFN activation (needed by the relu filters).

    Returns:
        [d] the segment vector.
    """
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"word_aggregate needs [N>=1, d] vectors, got {tuple(x.shape)}")
    if scheme not in WORD_AGGS:
        raise ValueError(f"unknown word aggregation {scheme!r}; use one of {', '.join(WORD_AGGS)}")
    if "|" not in scheme:
        return _pool(x, scheme)
    name, pooling = scheme.split("|")
    parts = apply_filter(x, name, act)
    if pooling == "active_mean":
        return _active_mean(parts, x > 0 if name == "max0" else x < 0)
    return _pool(parts, pooling)


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
