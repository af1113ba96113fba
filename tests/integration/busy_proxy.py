"""An HTTP proxy on 127.0.0.1 that answers "busy" (429/503 with Retry-After) to chosen requests.

Put it in front of moto (``AWS_ENDPOINT_URL``) or pypiserver (the upload URL): ``busy(n, methods=...)``
makes the next ``n`` requests with one of ``methods`` get ``status`` and ``body`` instead of being
forwarded; everything else is forwarded as is, request by request (keep-alive works).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from servers import in_thread

HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade", "content-length"}
SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")


class BusyProxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.busy_left = 0
        self.status = 503
        self.body = b""
        self.retry_after: str | None = "1"
        self.methods: tuple[str, ...] = ()
        self.path_end: str | None = None  # only requests whose path (before any query) ends so
        self.answered: list[str] = []  # "METHOD path" of every busy answer
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def busy(self, n: int, *, status: int = 503, methods: tuple[str, ...] = ("GET", "HEAD", "PUT", "POST"),
             body: bytes = b"busy", retry_after: str | None = "1", path_end: str | None = None) -> None:
        with self.lock:
            self.busy_left, self.status, self.methods = n, status, methods
            self.body, self.retry_after, self.path_end = body, retry_after, path_end

    def take_busy(self, method: str, path: str) -> bool:
        with self.lock:
            if self.busy_left <= 0 or method not in self.methods:
                return False
            if self.path_end is not None and not path.split("?", 1)[0].endswith(self.path_end):
                return False
            self.busy_left -= 1
            self.answered.append(f"{method} {path}")
            return True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: BusyProxy

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        body = self._body()
        srv = self.server
        if srv.take_busy(self.command, self.path):
            self.send_response(srv.status)
            if srv.retry_after is not None:
                self.send_header("Retry-After", srv.retry_after)
            self.send_header("Content-Type", "application/xml" if srv.body.startswith(b"<?xml") else "text/plain")
            self.send_header("Content-Length", str(len(srv.body)))
            self.end_headers()
            self.wfile.write(srv.body)
            return
        conn = http.client.HTTPConnection(*srv.upstream, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            conn.request(self.command, self.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            self.send_response(resp.status, resp.reason)
            for key, value in resp.getheaders():
                if key.lower() not in HOP:
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data) if self.command != "HEAD" else
                                                   resp.getheader("Content-Length") or 0))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        finally:
            conn.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle


@contextmanager
def busy_proxy(upstream: str) -> Iterator[BusyProxy]:
    with in_thread(BusyProxy(upstream)) as proxy:
        yield proxy
