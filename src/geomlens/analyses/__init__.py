"""The analyses, one folder each: its pure computation, its step on a finished capture, its
figures, its page section, its claims, its metrics schema and its command.

``FOLDERS`` is the one line an analysis adds outside its folder: the registry
(``analyses/registry.py``) reads each folder's ``entry.ENTRY``, and the command line each
folder's ``COMMAND`` (its ``__init__``, which imports nothing, so ``geomlens --help`` stays
fast). ``common/`` holds what several analyses compute with.
"""

FOLDERS: tuple[str, ...] = (
    "capture",
    "decomposition",
    "attention",
    "sphere",
    "walk",
    "massive",
    "sinks",
    "anisotropy",
    "intrinsic_dimension",
    "interventions",
    "concepts",
    "arithmetic",
)
"""Every analysis folder, in the order of the page, the headline, the figures and the claims."""
