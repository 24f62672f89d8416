"""The one place numbers are rounded for the files a run writes.

metrics.json and the side files must come out byte for byte the same from the same run, on
any machine: floats are rounded before they are written, either to significant digits
(``sig``, the analyses' numbers, which span many orders of magnitude) or to decimal places
(``rounded``, accuracies and losses, which live in [0, 1] or near it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def sig(x: Any, digits: int = 8) -> float:
    """``x`` rounded to ``digits`` significant digits.

    >>> sig(0.123456789, 3)
    0.123
    >>> sig(123456.0, 2)
    120000.0
    """
    return float(f"{float(x):.{digits}g}")


def rounded(value: Any, digits: int = 9) -> Any:
    """Floats rounded to ``digits`` decimal places (non-finite ones become None), through
    dicts, lists and tuples; numpy integers become ints; anything else is kept.

    >>> rounded({"a": [0.1234, float("nan")], "b": np.int64(3)}, 2)
    {'a': [0.12, None], 'b': 3}
    """
    if isinstance(value, dict):
        return {str(k): rounded(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v, digits) for v in value]
    if isinstance(value, (float, np.floating)):
        return round(float(value), digits) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value
