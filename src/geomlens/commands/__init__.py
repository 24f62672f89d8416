"""The commands: what ``geomlens <command>`` and the Python API run, and their run lifecycle."""
