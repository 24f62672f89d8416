"""The run folder every computing command writes, and ``open_run`` to read it back.

Layout::

    DIR/manifest.json        config, versions, fingerprints, status, timing
    DIR/metrics.json         every number, keyed by analysis and layer (deterministic)
    DIR/windows.json         the corpus windows: doc ids, labels, fingerprint
    DIR/stats/*.safetensors  finalized accumulator states (float64 sums, mergeable)
    DIR/activations/         optional activation store (safetensors shards)
    DIR/checkpoint/          partial state while a capture runs (removed when done)
    DIR/figures/             figures
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import tempfile
from dataclasses import dataclass
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from geomlens.capture.store import ActivationStore, save_atomic
from geomlens.errors import GeomlensError
from geomlens.stats import DecompositionAccumulator

PACKAGES = ("geomlens", "torch", "transformers", "numpy", "safetensors", "gguf")


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically with sorted keys, so equal data gives equal bytes.

    If the write fails (a full disk), the previous file is left as it was.
    """
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is None:  # a full disk is reported without the file's name
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


def model_fingerprint(folder: str | Path) -> str:
    """sha256 over a model folder's config and the size, head and tail of each weight file."""
    folder = Path(folder)
    h = hashlib.sha256()
    if (folder / "config.json").exists():
        h.update((folder / "config.json").read_bytes())
    for path in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
        size = path.stat().st_size
        h.update(f"{path.name}|{size}".encode())
        with open(path, "rb") as f:
            h.update(f.read(1 << 20))
            f.seek(max(0, size - (1 << 20)))
            h.update(f.read(1 << 20))
    return h.hexdigest()


class RunFolder:
    """Writes one run: refuses a folder that holds a run of another config, resumes its own."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def read_manifest(self) -> dict[str, Any] | None:
        if not self.manifest_path.exists():
            return None
        try:
            return json.loads(self.manifest_path.read_text())
        except (OSError, json.JSONDecodeError):
            raise GeomlensError(
                f"{self.manifest_path} is unreadable; remove the folder or choose another --out."
            ) from None

    def claim(self, config: dict[str, Any]) -> str:
        """Prepare the folder for ``config``: returns "new", "resume" or "complete"."""
        if self.path.exists() and not self.path.is_dir():
            raise GeomlensError(f"--out {self.path} is a file; give a folder.")
        manifest = self.read_manifest()
        if manifest is None:
            if self.path.exists() and any(self.path.iterdir()):
                raise GeomlensError(
                    f"{self.path} is not empty and holds no geomlens run; choose another --out."
                )
            try:
                self.path.mkdir(parents=True, exist_ok=True)
                tempfile.TemporaryFile(dir=self.path).close()  # fail now, not after loading
            except OSError as exc:
                raise GeomlensError(
                    f"cannot write the run folder {self.path} ({exc.strerror}); "
                    "choose another --out."
                ) from None
            return "new"
        if manifest.get("config") != config:
            differs = sorted(
                k
                for k in set(config) | set(manifest.get("config", {}))
                if config.get(k) != manifest.get("config", {}).get(k)
            )
            raise GeomlensError(
                f"{self.path} holds a run of a different config (differs in: "
                f"{', '.join(differs)}); choose another --out or remove that folder."
            )
        return "complete" if manifest.get("status") == "complete" else "resume"

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json(self.manifest_path, manifest)

    # checkpoints -------------------------------------------------------------------------
    @property
    def checkpoint_dir(self) -> Path:
        return self.path / "checkpoint"

    def save_checkpoint(self, state: dict[str, torch.Tensor], batches_done: int) -> None:
        """Save accumulator state after ``batches_done`` batches (atomic: state, then progress)."""
        self.checkpoint_dir.mkdir(exist_ok=True)
        save_atomic(state, self.checkpoint_dir / f"state_{batches_done:05d}.safetensors")
        write_json(self.checkpoint_dir / "progress.json", {"batches_done": batches_done})
        for old in self.checkpoint_dir.glob("state_*.safetensors"):
            if old.name != f"state_{batches_done:05d}.safetensors":
                old.unlink()

    def load_checkpoint(self) -> tuple[dict[str, torch.Tensor], int] | None:
        progress = self.checkpoint_dir / "progress.json"
        if not progress.exists():
            return None
        done = json.loads(progress.read_text())["batches_done"]
        state = self.checkpoint_dir / f"state_{done:05d}.safetensors"
        return (load_file(str(state)), done) if state.exists() else None

    def clear_checkpoint(self) -> None:
        shutil.rmtree(self.checkpoint_dir, ignore_errors=True)

    # finished statistics -----------------------------------------------------------------
    def save_stats(self, name: str, state: dict[str, torch.Tensor]) -> Path:
        folder = self.path / "stats"
        folder.mkdir(exist_ok=True)
        return save_atomic(state, folder / f"{name}.safetensors")

    def merge_metrics(self, section: str, values: Any) -> None:
        """Set one section of metrics.json, keeping the others."""
        path = self.path / "metrics.json"
        metrics = json.loads(path.read_text()) if path.exists() else {}
        metrics[section] = values
        write_json(path, metrics)


@dataclass
class Run:
    """A finished run read back: manifest, metrics, statistics and activations (lazily)."""

    path: Path

    @cached_property
    def manifest(self) -> dict[str, Any]:
        return json.loads((self.path / "manifest.json").read_text())

    @property
    def config(self) -> dict[str, Any]:
        return self.manifest["config"]

    @cached_property
    def metrics(self) -> dict[str, Any]:
        path = self.path / "metrics.json"
        return json.loads(path.read_text()) if path.exists() else {}

    @cached_property
    def windows(self) -> dict[str, Any]:
        return json.loads((self.path / "windows.json").read_text())

    @cached_property
    def decomposition(self) -> DecompositionAccumulator:
        """The decomposition accumulator; ``.finalize(layer, skip_first)`` gives the stats."""
        return DecompositionAccumulator.from_state_dict(
            load_file(str(self.path / "stats" / "decomposition.safetensors"))
        )

    @property
    def activations(self) -> ActivationStore | None:
        """The activation store: DIR/activations, or where ``--activations-dir`` put it."""
        folder = self.path / "activations"
        if folder.exists():
            return ActivationStore(folder)
        location = self.manifest.get("activations")
        return ActivationStore(location) if location else None


def open_run(path: str | Path) -> Run:
    """Read a finished run folder back."""
    run = Run(Path(path))
    manifest = RunFolder(path).read_manifest()
    if manifest is None:
        raise GeomlensError(f"{path} holds no geomlens run (no manifest.json).")
    if manifest.get("status") != "complete":
        raise GeomlensError(
            f"the run in {path} is not complete; rerun the command that made it to finish it."
        )
    return run
