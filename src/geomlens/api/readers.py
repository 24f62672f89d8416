"""The public readers of the Python API (``geomlens.open_run``, ``open_result``,
``load_corpus``, ``make_windows``) behind its one error boundary: they raise
``GeomlensError`` subclasses only, like every command function (``api.checks``).

The package's own code calls the unwrapped functions in ``io``, ``commands`` and
``corpus``; only the names ``import geomlens`` exposes go through here.
"""

from __future__ import annotations

from geomlens.analyses import result
from geomlens.api.checks import bounded
from geomlens.corpus import load, windows
from geomlens.runs import runfolder

open_run = bounded(runfolder.open_run)
open_result = bounded(result.open_result)
load_corpus = bounded(load.load_corpus)
make_windows = bounded(windows.make_windows)

__all__ = ["load_corpus", "make_windows", "open_result", "open_run"]
