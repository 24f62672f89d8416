"""Two runs' metrics.json compared leaf by leaf: every number within a relative 1e-12 (NaN
equal to NaN), every other value equal. Shows that a change that should move no number
moved none, e.g. the default report before and after a refactor.

    python benchmarks/metrics_diff.py BEFORE/metrics.json AFTER/metrics.json
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

RTOL = 1e-12


def differences(a: Any, b: Any, path: str = "") -> tuple[int, list[str]]:
    """(leaves compared, the paths that differ with both values)."""
    if isinstance(a, dict) and isinstance(b, dict):
        count, found = 0, [f"{path}.{k}: only in one" for k in sorted(set(a) ^ set(b))]
        for key in sorted(set(a) & set(b)):
            n, d = differences(a[key], b[key], f"{path}.{key}")
            count, found = count + n, found + d
        return count, found
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return 1, [f"{path}: {len(a)} items against {len(b)}"]
        count, found = 0, []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            n, d = differences(x, y, f"{path}[{i}]")
            count, found = count + n, found + d
        return count, found
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    same = (
        a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= RTOL * max(abs(a), abs(b))
        if numbers
        else a == b
    )
    return 1, [] if same else [f"{path}: {str(a)[:60]} against {str(b)[:60]}"]


def main() -> None:
    with open(sys.argv[1]) as f, open(sys.argv[2]) as g:
        count, found = differences(json.load(f), json.load(g))
    print(f"{count:,} leaves compared, {len(found)} differ")
    for line in found:
        print(" ", line)


if __name__ == "__main__":
    main()
