"""Hidden-state taps (``capturing.taps.HiddenTap``): fed every window's hidden states on
every captured layer by the capture loop itself (no pass of their own), equal to a direct
computation on Hugging Face's hidden states, resumed from the capture's checkpoint, and
added up across Ray shards as the driver does."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import geomlens.capturing.capture as capture_module
from geomlens.analyses.anisotropy.compute import AnisotropyTap
from geomlens.analyses.massive.compute import MassiveTap
from geomlens.analyses.sphere.compute import NormTap
from geomlens.capturing import CaptureConfig, capture_windows
from geomlens.capturing.taps import Taps, fill_taps
from geomlens.corpus import make_windows
from geomlens.engines.shards import capture_shard, plan_shards
from geomlens.errors import GeomlensError
from geomlens.pipeline.taps import tap_factory
from geomlens.runs.runfolder import RunFolder

C, T, BATCH = 6, 16, 4
FACTORY = tap_factory(
    {"massive": (MassiveTap, 0), "anisotropy": (AnisotropyTap, 0), "norms": (NormTap, 3)}
)


@pytest.fixture(scope="module")
def windows(minilm, bbc):
    return make_windows(bbc, minilm.tokenizer, C, T, seed=0)


@pytest.fixture(scope="module")
def config():
    return CaptureConfig(model="minilm-l6", contexts=C, length=T, batch_size=BATCH)


@pytest.fixture(scope="module")
def tapped(minilm, windows, config, tmp_path_factory):
    taps = Taps.made(minilm, FACTORY)
    folder = RunFolder(tmp_path_factory.mktemp("hidden"))
    acc, _ = capture_windows(
        minilm, windows, config, folder, checkpoint_every_s=math.inf, progress=False, taps=taps
    )
    return acc, taps


def assert_states_close(a: dict, b: dict, rtol: float = 1e-9) -> None:
    assert a.keys() == b.keys()
    for key in a:
        x, y = a[key].double().numpy(), b[key].double().numpy()
        scale = max(float(np.abs(y[np.isfinite(y)]).max(initial=0.0)), 1e-300)
        np.testing.assert_allclose(x, y, rtol=0, atol=rtol * scale, err_msg=key)


def test_hidden_taps_read_every_window_and_layer_as_hf_gives_them(minilm, windows, tapped):
    _, taps = tapped
    ids = torch.tensor(windows.input_ids)
    with torch.inference_mode():
        hf = minilm.base(input_ids=ids, output_hidden_states=True).hidden_states
    aniso, massive = taps["anisotropy"], taps["massive"]
    assert isinstance(aniso, AnisotropyTap) and isinstance(massive, MassiveTap)
    for layer, h in enumerate(hf):  # MiniLM: no final norm after the last block
        h = h.double()
        assert float(aniso.tokens[:, layer].sum()) == C * T
        np.testing.assert_allclose(aniso.total[layer], h.sum((0, 1)), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(massive.dim_max[layer], h.abs().amax((0, 1)), rtol=1e-6)
        assert float(massive.win_n[:, layer].sum()) == C


def test_hidden_taps_filled_alone_equal_the_captures(minilm, windows, tapped):
    _, taps = tapped
    alone = fill_taps(minilm, torch.tensor(windows.input_ids), Taps.made(minilm, FACTORY))
    assert_states_close(alone.state_dict(), taps.state_dict(), rtol=1e-5)


def test_hidden_taps_resume_from_the_captures_checkpoint(minilm, windows, config, tapped, tmp_path):
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
    assert folder.load_checkpoint() is not None
    taps = Taps.made(minilm, FACTORY)
    capture_windows(
        minilm, windows, config, folder, checkpoint_every_s=math.inf, progress=False, taps=taps
    )
    assert_states_close(taps.state_dict(), tapped[1].state_dict(), rtol=1e-12)


def test_hidden_taps_of_shards_add_up_to_the_one_pass_taps(minilm, windows, tapped):
    """What each Ray worker returns (``capture_shard``), added up as the driver does."""
    base = Taps.made(minilm, FACTORY)
    ids = torch.tensor(windows.input_ids)
    states = []
    for shard in plan_shards(C, BATCH, 2):
        rows = slice(shard.rows.start, shard.rows.stop)
        states.append(
            capture_shard(
                minilm,
                shard,
                ids[rows],
                torch.zeros(rows.stop - rows.start, dtype=torch.int64),
                layers=list(range(7)),
                n_contexts=C,
                batch_size=BATCH,
                second_moment=False,
                taps=base.empty_like(),
            )
        )
    assert_states_close(base.plus(states).state_dict(), tapped[1].state_dict(), rtol=1e-5)
