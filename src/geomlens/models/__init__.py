"""Loading models and seeing every family through one ``ModelView``."""

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
