"""Layer norm and the hypersphere (Molina 2023, "Traveling Words"): the identity, radii,
top tokens, heads probed with common nouns, FFN sub-updates, logit lens, trajectories."""

COMMAND = ("sphere", "layer norm and the hypersphere (Molina 2023)")
"""``geomlens sphere``: its name and its line in ``geomlens --help``."""
