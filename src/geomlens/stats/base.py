"""The accumulator protocol and the batch it consumes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

import torch

A = TypeVar("A", bound="Accumulator")


@dataclass(frozen=True)
class CapturedBatch:
    """Hidden states of one batch of windows.

    Attributes:
        hidden: layer index -> hidden states [B, T, d] (0 = embedding output).
        context_index: [B] the row of each window in the corpus windows (0..C-1).
    """

    hidden: dict[int, torch.Tensor]
    context_index: torch.Tensor


class Accumulator(Protocol):
    """State that streams over batches and merges across shards in any order."""

    def update(self, batch: CapturedBatch) -> None: ...

    def merge(self: A, other: A) -> A: ...

    def state_dict(self) -> dict[str, torch.Tensor]: ...

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None: ...
