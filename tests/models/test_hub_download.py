"""A hub id downloads into Hugging Face's own cache, from a real HTTP server.

``hub_server`` speaks the hub's file protocol on 127.0.0.1 for a tiny saved Llama; the
commands run in fresh processes with ``HF_ENDPOINT`` pointing at it and a temporary
``HF_HOME`` (huggingface_hub reads both when it is imported), as a user's would. Each
process's commands run through ``geomlens.cli.main``, the command line's error boundary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from hub_server import Hub, Repo, closed_port, serve
from safetensors.torch import load_file
from tiny_models import saved_llama

from geomlens.cli import main

TINY = "geomlens-test/tiny"
SMALL = ["--contexts", "4", "--length", "16", "--quiet"]

COMMANDS = textwrap.dedent(
    """
    import contextlib, io, json, sys
    from geomlens.cli import main
    done = []
    for argv in json.loads(sys.argv[1]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(argv)
        done.append({"code": code, "stderr": err.getvalue()})
    print(json.dumps(done))
    """
)
"""Runs several command lines in one process (one import of torch and transformers)."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama with a real tokenizer, saved as a model folder."""
    return saved_llama(tmp_path_factory.mktemp("tiny") / "tiny-llama")


@pytest.fixture(scope="module")
def hub(folder: Path) -> Iterator[Hub]:
    """The hub: the tiny model (beside a pickle and a README that are never fetched), a
    repository with pickled weights only, and two gated ones (401 and 403)."""
    tiny = Repo.of_folder(folder)
    tiny.files |= {"pytorch_model.bin": b"not fetched", "README.md": b"# tiny"}
    pickled = {"config.json": tiny.files["config.json"], "pytorch_model.bin": b"pickle"}
    repos = {
        TINY: tiny,
        "geomlens-test/pickled": Repo(pickled),
        "geomlens-test/gated": Repo(dict(tiny.files), gated=401),
        "geomlens-test/forbidden": Repo(dict(tiny.files), gated=403),
    }
    with serve(repos) as running:
        yield running


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Hugging Face home every process of this module shares (its cache persists)."""
    return tmp_path_factory.mktemp("hf-home")


def environment(home: Path, endpoint: str, offline: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env |= {"HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"), "HF_ENDPOINT": endpoint}
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    return env


def run_commands(env: dict[str, str], *argvs: list[str]) -> list[dict[str, Any]]:
    """Each command line's exit code and stderr, run in one fresh process under ``env``."""
    done = subprocess.run(
        [sys.executable, "-c", COMMANDS, json.dumps(argvs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def capture(model: str, out: Path) -> list[str]:
    return ["capture", "--model", model, *SMALL, "--out", str(out)]


@pytest.fixture(scope="module")
def downloaded(hub: Hub, home: Path, folder: Path, tmp_path_factory: pytest.TempPathFactory):
    """A capture of the hub id whose first download is cut off in the weights, rerun; and
    the same capture of the folder."""
    root = tmp_path_factory.mktemp("runs")
    hub.cut.add("model.safetensors")
    [stopped] = run_commands(environment(home, hub.url), capture(TINY, root / "hub"))
    hub.cut.clear()
    first = len(hub.requests)
    [result] = run_commands(environment(home, hub.url), capture(TINY, root / "hub"))
    assert main(capture(str(folder), root / "folder")) == 0
    return stopped, result, hub.requests[first:], root / "hub", root / "folder"


def test_a_hub_id_downloads_and_measures_as_its_folder(downloaded, hub: Hub, home: Path) -> None:
    stopped, result, rerun, by_id, by_folder = downloaded
    assert result["code"] == 0, result["stderr"]
    # the same numbers, byte for byte, and the same files
    assert (by_id / "metrics.json").read_text() == (by_folder / "metrics.json").read_text()
    ours, theirs = (
        load_file(r / "stats" / "decomposition.safetensors") for r in (by_id, by_folder)
    )
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    manifest = json.loads((by_id / "manifest.json").read_text())
    folder_manifest = json.loads((by_folder / "manifest.json").read_text())
    assert manifest["model_fingerprint"] == folder_manifest["model_fingerprint"]
    # the revision's commit is recorded; the files sit in HF's own cache layout
    sha = hub.repos[TINY].sha
    assert manifest["hub"] == {"revision": "main", "commit": sha}
    snapshot = home / "hub" / "models--geomlens-test--tiny" / "snapshots" / sha
    assert manifest["model"]["source"] == str(snapshot)
    assert (home / "hub" / "models--geomlens-test--tiny" / "refs" / "main").read_text() == sha
    # config, tokenizer and safetensors only: never the pickle, the README or any code
    assert hub.fetched() >= {"config.json", "tokenizer.json", "model.safetensors"}
    assert not hub.fetched() & {"pytorch_model.bin", "README.md"}
    assert sorted(p.name for p in snapshot.iterdir()) == sorted(hub.fetched())
    assert "Fetching 5 files" in result["stderr"]  # the hub's own progress bar


def test_a_cut_download_says_so_and_resumes(downloaded) -> None:
    """The first download stopped in the weights (after huggingface_hub's own retries):
    one sentence; the rerun fetches only the file that was missing."""
    stopped, result, rerun, by_id, _ = downloaded
    assert stopped["code"] == 2
    assert "the download of model 'geomlens-test/tiny' from the hub at" in stopped["stderr"]
    assert "stopped (RemoteProtocolError); rerun the same command to resume" in stopped["stderr"]
    assert result["code"] == 0
    fetched = [p.rsplit("/", 1)[-1] for m, p, _ in rerun if m == "GET" and "/resolve/" in p]
    assert fetched == ["model.safetensors"]


def test_refusals_are_one_sentence_each(hub: Hub, home: Path, tmp_path: Path) -> None:
    before = len(hub.requests)
    names = ["pickled", "absent", "gated", "forbidden"]
    argvs = [capture(f"geomlens-test/{n}", tmp_path / n) for n in names]
    argvs.append([*capture(TINY, tmp_path / "rev"), "--revision", "no-such-branch"])
    pickled, absent, gated, forbidden, revision = run_commands(environment(home, hub.url), *argvs)
    for result in (pickled, absent, gated, forbidden, revision):
        assert result["code"] == 2
        lines = result["stderr"].strip().splitlines()
        assert lines[-1].startswith("geomlens: error: ") and "Traceback" not in result["stderr"]
    assert "geomlens-test/pickled' has no .safetensors weights" in pickled["stderr"]
    assert "pickle weight files such as 'pytorch_model.bin'" in pickled["stderr"]
    assert "no model 'geomlens-test/absent' on the hub at" in absent["stderr"]
    for result, status in ((gated, 401), (forbidden, 403)):
        assert f"is gated or private on the hub ({status}): accept its terms" in result["stderr"]
        assert "hf auth login" in result["stderr"]
    assert "has no revision 'no-such-branch'" in revision["stderr"]
    # the pickle-only repository was refused from its file list: nothing was downloaded
    seen = hub.requests[before:]
    assert not [p for m, p, _ in seen if "/geomlens-test/pickled/resolve/" in p]
    assert not any((tmp_path / n).exists() for n in names)  # no run folder left behind


def test_offline_and_unreachable_hubs_use_the_cache(
    downloaded, hub: Hub, home: Path, tmp_path: Path
) -> None:
    """With HF_HUB_OFFLINE=1, or with the hub unreachable, a cached model loads and an
    uncached one is refused; the offline process sends the hub nothing."""
    before = len(hub.requests)
    offline = environment(home, hub.url, offline=True)
    cached, absent = run_commands(
        offline, capture(TINY, tmp_path / "offline"), capture("geomlens-test/other", tmp_path / "x")
    )
    assert cached["code"] == 0, cached["stderr"]
    assert absent["code"] == 2
    assert (
        "'geomlens-test/other' is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
        in absent["stderr"]
    )
    assert hub.requests[before:] == []
    metrics = (tmp_path / "offline" / "metrics.json").read_text()
    assert metrics == (downloaded[-1] / "metrics.json").read_text()
    nowhere = environment(home, f"http://127.0.0.1:{closed_port()}")
    cached, absent = run_commands(
        nowhere,
        capture(TINY, tmp_path / "unreachable"),
        capture("geomlens-test/other", tmp_path / "y"),
    )
    assert cached["code"] == 0, cached["stderr"]
    assert absent["code"] == 2
    assert "cannot be reached: retry when the hub is reachable" in absent["stderr"]
