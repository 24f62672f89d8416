"""Causal checks of the geometry: each geometric claim tested by an edit of the residual
stream on held-out windows, against random edits of the same size (positional part,
smoothness, context part, massive coordinates, the final norm's gain and bias)."""

COMMAND = ("intervene", "causal checks: edits of the residual stream against random controls")
"""``geomlens intervene``: its name and its line in ``geomlens --help``."""
