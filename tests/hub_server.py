"""A small Hugging Face hub on 127.0.0.1 for the download tests: the file protocol
huggingface_hub speaks (read from its source, version 2.x), over real HTTP.

- ``GET /api/models/{repo}[/revision/{rev}]``: the repository's info (``sha``, ``siblings``,
  ``gated``) at its main branch or at ``rev``;
- ``GET /api/models/{repo}/tree/{rev}``: its files (``path``, ``size``, ``oid``, ``lfs``);
- ``HEAD``/``GET /{repo}/resolve/{rev}/{file}``: a file, with ``X-Repo-Commit``, ``ETag``,
  ``X-Linked-Etag``/``X-Linked-Size`` for weights, and byte ranges (206) for a resumed download.

Errors as the hub sends them: 404 with ``X-Error-Code: RepoNotFound`` (``RevisionNotFound``,
``EntryNotFound``), and a gated repository's files refused with 401 or 403 and
``X-Error-Code: GatedRepo``; a file in ``cut`` is sent half, then the connection closes. Every request is recorded (``requests``). The server binds
127.0.0.1 only, on a free port; ``serve`` stops it when its block ends.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


@dataclass
class Repo:
    """One repository at one commit: its files by name; ``gated`` is the status (401 or
    403) its files are refused with, None for an open one."""

    files: dict[str, bytes]
    sha: str = "0123456789abcdef0123456789abcdef01234567"
    gated: int | None = None

    @classmethod
    def of_folder(cls, folder: Path, **more: object) -> Repo:
        """The files of a saved model folder (and ``more``'s fields)."""
        files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
        return cls(files, **more)  # type: ignore[arg-type]


def etag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Hub:
    """The repositories served, by id, and the requests seen: (method, path, Range)."""

    repos: dict[str, Repo]
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    url: str = ""
    cut: set[str] = field(default_factory=set)
    """Files whose every download stops half-way (the connection closes)."""

    def fetched(self) -> set[str]:
        """The files any GET of ``/resolve/`` asked for."""
        return {
            p.rsplit("/", 1)[-1] for m, p, _ in self.requests if m == "GET" and "/resolve/" in p
        }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub: Hub

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self.answer(body=False)

    def do_GET(self) -> None:
        self.answer(body=True)

    def answer(self, body: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        self.hub.requests.append((self.command, path, self.headers.get("Range")))
        api = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/(revision|tree)/([^/]+)(/.*)?)?", path)
        resolve = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if api is not None:
            repo = self.repo(api.group(1), api.group(3) or "main", body)
            if repo is not None:
                self.api(api.group(1), api.group(2) or "revision", repo, body)
        elif resolve is not None:
            repo = self.repo(resolve.group(1), resolve.group(2), body)
            if repo is not None:
                self.file(repo, resolve.group(3), body)
        else:
            self.error(404, "RepoNotFound", "not a hub endpoint", body)

    def repo(self, repo_id: str, revision: str, body: bool) -> Repo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self.error(404, "RepoNotFound", "Repository not found", body)
        elif revision not in (repo.sha, "main"):
            self.error(404, "RevisionNotFound", "Invalid rev id", body)
        else:
            return repo
        return None

    def api(self, repo_id: str, kind: str, repo: Repo, body: bool) -> None:
        if kind == "revision":
            data: object = {
                "id": repo_id,
                "modelId": repo_id,
                "sha": repo.sha,
                "private": False,
                "gated": "manual" if repo.gated else False,
                "siblings": [{"rfilename": name} for name in repo.files],
            }
        else:
            data = [
                {
                    "type": "file",
                    "path": name,
                    "size": len(content),
                    "oid": hashlib.sha1(content).hexdigest(),
                    **(
                        {"lfs": {"oid": etag(content), "size": len(content), "pointerSize": 134}}
                        if name.endswith((".safetensors", ".bin"))
                        else {}
                    ),
                }
                for name, content in repo.files.items()
            ]
        self.send(200, json.dumps(data).encode(), {"Content-Type": "application/json"}, body)

    def file(self, repo: Repo, name: str, body: bool) -> None:
        if repo.gated is not None:
            self.error(repo.gated, "GatedRepo", "Access to this model is restricted.", body)
            return
        if name not in repo.files:
            self.error(404, "EntryNotFound", "Entry not found", body)
            return
        content = repo.files[name]
        headers = {
            "X-Repo-Commit": repo.sha,
            "ETag": f'"{etag(content)}"',
            "Accept-Ranges": "bytes",
        }
        if name.endswith((".safetensors", ".bin")):
            headers |= {"X-Linked-Etag": f'"{etag(content)}"', "X-Linked-Size": str(len(content))}
        status, ranged = 200, re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
        if ranged is not None and body:
            start = int(ranged.group(1))
            headers["Content-Range"] = f"bytes {start}-{len(content) - 1}/{len(content)}"
            status, content = 206, content[start:]
        if body and name in self.hub.cut:
            self.send(status, content, headers, body, stop=len(content) // 2)
            return
        self.send(status, content, headers, body)

    def error(self, status: int, code: str, message: str, body: bool) -> None:
        headers = {"X-Error-Code": code, "X-Error-Message": message}
        data = json.dumps({"error": message}).encode()
        self.send(status, data, {**headers, "Content-Type": "application/json"}, body)

    def send(
        self, status: int, data: bytes, headers: dict[str, str], body: bool, stop: int | None = None
    ) -> None:
        """The response; with ``stop``, only that many bytes of its body, then the
        connection closes."""
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data[:stop])
        if stop is not None:
            self.wfile.flush()
            self.close_connection = True


@contextmanager
def serve(repos: dict[str, Repo]) -> Iterator[Hub]:
    """A hub serving ``repos`` on 127.0.0.1 (a free port) for the block's length."""
    hub = Hub(repos)
    handler = type("BoundHandler", (Handler,), {"hub": hub})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
