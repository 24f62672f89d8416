"""One run folder, two threads of one process: the second holder is refused with one
sentence, as a second process is, and a run that finishes holds its own seed's numbers."""

from __future__ import annotations

import json
import threading

import pytest

import geomlens
from geomlens.errors import GeomlensError
from geomlens.models import ModelView
from geomlens.runs import lifecycle

TEXTS = [
    "The river rose through the night and by morning the bridge was under water again.",
    "She opened the old piano, pressed a key, and listened to the note fade slowly away.",
    "Markets fell sharply after the bank raised its rates for the third time this year.",
    "The team scored twice in the last ten minutes to win the cup in front of home fans.",
    "A small robot rolled across the lab floor, stopped, and turned its camera to the door.",
    "Farmers in the valley planted wheat early because the spring had been unusually warm.",
]
SMALL = dict(contexts=3, length=8, layers=[0, 2], batch_size=1, progress=False, figures="none")


def test_a_folder_held_by_another_thread_is_refused(minilm: ModelView, tmp_path):
    out = tmp_path / "run"
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lifecycle.held(out):
            holding.set()
            release.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    holding.wait()
    try:
        with pytest.raises(GeomlensError, match="in use by another thread of this process"):
            geomlens.capture(model="minilm-l6", corpus=TEXTS, out=out, view=minilm, **SMALL)
        assert not (out / "manifest.json").exists()
    finally:
        release.set()
        thread.join()
    with lifecycle.held(out), lifecycle.held(out):  # free again; nested in one thread
        assert (out / ".lock").exists()
    assert not (out / ".lock").exists()


def test_two_threads_capturing_into_one_folder(minilm: ModelView, tmp_path):
    """Seeds 0 and 1 into one ``out`` at once: each capture that returns holds its own
    seed's numbers (equal to that seed's run alone), and so does the folder."""
    alone = {
        seed: geomlens.capture(
            model="minilm-l6",
            corpus=TEXTS,
            seed=seed,
            out=tmp_path / f"alone{seed}",
            view=minilm,
            **SMALL,
        ).metrics["capture"]
        for seed in (0, 1)
    }
    assert alone[0] != alone[1]  # the seeds choose different windows
    out = tmp_path / "shared"
    start = threading.Barrier(2)
    results: dict[int, object] = {}

    def capture(seed: int) -> None:
        start.wait()
        try:
            results[seed] = geomlens.capture(
                model="minilm-l6", corpus=TEXTS, seed=seed, out=out, view=minilm, **SMALL
            )
        except GeomlensError as error:
            results[seed] = error

    threads = [threading.Thread(target=capture, args=(seed,)) for seed in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    finished = {s: r for s, r in results.items() if not isinstance(r, GeomlensError)}
    refused = [str(r) for r in results.values() if isinstance(r, GeomlensError)]
    assert len(finished) == 1 and len(refused) == 1, results
    assert "in use by another thread" in refused[0] or "different config" in refused[0]
    ((seed, result),) = finished.items()
    assert result.metrics["capture"] == alone[seed]
    manifest = json.loads((out / "manifest.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    assert manifest["config"]["seed"] == seed and metrics["capture"] == alone[seed]
