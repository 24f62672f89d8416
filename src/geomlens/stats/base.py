"""The accumulator protocol and the batch it consumes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

import torch

from geomlens.errors import GeomlensError

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


@runtime_checkable
class Accumulator(Protocol):
    """State that streams over batches and merges across shards in any order.

    Every streaming statistic has the same five steps:

    - ``update(...)`` adds one batch. What a batch is differs per statistic, so its
      arguments are documented per class: ``DecompositionAccumulator.update(batch:
      CapturedBatch)``, ``NormStats.update(x, y, norm)`` (a norm's inputs and outputs),
      ``KernelAccumulator.update(layer, attn, logits)`` (one layer's attention),
      ``RefactorAccumulator.update(record)`` (an ``AttentionRecord``).
    - ``merge(other)`` adds another accumulator, filled on disjoint batches with the same
      settings, into this one and returns self: the result is the accumulator filled on
      both (sums add, maxima take the max, counts add; up to float rounding of the sums).
      Different settings or shapes raise ``GeomlensError`` (``ValueError`` for
      ``DecompositionAccumulator``).
    - ``state_dict()`` is the state as tensors only (float64 sums, 0-d tensors for
      scalars), for ``torch.save`` or safetensors; ``load_state_dict(state)`` restores it
      into an accumulator built with the same constructor arguments, exactly, so that
      updating can continue where it stopped. Settings (and objects such as a model's
      weights) are constructor arguments, never state.
    - ``finalize(...)`` turns the sums into the statistic's result, leaving the state as
      it is (``DecompositionAccumulator.finalize`` takes the layer to finalize).
    """

    def update(self, *args: Any, **kwargs: Any) -> None: ...

    def merge(self: A, other: A) -> A: ...

    def state_dict(self) -> dict[str, torch.Tensor]: ...

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None: ...

    def finalize(self, *args: Any, **kwargs: Any) -> Any: ...


def check_state(
    state: dict[str, torch.Tensor],
    spec: dict[str, tuple[tuple[int, ...], torch.dtype]],
    what: str,
) -> None:
    """Refuse a saved state unless it holds exactly ``spec``'s names, shapes and dtypes.

    Args:
        state: a ``state_dict()`` as saved.
        spec: name -> (shape, dtype) that the accumulator loading it expects.
        what: the statistic, for the message ("position-kernel", ...).

    Raises:
        GeomlensError: naming the first tensor that is missing, extra or different.
    """
    extra = sorted(set(state) - set(spec))
    if extra:
        raise GeomlensError(f"the saved {what} state holds unknown tensors {extra}.")
    for name, (shape, dtype) in spec.items():
        if name not in state:
            raise GeomlensError(f"the saved {what} state has no tensor {name!r}.")
        got = state[name]
        if tuple(got.shape) != shape or got.dtype != dtype:
            raise GeomlensError(
                f"the saved {what} state's {name!r} is {tuple(got.shape)} {got.dtype}, "
                f"expected {shape} {dtype}: it was saved with other settings."
            )


class StateParts:
    """A statistic made of named parts (accumulators, taps): its state is every part's
    state under ``<name>.<key>``. Subclasses give ``parts()`` and ``what`` (for messages)."""

    what = "statistic"

    def parts(self) -> dict[str, Any]:
        raise NotImplementedError

    def state_spec(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        return {
            f"{name}.{key}": spec
            for name, part in self.parts().items()
            for key, spec in part.state_spec().items()
        }

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {
            f"{name}.{key}": value
            for name, part in self.parts().items()
            for key, value in part.state_dict().items()
        }

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore ``state_dict()`` exactly.

        Raises:
            GeomlensError: when it does not hold exactly this statistic's entries.
        """
        check_state(state, self.state_spec(), self.what)
        for name, part in self.parts().items():
            head = f"{name}."
            part.load_state_dict(
                {k[len(head) :]: v for k, v in state.items() if k.startswith(head)}
            )
