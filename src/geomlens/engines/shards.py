"""Shards: fixed contiguous runs of batches, and the capture of one shard into its own state.

A shard covers whole batches (the same batches the in-process capture runs), so every
forward pass sees exactly the rows it would see on one machine. Its accumulator covers
only the shard's contexts, so what a shard sends back is one accumulator state: position
sums, the shard's context rows and sums of squares, never activations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from safetensors.torch import load as load_bytes
from safetensors.torch import save as save_bytes

from geomlens.capturing.capture import AT_START, BatchPlan, StoreOffset, stream_batches
from geomlens.capturing.taps import Taps
from geomlens.models.view import ModelView
from geomlens.stats import DecompositionAccumulator


@dataclass(frozen=True)
class Shard:
    """One shard: its id, the batches it runs (global indices) and their context rows."""

    index: int
    batches: range
    rows: range


@dataclass(frozen=True)
class ShardResult:
    """What one worker sends back for one shard.

    Attributes:
        shard: the shard id (the driver counts each id exactly once).
        state: a ``DecompositionAccumulator`` state over the shard's contexts only
            (context i of the state is corpus window ``rows.start + i``), and the state of
            the shard's taps (``tap.*``).
        worker: the worker's process id.
        started, finished: wall-clock times (``time.time()``) of the shard's capture.
        tokens: tokens the shard ran through the model.
    """

    shard: int
    state: dict[str, torch.Tensor]
    worker: int = 0
    started: float = 0.0
    finished: float = 0.0
    tokens: int = 0


def plan_shards(
    n_contexts: int, batch_size: int, n_shards: int, start_batch: int = 0
) -> list[Shard]:
    """Split batches ``start_batch..`` into at most ``n_shards`` contiguous shards of equal size.

    Shard ids are 0.. in batch order; the last shard may hold fewer batches.
    """
    n_batches = math.ceil(n_contexts / batch_size)
    remaining = n_batches - start_batch
    if remaining <= 0:
        return []
    per = math.ceil(remaining / max(1, min(n_shards, remaining)))
    shards = []
    for index, first in enumerate(range(start_batch, n_batches, per)):
        batches = range(first, min(n_batches, first + per))
        rows = range(first * batch_size, min(n_contexts, batches.stop * batch_size))
        shards.append(Shard(index, batches, rows))
    return shards


def capture_shard(
    view: ModelView,
    shard: Shard,
    input_ids: torch.Tensor,
    labels: torch.Tensor,
    *,
    layers: list[int],
    n_contexts: int,
    batch_size: int,
    second_moment: bool,
    activations: str | None = None,
    store_dtype: torch.dtype = torch.float32,
    groups: int = 0,
    taps: Taps | None = None,
    store_offset: StoreOffset = AT_START,
) -> dict[str, torch.Tensor]:
    """Run one shard's batches through the capture loop (``capturing.capture.stream_batches``,
    the loop the in-process capture runs) and return its accumulator state (on the host),
    with the state of ``taps`` filled from the shard's windows they read (``tap.*``).

    Args:
        input_ids: [len(shard.rows), T] the shard's windows; labels: [len(shard.rows)].
        activations: a folder or fsspec URL to write each batch's activation shard to.
        groups: the run's interval groups (its contexts' groups follow their global rows).
        store_offset: where the capture's activation shards sit in the run's store.

    The accumulator lives on the model's device; its state is copied to the host once,
    at the end of the shard.
    """
    n_rows, length = input_ids.shape
    acc = DecompositionAccumulator(
        layers,
        n_rows,
        length,
        view.d_model,
        second_moment,
        device=view.device,
        groups=groups,
        context_offset=shard.rows.start,
        total_contexts=n_contexts,
    )
    plan = BatchPlan(input_ids, labels, batch_size, n_contexts, first_row=shard.rows.start)
    for _ in stream_batches(
        view,
        acc,
        plan,
        shard.batches,
        layers,
        taps=taps,
        activations=activations,
        store_dtype=store_dtype,
        store_offset=store_offset,
    ):
        pass
    return acc.state_dict() | (taps.state_dict() if taps else {})


def state_to_bytes(state: dict[str, Any]) -> bytes:
    """Serialise an accumulator state (safetensors bytes: no pickle crosses the wire)."""
    return save_bytes({k: v.contiguous() for k, v in state.items()})


def state_from_bytes(data: bytes) -> dict[str, torch.Tensor]:
    return load_bytes(data)
