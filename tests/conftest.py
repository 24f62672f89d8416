"""Shared fixtures: each real model is loaded once per test session; the BIG-bench tasks
the concept tests read are found (or built once) before any test module is collected.
Under pytest-xdist each worker computes on its share of the cores (see ``worker_threads``)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def worker_threads() -> int | None:
    """Threads for each of pytest-xdist's workers: the cores divided among them (None when
    not running under xdist). torch and OpenMP default to one thread per core in every
    process, so two workers on two cores ran four busy threads, and the waits of OpenMP
    threads that find no free core made CPU-bound tests several times slower."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers < 2:
        return None
    affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere every core
    cores = len(affinity(0)) if affinity else os.cpu_count() or 1
    return max(1, cores // workers)


THREADS = worker_threads()
if THREADS is not None:  # before torch is imported; subprocesses (CLI, kernels) inherit it
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(name, str(THREADS))

import platformdirs  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from tiny_models import gemma3, gpt2, t5, t5_relu  # noqa: E402, F401 (tiny model fixtures, module-scoped)

from geomlens.models import ModelView, load_model  # noqa: E402

if THREADS is not None:
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def task_data() -> Path:
    """The folder holding ``bigbench/``: ``$GEOMLENS_DATA``, else ``../shared/data`` beside
    the repository, else a cache built once from the bigbench package on PyPI (a clean
    machine; about 5 minutes, then reused). ``NOTICE.md`` is written last, so a folder
    without it is an interrupted build and is built again."""
    given = os.environ.get("GEOMLENS_DATA")
    if given:
        return Path(given)
    beside = Path(__file__).resolve().parents[2] / "shared" / "data"
    if (beside / "bigbench").is_dir():
        return beside
    cache = Path(platformdirs.user_cache_dir("geomlens")) / "data"
    cache.mkdir(parents=True, exist_ok=True)
    # every test worker imports this file: one builds, the others wait for it
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cache / "bigbench" / "NOTICE.md").is_file():
            from geomlens.analyses.concepts.data import fetch_bigbench

            fetch_bigbench(cache / "bigbench")
    return cache


os.environ["GEOMLENS_DATA"] = str(task_data())


@pytest.fixture(scope="session")
def smollm2() -> ModelView:
    """SmolLM2-135M on real weights (sdpa attention)."""
    return load_model("smollm2-135m")


@pytest.fixture(scope="session")
def minilm() -> ModelView:
    """MiniLM-L6 on real weights."""
    return load_model("minilm-l6")


MINILM_REPORT = ["--model", "minilm-l6", "--contexts", "16", "--length", "64"]
"""The MiniLM report the report tests read (``geomlens report`` with these options)."""


@pytest.fixture(scope="session")
def minilm_report(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """``geomlens report`` of ``MINILM_REPORT``, run once per test run with its progress
    display on (what it printed is kept in ../stderr.txt). Test workers share it: the first
    to ask runs it into the run's common temporary folder while holding a lock, the others
    wait and read it (without loading the model). Tests copy it before changing anything."""
    import contextlib
    import io

    from geomlens.capturing import CaptureConfig
    from geomlens.commands.report import run_report

    base = tmp_path_factory.getbasetemp()  # under xdist: this run's folder, one per worker
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "minilm-report"
    shared.mkdir(exist_ok=True)
    out = shared / "run"
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "stderr.txt").is_file():  # written last
            config = CaptureConfig(model="minilm-l6", contexts=16, length=64, batch_size=8)
            printed = io.StringIO()
            with contextlib.redirect_stderr(printed):
                run_report(config, out, view=request.getfixturevalue("minilm"), progress=True)
            (shared / "stderr.txt").write_text(printed.getvalue())
    return out


@pytest.fixture(scope="session")
def bbc():
    from geomlens.corpus import load_corpus

    return load_corpus("bbc")


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright drives Debian's chromium (Playwright's own download is unavailable)."""
    return {**browser_type_launch_args, "executable_path": "/usr/bin/chromium"}
