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

``--trace`` also says where the report's peak is reached: the report runs with its progress
lines on while a thread samples, every 0.1 s, the resident set of the report process itself
and of each process it forked (the figure renderers: a forked child's resident set counts
the pages it shares with its parent, and ``ru_maxrss`` of the children is the largest of
them). It prints, per step line of the report ("[i/n] stage", "  stage: step"), the largest
resident set of the report process and of its children while that step ran.
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


TRACE_CHILD = r"""
import json, sys, threading, time, psutil
samples, lines = [], []
me = psutil.Process()
def sample():
    while True:
        kids = [c for c in me.children(recursive=True)]
        rss = []
        for c in kids:
            try:
                rss.append(c.memory_info().rss)
            except psutil.Error:
                pass
        samples.append((time.perf_counter(), me.memory_info().rss, max(rss, default=0)))
        time.sleep(0.1)
threading.Thread(target=sample, daemon=True).start()
class Lines:
    def __init__(self, out): self.out, self.part = out, ""
    def write(self, text):
        self.part += text
        *done, self.part = self.part.replace("\r", "\n").split("\n")
        lines.extend((time.perf_counter(), l) for l in done if l.strip())
        return len(text)
    def flush(self): pass
    def isatty(self): return False
sys.stderr = Lines(sys.stderr)
from geomlens.cli import main
code = main(sys.argv[2:])
json.dump({"samples": samples, "lines": lines}, open(sys.argv[1], "w"))
sys.exit(code)
"""
"""Runs one geomlens command while sampling the resident sets (see ``--trace``)."""


def trace(argv: list[str]) -> None:
    """Run the report traced; print each step's largest resident sets (own, children)."""
    import json

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trace.json"
        done = subprocess.run([sys.executable, "-c", TRACE_CHILD, str(out), *argv])
        if done.returncode != 0:
            raise SystemExit(f"traced geomlens {argv[0]} failed (exit {done.returncode})")
        data = json.loads(out.read_text())
    steps = [(t, line) for t, line in data["lines"] if "]" in line[:8] or line.startswith("  ")]
    steps = [(t, line) for t, line in steps if not any(c in line for c in "%|")]
    start = data["samples"][0][0] if data["samples"] else 0.0
    bounds = [(start, "(loading, capture)")] + steps
    mib = 2**20
    print(f"{'step (report process, forked children: largest RSS while it ran)':<72} own   kids")
    peak_own = peak_kids = (0.0, "")
    for k, (t, line) in enumerate(bounds):
        end = bounds[k + 1][0] if k + 1 < len(bounds) else float("inf")
        inside = [(own, kid) for s, own, kid in data["samples"] if t <= s < end]
        if not inside:
            continue
        own, kid = max(o for o, _ in inside) / mib, max(c for _, c in inside) / mib
        peak_own = max(peak_own, (own, line))
        peak_kids = max(peak_kids, (kid, line))
        print(f"{line.strip()[:70]:<72} {own:5.0f} {kid:6.0f}")
    print(f"report process peak {peak_own[0]:.0f} MiB during: {peak_own[1].strip()}")
    print(f"forked children peak {peak_kids[0]:.0f} MiB during: {peak_kids[1].strip()}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="gemma3-270m")
    p.add_argument("--contexts", type=int, default=16)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--limit", type=int, default=10, help="concept task items of the report")
    p.add_argument("--keep", default=None, help="write the run folders here (default: a tmp dir)")
    p.add_argument("--trace", action="store_true", help="also trace where the report peaks")
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
    if args.trace:
        with tempfile.TemporaryDirectory() as tmp:
            shared = [a for a in capture_options(args) if a != "--quiet"]
            trace(["report", *shared, "--limit", str(args.limit), "--out", f"{tmp}/report"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
