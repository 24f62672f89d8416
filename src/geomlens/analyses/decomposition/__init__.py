"""The position/context decomposition of hidden states (Song & Zhong 2023): variance
shares, positional rank and spectra, low-frequency structure, incoherence, topic clusters."""

COMMAND = ("decompose", "position/context decomposition of the hidden states")
"""``geomlens decompose``: its name and its line in ``geomlens --help``."""
