"""A finished report's decomposition statistics, compacted (float32 sums kept apart from
position 0, interval groups dropped), read back equal to the float64 ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from geomlens.pipeline.run import check_stats_header
from geomlens.runs.runfolder import Run, RunFolder
from geomlens.runs.stored import DROPPED, RECORD, compact_stats, store_compact
from geomlens.stats import DecompositionAccumulator
from geomlens.stats.base import CapturedBatch
from geomlens.stats.decomposition import GROUP_STATE, state_spec

LAYERS, C, T, D = [0, 1], 16, 12, 8


@pytest.fixture(scope="module")
def accumulator() -> DecompositionAccumulator:
    """Random states with a massive position 0 (1000x the others, as in many decoders):
    the case where rounded sums would cancel badly against position 0."""
    gen = torch.Generator().manual_seed(0)
    acc = DecompositionAccumulator(LAYERS, C, T, D, second_moment=True, groups=8)
    for start in range(0, C, 4):
        index = torch.arange(start, start + 4)
        hidden = {}
        for layer in LAYERS:
            h = torch.randn(4, T, D, generator=gen) + torch.linspace(0, 1, T)[None, :, None]
            h[:, 0] *= 1000.0
            hidden[layer] = h
        acc.update(CapturedBatch(hidden, index))
    return acc


def test_compacted_statistics_read_back_as_the_float64_ones(
    accumulator: DecompositionAccumulator, tmp_path: Path
) -> None:
    folder = RunFolder(tmp_path)
    folder.save_stats("decomposition", accumulator.state_dict())
    before = (tmp_path / "stats" / "decomposition.safetensors").stat().st_size
    record = store_compact(tmp_path)
    after = (tmp_path / "stats" / "decomposition.safetensors").stat().st_size
    assert record["bytes"] == after < before / 2
    assert (tmp_path / RECORD).exists() and record["dropped"] == list(DROPPED)
    assert compact_stats(tmp_path)["bytes"] == after  # a compacted file is left alone
    again = Run(tmp_path).decomposition  # float64 again, without interval groups
    assert again.group_pos_sum is None and again.group_sketch is None
    for layer in LAYERS:
        for skip_first in (False, True):
            a = accumulator.finalize(layer, skip_first=skip_first)
            b = again.finalize(layer, skip_first=skip_first)
            np.testing.assert_allclose(b.shares, a.shares, rtol=1e-5, atol=1e-9)
            np.testing.assert_allclose(b.pos, a.pos, rtol=1e-5, atol=1e-6 * np.abs(a.pos).max())
            np.testing.assert_allclose(b.ctx, a.ctx, rtol=1e-5, atol=1e-6 * np.abs(a.ctx).max())
            top_a = np.linalg.eigvalsh(a.second_moment)[-1]
            top_b = np.linalg.eigvalsh(b.second_moment)[-1]
            assert abs(top_b - top_a) <= 1e-6 * top_a
    # the capture's own loader takes it too (the interval groups are optional there)
    spec = state_spec(LAYERS, C, T, D, True, 8)
    state = folder.load_stats("decomposition", spec, LAYERS, optional=GROUP_STATE)
    assert state is not None and state["second"].dtype == torch.float64
    check_stats_header(tmp_path / "stats" / "decomposition.safetensors")  # a rerun reuses it
