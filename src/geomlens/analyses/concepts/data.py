"""``geomlens data bigbench``: rebuild the offline BIG-bench task folder from PyPI.

The ``bigbench`` source distribution on PyPI (1.0.0, about 360 MB) holds every task's
``task.json`` under ``bigbench/benchmark_tasks/``. pip downloads it (``--no-deps``,
nothing is installed or built beyond pip's metadata step), and only the chosen tasks'
``task.json`` files are read out of the archive, as a stream, into
``<out>/<task>/task.json``, with a NOTICE.md stating where they came from.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from geomlens.analyses.concepts.tasks import data_dir
from geomlens.errors import GeomlensError
from geomlens.io.files import inside, replacing
from geomlens.io.jsontext import JSONTextError, loads

VERSION = "1.0.0"
TASKS = (
    "goal_step_wikihow/step_inference",
    "goal_step_wikihow/goal_inference",
    "social_iqa",
    "timedial",
    "abstract_narrative_understanding/4_distractors",
)
MAX_TASK_BYTES = 256 * 2**20
"""Largest task.json read out of the archive (BIG-bench's largest is a few tens of MB)."""


def default_out() -> Path:
    """``$GEOMLENS_DATA/bigbench`` when the variable is set, else ``data/bigbench``."""
    folder = data_dir()
    return (folder if folder is not None else Path("data")) / "bigbench"


def download_archive(dest: Path, version: str = VERSION) -> Path:
    """Download the bigbench source archive with pip into ``dest``; returns its path."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        f"bigbench=={version}",
        "--no-deps",
        "--no-binary",
        "bigbench",
        "--disable-pip-version-check",
        "-d",
        str(dest),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    archives = sorted(dest.glob(f"bigbench-{version}.tar.gz"))
    if done.returncode != 0 or not archives:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise GeomlensError(
            f"pip could not download bigbench=={version} ({last[0]}); check the network, "
            "or download it elsewhere and pass --archive."
        )
    return archives[0]


def task_of_member(name: str) -> str | None:
    """The task path of an archive member ``.../benchmark_tasks/<task>/task.json``."""
    parts = name.split("/")
    if parts[-1] != "task.json" or "benchmark_tasks" not in parts:
        return None
    i = parts.index("benchmark_tasks")
    return "/".join(parts[i + 1 : -1]) or None


def extract_tasks(archive: Path, out: Path, tasks: Sequence[str] = TASKS) -> dict[str, Path]:
    """Read only the chosen tasks' task.json out of the archive into ``out/<task>/``."""
    wanted = set(tasks)
    written: dict[str, Path] = {}
    try:
        with tarfile.open(archive, "r|gz") as tar:
            for member in tar:
                task = task_of_member(member.name)
                if task not in wanted or not member.isfile() or task in written:
                    continue
                if member.size > MAX_TASK_BYTES:
                    raise GeomlensError(
                        f"{member.name} in {archive} is {member.size:,} bytes, more than a task "
                        f"file can be ({MAX_TASK_BYTES:,}); the archive is not BIG-bench's."
                    )
                handle = tar.extractfile(member)
                if handle is None:
                    continue
                data = handle.read()
                task_examples(data, f"{member.name} in {archive}")
                target = inside(out, f"{task}/task.json", f"{member.name} in {archive}")
                target.parent.mkdir(parents=True, exist_ok=True)
                with replacing(target) as tmp:
                    tmp.write_bytes(data)
                written[task] = target
    except (OSError, tarfile.TarError) as exc:
        raise GeomlensError(f"cannot read archive {archive}: {exc}.") from None
    missing = sorted(wanted - set(written))
    if missing:
        raise GeomlensError(f"the archive holds no task.json for: {', '.join(missing)}.")
    return written


def task_examples(data: bytes, where: str) -> list[dict[str, object]]:
    """The examples of a BIG-bench task.json (those that are objects); one sentence naming
    ``where`` when the bytes are not a JSON object (not UTF-8, not JSON, nested too deeply,
    an integer of too many digits, a non-finite number)."""
    try:
        parsed = loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise GeomlensError(f"{where} is not UTF-8 text; the archive is not BIG-bench's.") from None
    except JSONTextError as exc:
        raise GeomlensError(
            f"{where} is not valid JSON ({exc.reason}); the archive is not BIG-bench's."
        ) from None
    if not isinstance(parsed, dict):
        raise GeomlensError(f"{where} is not a JSON object; the archive is not BIG-bench's.")
    examples = parsed.get("examples")
    return [e for e in examples if isinstance(e, dict)] if isinstance(examples, list) else []


def notice_text(written: dict[str, Path], version: str = VERSION) -> str:
    """NOTICE.md: provenance, licence and a table of the tasks written."""
    rows = []
    for task, path in sorted(written.items()):
        examples = task_examples(path.read_bytes(), str(path))
        options = sorted(
            {len(s) if isinstance(s := e.get("target_scores"), dict) else 0 for e in examples}
        )
        span = (
            f"{options[0]}-{options[-1]}"
            if len(options) > 1
            else (str(options[0]) if options else "-")
        )
        rows.append(f"| {task} | {len(examples):,} | {span} |")
    return (
        "# BIG-bench multiple-choice tasks\n\n"
        f"These `task.json` files are copied unchanged from the `bigbench` {version} source\n"
        "distribution on PyPI (`bigbench/benchmark_tasks/<task>/task.json`), licensed\n"
        "under the Apache License 2.0. They were extracted by `geomlens data bigbench`.\n\n"
        "| task | items | options |\n| --- | --- | --- |\n" + "\n".join(rows) + "\n"
    )


def fetch_bigbench(
    out: str | Path | None = None,
    *,
    archive: str | Path | None = None,
    tasks: Sequence[str] = TASKS,
    version: str = VERSION,
) -> dict[str, Path]:
    """Build the BIG-bench task folder (downloading the archive unless one is given).

    Args:
        out: the folder to write (default: ``default_out()``).
        archive: an already downloaded ``bigbench-<version>.tar.gz``.
        tasks: task paths under ``benchmark_tasks``.
        version: the bigbench release.

    Returns:
        task -> the task.json written.
    """
    folder = Path(out) if out is not None else default_out()
    if archive is not None:
        if not Path(archive).is_file():
            raise GeomlensError(f"archive {archive} does not exist.")
        written = extract_tasks(Path(archive), folder, tasks)
    else:
        print(
            f"downloading bigbench=={version} from PyPI with pip (about 360 MB, a few minutes)",
            file=sys.stderr,
        )
        with tempfile.TemporaryDirectory() as scratch:
            written = extract_tasks(download_archive(Path(scratch), version), folder, tasks)
    (folder / "NOTICE.md").write_text(notice_text(written, version), encoding="utf-8")
    return written
