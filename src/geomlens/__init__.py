"""geomlens: the geometry of pretrained transformer language models.

Entry points: ``load_model`` (a ``ModelView`` of any supported model), ``activations``
(hidden states, attention and logits of texts in memory, no run folder), ``load_corpus``
and ``make_windows`` (C x T token windows), ``open_run`` (a run folder read back), and
one function per command, each returning a ``Result`` (numbers, tables, figures, run
folder): ``capture``, ``decompose``, ``sphere``, ``walk``, ``concepts``, ``report`` (see
``geomlens.api`` and docs/python_api.md).

``import geomlens`` loads neither torch nor transformers: each name below is imported the
first time it is used (``LAZY``), so ``geomlens --help`` and ``geomlens models`` start at
once. ``geomlens.capture``, ``geomlens.concepts`` and ``geomlens.report`` are both the
subpackages of those names and callable as the API functions: see ``geomlens.api.modules``.
"""

from typing import TYPE_CHECKING

from geomlens.api.modules import install
from geomlens.errors import GeomlensError

LAZY = {
    "Activations": "geomlens.api.text_activations",
    "activations": "geomlens.api.text_activations",
    "decompose": "geomlens.api.commands",
    "sphere": "geomlens.api.commands",
    "walk": "geomlens.api.commands",
    "Result": "geomlens.commands.result",
    "open_result": "geomlens.api.readers",
    "load_corpus": "geomlens.api.readers",
    "make_windows": "geomlens.api.readers",
    "open_run": "geomlens.api.readers",
    "ModelView": "geomlens.models",
    "load_model": "geomlens.models",
}
"""Public name -> the module it is imported from on first use."""

install(__name__, LAZY)

if TYPE_CHECKING:  # at run time these names are the subpackages, callable as these functions
    from geomlens.api import capture, concepts, report
    from geomlens.api.commands import decompose, sphere, walk
    from geomlens.api.text_activations import Activations, activations
    from geomlens.commands.result import Result, open_result
    from geomlens.corpus import load_corpus, make_windows
    from geomlens.io.runfolder import open_run
    from geomlens.models import ModelView, load_model

__all__ = [
    "Activations",
    "GeomlensError",
    "ModelView",
    "Result",
    "activations",
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
