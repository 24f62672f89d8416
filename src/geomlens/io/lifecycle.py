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

from geomlens.io.files import damaged, read_json
from geomlens.io.runfolder import RERUN, Run, RunFolder, open_run, package_versions, write_json

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


def claim(folder: RunFolder, config: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """Claim ``folder`` for ``config``: its state and the manifest it held before (if any)."""
    state = folder.claim(config)
    return state, folder.read_manifest()


def reuse(folder: RunFolder) -> Run:
    """A finished run of the same config, read back as it is."""
    print(f"{folder.path} already holds this run; reusing it.", file=sys.stderr)
    return open_run(folder.path)


def begin(folder: RunFolder, command: str, config: dict[str, Any], **record: Any) -> dict[str, Any]:
    """Write the manifest of a running command (its config, package versions and
    ``record``); returns it for ``complete``."""
    manifest: dict[str, Any] = {
        "command": command,
        "config": config,
        "status": "running",
        "versions": package_versions(),
        **record,
    }
    folder.write_manifest(manifest)
    return manifest


def complete(
    folder: RunFolder,
    manifest: dict[str, Any],
    started: float,
    timing: Mapping[str, float] | None = None,
    **record: Any,
) -> Run:
    """Mark the run complete with its wall time (plus ``timing`` and ``record``).

    Only a run whose numbers are finite is marked complete: metrics.json is read back
    first (its reader refuses NaN and infinities, which ``write_json`` never writes).
    """
    folder.read_metrics()
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

    def complete(self, timing: Mapping[str, float] | None = None, **record: Any) -> Run:
        """Mark the run complete (only with finite metrics), with its wall time, ``timing``
        and ``record``."""
        if not self.manifest:
            raise RuntimeError("complete() before begin(): the run has no manifest")
        return complete(self.folder, self.manifest, self.started, timing, **record)


@contextmanager
def run_folder(out: str | Path, command: str, config: dict[str, Any]) -> Iterator[RunInFolder]:
    """The run folder ``out`` held for the block and claimed for ``config``.

    A folder holding another config is refused; one made here is removed again when the
    block fails with nothing written in it (``held``)."""
    with held(out) as folder:
        state, previous = claim(folder, config)
        yield RunInFolder(folder, command, config, state, previous, time.time())


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
