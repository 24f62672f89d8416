"""geomlens: the geometry of pretrained transformer language models.

Entry points: ``load_model`` (a ``ModelView`` of any supported model), ``load_corpus``
and ``make_windows`` (C x T token windows), ``open_run`` (a run folder read back), and
one function per command, each returning a ``Result`` (numbers, figures, run folder):
``capture``, ``decompose``, ``sphere``, ``walk``, ``concepts``, ``report`` (see
``geomlens.api`` and docs/python_api.md).

``geomlens.capture``, ``geomlens.concepts`` and ``geomlens.report`` are both the
subpackages of those names and callable as the API functions: see ``geomlens.api.modules``.
"""

from typing import TYPE_CHECKING

from geomlens.api.commands import decompose, sphere, walk
from geomlens.api.modules import install
from geomlens.commands.result import Result, open_result
from geomlens.corpus import load_corpus, make_windows
from geomlens.errors import GeomlensError
from geomlens.io.runfolder import open_run
from geomlens.models import ModelView, load_model

install(__name__)

if TYPE_CHECKING:  # at run time these names are the subpackages, callable as these functions
    from geomlens.api import capture, concepts, report

__all__ = [
    "GeomlensError",
    "ModelView",
    "Result",
    "capture",
    "concepts",
    "decompose",
    "load_corpus",
    "load_model",
    "make_windows",
    "open_result",
    "open_run",
    "report",
    "sphere",
    "walk",
]
__version__ = "0.1.0"
