"""The Python API: one function per command, each returning a ``Result``, and
``activations`` for texts in memory.

Each function takes its command's options as keyword arguments and writes the same run
folder as the command line (default ``runs/<command>-<model>`` under the working folder);
``view`` passes a model already loaded, so several calls load it once, and ``corpus`` may
be a list of texts. A small run on MiniLM (a few seconds each):

>>> import geomlens
>>> view = geomlens.load_model("minilm-l6", attention="eager")  # walk reads attention
>>> texts = [
...     "The cat sat on the mat and watched the door until the rain stopped.",
...     "Markets fell on Monday as investors waited for the central bank's decision.",
...     "The striker scored twice in the second half to win the cup final.",
...     "A new phone with a folding screen goes on sale in shops next month.",
... ]
>>> small = dict(model="minilm-l6", corpus=texts, contexts=4, length=16, view=view,
...              figures="none", progress=False)
>>> result = geomlens.decompose(**small, layers=[0, 3, 6])
>>> result
Result(command='decompose', folder=PosixPath('runs/decompose-minilm-l6'))
>>> result.summary()[0]
'decomposition written to runs/decompose-minilm-l6 (metrics.json, figures/)'
>>> result.layers()["layer"].tolist()  # the per-layer rows of metrics.json (a DataFrame)
[0, 3, 6]
>>> sorted(result.figures)[:3]  # plotly figures, drawn from the numbers
['attention_parts', 'geometry', 'ranks']
>>> geomlens.capture(**small).metrics["capture"]["n_contexts"]
4
>>> geomlens.sphere(**small, probe_layers=[0]).command
'sphere'
>>> geomlens.walk(**small, layers=[0, 6], text="The cat sat on the mat.").summary()[1]
'  text: 9 tokens; layers 0..6'
>>> report = geomlens.report(**small)
>>> (report.folder / "report.html").is_file()
True
>>> [key in report.metrics for key in ("capture", "decomposition", "claims")]
[True, True, True]

The concept-space tests read a multiple-choice task (BIG-bench JSON or HellaSwag JSONL)
and need a decoder:

>>> import json
>>> task = {"examples": [
...     {"input": "On a clear day the sky is", "target_scores": {"blue": 1, "green": 0}},
...     {"input": "Fresh snow is", "target_scores": {"white": 1, "black": 0}},
... ]}
>>> import tempfile
>>> from pathlib import Path
>>> colours = Path(tempfile.mkdtemp()) / "colours.json"
>>> colours.write_text(json.dumps(task), encoding="utf-8") > 0
True
>>> concepts = geomlens.concepts(task=str(colours), schemes=["sanity"], progress=False)
>>> concepts.metrics["concepts"]["baseline"]["n"]
2

``geomlens.api.decompose`` is the same function (the command's module is
``geomlens.analyses.decomposition.command``). The names are imported on first use, so
``import geomlens.api`` loads no model code. See docs/python_api.md.
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
