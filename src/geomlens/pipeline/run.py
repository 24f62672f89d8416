"""``run``: one ``RunRequest`` through load, window, capture, analyse and record.

Every capturing command (capture, decompose, sphere, walk, report) runs here; the run
folder's lifecycle (hold, claim, reuse, begin, complete) is ``runs.lifecycle``'s.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from threadpoolctl import threadpool_limits

from geomlens.capturing.capture import CaptureConfig, check_length, resolve_layers
from geomlens.capturing.taps import Taps, fill_taps
from geomlens.config.figure_level import figure_level
from geomlens.corpus import Corpus, Windows, load_corpus, make_windows
from geomlens.corpus.windows import windows_available
from geomlens.engines import CaptureJob
from geomlens.engines import capture as engine_capture
from geomlens.errors import GeomlensError
from geomlens.io.files import damaged
from geomlens.models.facts import check_before_loading
from geomlens.models.hub import hub_record
from geomlens.models.identity import WEIGHTS_VERSION
from geomlens.models.loading import load_configured
from geomlens.models.placement import materialised, placement_record
from geomlens.models.view import ModelView
from geomlens.pipeline.auto import (
    auto_of,
    check_available,
    chunked,
    chunks_recorded,
    finishing,
    schedule,
)
from geomlens.pipeline.request import AutoContexts, RunRequest, identity_defaults
from geomlens.pipeline.taps import saved_taps
from geomlens.runs import lifecycle
from geomlens.runs.runfolder import (
    RERUN,
    Run,
    RunFolder,
    check_given_view,
    model_fingerprint,
    model_record,
    read_windows,
    write_json,
)
from geomlens.runs.stored import COMPACT
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.decomposition import OPTIONAL_STATE, interval_groups, state_spec
from geomlens.stats.finite import require_finite_weights


def windows_record(windows: Windows) -> dict[str, Any]:
    return {
        "doc_ids": list(windows.doc_ids),
        "labels": [int(x) for x in windows.labels],
        "label_names": list(windows.label_names),
        "n_skipped_short": windows.n_skipped_short,
        "special_tokens": windows.special_tokens,
        "fingerprint": windows.fingerprint,
    }


def capture_metrics(acc: DecompositionAccumulator) -> dict[str, Any]:
    """Per-layer variance shares with and without position 0 (deterministic numbers), and
    how many shares rounding put outside [0, 1] and were clamped into it."""
    layers = []
    shares_clamped = 0
    for layer in acc.layers:
        row: dict[str, Any] = {"layer": layer}
        for skip, suffix in ((False, ""), (True, "_skip_first")):
            stats = acc.finalize(layer, skip_first=skip, second_moment=False)
            s_pos, s_ctx, s_res = stats.shares
            shares_clamped += stats.shares_clamped
            row.update(
                {
                    f"share_pos{suffix}": round(s_pos, 12),
                    f"share_ctx{suffix}": round(s_ctx, 12),
                    f"share_resid{suffix}": round(s_res, 12),
                    f"rms_norm{suffix}": round(
                        float((stats.total_ss / (stats.n_contexts * stats.length)) ** 0.5), 9
                    ),
                }
            )
        layers.append(row)
    return {
        "n_contexts": acc.n_contexts,
        "length": acc.length,
        "layers": layers,
        "variances_clamped": acc.variances_clamped,
        "shares_clamped": shares_clamped,
    }


def check_positions(view: ModelView, config: CaptureConfig) -> None:
    """Refuse windows longer than the model's positions and layers it does not have."""
    check_length(view, config.length)
    resolve_layers(view, config.layers)


def prepare(
    config: CaptureConfig, view: ModelView | None = None, auto: AutoContexts | None = None
) -> tuple[ModelView, Corpus, Windows]:
    """Load the model (unless given) and cut the corpus into windows, checking limits first
    (``config`` is validated: ``run`` does it first); with ``auto``, the windows of its
    rule's every look, in chunks (the first ``n`` are those of a look of ``n``).

    The corpus is read before the model loads, so a bad corpus is reported at once.
    """
    corpus = load_corpus(config.corpus, config.text_column, config.label_column)
    if view is None:
        view = load_configured(config)
    check_positions(view, config)
    looks = None
    if auto is not None and auto.rule is not None:
        available = windows_available(corpus, view.tokenizer, config.length, config.offset)
        check_available(available, config.length)
        looks = schedule(auto.rule, auto, config.contexts, available)
    windows = make_windows(
        corpus,
        view.tokenizer,
        config.contexts if looks is None else looks[-1],
        config.length,
        seed=config.seed,
        offset=config.offset,
        balance=config.balance,
        chunks=looks,
    )
    check_distinct_windows(windows)
    return view, corpus, windows


def check_distinct_windows(windows: Windows) -> None:
    """Refuse windows that all hold the same tokens (a corpus repeating one text): their
    context part is zero and every variance share is 0/0, before any forward pass."""
    ids = np.asarray(windows.input_ids)
    if len(ids) > 1 and bool((ids == ids[:1]).all()):
        raise GeomlensError(
            f"all {len(ids)} windows hold the same {ids.shape[1]} tokens (the corpus repeats "
            "one text), so there is no context part to measure; give a corpus of different "
            "documents."
        )


def model_source(config: CaptureConfig, view: ModelView | None) -> str:
    """The folder the model of ``config`` loads from (without loading it when not given)."""
    if view is not None:
        return view.source
    from geomlens.models.loading import resolve_folder

    return str(resolve_folder(config.model, config.revision))


def check_stats_header(path: Path) -> None:
    """A cheap look at finished statistics (header and context counts, not the sums)."""
    try:
        with safe_open(str(path), "pt") as f:
            keys = set(f.keys())
            seen = f.get_tensor("seen") if "seen" in keys else None
    except SafetensorError as exc:
        raise damaged(path, f"not a complete safetensors file: {exc}", RERUN) from None
    if COMPACT in keys:  # a report's compacted statistics (runs/stored.py)
        keys.add("ctx_sum")
    needed = {"layers", "pos_sum", "ctx_sum", "first", "sumsq", "seen"}
    if not needed <= keys or seen is None or not bool((seen == 1).all()):
        raise damaged(path, "it is not a finished decomposition state", RERUN)


def finished_parts_missing(
    folder: RunFolder, sections: tuple[str, ...], tapped: bool = False
) -> list[str]:
    """What a finished run lacks (metrics sections, statistics, windows, and the taps'
    statistics where ``tapped``); damage is an error."""
    metrics = folder.read_metrics()
    missing = [f"the {s} section of metrics.json" for s in sections if s not in metrics]
    if tapped and not (folder.path / "stats" / "taps.safetensors").exists():
        missing.append("stats/taps.safetensors")
    stats = folder.path / "stats" / "decomposition.safetensors"
    if stats.exists():
        check_stats_header(stats)
    else:
        missing.append("stats/decomposition.safetensors")
    windows = folder.path / "windows.json"
    if windows.exists():
        read_windows(windows)
    else:
        missing.append("windows.json")
    return missing


def run(request: RunRequest) -> Run:
    """Capture into the request's run folder, then run its analysis; record everything.

    A folder holding a finished run of the same config and the same inputs is reused as
    it is; a partial one resumes (finished statistics are kept, a capture continues after
    its last saved batch); one holding another config, or the same config made from
    another model or corpus (fingerprints differ), is refused. A finished run lacking one
    of the request's sections in metrics.json is finished again. The engine is not part of
    the run's identity, so a run resumes under either engine. The folder is locked for the
    whole call.
    """
    config, view = request.config, request.view
    request.engine.validate(config.save_activations, config.device_map is not None)
    if not request.checked:
        config.validate()
        if request.check is not None:  # the analyses' own limits, before the model loads
            request.check(request.command, config)
    if request.auto is not None:  # a rule and a budget, before anything loads
        auto_of(request)
    check_corpus_given(config)
    given = None  # a given model's fingerprint: hashing its weights once per run
    if view is not None:  # a model loaded by the caller must be the one the config names
        given = check_given_view(view, config.model, config.dtype, config.revision)
        with materialised(view.model):  # offloaded weights read back (models.placement)
            require_finite_weights(view.model, str(config.model))
        if request.engine.name == "ray" and given.startswith(WEIGHTS_VERSION):
            raise GeomlensError(
                "a model in memory (or a view edited since loading) runs on the local engine "
                "only: Ray workers load the model from its files; save it with "
                "save_pretrained and give its folder, or leave engine at 'local'."
            )
    else:  # the files' facts first: refused before the folder and the weights
        check_before_loading(config.model, lambda v: check_positions(v, config), config.revision)
    with (
        lifecycle.run_folder(
            request.out, request.command, request.identity(), identity_defaults(type(config))
        ) as folder_run,
        figure_level(request.figures),
    ):
        return _run_locked(folder_run, request, given)


def sections_of(request: RunRequest) -> tuple[str, ...]:
    """The metrics.json sections a finished run of ``request`` holds."""
    return request.sections if request.sections is not None else ("capture",)


def figures_drawn(manifest: dict[str, Any]) -> str:
    """The figure level a run drew (its manifest's; an earlier geomlens kept it in the
    config, and drew "all" when it is absent)."""
    return str(manifest.get("figures") or manifest.get("config", {}).get("figures") or "all")


def check_corpus_given(config: CaptureConfig) -> None:
    """Refuse a corpus path that does not exist, before the run folder is compared (a
    missing file is named, not taken for another config)."""
    corpus = config.corpus
    if isinstance(corpus, str) and corpus != "bbc" and not Path(corpus).expanduser().exists():
        load_corpus(corpus, config.text_column, config.label_column)  # its one sentence


def reuse_finished(
    run: lifecycle.RunInFolder, request: RunRequest, given: str | None = None
) -> Run | None:
    """The finished run in the folder when it is this request's with every part present; None
    (after a notice) when parts are missing; refused when it is another run (``given``: the
    fingerprint of the model the request gives loaded).

    The windows follow from the corpus, the tokenizer and the config: comparing the corpus
    and the model does not need the (slow) tokenizing of every window.
    """
    config, view = request.config, request.view
    corpus = load_corpus(config.corpus, config.text_column, config.label_column)
    folder = run.folder
    model = given or model_fingerprint(model_source(config, view))
    folder.check_identity(
        run.previous or {}, {"model": model, "corpus": corpus.fingerprint}, finished=True
    )
    missing = finished_parts_missing(folder, sections_of(request), request.taps is not None)
    drawn = figures_drawn(run.previous or {})
    if not missing and drawn == request.figures:
        return run.reuse()
    if not missing:  # only the figures differ: the numbers stay, the stages draw again
        print(
            f"geomlens: notice: the finished run in {folder.path} drew figures '{drawn}'; "
            f"drawing '{request.figures}' from its saved statistics.",
            file=sys.stderr,
            flush=True,
        )
        (folder.path / lifecycle.STAGES_FILE).unlink(missing_ok=True)
        return None
    print(
        f"geomlens: notice: the finished run in {folder.path} lacks {', '.join(missing)}; "
        "computing what is missing again.",
        file=sys.stderr,
        flush=True,
    )
    return None


def captured(
    folder: RunFolder,
    view: ModelView,
    windows: Windows,
    request: RunRequest,
    taps: Taps | None = None,
) -> tuple[DecompositionAccumulator, dict[str, float]]:
    """The capture on the request's engine, saved as the run's finished statistics (and ``taps``,
    filled in the same passes, as ``stats/taps.safetensors``)."""
    job = CaptureJob(
        view, windows, request.config, folder, request.progress, request.checkpoint_every_s, taps
    )
    acc, timing = engine_capture(job, request.engine)
    if not acc.complete:  # never saved as finished statistics
        raise GeomlensError(
            f"the capture in {folder.path} ended without counting every context exactly "
            f"once; remove {folder.checkpoint_dir} and rerun the same command."
        )
    if taps:
        folder.save_stats("taps", taps.state_dict())
    folder.save_stats("decomposition", acc.state_dict())
    return acc, timing


def _run_locked(run: lifecycle.RunInFolder, request: RunRequest, given: str | None) -> Run:
    config, view, taps = request.config, request.view, request.taps
    if run.finished:
        reused = reuse_finished(run, request, given)
        if reused is not None:
            return reused
    folder = run.folder
    view, corpus, windows = prepare(config, view, request.auto)
    fingerprints = {
        "model": given or model_fingerprint(view.source),
        "corpus": corpus.fingerprint,
        "windows": windows.fingerprint,
    }
    if run.previous is not None:
        folder.check_identity(run.previous, fingerprints, finished=run.state == "complete")
    record: dict[str, Any] = {
        "model": model_record(view, fingerprints["model"]),
        **hub_record(view.source, config.revision),
        "model_fingerprint": fingerprints["model"],
        "corpus_fingerprint": fingerprints["corpus"],
        "windows_fingerprint": fingerprints["windows"],
        "corpus": corpus.record(),
        "device": str(view.device),
        **placement_record(view.model),
        "engine": request.engine.record(),
        "figures": request.figures,  # not in the identity: a rerun may draw others
    }
    if config.save_activations and request.engine.activations_dir is not None:
        record["activations"] = request.engine.activations_location(folder)
    manifest = run.begin(**record)
    if request.auto is None:  # --contexts auto: its looks' windows, once known
        write_json(folder.path / "windows.json", windows_record(windows))
    layers = resolve_layers(view, config.layers)
    groups = interval_groups(len(layers), windows.n_contexts, windows.length, view.d_model)
    spec = state_spec(
        layers, windows.n_contexts, windows.length, view.d_model, config.second_moment, groups
    )
    # a run saved before the interval groups (or the window norms) existed is reused
    # without intervals (or without outlier information)
    saved = (
        None
        if request.auto is not None
        else folder.load_stats("decomposition", spec, layers, optional=OPTIONAL_STATE)
    )
    tapped = None if taps is None else Taps.made(view, taps)
    auto, timing = None, dict[str, Any]()
    if request.auto is not None:  # resumed from its last saved chunk and batch
        acc, timing, windows, auto = chunked(
            folder, view, windows, request, tapped, manifest["model"]
        )
        write_json(folder.path / "windows.json", windows_record(windows))
    elif saved is not None:
        acc = DecompositionAccumulator.from_state_dict(saved)
        if tapped is not None and saved_taps(folder, view, taps) is None:  # type: ignore[arg-type]
            # a capture saved before its taps existed: they are filled alone
            ids = torch.tensor(np.array(windows.input_ids), dtype=torch.long)
            folder.save_stats("taps", fill_taps(view, ids, tapped, layers).state_dict())
    else:
        acc, timing = captured(folder, view, windows, request, tapped)
    # Also after a resume whose statistics were saved just before a failure (a full disk):
    # the same numbers give the same bytes.
    folder.merge_metrics("capture", capture_metrics(acc) | ({} if auto is None else auto))
    folder.clear_checkpoint()
    with finishing(request, auto):
        if request.analysis is not None:
            # The analyses take many SVDs of matrices a few hundred wide. Multi-threaded
            # OpenBLAS ran them 10-30x slower than one thread on the 2-core reference
            # machine (threads spinning against torch's); torch's own threads are unaffected.
            with threadpool_limits(limits=1, user_api="blas"):
                request.analysis(folder, view, windows, acc)
        if request.judge is not None:
            # The papers' claims, decided once from the numbers just written, and the
            # numbers a paper publishes for this model beside the run's own.
            metrics = folder.read_metrics()
            for key, section in request.judge(metrics, manifest["model"]).items():
                folder.merge_metrics(key, section)
    if auto is not None:
        return run.complete(timing, **chunks_recorded(folder, request, auto))
    return run.complete(timing)
