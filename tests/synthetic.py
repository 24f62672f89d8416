"""Synthetic hidden states with planted position/context structure, for tests.

``planted(...)`` builds ``h[c,t] = mean + pos[t] + ctx[c] + resid[c,t]`` with

- pos: a smooth spiral of known rank r (cos/sin of the lowest r/2 frequencies of t, with
  decreasing amplitudes) embedded in R^d by a random orthonormal map, optionally with
  its positions randomly permuted (same spectrum, rough Gram matrix);
- ctx: topic-clustered context vectors (balanced labels), in a subspace orthogonal to
  the positional one, or inside it (``aligned=True``);
- resid: Gaussian noise, optionally double-centred (``exact=True``) so that the
  decomposition recovers the planted parts exactly and the variance shares are known.

Values are rounded to a 2^-8 grid with |h| < 8, so they are exact in float32 and so are
their squares: the accumulator's float32 sum of squares is then exact, and a float64
numpy reference agrees with it to rounding.

``stream(...)`` feeds such arrays through the real ``DecompositionAccumulator`` in
several shuffled batches; ``reference_stats(...)`` computes the same statistics directly
in numpy on the stacked array.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from geomlens.stats import CapturedBatch, DecompositionAccumulator, DecompositionStats

GRID = 2.0**-8


@dataclass(frozen=True)
class Planted:
    """Planted hidden states and their parts.

    Attributes:
        hidden: [C, T, d] float32 hidden states (on the 2^-8 grid).
        labels: [C] topic label of each context.
        mean: [d] planted global mean.
        pos: [T, d] planted positional part (centred over t).
        ctx: [C, d] planted context part (centred over c).
        resid: [C, T, d] planted residual.
        pos_basis: [d, r] orthonormal directions of pos.
        ctx_basis: [d, m] orthonormal directions of ctx.
        shares: expected (share_pos, share_ctx, share_resid) when ``exact`` (else approximate).
    """

    hidden: np.ndarray
    labels: np.ndarray
    mean: np.ndarray
    pos: np.ndarray
    ctx: np.ndarray
    resid: np.ndarray
    pos_basis: np.ndarray
    ctx_basis: np.ndarray
    shares: tuple[float, float, float]


def spiral(length: int, rank: int, amplitudes: np.ndarray | None = None) -> np.ndarray:
    """[T, rank] columns cos/sin(2 pi f t / T) for f = 1..rank/2, scaled by amplitudes.

    Each column is exactly centred over t and the columns are orthogonal.
    """
    if rank % 2:
        raise ValueError("rank must be even (cos/sin pairs)")
    t = np.arange(length)
    amps = np.linspace(2.0, 1.5, rank // 2) if amplitudes is None else amplitudes
    cols = []
    for f, a in zip(range(1, rank // 2 + 1), amps, strict=True):
        cols += [a * np.cos(2 * np.pi * f * t / length), a * np.sin(2 * np.pi * f * t / length)]
    return np.stack(cols, axis=1)


def planted(
    n_contexts: int = 40,
    length: int = 48,
    d_model: int = 64,
    rank: int = 4,
    n_topics: int = 4,
    ctx_dim: int = 6,
    topic_scale: float = 3.0,
    topic_spread: float = 0.4,
    noise: float = 0.3,
    aligned: bool = False,
    permute: bool = False,
    exact: bool = True,
    seed: int = 0,
) -> Planted:
    """Hidden states with a planted spiral, topic clusters and noise (see module doc)."""
    rng = np.random.default_rng(seed)
    q = np.linalg.qr(rng.standard_normal((d_model, d_model)))[0]
    pos_basis = q[:, :rank]
    ctx_basis = q[:, :rank] if aligned else q[:, rank : rank + ctx_dim]
    m = ctx_basis.shape[1]
    if n_topics > m:
        raise ValueError("need n_topics <= context subspace dimension")

    coords = spiral(length, rank) / np.sqrt(d_model) * 4
    if permute:
        coords = coords[rng.permutation(length)]
    pos = coords @ pos_basis.T
    pos -= pos.mean(0)

    labels = np.arange(n_contexts) % n_topics
    centroids = topic_scale * np.eye(m)[:n_topics] / np.sqrt(d_model) * 4
    ctx_coords = (
        centroids[labels]
        + topic_spread * rng.standard_normal((n_contexts, m)) / np.sqrt(d_model) * 4
    )
    ctx = ctx_coords @ ctx_basis.T
    ctx -= ctx.mean(0)

    resid = noise * rng.standard_normal((n_contexts, length, d_model))
    if exact:
        resid = resid - resid.mean(0) - resid.mean(1, keepdims=True) + resid.mean((0, 1))
    mean = 0.5 * rng.standard_normal(d_model)

    h = mean + pos[None] + ctx[:, None] + resid
    h = np.round(h / GRID) * GRID
    if np.abs(h).max() >= 8:
        raise ValueError("planted values leave the exact float32 range; lower the scales")
    total = n_contexts * np.sum(pos**2) + length * np.sum(ctx**2) + np.sum(resid**2)
    shares = (
        float(n_contexts * np.sum(pos**2) / total),
        float(length * np.sum(ctx**2) / total),
        float(np.sum(resid**2) / total),
    )
    return Planted(
        hidden=h.astype(np.float32),
        labels=labels,
        mean=mean,
        pos=pos,
        ctx=ctx,
        resid=resid,
        pos_basis=pos_basis,
        ctx_basis=ctx_basis,
        shares=shares,
    )


def stream(
    hidden: Mapping[int, np.ndarray] | np.ndarray,
    batch_size: int = 7,
    second_moment: bool = True,
    seed: int = 0,
) -> DecompositionAccumulator:
    """Feed [C, T, d] arrays (one per layer, or one array as layer 0) through the real
    accumulator, in shuffled batches of contexts."""
    layers = {0: hidden} if isinstance(hidden, np.ndarray) else dict(hidden)
    first = next(iter(layers.values()))
    n_contexts, length, d_model = first.shape
    acc = DecompositionAccumulator(
        list(layers), n_contexts, length, d_model, second_moment=second_moment
    )
    order = np.random.default_rng(seed).permutation(n_contexts)
    for start in range(0, n_contexts, batch_size):
        idx = order[start : start + batch_size]
        acc.update(
            CapturedBatch(
                hidden={
                    k: torch.from_numpy(np.ascontiguousarray(v[idx])) for k, v in layers.items()
                },
                context_index=torch.from_numpy(idx.astype(np.int64)),
            )
        )
    return acc


def reference_stats(
    hidden: np.ndarray, layer: int = 0, skip_first: bool = False
) -> DecompositionStats:
    """The decomposition computed directly in float64 on the stacked [C, T, d] array."""
    h = np.asarray(hidden, dtype=np.float64)
    t0 = 1 if skip_first else 0
    h = h[:, t0:]
    mean = h.mean((0, 1))
    flat = h.reshape(-1, h.shape[-1])
    return DecompositionStats(
        layer=layer,
        mean=mean,
        pos=h.mean(0) - mean,
        ctx=h.mean(1) - mean,
        total_ss=float(np.sum((h - mean) ** 2)),
        second_moment=flat.T @ flat,
        n_contexts=h.shape[0],
        positions=np.arange(t0, t0 + h.shape[1]),
        skip_first=skip_first,
    )


def reference_parts(hidden: np.ndarray) -> dict[str, np.ndarray]:
    """mu, pos, ctx, resid of a [C, T, d] array, computed directly (float64)."""
    h = np.asarray(hidden, dtype=np.float64)
    mu = h.mean((0, 1))
    pos = h.mean(0) - mu
    ctx = h.mean(1) - mu
    return {"mu": mu, "pos": pos, "ctx": ctx, "resid": h - mu - pos[None] - ctx[:, None]}
