"""Files written atomically and JSON read back with a sentence when it is damaged.

Every file geomlens writes goes to a temporary file in the same folder first and is then
renamed over the target (``os.replace``), so a reader sees the old file or the whole new
one, never part of it. A failed write (a full disk) removes the temporary file and
reports the target's path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from geomlens.errors import GeomlensError


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
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise named(exc, path, tmp) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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


def read_json(path: str | Path, expect: type, advice: str) -> Any:
    """JSON of the type ``expect`` from ``path``, or one sentence naming the file.

    A missing file raises FileNotFoundError (callers decide what absence means); a file
    that is not UTF-8 JSON, is truncated, or holds another type is a GeomlensError.
    """
    path = Path(path)
    data = path.read_bytes()
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise damaged(path, f"not UTF-8 text at byte {exc.start}", advice) from None
    except json.JSONDecodeError as exc:
        why = "empty" if not data.strip() else f"not valid JSON: {exc.msg} at line {exc.lineno}"
        raise damaged(path, why, advice) from None
    if not isinstance(value, expect):
        raise damaged(
            path, f"it holds {json_kind(value)} where {_JSON_TYPES[expect]} belongs", advice
        )
    return value
