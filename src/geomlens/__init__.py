"""geomlens: the geometry of pretrained transformer language models.

Entry points: ``load_model`` (a ``ModelView`` of any supported model), ``activations``
(hidden states, attention and logits of texts in memory, no run folder), ``load_corpus``
and ``make_windows`` (C x T token windows), ``open_run`` (a run folder read back), and
one function per command, each returning a ``Result`` (numbers, tables, figures, run
folder): ``capture``, ``decompose``, ``sphere``, ``walk``, ``concepts``, ``report`` (see
``geomlens.api`` and docs/python_api.md).

>>> import geomlens
>>> view = geomlens.load_model("minilm-l6")
>>> view.family, view.n_layers, view.d_model
('bert', 6, 384)
>>> acts = geomlens.activations(view, ["The cat sat.", "A dog ran."])
>>> acts.hidden_states[0].shape  # [layers + 1, tokens, d] of the first text
torch.Size([7, 6, 384])

``import geomlens`` loads neither torch nor transformers: each name below is imported the
first time it is used (``LAZY``), so ``geomlens --help`` and ``geomlens models`` start at
once. No subpackage shares a name with an API function (the capture machinery is
``geomlens.capturing``, the concept-space tests ``geomlens.analyses.concepts``, the report
``geomlens.reporting``), so ``geomlens.report`` is always the function.
"""

import importlib
from typing import TYPE_CHECKING, Any

from geomlens.errors import GeomlensError

LAZY = {
    "Activations": "geomlens.api.text_activations",
    "activations": "geomlens.api.text_activations",
    "capture": "geomlens.api.commands",
    "concepts": "geomlens.api.commands",
    "report": "geomlens.api.commands",
    "decompose": "geomlens.api.commands",
    "sphere": "geomlens.api.commands",
    "walk": "geomlens.api.commands",
    "Result": "geomlens.analyses.result",
    "open_result": "geomlens.api.readers",
    "load_corpus": "geomlens.api.readers",
    "make_windows": "geomlens.api.readers",
    "open_run": "geomlens.api.readers",
    "ModelView": "geomlens.models",
    "load_model": "geomlens.models",
}
"""Public name -> the module it is imported from on first use."""


def __getattr__(name: str) -> Any:
    """A name of ``LAZY``, imported from its module on first use."""
    if name in LAZY:
        value = getattr(importlib.import_module(LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    from geomlens.analyses.result import Result, open_result
    from geomlens.api.commands import capture, concepts, decompose, report, sphere, walk
    from geomlens.api.text_activations import Activations, activations
    from geomlens.corpus import load_corpus, make_windows
    from geomlens.models import ModelView, load_model
    from geomlens.runs.runfolder import open_run

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
