"""Batched forward passes whose hidden states stream into accumulators (and optionally disk)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from geomlens.capturing.interrupt import stop_at_batch_boundary
from geomlens.capturing.store import write_shard
from geomlens.capturing.taps import Taps, batch_hidden_states
from geomlens.corpus import Windows
from geomlens.errors import GeomlensError, short_list
from geomlens.io.progress import token_bar
from geomlens.models.loading import resolve_dtype
from geomlens.models.view import ModelView
from geomlens.stats import CapturedBatch, DecompositionAccumulator, NonFiniteError
from geomlens.stats.decomposition import interval_groups

if TYPE_CHECKING:
    from geomlens.io.runfolder import RunFolder


@dataclass(frozen=True)
class CaptureConfig:
    """Everything that determines a capture's result (the run folder compares it).

    ``trust_remote_code`` (let the model's own Python code run) is carried along for
    loading but is not part of the run's identity: it cannot change the numbers.
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
    trust_remote_code: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["layers"] = None if self.layers is None else list(self.layers)
        del data["trust_remote_code"]  # how to load, not what is computed
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


def update_or_save(
    acc: DecompositionAccumulator,
    captured: CapturedBatch,
    folder: RunFolder,
    batch: int,
    n_batches: int,
    rows: slice,
    taps: Taps | None = None,
    taps_before: dict[str, torch.Tensor] | None = None,
) -> None:
    """``acc.update``; on NaN or inf, the batches before are saved (with the taps' state
    before this batch: ``taps_before`` where the batch fed them, else ``taps`` as they are)
    and one sentence says which batch and contexts held them (the accumulator is left as
    it was)."""
    try:
        acc.update(captured)
    except NonFiniteError as exc:
        saved = progress_state(acc, taps) if taps_before is None else acc.state_dict() | taps_before
        folder.save_checkpoint(saved, batch)
        kept = (
            f"batches 1-{batch} before it are saved in {folder.path}"
            if batch
            else "nothing was computed before it"
        )
        raise GeomlensError(
            f"{exc} in batch {batch + 1} of {n_batches} (contexts {rows.start}-"
            f"{rows.stop - 1}); {kept}; try --dtype float32, or check the model "
            "and those documents."
        ) from None


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
) -> tuple[DecompositionAccumulator, dict[str, float]]:
    """Stream every window through the model into a decomposition accumulator (and
    ``taps``, filled from the first windows in the same passes: see ``capture.taps``).

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
    n_batches = math.ceil(n_c / b)
    input_ids = torch.from_numpy(np.array(windows.input_ids, dtype=np.int64))
    labels = torch.from_numpy(np.array(windows.labels, dtype=np.int64))
    store_dtype = resolve_dtype(config.dtype)
    bar = token_bar(n_c * n_t, start * b * n_t, f"capture {view.name}", progress)
    t0, tokens, last_save = time.perf_counter(), 0, time.perf_counter()
    with stop_at_batch_boundary() as stop:
        for batch in range(start, n_batches):
            rows = slice(batch * b, min(n_c, (batch + 1) * b))
            ids, index = input_ids[rows], torch.arange(n_c)[rows]
            # only a batch that feeds the taps changes them: its state before is kept
            before = taps.state_dict() if taps and rows.start < taps.windows else None
            hidden = batch_hidden_states(view, ids, layers, taps, rows.start)
            captured = CapturedBatch(hidden, index)
            update_or_save(acc, captured, folder, batch, n_batches, rows, taps, before)
            if config.save_activations:
                write_shard(
                    folder.path / "activations" if activations is None else activations,
                    batch,
                    ids,
                    index,
                    labels[rows],
                    hidden,
                    store_dtype,
                )
            tokens += ids.numel()
            bar.update(ids.numel())
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
