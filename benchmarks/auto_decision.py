"""Time to decision of ``geomlens decompose --contexts auto``, on a quiet machine and with a
second busy process on the same cores, as ratios against the same run's quiet baseline.

    python benchmarks/auto_decision.py [--model smollm2-135m] [--length 128]
        [--max-contexts 2048] [--busy 1] [--out DIR]

Each case runs the command in a fresh process into its own folder (the same config, so the
same windows and seed), once with nothing else started and once beside ``--busy`` Python
busy loops (``while True: pass``) on the same cores. For each it prints the machine's load
(``os.getloadavg``) before and after, the minutes to decision (captures and looks, the
manifest's ``timing.auto_contexts.minutes``), the whole command's wall minutes (with
loading and the final analysis), the looks' seconds against the captures' (each look
should cost less than the capture of its chunk), where the looks stopped and the verdicts.
The busy run's minutes are printed as a ratio of the quiet run's, and whether the two
runs stopped at the same windows with the same verdicts: with the stop at a number of
windows (``--max-contexts``), they must (the wall-clock ``--budget`` is a safety only).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BUSY = "while True: pass"
"""A second process that keeps a core busy."""


def decide(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """One run of the command into ``out``: its timing, stop and verdicts."""
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable,
        "-c",
        "import sys; from geomlens.cli import main; sys.exit(main(sys.argv[1:]))",
        "decompose",
        "--model",
        args.model,
        "--contexts",
        "auto",
        "--max-contexts",
        str(args.max_contexts),
        "--length",
        str(args.length),
        "--figures",
        "none",
        "--quiet",
        "--out",
        str(out),
    ]
    load_before = os.getloadavg()[0]
    began = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - began
    manifest = json.loads((out / "manifest.json").read_text())
    timing = manifest["timing"]
    record = manifest["auto_contexts"]
    return {
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "decision_min": timing["auto_contexts"]["minutes"],
        "wall_min": wall / 60,
        "capture_s": timing.get("seconds", 0.0),
        "look_s": sum(timing["auto_contexts"]["look_seconds"]),
        "looks": record["looks"],
        "stopped": record["stopped"],
        "verdicts": record["verdicts"],
        "cut_short": record.get("cut_short"),
    }


def show(name: str, found: dict[str, Any], baseline: dict[str, Any] | None) -> None:
    ratio = ""
    if baseline is not None:
        ratio = f" ({found['decision_min'] / baseline['decision_min']:.2f}x)"
    print(
        f"{name:>6}: load {found['load_before']:.1f} -> {found['load_after']:.1f}; decided in "
        f"{found['decision_min']:.2f} min{ratio}, command {found['wall_min']:.2f} min; "
        f"looks {found['look_s']:.0f} s against captures {found['capture_s']:.0f} s; "
        f"looks at {found['looks']}, stopped: {found['stopped']}"
        + (f"; {found['cut_short']}" if found["cut_short"] else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--max-contexts", type=int, default=2048)
    parser.add_argument("--busy", type=int, default=1, help="busy loops beside the second run")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="auto-decision-"))
    quiet = decide(args, root / "quiet")
    show("quiet", quiet, None)
    loops = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.busy)]
    try:
        busy = decide(args, root / "busy")
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    show("busy", busy, quiet)
    same = (busy["looks"], busy["verdicts"]) == (quiet["looks"], quiet["verdicts"])
    print(f"same stop and verdicts quiet and busy: {same}")


if __name__ == "__main__":
    main()
