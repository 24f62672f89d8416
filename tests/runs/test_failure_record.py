"""An internal error inside a run is recorded in its unfinished manifest and named by the
next command on the folder; the user's errors are not recorded; finishing clears it. Also:
the variance shares lie in [0, 1] whatever rounding does, with a count of those clamped."""

from __future__ import annotations

import json

import numpy as np
import pytest

from geomlens.errors import GeomlensError
from geomlens.runs import lifecycle
from geomlens.stats.decomposition import DecompositionStats

CONFIG = {"model": "m", "contexts": 2}


def manifest(out):
    return json.loads((out / "manifest.json").read_text())


@pytest.mark.parametrize("error", [ValueError("max() arg"), KeyError("x"), ZeroDivisionError()])
def test_an_internal_error_is_recorded_then_named_then_cleared(tmp_path, capsys, error):
    out = tmp_path / "run"
    with pytest.raises(type(error)), lifecycle.run_folder(out, "capture", CONFIG) as run:
        run.begin()
        raise error
    failed = manifest(out)["failed"]
    assert failed["error"].startswith(type(error).__name__) and failed["version"]
    capsys.readouterr()
    with lifecycle.run_folder(out, "capture", CONFIG) as run:
        assert "stopped on an internal error" in capsys.readouterr().err
        run.begin()
        run.complete()
    assert "failed" not in manifest(out) and manifest(out)["status"] == "complete"


@pytest.mark.parametrize("error", [GeomlensError("bad input."), OSError(28, "No space")])
def test_the_users_errors_are_not_recorded(tmp_path, error):
    out = tmp_path / "run"
    with pytest.raises(type(error)), lifecycle.run_folder(out, "capture", CONFIG) as run:
        run.begin()
        raise error
    assert "failed" not in manifest(out)


def stats(pos: np.ndarray, ctx: np.ndarray, total: float) -> DecompositionStats:
    c, t = ctx.shape[0], pos.shape[0]
    return DecompositionStats(
        layer=0,
        mean=np.zeros(pos.shape[1]),
        pos=pos,
        ctx=ctx,
        total_ss=total,
        second_moment=None,
        n_contexts=c,
        positions=np.arange(t),
        skip_first=False,
    )


@pytest.mark.parametrize("excess", [4e-16, 1e-12, 0.0, -3e-16])
def test_shares_lie_in_0_1_and_clamps_are_counted(excess):
    rng = np.random.default_rng(0)
    pos, ctx = rng.normal(size=(5, 3)), np.zeros((1, 3))  # one context: no context part
    exact = 1 * float((pos**2).sum())
    s = stats(pos, ctx, exact / (1 + excess))  # the positional share is 1 + excess
    shares = s.shares
    assert all(0.0 <= x <= 1.0 for x in shares)
    assert s.shares_clamped == sum(1 for x in s.raw_shares if not 0.0 <= x <= 1.0)
    assert s.shares_clamped == (1 if excess > 0 else 0) + (1 if s.raw_shares[2] < 0 else 0)
