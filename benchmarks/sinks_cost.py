"""What the attention-sink tap costs: the capture filling the report's other taps (norms
over 4 windows, the walk's attention over 16) against the same capture filling the sink
tap too, in the same passes, in one run.

    python benchmarks/sinks_cost.py [--model smollm2-135m] [--contexts 128] [--length 128]
        [--batch-size 8] [--repeats 3]

Per repeat, interleaved (so drift in machine load hits both alike), the model loaded once:
(i) ``capture_windows`` with the report's taps but the sinks', (ii) the same with the sinks'
tap added (it reads the walk's 16 windows, so it adds hooks, no pass). Printed: medians and
the ratio (ii)/(i).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time

from geomlens.analyses.sinks.compute import SINK_WINDOWS, SinkTap
from geomlens.analyses.sphere.compute import NormTap
from geomlens.analyses.sphere.step import IDENTITY_WINDOWS
from geomlens.analyses.walk.refactor import AttentionTap
from geomlens.analyses.walk.step import KERNEL_WINDOWS
from geomlens.capturing import CaptureConfig, capture_windows
from geomlens.capturing.taps import Taps
from geomlens.corpus import load_corpus, make_windows
from geomlens.models import load_model
from geomlens.pipeline.taps import tap_factory
from geomlens.runs.runfolder import RunFolder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--contexts", type=int, default=128)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    view = load_model(args.model)
    config = CaptureConfig(
        model=args.model, contexts=args.contexts, length=args.length, batch_size=args.batch_size
    )
    windows = make_windows(load_corpus("bbc"), view.tokenizer, args.contexts, args.length)
    others = {"norms": (NormTap, IDENTITY_WINDOWS), "attention": (AttentionTap, KERNEL_WINDOWS)}
    factories = {
        "without": tap_factory(others),
        "with": tap_factory({**others, "sinks": (SinkTap, SINK_WINDOWS)}),
    }
    times: dict[str, list[float]] = {name: [] for name in factories}
    for i in range(args.repeats):
        for name, factory in factories.items():
            with tempfile.TemporaryDirectory() as folder:
                t0 = time.perf_counter()
                capture_windows(
                    view,
                    windows,
                    config,
                    RunFolder(folder),
                    checkpoint_every_s=math.inf,
                    progress=False,
                    taps=Taps.made(view, factory),
                )
                times[name].append(time.perf_counter() - t0)
        print(
            f"repeat {i + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()),
            file=sys.stderr,
            flush=True,
        )
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"model={args.model} C={args.contexts} T={args.length} batch={args.batch_size} "
        f"repeats={args.repeats} sink windows {SINK_WINDOWS}"
    )
    print(f"(i)  capture with the report's other taps  {med['without']:7.1f} s")
    print(
        f"(ii) the same with the sinks' tap          {med['with']:7.1f} s  "
        f"{med['with'] / med['without']:.3f} x (i)"
    )


if __name__ == "__main__":
    main()
