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

import fcntl
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from geomlens.capturing.store import ActivationStore, save_atomic
from geomlens.capturing.taps import Taps, without_taps
from geomlens.errors import GeomlensError, IdentityError, NonFiniteResult
from geomlens.io.files import content_hash, damaged, read_json, replacing
from geomlens.io.jsontext import non_finite
from geomlens.runs.stored import widened
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.decomposition import NORMS, state_spec

LOCK_NAME = ".lock"
"""The lock file of a run folder: flock'ed for a whole command, holding the holder's pid."""

_HELD: dict[Path, tuple[int, int]] = {}
"""Run folders this process holds the lock of: the holding thread and how many nested holds."""
_HOLDING = threading.Lock()
"""Guards ``_HELD`` (threads of one process hold folders too)."""

RERUN = "remove it and rerun the command that made this run to write it again."
START_AFRESH = "remove the folder or choose another --out."
FINGERPRINTS = {
    "model": "model_fingerprint",
    "corpus": "corpus_fingerprint",
    "windows": "windows_fingerprint",
}


class DamagedCheckpoint(Exception):
    """A checkpoint that does not hold what its progress says (the reason is the message)."""


def load_state(path: Path, advice: str = RERUN) -> dict[str, torch.Tensor]:
    """A safetensors file read whole, or one sentence naming it when it is damaged."""
    try:
        return widened(load_file(str(path)))  # a compacted decomposition file: float64 again
    except SafetensorError as exc:
        raise damaged(path, f"not a complete safetensors file: {exc}", advice) from None


def check_state(
    state: dict[str, torch.Tensor],
    spec: dict[str, tuple[tuple[int, ...], torch.dtype]],
    layers: list[int] | None = None,
) -> str | None:
    """Why ``state`` does not fit ``spec`` (names, shapes, dtypes, finite sums), or None."""
    if set(state) != set(spec):
        missing, extra = sorted(set(spec) - set(state)), sorted(set(state) - set(spec))
        return f"tensors missing: {missing}, unexpected: {extra}"
    for name, (shape, dtype) in spec.items():
        tensor = state[name]
        if tuple(tensor.shape) != shape or tensor.dtype != dtype:
            return f"{name} is {tuple(tensor.shape)} {tensor.dtype}, expected {shape} {dtype}"
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            return f"{name} holds NaN or infinite values"
        if name.endswith("sumsq") and bool((tensor < 0).any()):
            return f"{name} holds a negative sum of squares, which no capture writes"
    if layers is not None and state["layers"].tolist() != list(layers):
        return f"it covers layers {state['layers'].tolist()}, not {list(layers)}"
    return None


PACKAGES = ("geomlens", "torch", "transformers", "numpy", "safetensors", "gguf")


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


NON_FINITE_ADVICE = (
    "the model or the inputs give NaN or infinite values there (check the model's weights "
    "and the corpus, or try --dtype float32); nothing non-finite is saved as a result, and "
    "the same inputs fail the same way: change them and choose another --out, or remove "
    "this run folder to start afresh"
)


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically with sorted keys, so equal data gives equal bytes.

    Every number must be finite: a NaN or infinity stops the command with one sentence
    naming where it is (JSON has no such numbers, and a result is never one). If the
    write fails (a full disk), the previous file is left as it was.
    """
    where = non_finite(data)
    if where is not None:
        raise NonFiniteResult(
            f"{where} of {path.name} is NaN or infinite, so it is not written; {NON_FINITE_ADVICE}."
        )
    text = json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


FINGERPRINT_VERSION = "content-v2"
"""Prefix of model fingerprints that hash whole files (earlier ones hashed the first and
last MiB of each weight file; a run recorded with one is not compared, but refused)."""

CURRENT_FINGERPRINTS = (FINGERPRINT_VERSION, "weights-v1")
"""Prefixes of the model fingerprints this geomlens writes: of files, and of weights in
memory (``models.identity.WEIGHTS_VERSION``)."""

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
)
"""The files a Hugging Face tokenizer is read from: part of a model's identity, since
the token ids (and so every number) follow from them."""


def identity_files(folder: Path) -> list[Path]:
    """The files a model's numbers depend on: config.json, the tokenizer's files and every
    safetensors weight file (sorted by name)."""
    named = [folder / "config.json", *(folder / n for n in TOKENIZER_FILES)]
    return [p for p in named if p.is_file()] + sorted(folder.glob("*.safetensors"))


def model_fingerprint(folder: str | Path) -> str:
    """sha256 over the names and whole contents of a model's config, tokenizer and weight
    files (``identity_files``; a single file, such as a GGUF, is hashed itself).

    Each file's hash comes from ``content_hash``: streamed, and remembered by size and
    times, so a rerun on unchanged files reads none of them.
    """
    folder = Path(folder)
    files = [folder] if folder.is_file() else identity_files(folder)
    h = hashlib.sha256()
    for path in files:
        h.update(f"{path.name}|{content_hash(path)}\n".encode())
    return f"{FINGERPRINT_VERSION}:{h.hexdigest()}"


def view_fingerprint(view: Any) -> str:
    """The identity of a loaded model (``ModelView``): its files' (``model_fingerprint``)
    while its weights are the ones loaded from them, else its weights as they are now
    (``models.identity.held_fingerprint``: a model given in memory, or a view edited
    since it was loaded). Costs one pass over the weights for a view ``load_model`` made."""
    from geomlens.models.identity import held_fingerprint, weights_hash

    held = getattr(view, "identity", None)
    if held is None:  # a view no load_model made: its files are all there is
        return model_fingerprint(view.source)
    live = weights_hash(view.model)
    if not held.in_memory and live == held.weights_at_load:
        return model_fingerprint(view.source)
    return held_fingerprint(view.model, view.tokenizer, live)


def model_record(view: Any, fingerprint: str) -> dict[str, Any]:
    """The manifest's ``model``: the view's summary and source; for a model identified by
    its weights, "model in memory" with their hash and the model's own name (and whether
    they were edited since loading from the source); its quantisation; a bundled model's
    caveat (what its files really are)."""
    from geomlens.models.bundled import BUNDLED
    from geomlens.models.identity import IN_MEMORY, WEIGHTS_VERSION

    record: dict[str, Any] = {**view.describe(), "source": view.source}
    held = getattr(view, "identity", None)
    if fingerprint.startswith(WEIGHTS_VERSION):
        record["source"] = IN_MEMORY
        record["held"] = {
            "fingerprint": fingerprint,
            "own_name": held.own_name if held is not None and held.own_name else view.name,
        }
        if held is not None and not held.in_memory:
            record["held"]["edited_since_loaded_from"] = view.source
    if held is not None and held.quantization is not None:
        check = getattr(view, "load_check", None)
        tolerance = {} if check is None else {"check_tolerance": check.tolerance}
        record["quantization"] = {**held.quantization, **tolerance}
    bundled = BUNDLED.get(view.name)
    if bundled is not None and not fingerprint.startswith(WEIGHTS_VERSION):
        record["caveat"] = bundled.caveat
    return record


def check_given_view(view: Any, named: str, want_dtype: str, revision: str | None = None) -> str:
    """Refuse a loaded model (``ModelView``) given for a run whose config names another:
    its files (``model_fingerprint``, unless it is the same folder), its name (a model
    given in memory) or its dtype differ; return its fingerprint (``view_fingerprint``).

    Args:
        view: the model given (``view.source``: the folder it was loaded from).
        named: the model the run's config names, as the user wrote it.
        want_dtype: the config's dtype ("float32", "bfloat16", "float16").
        revision: the config's revision of a hub id (None: its main branch).
    """
    from geomlens.models.loading import resolve_folder

    held = getattr(view, "identity", None)
    if held is not None and held.in_memory:
        if str(named) != view.name:
            raise IdentityError(
                f"the model given as view is a model in memory named {view.name!r}, not "
                f"{str(named)[:80]!r} that the run names; pass model= the model object (or "
                f"model={view.name!r} with this view)."
            )
    else:
        source = Path(view.source)
        folder = resolve_folder(str(named), revision)
        same = source.exists() and source.resolve() == folder.resolve()
        if not same and (
            not source.exists() or model_fingerprint(source) != model_fingerprint(folder)
        ):
            raise IdentityError(
                f"the model given as view was loaded from {view.source}, not from "
                f"{str(named)!r} ({folder}) that the run names, so its numbers would be another "
                f"model's; pass view=load_model({str(named)!r}), or model= the folder the view "
                "was loaded from."
            )
    dtype = str(view.W_E.dtype).removeprefix("torch.")
    if dtype != want_dtype:
        raise IdentityError(
            f"the model given as view is {dtype}, but the run asks for dtype {want_dtype}; "
            f"load it with dtype={want_dtype!r}, or pass dtype={dtype!r}."
        )
    return view_fingerprint(view)


_UNSET = object()


PRESENTATION = ("figures",)
"""Options a run folder's config may hold (recorded by an earlier geomlens) that cannot
change a number: never compared, so a rerun that changes only them reuses the run."""


def config_differences(
    recorded: Mapping[str, Any], current: Mapping[str, Any], defaults: Mapping[str, Any]
) -> list[str]:
    """The fields in which two run configs differ, each side's missing fields read as
    their defaults (a field missing on one side with no default differs); presentation
    options (``PRESENTATION``) are not compared."""
    differs = []
    for key in sorted((set(recorded) | set(current)) - set(PRESENTATION)):
        old = recorded.get(key, defaults.get(key, _UNSET))
        new = current.get(key, defaults.get(key, _UNSET))
        if old is _UNSET or new is _UNSET or old != new:
            differs.append(key)
    return differs


class RunFolder:
    """Writes one run: refuses a folder that holds a run of another config, resumes its own."""

    def __init__(self, path: str | Path, checkpoint: str = "checkpoint") -> None:
        self.path = Path(path)
        self.checkpoint = checkpoint

    def for_chunk(self, contexts: int) -> RunFolder:
        """This folder with the checkpoint of one chunk of ``--contexts auto`` (the chunk
        that ends at ``contexts`` windows): under ``checkpoint/``, so a chunk resumes only
        its own batches and clearing the run's checkpoint clears every chunk's."""
        return RunFolder(self.path, f"checkpoint/to_{contexts}")

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def read_manifest(self) -> dict[str, Any] | None:
        if not self.manifest_path.exists():
            return None
        manifest = read_json(self.manifest_path, dict, START_AFRESH)
        if not isinstance(manifest.get("config"), dict):
            raise damaged(self.manifest_path, "it has no config", START_AFRESH)
        return manifest

    def prepare_folder(self) -> None:
        """Create the folder and check that it is writable (fail now, not after loading)."""
        if self.path.exists() and not self.path.is_dir():
            raise GeomlensError(f"--out {self.path} is a file; give a folder.")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=self.path).close()
        except OSError as exc:
            raise GeomlensError(
                f"cannot write the run folder {self.path} ({exc.strerror}); choose another --out."
            ) from None

    # one command per folder --------------------------------------------------------------
    @contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the folder's lock for the block: a second command on it is refused.

        The lock is ``flock`` on ``DIR/.lock`` (which holds the pid, for the message), so
        the operating system releases it when its process dies, even by ``kill -9``: a
        lock file left behind is taken over. Nested holds in one thread are allowed; another
        thread of the same process is refused as another process is (the flock is the
        process's, so it cannot tell threads apart).
        """
        self.prepare_folder()
        key = self.path.resolve()
        me = threading.get_ident()
        with _HOLDING:
            holder, depth = _HELD.get(key, (me, 0))
            if holder != me:
                raise GeomlensError(
                    f"{self.path} is in use by another thread of this process; wait for its "
                    "command to finish, or choose another --out."
                )
            if depth:
                _HELD[key] = (me, depth + 1)
            else:
                fd = self._lock()
                _HELD[key] = (me, 1)
        try:
            yield
        finally:
            with _HOLDING:
                depth = _HELD[key][1] - 1
                if depth:
                    _HELD[key] = (me, depth)
                else:
                    del _HELD[key]
                    # Removed while still locked: a command that opened the old file finds
                    # it gone (see _lock) and opens a new one.
                    (self.path / LOCK_NAME).unlink(missing_ok=True)
                    os.close(fd)

    def _lock(self) -> int:
        lock = self.path / LOCK_NAME
        for _ in range(50):
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise GeomlensError(
                    f"cannot write the run folder {self.path} ({exc.strerror}); "
                    "choose another --out."
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise GeomlensError(
                    f"{self.path} is in use by another geomlens command (pid {holder}); "
                    "wait for it to finish, or choose another --out."
                ) from None
            try:
                current = os.stat(lock)
                mine = os.fstat(fd)
                same = (current.st_ino, current.st_dev) == (mine.st_ino, mine.st_dev)
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                return fd
            os.close(fd)  # its last holder removed it between our open and flock: retry
        raise GeomlensError(f"could not lock {lock}; rerun the command.")

    def claim(self, config: dict[str, Any], defaults: Mapping[str, Any] | None = None) -> str:
        """Prepare the folder for ``config``: returns "new", "resume" or "complete".

        The recorded config and ``config`` are compared with ``defaults`` filled in on
        either side (``same_config``): a field added to geomlens after a run was made
        keeps that run reusable while its value is the field's default."""
        if self.path.exists() and not self.path.is_dir():
            raise GeomlensError(f"--out {self.path} is a file; give a folder.")
        manifest = self.read_manifest()
        if manifest is None:
            if self.path.exists() and any(p.name != LOCK_NAME for p in self.path.iterdir()):
                raise GeomlensError(
                    f"{self.path} is not empty and holds no geomlens run; choose another --out."
                )
            self.prepare_folder()
            return "new"
        differs = config_differences(manifest.get("config") or {}, config, defaults or {})
        if differs:
            raise GeomlensError(
                f"{self.path} holds a run of a different config (differs in: "
                f"{', '.join(differs)}); choose another --out or remove that folder."
            )
        return "complete" if manifest.get("status") == "complete" else "resume"

    def check_identity(
        self, manifest: dict[str, Any], current: dict[str, str], finished: bool
    ) -> None:
        """Refuse a run of this config made from other inputs (fingerprints differ).

        ``current`` maps "model", "corpus" and "windows" to this command's fingerprints;
        a fingerprint the manifest lacks (or ``current`` does not give) is not compared.
        """
        changed = [
            what
            for what, key in FINGERPRINTS.items()
            if what in current and key in manifest and manifest[key] != current[what]
        ]
        if not changed:
            return
        recorded = manifest.get(FINGERPRINTS["model"])
        if "model" in changed and not str(recorded).startswith(CURRENT_FINGERPRINTS):
            raise IdentityError(
                f"{self.path} holds a run whose model was identified by an earlier geomlens "
                "(from parts of its weight files only), so it cannot be checked against this "
                "model; remove that folder to start afresh, or choose another --out."
            )
        state = "a finished" if finished else "an unfinished"
        since = "it finished" if finished else "it was started"
        raise GeomlensError(
            f"{self.path} holds {state} run of this config, but its {' and '.join(changed)} "
            f"changed since {since}, so its numbers would not describe these inputs; "
            "choose another --out, or remove that folder to start afresh."
        )

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json(self.manifest_path, manifest)

    # checkpoints -------------------------------------------------------------------------
    @property
    def checkpoint_dir(self) -> Path:
        return self.path / self.checkpoint

    def save_checkpoint(self, state: dict[str, torch.Tensor], batches_done: int) -> None:
        """Save accumulator state after ``batches_done`` batches (atomic: state, then progress)."""
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        save_atomic(state, self.checkpoint_dir / f"state_{batches_done:05d}.safetensors")
        write_json(self.checkpoint_dir / "progress.json", {"batches_done": batches_done})
        for old in self.checkpoint_dir.glob("state_*.safetensors"):
            if old.name != f"state_{batches_done:05d}.safetensors":
                old.unlink()

    def load_checkpoint(self) -> tuple[dict[str, torch.Tensor], int] | None:
        """The saved state and its batch count, as written (see ``resume_into``)."""
        progress = self.checkpoint_dir / "progress.json"
        if not progress.exists():
            return None
        done = self._batches_done(progress)
        state = self.checkpoint_dir / f"state_{done:05d}.safetensors"
        if not state.exists():
            raise DamagedCheckpoint(f"{state.name}, named by progress.json, is missing")
        try:
            return load_file(str(state)), done
        except SafetensorError as exc:
            why = f"{state.name} is not a complete safetensors file: {exc}"
            raise DamagedCheckpoint(why) from None

    @staticmethod
    def _batches_done(progress: Path) -> int:
        try:
            record = json.loads(progress.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise DamagedCheckpoint("progress.json is not valid JSON") from None
        done = record.get("batches_done") if isinstance(record, dict) else None
        if not isinstance(done, int) or isinstance(done, bool) or done < 1:
            raise DamagedCheckpoint("progress.json holds no positive batches_done")
        return done

    def resume_into(
        self, acc: DecompositionAccumulator, batch_size: int, taps: Taps | None = None
    ) -> int:
        """Load the checkpoint into ``acc`` (and ``taps``) and return the batches it covers
        (0: none).

        The checkpoint is trusted only when it fits: its tensors have the accumulator's
        names, shapes and dtypes and finite sums, and its contexts seen are exactly the
        first ``batches_done`` batches, once each. A checkpoint that does not fit is set
        aside (renamed, named in a notice on stderr) and the capture starts from zero.
        """
        fresh = taps.state_dict() if taps else {}
        try:
            saved = self.load_checkpoint()
            if saved is None:
                return 0
            saved_state, done = saved
            state = without_taps(saved_state)
            n_batches = -(-acc.n_contexts // batch_size)
            if done > n_batches:
                raise DamagedCheckpoint(f"progress.json says {done} of {n_batches} batches")
            spec = acc.state_spec()
            if NORMS not in state:  # saved before the window norms: resumed without them
                spec.pop(NORMS, None)
            why = check_state(state, spec, acc.layers)
            if why is not None:
                raise DamagedCheckpoint(f"the saved state does not fit this run: {why}")
            covered = min(done * batch_size, acc.n_contexts)
            expected = torch.zeros(acc.n_contexts, dtype=torch.int64)
            expected[:covered] = 1
            if not torch.equal(state["seen"], expected):
                raise DamagedCheckpoint(
                    f"its contexts seen do not match the {done} batches progress.json records"
                )
            if taps:
                try:
                    taps.load_state_dict(saved_state)
                except GeomlensError as why_taps:
                    raise DamagedCheckpoint(str(why_taps).rstrip(".")) from None
        except DamagedCheckpoint as exc:
            if taps:
                taps.load_state_dict(fresh)
            aside = self.set_aside_checkpoint()
            print(
                f"geomlens: notice: the checkpoint in {self.checkpoint_dir} is damaged ({exc}); "
                f"it is set aside as {aside} and the capture starts again from the first batch.",
                file=sys.stderr,
                flush=True,
            )
            return 0
        acc.load_state_dict(state)
        return done

    def set_aside_checkpoint(self) -> Path:
        """Rename the checkpoint folder out of the way (kept for inspection); its new path."""
        n = 1
        while (aside := self.path / f"checkpoint.damaged-{n}").exists():
            n += 1
        os.replace(self.checkpoint_dir, aside)
        return aside

    def clear_checkpoint(self) -> None:
        shutil.rmtree(self.checkpoint_dir, ignore_errors=True)

    # finished statistics -----------------------------------------------------------------
    def save_stats(self, name: str, state: dict[str, torch.Tensor]) -> Path:
        """Save finished statistics; every sum must be finite (one sentence naming the
        tensor otherwise, and nothing is saved)."""
        for key, tensor in state.items():
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                raise NonFiniteResult(
                    f"the {name} statistics' {key} hold NaN or infinite values (sums past "
                    f"the float64 range), so they are not saved as finished; "
                    f"{NON_FINITE_ADVICE}."
                )
        folder = self.path / "stats"
        folder.mkdir(exist_ok=True)
        return save_atomic(state, folder / f"{name}.safetensors")

    def load_stats(
        self,
        name: str,
        spec: dict[str, tuple[tuple[int, ...], torch.dtype]],
        layers: list[int],
        optional: tuple[str, ...] = (),
    ) -> dict[str, torch.Tensor] | None:
        """Finished statistics that fit ``spec`` and cover every context once (None: absent).

        Entries named in ``optional`` may be missing (a run saved before they existed)."""
        path = self.path / "stats" / f"{name}.safetensors"
        if not path.exists():
            return None
        state = load_state(path)
        expected = {k: v for k, v in spec.items() if k in state or k not in optional}
        why = check_state(state, expected, layers)
        if why is None and not bool((state["seen"] == 1).all()):
            why = "not every context is counted exactly once"
        if why is not None:
            raise damaged(path, f"it does not fit this run: {why}", RERUN)
        return state

    def read_metrics(self) -> dict[str, Any]:
        """metrics.json ({} when absent), or one sentence when it is damaged."""
        path = self.path / "metrics.json"
        return read_json(path, dict, RERUN) if path.exists() else {}

    def merge_metrics(self, section: str, values: Any) -> None:
        """Set one section of metrics.json, keeping the others."""
        metrics = self.read_metrics()
        metrics[section] = values
        write_json(self.path / "metrics.json", metrics)


@dataclass
class Run:
    """A finished run read back: manifest, metrics, statistics and activations (lazily)."""

    path: Path

    @cached_property
    def manifest(self) -> dict[str, Any]:
        manifest = RunFolder(self.path).read_manifest()
        if manifest is None:
            raise GeomlensError(f"{self.path} holds no geomlens run (no manifest.json).")
        return manifest

    @property
    def config(self) -> dict[str, Any]:
        return self.manifest["config"]

    def still_there(self) -> None:
        """One sentence when the run's folder was deleted or moved since it was opened
        (its files are read on first use, not when it is opened)."""
        if not self.path.is_dir():
            raise GeomlensError(
                f"the run folder {self.path} is gone (deleted or moved since it was opened); "
                "open the run again where it is now, or rerun the command that made it."
            )

    def present(self, name: str, what: str) -> Path:
        """The run's file ``name``; one sentence when it is not there: the whole folder
        gone (``still_there``), or a run that never kept ``what``."""
        path = self.path / name
        if path.exists():
            return path
        self.still_there()
        raise GeomlensError(
            f"{self.path} keeps no {what} ({name} is missing); rerun the command that made "
            "this run to write them."
        )

    @cached_property
    def metrics(self) -> dict[str, Any]:
        self.still_there()
        return RunFolder(self.path).read_metrics()

    @cached_property
    def windows(self) -> dict[str, Any]:
        return read_windows(self.present("windows.json", "window list"))

    @cached_property
    def decomposition(self) -> DecompositionAccumulator:
        """The decomposition accumulator; ``.finalize(layer, skip_first)`` gives the stats."""
        path = self.present("stats/decomposition.safetensors", "decomposition statistics")
        state = load_state(path)
        try:
            n_l = len(state["layers"])
            _, n_c, d = state["ctx_sum"].shape
            groups = state["group_pos_sum"].shape[1] if "group_pos_sum" in state else 0
            spec = state_spec(
                state["layers"].tolist(),
                n_c,
                state["pos_sum"].shape[1],
                d,
                "second" in state,
                groups,
            )
            for name in ("group_sketch", NORMS):  # saved before they existed
                if name not in state:
                    spec.pop(name, None)
        except (KeyError, ValueError, IndexError, TypeError):
            raise damaged(path, "it is not a decomposition state", RERUN) from None
        why = check_state(state, spec) if n_l else "it covers no layer"
        if why is not None:
            raise damaged(path, why, RERUN)
        return DecompositionAccumulator.from_state_dict(state)

    @property
    def activations(self) -> ActivationStore | None:
        """The activation store: DIR/activations, or where ``--activations-dir`` put it
        (refused when it belongs to another run, or is not complete)."""
        if not self.config.get("save_activations") and "activations" not in self.manifest:
            folder = self.path / "activations"
            if not folder.exists():
                return None
        return ActivationStore(
            store_location(self.path, self.manifest), self.manifest.get("run_id")
        )


def store_location(path: Path, manifest: dict[str, Any]) -> str:
    """Where a run's activation store is: the ``--activations-dir`` its manifest records
    (a folder or URL), else DIR/activations."""
    location = manifest.get("activations")
    return str(location) if location else str(Path(path) / "activations")


WINDOWS_KEYS = {"doc_ids": list, "labels": list, "label_names": list, "fingerprint": str}


def read_windows(path: Path) -> dict[str, Any]:
    """windows.json, checked for the fields a run needs."""
    windows = read_json(path, dict, RERUN)
    for key, kind in WINDOWS_KEYS.items():
        if not isinstance(windows.get(key), kind):
            raise damaged(path, f"its {key} is missing or of the wrong type", RERUN)
    if len(windows["doc_ids"]) != len(windows["labels"]):
        raise damaged(path, "it has not one label per document", RERUN)
    return windows


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
