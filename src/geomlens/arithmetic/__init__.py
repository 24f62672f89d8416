"""The addition study (Song & Zhong 2023, section 5): small GPT-style decoders trained on
integer addition, tested on operand lengths inside and outside the training range, with
their positional geometry measured by the shared decomposition code. The command that runs
it is ``geomlens.commands.arithmetic``."""

from geomlens.arithmetic.config import PRESETS, ArithmeticConfig, make_config

__all__ = ["PRESETS", "ArithmeticConfig", "make_config"]
