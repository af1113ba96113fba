"""``kernel-factory serve``: preview an index root on 127.0.0.1 (PEP 691 negotiation on folders)."""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .. import report
from ..errors import UsageError
from ..nofollow import private
from ..record import PEP691_JSON

HOST = "127.0.0.1"


def wants_json(accept: str | None) -> bool:
    """Whether an Accept header prefers PEP 691 JSON over HTML (q-values respected; ties go to JSON)."""
    if not accept:
        return False
    best_json = best_html = 0.0
    for part in accept.split(","):
        media, *params = [f.strip() for f in part.lower().split(";")]
        given = {key.strip(): value for key, _, value in (param.partition("=") for param in params)}  # the last wins
        q = 0.0
        with contextlib.suppress(ValueError):
            q = float(given.get("q", 1.0))
        if media == PEP691_JSON:
            best_json = max(best_json, q)
        elif media in ("application/vnd.pypi.simple.v1+html", "text/html", "*/*"):
            best_html = max(best_html, q)
    return best_json > 0 and best_json >= best_html


class IndexHandler(SimpleHTTPRequestHandler):
    """Static files with the content types pip and uv expect, and PEP 691 negotiation on folders."""

    extensions_map = {
        **SimpleHTTPRequestHandler.extensions_map,
        ".whl": "application/octet-stream",
        ".metadata": "application/octet-stream",
        ".json": "application/json",
        ".html": "text/html; charset=utf-8",
    }

    def send_head(self) -> Any:
        path = Path(self.translate_path(self.path))
        if not self._servable(path):  # the tool's own files, hidden names and links: as if not there
            self.send_error(404, "File not found")
            return None
        if path.is_dir() and self.path.split("?", 1)[0].endswith("/"):
            json_page = path / "index.json"
            if wants_json(self.headers.get("Accept")) and self._servable(json_page):
                return self._send_file(json_page, PEP691_JSON)
            html_page = path / "index.html"
            if self._servable(html_page):
                return self._send_file(html_page, "text/html; charset=utf-8")
            self.send_error(404, "File not found")  # never the base class's index.html (it follows links)
            return None
        return super().send_head()

    def _servable(self, path: Path) -> bool:
        """Whether ``path`` is a regular file or folder inside the root reached through no link, and no part of it
        below the root is private (nofollow.py ``private``: the lock, catalog, index state, temporary files)."""
        root = os.path.abspath(self.directory)
        rel = os.path.relpath(os.path.abspath(path), root)
        if rel == ".":
            return True
        if rel.startswith(".."):
            return False
        where = root
        for part in rel.split(os.sep):
            if private(part):
                return False
            where = os.path.join(where, part)
            try:
                st = os.lstat(where)
            except OSError:
                return False
            if not (stat.S_ISDIR(st.st_mode) or (stat.S_ISREG(st.st_mode) and where == os.path.join(root, rel))):
                return False  # a link, a FIFO, or a file that is not the last part
        return True

    def list_directory(self, path: str | os.PathLike[str]) -> Any:
        """No listings: an index root is served by its pages (and a listing would name private files)."""
        self.send_error(404, "File not found")
        return None

    def _send_file(self, path: Path, content_type: str) -> Any:
        f = open(path, "rb")  # noqa: SIM115 - the base class closes it after copyfile
        try:
            size = os.fstat(f.fileno()).st_size
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(size))
            self.send_header("Vary", "Accept")
            self.end_headers()
            return f
        except BaseException:
            f.close()
            raise


@dataclass(frozen=True)
class ServeArgs:
    """``serve``: the index root and the port (0: any free one)."""

    out: Path
    port: int


def run_serve(args: ServeArgs) -> int:
    root = args.out
    if not (root / "simple").is_dir():
        raise UsageError(f"{root} has no simple/ folder; run `kernel-factory index --out {root}` first")
    try:
        server = ThreadingHTTPServer((HOST, args.port), partial(IndexHandler, directory=str(root)))
    except OSError as exc:
        msg = f"cannot listen on {HOST}:{args.port} ({exc.strerror}); choose another --port (0: any free port)"
        raise UsageError(msg) from None
    url = f"http://{HOST}:{server.server_address[1]}"
    report.output(f"serving {root} at {url}/  (Ctrl-C stops)")
    report.output(f"  pip install <name>==<version>+<label> --index-url {url}/simple")
    report.output(f"  pip install <name> --index-url {url}/variants/<label>/simple")
    with server, contextlib.suppress(KeyboardInterrupt):  # the server closed, on Ctrl-C too
        server.serve_forever()
    return 0
