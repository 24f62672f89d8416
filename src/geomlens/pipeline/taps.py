"""The taps a capture fills for the analyses (``capturing.taps``): built from what each
analysis declares, and read back from a finished capture.

Each analysis declares the taps it needs in its entry (the sphere's norm statistics,
"norms"; the walk's position kernels and refactoring check, "attention"); they are filled
in the capture's own forward passes over the first windows, and the analysis steps read
them back from the run folder's ``stats/taps.safetensors`` (``filled_tap``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TypeVar

from geomlens.capturing.taps import PREFIX, Tap, Taps, TapsFactory, feeds_on_hidden
from geomlens.errors import GeomlensError
from geomlens.io.files import damaged
from geomlens.models.view import ModelView
from geomlens.runs.runfolder import RERUN, RunFolder, load_state

TapBuild = Callable[[ModelView, int], Tap]
"""Builds one tap for a model over the first ``windows`` windows (picklable: a class or a
module-level function, so Ray workers can build their own)."""


def taps_of(view: ModelView, builds: Mapping[str, tuple[TapBuild, int]]) -> Taps:
    """The taps a capture fills: name -> (its builder, the first windows it reads); a tap
    over no window is left out (unless it is fed every batch's hidden states: a
    ``HiddenTap``), and so is a tap that reads attention (its class says
    ``attention = True``) on a model whose blocks' mixing the view does not model (the
    hidden-state tier: its analysis says per layer why it does not apply)."""
    skip_attention = bool(view.not_modelled())
    return Taps(
        {
            name: build(view, windows)
            for name, (build, windows) in builds.items()
            if (windows or feeds_on_hidden(build))
            and not (skip_attention and getattr(build, "attention", False))
        }
    )


def tap_factory(builds: Mapping[str, tuple[TapBuild, int]]) -> TapsFactory:
    """``taps_of`` with these builders and windows, as a picklable factory."""
    return functools.partial(taps_of, builds=dict(builds))


def saved_taps(folder: RunFolder, view: ModelView, factory: TapsFactory) -> Taps | None:
    """The taps the capture of ``folder`` filled (``stats/taps.safetensors``); None when
    that file is absent."""
    path = folder.path / "stats" / "taps.safetensors"
    if not path.exists():
        return None
    taps = Taps.made(view, factory)
    try:
        taps.load_state_dict(load_state(path))
    except GeomlensError as exc:
        raise damaged(path, f"it does not fit this run: {exc}", RERUN) from None
    return taps


T = TypeVar("T", bound=Tap)


def filled_tap(folder: RunFolder, name: str, tap: T) -> T:
    """``tap`` (empty, built for this run's model) loaded with what the capture of
    ``folder`` filled under ``name`` ("norms", "attention"); analyses read theirs here. A
    tap with nothing to hold for this model (the norm statistics of a model with no norm
    geomlens reads) comes back as built: its analysis says what does not apply.

    Raises:
        GeomlensError: when the capture saved no such tap (one sentence: rerun).
    """
    if not tap.state_spec():
        return tap
    path = folder.path / "stats" / "taps.safetensors"
    head = f"{PREFIX}{name}."
    state = load_state(path) if path.exists() else {}
    mine = {k[len(head) :]: v for k, v in state.items() if k.startswith(head)}
    if not mine:
        raise GeomlensError(
            f"{folder.path} holds no {name} statistics from its capture "
            "(stats/taps.safetensors); rerun the same command to compute them."
        )
    try:
        tap.load_state_dict(mine)
    except GeomlensError as exc:
        raise damaged(path, f"it does not fit this run: {exc}", RERUN) from None
    return tap
