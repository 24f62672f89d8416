"""Start-up times: ``geomlens --help``, ``geomlens models``, ``import geomlens``, and
refused command lines, each against ``import torch`` and a bare interpreter measured in the
same run.

    python benchmarks/startup.py [--repeats 5] [--only refused]

Each command runs in a fresh interpreter ``--repeats`` times; the table gives the median
wall seconds, the median CPU seconds of the child (user + system, far less sensitive to
other work on the machine than wall time) and the wall time over ``import torch``'s. The
targets: ``--help`` and ``models`` under 2 s, ``import geomlens`` under 3 s plus torch's
own import, a refused command (an unknown model, a text too long for the model) under 3 s.

The refusals that depend on the model (a walk text or a prompt over its positions, an
unknown name, a folder that holds no model) are decided on the model's files
(``geomlens.models.facts``) before its weights load; the "folder left" column says whether
a refused command left its ``--out`` folder behind (it must not). The texts are about 9,800
SmolLM2 tokens (it accepts 8,192) and 700 MiniLM tokens (512). SmolLM2's cases read its
converted folder, which a first load (any test run) has made.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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

SCRATCH = Path(tempfile.mkdtemp(prefix="geomlens-startup-"))
OUT = SCRATCH / "out"
"""The ``--out`` of every refused command: it must not exist after the refusal."""

LONG = SCRATCH / "long.txt"
MID = SCRATCH / "mid.txt"
NOT_A_MODEL = SCRATCH / "not-a-model"


def cli(*words: str) -> list[str]:
    return [PY, "-m", "geomlens.cli", *words, "--out", str(OUT), "--figures", "none"]


REFUSALS: dict[str, list[str]] = {
    "refused: report text > SmolLM2": cli(
        "report", "--model", "smollm2-135m", "--text-file", str(LONG)
    ),
    "refused: walk text > SmolLM2": cli(
        "walk", "--model", "smollm2-135m", "--text-file", str(LONG)
    ),
    "refused: sphere prompt > SmolLM2": cli(
        "sphere", "--model", "smollm2-135m", "--prompt", "The cat sat on the mat. " * 1400
    ),
    "refused: report text > MiniLM": cli("report", "--model", "minilm-l6", "--text-file", str(MID)),
    "refused: report unknown model": cli("report", "--model", "no-such-model"),
    "refused: report folder no model": cli("report", "--model", str(NOT_A_MODEL)),
    "refused: decompose --length 9000": cli(
        "decompose", "--model", "smollm2-135m", "--length", "9000"
    ),
}
"""Refusals that depend on the model, each of a full command line."""


def timed(command: list[str]) -> tuple[float, float, int, bool]:
    """Wall seconds, child CPU seconds, exit code and whether ``OUT`` was left behind, of
    one run of ``command``."""
    shutil.rmtree(OUT, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=os.environ.copy())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode, OUT.exists()


def write_inputs() -> None:
    LONG.write_text("The cat sat on the mat. " * 1400, encoding="utf-8")
    MID.write_text("The cat sat on the mat. " * 100, encoding="utf-8")
    NOT_A_MODEL.mkdir(exist_ok=True)
    (NOT_A_MODEL / "notes.txt").write_text("no model here\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--only", default="", help="run only the cases whose name contains this (and torch)"
    )
    args = parser.parse_args()
    write_inputs()
    cases = {
        name: command
        for name, command in {**CASES, **REFUSALS}.items()
        if name == "import torch" or args.only in name
    }
    rows: dict[str, tuple[float, float, int, bool]] = {}
    try:
        for name, command in cases.items():
            runs = [timed(command) for _ in range(args.repeats)]
            rows[name] = (
                statistics.median(r[0] for r in runs),
                statistics.median(r[1] for r in runs),
                runs[-1][2],
                any(r[3] for r in runs),
            )
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)
    torch_wall = rows["import torch"][0]
    print(f"{'case':34} {'wall s':>8} {'cpu s':>8} {'/ torch':>8} {'exit':>5} {'folder left':>12}")
    for name, (wall, cpu, rc, left) in rows.items():
        shown = ("yes" if left else "no") if name in REFUSALS else "-"
        print(f"{name:34} {wall:8.2f} {cpu:8.2f} {wall / torch_wall:8.2f} {rc:5d} {shown:>12}")
    if "import geomlens + torch" not in rows:
        return
    over = rows["import geomlens + torch"][0] - torch_wall
    over_cpu = rows["import geomlens + torch"][1] - rows["import torch"][1]
    print(
        f"\nimport geomlens beyond torch's own import: {over:.2f} s wall, {over_cpu:.2f} s CPU "
        "(target under 3 s; on a busy machine the CPU column is the steadier one)"
    )


if __name__ == "__main__":
    main()
