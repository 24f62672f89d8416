"""A computed result that is NaN or infinite stops the command with one sentence.

Scores, logits, probabilities and statistics are checked here before they are saved or
printed, so a model whose head is NaN never reports an accuracy (an argmax over NaN falls
on choice 0) and a run is saved as finished only when its numbers are finite.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from geomlens.errors import NonFiniteResult

ADVICE = (
    "the model gives NaN or infinite values there (its weights may hold NaN or values past "
    "the float range): check the model, or try --dtype float32"
)


def count_non_finite(values: Any) -> tuple[int, int]:
    """(how many entries of ``values`` are NaN or infinite, how many there are).

    >>> count_non_finite([1.0, float("nan"), float("inf")])
    (2, 3)
    >>> count_non_finite(torch.arange(4))  # integers are always finite
    (0, 4)
    """
    if isinstance(values, torch.Tensor):
        if not values.is_floating_point():
            return 0, values.numel()
        return int((~torch.isfinite(values)).sum()), values.numel()
    array = np.asarray(values, dtype=np.float64)
    return int((~np.isfinite(array)).sum()), array.size


def require_finite(values: Any, part: str, advice: str = ADVICE) -> None:
    """Refuse ``values`` (a tensor, an array, a number or a list of numbers) when any entry
    is NaN or infinite: one sentence naming ``part`` ("the scores of item 3", "the logits
    at layer 5") and how many entries are bad.

    Raises:
        NonFiniteResult: one sentence, ``part``, the count and ``advice``.
    """
    if isinstance(values, float):
        bad, total = (0 if math.isfinite(values) else 1), 1
    else:
        bad, total = count_non_finite(values)
    if bad:
        raise NonFiniteResult(
            f"{part} hold {bad} NaN or infinite value{'s' if bad > 1 else ''} "
            f"(of {total}), so no result is given from them; {advice}."
        )


def require_finite_weights(model: torch.nn.Module, name: str) -> None:
    """Refuse a model whose parameters hold NaN or infinite values (a damaged file, a
    diverged training run): every number computed from them would be NaN or infinite, or
    worse, look ordinary (an argmax over NaN scores falls on choice 0). The first such
    tensor is named; reading every parameter once costs a fraction of one forward pass.

    Raises:
        NonFiniteResult: one sentence naming the model and the tensor.
    """
    for key, param in model.named_parameters():
        if param.is_floating_point() and not bool(torch.isfinite(param).all()):
            bad = int((~torch.isfinite(param)).sum())
            raise NonFiniteResult(
                f"the weights of {name} hold {bad} NaN or infinite value"
                f"{'s' if bad > 1 else ''} in {key} (of {param.numel()}), so nothing "
                "computed from them would be a number; use intact weights (copy or convert "
                "the model again)."
            )
