"""A capture whose layers hold no block's input (only the output of the last block) has no
attention to split: the attention step records "not measured: <why>" and the run finishes,
for an encoder and a decoder alike."""

from __future__ import annotations

import pytest

from geomlens.analyses.attention.step import attention_in_basis
from geomlens.analyses.decomposition.command import run_decompose
from geomlens.capturing import CaptureConfig
from geomlens.stats import DecompositionAccumulator


def test_decompose_of_the_last_layer_only_finishes_and_says_why(minilm, tmp_path):
    config = CaptureConfig(model="minilm-l6", contexts=4, length=8, batch_size=4, layers=(6,))
    run = run_decompose(config, tmp_path / "run", view=minilm, progress=False, figures="none")
    assert run.manifest["status"] == "complete"
    why = run.metrics["attention"]["unsupported"]
    assert why.startswith("not measured: ") and "layer 6 only" in why
    again = run_decompose(config, tmp_path / "run", view=minilm, progress=False, figures="none")
    assert again.metrics == run.metrics  # the rerun reuses it


@pytest.mark.parametrize("model", ["gpt2", "minilm"])
def test_no_block_input_is_not_measured(model, request):
    view = request.getfixturevalue(model)
    last = view.n_layers
    acc = DecompositionAccumulator([last], 2, 8, view.d_model, False)
    figures: list = []
    out = attention_in_basis(view, None, acc, True, figures, {})  # type: ignore[arg-type]
    assert out.unsupported is not None and out.blocks is None
    assert out.unsupported.startswith("not measured: ") and figures == []
    assert f"0 to {last - 1}" in out.unsupported
