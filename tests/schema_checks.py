"""Checks that a report's metrics.json blocks read through their schemas and write back
as the same dict (``tests/analyses/test_metrics_schemas.py``, and every family's report in
``tests/models/test_family_commands.py``)."""

from __future__ import annotations

import json
from typing import Any

from geomlens.analyses.attention.schema import AttentionMetrics, InductionMetrics
from geomlens.analyses.capture.schema import CaptureMetrics
from geomlens.analyses.common.block import Block
from geomlens.analyses.concepts.schema import ConceptsMetrics, SchemeResult
from geomlens.analyses.sphere.schema import SphereMetrics
from geomlens.analyses.walk.schema import WalkMetrics

SCHEMAS: dict[str, type[Block]] = {
    "attention": AttentionMetrics,
    "induction": InductionMetrics,
    "sphere": SphereMetrics,
    "walk": WalkMetrics,
    "concepts": ConceptsMetrics,
    "capture": CaptureMetrics,
}


def undeclared(block: Any, where: str = "") -> list[str]:
    """Keys of the file that no schema class declares (a scheme's own numbers aside)."""
    found: list[str] = []
    if isinstance(block, Block):
        if not isinstance(block, SchemeResult):
            found += [f"{where}.{k}" for k, v in block.extra.items() if v is not None]
        for name in block.__dataclass_fields__:
            if name != "extra":
                found += undeclared(getattr(block, name), f"{where}.{name}")
    elif isinstance(block, list):
        for item in block:
            found += undeclared(item, where + "[]")
    elif isinstance(block, dict):
        for key, item in block.items():
            found += undeclared(item, f"{where}[{key}]")
    return found


def check_round_trip(metrics: dict[str, Any]) -> list[str]:
    held = [key for key in SCHEMAS if key in metrics]
    for key in held:
        block = SCHEMAS[key].from_dict(metrics[key])
        assert block.to_dict() == metrics[key], key
        assert json.dumps(block.to_dict(), sort_keys=True) == json.dumps(
            metrics[key], sort_keys=True
        )
        assert undeclared(block, key) == [], key
    return held
