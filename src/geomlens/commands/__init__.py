"""The commands: what ``geomlens <command>`` and the Python API run, and their run lifecycle.

``HELP`` is each command's one line for ``geomlens --help``, kept here so that listing the
commands imports none of them (each module's own ``HELP`` is the same line, tested).
"""

HELP = {
    "models": "list the bundled models (or the supported families)",
    "capture": "stream a corpus through a model into statistics",
    "decompose": "position/context decomposition of the hidden states",
    "walk": "movement through embedding space (Singh 2023)",
    "sphere": "layer norm and the hypersphere (Molina 2023)",
    "arithmetic": "addition study: length generalisation and positional geometry",
    "concepts": "concept-space tests on a multiple-choice task (Singh 2023)",
    "data": "rebuild offline data folders",
    "report": "every analysis on one capture, in one report.html",
    "compare": "per-layer numbers and the papers' claims of several runs side by side",
}
"""``geomlens <name>`` -> its one-line help, in the order ``geomlens --help`` lists them."""
