"""Time of ``report`` against ``capture`` alone and against its floors, in one run.

    python benchmarks/report.py [--model smollm2-135m] [--contexts 128] [--length 128]
        [--batch-size 8] [--limit 40] [--repeats 2] [--no-report] [--no-floors] [--out DIR]

Three runs per repeat, interleaved (so drift in machine load hits all alike), each into a
fresh run folder with the same config and the model loaded once (loading is not counted):

(i) ``geomlens capture`` (no second moments);
(ii) the capture phase of ``decompose`` and ``report`` (``second_moment=True``);
(iii) ``geomlens report`` end to end (capture, the four stages, the page).

Targets: (ii)/(i) >= 0.9 (second moments cost at most about a tenth) and (iii)/(i) <= 3.
Each report stage's seconds come from its "[i/n] ...: done in N s" line on stderr.

Floors (``benchmarks/floors.py``): every forward pass the report makes is logged with its
shape; after the repeats, the passes of the capture and of each stage are replayed as bare
Hugging Face forwards (the stage's floor as it is written), and the concept stage's passes
are also built from what it must compute (each context once, see ``concept_lengths``). The
table prints each stage's wall seconds beside its floor, and the report's wall seconds
over the sum of the floors (target <= 1.5).
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

from floors import Pass, between, concept_lengths, pass_log, replay

from geomlens.capturing import CaptureConfig
from geomlens.commands.capture import run_capture
from geomlens.commands.report import run_report
from geomlens.models import load_model
from geomlens.models.view import ModelView

STAGE_LINE = re.compile(r"\[\d+/\d+\] (.+): done in (\d+) s")
STAGE_START = re.compile(r"\[\d+/\d+\] (.+) \.\.\.$")


class TimedLines(io.TextIOBase):
    """A stderr stand-in that keeps every line with the time it was written."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []
        self._part = ""

    def write(self, text: str) -> int:
        self._part += text
        *done, self._part = re.split(r"[\r\n]", self._part)
        now = time.perf_counter()
        self.lines.extend((now, line) for line in done if line.strip())
        return len(text)

    def getvalue(self) -> str:
        return "\n".join(line for _, line in self.lines) + "\n" + self._part


@dataclasses.dataclass
class ReportRun:
    """One report: its seconds, each stage's seconds and when it ran, the passes it made."""

    seconds: float
    stages: dict[str, float]
    spans: dict[str, tuple[float, float]]
    passes: list[Pass]
    capture_seconds: float
    capture_wall_manifest: float
    report_wall_manifest: float


def timed_report(config: CaptureConfig, out: Path, view: ModelView, limit: int) -> ReportRun:
    """One whole report with its stages' seconds (parsed from its stderr lines), the
    window of time of the capture and of each stage, and every forward pass it made."""
    err = TimedLines()
    t0 = time.perf_counter()
    with pass_log(view) as passes, contextlib.redirect_stderr(err):
        run_report(config, out, view=view, limit=limit, progress=True)
    end = time.perf_counter()
    seconds = end - t0
    stages = {m[1]: float(m[2]) for m in STAGE_LINE.finditer(err.getvalue())}
    starts = [(t, m[1]) for t, line in err.lines if (m := STAGE_START.search(line))]
    spans: dict[str, tuple[float, float]] = {}
    first = starts[0][0] if starts else end
    spans["capture"] = (t0, first)
    for k, (t, name) in enumerate(starts):
        spans[name] = (t, starts[k + 1][0] if k + 1 < len(starts) else end)
    timing = json.loads((out / "manifest.json").read_text())["timing"]
    return ReportRun(
        seconds,
        stages,
        spans,
        list(passes),
        float(timing["seconds"]),
        0.0,
        float(timing["wall_seconds"]),
    )


def loop_seconds(run: Path) -> float:
    """The capture loop's own seconds (the manifest's timing; no windowing, no writing)."""
    return float(json.loads((run / "manifest.json").read_text())["timing"]["seconds"])


def wall_manifest(run: Path) -> float:
    """The whole command's seconds as its manifest records them."""
    return float(json.loads((run / "manifest.json").read_text())["timing"]["wall_seconds"])


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--contexts", type=int, default=128)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--limit", type=int, default=40, help="concept items of the report")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-report", action="store_true", help="time (i) and (ii) only")
    parser.add_argument("--no-floors", action="store_true", help="skip the floors")
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
    names = ("capture", "capture_loop", "capture_wall", "second", "second_loop", "report")
    times: dict[str, list[float]] = {name: [] for name in names}
    runs: list[ReportRun] = []
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.out or scratch
        for i in range(args.repeats):
            t0 = time.perf_counter()
            run_capture(config, Path(tmp) / f"c{i}", view=view, progress=False)
            times["capture"].append(time.perf_counter() - t0)
            times["capture_loop"].append(loop_seconds(Path(tmp) / f"c{i}"))
            times["capture_wall"].append(wall_manifest(Path(tmp) / f"c{i}"))
            t0 = time.perf_counter()
            run_capture(second, Path(tmp) / f"s{i}", view=view, progress=False)
            times["second"].append(time.perf_counter() - t0)
            times["second_loop"].append(loop_seconds(Path(tmp) / f"s{i}"))
            if not args.no_report:
                run = timed_report(config, Path(tmp) / f"r{i}", view, args.limit)
                run.capture_wall_manifest = times["capture_wall"][-1]
                runs.append(run)
                times["report"].append(run.seconds)
            print(
                f"repeat {i + 1}: "
                + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items() if v),
                file=sys.stderr,
                flush=True,
            )
    report(args, times, runs, (load0, os.getloadavg()[0]))
    if runs and not args.no_floors:
        floors(args, view, runs[-1])


def report(
    args: argparse.Namespace,
    times: dict[str, list[float]],
    runs: list[ReportRun],
    load: tuple[float, float],
) -> None:
    """Print the medians, the two ratios against their targets, and the stages."""
    med = {k: statistics.median(v) for k, v in times.items() if v}
    tokens = args.contexts * args.length
    print(
        f"model={args.model} C={args.contexts} T={args.length} batch={args.batch_size} "
        f"limit={args.limit} repeats={args.repeats} "
        f"load average {load[0]:.1f} -> {load[1]:.1f}"
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
        walls = [r.report_wall_manifest / r.capture_wall_manifest for r in runs]
        print(
            "      manifests: report wall / capture wall "
            + ", ".join(f"{w:.2f}" for w in walls)
            + f" (median {statistics.median(walls):.2f}); report wall / its capture loop "
            + ", ".join(f"{r.report_wall_manifest / r.capture_seconds:.2f}" for r in runs)
        )
        stages: dict[str, list[float]] = {}
        for r in runs:
            for name, value in r.stages.items():
                stages.setdefault(name, []).append(value)
        for name, values in stages.items():
            print(f"      stage {name:<32} {statistics.median(values):6.0f} s")
    per_repeat = [c / s for c, s in zip(times["capture"], times["second"], strict=True)]
    print("speed (ii)/(i) per repeat: " + ", ".join(f"{r:.2f}" for r in per_repeat))


def floors(args: argparse.Namespace, view: ModelView, run: ReportRun) -> None:
    """Each stage's wall seconds beside the bare forwards it made (replayed) and, for the
    concept stage, those it must make; the report over the sum of the floors."""
    from floors import bare_lengths

    from geomlens.analyses.concepts.baseline import BATCH_TOKENS
    from geomlens.analyses.concepts.step import default_task
    from geomlens.analyses.concepts.tasks import load_task

    print("floors (bare forward passes, replayed after the run; seconds):")
    print(f"      {'part':<36} {'wall':>7} {'passes':>7} {'floor':>7} {'wall/floor':>10}")
    total_floor = 0.0
    for name, (start, end) in run.spans.items():
        passes = between(run.passes, start, end)
        made = replay(view, passes)
        wall = end - start
        floor = made
        if name == "concept-space tests":
            task = load_task(default_task("timedial"))
            floor = bare_lengths(view, concept_lengths(view, task, args.limit, 0), BATCH_TOKENS)
            print(f"      {name + ' (as made)':<36} {wall:7.1f} {len(passes):7d} {made:7.1f}")
        total_floor += floor
        ratio = wall / floor if floor > 0 else float("inf")
        print(f"      {name:<36} {wall:7.1f} {len(passes):7d} {floor:7.1f} {ratio:10.2f}")
    print(
        f"      report {run.seconds:.1f} s over the sum of floors {total_floor:.1f} s: "
        f"{run.seconds / total_floor:.2f} (target <= 1.5)"
    )


if __name__ == "__main__":
    main()
