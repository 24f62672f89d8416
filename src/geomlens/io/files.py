"""Files written atomically, JSON read back with a sentence when it is damaged, and
files identified by their whole content.

Every file geomlens writes goes to a temporary file in the same folder first and is then
renamed over the target (``os.replace``), so a reader sees the old file or the whole new
one, never part of it. A failed write (a full disk) removes the temporary file and
reports the target's path; so does a SIGTERM or SIGHUP that arrives while it is written
(``temporary``), before the process ends as the signal asks.

``content_hash`` is the sha256 of a whole file, streamed, and remembered under the user
cache by path, size, modification and change times, so a rerun on the same model files
reads no weights again.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from geomlens.errors import GeomlensError
from geomlens.io import jsontext

CLEANUP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals whose default action ends the process: a temporary file being written when one
arrives is removed first. (SIGINT raises KeyboardInterrupt, which ``temporary`` handles as
any exception; a handler a command installed, such as the capture's stop at the next batch,
is left as it is.)"""

_LIVE: dict[Path, None] = {}
"""Temporary files this process is writing now (insertion-ordered)."""

_INSTALLED: dict[signal.Signals, Any] = {}
"""The handlers ``temporary`` replaced, by signal, while any temporary file is live."""


def _remove_live(signum: int, frame: Any) -> None:
    """Remove the live temporary files, then end the process by ``signum`` as it would have."""
    for tmp in list(_LIVE):
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
    _LIVE.clear()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _guard(on: bool) -> None:
    """Install (``on``) or restore the handlers of ``CLEANUP_SIGNALS`` (main thread only;
    a signal whose handler is not the default is left to that handler)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if on:
        for sig in CLEANUP_SIGNALS:
            if signal.getsignal(sig) is signal.SIG_DFL:
                _INSTALLED[sig] = signal.signal(sig, _remove_live)
    else:
        for sig, old in list(_INSTALLED.items()):
            if signal.getsignal(sig) is _remove_live:
                signal.signal(sig, old)
            del _INSTALLED[sig]


@contextmanager
def temporary(tmp: Path) -> Iterator[Path]:
    """``tmp`` as a live temporary file for the block: removed if the block raises, or if
    SIGTERM/SIGHUP arrives before the block ends (the process then ends by that signal)."""
    first = not _LIVE
    _LIVE[tmp] = None
    if first:
        _guard(True)
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        _LIVE.pop(tmp, None)
        if not _LIVE:
            _guard(False)


def named(exc: OSError, path: Path, tmp: Path | None = None) -> OSError:
    """``exc`` naming ``path`` (a full disk is reported without a file name, or the temp's)."""
    if exc.errno is not None and (exc.filename is None or str(exc.filename) == str(tmp)):
        return OSError(exc.errno, exc.strerror, str(path))
    return exc


@contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block ends it replaces ``path``.

    If the block raises, the temporary file is removed and ``path`` stays as it was.
    """
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        with temporary(tmp):
            yield tmp
            os.replace(tmp, path)
    except OSError as exc:
        raise named(exc, path, tmp) from None


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write UTF-8 text atomically."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


_JSON_TYPES = {dict: "an object", list: "a list", str: "a string", bool: "true/false"}


def json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "a number"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def damaged(path: Path, reason: str, advice: str) -> GeomlensError:
    """The sentence for a damaged run-folder file: which file, why, what to do."""
    return GeomlensError(f"{path} is unreadable ({reason}); {advice}")


def read_user_text(path: str | Path, what: str, limit: int) -> str:
    """The UTF-8 text of a file a user names (a byte-order mark dropped), read only if it
    is a regular file of at most ``limit`` bytes: a device such as /dev/zero or a huge file
    is refused in one sentence instead of filling memory.

    ``what`` names the file in the sentences (``--text-file F``, ``task file F``).
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise GeomlensError(
                    f"{what} is not a regular file (a device, pipe or socket); give a text file."
                )
            data = f.read(limit + 1)
    except OSError as exc:
        raise GeomlensError(f"cannot read {what}: {exc.strerror or type(exc).__name__}.") from None
    if len(data) > limit:
        raise GeomlensError(
            f"{what} is larger than the {limit // 2**20:,} MiB geomlens reads from such a file; "
            "give a smaller file."
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # the codec counts after a byte-order mark: the offset is given in the file's bytes
        start = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        raise GeomlensError(f"{what} is not UTF-8 text (byte {start}); save it as UTF-8.") from None


def utf8_text(text: str, what: str, advice: str = "give UTF-8 text") -> str:
    """``text`` as given, or one sentence naming ``what`` where it holds bytes that are not
    UTF-8 (a command-line argument's undecodable bytes reach Python as lone surrogates,
    which no tokenizer takes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise GeomlensError(
            f"{what} holds bytes that are not UTF-8 (at character {exc.start}); {advice}."
        ) from None
    return text


def read_json(path: str | Path, expect: type, advice: str) -> Any:
    """JSON of the type ``expect`` from ``path``, or one sentence naming the file.

    A missing file raises FileNotFoundError (callers decide what absence means); a file
    that is not UTF-8 JSON, is truncated, or holds another type is a GeomlensError.
    """
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
        json.loads(text)  # the line of a syntax error, for the message
        value = jsontext.loads(text)
    except UnicodeDecodeError as exc:
        raise damaged(path, f"not UTF-8 text at byte {exc.start}", advice) from None
    except json.JSONDecodeError as exc:
        why = "empty" if not data.strip() else f"not valid JSON: {exc.msg} at line {exc.lineno}"
        raise damaged(path, why, advice) from None
    except (jsontext.JSONTextError, RecursionError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, jsontext.JSONTextError) else "not readable JSON"
        raise damaged(path, reason, advice) from None
    if not isinstance(value, expect):
        raise damaged(
            path, f"it holds {json_kind(value)} where {_JSON_TYPES[expect]} belongs", advice
        )
    return value


# files identified by their whole content ----------------------------------------------------
HASH_CHUNK = 8 << 20
"""Bytes read at a time while hashing (the whole file is never held in memory)."""


def hash_cache_dir() -> Path:
    """Where ``content_hash`` remembers hashes: ``hashes/`` under the user cache
    (``$GEOMLENS_CACHE`` or the platform's cache folder)."""
    return cache_root() / "hashes"


def cache_root() -> Path:
    """``$GEOMLENS_CACHE`` if set, else the platform's user cache folder for geomlens."""
    from platformdirs import user_cache_dir

    return Path(os.environ.get("GEOMLENS_CACHE") or user_cache_dir("geomlens"))


def file_stamp(stat: os.stat_result) -> dict[str, int]:
    """What changes when a file's content may have: size, inode, modification and change
    times (the change time cannot be set back by a tool that restores a modification time)."""
    return {
        "size": stat.st_size,
        "inode": stat.st_ino,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
    }


def content_hash(path: str | Path, cache: bool = True) -> str:
    """The sha256 of the whole file at ``path``, read in ``HASH_CHUNK`` pieces.

    The hash is remembered under ``hash_cache_dir()`` with the file's stamp
    (``file_stamp``); a later call on a file with the same stamp reads no byte of it. A
    cache entry that cannot be read or written is ignored (the file is hashed again).
    """
    path = Path(path).resolve()
    stamp = file_stamp(path.stat())
    entry = hash_cache_dir() / (hashlib.sha256(os.fsencode(path)).hexdigest()[:32] + ".json")
    if cache:
        try:
            known = json.loads(entry.read_text(encoding="utf-8"))
            if known.get("stamp") == stamp and isinstance(known.get("sha256"), str):
                return str(known["sha256"])
        except (OSError, ValueError, AttributeError):
            pass
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            h.update(chunk)
    digest = h.hexdigest()
    if cache and file_stamp(path.stat()) == stamp:  # not changed while it was read
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            record = {"path": os.fsdecode(path), "stamp": stamp, "sha256": digest}
            write_text_atomic(entry, json.dumps(record))
        except OSError:
            pass
    return digest


# safetensors headers checked against their data ---------------------------------------------
DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
}  # fmt: skip
"""Bytes per element of each safetensors dtype."""

FLOAT_DTYPES = ("F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2")

FLOAT_NAMES = (".weight", ".bias", "_weight", "_bias", ".scale", "embeddings")
"""Endings of tensor names that hold floating-point parameters in every Hugging Face
model (a weight stored as an integer type is read as its bit pattern: 1e9, not 0.1)."""

MAX_HEADER = 100 << 20
"""The largest safetensors header read (the format's own limit)."""


def safetensors_header_problem(path: Path) -> str | None:
    """Why the header of the safetensors file ``path`` does not describe its data, or None.

    Each tensor's dtype must be one safetensors knows, its byte range must be its shape
    times its dtype's size and lie inside the file, and a parameter (a name ending in
    ``.weight``, ``.bias``, ...) must be stored as a floating-point type: four bytes of
    float32 data labelled I32 have the right size but read as integers near 1e9.
    """
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 0 < n <= min(MAX_HEADER, size - 8):
            return "its header length is not that of a safetensors file"
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return "its header is not valid JSON"
    if not isinstance(header, dict):
        return "its header is not a JSON object"
    data = size - 8 - n
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (start, end) = info["dtype"], info["shape"], info["data_offsets"]
            elements = 1
            for dim in shape:
                elements *= int(dim)
        except (TypeError, KeyError, ValueError):
            return f"its entry for {name[:80]} lacks a dtype, shape or data offsets"
        if dtype not in DTYPE_BYTES:
            return f"{name[:80]} has the unknown dtype {str(dtype)[:20]}"
        if end - start != elements * DTYPE_BYTES[dtype] or not 0 <= start <= end:
            return (
                f"{name[:80]} ({dtype}, shape {list(shape)}) does not fit its {end - start} "
                "bytes of data"
            )
        if end > data:
            return f"it is truncated ({name[:80]} ends at byte {end} of {data} bytes of data)"
        if dtype not in FLOAT_DTYPES and name.endswith(FLOAT_NAMES):
            return (
                f"{name[:80]} is stored as {dtype}, an integer type, where a model's "
                "parameter is a floating-point number"
            )
    return None


def check_weight_headers(folder: Path) -> None:
    """Refuse a model folder whose safetensors headers do not describe their data
    (``safetensors_header_problem``), before any weight is read.

    Raises:
        GeomlensError: naming the file, the tensor and what to do.
    """
    for path in sorted(Path(folder).glob("*.safetensors")):
        why = safetensors_header_problem(path)
        if why is not None:
            raise GeomlensError(f"{path} is damaged: {why}; copy or convert the model again.")


def inside(root: Path, relative: str, where: str) -> Path:
    """``root / relative``, refused unless it resolves inside ``root``: an archive member or
    a user's name holding ``..``, an absolute path or a link out of ``root`` never writes
    elsewhere.

    Raises:
        GeomlensError: naming ``where`` (the member or option that gave ``relative``).
    """
    base = Path(root).resolve()
    target = (base / relative).resolve()
    if Path(relative).is_absolute() or not target.is_relative_to(base):
        raise GeomlensError(
            f"{where} names {relative!r}, which lies outside {root}; geomlens writes only "
            "inside its output folder: give a task path without '..' or a leading '/'."
        )
    return base / relative
