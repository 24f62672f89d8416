"""Massive activations of the bundled SmolLM2 from the capture equal a direct computation on
Hugging Face's hidden states (3 windows x 24 tokens)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from geomlens.analyses.massive import histogram
from geomlens.analyses.massive.compute import MassiveTap, layer_results
from geomlens.capturing import CaptureConfig, capture_windows
from geomlens.capturing.taps import Taps
from geomlens.corpus import make_windows
from geomlens.pipeline.taps import tap_factory
from geomlens.runs.runfolder import RunFolder

C, T = 3, 24


@pytest.fixture(scope="module")
def captured(smollm2, bbc, tmp_path_factory):
    windows = make_windows(bbc, smollm2.tokenizer, C, T, seed=0)
    taps = Taps.made(smollm2, tap_factory({"massive": (MassiveTap, 0)}))
    config = CaptureConfig(contexts=C, length=T, batch_size=2)
    folder = RunFolder(tmp_path_factory.mktemp("massive"))
    capture_windows(
        smollm2, windows, config, folder, checkpoint_every_s=math.inf, progress=False, taps=taps
    )
    with torch.inference_mode():
        ids = torch.tensor(windows.input_ids)
        hf = smollm2.base(input_ids=ids, output_hidden_states=True).hidden_states
    return taps["massive"], [h.double().numpy() for h in hf]


def test_massive_statistics_equal_the_direct_computation(smollm2, captured):
    tap, hf = captured
    rows = layer_results(tap)
    assert [r.layer for r in rows] == list(range(smollm2.n_layers + 1))
    for r in rows[:-1]:  # HF's last entry has the final norm applied
        a = np.abs(hf[r.layer])
        assert abs(r.median / np.median(a) - 1) <= histogram.WIDTH
        per_window = np.sort(a.reshape(C, -1), axis=1)[:, ::-1][:, :3].mean(0)
        np.testing.assert_allclose(r.top, per_window, rtol=1e-5)
        w, t, i = np.unravel_index(np.argmax(a), a.shape)
        top = r.largest[0]
        assert (top.window, top.position, top.dim) == (w, t, i)
        assert np.isclose(top.value, a.max(), rtol=1e-5)
        rest = a[:, 1:]
        w, t, i = np.unravel_index(np.argmax(rest), rest.shape)
        later = r.after_first[0]
        assert (later.window, later.position, later.dim) == (w, t + 1, i)
