"""The Python API: one function per command, each returning a ``Result``, and
``activations`` for texts in memory.

    import geomlens

    result = geomlens.decompose(contexts=16, length=64, layers=[0, 6, 12])
    result.metrics["decomposition"]["layers"]  # the numbers of metrics.json
    result.layers()  # the per-layer rows as a pandas DataFrame
    result.figures["shares"]  # a plotly Figure
    result.folder  # the run folder

    acts = geomlens.activations("smollm2-135m", ["The cat sat.", "A dog ran."])
    acts.hidden_states[0]  # [layers + 1, tokens, d] of the first text

``geomlens.api.decompose`` is the same function (``geomlens.analyses.decomposition.command`` is the
command's module). The names are imported on first use, so ``import geomlens.api`` loads no
model code. See docs/python_api.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from geomlens.analyses.result import Result, open_result
    from geomlens.api.commands import capture, concepts, decompose, report, sphere, walk
    from geomlens.api.text_activations import Activations, activations

COMMANDS = ("capture", "decompose", "sphere", "walk", "concepts", "report")
"""The commands the API offers, in the order the docs list them."""

LAZY = {
    **{name: "geomlens.api.commands" for name in COMMANDS},
    "activations": "geomlens.api.text_activations",
    "Activations": "geomlens.api.text_activations",
    "Result": "geomlens.analyses.result",
    "open_result": "geomlens.analyses.result",
}
"""Public name -> the module it is imported from on first use."""


def __getattr__(name: str) -> Any:
    if name in LAZY:
        value = getattr(importlib.import_module(LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "COMMANDS",
    "Activations",
    "Result",
    "activations",
    "capture",
    "concepts",
    "decompose",
    "open_result",
    "report",
    "sphere",
    "walk",
]
