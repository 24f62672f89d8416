"""Importing Ray, or one sentence saying how to install it.

Kept apart from the Ray engine (``engines.ray``) so that checking ``--engine ray``'s
options (``EngineConfig.validate``) can ask for Ray without importing the engine.
"""

from __future__ import annotations

from typing import Any

from geomlens.errors import GeomlensError

INSTALL_HINT = "--engine ray needs Ray: pip install 'geomlens[ray]'"


def require_ray() -> Any:
    """Import Ray (with Ray Data), or say in one sentence how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise GeomlensError(INSTALL_HINT + ".") from None
    return ray
