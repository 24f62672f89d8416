"""The statistics the capture fills besides the decomposition (``capture.taps``): the
sphere's norm statistics and the walk's kernels and refactoring check come out of the
capture's own passes equal to filling them alone, resume from its checkpoint, add up
across Ray shards, and leave the decomposition as an untapped capture computes it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import geomlens.capturing.capture as capture_module
from geomlens.analyses.sphere.compute import NormTap
from geomlens.analyses.walk.refactor import AttentionTap
from geomlens.capturing import CaptureConfig, capture_windows
from geomlens.capturing.taps import Taps, chunks, fill_taps
from geomlens.corpus import make_windows
from geomlens.engines.shards import capture_shard, plan_shards
from geomlens.errors import GeomlensError
from geomlens.pipeline.taps import tap_factory
from geomlens.runs.runfolder import RunFolder

C, T, BATCH = 6, 16, 4
FACTORY = tap_factory(
    {"norms": (NormTap, 3), "attention": (AttentionTap, 5)}
)  # both end inside a batch: chunks are cut there


@pytest.fixture(scope="module")
def windows(minilm, bbc):
    return make_windows(bbc, minilm.tokenizer, C, T, seed=0)


@pytest.fixture(scope="module")
def config():
    return CaptureConfig(model="minilm-l6", contexts=C, length=T, batch_size=BATCH)


@pytest.fixture(scope="module")
def tapped(minilm, windows, config, tmp_path_factory):
    """A capture that fills the taps, and its taps."""
    taps = Taps.made(minilm, FACTORY)
    folder = RunFolder(tmp_path_factory.mktemp("tapped"))
    acc, _ = capture_windows(
        minilm, windows, config, folder, checkpoint_every_s=math.inf, progress=False, taps=taps
    )
    return acc, taps


def assert_states_close(a: dict, b: dict, rtol: float = 1e-9) -> None:
    """Every entry equal up to ``rtol`` of that entry's largest value."""
    assert a.keys() == b.keys()
    for key in a:
        x, y = a[key].double().numpy(), b[key].double().numpy()
        scale = max(float(np.abs(y).max(initial=0.0)), 1e-300)
        np.testing.assert_allclose(x, y, rtol=0, atol=rtol * scale, err_msg=key)


def test_chunks_stop_at_each_taps_last_window():
    taps = Taps.made(None, lambda view: Taps({"a": _Tap(3), "b": _Tap(5)}))  # type: ignore[arg-type]
    first = [(r, sorted(t.windows for t in readers)) for r, readers in chunks(0, 4, taps, 4)]
    assert first == [(range(0, 3), [3, 5]), (range(3, 4), [5])]
    second = [(r, sorted(t.windows for t in readers)) for r, readers in chunks(4, 4, taps, 4)]
    assert second == [(range(0, 1), [5])]  # rows 5.. of the batch read by no tap
    assert list(chunks(8, 4, taps, 4)) == []


class _Tap:
    attention = False

    def __init__(self, windows: int):
        self.windows = windows


def test_taps_filled_by_the_capture_equal_the_taps_filled_alone(minilm, windows, tapped):
    _, taps = tapped
    alone = fill_taps(minilm, torch.tensor(windows.input_ids), Taps.made(minilm, FACTORY))
    assert_states_close(taps.state_dict(), alone.state_dict())
    norms = taps["norms"].finalize()  # type: ignore[attr-defined]
    assert {s.n for s in norms} == {3 * T}  # the first 3 windows, every token
    kernel, refactor = taps["attention"].finalize()  # type: ignore[attr-defined]
    assert kernel.n_windows == 5 and refactor.n_tokens == 5 * T
    assert float(refactor.max_abs_err.max()) < 1e-4 * float(refactor.max_abs_out.max())


def test_a_tapped_capture_decomposes_as_an_untapped_one(minilm, windows, config, tapped, tmp_path):
    """The tapped windows run under eager attention in chunks: the same numbers up to float
    rounding."""
    acc, _ = tapped
    plain, _ = capture_windows(
        minilm, windows, config, RunFolder(tmp_path), checkpoint_every_s=math.inf, progress=False
    )
    assert_states_close(acc.state_dict(), plain.state_dict(), rtol=1e-4)
    for layer in acc.layers:
        a, b = acc.finalize(layer).shares, plain.finalize(layer).shares
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_taps_resume_from_the_captures_checkpoint(minilm, windows, config, tapped, tmp_path):
    real = capture_module.batch_hidden_states
    calls = []

    def fail_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise GeomlensError("stopped on purpose")
        return real(*args, **kwargs)

    folder = RunFolder(tmp_path)
    capture_module.batch_hidden_states = fail_second  # type: ignore[assignment]
    try:
        with pytest.raises(GeomlensError, match="on purpose"):
            capture_windows(
                minilm,
                windows,
                config,
                folder,
                checkpoint_every_s=0.0,
                progress=False,
                taps=Taps.made(minilm, FACTORY),
            )
    finally:
        capture_module.batch_hidden_states = real  # type: ignore[assignment]
    assert folder.load_checkpoint() is not None  # batch 1 (rows 0-3) saved, taps included
    taps = Taps.made(minilm, FACTORY)
    acc, _ = capture_windows(
        minilm, windows, config, folder, checkpoint_every_s=math.inf, progress=False, taps=taps
    )
    whole_acc, whole_taps = tapped
    for key, value in whole_taps.state_dict().items():
        assert torch.equal(taps.state_dict()[key], value), key
    assert torch.equal(acc.pos_sum, whole_acc.pos_sum)


def test_shards_taps_add_up_to_the_one_pass_taps(minilm, windows, tapped):
    """What each Ray worker returns (``capture_shard``), added up as the driver does."""
    _, whole = tapped
    base = Taps.made(minilm, FACTORY)
    states = []
    ids = torch.tensor(windows.input_ids)
    for shard in plan_shards(C, 2, 3):  # three shards of one batch of 2 each
        rows = slice(shard.rows.start, shard.rows.stop)
        states.append(
            capture_shard(
                minilm,
                shard,
                ids[rows],
                torch.zeros(rows.stop - rows.start, dtype=torch.int64),
                layers=list(range(7)),
                n_contexts=C,
                batch_size=2,
                second_moment=False,
                taps=base.empty_like(),
            )
        )
    assert_states_close(base.plus(states).state_dict(), whole.state_dict())
    assert_states_close(base.state_dict(), Taps.made(minilm, FACTORY).state_dict())  # untouched


def test_a_checkpoint_whose_taps_do_not_fit_is_set_aside(minilm, windows, config, tmp_path, capsys):
    folder = RunFolder(tmp_path)
    acc_state = capture_windows(
        minilm, windows, config, folder, checkpoint_every_s=math.inf, progress=False
    )[0].state_dict()
    folder.save_checkpoint({k: v for k, v in acc_state.items()}, 2)  # no tap entries
    acc, _ = capture_windows(
        minilm,
        windows,
        config,
        folder,
        checkpoint_every_s=math.inf,
        progress=False,
        taps=Taps.made(minilm, FACTORY),
    )
    assert "set aside" in capsys.readouterr().err
    assert acc.complete
