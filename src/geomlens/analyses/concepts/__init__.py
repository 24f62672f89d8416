"""The concept-space tests of Singh (2023) on multiple-choice tasks: the lm-eval-style
baseline, pyramidal generation, concept similarity and sweeps of composition schemes."""

COMMAND = ("concepts", "concept-space tests on a multiple-choice task (Singh 2023)")
"""``geomlens concepts``: its name and its line in ``geomlens --help``."""
