"""Peak memory of ``geomlens decompose`` against ``geomlens capture`` as the window grows.

    python benchmarks/decompose_memory.py [--model minilm-l6] [--lengths 64,128,256,512]
        [--contexts 16] [--batch-size 8] [--repeats 1] [--threads 2]

For each window length T, ``geomlens capture`` and ``geomlens decompose`` run with the same
configuration (model, corpus, C windows of T tokens, batch size, seed), each in a fresh
subprocess, interleaved (capture, decompose, capture, decompose, ...). The peak resident
set of each child is read from ``os.wait4`` (``ru_maxrss``: the child and the processes it
waited for, e.g. the forked figure renderer). Prints per T the capture peak, the decompose
peak and their ratio (target <= 1.25 at every T up to the model's maximum), the largest of
the repeats of each.

Run it against other code (e.g. a worktree of the last commit) with
``PYTHONPATH=/path/to/src python benchmarks/decompose_memory.py``: the children inherit
the environment.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.25


def peak_of(command: list[str]) -> tuple[float, float]:
    """Run ``command`` in a fresh process; (peak RSS in MiB, wall seconds). Raises on failure."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            log.seek(0)
            tail = log.read().decode(errors="replace")[-3000:]
            raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}):\n{tail}")
    return usage.ru_maxrss / 1024, time.perf_counter() - t0  # Linux: KiB


def geomlens_command(name: str, args: argparse.Namespace, length: int, out: Path) -> list[str]:
    """The CLI call of ``geomlens <name>`` for one window length (same config for both)."""
    return [
        sys.executable,
        "-c",
        "import sys; from geomlens.cli import main; sys.exit(main())",
        name,
        "--model",
        args.model,
        "--contexts",
        str(args.contexts),
        "--length",
        str(length),
        "--batch-size",
        str(args.batch_size),
        "--threads",
        str(args.threads),
        "--seed",
        "0",
        "--quiet",
        "--out",
        str(out),
    ]


def measure(args: argparse.Namespace, length: int) -> dict[str, float]:
    """Largest peak of each command over the interleaved repeats, and their ratio."""
    peaks: dict[str, list[float]] = {"capture": [], "decompose": []}
    walls: dict[str, list[float]] = {"capture": [], "decompose": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for name in ("capture", "decompose"):
                out = Path(tmp) / f"{name}-{length}-{r}"
                rss, wall = peak_of(geomlens_command(name, args, length, out))
                peaks[name].append(rss)
                walls[name].append(wall)
    capture, decompose = max(peaks["capture"]), max(peaks["decompose"])
    return {
        "length": length,
        "capture_mib": capture,
        "decompose_mib": decompose,
        "ratio": decompose / capture,
        "capture_s": min(walls["capture"]),
        "decompose_s": min(walls["decompose"]),
    }


def main() -> None:
    """Parse the arguments, measure every length and print one line per T (and JSON)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="minilm-l6")
    p.add_argument("--lengths", default="64,128,256,512", help="comma-separated T")
    p.add_argument("--contexts", type=int, default=16)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    print(f"{args.model}, C={args.contexts}, batch {args.batch_size}, {args.repeats} repeat(s)")
    print(f"{'T':>6} {'capture MiB':>12} {'decompose MiB':>14} {'ratio':>7} {'target':>7}")
    rows = []
    for length in lengths:
        row = measure(args, length)
        rows.append(row)
        ok = "met" if row["ratio"] <= TARGET else "NOT met"
        print(
            f"{length:>6} {row['capture_mib']:>12,.0f} {row['decompose_mib']:>14,.0f} "
            f"{row['ratio']:>7.3f} {ok:>7}   ({row['capture_s']:.0f} s, "
            f"{row['decompose_s']:.0f} s)",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
