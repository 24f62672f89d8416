"""Each analysis's metrics.json block read through its schema and written back is the same
dict, on a report the code wrote (the MiniLM report; every family's report, decoders with
all six blocks, in tests/models/test_family_commands.py); an older block without a field
added later still loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from schema_checks import check_round_trip, undeclared

from geomlens.analyses.attention.schema import AttentionMetrics, QKHead
from geomlens.analyses.capture.schema import CaptureMetrics
from geomlens.analyses.sphere.schema import SphereMetrics
from geomlens.analyses.walk.schema import WalkMetrics
from geomlens.errors import GeomlensError


@pytest.fixture(scope="module")
def report_metrics(minilm_report: Path) -> dict[str, Any]:
    return json.loads((minilm_report / "metrics.json").read_text(encoding="utf-8"))


def test_report_blocks_round_trip(report_metrics):
    held = check_round_trip(report_metrics)
    assert {"attention", "sphere", "walk", "capture"} <= set(held)
    sphere = SphereMetrics.of(report_metrics)
    assert sphere is not None
    assert sphere.identity.max_rel_err == report_metrics["sphere"]["identity"]["max_rel_err"]
    capture = CaptureMetrics.of(report_metrics)
    assert capture is not None and capture.n_contexts == 16 and capture.length == 64
    assert capture.layers[0].share_pos == report_metrics["capture"]["layers"][0]["share_pos"]


def test_older_block_without_added_fields_loads(report_metrics):
    """A run made before the whole-W_QK numbers and the block-bootstrap intervals."""
    attention = json.loads(json.dumps(report_metrics["attention"]))
    whole = [k for k in QKHead.__dataclass_fields__ if k.startswith("whole_")]
    for block in attention["qk_basis"]:
        for head in block["heads"]:
            for key in whole:
                head.pop(key, None)
    old = AttentionMetrics.from_dict(attention)
    assert old.qk_basis and all(h.whole_residual is None for b in old.qk_basis for h in b.heads)
    assert old.to_dict() == attention
    walk = json.loads(json.dumps(report_metrics["walk"]))
    walk["encoding"]["cos"].pop("frac_never_leave_ci", None)
    read = WalkMetrics.from_dict(walk)
    assert read.encoding.cos.frac_never_leave_ci is None and read.to_dict() == walk
    sphere = json.loads(json.dumps(report_metrics["sphere"]))
    sphere.pop("norm_kind")
    assert SphereMetrics.from_dict(sphere).norm_kind is None
    assert SphereMetrics.from_dict(sphere).to_dict() == sphere


def test_explicit_null_and_unknown_keys_are_kept():
    row = {"layer": "3", "mean_cos": None, "new_number": 1.5}
    metrics = {"walk": {"similarity": {"layers": [row]}}}
    from geomlens.analyses.walk.schema import Similarity

    block = Similarity.from_dict(metrics["walk"]["similarity"])
    assert block.layers[0].mean_cos is None and block.to_dict() == {"layers": [row]}


def test_missing_required_key_is_one_sentence(report_metrics):
    capture = dict(report_metrics["capture"])
    del capture["layers"]
    with pytest.raises(GeomlensError, match="without 'layers'"):
        CaptureMetrics.from_dict(capture)


def _arithmetic_block(control: bool) -> dict[str, Any]:
    """An "arithmetic" block shaped as ``geomlens arithmetic`` writes it (one seed)."""
    spread = {"seeds": 1, "criterion_met": 0, "steps": {"n": 1, "median": 6}, "geometry": []}
    geometry = [{"operand_length": 3, "n_positions": 11, "layers": [{"layer": 0}]}]
    seed = {
        "seed": 3,
        "steps": 6,
        "stopped": "steps",
        "train_seconds": 0.5,
        "accuracy_by_length": {"1": 0.25, "2": None},
        "accuracy_in_range": 0.5,
        "accuracy_out_of_range": None,
        "accuracy_shorter": None,
        "accuracy_longer": 0.0,
        "checks": [],
        "checkpoints": [{"step": 3}],
        "loss_curve": [[1, 2.5]],
        "geometry": geometry,
    }
    return {
        "train_range": [2, 3],
        "test_range": [1, 4],
        "reverse_output": True,
        "carry": True,
        "unequal_operands": False,
        "seeds": [3],
        "criterion": {
            "target_accuracy": None,
            "check_every": None,
            "check_samples": None,
            "max_steps": 6,
            "lr_schedule": "cosine",
        },
        "dtype": "float32",
        "threads": None,
        "eval_samples": 20,
        "skip_first": False,
        "runs": [seed],
        "spread": spread,
        "control": (
            {"position_ids": "sorted random subset", "runs": [seed], "spread": spread}
            if control
            else None
        ),
    }


@pytest.mark.parametrize("control", [True, False])
def test_arithmetic_block_round_trips(control: bool) -> None:
    from geomlens.analyses.arithmetic.schema import ArithmeticMetrics

    block = _arithmetic_block(control)
    read = ArithmeticMetrics.of({"arithmetic": block})
    assert read is not None and read.to_dict() == block
    assert undeclared(read, "arithmetic") == []
    assert read.runs[0].accuracy_by_length["2"] is None and read.criterion.max_steps == 6
    assert (read.control is not None) == control
    older = {k: v for k, v in block.items() if k != "unequal_operands"}
    assert ArithmeticMetrics.from_dict(older).unequal_operands is None
    del block["runs"][0]["stopped"]
    with pytest.raises(GeomlensError, match="without 'stopped'"):
        ArithmeticMetrics.from_dict(block)
