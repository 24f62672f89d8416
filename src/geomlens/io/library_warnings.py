"""Warnings other libraries raise (umap, matplotlib, ...), said in one plain line on
stderr: the library's name and its message, without the machine's paths (Python's own
format starts with the full path of the library file that warned)."""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import PurePath
from typing import Any, TextIO

PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\s\\/:'\"()]+)+[\\/]?")
"""An absolute path in a message (POSIX or Windows)."""

MAX_WARNING = 300
"""Longest warning message printed (characters)."""


def _parts(path: str) -> list[str]:
    """The parts of a POSIX or Windows path (whichever machine warned)."""
    return [p for p in re.split(r"[\\/]", path) if p]


def library_of(filename: str) -> str:
    """The package a warning came from: the folder below ``site-packages`` (or
    ``dist-packages``) in ``filename``, else the file's own name."""
    parts = _parts(filename)
    for i, part in enumerate(parts[:-1]):
        if part in ("site-packages", "dist-packages"):
            return PurePath(parts[i + 1]).stem
    return PurePath(parts[-1]).stem if parts else "python"


def without_paths(text: str) -> str:
    """``text`` with every absolute path cut to its last part, on one line."""
    cut = PATH.sub(lambda m: (_parts(m.group(0)) or [""])[-1], text)
    line = " ".join(cut.split())
    return line if len(line) <= MAX_WARNING else line[: MAX_WARNING - 3].rstrip() + "..."


def show(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` in geomlens's words: "geomlens: warning from LIB: ..."."""
    out: Any = file if file is not None else sys.stderr
    said = f"geomlens: warning from {library_of(filename)}: {without_paths(str(message))}\n"
    with suppress(OSError):  # stderr gone: a warning is not worth failing for
        out.write(said)


@contextmanager
def plain_warnings() -> Iterator[None]:
    """Within the block, warnings are printed by ``show`` (the previous printer after)."""
    before = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = before
