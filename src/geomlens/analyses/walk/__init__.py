"""Movement through embedding space (Singh 2023): similarity maps, encoding and decoding
walks, position kernels and negative self-bias, the per-head refactoring of attention."""

COMMAND = ("walk", "movement through embedding space (Singh 2023)")
"""``geomlens walk``: its name and its line in ``geomlens --help``."""
