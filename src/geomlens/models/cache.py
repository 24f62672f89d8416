"""A user cache of converted float32 model folders, so a GGUF file is converted once
(keyed by its content: a file edited in place is converted again)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from geomlens.io.files import cache_root, content_hash

__all__ = ["cache_root", "converted_dir", "file_key", "publish"]


def file_key(paths: list[Path]) -> str:
    """A key for source files (a GGUF or its parts, in order) from their whole contents.

    Each file's sha256 is streamed once (``io.files.content_hash``) and remembered by path
    with its size, inode, and modification and change times: a later key of unchanged files
    reads no byte of them, and a file edited in place with its size and modification time
    put back still has a new change time (no tool can set it back), so it is hashed again
    and gets a new key, never the conversion of its old content.
    """
    h = hashlib.sha256()
    for p in paths:
        h.update(f"{content_hash(p)}\n".encode())
    return h.hexdigest()[:16]


def converted_dir(stem: str, key: str) -> Path:
    return cache_root() / "converted" / f"{stem}-{key}"


def publish(tmp: Path, final: Path) -> None:
    """Move a finished folder into place atomically (a concurrent winner is kept)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
