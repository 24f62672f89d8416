"""The run lifecycle every command shares: hold the folder, claim it, reuse a finished run,
write the manifest, mark stages finished, and mark the run complete.

A command that writes a run does it in one block::

    with lifecycle.run_folder(out, "capture", config) as run:
        if run.state == "complete":
            return run.reuse()
        run.begin(model=...)  # the manifest, status "running"
        ...                   # the numbers, into run.folder
        return run.complete(timing)

``run_folder`` holds and claims the folder; ``RunInFolder`` carries its state and previous
manifest and does the rest. The steps, in order:

1. ``held(out)``: the folder is locked for the whole command (a second process is told
   the folder is busy).
2. ``claim(folder, config)``: a new folder is claimed for ``config``; a folder holding
   another config is refused; the state ("new", "resume", "complete") and the previous
   manifest come back, so the command can reuse or resume.
3. ``reuse(folder)``: a finished run of the same config is read back as it is.
4. ``begin(folder, command, config, ...)``: the manifest is written with status
   "running" and the package versions.
5. ``record_stage`` / ``finished_stages``: a multi-stage command (``report``) records
   each stage in ``stages.json`` once its numbers and figures are on disk.
6. ``complete(folder, manifest, started, ...)``: status "complete" and the wall time.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geomlens.capturing.store import (
    StoreDamaged,
    claim_store,
    new_run_id,
    seal_store,
    unseal_store,
    verify_store,
)
from geomlens.errors import GeomlensError, one_line
from geomlens.io.files import damaged, read_json
from geomlens.runs.runfolder import (
    RERUN,
    Run,
    RunFolder,
    open_run,
    package_versions,
    store_location,
    write_json,
)

STAGES_FILE = "stages.json"


@contextmanager
def held(out: str | Path) -> Iterator[RunFolder]:
    """The run folder ``out``, locked against other processes for the ``with`` block.

    A folder made here is removed again when the block fails with nothing written in it
    (a refused command leaves no empty run folder behind)."""
    folder = RunFolder(out)
    made = not Path(out).exists()
    try:
        with folder.hold():
            yield folder
    except BaseException:
        if made:
            with suppress(OSError):
                folder.path.rmdir()  # only an empty folder: anything written stays
        raise


def claim(
    folder: RunFolder, config: dict[str, Any], defaults: Mapping[str, Any] | None = None
) -> tuple[str, dict[str, Any] | None]:
    """Claim ``folder`` for ``config``: its state and the manifest it held before (if any);
    ``defaults`` fill fields either config lacks (``RunFolder.claim``).

    A finished run with an activation store counts as finished only while its store holds
    what its manifest records (``verify_store``): a damaged one is named in a notice and
    the run is made again (its store rewritten by a new capture)."""
    state = folder.claim(config, defaults)
    previous = folder.read_manifest()
    if state == "complete" and previous is not None and config.get("save_activations") is True:
        location = store_location(folder.path, previous)
        try:
            verify_store(location, previous.get("run_id"))
        except StoreDamaged as exc:
            print(
                f"geomlens: notice: {str(exc).split('; ')[0]}; capturing again to rewrite it.",
                file=sys.stderr,
                flush=True,
            )
            recapture(folder, location, previous.get("run_id"))
            state = "resume"
    return state, previous


def recapture(folder: RunFolder, location: str | Path, run_id: str | None) -> None:
    """Make the next command capture again: the store is marked as being written and the
    finished statistics (which would be reused instead of capturing) are removed."""
    unseal_store(location, run_id, folder.path)
    (folder.path / "stats" / "decomposition.safetensors").unlink(missing_ok=True)


def reuse(folder: RunFolder) -> Run:
    """A finished run of the same config, read back as it is."""
    print(f"{folder.path} already holds this run; reusing it.", file=sys.stderr)
    return open_run(folder.path)


def begin(folder: RunFolder, command: str, config: dict[str, Any], **record: Any) -> dict[str, Any]:
    """Write the manifest of a running command (its config, package versions and
    ``record``); returns it for ``complete``."""
    before = folder.read_manifest() or {}
    manifest: dict[str, Any] = {
        "command": command,
        "config": config,
        "status": "running",
        "versions": package_versions(),
        "run_id": before.get("run_id") or new_run_id(),
        **record,
    }
    if config.get("save_activations") is True:  # the store is this run's before any shard
        claim_store(store_location(folder.path, manifest), manifest["run_id"], folder.path)
    folder.write_manifest(manifest)
    return manifest


def seal(folder: RunFolder, manifest: dict[str, Any]) -> dict[str, Any]:
    """Check the run's activation store covers its capture and record it (``seal_store``);
    the store's summary for the manifest. A store that does not is made to be written
    again by the next command (``recapture``), and the run is not marked complete."""
    from safetensors import SafetensorError, safe_open

    location = store_location(folder.path, manifest)
    stats = folder.path / "stats" / "decomposition.safetensors"
    try:
        with safe_open(str(stats), "pt") as f:
            layers = [int(x) for x in f.get_tensor("layers").tolist()]
            length = int(f.get_slice("pos_sum").get_shape()[1])
            contexts = int(f.get_slice("seen").get_shape()[0])
    except (SafetensorError, OSError, KeyError) as exc:
        raise damaged(stats, f"not a finished decomposition state: {exc}", RERUN) from None
    try:
        return seal_store(location, manifest["run_id"], contexts, length, layers)
    except StoreDamaged as exc:
        recapture(folder, location, manifest["run_id"])
        raise GeomlensError(
            f"{str(exc).split('; ')[0]}; the run is not marked complete: rerun the same "
            "command to capture again and rewrite the store."
        ) from None


def complete(
    folder: RunFolder,
    manifest: dict[str, Any],
    started: float,
    timing: Mapping[str, Any] | None = None,
    **record: Any,
) -> Run:
    """Mark the run complete with its wall time (plus ``timing`` and ``record``).

    Only a run whose numbers are finite is marked complete: metrics.json is read back
    first (its reader refuses NaN and infinities, which ``write_json`` never writes).
    """
    folder.read_metrics()
    manifest.pop("failed", None)
    if manifest.get("config", {}).get("save_activations") is True:
        record = {**record, "activation_store": seal(folder, manifest)}
    manifest.update(
        status="complete",
        timing={**(timing or {}), "wall_seconds": time.time() - started},
        **record,
    )
    folder.write_manifest(manifest)
    return open_run(folder.path)


@dataclass
class RunInFolder:
    """A run being made in a held folder claimed for ``config`` (``run_folder``'s ``as``).

    Attributes:
        folder: the run folder.
        command: the command, for the manifest.
        config: what the folder is claimed for (the manifest's config).
        state: the folder's state before: "new", "resume" (a partial run) or "complete".
        previous: the manifest the folder held before (None for a new one).
        started: when the folder was claimed (the run's wall time counts from it).
        manifest: the manifest ``begin`` wrote (empty before).
    """

    folder: RunFolder
    command: str
    config: dict[str, Any]
    state: str
    previous: dict[str, Any] | None
    started: float
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """The folder holds a finished run of this config (to reuse, after any check)."""
        return self.state == "complete" and self.previous is not None

    def reuse(self) -> Run:
        """The finished run, read back as it is (after a sentence on stderr)."""
        return reuse(self.folder)

    def begin(self, **record: Any) -> dict[str, Any]:
        """Write the manifest, status "running", with the versions and ``record``."""
        self.manifest = begin(self.folder, self.command, self.config, **record)
        return self.manifest

    def complete(self, timing: Mapping[str, Any] | None = None, **record: Any) -> Run:
        """Mark the run complete (only with finite metrics), with its wall time, ``timing``
        and ``record``."""
        if not self.manifest:
            raise RuntimeError("complete() before begin(): the run has no manifest")
        return complete(self.folder, self.manifest, self.started, timing, **record)


@contextmanager
def run_folder(
    out: str | Path,
    command: str,
    config: dict[str, Any],
    defaults: Mapping[str, Any] | None = None,
) -> Iterator[RunInFolder]:
    """The run folder ``out`` held for the block and claimed for ``config`` (``defaults``
    fill the fields a recorded config lacks).

    A folder holding another config is refused; one made here is removed again when the
    block fails with nothing written in it (``held``)."""
    with held(out) as folder:
        state, previous = claim(folder, config, defaults)
        failed = (previous or {}).get("failed")
        if state != "complete" and isinstance(failed, dict):
            print(
                f"geomlens: notice: the last command on {folder.path} stopped on an internal "
                f"error ({failed.get('error')}, geomlens {failed.get('version')}); what it "
                "finished is kept and the rest runs again.",
                file=sys.stderr,
                flush=True,
            )
        try:
            yield RunInFolder(folder, command, config, state, previous, time.time())
        except (GeomlensError, OSError):  # the user's input or the disk: said in one sentence
            raise
        except Exception as exc:  # a bug: recorded, so the next command names it
            record_failure(folder, exc)
            raise


def record_failure(folder: RunFolder, exc: Exception) -> None:
    """Record an internal error in an unfinished run's manifest (``failed``: the error and
    the geomlens version), for the next command on the folder to name. A finished run, or
    a folder without a manifest, is left as it is."""
    with suppress(Exception):
        manifest = folder.read_manifest()
        if manifest is None or manifest.get("status") == "complete":
            return
        error = one_line(f"{type(exc).__name__}: {exc}")
        version = manifest.get("versions", {}).get("geomlens") or package_versions()["geomlens"]
        manifest["failed"] = {"error": error[:300], "version": version}
        folder.write_manifest(manifest)


def finished_stages(
    folder: RunFolder, names: list[str], sections: Mapping[str, tuple[str, ...]]
) -> list[str]:
    """The stages ``stages.json`` records whose numbers (``sections[name]``, default the
    stage's own name) are all in metrics.json.

    A stage recorded without its numbers (metrics.json replaced or edited since) is
    named in a notice and run again.
    """
    record = folder.path / STAGES_FILE
    if not record.exists():
        return []
    recorded = read_json(record, list, RERUN)
    if not all(isinstance(name, str) for name in recorded):
        raise damaged(record, "it is not a list of stage names", RERUN)
    metrics = folder.read_metrics()
    done, lost = [], []
    for name in recorded:
        if name in names and all(s in metrics for s in sections.get(name, (name,))):
            done.append(name)
        elif name in names:
            lost.append(name)
    if lost:
        print(
            f"geomlens: notice: {record} records the stages {', '.join(lost)} as done, but "
            "metrics.json lacks their numbers; running them again.",
            file=sys.stderr,
            flush=True,
        )
    return done


def record_stages(folder: RunFolder, done: list[str]) -> None:
    """Record ``done`` (in order) as the finished stages."""
    write_json(folder.path / STAGES_FILE, done)
