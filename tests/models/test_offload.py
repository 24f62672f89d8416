"""A model placed by accelerate (``device_map``), half of its blocks offloaded to disk,
measures as the same model in memory.

A tiny random Llama of 4 blocks saved with a real tokenizer: blocks 2 and 3 sit on "disk"
(their parameters stay on the meta device between forward passes; accelerate's hooks
read them from the offload folder for each pass). The decomposition's numbers, the on-load
check and the view's weights equal the in-memory run's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_models import saved_llama

import geomlens
from geomlens.cli import main
from geomlens.errors import GeomlensError
from geomlens.models import ModelView, load_model
from geomlens.models.placement import offloaded

SMALL: dict[str, Any] = dict(contexts=8, length=16, batch_size=4, figures="none", progress=False)

ON_DISK = {
    "model.embed_tokens": "cpu",
    "model.rotary_emb": "cpu",
    "model.layers.0": "cpu",
    "model.layers.1": "cpu",
    "model.layers.2": "disk",
    "model.layers.3": "disk",
    "model.norm": "cpu",
    "lm_head": "cpu",
}
"""Half of the blocks on disk, the rest in memory."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("offload") / "tiny-llama"
    return saved_llama(folder, num_hidden_layers=4, tie_word_embeddings=False)


@pytest.fixture(scope="module")
def in_memory(folder: Path) -> ModelView:
    return load_model(folder)


@pytest.fixture(scope="module")
def on_disk(folder: Path) -> ModelView:
    return load_model(folder, device_map=ON_DISK, offload_folder=folder.parent / "offload")


def close(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON values differ beyond float rounding (1e-9 relative), as paths."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(a.keys() ^ b.keys())}"]
        return [d for k in a for d in close(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: lengths {len(a)} != {len(b)}"]
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in close(x, y, f"{path}[{i}]")
        ]
    if isinstance(a, float) and isinstance(b, float):
        same = math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))
        return [] if same else [f"{path}: {a} != {b}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_offloaded_blocks_stay_offloaded_and_the_view_reads_their_weights(
    in_memory: ModelView, on_disk: ModelView
) -> None:
    blocks = on_disk.model.model.layers
    # blocks 2 and 3 hold no weights between passes; accelerate's hooks keep them
    assert {p.device.type for p in blocks[2].parameters()} == {"meta"}
    assert {p.device.type for p in blocks[0].parameters()} == {"cpu"}
    assert len(offloaded(blocks[2])) >= 1 and offloaded(blocks[0]) == []
    assert on_disk.model.hf_device_map["model.layers.3"] == "disk"
    # the view's weights of an offloaded block are the stored ones, read on demand
    for ours, theirs in zip(on_disk.blocks, in_memory.blocks, strict=True):
        a, b = ours.heads(), theirs.heads()
        assert torch.equal(a.W_Q, b.W_Q) and torch.equal(a.W_O, b.W_O)
        assert torch.equal(ours.mlp().W_out, theirs.mlp().W_out)
        assert torch.equal(ours.norm_attn.weight, theirs.norm_attn.weight)
    assert {p.device.type for p in blocks[2].parameters()} == {"meta"}  # left offloaded
    # the on-load check ran against Hugging Face's forward pass of the placed model
    assert on_disk.load_check is not None and on_disk.load_check.blocks == 4
    assert max(on_disk.load_check.max_error.values()) < on_disk.load_check.tolerance


def test_decompose_with_blocks_on_disk_equals_the_in_memory_run(
    folder: Path, on_disk: ModelView, tmp_path: Path
) -> None:
    memory = geomlens.decompose(model=str(folder), out=tmp_path / "memory", **SMALL)
    disk = geomlens.decompose(model=str(folder), view=on_disk, out=tmp_path / "disk", **SMALL)
    ours = json.loads((disk.folder / "metrics.json").read_text())
    theirs = json.loads((memory.folder / "metrics.json").read_text())
    assert {"decomposition", "attention"} <= ours.keys()
    assert close(ours, theirs) == []
    manifest = json.loads((disk.folder / "manifest.json").read_text())
    assert manifest["device_map"] == ON_DISK
    assert "device_map" not in json.loads((memory.folder / "manifest.json").read_text())


def test_the_command_line_places_a_model_by_a_memory_limit(
    folder: Path, tmp_path: Path, caplog
) -> None:
    """--device-map auto with too little memory for the whole model: accelerate puts the
    rest on disk, and the capture's numbers are the in-memory capture's."""
    args = ["capture", "--model", str(folder), "--contexts", "8", "--length", "16", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "memory")]) == 0
    placed = ["--device-map", "auto", "--max-memory", "cpu=300KB"]
    placed += ["--offload-folder", str(tmp_path / "offload")]
    assert main([*args, *placed, "--out", str(tmp_path / "placed")]) == 0
    notices = [r for r in caplog.records if r.name.startswith("accelerate")]
    assert notices == []  # accelerate's meta-device notice kept out of the terminal
    manifest = json.loads((tmp_path / "placed" / "manifest.json").read_text())
    assert "disk" in manifest["device_map"].values() and "cpu" in manifest["device_map"].values()
    assert "device_map" not in manifest["config"]  # how it loads is not what it computes
    ours, theirs = (
        json.loads((tmp_path / r / "metrics.json").read_text()) for r in ("placed", "memory")
    )
    assert close(ours, theirs) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"max_memory": {"cpu": "1GiB"}},
            "--max-memory and --offload-folder place a model only with --device-map",
        ),
        (
            {"device_map": "everywhere"},
            "--device-map 'everywhere' is not a placement; use one of auto",
        ),
        (
            {"device_map": {"model": "gpu7"}},
            "device_map names devices gpu7; a module goes to cpu, disk",
        ),
        ({"device_map": ON_DISK}, "device_map puts modules on disk but names no folder for them"),
    ],
)
def test_a_placement_that_cannot_be_followed_is_refused_before_loading(
    folder: Path, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(GeomlensError, match=message):
        load_model(folder, **kwargs)


def test_a_bad_memory_limit_is_refused_by_the_command_line(
    folder: Path, tmp_path: Path, capsys
) -> None:
    args = ["capture", "--model", str(folder), "--device-map", "auto", "--max-memory", "cpu:lots"]
    assert main([*args, "--out", str(tmp_path / "x")]) == 2
    assert (
        "takes DEVICE=SIZE pairs like 0=20GiB,cpu=64GiB (got 'cpu:lots')" in capsys.readouterr().err
    )


def test_a_placed_model_is_not_sent_to_ray_workers(folder: Path, tmp_path: Path, capsys) -> None:
    args = ["capture", "--model", str(folder), "--device-map", "auto", "--engine", "ray"]
    assert main([*args, "--out", str(tmp_path / "x"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "each Ray worker holds a whole model on one device; drop --device-map" in err
    assert not (tmp_path / "x").exists()


def test_a_view_that_reads_offloaded_weights_outside_the_forward_is_refused(
    tmp_path: Path,
) -> None:
    """T5's view computes the relative position bias by calling a method of the attention,
    outside any forward pass accelerate's hooks serve: with the decoder's blocks on disk
    the load stops in one sentence, not in accelerate's meta-tensor error."""
    from seq2seq_models import tiny_t5

    folder = tiny_t5(tmp_path, "t5-v1_1")
    placed = {"shared": "cpu", "encoder": "cpu", "decoder.embed_tokens": "cpu"}
    placed |= {"decoder.block": "disk", "decoder.final_layer_norm": "cpu"}
    placed |= {"decoder.dropout": "cpu", "lm_head": "cpu"}
    with pytest.raises(GeomlensError, match="the t5 model's view reads some offloaded weights"):
        load_model(folder, device_map=placed, offload_folder=tmp_path / "offload")
