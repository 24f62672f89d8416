"""Anisotropy of the bundled SmolLM2 from the capture equals a direct all-pairs computation
on Hugging Face's hidden states (3 windows x 24 tokens: the sample holds every token)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from geomlens.analyses.anisotropy.compute import AnisotropyTap, layer_results
from geomlens.capturing import CaptureConfig, capture_windows
from geomlens.capturing.taps import Taps
from geomlens.corpus import make_windows
from geomlens.pipeline.taps import tap_factory
from geomlens.runs.runfolder import RunFolder

C, T = 3, 24


@pytest.fixture(scope="module")
def captured(smollm2, bbc, tmp_path_factory):
    windows = make_windows(bbc, smollm2.tokenizer, C, T, seed=0)
    taps = Taps.made(smollm2, tap_factory({"anisotropy": (AnisotropyTap, 0)}))
    config = CaptureConfig(contexts=C, length=T, batch_size=2)
    folder = RunFolder(tmp_path_factory.mktemp("anisotropy"))
    capture_windows(
        smollm2, windows, config, folder, checkpoint_every_s=math.inf, progress=False, taps=taps
    )
    with torch.inference_mode():
        ids = torch.tensor(windows.input_ids)
        hf = smollm2.base(input_ids=ids, output_hidden_states=True).hidden_states
    return taps["anisotropy"], [h.double().numpy() for h in hf]


def all_pairs(x: np.ndarray) -> np.ndarray:
    """CC_i [d] over ordered pairs of tokens of ``x`` [C, T, d] from different windows."""
    c, t, d = x.shape
    unit = (x / np.linalg.norm(x, axis=-1, keepdims=True)).reshape(c * t, d)
    other = np.repeat(np.arange(c), t)[:, None] != np.repeat(np.arange(c), t)[None, :]
    return np.einsum("ad,bd,ab->d", unit, unit, other) / other.sum()


def test_anisotropy_equals_the_direct_all_pairs_computation(smollm2, captured):
    tap, hf = captured
    rows = layer_results(tap)
    assert [r.layer for r in rows] == list(range(smollm2.n_layers + 1))
    for r in rows[:-1]:  # HF's last entry has the final norm applied
        x = hf[r.layer]
        cc = all_pairs(x)
        assert abs(r.cosine - cc.sum()) < 1e-5
        assert r.top_dims[0][0] == int(np.argmax(cc))
        flat = x.reshape(C * T, -1)
        std = flat.std(0)
        z = (flat - flat.mean(0)) / np.where(std > 0, std, 1.0)
        assert abs(r.standardised - all_pairs(z.reshape(x.shape)).sum()) < 1e-4
        assert abs(r.sample_cosine - cc.sum()) < 1e-5
