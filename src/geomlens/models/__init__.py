"""Loading models and seeing every family through one ``ModelView``.

The names are imported on first use (``LAZY``): ``geomlens.models.bundled`` (what
``geomlens models`` lists) loads no torch or transformers code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from geomlens.models.bundled import BUNDLED, BundledModel
    from geomlens.models.loading import load_model
    from geomlens.models.view import (
        BlockView,
        HeadWeights,
        MlpView,
        ModelView,
        NormView,
        PositionScheme,
    )

LAZY = {
    "BUNDLED": "geomlens.models.bundled",
    "BundledModel": "geomlens.models.bundled",
    "load_model": "geomlens.models.loading",
    **{
        name: "geomlens.models.view"
        for name in (
            "BlockView",
            "HeadWeights",
            "MlpView",
            "ModelView",
            "NormView",
            "PositionScheme",
        )
    },
}
"""Public name -> the module it is imported from on first use."""


def __getattr__(name: str) -> Any:
    if name in LAZY:
        value = getattr(importlib.import_module(LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BUNDLED",
    "BlockView",
    "BundledModel",
    "HeadWeights",
    "MlpView",
    "ModelView",
    "NormView",
    "PositionScheme",
    "load_model",
]
