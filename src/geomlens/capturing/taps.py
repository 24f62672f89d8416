"""Taps: statistics besides the decomposition that the one capture pass fills.

A tap reads the first ``windows`` corpus windows as the capture runs them: the layer-norm
statistics of ``geomlens sphere`` read every norm's input and output, the position kernels
and refactoring check of ``geomlens walk`` read attention. Batches that hold such windows
run in chunks of at most ``TAP_CHUNK`` windows with every tap's hooks on and no early stop
(and under eager attention where a tap reads attention probabilities); their hidden states
feed the decomposition like any other batch. A tap is an ``Accumulator``
(``stats.base``): it merges, saves and resumes with the capture's own checkpoint, and Ray
shards fill it on their workers (``TapsFactory`` builds a shard's taps from its model).

A ``HiddenTap`` is the other kind: it opens no hook and runs no pass of its own; the
capture loop hands it every batch's ``CapturedBatch`` after the decomposition took it
(every window, every captured layer), so a per-token statistic of the hidden states rides
on the one capture pass and is merged, checkpointed and resumed like any tap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from typing import Any, Protocol, runtime_checkable

import torch

from geomlens.capturing.hooks import base_kwargs, hidden_states, recording
from geomlens.errors import GeomlensError
from geomlens.models.loading import eager_attention
from geomlens.models.view import ModelView
from geomlens.stats.base import CapturedBatch, StateParts

PREFIX = "tap."
"""Tap tensors in a checkpoint or ``stats/taps.safetensors``: ``tap.<name>.<key>``."""

TAP_CHUNK = 4
"""Windows per tapped forward pass (fewer where their attention passes ``ATTENTION_BYTES``)."""

ATTENTION_BYTES = 2**30
"""What one tapped pass may hold of recorded attention ([L, B, H, T, T] float32 of every
layer): at T = 1024 a 24-layer, 16-head model records 1.6 GB of attention per window, and
four at a time took the process to 23.6 GB, out of memory on a 24 GB machine."""


TapsFactory = Callable[[ModelView], "Taps"]
"""Builds a capture's taps for a loaded model (picklable: Ray workers call it too)."""


@runtime_checkable
class Tap(Protocol):
    """A statistic filled from the first ``windows`` windows of the capture.

    ``during(view)`` holds its hooks open over one tapped forward pass, ``after(attn)``
    takes that pass's attention probabilities (one [B, H, T, T] per block; None unless
    ``attention``); with ``merge``, ``state_spec``, ``state_dict``, ``load_state_dict``.
    """

    windows: int
    attention: bool

    def during(self, view: ModelView) -> AbstractContextManager[None]: ...

    def after(self, attentions: Sequence[torch.Tensor] | None) -> None: ...

    def merge(self, other: Any) -> Any: ...

    def state_spec(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]: ...

    def state_dict(self) -> dict[str, torch.Tensor]: ...

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None: ...


class HiddenTap:
    """A tap fed every captured batch's hidden states instead of hooks of its own.

    Subclasses give ``update(batch)`` (a ``CapturedBatch``: layer -> [B, T, d], and the
    corpus rows of its windows), ``merge``, ``state_spec``, ``state_dict`` and
    ``load_state_dict``; their state must be sized when built (the model's ``n_layers + 1``
    hidden-state layers, of which a capture may feed a subset). It reads no window in
    tapped passes (``windows = 0``), so it never changes how a batch runs. Under
    ``--contexts auto`` it reads the first chunk's windows, as every tap does.
    """

    windows = 0
    attention = False
    fed_hidden = True
    """Marks the class (a ``TapBuild``) as fed from the capture's hidden states."""

    def during(self, view: ModelView) -> AbstractContextManager[None]:
        return nullcontext()

    def after(self, attentions: Sequence[torch.Tensor] | None) -> None:
        return None

    def update(self, batch: CapturedBatch) -> None:
        raise NotImplementedError


def feeds_on_hidden(tap: object) -> bool:
    """Whether a tap (or its builder) is fed the capture's hidden states (``HiddenTap``)."""
    return bool(getattr(tap, "fed_hidden", False))


class Taps(StateParts):
    """Named taps filled together; their state is one dict of ``tap.<name>.<key>`` tensors.

    ``made(view, factory)`` also keeps the factory and the model, so that empty twins can
    be built (``empty_like``) and Ray workers can build their own.
    """

    what = "tap"

    def __init__(self, taps: Mapping[str, Tap]):
        self.taps = dict(taps)
        self.factory: TapsFactory | None = None
        self.view: ModelView | None = None

    @classmethod
    def made(cls, view: ModelView, factory: TapsFactory) -> Taps:
        """``factory(view)``, remembering both."""
        taps = factory(view)
        taps.factory, taps.view = factory, view
        return taps

    def empty_like(self) -> Taps:
        """The same taps with nothing added (needs ``made``)."""
        assert self.factory is not None and self.view is not None, "built without made()"
        return Taps.made(self.view, self.factory)

    def plus(self, states: Sequence[Mapping[str, torch.Tensor]]) -> Taps:
        """A new ``Taps``: these taps' statistics plus those of each state (shards' states,
        their other entries ignored); these are left as they are."""
        total = self.empty_like()
        total.load_state_dict(self.state_dict())
        for state in states:
            part = self.empty_like()
            part.load_state_dict(state)
            total.merge(part)
        return total

    def update(self, batch: CapturedBatch) -> None:
        """Hand one captured batch (corpus rows in ``context_index``) to every ``HiddenTap``."""
        for tap in self.taps.values():
            if isinstance(tap, HiddenTap):
                tap.update(batch)

    def __bool__(self) -> bool:
        return bool(self.taps)

    def __getitem__(self, name: str) -> Tap:
        return self.taps[name]

    @property
    def windows(self) -> int:
        """The windows some tap reads (0..windows-1)."""
        return max((t.windows for t in self.taps.values()), default=0)

    def parts(self) -> dict[str, Any]:
        return {f"{PREFIX}{name}": tap for name, tap in self.taps.items()}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Restore ``state_dict()``; entries that are not tap entries are ignored.

        Raises:
            GeomlensError: when the tap entries do not fit these taps (one sentence).
        """
        super().load_state_dict({k: v for k, v in state.items() if k.startswith(PREFIX)})

    def merge(self, other: Taps) -> Taps:
        """Add ``other``'s statistics (the same taps, other windows) in place; return self."""
        if set(other.taps) != set(self.taps):
            raise GeomlensError(
                f"cannot merge taps {sorted(other.taps)} into taps {sorted(self.taps)}."
            )
        for name, tap in self.taps.items():
            tap.merge(other.taps[name])
        return self


def without_taps(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A checkpoint's decomposition entries (its tap entries left out)."""
    return {k: v for k, v in state.items() if not k.startswith(PREFIX)}


def attention_chunk(view: ModelView, length: int, stacks: int = 1, batch: int = TAP_CHUNK) -> int:
    """Windows per pass that records attention: ``batch``, fewer where the attention of
    every layer (of ``stacks`` attentions per block) would pass ``ATTENTION_BYTES`` (one
    window at least)."""
    per_window = max(1, stacks * view.n_layers * view.n_heads * length * length * 4)
    return max(1, min(batch, ATTENTION_BYTES // per_window))


def tap_chunk(view: ModelView, length: int, attention: bool) -> int:
    """Windows per tapped pass: ``TAP_CHUNK``, fewer where a tap records attention."""
    return attention_chunk(view, length) if attention else TAP_CHUNK


def chunks(first_row: int, n_rows: int, taps: Taps, size: int) -> Iterator[tuple[range, list[Tap]]]:
    """The tapped chunks of a batch of rows ``first_row..first_row + n_rows - 1``: local
    row ranges of at most ``size`` rows, none straddling a tap's last window, each with
    the taps that read all of it. Rows past every tap's windows are not listed."""
    ends = sorted({t.windows - first_row for t in taps.taps.values()} | {n_rows})
    start, stop = 0, min(n_rows, taps.windows - first_row)
    while start < stop:
        end = min([start + size, *(e for e in ends if e > start)])
        rows = range(start, end)
        yield rows, [t for t in taps.taps.values() if first_row + end <= t.windows]
        start = end


def tapped_pass(
    view: ModelView, input_ids: torch.Tensor, layers: Sequence[int], taps: Sequence[Tap]
) -> dict[int, torch.Tensor]:
    """One whole forward pass of ``input_ids`` [B, T] with every tap's hooks on (eager
    attention when one reads attention); returns layer -> [B, T, d] for ``layers``."""
    attention = any(t.attention for t in taps)
    returned = any(t.attention and not getattr(t, "streams", False) for t in taps)
    kwargs = base_kwargs(view) | ({"output_attentions": True} if returned else {})
    with ExitStack() as stack:
        if attention:
            stack.enter_context(eager_attention(view))
        for tap in taps:
            stack.enter_context(tap.during(view))
        tokens = int(input_ids.shape[-1])
        record = stack.enter_context(recording(view, layers, stop=False, tokens=tokens))
        stack.enter_context(torch.inference_mode())
        out = view.base(input_ids=input_ids.to(view.device), **kwargs)
    attentions = getattr(out, "attentions", None) if returned else None
    if returned and (not attentions or any(a is None for a in attentions)):
        raise GeomlensError(f"{view.name} returned no attention weights under eager attention.")
    for tap in taps:
        tap.after(attentions if tap.attention else None)
    return record


def batch_hidden_states(
    view: ModelView,
    input_ids: torch.Tensor,
    layers: Sequence[int],
    taps: Taps | None = None,
    first_row: int = 0,
) -> dict[int, torch.Tensor]:
    """layer -> [B, T, d] hidden states of one capture batch whose first window is corpus
    window ``first_row``; its windows that taps read go through tapped passes first."""
    if not taps or first_row >= taps.windows:
        return hidden_states(view, input_ids, layers)
    attention = any(t.attention for t in taps.taps.values())
    size = tap_chunk(view, input_ids.shape[1], attention)
    parts: list[dict[int, torch.Tensor]] = []
    done = 0
    for rows, readers in chunks(first_row, len(input_ids), taps, size):
        parts.append(tapped_pass(view, input_ids[rows.start : rows.stop], layers, readers))
        done = rows.stop
    if done < len(input_ids):
        parts.append(hidden_states(view, input_ids[done:], layers))
    return {layer: torch.cat([p[layer] for p in parts]) for layer in parts[0]}


def fill_taps(
    view: ModelView, input_ids: torch.Tensor, taps: Taps, layers: Sequence[int] | None = None
) -> Taps:
    """Fill ``taps`` from windows ``input_ids`` [C, T] alone (where the decomposition is
    already finished, e.g. a run saved before its taps existed); returns ``taps``. A
    ``HiddenTap`` reads every window's ``layers`` (default: every layer) again."""
    n = min(taps.windows, len(input_ids))
    size = tap_chunk(view, input_ids.shape[1], any(t.attention for t in taps.taps.values()))
    for rows, readers in chunks(0, n, taps, size):
        tapped_pass(view, input_ids[rows.start : rows.stop], [view.n_layers], readers)
    if any(isinstance(t, HiddenTap) for t in taps.taps.values()):
        chosen = list(range(view.n_layers + 1)) if layers is None else list(layers)
        for start in range(0, len(input_ids), TAP_CHUNK):
            index = torch.arange(start, min(len(input_ids), start + TAP_CHUNK))
            taps.update(CapturedBatch(hidden_states(view, input_ids[index], chosen), index))
    return taps
