"""The addition study (Song & Zhong 2023, section 5): small GPT-style decoders trained on
integer addition, tested on operand lengths inside and outside the training range, with
their positional geometry measured by the decomposition's and attention's computations
(``geometry.py``). Its config and presets are ``config.py``; its command ``command.py``."""

COMMAND = ("arithmetic", "addition study: length generalisation and positional geometry")
"""``geomlens arithmetic``: its name and its line in ``geomlens --help``."""
