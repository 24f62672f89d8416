"""The warning the sphere and walk sections show when token readouts go through tied input
embeddings because the model has no trained output layer."""

from __future__ import annotations

from typing import Any

from geomlens.reporting.html import warning

UNTRAINED = "no LM head"
"""What the recorded readout says when the model has no trained output layer."""


def untrained_readout(metrics: dict[str, Any]) -> str:
    """A warning when top tokens and the logit lens read through tied input embeddings
    because the model has no trained output layer ("" otherwise)."""
    s = metrics.get("sphere") or {}
    said = [s.get("readout"), (s.get("trajectory") or {}).get("readout")]
    if not any(UNTRAINED in str(x) for x in said if x):
        return ""
    return warning(
        "This model has no trained output layer: token readouts (top tokens, the logit lens, "
        "FFN sub-updates, W_VO tokens and the walks' nearest tokens) use the input "
        "embeddings transposed, which were never trained to read hidden states out. Read "
        "them as nearest input embeddings, not as the model's predictions."
    )
