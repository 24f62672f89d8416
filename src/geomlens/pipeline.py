"""One function per command: load, window, capture, write the run folder."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from safetensors.torch import load_file
from threadpoolctl import threadpool_limits

from geomlens.capture.capture import CaptureConfig, check_length, resolve_layers
from geomlens.corpus import Corpus, Windows, load_corpus, make_windows
from geomlens.engines import EngineConfig
from geomlens.engines import capture as engine_capture
from geomlens.models import load_model
from geomlens.models.view import ModelView
from geomlens.runfolder import (
    Run,
    RunFolder,
    model_fingerprint,
    open_run,
    package_versions,
    write_json,
)
from geomlens.stats import DecompositionAccumulator


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
    """Per-layer variance shares with and without position 0 (deterministic numbers)."""
    layers = []
    for layer in acc.layers:
        row: dict[str, Any] = {"layer": layer}
        for skip, suffix in ((False, ""), (True, "_skip_first")):
            stats = acc.finalize(layer, skip_first=skip)
            s_pos, s_ctx, s_res = stats.shares
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
    return {"n_contexts": acc.n_contexts, "length": acc.length, "layers": layers}


def prepare(
    config: CaptureConfig, view: ModelView | None = None
) -> tuple[ModelView, Corpus, Windows]:
    """Load the model (unless given) and cut the corpus into windows, checking limits first.

    The corpus is read before the model loads, so a bad corpus is reported at once.
    """
    config.validate()
    corpus = load_corpus(config.corpus)
    if view is None:
        view = load_model(
            config.model,
            device=config.device,
            dtype=config.dtype,
            trust_remote_code=config.trust_remote_code,
        )
    check_length(view, config.length)
    resolve_layers(view, config.layers)
    windows = make_windows(
        corpus,
        view.tokenizer,
        config.contexts,
        config.length,
        seed=config.seed,
        offset=config.offset,
        balance=config.balance,
    )
    return view, corpus, windows


Analysis = Callable[[RunFolder, ModelView, Windows, DecompositionAccumulator], None]


def run_command(
    command: str,
    config: CaptureConfig,
    out: str | Path,
    *,
    options: dict[str, Any] | None = None,
    analyse: Analysis | None = None,
    view: ModelView | None = None,
    progress: bool = True,
    checkpoint_every_s: float = 30.0,
    engine: EngineConfig | None = None,
) -> Run:
    """Capture into a run folder, then run ``analyse`` on the result; record everything.

    A folder holding a finished run of the same config is reused as it is; a partial one
    resumes (finished statistics are kept, a capture continues after its last saved
    batch); one holding another config is refused. ``view`` reuses a model already loaded
    for ``config.model``. ``engine`` says where the capture runs (default: this process);
    it is not part of the run's identity, so a run resumes under either engine.
    """
    engine = engine or EngineConfig()
    engine.validate(config.save_activations)
    folder = RunFolder(out)
    full_config = {**config.to_dict(), "command": command, **(options or {})}
    state = folder.claim(full_config)
    if state == "complete":
        print(f"{folder.path} already holds this run; reusing it.", file=sys.stderr)
        return open_run(folder.path)
    started = time.time()
    view, corpus, windows = prepare(config, view)
    manifest: dict[str, Any] = {
        "command": command,
        "config": full_config,
        "status": "running",
        "versions": package_versions(),
        "model": {**view.describe(), "source": view.source},
        "model_fingerprint": model_fingerprint(view.source),
        "corpus_fingerprint": corpus.fingerprint,
        "windows_fingerprint": windows.fingerprint,
        "device": str(view.device),
        "engine": engine.record(),
    }
    if config.save_activations and engine.activations_dir is not None:
        manifest["activations"] = engine.activations_location(folder)
    folder.write_manifest(manifest)
    write_json(folder.path / "windows.json", windows_record(windows))
    finished = folder.path / "stats" / "decomposition.safetensors"
    if finished.exists():
        acc = DecompositionAccumulator.from_state_dict(load_file(str(finished)))
        timing: dict[str, float] = {}
    else:
        acc, timing = engine_capture(
            view,
            windows,
            config,
            folder,
            engine,
            progress=progress,
            checkpoint_every_s=checkpoint_every_s,
        )
        folder.save_stats("decomposition", acc.state_dict())
    # Also after a resume whose statistics were saved just before a failure (a full disk):
    # the same numbers give the same bytes.
    folder.merge_metrics("capture", capture_metrics(acc))
    folder.clear_checkpoint()
    if analyse is not None:
        # The analyses take many SVDs of matrices a few hundred wide. Multi-threaded
        # OpenBLAS ran them 10-30x slower than one thread on the 2-core reference
        # machine (threads spinning against torch's); torch's own threads are unaffected.
        with threadpool_limits(limits=1, user_api="blas"):
            analyse(folder, view, windows, acc)
    manifest.update(status="complete", timing={**timing, "wall_seconds": time.time() - started})
    folder.write_manifest(manifest)
    return open_run(folder.path)


def run_capture(config: CaptureConfig, out: str | Path, **kwargs: Any) -> Run:
    """``geomlens capture``: stream the corpus through the model into one run folder."""
    return run_command("capture", config, out, **kwargs)
