"""What an engine is given: its settings (``EngineConfig``) and the capture to run
(``CaptureJob``), below the engines so that each can name them without importing the
package that chooses between them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geomlens.engines.ray_import import require_ray
from geomlens.errors import GeomlensError

if TYPE_CHECKING:
    from geomlens.capturing.capture import CaptureConfig, StoreOffset
    from geomlens.capturing.taps import Taps
    from geomlens.corpus import Windows
    from geomlens.models.view import ModelView
    from geomlens.runs.runfolder import RunFolder

ENGINES = ("local", "ray")


@dataclass(frozen=True)
class EngineConfig:
    """How a capture runs (none of it changes the result beyond float64 summation order).

    Attributes:
        name: "local" or "ray".
        ray_address: a Ray cluster to join ("auto", "ray://host:10001", "host:6379"); None
            joins ``RAY_ADDRESS`` if set, else starts a local Ray instance.
        workers: Ray model workers (default: one per GPU with ``--device cuda``, else the
            cluster's CPUs divided by ``threads``).
        threads: torch threads per worker (Ray; default 1) or of this process (local;
            default: torch's own choice).
        activations_dir: where ``--save-activations`` writes shards: a local folder or an
            fsspec URL (default: the run folder's ``activations/``).
        shards_per_worker: how many shards each Ray worker gets (more: finer retries and
            balance; fewer: fewer accumulator states to move).
    """

    name: str = "local"
    ray_address: str | None = None
    workers: int | None = None
    threads: int | None = None
    activations_dir: str | None = None
    shards_per_worker: int = 4

    def validate(self, save_activations: bool, placed: bool = False) -> None:
        """Plain-sentence errors for options that cannot work together (``placed``: the
        model is placed over several devices by ``--device-map``)."""
        if self.name not in ENGINES:
            raise GeomlensError(
                f"--engine must be one of {', '.join(ENGINES)} (got {self.name!r})."
            )
        for flag, value in (("--workers", self.workers), ("--threads", self.threads)):
            if value is not None and value < 1:
                raise GeomlensError(f"{flag} must be at least 1 (got {value}).")
        if self.name == "local" and (self.workers is not None or self.ray_address is not None):
            raise GeomlensError("--workers and --ray-address need --engine ray.")
        if self.activations_dir is not None and not save_activations:
            raise GeomlensError("--activations-dir needs --save-activations.")
        if self.activations_dir is not None and "://" in self.activations_dir:
            from geomlens.capturing.store import url_fs

            url_fs(self.activations_dir)  # a missing filesystem package, before any work
        if self.name == "ray" and placed:
            raise GeomlensError(
                "--device-map spreads one model over this machine's devices, but each Ray "
                "worker holds a whole model on one device; drop --device-map or --engine ray."
            )
        if self.name == "ray":
            require_ray()

    def activations_location(self, folder: RunFolder) -> str:
        """The activation store's location: the given folder or URL, else DIR/activations."""
        if self.activations_dir is None:
            return str((folder.path / "activations").resolve())
        if "://" in self.activations_dir:
            return self.activations_dir
        return str(Path(self.activations_dir).resolve())

    def record(self) -> dict[str, Any]:
        """What the manifest keeps about the engine."""
        data: dict[str, Any] = {"name": self.name}
        if self.name == "ray":
            data.update(address=self.ray_address, workers=self.workers, threads=self.threads)
        if self.activations_dir is not None:
            data["activations_dir"] = self.activations_dir
        return data


@dataclass(frozen=True)
class CaptureJob:
    """One capture for an engine to run (see ``capture_windows`` for the contract).

    Attributes:
        view: the model, loaded in this process.
        windows: the corpus windows, every one captured.
        config: the capture config.
        folder: the run folder (checkpoints are saved and resumed there).
        progress: show a progress bar.
        checkpoint_every_s: at most this many seconds between checkpoints.
        taps: statistics filled in the same passes (``capturing.taps``), in place.
        store_offset: where its activation shards sit in the run's store (a chunk of
            ``--contexts auto``: after the earlier chunks'); None: at the start.
    """

    view: ModelView
    windows: Windows
    config: CaptureConfig
    folder: RunFolder
    progress: bool = True
    checkpoint_every_s: float = 30.0
    taps: Taps | None = None
    store_offset: StoreOffset | None = None
