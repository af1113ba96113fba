"""A bench's Hub on 127.0.0.1: the API from olah, every file body from a copy on disk, as a CDN serves them.

On the real Hub, file bodies come from a CDN on other machines and cost the mirror's machine no CPU. olah
(Python) reads every file whole through gitdb before it sends a byte: on a 2-core machine it cannot serve a
150 MB file faster than ~20-35 MB/s while conversions run, so a bench against olah measures olah.

This front sits between the client and olah:

- a ``/resolve/`` request (GET or HEAD) is answered from its copy on disk: the status, the headers olah sent
  (ETag, X-Repo-Commit, Content-Length, X-Linked-Etag/X-Linked-Size, Location of a redirect: every header
  but the hop-by-hop ones) and the body, sent with ``os.sendfile``. The first request for a resolve URL
  goes to olah and keeps its answer (a 2xx or 3xx; anything else is passed on, not kept): one *cold* pass
  fills the copy before anything is timed, and each miss is logged (``miss <method> <path>`` on stderr) so
  that a bench can check that no timed run reached olah for a file;
- every other request (refs, revision info, tree listings, paths-info) goes to olah, each time.

Everything the front sends (headers, API answers, file bodies) crosses one ``Link`` of ``--rate`` bytes a
second shared by every connection (0: unpaced). A Range request gets the whole body with 200, as olah
answers it (huggingface_hub then starts the file over).

    python scripts/hub_cdn.py --upstream-port 8090 --cache /tmp/cdn --rate 45e6

prints the port it listens on, then serves until it is terminated.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
from hub_server import Link  # noqa: E402  (one paced link for the tests' proxy and this front)

HOST = "127.0.0.1"
PACED_PIECE = 256 * 1024  # bytes sent per wait on a paced link
PIECE = 8 * 1024 * 1024  # bytes per sendfile call when unpaced
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection", "date",
       "server"}


class Front(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, upstream_port: int, cache: Path, rate: float) -> None:
        super().__init__((HOST, 0), Handler)
        self.upstream_port = upstream_port
        self.cache = cache
        self.link = Link(rate)
        self.piece = PACED_PIECE if rate > 0 else PIECE
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def lock_for(self, key: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(key, threading.Lock())


Head = tuple[int, list[tuple[str, str]]]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Front

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:
        self._answer()

    def do_HEAD(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            if self.command in ("GET", "HEAD") and "/resolve/" in urlsplit(self.path).path:
                self._resolve()
            else:
                status, headers, data = self._upstream(body)
                self._send_head(status, headers, None if self.command == "HEAD" else len(data))
                if self.command != "HEAD":
                    self._send_bytes(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _upstream(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        """olah's whole answer to this request."""
        conn = http.client.HTTPConnection(HOST, self.server.upstream_port, timeout=600)
        try:
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in HOP and k.lower() not in ("host", "content-length")}
            conn.request(self.command, self.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP], data
        finally:
            conn.close()

    def _resolve(self) -> None:
        key = hashlib.sha256(f"{self.command} {self.path}".encode()).hexdigest()
        head_file, body_file = self.server.cache / f"{key}.head", self.server.cache / f"{key}.body"
        with self.server.lock_for(key):
            if not head_file.exists():
                print(f"miss {self.command} {self.path}", file=sys.stderr, flush=True)
                status, headers, data = self._upstream(b"")
                if not 200 <= status < 400:
                    self._send_head(status, headers, None if self.command == "HEAD" else len(data))
                    if self.command != "HEAD":
                        self._send_bytes(data)
                    return
                tmp = body_file.with_suffix(".tmp")
                tmp.write_bytes(data)
                os.replace(tmp, body_file)
                entry = {"status": status, "headers": headers}
                tmp = head_file.with_suffix(".tmp")
                tmp.write_text(json.dumps(entry))
                os.replace(tmp, head_file)  # last: a head on disk always has its body
        entry = json.loads(head_file.read_text())
        headers = [(k, v) for k, v in entry["headers"]]
        size = body_file.stat().st_size
        if self.command == "HEAD":
            self._send_head(entry["status"], headers, None)
            return
        self._send_head(entry["status"], headers, size)
        self._send_file(body_file, size)

    def _send_head(self, status: int, headers: list[tuple[str, str]], length: int | None) -> None:
        """The status line and ``headers``; Content-Length ``length``, or olah's where None (a HEAD's: the
        length of the file it would send)."""
        lines = [f"HTTP/1.1 {status} {http.client.responses.get(status, '')}"]
        lines += [f"{k}: {v}" for k, v in headers if length is None or k.lower() != "content-length"]
        if length is not None:
            lines.append(f"Content-Length: {length}")
        data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self._send_bytes(data)

    def _send_bytes(self, data: bytes) -> None:
        view = memoryview(data)
        for at in range(0, len(view), self.server.piece):
            piece = view[at:at + self.server.piece]
            self.server.link.carry(len(piece))
            self.connection.sendall(piece)

    def _send_file(self, path: Path, size: int) -> None:
        out = self.connection.fileno()
        with open(path, "rb") as f:
            offset = 0
            while offset < size:
                n = min(self.server.piece, size - offset)
                self.server.link.carry(n)
                end = offset + n
                while offset < end:
                    sent = os.sendfile(out, f.fileno(), offset, end - offset)
                    if sent == 0:
                        raise BrokenPipeError("the client closed the connection")
                    offset += sent


class HubCdn:
    """The front in its own process (its CPU time measurable apart from the bench's, from ``proc``): ``url``,
    ``misses()`` (resolve requests that went to olah so far), ``close()``."""

    def __init__(self, upstream_port: int, cache: Path, rate: float, log: Path) -> None:
        cache.mkdir(parents=True, exist_ok=True)
        self.log = log
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--upstream-port", str(upstream_port), "--cache", str(cache),
                 "--rate", str(rate)], stdout=subprocess.PIPE, stderr=err)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Hub front did not start: {log.read_text()[-2000:]}")
        self.url = f"http://{HOST}:{int(line)}"

    def misses(self) -> int:
        return sum(1 for line in self.log.read_text().splitlines() if line.startswith("miss "))

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--upstream-port", type=int, required=True, help="olah's port on 127.0.0.1")
    ap.add_argument("--cache", type=Path, required=True, help="the folder of the copies of resolve answers")
    ap.add_argument("--rate", type=float, default=0, help="bytes a second of the link (0: unpaced)")
    args = ap.parse_args()
    front = Front(args.upstream_port, args.cache, args.rate)
    print(front.server_address[1], flush=True)
    front.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
