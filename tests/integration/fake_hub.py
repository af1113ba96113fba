"""A hostile Hub on 127.0.0.1: it answers the refs and commits endpoints with whatever a test sets.

``FakeHub`` serves ``/api/kernels/<org>/<name>/refs`` (``refs``), ``.../commits/<sha>``
(``pages``: a list of (JSON body, headers) answered in turn, by ``?page=N``; ``refs_error``: a status and
headers to answer the refs endpoint with instead, as the Hub does for a gated or unknown repository),
``.../tree/<sha>/<path>`` (``trees``, the same way; empty when unset), ``.../tree/<sha>`` (``root_tree``, else
``trees``), ``.../revision/<sha>`` (the sha) and the organisation listing ``/api/kernels?author=``
(``listing``, by page); paths with a ``busy`` part answer 503; anything else is 404.
``Recorder`` answers 200 to anything and keeps every request's path and ``Authorization`` header,
to show what a client sent to a host it should not have talked to. Both run in a thread of the test
process and record every request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from servers import in_thread

HOST = "127.0.0.1"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__((HOST, 0), _Handler)
        self.seen: list[tuple[str, str | None]] = []  # (path, Authorization header)
        self.refs: dict[str, Any] = {"branches": [], "tags": [], "converts": []}
        self.pages: list[tuple[Any, dict[str, str]]] = []
        self.trees: list[tuple[Any, dict[str, str]]] = []
        self.listing: list[tuple[Any, dict[str, str]]] = []
        self.busy: tuple[str, ...] = ()  # paths containing one of these answer 503 (Retry-After: 0)
        self.root_tree: list[tuple[Any, dict[str, str]]] = []  # .../tree/<sha> (no path): snapshot_download's
        self.refs_error: tuple[int, dict[str, str]] | None = None
        self.record_only = False

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        if self.server.record_only:
            self._answer(200, [])
            return
        parts = urlsplit(self.path)
        page = int(parse_qs(parts.query).get("page", ["0"])[0])
        if parts.path.endswith("/refs") and self.server.refs_error is not None:
            status, headers = self.server.refs_error
            self._answer(status, {"error": "refused"}, headers)
        elif any(part in parts.path for part in self.server.busy):
            self._answer(503, {"error": "busy"}, {"Retry-After": "0"})
        elif parts.path.endswith("/refs"):
            self._answer(200, self.server.refs)
        elif "/commits/" in parts.path and self.server.pages:
            self._answer(200, *self.server.pages[min(page, len(self.server.pages) - 1)])
        elif "/tree/" in parts.path:
            at_root = parts.path.rsplit("/", 2)[-2] == "tree" and self.server.root_tree
            trees = (self.server.root_tree if at_root else self.server.trees) or [([], {})]
            self._answer(200, *trees[min(page, len(trees) - 1)])
        elif "/revision/" in parts.path:
            sha = parts.path.rsplit("/", 1)[-1]
            self._answer(200, {"id": "/".join(parts.path.split("/")[3:5]), "sha": sha, "siblings": []})
        elif parts.path == "/api/kernels" and self.server.listing:
            self._answer(200, *self.server.listing[min(page, len(self.server.listing) - 1)])
        else:
            self._answer(404, {"error": "not found"}, {"X-Error-Code": "EntryNotFound"})


@contextmanager
def fake_hub(*, record_only: bool = False) -> Iterator[_Server]:
    server = _Server()
    server.record_only = record_only
    with in_thread(server):
        yield server


def branch(name: str, sha: str) -> dict[str, str]:
    return {"name": name, "ref": f"refs/heads/{name}", "targetCommit": sha}


def folder(path: str) -> dict[str, Any]:
    return {"type": "directory", "oid": "0" * 40, "path": path}


def commit(sha: str) -> dict[str, Any]:
    return {"id": sha, "title": "kernel", "message": "", "authors": [], "date": "2025-05-05T08:00:00.000Z"}
