"""Time of ``report`` and of second moments against ``capture`` alone, in one run.

    python benchmarks/report.py [--model smollm2-135m] [--contexts 128] [--length 128]
        [--batch-size 8] [--limit 40] [--repeats 2] [--no-report]

Three runs per repeat, interleaved (so drift in machine load hits all alike), each into a
fresh run folder with the same config and the model loaded once (loading is not counted):

(i) ``geomlens capture`` (no second moments);
(ii) the capture phase of ``decompose`` and ``report`` (``second_moment=True``);
(iii) ``geomlens report`` end to end (capture, the four stages, the page).

Targets: (ii)/(i) >= 0.9 (second moments cost at most about a tenth) and (iii)/(i) <= 3.
Each report stage's seconds come from its "[i/n] ...: done in N s" line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from geomlens.capture import CaptureConfig
from geomlens.commands.capture import run_capture
from geomlens.commands.report import run_report
from geomlens.models import load_model
from geomlens.models.view import ModelView

STAGE_LINE = re.compile(r"\[\d+/\d+\] (.+): done in (\d+) s")


def timed_report(
    config: CaptureConfig, out: Path, view: ModelView, limit: int
) -> tuple[float, dict[str, float]]:
    """Seconds of one whole report and of each stage (parsed from its stderr lines)."""
    err = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(err):
        run_report(config, out, view=view, limit=limit, progress=True)
    seconds = time.perf_counter() - t0
    stages = {m[1]: float(m[2]) for m in STAGE_LINE.finditer(err.getvalue())}
    return seconds, stages


def loop_seconds(run: Path) -> float:
    """The capture loop's own seconds (the manifest's timing; no windowing, no writing)."""
    return float(json.loads((run / "manifest.json").read_text())["timing"]["seconds"])


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--contexts", type=int, default=128)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--limit", type=int, default=40, help="concept items of the report")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-report", action="store_true", help="time (i) and (ii) only")
    parser.add_argument("--out", help="keep the run folders here (default: a temporary folder)")
    return parser.parse_args()


def main() -> None:
    """Run (i), (ii), (iii) ``--repeats`` times interleaved; print medians and ratios."""
    args = parse_args()
    view = load_model(args.model)
    config = CaptureConfig(
        model=args.model, contexts=args.contexts, length=args.length, batch_size=args.batch_size
    )
    second = dataclasses.replace(config, second_moment=True)
    names = ("capture", "capture_loop", "second", "second_loop", "report")
    times: dict[str, list[float]] = {name: [] for name in names}
    stages: dict[str, list[float]] = {}
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.out or scratch
        for i in range(args.repeats):
            t0 = time.perf_counter()
            run_capture(config, Path(tmp) / f"c{i}", view=view, progress=False)
            times["capture"].append(time.perf_counter() - t0)
            times["capture_loop"].append(loop_seconds(Path(tmp) / f"c{i}"))
            t0 = time.perf_counter()
            run_capture(second, Path(tmp) / f"s{i}", view=view, progress=False)
            times["second"].append(time.perf_counter() - t0)
            times["second_loop"].append(loop_seconds(Path(tmp) / f"s{i}"))
            if not args.no_report:
                seconds, by_stage = timed_report(config, Path(tmp) / f"r{i}", view, args.limit)
                times["report"].append(seconds)
                for name, s in by_stage.items():
                    stages.setdefault(name, []).append(s)
            print(
                f"repeat {i + 1}: "
                + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items() if v),
                file=sys.stderr,
                flush=True,
            )
    report(args, times, stages, (load0, os.getloadavg()[0]))


def report(
    args: argparse.Namespace,
    times: dict[str, list[float]],
    stages: dict[str, list[float]],
    load: tuple[float, float],
) -> None:
    """Print the medians, the two ratios against their targets, and the stages."""
    med = {k: statistics.median(v) for k, v in times.items() if v}
    tokens = args.contexts * args.length
    print(
        f"model={args.model} C={args.contexts} T={args.length} batch={args.batch_size} "
        f"repeats={args.repeats} load average {load[0]:.1f} -> {load[1]:.1f}"
    )
    c, s = med["capture"], med["second"]
    print(f"(i)   capture              {c:8.1f} s  ({tokens / c:6.0f} tok/s)")
    print(f"(ii)  with second moments  {s:8.1f} s  ({tokens / s:6.0f} tok/s)")
    print(f"      speed (ii)/(i)       {c / s:8.2f}   (target >= 0.9)")
    loop_c, loop_s = med["capture_loop"], med["second_loop"]
    print(f"      capture loops alone  {loop_c:8.1f} s and {loop_s:.1f} s: {loop_c / loop_s:.2f}")
    if "report" in med:
        print(f"(iii) report               {med['report']:8.1f} s")
        print(f"      (iii)/(i)            {med['report'] / med['capture']:8.2f}   (target <= 3)")
        for name, values in stages.items():
            print(f"      stage {name:<32} {statistics.median(values):6.0f} s")
    per_repeat = [c / s for c, s in zip(times["capture"], times["second"], strict=True)]
    print("speed (ii)/(i) per repeat: " + ", ".join(f"{r:.2f}" for r in per_repeat))


if __name__ == "__main__":
    main()
