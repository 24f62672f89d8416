"""The Ray engine: model workers on a Ray cluster turn shards of windows into accumulator states.

The windows are cut into shards (contiguous runs of whole batches) and become a Ray
dataset with one row per shard. ``map_batches`` runs ``ShardWorker``, a callable class,
in a fixed pool of actors: each loads the model once, captures its shards with the
accumulator on its own device and sends back only the shard's accumulator state (as
safetensors bytes), never activations. The driver keeps the first result of every shard
id, checks that each planned shard came back exactly once, merges them in a fixed tree
(``engines.merge``) and hands the accumulator to the unchanged rest of the pipeline.

Ray Data restarts an actor that dies (a killed process, a lost node) and retries its task
on the new actor; the shard is then captured again from the start, so nothing of the
lost attempt is counted.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from geomlens.capturing.capture import AT_START, StoreOffset, resolve_layers
from geomlens.capturing.interrupt import stop_at_batch_boundary
from geomlens.capturing.taps import Taps
from geomlens.engines.merge import merge_shards
from geomlens.engines.ray_import import require_ray
from geomlens.engines.shards import (
    Shard,
    ShardResult,
    capture_shard,
    plan_shards,
    state_from_bytes,
    state_to_bytes,
)
from geomlens.errors import GeomlensError, one_line
from geomlens.io.progress import token_bar
from geomlens.models.loading import resolve_dtype
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.decomposition import interval_groups

if TYPE_CHECKING:
    from geomlens.corpus import Windows
    from geomlens.engines.job import CaptureJob, EngineConfig
    from geomlens.runs.runfolder import RunFolder

#: accumulator states larger than this travel as several rows (Arrow binary cells stay small)
CHUNK_BYTES = 1 << 28


class ShardWorker:
    """A Ray Data callable class: loads the model once, turns shard rows into states.

    Args:
        spec: model, device, dtype, trust_remote_code, revision, threads, layers, n_contexts,
            batch_size, second_moment, groups and activations (a folder or URL, or None).
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        from geomlens.models.loading import load_named

        if spec["threads"]:
            torch.set_num_threads(int(spec["threads"]))
        self.spec = spec
        device = "cuda" if str(spec["device"]).startswith("cuda") else spec["device"]
        self.view = load_named(  # the workers' own view: no weights hash at load
            spec["model"],
            device=device,
            dtype=spec["dtype"],
            trust_remote_code=bool(spec.get("trust_remote_code", False)),
            revision=spec.get("revision"),
        )
        self.store_dtype = resolve_dtype(spec["dtype"])
        factory = spec.get("taps")
        self.taps = None if factory is None else Taps.made(self.view, factory)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        spec = self.spec
        out: dict[str, list[Any]] = {
            k: []
            for k in ("shard", "part", "parts", "blob", "worker", "started", "finished", "tokens")
        }
        for i in range(len(batch["shard"])):
            shard = Shard(
                int(batch["shard"][i]),
                range(int(batch["batch_start"][i]), int(batch["batch_stop"][i])),
                range(int(batch["row_start"][i]), int(batch["row_stop"][i])),
            )
            ids = np.frombuffer(batch["ids"][i], dtype=np.int64).reshape(len(shard.rows), -1)
            labels = np.frombuffer(batch["labels"][i], dtype=np.int64)
            started = time.time()
            state = capture_shard(
                self.view,
                shard,
                torch.from_numpy(ids.copy()),
                torch.from_numpy(labels.copy()),
                layers=list(spec["layers"]),
                n_contexts=int(spec["n_contexts"]),
                batch_size=int(spec["batch_size"]),
                second_moment=bool(spec["second_moment"]),
                activations=spec["activations"],
                store_dtype=self.store_dtype,
                groups=int(spec.get("groups", 0)),
                taps=None if self.taps is None else self.taps.empty_like(),
                store_offset=StoreOffset(*spec.get("store_offset", (0, 0))),
            )
            blob = state_to_bytes(state)
            finished = time.time()
            chunks = [blob[o : o + CHUNK_BYTES] for o in range(0, len(blob), CHUNK_BYTES)]
            for part, chunk in enumerate(chunks):
                out["shard"].append(shard.index)
                out["part"].append(part)
                out["parts"].append(len(chunks))
                out["blob"].append(chunk)
                out["worker"].append(os.getpid())
                out["started"].append(started)
                out["finished"].append(finished)
                out["tokens"].append(int(ids.size))
        arrays = {k: np.array(v) for k, v in out.items() if k != "blob"}
        blobs = np.empty(len(out["blob"]), dtype=object)
        blobs[:] = out["blob"]
        return {**arrays, "blob": blobs}


def plan_workers(engine: EngineConfig, resources: dict[str, float], cuda: bool) -> tuple[int, int]:
    """(workers, torch threads per worker), checked against the cluster's resources."""
    threads = engine.threads or 1
    if cuda:
        gpus = int(resources.get("GPU", 0))
        if gpus < 1:
            raise GeomlensError(
                "--device cuda under --engine ray needs GPUs; the Ray cluster has none."
            )
        workers = engine.workers or gpus
        if workers > gpus:
            raise GeomlensError(
                f"--workers {workers} with --device cuda needs {workers} GPUs; "
                f"the Ray cluster has {gpus}."
            )
        return workers, threads
    cpus = int(resources.get("CPU", 0))
    workers = engine.workers or max(1, cpus // threads)
    if workers * threads > cpus:
        raise GeomlensError(
            f"{workers} workers of {threads} threads need {workers * threads} CPUs; "
            f"the Ray cluster has {cpus}: use fewer --workers or --threads."
        )
    return workers, threads


@contextmanager
def stderr_aside() -> Iterator[None]:
    """Send what is written to file descriptor 2 inside the block to a temporary file that
    is then dropped: Ray's C++ core logs its connection retries there (20 lines for a bad
    address) before Python sees the error, and an error is one line."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as aside:
            os.dup2(aside.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)


@contextmanager
def connected(engine: EngineConfig) -> Iterator[Any]:
    """Join the cluster (``--ray-address``, else ``RAY_ADDRESS``) or start a local instance.

    A Ray connection made before (``ray.init`` by the caller) is used as it is and left open.
    """
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING}
    if engine.ray_address is None and not os.environ.get("RAY_ADDRESS"):
        kwargs["include_dashboard"] = False  # a local instance only
    try:
        with stderr_aside():
            ray.init(address=engine.ray_address, **kwargs)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as exc:
        where = f" at {engine.ray_address}" if engine.ray_address else ""
        raise GeomlensError(
            f"could not join the Ray cluster{where} ({one_line(str(exc))[:200]}); check "
            "--ray-address (host:port of the head node, or 'auto') and that Ray runs there."
        ) from None
    try:
        yield ray
    finally:
        ray.shutdown()


@contextmanager
def quiet_ray_data() -> Iterator[None]:
    """Keep Ray Data's progress bars and informational lines off the console."""
    from ray.data import DataContext

    ctx = DataContext.get_current()
    before = ctx.enable_progress_bars, ctx.print_on_execution_start
    ctx.enable_progress_bars, ctx.print_on_execution_start = False, False
    handlers = [h for h in logging.getLogger("ray.data").handlers if not hasattr(h, "baseFilename")]
    levels = [h.level for h in handlers]
    for h in handlers:
        h.setLevel(logging.ERROR)
    try:
        yield
    finally:
        ctx.enable_progress_bars, ctx.print_on_execution_start = before
        for h, level in zip(handlers, levels, strict=True):
            h.setLevel(level)


def _geomlens_cause(exc: BaseException) -> GeomlensError | None:
    """The GeomlensError a worker raised, found inside the exceptions Ray wraps it in."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        cause = getattr(current, "cause", None)
        if isinstance(cause, GeomlensError):
            return cause
        if type(current) is GeomlensError:
            return current
        current = current.__cause__ or current.__context__
    return None


def capture_ray(
    job: CaptureJob,
    engine: EngineConfig,
    on_shard: Callable[[ShardResult], None] | None = None,
) -> tuple[DecompositionAccumulator, dict[str, float]]:
    """Capture every window on Ray workers; same contract as ``capture_windows``.

    ``job.taps`` (built with ``Taps.made``) are rebuilt on each worker from their factory;
    each shard fills its own from the windows it runs, and they are added up here.

    Resumes after the folder's checkpoint (whichever engine wrote it). The driver saves
    the merged contiguous prefix of finished shards as a checkpoint at most every
    ``checkpoint_every_s`` seconds, on Ctrl-C/SIGTERM (after the next shard arrives) and
    before reporting a worker's error. ``on_shard`` is called with each shard's result
    as it arrives.
    """
    t0 = time.perf_counter()
    view, windows, config, folder, taps = job.view, job.windows, job.config, job.folder, job.taps
    layers = resolve_layers(view, config.layers)
    n_c, n_t, b = windows.n_contexts, windows.length, config.batch_size
    groups = interval_groups(len(layers), n_c, n_t, view.d_model)
    base = DecompositionAccumulator(
        layers, n_c, n_t, view.d_model, config.second_moment, groups=groups
    )
    start = folder.resume_into(base, b, taps)
    if taps and taps.factory is None:
        raise GeomlensError("taps run on Ray only when built with Taps.made (a factory).")
    cuda = config.device.startswith("cuda")
    with connected(engine) as ray, quiet_ray_data():
        workers, threads = plan_workers(engine, ray.cluster_resources(), cuda)
        shards = plan_shards(n_c, b, workers * engine.shards_per_worker, start)
        spec = {
            "model": config.model,
            "device": config.device,
            "dtype": config.dtype,
            "trust_remote_code": config.trust_remote_code,
            "revision": config.revision,
            "threads": threads,
            "layers": layers,
            "n_contexts": n_c,
            "batch_size": b,
            "second_moment": config.second_moment,
            "groups": groups,
            "activations": engine.activations_location(folder) if config.save_activations else None,
            "taps": None if not taps else taps.factory,
            "store_offset": dataclasses.astuple(job.store_offset or AT_START),
        }
        results = run_shards(
            ray,
            shards,
            windows,
            spec,
            workers,
            n_gpus=1 if cuda else 0,
            base=base,
            taps=taps,
            folder=folder,
            progress=job.progress,
            desc=f"capture {view.name} ({workers} Ray workers)",
            checkpoint_every_s=job.checkpoint_every_s,
            on_shard=on_shard,
        )
    acc = merge_shards(base, list(results.values()), shards)
    if taps:
        taps.load_state_dict(taps.plus([results[s.index].state for s in shards]).state_dict())
    seconds = time.perf_counter() - t0
    timing = shard_timing(list(results.values()), seconds, workers, threads, len(shards))
    return acc, timing


def shard_timing(
    results: list[ShardResult], seconds: float, workers: int, threads: int, shards: int
) -> dict[str, float]:
    """Timing facts of a Ray capture: tokens per second over the whole call and over the
    span in which workers computed, and how the work was spread."""
    tokens = sum(r.tokens for r in results)
    compute = max(r.finished for r in results) - min(r.started for r in results) if results else 0.0
    return {
        "tokens": float(tokens),
        "seconds": seconds,
        "tokens_per_s": tokens / seconds if seconds > 0 else 0.0,
        "compute_seconds": compute,
        "compute_tokens_per_s": tokens / compute if compute > 0 else 0.0,
        "workers": float(workers),
        "threads": float(threads),
        "shards": float(shards),
        "worker_processes": float(len({r.worker for r in results})),
    }


def save_prefix(
    folder: RunFolder,
    base: DecompositionAccumulator,
    taps: Taps | None,
    shards: list[Shard],
    results: dict[int, ShardResult],
) -> int | None:
    """Save the merged contiguous prefix of finished shards (with their taps) as the
    checkpoint; returns the last shard id saved (None: no shard of the prefix is done)."""
    done = []
    for shard in shards:
        if shard.index not in results:
            break
        done.append(shard)
    if not done:
        return None
    merged = merge_shards(base, [results[s.index] for s in done], done)
    tapped = taps.plus([results[s.index].state for s in done]) if taps else None
    state = merged.state_dict() | (tapped.state_dict() if tapped else {})
    folder.save_checkpoint(state, done[-1].batches.stop)
    return done[-1].index


def shard_items(shards: list[Shard], windows: Windows) -> list[dict[str, Any]]:
    """One dataset item per shard: its batch and row ranges, its windows and labels as bytes."""
    input_ids = np.asarray(windows.input_ids, dtype=np.int64)
    labels = np.asarray(windows.labels, dtype=np.int64)
    return [
        {
            "shard": s.index,
            "batch_start": s.batches.start,
            "batch_stop": s.batches.stop,
            "row_start": s.rows.start,
            "row_stop": s.rows.stop,
            "ids": input_ids[s.rows.start : s.rows.stop].tobytes(),
            "labels": labels[s.rows.start : s.rows.stop].tobytes(),
        }
        for s in shards
    ]


def shard_dataset(
    ray: Any, items: list[dict[str, Any]], spec: dict[str, Any], workers: int, n_gpus: int
) -> Any:
    """The shards as a Ray dataset mapped by a pool of ``workers`` ``ShardWorker`` actors,
    one shard in flight per actor."""
    from ray.data import ActorPoolStrategy

    return ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
        ShardWorker,
        batch_size=1,
        compute=ActorPoolStrategy(size=workers, max_tasks_in_flight_per_actor=1),
        num_cpus=spec["threads"],
        num_gpus=n_gpus or None,
        fn_constructor_kwargs={"spec": spec},
    )


def assembled(row: dict[str, Any], pending: dict[int, dict[int, bytes]]) -> ShardResult | None:
    """Add one output row (a part of a shard's state) to ``pending``; the shard's result
    once all its parts are in, else None."""
    index = int(row["shard"])
    parts = pending.setdefault(index, {})
    parts[int(row["part"])] = row["blob"]
    if len(parts) < int(row["parts"]):
        return None
    del pending[index]
    return ShardResult(
        shard=index,
        state=state_from_bytes(b"".join(parts[i] for i in range(len(parts)))),
        worker=int(row["worker"]),
        started=float(row["started"]),
        finished=float(row["finished"]),
        tokens=int(row["tokens"]),
    )


def run_shards(
    ray: Any,
    shards: list[Shard],
    windows: Windows,
    spec: dict[str, Any],
    workers: int,
    *,
    n_gpus: int,
    base: DecompositionAccumulator,
    taps: Taps | None,
    folder: RunFolder,
    progress: bool,
    desc: str,
    checkpoint_every_s: float,
    on_shard: Callable[[ShardResult], None] | None,
) -> dict[int, ShardResult]:
    """Run the shards as a Ray dataset through a pool of ``ShardWorker`` actors.

    Returns the first result of each shard id (a repeated id is ignored).
    """
    if not shards:
        return {}
    dataset = shard_dataset(ray, shard_items(shards, windows), spec, workers, n_gpus)
    results: dict[int, ShardResult] = {}
    pending: dict[int, dict[int, bytes]] = {}
    saved_through = -1
    n_c, n_t = int(spec["n_contexts"]), windows.length
    bar = token_bar(n_c * n_t, shards[0].rows.start * n_t, desc, progress)

    def save() -> None:
        nonlocal saved_through
        if saved_through < len(shards) - 1 and shards[saved_through + 1].index in results:
            saved = save_prefix(folder, base, taps, shards, results)
            saved_through = saved if saved is not None else saved_through

    last_save = time.perf_counter()
    n_batches = math.ceil(n_c / int(spec["batch_size"]))
    try:
        with stop_at_batch_boundary() as stop:
            for row in dataset.iter_rows():
                if int(row["shard"]) in results:
                    continue
                result = assembled(row, pending)
                if result is None:
                    continue
                results[result.shard] = result
                bar.update(result.tokens)
                if on_shard is not None:
                    on_shard(result)
                if stop.requested:
                    save()
                    first = shards[saved_through if saved_through >= 0 else 0]
                    kept = first.batches.stop if saved_through >= 0 else first.batches.start
                    raise GeomlensError(
                        f"interrupted ({stop.signal_name}) with the first {kept} of {n_batches} "
                        f"batches saved in {folder.path}: rerun the same command to resume."
                    )
                if time.perf_counter() - last_save >= checkpoint_every_s and len(results) < len(
                    shards
                ):
                    save()
                    last_save = time.perf_counter()
    except GeomlensError:
        raise
    except Exception as exc:
        cause = _geomlens_cause(exc)
        if cause is None:
            raise
        save()
        raise GeomlensError(
            f"{cause} Finished shards before it are saved in {folder.path}."
        ) from None
    finally:
        bar.close()
    return results
