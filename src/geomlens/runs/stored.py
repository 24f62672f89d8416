"""What a finished report keeps of its decomposition statistics, and how it is read back.

During a run, ``stats/decomposition.safetensors`` holds every float64 sum the capture
made, including the per-group positional sums and second-moment sketches the intervals
and the noise-corrected estimates resample (about 430 MB for SmolLM2 over 128 x 128
windows). Once every analysis has read them and written its numbers to metrics.json,
``compact_stats`` rewrites the file with what a later reader needs:

- kept, float32: the positional sums, and the context sums and second moments *without*
  position 0 (``ctx_rest = ctx_sum - first``, ``second_rest = second - sum_c first first^T``,
  both formed in float64 before rounding; the symmetric second moments as their upper
  triangle), and position 0 itself (``first``). Keeping
  position 0 apart means its large vectors never cancel against rounded sums: the view
  without position 0 reads the rest as stored, the view with it adds position 0 back.
- kept, float64: the sums of squares, the context counts and the layers.
- dropped: the interval groups (``group_pos_sum``, ``group_sketch``, ``ctx_sumsq``). The
  intervals, split-half noise estimates and corrected numbers they gave are in
  metrics.json; analyses rerun from a compacted folder give the plain numbers without them.

``widened`` turns a compacted file back into the float64 state the accumulator loads
(``DecompositionAccumulator.from_state_dict``), so every reader works on either form.
Rounding to float32 changes each sum by about 6e-8 of itself: far below the sampling
noise of any number the analyses report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from geomlens.capturing.store import save_atomic
from geomlens.io.files import write_text_atomic
from geomlens.stats.decomposition import GROUP_STATE

COMPACT = "ctx_rest"
"""The entry only a compacted file has (how a reader tells the two forms apart)."""

FLOAT32 = ("pos_sum", "first")
"""Entries stored as float32 as they are."""

DROPPED = GROUP_STATE
"""Entries left out of a compacted file (the interval groups)."""


def compacted(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The entries a compacted file keeps (see the module's docstring)."""
    f64 = torch.float64
    first = state["first"].to(f64)
    out = {k: v for k, v in state.items() if k not in DROPPED and k not in ("ctx_sum", "second")}
    for name in FLOAT32:
        out[name] = state[name].to(torch.float32)
    out["ctx_rest"] = (state["ctx_sum"].to(f64) - first).to(torch.float32)
    if "second" in state:
        own = torch.einsum("lcd,lce->lde", first, first)
        rest = (state["second"].to(f64) - own).to(torch.float32)
        rows, cols = upper(rest.shape[-1])
        out["second_rest"] = rest[:, rows, cols]  # [L, d (d + 1) / 2]: it is symmetric
    return {k: v.contiguous() for k, v in out.items()}


def upper(d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column indices of the upper triangle (diagonal included) of a d x d matrix."""
    index = torch.triu_indices(d, d)
    return index[0], index[1]


def symmetric(packed: torch.Tensor, d: int) -> torch.Tensor:
    """[L, d, d] from the upper triangles ``packed`` [L, d (d + 1) / 2]."""
    rows, cols = upper(d)
    full = torch.zeros(packed.shape[0], d, d, dtype=packed.dtype)
    full[:, rows, cols] = packed
    full[:, cols, rows] = packed
    return full


def widened(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The float64 state of a compacted file (any other state is returned as it is)."""
    if COMPACT not in state:
        return state
    f64 = torch.float64
    out = {k: v for k, v in state.items() if k not in ("ctx_rest", "second_rest")}
    for name in FLOAT32:
        out[name] = state[name].to(f64)
    first = out["first"]
    out["ctx_sum"] = state["ctx_rest"].to(f64) + first
    if "second_rest" in state:
        rest = symmetric(state["second_rest"].to(f64), first.shape[-1])
        out["second"] = rest + torch.einsum("lcd,lce->lde", first, first)
    return out


def compact_stats(folder: str | Path) -> dict[str, Any]:
    """Rewrite a finished run's ``stats/decomposition.safetensors`` compacted (once; a
    compacted file is left alone) and return what was stored, for the run's record."""
    path = Path(folder) / "stats" / "decomposition.safetensors"
    record: dict[str, Any] = {
        "file": "stats/decomposition.safetensors",
        "float32": [
            *FLOAT32,
            "ctx_sum less position 0",
            "second moments less position 0 (upper triangle)",
        ],
        "dropped": list(DROPPED),
        "why": "the interval groups were read by the analyses (their intervals and noise "
        "estimates are in metrics.json); analyses rerun from this folder give the plain "
        "numbers without them",
    }
    if not path.exists():
        return {}
    state = load_file(str(path))
    if COMPACT not in state:
        save_atomic(compacted(state), path)
    record["bytes"] = path.stat().st_size
    return record


RECORD = "stats/stored.json"
"""Where a compacted run says what its statistics keep and what was dropped."""


def store_compact(folder: str | Path) -> dict[str, Any]:
    """``compact_stats``, with its record written to ``stats/stored.json`` (the report page
    says what was dropped from it)."""
    record = compact_stats(folder)
    if record:
        text = json.dumps(record, indent=1, sort_keys=True) + "\n"
        write_text_atomic(Path(folder) / RECORD, text)
    return record
