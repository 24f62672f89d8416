"""Shared fixtures: each real model is loaded once per test session. Tasks come from the
small copies in tests/data (``task_data``): nothing is downloaded or built, and tests marked
``bigbench`` (the full tasks) are skipped unless ``GEOMLENS_DATA`` names a folder holding
them. Under pytest-xdist each worker computes on its share of the cores (see
``worker_threads``)."""

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

import pytest  # noqa: E402
import torch  # noqa: E402
from task_data import BIGBENCH, FIXTURES, NO_BIGBENCH  # noqa: E402
from tiny_models import gemma3, gpt2, t5, t5_relu  # noqa: E402, F401 (tiny model fixtures, module-scoped)

from geomlens.models import ModelView, load_model  # noqa: E402

if THREADS is not None:
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


if BIGBENCH is None:  # task names resolve to the small copies (a run's default task too)
    os.environ["GEOMLENS_DATA"] = str(FIXTURES)


def pytest_configure(config: pytest.Config) -> None:
    """Convert the bundled SmolLM2 (once per machine, cached) before any test runs, in the
    main process only: on a fresh machine its one-time conversion lines would otherwise
    land in the stderr of whichever test loads it first, and two workers would convert
    it at once."""
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        from geomlens.models.loading import resolve_folder

        resolve_folder("smollm2-135m")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked ``bigbench`` where the full tasks are not found."""
    if item.get_closest_marker("bigbench") is not None and BIGBENCH is None:
        pytest.skip(NO_BIGBENCH)


@pytest.fixture(scope="session")
def bigbench_data() -> Path:
    """The folder holding the full tasks' ``bigbench/`` (the test is skipped without it)."""
    if BIGBENCH is None:
        pytest.skip(NO_BIGBENCH)
    return BIGBENCH


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
