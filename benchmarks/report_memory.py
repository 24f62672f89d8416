"""Peak resident memory of ``geomlens report`` against its own capture, on one config.

    python benchmarks/report_memory.py [--model gemma3-270m] [--contexts 16] [--length 64]
        [--limit 10] [--batch-size 8] [--keep DIR]

Runs ``geomlens capture`` and then ``geomlens report`` with the same capture options,
each in a fresh subprocess (``python -m geomlens.cli``), and reads each one's peak
resident set from ``resource.getrusage(RUSAGE_CHILDREN)``: ``ru_maxrss`` of the children
is the largest peak of any waited-for child, so it is read after each run and the report's
peak is the new maximum (the report runs second and, holding the capture's work and more,
peaks at least as high). Prints both peaks and the ratio report/capture (target <= 1.5: the
analyses must not need much more memory than the forward passes they read).

The environment passes through (``GEOMLENS_DATA``, ``PYTHONPATH`` to measure another
checkout: ``PYTHONPATH=/tmp/before/src python benchmarks/report_memory.py``).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def capture_options(args: argparse.Namespace) -> list[str]:
    """The options both commands share (same model, corpus windows and batch)."""
    return [
        "--model",
        args.model,
        "--contexts",
        str(args.contexts),
        "--length",
        str(args.length),
        "--batch-size",
        str(args.batch_size),
        "--quiet",
    ]


def run_child(argv: list[str]) -> tuple[float, float]:
    """Run one geomlens command in a fresh Python; (peak RSS of the children in MiB, seconds).

    Raises SystemExit with the child's output when it fails.
    """
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "geomlens.cli", *argv], capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"geomlens {argv[0]} failed (exit {done.returncode})")
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    return peak_kib / 1024, seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="gemma3-270m")
    p.add_argument("--contexts", type=int, default=16)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--limit", type=int, default=10, help="concept task items of the report")
    p.add_argument("--keep", default=None, help="write the run folders here (default: a tmp dir)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.keep or tmp)
        shared = capture_options(args)
        capture_peak, capture_s = run_child(["capture", *shared, "--out", str(root / "capture")])
        report_peak, report_s = run_child(
            ["report", *shared, "--limit", str(args.limit), "--out", str(root / "report")]
        )
    if report_peak <= capture_peak:  # the report's own peak is hidden under the capture's
        print("note: the report did not exceed the capture's peak; its ratio is at most 1")
    ratio = report_peak / capture_peak
    print(f"model {args.model}, C={args.contexts} x T={args.length}, limit {args.limit}")
    print(f"capture  peak RSS {capture_peak:9.0f} MiB  ({capture_s:.0f} s)")
    print(f"report   peak RSS {report_peak:9.0f} MiB  ({report_s:.0f} s)")
    print(f"ratio report/capture {ratio:.2f} (target <= 1.5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
