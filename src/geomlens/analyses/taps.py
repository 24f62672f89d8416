"""The taps the analyses fill during a capture (``capture.taps``): which ones a run needs,
and reading back what a finished capture filled.

The sphere's norm statistics ("norms") and the walk's position kernels and refactoring check
("attention") are filled in the capture's own forward passes over the first windows; the
analysis steps read them from the run folder's ``stats/taps.safetensors``.
"""

from __future__ import annotations

import functools
from typing import TypeVar

from geomlens.analyses.refactor import AttentionTap
from geomlens.analyses.sphere import NormTap
from geomlens.capturing.taps import PREFIX, Tap, Taps, TapsFactory
from geomlens.errors import GeomlensError
from geomlens.io.files import damaged
from geomlens.io.runfolder import RERUN, RunFolder, load_state
from geomlens.models.view import ModelView


def taps_of(view: ModelView, *, norms: int = 0, attention: int = 0) -> Taps:
    """The taps a command fills during its capture: every norm's statistics over the first
    ``norms`` windows (``sphere``, as "norms"), the position kernels and the refactoring
    check over the first ``attention`` windows (``walk``, as "attention")."""
    taps: dict[str, Tap] = {}
    if norms:
        taps["norms"] = NormTap(view, norms)
    if attention:
        taps["attention"] = AttentionTap(view, attention)
    return Taps(taps)


def tap_factory(*, norms: int = 0, attention: int = 0) -> TapsFactory:
    """``taps_of`` with these windows, as a picklable factory (Ray workers call it)."""
    return functools.partial(taps_of, norms=norms, attention=attention)


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
    ``folder`` filled under ``name`` ("norms", "attention"); analyses read theirs here.

    Raises:
        GeomlensError: when the capture saved no such tap (one sentence: rerun).
    """
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
