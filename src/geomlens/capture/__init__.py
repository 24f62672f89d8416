"""Batched forward passes, hooks that read hidden states, and the activation store."""

from geomlens.capture.capture import CaptureConfig, capture_windows
from geomlens.capture.hooks import hidden_states
from geomlens.capture.store import ActivationStore

__all__ = ["ActivationStore", "CaptureConfig", "capture_windows", "hidden_states"]
