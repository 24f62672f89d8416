"""What the four analyses beyond the three papers (massive activations, attention sinks,
anisotropy, intrinsic dimension) add to ``geomlens report``, measured in one run: the same
report without them (their names taken out of ``analyses.FOLDERS`` before the registry is
imported) and with them, alternated per repeat so drift in machine load hits both alike.
Each report runs in its own process and folder. Printed: the median wall times, their
ratio, and the stages each side ran (its ``stages.json``).

    python benchmarks/beyond_report_cost.py --contexts 32 --length 64 --limit 8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BEYOND = ("massive", "sinks", "anisotropy", "intrinsic_dimension")

RUN = """
import sys
import geomlens.analyses as analyses
leave_out = set(sys.argv[1].split(",")) - {""}
analyses.FOLDERS = tuple(f for f in analyses.FOLDERS if f not in leave_out)
from geomlens.cli import main
sys.argv = ["geomlens", "report", *sys.argv[2:]]
main()
"""


def report(leave_out: tuple[str, ...], args: argparse.Namespace, out: Path) -> float:
    """Seconds one report takes in a fresh process, ``leave_out`` not registered."""
    command = [
        sys.executable, "-c", RUN, ",".join(leave_out),
        "--model", args.model, "--contexts", str(args.contexts), "--length", str(args.length),
        "--limit", str(args.limit), "--figures", args.figures, "--quiet", "--out", str(out),
    ]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=os.environ.copy())
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--contexts", type=int, default=32)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--figures", default="all", choices=("all", "interactive", "none"))
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"without": [], "with": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            for side, leave_out in (("without", BEYOND), ("with", ())):
                out = Path(tmp) / f"{side}-{i}"
                times[side].append(report(leave_out, args, out))
                stages = json.loads((out / "stages.json").read_text())
                print(f"{side}: {times[side][-1]:.1f} s, stages {stages}")
    without, with_ = statistics.median(times["without"]), statistics.median(times["with"])
    print(
        f"{args.model}, {args.contexts} x {args.length} tokens, --limit {args.limit}, "
        f"figures {args.figures}, {args.repeats} repeat(s), load {os.getloadavg()[0]:.1f}"
    )
    print(f"report without the four: {without:.1f} s (median)")
    print(f"report with the four:    {with_:.1f} s (median)")
    print(f"ratio: {with_ / without:.3f} (target under 1.15)")


if __name__ == "__main__":
    main()
