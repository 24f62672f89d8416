"""Batched forward passes, hooks that read hidden states, and the activation store."""

from geomlens.capturing.capture import CaptureConfig, capture_windows
from geomlens.capturing.hooks import hidden_states
from geomlens.capturing.store import ActivationStore

__all__ = ["ActivationStore", "CaptureConfig", "capture_windows", "hidden_states"]
