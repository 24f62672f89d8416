"""A user cache of converted float32 model folders, so a GGUF file is converted once."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from geomlens.io.files import cache_root

__all__ = ["cache_root", "converted_dir", "file_key", "publish"]


def file_key(paths: list[Path]) -> str:
    """A key for source files from their names, sizes and modification times."""
    h = hashlib.sha256()
    for p in paths:
        st = p.stat()
        h.update(f"{p.resolve()}|{st.st_size}|{int(st.st_mtime)}\n".encode())
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
