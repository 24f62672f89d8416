"""Batched forward passes whose hidden states stream into accumulators (and optionally disk)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from geomlens.capturing.interrupt import stop_at_batch_boundary
from geomlens.capturing.store import write_shard
from geomlens.capturing.taps import Taps, batch_hidden_states
from geomlens.corpus import Windows
from geomlens.errors import GeomlensError, short_list
from geomlens.io.progress import token_bar
from geomlens.models.loading import resolve_dtype
from geomlens.models.placement import check_placement
from geomlens.models.view import ModelView
from geomlens.stats import CapturedBatch, DecompositionAccumulator, NonFiniteError
from geomlens.stats.decomposition import interval_groups


class RunFolder(Protocol):
    """What the capture loop needs of a run folder (``runs.runfolder.RunFolder``): where it
    is, a checkpoint saved, a checkpoint resumed."""

    path: Path

    def save_checkpoint(self, state: dict[str, torch.Tensor], batches_done: int) -> None: ...

    def resume_into(
        self, acc: DecompositionAccumulator, batch_size: int, taps: Taps | None = None
    ) -> int: ...


NOT_IDENTITY = ("trust_remote_code", "revision", "device_map", "max_memory", "offload_folder")
"""``CaptureConfig`` fields that say how to load, not what is computed: not in a run's
identity (the model's files are, by their fingerprint; a revision's commit is in the
manifest)."""


@dataclass(frozen=True)
class CaptureConfig:
    """Everything that determines a capture's result (the run folder compares it).

    ``trust_remote_code`` (let the model's own Python code run), a hub id's ``revision``
    and where the model's modules are placed (``device_map``, ``max_memory``,
    ``offload_folder``: ``models.placement``) are carried along for loading but are not
    part of the run's identity (``NOT_IDENTITY``).
    """

    model: str = "smollm2-135m"
    corpus: str = "bbc"
    contexts: int = 128
    length: int = 128
    layers: tuple[int, ...] | None = None
    batch_size: int = 8
    device: str = "cpu"
    dtype: str = "float32"
    seed: int = 0
    offset: int = 0
    balance: bool = False
    save_activations: bool = False
    second_moment: bool = False
    text_column: str = "text"
    label_column: str = "label"
    trust_remote_code: bool = False
    revision: str | None = None
    device_map: str | Mapping[str, Any] | None = None
    max_memory: Mapping[str, str] | None = None
    offload_folder: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["layers"] = None if self.layers is None else list(self.layers)
        for name in NOT_IDENTITY:  # how to load, not what is computed
            del data[name]
        return data

    def validate(self) -> None:
        """Plain-sentence errors for values no capture can use (before anything loads)."""
        if self.batch_size < 1:
            raise GeomlensError(f"--batch-size must be at least 1 (got {self.batch_size}).")
        if self.contexts < 1:
            raise GeomlensError(f"--contexts must be at least 1 (got {self.contexts}).")
        if self.length < 2:
            raise GeomlensError(f"--length must be at least 2 (got {self.length}).")
        if self.seed < 0:
            raise GeomlensError(f"--seed must be 0 or more (got {self.seed}).")
        if self.offset < 0:
            raise GeomlensError(f"--offset must be 0 or more (got {self.offset}).")
        check_layer_list(
            "--layers",
            self.layers,
            bundled_depth(self.model),
            "hidden-state layers 0..{n}",
            self.model,
        )
        resolve_dtype(self.dtype)
        check_placement(self.device_map, self.max_memory, self.offload_folder)
        try:
            device = torch.device(self.device)
        except RuntimeError:
            raise GeomlensError(
                f"--device {self.device!r} is not a device; use cpu, cuda or cuda:N."
            ) from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise GeomlensError("--device cuda was asked for, but no CUDA device is available.")
        if device.type not in ("cpu", "cuda", "mps"):
            raise GeomlensError(f"--device {self.device!r} is not supported; use cpu or cuda.")
        found = torch.cuda.device_count() if device.type == "cuda" else 1
        if device.index is not None and device.index >= found:
            which = ", ".join(f"{device.type}:{k}" for k in range(found))
            exists = which + ", cpu" if device.type == "cuda" else device.type
            raise GeomlensError(
                f"--device {self.device!r} does not exist: the devices here are {exists}; "
                "use one of those."
            )


def bundled_depth(model: str) -> int | None:
    """The number of blocks of a bundled model (known before it loads), else None."""
    from geomlens.models.bundled import BUNDLED

    bundled = BUNDLED.get(model)
    return None if bundled is None else int(bundled.n_layers)


def check_layer_list(
    flag: str, layers: Sequence[int] | None, n: int | None, what: str, name: str | None = None
) -> None:
    """Refuse an empty list of layers, and (when the depth ``n`` is known) layers outside
    ``0..n``; ``what`` names the valid range, formatted with ``n``. The message quotes at
    most a few of the layers, however many were given.

    Raises:
        GeomlensError: for an empty list or layers out of range.
    """
    if layers is None:
        return
    if len(layers) == 0:
        raise GeomlensError(
            f"{flag} names no layer (a range like 5-2 is empty); give a list like 0,4,8, a "
            "range like 0-6, or leave it out for the default."
        )
    bad = sorted({int(x) for x in layers if x < 0 or (n is not None and x > n)})
    if bad:
        if n is None:
            raise GeomlensError(f"{flag} {short_list(bad)} out of range: layers count from 0.")
        model = name if name is not None else "the model"
        raise GeomlensError(
            f"{flag} {short_list(bad)} out of range: {model} has {what.format(n=n)}."
        )


def resolve_layers(view: ModelView, layers: Sequence[int] | None) -> list[int]:
    """The hidden-state layers to capture (default: all, 0 = embedding output)."""
    if layers is None:
        return list(range(view.n_layers + 1))
    check_layer_list("--layers", layers, view.n_layers, "hidden-state layers 0..{n}", view.name)
    return sorted(set(layers))


def check_length(view: ModelView, length: int) -> None:
    if view.n_ctx is not None and length > view.n_ctx:
        raise GeomlensError(
            f"--length {length} is longer than {view.name} allows ({view.n_ctx} positions); "
            f"use --length {view.n_ctx} or less."
        )


def progress_state(acc: DecompositionAccumulator, taps: Taps | None) -> dict[str, torch.Tensor]:
    """What a checkpoint saves: the decomposition's state and its taps' (``tap.*``)."""
    return acc.state_dict() | (taps.state_dict() if taps else {})


def nonfinite_sentence(
    exc: NonFiniteError, batch: int, n_batches: int, rows: slice, kept: str | None = None
) -> str:
    """One sentence for a batch that held NaN or inf: which batch and contexts, what was
    kept before it (``kept``: said when the caller saved something), what to try."""
    where = f"{exc} in batch {batch + 1} of {n_batches} (contexts {rows.start}-{rows.stop - 1})"
    return (
        f"{where}; {kept + '; ' if kept else ''}try --dtype float32, or check the model "
        "and those documents."
    )


OnBadBatch = Callable[[int, "dict[str, torch.Tensor] | None"], str]
"""(batch, the taps' state before it or None) -> what was kept, said in the refusal."""


@dataclass(frozen=True)
class BatchPlan:
    """The batches of one capture: ``batch_size`` windows each, of ``n_contexts`` windows;
    ``input_ids``/``labels`` hold windows ``first_row`` onwards (a Ray shard's rows)."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    batch_size: int
    n_contexts: int
    first_row: int = 0

    @classmethod
    def of(cls, windows: Windows, batch_size: int) -> BatchPlan:
        """The batches of every window of ``windows``."""
        ids = torch.from_numpy(np.array(windows.input_ids, dtype=np.int64))
        labels = torch.from_numpy(np.array(windows.labels, dtype=np.int64))
        return cls(ids, labels, batch_size, windows.n_contexts)

    @property
    def n_batches(self) -> int:
        return math.ceil(self.n_contexts / self.batch_size)

    def rows(self, batch: int) -> slice:
        """The corpus windows of ``batch``."""
        b = self.batch_size
        return slice(batch * b, min(self.n_contexts, (batch + 1) * b))


@dataclass(frozen=True)
class StoreOffset:
    """Where one capture's activation shards sit in the run's store: a chunk of
    ``--contexts auto`` numbers its shards after the earlier chunks' batches and its
    contexts after their windows, so the store of every chunk reads as one capture."""

    batches: int = 0
    contexts: int = 0


AT_START = StoreOffset()
"""A capture whose shards start the store (every capture but a later chunk's)."""


def stream_batches(
    view: ModelView,
    acc: DecompositionAccumulator,
    plan: BatchPlan,
    batches: range,
    layers: Sequence[int],
    *,
    taps: Taps | None = None,
    activations: str | Path | None = None,
    store_dtype: torch.dtype = torch.float32,
    on_bad_batch: OnBadBatch | None = None,
    store_offset: StoreOffset = AT_START,
) -> Iterator[tuple[int, int]]:
    """The capture loop, the one every engine runs: each of ``batches`` through the model
    into ``acc`` (and the ``taps`` that read its windows), its activations written when
    ``activations`` is given (numbered after ``store_offset``); yields (batch, tokens)
    after each.

    A batch holding NaN or inf adds nothing: ``on_bad_batch`` may save what came before
    (and says what it kept), then one sentence names the batch and its contexts.
    """
    for batch in batches:
        rows = plan.rows(batch)
        local = slice(rows.start - plan.first_row, rows.stop - plan.first_row)
        ids, index = plan.input_ids[local], torch.arange(local.start, local.stop)
        # only a batch that feeds the taps changes them: its state before is kept
        tapped = taps is not None and rows.start < taps.windows and on_bad_batch is not None
        before = taps.state_dict() if tapped and taps is not None else None
        hidden = batch_hidden_states(view, ids, layers, taps, rows.start)
        try:
            acc.update(CapturedBatch(hidden, index))
        except NonFiniteError as exc:
            kept = on_bad_batch(batch, before) if on_bad_batch else None
            raise GeomlensError(
                nonfinite_sentence(exc, batch, plan.n_batches, rows, kept)
            ) from None
        if taps:  # hidden-state taps: the same batch, its windows' corpus rows
            taps.update(CapturedBatch(hidden, torch.arange(rows.start, rows.stop)))
        if activations is not None:
            first = store_offset.contexts
            corpus_rows = torch.arange(first + rows.start, first + rows.stop)
            shard = store_offset.batches + batch
            write_shard(
                activations, shard, ids, corpus_rows, plan.labels[local], hidden, store_dtype
            )
        yield batch, ids.numel()


def saved_before(acc: DecompositionAccumulator, taps: Taps | None, folder: RunFolder) -> OnBadBatch:
    """What the in-process capture does on a batch with NaN or inf: saves the batches
    before it (with the taps as they were before it) and says so."""

    def save(batch: int, taps_before: dict[str, torch.Tensor] | None) -> str:
        saved = progress_state(acc, taps) if taps_before is None else acc.state_dict() | taps_before
        folder.save_checkpoint(saved, batch)
        if not batch:
            return "nothing was computed before it"
        return f"batches 1-{batch} before it are saved in {folder.path}"

    return save


def capture_windows(
    view: ModelView,
    windows: Windows,
    config: CaptureConfig,
    folder: RunFolder,
    *,
    checkpoint_every_s: float = 30.0,
    progress: bool = True,
    activations: str | None = None,
    taps: Taps | None = None,
    store_offset: StoreOffset = AT_START,
) -> tuple[DecompositionAccumulator, dict[str, float]]:
    """Stream every window through the model into a decomposition accumulator (and
    ``taps``, filled from the first windows in the same passes: see ``capturing.taps``).

    Resumes from the folder's checkpoint if there is one; saves a checkpoint at most every
    ``checkpoint_every_s`` seconds, on Ctrl-C/SIGTERM, and before reporting bad values.
    With ``config.save_activations``, shards go to ``activations`` (a folder or fsspec
    URL; default: the run folder's ``activations/``).
    Returns the accumulator and timing facts (tokens, seconds, tokens/s of this session).
    """
    layers = resolve_layers(view, config.layers)
    n_c, n_t, b = windows.n_contexts, windows.length, config.batch_size
    acc = DecompositionAccumulator(
        layers,
        n_c,
        n_t,
        view.d_model,
        config.second_moment,
        device=view.device,
        groups=interval_groups(len(layers), n_c, n_t, view.d_model),
    )
    start = folder.resume_into(acc, b, taps)
    plan = BatchPlan.of(windows, b)
    n_batches = plan.n_batches
    bar = token_bar(n_c * n_t, start * b * n_t, f"capture {view.name}", progress)
    t0, tokens, last_save = time.perf_counter(), 0, time.perf_counter()
    store = None
    if config.save_activations:
        store = folder.path / "activations" if activations is None else activations
    with stop_at_batch_boundary() as stop:
        for batch, n_tokens in stream_batches(
            view,
            acc,
            plan,
            range(start, n_batches),
            layers,
            taps=taps,
            activations=store,
            store_dtype=resolve_dtype(config.dtype),
            on_bad_batch=saved_before(acc, taps, folder),
            store_offset=store_offset,
        ):
            tokens += n_tokens
            bar.update(n_tokens)
            done = batch + 1
            now = time.perf_counter()
            if stop.requested:
                folder.save_checkpoint(progress_state(acc, taps), done)
                bar.close()
                raise GeomlensError(
                    f"interrupted ({stop.signal_name}) after batch {done} of {n_batches}; "
                    f"progress is saved in {folder.path}: rerun the same command to resume."
                )
            if done < n_batches and now - last_save >= checkpoint_every_s:
                folder.save_checkpoint(progress_state(acc, taps), done)
                last_save = now
    bar.close()
    seconds = time.perf_counter() - t0
    timing = {
        "tokens": float(tokens),
        "seconds": seconds,
        "tokens_per_s": tokens / seconds if seconds > 0 else 0.0,
    }
    return acc, timing


def capture_contexts(
    view: ModelView,
    windows: Windows,
    like: DecompositionAccumulator,
    contexts: Sequence[int],
    batch_size: int = 8,
) -> DecompositionAccumulator:
    """A fresh accumulator of ``like``'s grid (layers, C x T, interval groups, second
    moments) fed only the windows ``contexts`` (indices into ``windows``), in batches of at
    most ``batch_size``: what ``DecompositionAccumulator.without`` subtracts to take those
    windows out exactly (a few windows rerun, no second pass over the corpus)."""
    acc = like.empty_like(view.device)
    input_ids = torch.from_numpy(np.array(windows.input_ids, dtype=np.int64))
    chosen = sorted(int(c) for c in contexts)
    for start in range(0, len(chosen), max(1, batch_size)):
        index = torch.tensor(chosen[start : start + batch_size], dtype=torch.int64)
        hidden = batch_hidden_states(view, input_ids[index], like.layers)
        acc.update(CapturedBatch(hidden, index))
    return acc
