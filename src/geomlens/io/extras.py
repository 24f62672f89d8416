"""Optional extras: packages a few analyses use, installed with ``pip install
'geomlens[umap,wordfreq,pandas]'`` (the README's install command includes the first two).

``available`` says whether one is installed without importing it; ``missing_note`` is the
one sentence printed (once per process) when an analysis goes without it.
"""

from __future__ import annotations

import functools
import importlib.util
import sys

EXTRAS = {
    "umap": ("umap-learn", "umap", "the 3-D UMAP map of the logit-lens trajectory"),
    "wordfreq": ("wordfreq", "wordfreq", "the English word frequencies of the top tokens"),
    "pandas": ("pandas", "pandas", "per-layer tables as DataFrames (Result.layers())"),
}
"""Module -> (its PyPI package, the geomlens extra that installs it, what it gives)."""


def available(module: str) -> bool:
    """Whether ``module`` can be imported (found, not imported)."""
    return importlib.util.find_spec(module) is not None


def install_hint(module: str) -> str:
    """How to install the extra that provides ``module``."""
    package, extra, _ = EXTRAS[module]
    return f"pip install {package} (or pip install 'geomlens[{extra}]')"


def missing_sentence(module: str) -> str:
    """One sentence: what goes missing without ``module``, and how to install it."""
    package, _, what = EXTRAS[module]
    return f"{package} is not installed, so {what} is left out; {install_hint(module)}."


@functools.cache
def missing_note(module: str) -> None:
    """Print ``missing_sentence(module)`` on stderr (once per process)."""
    print(f"geomlens: note: {missing_sentence(module)}", file=sys.stderr, flush=True)


def used(module: str) -> bool:
    """Whether ``module`` is installed; when it is not, say so once and go without it."""
    if available(module):
        return True
    missing_note(module)
    return False
