"""The on-disk activation store: one safetensors shard per captured batch, and a manifest.

Each shard holds ``input_ids`` [c, T], ``context_index`` [c], ``labels`` [c] and
``layer_{l}`` [c, T, d] for the same c contexts; its header records the contexts it
covers and the sha256 of every tensor. Shards are written atomically, so an interrupted
capture never leaves a half-written shard behind. The folder is a local path or an fsspec
URL (``s3://...``, ``file://...``; needs ``fsspec`` and the filesystem's package), so that
workers on several machines can write into one store.

``store.json`` (the store's manifest) makes the store trustworthy:

- it names the one run the store belongs to (``claim_store``, before the first shard):
  another run given the same folder is refused;
- when the run completes, ``seal_store`` checks that the shards cover every context exactly
  once and records each shard's contexts, tensor shapes and content hashes;
- ``verify_store`` (a finished run about to be reused) and ``ActivationStore.layer`` (before
  it allocates) compare the files with that record: a missing, replaced or edited shard is
  named in one sentence.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_bytes
from safetensors.torch import save as save_bytes
from safetensors.torch import save_file

from geomlens.errors import GeomlensError
from geomlens.io.files import temporary

STORE_MANIFEST = "store.json"
"""The store's manifest, beside its shards."""

STORE_FORMAT = 1

NON_PERSISTENT = ("memory",)
"""fsspec protocols whose files vanish with the process: a store there would be recorded
in the run's manifest and then never be readable again."""

MAX_HEADER = 100 << 20
"""The largest safetensors header read (bytes): more is a damaged file, not a shard."""

_CONTEXTS = "geomlens.contexts"
_HASHES = "geomlens.sha256"


class StoreDamaged(GeomlensError):
    """The activation store does not hold what its manifest records (the message names the
    file and says what to do)."""


def is_url(location: str | Path) -> bool:
    """Whether a store location is an fsspec URL rather than a local path."""
    return isinstance(location, str) and "://" in location


def check_persistent(url: str) -> None:
    """Refuse a URL whose filesystem keeps nothing after the process (``memory://``)."""
    protocols = {part.split("://", 1)[0].lower() for part in url.split("::") if "://" in part}
    gone = sorted(protocols & set(NON_PERSISTENT))
    if gone:
        raise GeomlensError(
            f"{url} is a {gone[0]}:// location, whose files vanish when the process ends, so "
            "the activation store could never be read back; give a local folder or a "
            "persistent URL (s3://, gs://, file://)."
        )


def url_fs(url: str) -> tuple[Any, str]:
    """The fsspec filesystem and path of a URL (a non-persistent one is refused)."""
    check_persistent(url)
    try:
        from fsspec.core import url_to_fs
    except ImportError:
        raise GeomlensError(
            f"{url} is a URL; reading or writing it needs fsspec: pip install fsspec"
        ) from None
    try:
        return url_to_fs(url)
    except ImportError as exc:  # the protocol's own package (s3fs, gcsfs, ...) is missing
        raise GeomlensError(
            f"{url} needs a package that is not installed ({exc}); install it, or give a "
            "local folder."
        ) from None
    except ValueError as exc:  # an unknown protocol
        raise GeomlensError(f"{url} is not a URL fsspec can open ({exc}).") from None


def save_atomic(
    tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str] | None = None
) -> Path:
    """Write a safetensors file so that readers see either nothing or the whole file.

    If the write fails (a full disk), nothing is left behind and an older file stays.
    """
    tmp = path.with_suffix(".tmp")
    try:
        with temporary(tmp):  # removed on an error, and on SIGTERM or SIGHUP
            save_file(tensors, str(tmp), metadata=metadata)
            os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    except SafetensorError as exc:
        # safetensors reports a failed write (a full disk) as its own error type
        tmp.unlink(missing_ok=True)
        found = re.search(r"\(os error (\d+)\)", str(exc))
        if found is None:
            raise
        code = int(found.group(1))
        raise OSError(code, os.strerror(code), str(path)) from None
    return path


def save_file_atomic(tensors: dict[str, torch.Tensor], filename: str | Path) -> None:
    """``safetensors.torch.save_file``, written atomically (see ``save_atomic``)."""
    save_atomic(tensors, Path(filename))


def shard_path(folder: Path, batch: int) -> Path:
    return folder / f"shard_{batch:05d}.safetensors"


def tensor_hash(tensor: torch.Tensor) -> str:
    """sha256 of a tensor's bytes, as safetensors stores them (row-major)."""
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    return hashlib.sha256(flat.view(torch.uint8).numpy().tobytes()).hexdigest()


def contiguous_range(index: torch.Tensor) -> tuple[int, int]:
    """``(first, stop)`` of a context index that counts up by one ([c] int)."""
    first = int(index[0]) if len(index) else 0
    if not torch.equal(index.cpu(), torch.arange(first, first + len(index))):
        raise ValueError("a shard's contexts must be consecutive")
    return first, first + len(index)


class Location:
    """A store folder: a local path or an fsspec URL, read and written by file name."""

    def __init__(self, folder: Path | str) -> None:
        self.fs: Any = None
        if is_url(folder):
            self.fs, root = url_fs(str(folder))
            self.root = root.rstrip("/")
            self.shown = str(folder)
        else:
            self.root = str(Path(folder))
            self.shown = self.root

    def path(self, name: str) -> str:
        return f"{self.root}/{name}" if self.fs is not None else str(Path(self.root) / name)

    def shown_path(self, name: str) -> str:
        return f"{self.shown.rstrip('/')}/{name}"

    def exists(self, name: str) -> bool:
        if self.fs is not None:
            return bool(self.fs.exists(self.path(name)))
        return Path(self.path(name)).is_file()

    def read(self, name: str, start: int | None = None, end: int | None = None) -> bytes:
        if self.fs is not None:
            return bytes(self.fs.cat_file(self.path(name), start=start, end=end))
        with open(self.path(name), "rb") as f:
            f.seek(start or 0)
            return f.read() if end is None else f.read(end - (start or 0))

    def write(self, name: str, data: bytes) -> None:
        """Write ``name`` whole, atomically (a temporary file, then a rename)."""
        if self.fs is not None:
            self.fs.makedirs(self.root, exist_ok=True)
            self.fs.pipe_file(self.path(name) + ".tmp", data)
            self.fs.mv(self.path(name) + ".tmp", self.path(name))
            return
        Path(self.root).mkdir(parents=True, exist_ok=True)
        tmp = Path(self.path(name + f".tmp{os.getpid()}"))
        with temporary(tmp):
            tmp.write_bytes(data)
            os.replace(tmp, self.path(name))

    def create(self, name: str, data: bytes) -> bool:
        """Write ``name`` only if it does not exist yet (False: it did); atomic locally."""
        if self.fs is not None:
            if self.fs.exists(self.path(name)):
                return False
            self.write(name, data)
            return True
        Path(self.root).mkdir(parents=True, exist_ok=True)
        tmp = Path(self.path(name + f".tmp{os.getpid()}"))
        with temporary(tmp):
            tmp.write_bytes(data)
            try:
                os.link(tmp, self.path(name))
            except FileExistsError:
                return False
            finally:
                tmp.unlink(missing_ok=True)
        return True

    def facts(self, name: str) -> dict[str, Any]:
        """A file's size and modification time (what changes when it is written again)."""
        if self.fs is not None:
            info = self.fs.info(self.path(name))
            when = next((info[k] for k in ("mtime", "LastModified", "ETag") if k in info), None)
            return {"bytes": int(info.get("size") or 0), "modified": str(when)}
        stat = os.stat(self.path(name))
        return {"bytes": stat.st_size, "modified": str(stat.st_mtime_ns)}

    def remove(self, name: str) -> None:
        if self.fs is not None:
            if self.fs.exists(self.path(name)):
                self.fs.rm(self.path(name))
        else:
            Path(self.path(name)).unlink(missing_ok=True)

    def shards(self) -> list[str]:
        """The names of the shard files in the folder, sorted."""
        if self.fs is not None:
            found = self.fs.glob(f"{self.root}/shard_*.safetensors")
            return sorted(str(p).rsplit("/", 1)[-1] for p in found)
        folder = Path(self.root)
        return sorted(p.name for p in folder.glob("shard_*.safetensors")) if folder.is_dir() else []


def write_shard(
    folder: Path | str,
    batch: int,
    input_ids: torch.Tensor,
    context_index: torch.Tensor,
    labels: torch.Tensor,
    hidden: dict[int, torch.Tensor],
    dtype: torch.dtype,
) -> Path | str:
    """Write one batch's activations (cast to ``dtype``) as a shard (folder: path or URL).

    The shard's header records its contexts (``first,stop``) and each tensor's sha256."""
    tensors = {
        "input_ids": input_ids.cpu().contiguous(),
        "context_index": context_index.cpu().contiguous(),
        "labels": labels.cpu().contiguous(),
    }
    for layer, h in hidden.items():
        tensors[f"layer_{layer}"] = h.to(device="cpu", dtype=dtype).contiguous()
    first, stop = contiguous_range(tensors["context_index"])
    metadata = {
        _CONTEXTS: f"{first},{stop}",
        _HASHES: json.dumps({k: tensor_hash(v) for k, v in tensors.items()}, sort_keys=True),
    }
    name = shard_path(Path(), batch).name
    if is_url(folder):
        where = Location(folder)
        where.write(name, save_bytes(tensors, metadata=metadata))
        return where.path(name)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return save_atomic(tensors, folder / name, metadata)


# the store's manifest ---------------------------------------------------------------------
def _damage(where: Location, name: str, why: str) -> StoreDamaged:
    return StoreDamaged(
        f"the activation store file {where.shown_path(name)} is damaged ({why}); remove the "
        f"store ({where.shown}) and rerun the command that captured it to write it again."
    )


def read_store_manifest(where: Location) -> dict[str, Any] | None:
    """store.json of a store (None when absent), or one sentence when it is damaged."""
    if not where.exists(STORE_MANIFEST):
        return None
    try:
        record = json.loads(where.read(STORE_MANIFEST).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _damage(where, STORE_MANIFEST, "not valid JSON") from None
    if not isinstance(record, dict) or not isinstance(record.get("run"), str):
        raise _damage(where, STORE_MANIFEST, "it names no run")
    shards = record.get("shards", [])
    if not isinstance(shards, list) or not all(
        isinstance(s, dict) and isinstance(s.get("file"), str) for s in shards
    ):
        raise _damage(where, STORE_MANIFEST, "its list of shards is malformed")
    return record


def _write_manifest(where: Location, record: dict[str, Any]) -> None:
    where.write(STORE_MANIFEST, (json.dumps(record, indent=1, sort_keys=True) + "\n").encode())


def new_run_id() -> str:
    """A fresh run identity (recorded in the run's manifest and in its store's)."""
    return uuid.uuid4().hex


def claim_store(location: Path | str, run_id: str, run_folder: Path) -> None:
    """Claim the store folder ``location`` for the run ``run_id`` (in ``run_folder``)
    before any shard is written.

    A store of the same run is kept (a resumed capture adds to it). A store that names
    another run is refused in one sentence, except when that run was in this same run
    folder and is gone (the folder was emptied to start afresh): its shards are removed. A
    folder holding shards that no manifest claims is refused, unless it is this run
    folder's own ``activations/`` (a run written before stores had manifests).
    """
    where = Location(location)
    folder = str(run_folder.resolve())
    record = read_store_manifest(where)
    fresh = {"format": STORE_FORMAT, "run": run_id, "run_folder": folder, "status": "writing"}
    if record is not None:
        if record["run"] == run_id:
            return
        if record.get("run_folder") != folder:
            raise GeomlensError(
                f"the activation store {where.shown} belongs to another run (in "
                f"{record.get('run_folder')}), so the two would overwrite each other's shards; "
                "give each run its own --activations-dir, or empty that folder."
            )
        for name in where.shards():
            where.remove(name)
        _write_manifest(where, fresh)
        return
    own = where.fs is None and Path(where.root).resolve() == run_folder.resolve() / "activations"
    if where.shards() and not own:
        raise GeomlensError(
            f"{where.shown} holds activation shards that no geomlens run claims (no "
            f"{STORE_MANIFEST}); empty that folder or give another --activations-dir."
        )
    if not where.create(STORE_MANIFEST, (json.dumps(fresh, sort_keys=True) + "\n").encode()):
        claim_store(location, run_id, run_folder)  # another run claimed it just now


def shard_header(where: Location, name: str) -> dict[str, Any]:
    """A shard's safetensors header (tensor names to dtype and shape, ``__metadata__``),
    read without its data; one sentence naming the file when it is not a shard."""
    try:
        head = where.read(name, 0, 8)
    except FileNotFoundError:
        raise _damage(where, name, "it is missing") from None
    if len(head) < 8:
        raise _damage(where, name, "it is too short to be a safetensors file")
    (size,) = struct.unpack("<Q", head)
    if size > MAX_HEADER:
        raise _damage(where, name, "its header is not a safetensors header")
    try:
        header = json.loads(where.read(name, 8, 8 + size).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise _damage(where, name, "its header is not a safetensors header") from None
    if not isinstance(header, dict):
        raise _damage(where, name, "its header is not a safetensors header")
    return header


def shard_record(where: Location, name: str) -> dict[str, Any]:
    """What a shard's header says it holds: ``{"file", "contexts": [first, stop],
    "tensors": {name: {"dtype", "shape", "sha256"}}}``."""
    header = shard_header(where, name)
    meta = header.pop("__metadata__", None) or {}
    try:
        first, stop = (int(x) for x in str(meta[_CONTEXTS]).split(","))
        hashes = json.loads(meta[_HASHES])
        tensors = {
            key: {"dtype": info["dtype"], "shape": list(info["shape"]), "sha256": hashes[key]}
            for key, info in header.items()
        }
    except (KeyError, ValueError, TypeError):
        raise _damage(
            where, name, "its header does not record its contexts and content hashes"
        ) from None
    return {"file": name, "contexts": [first, stop], "tensors": tensors}


def check_coverage(where: Location, shards: list[dict[str, Any]], contexts: int) -> None:
    """Refuse shards that do not cover contexts ``0..contexts-1`` exactly once, naming a
    file that is off (checked before anything is allocated)."""
    owner: dict[int, str] = {}
    for shard in sorted(shards, key=lambda s: s["contexts"][0]):
        first, stop = shard["contexts"]
        if first < 0 or stop > contexts or stop < first:
            raise _damage(
                where, shard["file"], f"it holds contexts {first}-{stop - 1} of a run of {contexts}"
            )
        for c in range(first, stop):
            if c in owner:
                raise _damage(
                    where, shard["file"], f"it holds context {c}, which {owner[c]} holds too"
                )
            owner[c] = shard["file"]
    if len(owner) != contexts:
        missing = next(c for c in range(contexts) if c not in owner)
        raise StoreDamaged(
            f"the activation store {where.shown} lacks context {missing} of {contexts} (a "
            "shard is missing); remove the store and rerun the command that captured it."
        )


def seal_store(
    location: Path | str, run_id: str, contexts: int, length: int, layers: list[int]
) -> dict[str, Any]:
    """Check a finished capture's store and record it in store.json (status "complete").

    Every shard must come from this capture (its header's contexts and hashes), hold
    ``layers`` as [c, length, d] and the shards together every context exactly once.
    Returns the summary the run's manifest keeps (shards, contexts, the manifest's hash).
    """
    where = Location(location)
    record = read_store_manifest(where)
    if record is None or record["run"] != run_id:
        raise StoreDamaged(
            f"the activation store {where.shown} has no {STORE_MANIFEST} of this run; remove "
            "the store and rerun the command that captured it."
        )
    wanted = {"input_ids", "context_index", "labels", *(f"layer_{l}" for l in layers)}
    shards = []
    for name in where.shards():
        shard = shard_record(where, name)
        tensors = shard["tensors"]
        n = shard["contexts"][1] - shard["contexts"][0]
        if set(tensors) != wanted:
            raise _damage(where, name, f"it holds {sorted(tensors)}, not {sorted(wanted)}")
        for key in wanted - {"context_index", "labels", "input_ids"}:
            if tensors[key]["shape"][:2] != [n, length] or len(tensors[key]["shape"]) != 3:
                raise _damage(where, name, f"its {key} is {tensors[key]['shape']}")
        shards.append({**shard, "facts": where.facts(name)})
    check_coverage(where, shards, contexts)
    record.update(
        status="complete",
        contexts=contexts,
        length=length,
        layers=list(layers),
        shards=sorted(shards, key=lambda s: s["contexts"][0]),
    )
    _write_manifest(where, record)
    digest = hashlib.sha256(where.read(STORE_MANIFEST)).hexdigest()
    return {"shards": len(shards), "contexts": contexts, "manifest_sha256": digest}


def unseal_store(location: Path | str, run_id: str | None, run_folder: Path) -> None:
    """Mark the store of the run ``run_id`` as being written again (a new capture rewrites
    its shards); a lost or unreadable store.json is written anew for that run."""
    where = Location(location)
    try:
        record = read_store_manifest(where)
    except StoreDamaged:
        record = None
    if record is None:
        if run_id is None:
            return
        record = {"format": STORE_FORMAT, "run": run_id, "run_folder": str(run_folder.resolve())}
    record.update(status="writing", shards=[])
    _write_manifest(where, record)


def verify_store(location: Path | str, run_id: str | None) -> None:
    """Check, without reading activations, that a sealed store still holds what its
    manifest records: the run, every shard file, each shard's contexts and hashes. One
    sentence naming the first file that is off (``StoreDamaged``)."""
    where = Location(location)
    record = read_store_manifest(where)
    if record is None or record.get("status") != "complete":
        raise StoreDamaged(
            f"the activation store {where.shown} is not complete (its {STORE_MANIFEST} is "
            "missing or the capture did not finish); rerun the command that captured it."
        )
    if run_id is not None and record["run"] != run_id:
        raise GeomlensError(
            f"the activation store {where.shown} belongs to another run (in "
            f"{record.get('run_folder')}); give each run its own --activations-dir."
        )
    for shard in record["shards"]:
        name = shard["file"]
        if not where.exists(name):
            raise _damage(where, name, f"it is missing, though {STORE_MANIFEST} lists it")
        recorded = {k: v for k, v in shard.items() if k != "facts"}
        if shard_record(where, name) != recorded:
            raise _damage(where, name, f"it is not the shard {STORE_MANIFEST} records")
        if where.facts(name) != shard.get("facts"):  # written since: its bytes are hashed
            check_content(where, name, recorded)


def check_content(where: Location, name: str, recorded: dict[str, Any]) -> None:
    """Hash every tensor of one shard against ``recorded`` (one sentence naming the file)."""
    try:
        tensors = load_bytes(where.read(name))
    except (SafetensorError, OSError, ValueError) as exc:
        raise _damage(where, name, f"not a complete safetensors file: {exc}") from None
    for key, info in recorded["tensors"].items():
        if key not in tensors or tensor_hash(tensors[key]) != info["sha256"]:
            raise _damage(where, name, f"its {key} is not what {STORE_MANIFEST} records")


class ActivationStore:
    """Lazy reader over a folder of shards (a local folder, or an fsspec URL).

    With a manifest (store.json, written when the run completed), the shards are the ones
    it lists and every read is checked against it; a store without one (written before
    stores had manifests) is read from the shard files it holds, checked for coverage."""

    def __init__(self, folder: Path | str, run_id: str | None = None) -> None:
        self.location = Location(folder)
        self.folder: Path | str = str(folder) if is_url(folder) else Path(folder)
        self.manifest = read_store_manifest(self.location)
        if self.manifest is not None and run_id is not None and self.manifest["run"] != run_id:
            raise GeomlensError(
                f"the activation store {self.location.shown} belongs to another run (in "
                f"{self.manifest.get('run_folder')}), not to this one; its activations are "
                "not this run's."
            )
        if self.manifest is None and run_id is not None:  # the run sealed one: it was lost
            raise _damage(
                self.location, STORE_MANIFEST, "it is missing, though the run recorded it"
            )
        if self.manifest is not None and self.manifest.get("status") != "complete":
            raise StoreDamaged(
                f"the activation store {self.location.shown} is not complete (the capture "
                "writing it did not finish); rerun the command that captured it."
            )
        if self.manifest is not None:
            self.shards: list[str] = [s["file"] for s in self.manifest["shards"]]
        else:
            self.shards = self.location.shards()
        if not self.shards:
            raise StoreDamaged(f"the activation store {self.location.shown} holds no shards.")

    def __len__(self) -> int:
        return len(self.shards)

    def _recorded(self, name: str) -> dict[str, Any] | None:
        if self.manifest is None:
            return None
        return next(s for s in self.manifest["shards"] if s["file"] == name)

    @property
    def layers(self) -> list[int]:
        if self.manifest is not None:
            return list(self.manifest["layers"])
        header = shard_header(self.location, self.shards[0])
        return sorted(int(k[6:]) for k in header if k.startswith("layer_"))

    def _read(self, name: str, keys: list[str] | None) -> dict[str, torch.Tensor]:
        """The tensors ``keys`` (None: all) of one shard, each checked against the hash
        recorded for it; one sentence naming the file when it does not match."""
        where = self.location
        if not where.exists(name):
            raise _damage(where, name, "it is missing")
        try:
            if where.fs is not None:
                whole = load_bytes(where.read(name))
                tensors = {k: v for k, v in whole.items() if keys is None or k in keys}
            else:
                from safetensors import safe_open

                with safe_open(where.path(name), "pt") as f:
                    names = [k for k in f.keys() if keys is None or k in keys]  # noqa: SIM118
                    tensors = {k: f.get_tensor(k) for k in names}
        except (SafetensorError, OSError, ValueError) as exc:
            raise _damage(where, name, f"not a complete safetensors file: {exc}") from None
        if keys is not None and set(keys) - set(tensors):
            raise _damage(where, name, f"it lacks {sorted(set(keys) - set(tensors))}")
        recorded = self._recorded(name)
        if recorded is not None:
            for key, tensor in tensors.items():
                info = recorded["tensors"].get(key)
                if info is None or tensor_hash(tensor) != info["sha256"]:
                    raise _damage(where, name, f"its {key} is not what {STORE_MANIFEST} records")
        return tensors

    def iter_shards(self, layers: list[int] | None = None) -> Iterator[dict[str, torch.Tensor]]:
        """Yield one shard at a time (only the requested layers are read)."""
        missing = sorted(set(layers or ()) - set(self.layers))
        if missing:
            raise GeomlensError(
                f"the activation store {self.location.shown} holds layers {self.layers}, not "
                f"layer {missing[0]}."
            )
        for name in self.shards:
            if layers is None:
                yield self._read(name, None)
                continue
            keys = ["input_ids", "context_index", "labels", *(f"layer_{l}" for l in layers)]
            yield self._read(name, keys)

    def _coverage(self) -> list[tuple[str, int, int]]:
        """Each shard's contexts ``(file, first, stop)``, checked to cover every context once."""
        if self.manifest is not None:
            shards = list(self.manifest["shards"])
            contexts = int(self.manifest["contexts"])
        else:  # no manifest: the context index each shard holds
            shards = []
            for name in self.shards:
                index = self._read(name, ["context_index"])["context_index"]
                try:
                    first, stop = contiguous_range(index)
                except ValueError:
                    raise _damage(self.location, name, "its contexts are not consecutive") from None
                shards.append({"file": name, "contexts": [first, stop]})
            contexts = max(s["contexts"][1] for s in shards)
        check_coverage(self.location, shards, contexts)
        return [(s["file"], *s["contexts"]) for s in shards]

    def layer(self, layer: int) -> torch.Tensor:
        """All contexts of one layer, in context order: [C, T, d] (loads that layer only).

        The shards' coverage (each context exactly once) and the layer's shapes are checked
        before the result is allocated; each tensor read is checked against its hash."""
        key = f"layer_{layer}"
        spans = self._coverage()
        if layer not in self.layers:
            raise GeomlensError(
                f"the activation store {self.location.shown} holds layers {self.layers}, not "
                f"layer {layer}."
            )
        shapes = []
        for name, first, stop in spans:
            info = shard_header(self.location, name).get(key)
            shape = [info.get("dtype"), *info["shape"]] if isinstance(info, dict) else None
            if shape is None or len(shape) != 4 or shape[1] != stop - first:
                raise _damage(
                    self.location, name, f"its {key} does not hold {stop - first} contexts"
                )
            shapes.append(shape)
        if any([s[0], *s[2:]] != [shapes[0][0], *shapes[0][2:]] for s in shapes):
            bad = next(
                n
                for (n, *_), s in zip(spans, shapes, strict=True)
                if [s[0], *s[2:]] != [shapes[0][0], *shapes[0][2:]]
            )
            raise _damage(self.location, bad, f"its {key} has another shape than the other shards'")
        total = max(stop for _, _, stop in spans)
        out: torch.Tensor | None = None
        for name, first, stop in spans:
            shard = self._read(name, ["context_index", key])
            if not torch.equal(shard["context_index"], torch.arange(first, stop)):
                raise _damage(self.location, name, "its context index is not the one recorded")
            part = shard[key]
            if out is None:
                out = torch.empty((total, *part.shape[1:]), dtype=part.dtype)
            out[first:stop] = part
        assert out is not None
        return out
