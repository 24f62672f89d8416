"""The activation store is trusted only for what its manifest records: another run's store is
refused, and any damage to a shard or to the manifest (replaced, missing, edited, truncated)
ends in one sentence naming the file, before a tensor is allocated; a rerun of the run
captures again instead of reusing a damaged store."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from geomlens.capturing import CaptureConfig
from geomlens.capturing.store import (
    STORE_MANIFEST,
    ActivationStore,
    StoreDamaged,
    write_shard,
)
from geomlens.commands.capture import run_capture
from geomlens.engines import EngineConfig
from geomlens.errors import GeomlensError
from geomlens.runs.runfolder import open_run

CONFIG = CaptureConfig(
    model="minilm-l6",
    contexts=6,
    length=8,
    batch_size=2,
    layers=(0, 2),
    save_activations=True,
)


def capture(minilm, out: Path, store: Path | str | None = None):
    engine = EngineConfig(threads=1, activations_dir=None if store is None else str(store))
    return run_capture(CONFIG, out, view=minilm, progress=False, engine=engine)


@pytest.fixture(scope="module")
def reference(minilm, tmp_path_factory) -> torch.Tensor:
    """Layer 2 of an intact store (the numbers every repaired store must give again)."""
    run = capture(minilm, tmp_path_factory.mktemp("ref") / "run")
    store = run.activations
    assert store is not None and len(store) == 3
    return store.layer(2)


def test_a_store_records_each_shard_contexts_shapes_and_hashes(minilm, tmp_path):
    run = capture(minilm, tmp_path / "run")
    store = open_run(run.path).activations
    assert store is not None and store.manifest is not None
    assert store.manifest["run"] == run.manifest["run_id"]
    shards = store.manifest["shards"]
    assert [s["contexts"] for s in shards] == [[0, 2], [2, 4], [4, 6]]
    assert shards[0]["tensors"]["layer_2"]["shape"] == [2, 8, 384]
    assert all(len(s["tensors"]["layer_0"]["sha256"]) == 64 for s in shards)
    assert run.manifest["activation_store"]["shards"] == 3


def test_a_second_run_cannot_take_another_runs_store(minilm, tmp_path, reference):
    shared = tmp_path / "shared"
    capture(minilm, tmp_path / "a", shared)
    before = {p.name: p.read_bytes() for p in shared.iterdir()}
    with pytest.raises(GeomlensError, match="belongs to another run") as info:
        capture(minilm, tmp_path / "b", shared)
    assert "\n" not in str(info.value)
    assert {p.name: p.read_bytes() for p in shared.iterdir()} == before  # nothing overwritten
    store = open_run(tmp_path / "a").activations
    assert store is not None and torch.equal(store.layer(2), reference)


def test_a_store_belonging_to_another_run_is_refused_when_read(minilm, tmp_path):
    capture(minilm, tmp_path / "a", tmp_path / "sa")
    capture(minilm, tmp_path / "b", tmp_path / "sb")
    # run a's manifest pointed at run b's store (a folder moved or a manifest edited)
    manifest = (tmp_path / "a" / "manifest.json").read_text()
    (tmp_path / "a" / "manifest.json").write_text(
        manifest.replace(str((tmp_path / "sa").resolve()), str((tmp_path / "sb").resolve()))
    )
    with pytest.raises(GeomlensError, match="belongs to another run"):
        _ = open_run(tmp_path / "a").activations


def copy_over(folder: Path) -> str:
    shutil.copyfile(folder / "shard_00001.safetensors", folder / "shard_00000.safetensors")
    return "shard_00000.safetensors"


def delete(folder: Path) -> str:
    (folder / "shard_00002.safetensors").unlink()
    return "shard_00002.safetensors"


def flip_a_data_byte(folder: Path) -> str:
    path = folder / "shard_00001.safetensors"
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # in the last tensor's bytes: the header stays valid
    path.write_bytes(bytes(data))
    return "shard_00001.safetensors"


def truncate(folder: Path) -> str:
    path = folder / "shard_00001.safetensors"
    path.write_bytes(path.read_bytes()[:100])
    return "shard_00001.safetensors"


def remove_manifest(folder: Path) -> str:
    (folder / STORE_MANIFEST).unlink()
    return "activations"


def garble_manifest(folder: Path) -> str:
    (folder / STORE_MANIFEST).write_text('{"run": ')
    return STORE_MANIFEST


DAMAGE: dict[str, Callable[[Path], str]] = {
    "shard copied over another": copy_over,
    "shard deleted": delete,
    "shard data edited": flip_a_data_byte,
    "shard truncated": truncate,
    "manifest removed": remove_manifest,
    "manifest garbled": garble_manifest,
}


@pytest.mark.parametrize("damage", DAMAGE.values(), ids=DAMAGE.keys())
def test_damage_is_one_sentence_naming_the_file_then_a_rerun_repairs_it(
    damage, minilm, tmp_path, reference, capsys
):
    run = capture(minilm, tmp_path / "run")
    folder = run.path / "activations"
    named = damage(folder)
    with pytest.raises(GeomlensError) as info:
        store = open_run(run.path).activations
        assert store is not None
        store.layer(2)
    message = str(info.value)
    assert named in message and "\n" not in message
    again = capture(minilm, run.path)  # never "reusing it": the store is captured again
    err = capsys.readouterr().err
    assert "reusing" not in err and "capturing again" in err
    store = again.activations
    assert store is not None and torch.equal(store.layer(2), reference)


def test_a_non_persistent_url_is_refused_before_any_work(minilm, tmp_path):
    with pytest.raises(GeomlensError, match="vanish when the process ends"):
        capture(minilm, tmp_path / "run", "memory://store")
    assert not (tmp_path / "run").exists()


def shards(folder: Path, spans: list[tuple[int, int]], layers=(0,)) -> None:
    """Write shards of random activations [c, 4, 3] covering ``spans`` (no manifest)."""
    for batch, (lo, hi) in enumerate(spans):
        n = hi - lo
        hidden = {layer: torch.randn(n, 4, 3) for layer in layers}
        ids = torch.zeros(n, 4, dtype=torch.long)
        write_shard(folder, batch, ids, torch.arange(lo, hi), torch.zeros(n), hidden, torch.float32)


@pytest.mark.parametrize(
    ("spans", "why"),
    [
        ([(0, 2), (0, 2)], "which shard_00000.safetensors holds too"),
        ([(0, 2), (3, 5)], "lacks context 2"),
        ([(0, 3), (2, 5)], "holds context 2"),
    ],
    ids=["duplicated", "gap", "overlap"],
)
def test_coverage_is_checked_before_allocating(spans, why, tmp_path, monkeypatch):
    shards(tmp_path, spans)
    monkeypatch.setattr(torch, "empty", lambda *a, **k: pytest.fail("allocated"))
    with pytest.raises(StoreDamaged, match=why):
        ActivationStore(tmp_path).layer(0)


def test_a_store_without_a_manifest_reads_in_context_order(tmp_path):
    shards(tmp_path, [(2, 4), (0, 2)])  # shard 0 holds the later contexts
    store = ActivationStore(tmp_path)
    out = store.layer(0)
    assert out.shape == (4, 4, 3)
    first = next(store.iter_shards([0]))
    assert torch.equal(out[2:4], first["layer_0"])


def test_a_missing_layer_is_one_sentence(tmp_path):
    shards(tmp_path, [(0, 2)])
    with pytest.raises(GeomlensError, match="not layer 5"):
        ActivationStore(tmp_path).layer(5)
