"""Start-up times: ``geomlens --help``, ``geomlens models``, ``import geomlens``, and a
refused command line, each against ``import torch`` and a bare interpreter measured in the
same run.

    python benchmarks/startup.py [--repeats 5]

Each command runs in a fresh interpreter ``--repeats`` times; the table gives the median
wall seconds, the median CPU seconds of the child (user + system, far less sensitive to
other work on the machine than wall time) and the wall time over ``import torch``'s. The
targets: ``--help`` and ``models`` under 2 s, ``import geomlens`` under 3 s plus torch's
own import, a refused command (an unknown model, a text too long for the model) under 3 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

PY = sys.executable

CASES: dict[str, list[str]] = {
    "python (bare interpreter)": [PY, "-c", "pass"],
    "import torch": [PY, "-c", "import torch"],
    "import geomlens": [PY, "-c", "import geomlens"],
    "import geomlens + torch": [PY, "-c", "import geomlens, torch"],
    "geomlens.load_model ready": [PY, "-c", "import geomlens; geomlens.load_model"],
    "geomlens --help": [PY, "-m", "geomlens.cli", "--help"],
    "geomlens models": [PY, "-m", "geomlens.cli", "models"],
    "refused: unknown model": [PY, "-m", "geomlens.cli", "report", "--model", "no-such-model"],
    "refused: --contexts 0": [PY, "-m", "geomlens.cli", "decompose", "--contexts", "0"],
}


def timed(command: list[str]) -> tuple[float, float, int]:
    """Wall seconds, child CPU seconds and exit code of one run of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=os.environ.copy())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows: dict[str, tuple[float, float, int]] = {}
    for name, command in CASES.items():
        runs = [timed(command) for _ in range(args.repeats)]
        rows[name] = (
            statistics.median(r[0] for r in runs),
            statistics.median(r[1] for r in runs),
            runs[-1][2],
        )
    torch_wall = rows["import torch"][0]
    print(f"{'case':32} {'wall s':>8} {'cpu s':>8} {'/ torch':>8} {'exit':>5}")
    for name, (wall, cpu, rc) in rows.items():
        print(f"{name:32} {wall:8.2f} {cpu:8.2f} {wall / torch_wall:8.2f} {rc:5d}")
    over = rows["import geomlens + torch"][0] - torch_wall
    over_cpu = rows["import geomlens + torch"][1] - rows["import torch"][1]
    print(
        f"\nimport geomlens beyond torch's own import: {over:.2f} s wall, {over_cpu:.2f} s CPU "
        "(target under 3 s; on a busy machine the CPU column is the steadier one)"
    )


if __name__ == "__main__":
    main()
