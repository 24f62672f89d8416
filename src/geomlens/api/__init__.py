"""The Python API: one function per command, each returning a ``Result``.

    import geomlens

    result = geomlens.decompose(contexts=16, length=64, layers=[0, 6, 12])
    result.metrics["decomposition"]["layers"]  # the numbers of metrics.json
    result.figures["shares"]  # a plotly Figure
    result.folder  # the run folder

``geomlens.api.decompose`` is the same function; ``geomlens.commands.decompose`` is the module
``geomlens/commands/decompose.py`` made callable (see ``geomlens.api.modules``). See
docs/python_api.md.
"""

from geomlens.api.commands import capture, concepts, decompose, report, sphere, walk
from geomlens.commands.result import Result, open_result

COMMANDS = ("capture", "decompose", "sphere", "walk", "concepts", "report")
"""The commands the API offers, in the order the docs list them."""

__all__ = [
    "COMMANDS",
    "Result",
    "capture",
    "concepts",
    "decompose",
    "open_result",
    "report",
    "sphere",
    "walk",
]
