"""``--contexts auto``: the capture grown in chunks along a rule's looks, resumable.

Each chunk's capture checkpoints into its own folder (``RunFolder.for_chunk``), so an
interrupted chunk resumes at its last saved batch. After a chunk, the accumulator of every
window so far is saved (``stats/auto_chunks.safetensors``) with the progress
(``auto_contexts.json``: the contexts reached, each look taken, the minutes spent); after
the last look, the decomposition's statistics. A rerun of the same command continues from
there: no chunk is captured twice, and a run whose looks are over goes straight to the
final analysis. The activation shards of a chunk are numbered after the earlier chunks'
(``StoreOffset``), so the store of every chunk reads as one capture.

The looks stop at a number of windows: the first look where the rule's claims are decided,
or the last look of the schedule (the largest doubling within ``--max-contexts``), so where
a run stops and what it decides depend on the data and the seed, not on the machine's pace.
The wall-clock ``--budget`` is a safety only: when the next chunk, at the pace so far, would
pass it, the run stops there and says plainly (stderr, stdout's finishing lines, the
manifest, metrics.json and the page) that it was cut short and that its verdicts are those
of a shorter run.

The record in metrics.json holds only what the numbers decide (the looks, why it stopped,
the verdicts); the minutes go to the manifest's timing, so the same config writes the same
metrics.json on a quiet machine and a busy one (unless the safety cuts one short).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from threadpoolctl import threadpool_limits

from geomlens.capturing.capture import StoreOffset
from geomlens.capturing.taps import Taps
from geomlens.corpus import Windows
from geomlens.corpus.windows import window_range
from geomlens.engines import CaptureJob
from geomlens.engines import capture as engine_capture
from geomlens.engines.merge import extend
from geomlens.errors import GeomlensError
from geomlens.io.files import read_json
from geomlens.models.view import ModelView
from geomlens.pipeline.request import AutoContexts, RunRequest
from geomlens.runs.runfolder import RERUN, RunFolder, load_state, write_json
from geomlens.stats import DecompositionAccumulator

PROGRESS = "auto_contexts.json"
"""The progress of the chunks, in the run folder."""

CHUNKS = "auto_chunks"
"""The statistics of every window captured so far (``stats/auto_chunks.safetensors``)."""

MIN_WINDOWS = 2
"""The fewest windows a look compares (``--contexts`` refuses fewer)."""

STOPPED = {
    "decided": "every waited-for claim decided",
    "budget": "cut short: the wall-clock safety --budget would be passed by the next look, "
    "so the verdicts are those of a shorter run than --max-contexts plans",
    "last look": "the last planned look reached (--max-contexts)",
    "nothing to decide": "no waited-for claim could be measured on these windows",
}
"""Why the looks stopped, in words."""

CUT_SHORT = (
    "cut short by the wall-clock safety --budget ({budget:g} min) at {contexts} of the "
    "{planned} planned windows: the verdicts are those of this shorter run, not of the run "
    "--max-contexts plans; rerun on a quieter or faster machine, or with a larger --budget "
    "into another --out"
)
"""What a run cut short by the budget says (stderr, the manifest, metrics.json, the page)."""


def schedule(rule: Any, auto: AutoContexts, first: int, available: int) -> tuple[int, ...]:
    """The looks of ``rule`` from ``first`` windows, within the corpus's ``available``
    windows and ``auto.max_contexts``."""
    return tuple(rule.looks(first, min(available, auto.max_contexts)))


def auto_of(request: RunRequest) -> AutoContexts:
    """The request's ``--contexts auto`` with its rule (refused without one)."""
    auto = request.auto
    if auto is None or auto.rule is None:
        raise GeomlensError(
            "--contexts auto needs an analysis that decides when the contexts suffice, and "
            "none is registered; give a number of contexts."
        )
    if not auto.budget_minutes > 0 or auto.budget_minutes == float("inf"):
        raise GeomlensError(
            f"--budget takes a positive number of minutes (got {auto.budget_minutes})."
        )
    if not isinstance(auto.max_contexts, int) or auto.max_contexts < MIN_WINDOWS:
        raise GeomlensError(
            f"--max-contexts takes a number of windows, {MIN_WINDOWS} or more "
            f"(got {auto.max_contexts!r})."
        )
    return auto


def check_available(available: int, length: int) -> None:
    """Refuse a corpus that holds fewer windows than a look compares, as ``--contexts``
    refuses so few."""
    if available < MIN_WINDOWS:
        raise GeomlensError(
            f"--contexts auto: the corpus holds {available} window(s) of {length} tokens, and "
            f"the position/context split compares at least {MIN_WINDOWS}; give more or longer "
            "documents, or a shorter --length."
        )


def batches_before(looks: tuple[int, ...], k: int, batch_size: int) -> int:
    """The batches of the chunks before look ``k`` (each chunk numbers its own from 0)."""
    edges = (0, *looks[:k])
    return sum(math.ceil((b - a) / batch_size) for a, b in zip(edges, edges[1:], strict=False))


def _progress(folder: RunFolder, looks: tuple[int, ...]) -> dict[str, Any]:
    """The saved progress of these looks, or a fresh one (none saved, or of another
    schedule: its statistics are dropped)."""
    path = folder.path / PROGRESS
    if path.exists():
        saved = read_json(path, dict, RERUN)
        if saved.get("planned") == list(looks):
            return saved
    (folder.path / "stats" / f"{CHUNKS}.safetensors").unlink(missing_ok=True)
    return {
        "planned": list(looks),
        "contexts": 0,
        "looks": [],
        "seconds": 0.0,
        "tokens": 0.0,
        "capture_seconds": 0.0,
        "stopped": None,
    }


def _saved(folder: RunFolder, progress: dict[str, Any]) -> DecompositionAccumulator | None:
    """The accumulator of the windows the progress says were captured (None: none yet)."""
    if not progress["contexts"]:
        return None
    stats = folder.path / "stats"
    finished = stats / "decomposition.safetensors"
    path = (
        finished if progress["stopped"] and finished.exists() else stats / f"{CHUNKS}.safetensors"
    )
    if not path.exists():
        return None
    acc = DecompositionAccumulator.from_state_dict(load_state(path))
    if acc.n_contexts != progress["contexts"] or not acc.complete:
        return None
    return acc


def _stop(look: dict[str, Any], k: int, progress: dict[str, Any], budget: float) -> str | None:
    """Why the looks stop after look ``k`` (None: they go on)."""
    looks = progress["planned"]
    if not look["measured"]:
        return "nothing to decide"
    if not look["undecided"]:
        return "decided"
    if k + 1 == len(looks):
        return "last look"
    n, following = looks[k], looks[k + 1]
    pace = progress["capture_seconds"] / n * (following - n)
    ahead = pace + look["look_seconds"] * following / n
    return "budget" if progress["seconds"] + ahead > 60 * budget else None


def chunked(
    folder: RunFolder,
    view: ModelView,
    windows: Windows,
    request: RunRequest,
    taps: Taps | None,
    model: dict[str, Any],
) -> tuple[DecompositionAccumulator, dict[str, Any], Windows, dict[str, Any]]:
    """Capture the first look's windows, then each next chunk, merged into one accumulator
    (``engines.merge.extend``), judging the rule's claims at every look, until they are
    decided, none can be measured, the budget would be passed, or the looks run out;
    resumed from the saved progress.

    Returns the accumulator (saved as the run's decomposition statistics), the timing for
    the manifest (captures, and the looks' minutes), the windows captured, and the record
    for metrics.json ({"auto_contexts": ...}).
    """
    auto = auto_of(request)
    rule, config = auto.rule, request.config
    assert rule is not None
    looks = schedule(rule, auto, config.contexts, windows.n_contexts)
    coverage = rule.level(len(looks))
    progress = _progress(folder, looks)
    acc = _saved(folder, progress)
    if acc is None:
        progress.update(contexts=0, looks=[], stopped=None)
    started, before = time.perf_counter(), float(progress["seconds"])

    def save() -> None:
        progress["seconds"] = before + time.perf_counter() - started
        write_json(folder.path / PROGRESS, progress)

    for k, n in enumerate(looks):
        if progress["stopped"]:
            break
        if acc is None or acc.n_contexts < n:
            acc, spent = _next_chunk(folder, view, windows, request, taps, acc, looks[: k + 1])
            progress["contexts"] = n
            progress["tokens"] += spent.get("tokens", 0.0)
            progress["capture_seconds"] += spent.get("seconds", 0.0)
            save()
            folder.for_chunk(n).clear_checkpoint()
        look = next((t for t in progress["looks"] if t["contexts"] == n), None)
        if look is None:
            earlier = progress["looks"][-1]["verdicts"] if progress["looks"] else None
            look = _look(rule, acc, view, windows, n, config.batch_size, coverage, model, earlier)
            progress["looks"].append(look)
            save()
            undecided = ", ".join(look["undecided"]) or "none"
            _say(
                f"look {k + 1}/{len(looks)}, {n} contexts, {progress['seconds'] / 60:.1f} min: "
                f"undecided {undecided}"
            )
        progress["stopped"] = _stop(look, k, progress, auto.budget_minutes)
        if k == 0 and progress["stopped"] == "budget":
            _say(
                f"the first look alone took {progress['seconds'] / 60:.2f} min, more than the "
                f"budget of {auto.budget_minutes:g} min allows for the next; the first look "
                "always runs"
            )
    assert acc is not None
    if progress["stopped"] is None:
        progress["stopped"] = "last look"
    folder.save_stats("decomposition", acc.state_dict())
    save()
    (folder.path / "stats" / f"{CHUNKS}.safetensors").unlink(missing_ok=True)
    stopped = progress["stopped"]
    _say(
        f"stopped: {stopped} ({STOPPED[stopped]}) at {acc.n_contexts} contexts after "
        f"{progress['seconds'] / 60:.1f} min"
    )
    if stopped == "budget":
        _say(cut_short_line(auto.budget_minutes, acc.n_contexts, looks[-1]))
    return (
        acc,
        _timing(progress),
        window_range(windows, 0, acc.n_contexts),
        _record(progress, coverage, auto),
    )


def _next_chunk(
    folder: RunFolder,
    view: ModelView,
    windows: Windows,
    request: RunRequest,
    taps: Taps | None,
    acc: DecompositionAccumulator | None,
    looks: tuple[int, ...],
) -> tuple[DecompositionAccumulator, dict[str, float]]:
    """The chunk up to the last of ``looks`` captured (resumed from its own checkpoint) and
    merged into ``acc``, saved as the statistics so far (with the taps, filled from the
    first chunk); the capture's timing."""
    config, n = request.config, looks[-1]
    lo = 0 if acc is None else acc.n_contexts
    job = CaptureJob(
        view,
        window_range(windows, lo, n),
        replace(config, contexts=n - lo),
        folder.for_chunk(n),
        request.progress,
        request.checkpoint_every_s,
        taps if lo == 0 else None,
        StoreOffset(batches_before(looks, len(looks) - 1, config.batch_size), lo),
    )
    part, spent = engine_capture(job, request.engine)
    merged = part if acc is None else extend(acc, part)
    if taps and lo == 0:  # filled from the first windows: saved with the first chunk
        folder.save_stats("taps", taps.state_dict())
    folder.save_stats(CHUNKS, merged.state_dict())
    return merged, spent


def _look(
    rule: Any,
    acc: DecompositionAccumulator,
    view: ModelView,
    windows: Windows,
    n: int,
    batch_size: int,
    coverage: float,
    model: dict[str, Any],
    earlier: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The rule's look at the first ``n`` windows, as the progress keeps it (``earlier``:
    the verdicts of the look before)."""
    began = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):
        look = rule.look(
            acc, view, window_range(windows, 0, n), batch_size, coverage, model, earlier
        )
    return {
        "contexts": n,
        "undecided": list(look.undecided),
        "verdicts": dict(look.verdicts),
        "measured": bool(look.measured),
        "look_seconds": time.perf_counter() - began,
    }


def _timing(progress: dict[str, Any]) -> dict[str, Any]:
    """The manifest's timing of the chunks: captures, and minutes of captures and looks."""
    seconds = float(progress["capture_seconds"])
    timing: dict[str, Any] = {"tokens": float(progress["tokens"]), "seconds": seconds}
    if seconds > 0:
        timing["tokens_per_s"] = timing["tokens"] / seconds
    timing["auto_contexts"] = {
        "minutes": round(progress["seconds"] / 60, 2),
        "look_seconds": [round(t["look_seconds"], 2) for t in progress["looks"]],
    }
    return timing


def cut_short_line(budget: float, contexts: int, planned: int) -> str:
    """The sentence a run cut short by the budget says (``CUT_SHORT``)."""
    return CUT_SHORT.format(budget=budget, contexts=contexts, planned=planned)


def _record(progress: dict[str, Any], coverage: float, auto: AutoContexts) -> dict[str, Any]:
    """The record of a run of ``--contexts auto`` for metrics.json: what the numbers decide,
    no wall-clock time (that is in the manifest's timing); the budget only when it cut the
    run short (then with the sentence saying so), so a run the safety left alone writes the
    same bytes whatever its budget."""
    looks = progress["looks"]
    record: dict[str, Any] = {
        "looks": [t["contexts"] for t in looks],
        "stopped": progress["stopped"],
        "contexts": progress["contexts"],
        "alpha_spending": getattr(auto.rule, "spending", ""),
        "level": coverage,
        "planned": list(progress["planned"]),
        "max_contexts": auto.max_contexts,
        "undecided": [t["undecided"] for t in looks],
        "verdicts": looks[-1]["verdicts"] if looks else {},
    }
    if progress["stopped"] == "budget":
        record["budget_minutes"] = auto.budget_minutes
        record["cut_short"] = cut_short_line(
            auto.budget_minutes, progress["contexts"], progress["planned"][-1]
        )
    return {"auto_contexts": record}


def _say(line: str) -> None:
    print(f"geomlens: --contexts auto: {line}", file=sys.stderr, flush=True)


@contextmanager
def finishing(request: RunRequest, auto: dict[str, Any] | None) -> Iterator[None]:
    """Around the analysis and the claims: ``--contexts auto``'s rule's (its looks'
    interval level), else nothing."""
    if auto is None or request.auto is None or request.auto.rule is None:
        yield
        return
    with request.auto.rule.finishing(auto["auto_contexts"]["level"]):
        yield


def chunks_recorded(folder: RunFolder, request: RunRequest, auto: dict[str, Any]) -> dict[str, Any]:
    """The ``--contexts auto`` record with the claims the final analysis left undecided
    (its verdicts, not the looks', are the run's), set where the rule shows it; returned
    for the manifest."""
    record = dict(auto["auto_contexts"])
    metrics = folder.read_metrics()
    record["undecided_at_end"] = [
        c["id"]
        for c in metrics.get("claims") or []
        if c.get("id") in record["verdicts"] and c.get("verdict") == "inconclusive"
    ]
    folder.merge_metrics("capture", {**metrics.get("capture", {}), "auto_contexts": record})
    rule = request.auto.rule if request.auto is not None else None
    for key, section in ({} if rule is None else rule.sections(metrics, record)).items():
        folder.merge_metrics(key, section)
    return {"auto_contexts": record}
