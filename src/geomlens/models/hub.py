"""A Hugging Face hub id: its files downloaded once into Hugging Face's own cache.

``hub_folder("org/name", revision)`` lists the repository's files, refuses one that holds
weights only as pickle files (before downloading anything), then downloads the config,
the tokenizer files and the safetensors weights with ``huggingface_hub.snapshot_download``
into the cache TransformerLens and nnsight read too (``HF_HUB_CACHE``; resumable, its own
progress bar on stderr). With ``HF_HUB_OFFLINE=1`` only that cache is read. An unreachable
hub, a missing repository or revision and a gated one are each refused in one sentence.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from geomlens.errors import GeomlensError

ALLOW_PATTERNS = (
    "*.json",
    "*.safetensors",
    "*.txt",
    "*.model",
    "*.tiktoken",
    "*.jinja",
    "vocab.*",
    "merges.*",
)
"""What a model needs from its repository: config and tokenizer files, safetensors
weights (``*.json`` includes the weights' index). Never ``.bin``/``.pt`` pickles, nor code."""

CODE_PATTERNS = ("*.py",)
"""Downloaded besides, only with ``--trust-remote-code``: the model's own Python code."""

PICKLES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
"""Weight files that unpickle, and so can run code when read."""

REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}")
"""A hub repository id: ``owner/name``."""

OFFLINE = "HF_HUB_OFFLINE is set"
"""Why only the cache is read."""

SHOWN = 80
"""The most characters of a user's text a refusal quotes."""


def shown(text: str) -> str:
    """``text`` quoted, cut to ``SHOWN`` characters."""
    return repr(text if len(text) <= SHOWN else text[: SHOWN - 3] + "...")


def is_hub_id(name: str) -> bool:
    """Whether ``name`` reads as a hub repository id (``owner/name``)."""
    return REPO_ID.fullmatch(name) is not None


def snapshot_commit(folder: str | Path) -> str | None:
    """The commit a folder of Hugging Face's cache holds (``.../snapshots/<commit>``), else
    None (a folder of the user's own)."""
    path = Path(folder)
    if path.parent.name == "snapshots" and re.fullmatch(r"[0-9a-f]{40}", path.name):
        return path.name
    return None


@functools.cache
def hub_folder(model_id: str, revision: str | None = None, code: bool = False) -> Path:
    """The cached snapshot of ``model_id`` at ``revision`` (default: its main branch),
    downloaded first where it is missing; once per process for each (id, revision).

    Args:
        model_id: ``owner/name`` on the hub (``HF_ENDPOINT``: another hub's address).
        revision: a branch, tag or commit; None is the default branch.
        code: also download the repository's Python files (``--trust-remote-code``).

    Raises:
        GeomlensError: offline without a cached copy, hub unreachable without one, no such
            repository or revision, a gated repository, or weights only as pickle files.
    """
    if offline():
        return cached_snapshot(model_id, revision, code, OFFLINE)
    files = repository_files(model_id, revision)
    if files is None:  # unreachable: a cached copy serves, as huggingface_hub's own does
        return cached_snapshot(model_id, revision, code, unreachable())
    check_weight_files(model_id, files)
    return download(model_id, revision, code)


def offline() -> bool:
    """Whether only the cache may be read: ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``)
    set when huggingface_hub was imported, or in the environment now."""
    from huggingface_hub import constants

    now = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return constants.is_offline_mode() or now.upper() in ("1", "ON", "YES", "TRUE")


def patterns(code: bool) -> list[str]:
    """The files fetched of a repository (its Python files too when ``code``)."""
    return [*ALLOW_PATTERNS, *(CODE_PATTERNS if code else ())]


def cached_snapshot(model_id: str, revision: str | None, code: bool, why: str) -> Path:
    """The snapshot already in the cache (complete in the files ``patterns`` names), or a
    refusal saying ``why`` none was fetched."""
    from huggingface_hub import snapshot_download

    try:
        path = snapshot_download(
            model_id, revision=revision, allow_patterns=patterns(code), local_files_only=True
        )
        return Path(path)
    except Exception:
        at = "" if revision is None else f" at revision {shown(revision)}"
        fix = "unset it to download" if why == OFFLINE else "retry when the hub is reachable"
        raise GeomlensError(
            f"model {shown(model_id)}{at} is not in the local Hugging Face cache and {why}: "
            f"{fix}, or give a local folder with config.json."
        ) from None


def unreachable() -> str:
    """Why nothing was fetched when the hub did not answer."""
    from huggingface_hub import constants

    return f"the hub at {shown(constants.ENDPOINT)} cannot be reached"


def transport_errors() -> tuple[type[BaseException], ...]:
    """What huggingface_hub raises when the hub does not answer: its HTTP client's
    transport errors (``httpx2`` in huggingface_hub 2.x, ``httpx`` in 1.x), its offline
    refusal, and plain connection errors."""
    from huggingface_hub.errors import OfflineModeIsEnabled

    found: list[type[BaseException]] = [OfflineModeIsEnabled, ConnectionError]
    for client in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(client).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def repository_files(model_id: str, revision: str | None) -> list[str] | None:
    """The files of the repository at ``revision``, or None when the hub cannot be reached.

    Raises:
        GeomlensError: no such repository or revision, or access refused (gated, private).
    """
    from huggingface_hub import HfApi

    try:
        info = HfApi().model_info(model_id, revision=revision)
    except transport_errors():
        return None
    except Exception as exc:
        raise GeomlensError(hub_refusal(exc, model_id, revision)) from None
    return [s.rfilename for s in info.siblings or ()]


def hub_refusal(exc: BaseException, model_id: str, revision: str | None) -> str:
    """One sentence for a hub's refusal to list or serve a repository's files."""
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    repo = shown(model_id)
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, GatedRepoError) or status == 403:
        return (
            f"model {repo} is gated or private on the hub ({status or 'access refused'}): accept "
            "its terms on its hub page, then log in with `hf auth login` (or set HF_TOKEN) "
            "and rerun."
        )
    if isinstance(exc, RevisionNotFoundError):
        return (
            f"model {repo} has no revision {shown(revision or 'main')}; give a branch, tag or "
            "commit it has with --revision."
        )
    if isinstance(exc, RepositoryNotFoundError):
        return (
            f"no model {repo} on the hub at {shown(constants.ENDPOINT)} (or it is private): "
            "check the id's spelling, or log in with `hf auth login` if it is yours."
        )
    if isinstance(exc, HfHubHTTPError):
        return (
            f"the hub at {shown(constants.ENDPOINT)} answered {status} for model {repo}; "
            "retry later, or give a local folder with config.json."
        )
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return f"could not fetch model {repo} from the hub ({text[:120]}); retry later."


def check_weight_files(model_id: str, files: Iterable[str]) -> None:
    """Refuse a repository with no safetensors weights, before any file is downloaded.

    Raises:
        GeomlensError: naming the pickle files it holds instead, if any.
    """
    names = list(files)
    if any(f.endswith(".safetensors") for f in names):
        return
    pickles = sorted(f for f in names if f.endswith(PICKLES))
    held = (
        f" (it has {len(pickles)} pickle weight files such as {shown(pickles[0])})"
        if pickles
        else ""
    )
    raise GeomlensError(
        f"model {shown(model_id)} has no .safetensors weights on the hub{held}; geomlens "
        "never loads pickled weights, which can run code: use a repository or revision with "
        "safetensors, or convert the weights and give their folder."
    )


def download(model_id: str, revision: str | None, code: bool) -> Path:
    """The files ``ALLOW_PATTERNS`` names downloaded into the cache (resuming a partial
    download); huggingface_hub's progress bar on stderr."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError
    from huggingface_hub.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    stopped: tuple[type[BaseException], ...] = (*transport_errors(), LocalEntryNotFoundError)
    quiet = are_progress_bars_disabled()  # quiet_transformers turns the hub's bars off
    enable_progress_bars()
    try:
        path = snapshot_download(model_id, revision=revision, allow_patterns=patterns(code))
    except stopped as exc:
        from huggingface_hub import constants

        raise GeomlensError(
            f"the download of model {shown(model_id)} from the hub at "
            f"{shown(constants.ENDPOINT)} stopped ({type(exc).__name__}); rerun the same "
            "command to resume it: the files already fetched are kept."
        ) from None
    except Exception as exc:
        raise GeomlensError(hub_refusal(exc, model_id, revision)) from None
    finally:
        if quiet:
            disable_progress_bars()
    return Path(path)


def hub_record(source: str | Path, revision: str | None) -> dict[str, Any]:
    """What a manifest says of a model from the hub cache, under "hub": the revision asked
    for and the commit it resolved to (empty for a folder of the user's own)."""
    commit = snapshot_commit(source)
    return {} if commit is None else {"hub": {"revision": revision or "main", "commit": commit}}
