"""``kernel-factory serve --hub`` (docs/hub.md): an ASGI app around answers.py, served by uvicorn.

Each request is answered in a worker thread (reading the store and checking wheels block), and a file's bytes go
out ``wheels.CHUNK`` at a time as the client takes them: memory stays bounded whatever a variant's size.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import uvicorn

from .. import report
from ..config import Location
from ..errors import Refused, UsageError
from ..record import FILES, Record
from ..safe_text import printable
from .answers import Answer, answer
from .catalog import LOG, HubState
from .wheels import MemberStream

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class HubApp:
    def __init__(self, state: HubState) -> None:
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        started = time.monotonic()
        method = scope["method"]
        raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        query = scope.get("query_string", b"").decode("latin-1")
        got: Answer = await anyio.to_thread.run_sync(answer, self.state, method, raw_path, query)
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in got.headers]
        if not any(k == b"content-length" for k, _ in headers):
            headers.append((b"content-length", str(len(got.body)).encode()))
        await send({"type": "http.response.start", "status": got.status, "headers": headers})
        if got.stream is None:
            await send({"type": "http.response.body", "body": b"" if method == "HEAD" else got.body})
            sent, note = (len(got.body) if method != "HEAD" else 0), ""
        else:
            sent, note = await self._stream(got.stream, receive, send)
        LOG.info("%s %s %d %d %.3fs%s", method, printable(raw_path, 300), got.status, sent,
                 time.monotonic() - started, note)

    async def _stream(self, stream: MemberStream, receive: Receive, send: Send) -> tuple[int, str]:
        """Send a file's pieces as they are read, until the client is gone; (bytes sent, a note for the log)."""
        gone = anyio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        sent, note, pieces = 0, " (client gone)", iter(stream)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                try:
                    while not gone.is_set():
                        piece = await anyio.to_thread.run_sync(next, pieces, None)
                        if piece is None:
                            await send({"type": "http.response.body", "body": b"", "more_body": False})
                            note = ""
                            break
                        await send({"type": "http.response.body", "body": piece, "more_body": True})
                        sent += len(piece)
                except Refused as exc:  # the connection is closed short of Content-Length: the client sees an error
                    LOG.error("not served: %s", exc)
                    note = " (cut short: the wheel changed)"
                tg.cancel_scope.cancel()
        finally:
            await anyio.to_thread.run_sync(stream.close)
        return sent, note


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (OSError where it cannot be had)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


@dataclass(frozen=True)
class HubArgs:
    store: str
    host: str
    port: int
    allow_orgs: tuple[str, ...]


def run_hub(args: HubArgs) -> int:
    from ..store import load_records

    folder = Location.parse(args.store).local
    if folder is None:
        raise UsageError(f"--store {args.store}: serve --hub serves a store folder; copy the store to a folder "
                         f"first (e.g. `aws s3 sync {args.store} DIR`) and give --store DIR")
    if not (folder / FILES).is_dir():
        raise UsageError(f"--store {args.store}: no store there (no {FILES}/ folder); run `kernel-factory build` "
                         "first, or give the store's folder")
    said: set[str] = set()

    def load() -> list[Record]:
        damaged: list[str] = []
        records = load_records(folder, damaged)
        for line in damaged:
            if line not in said:  # the records are read again every few seconds: each line once
                said.add(line)
                report.warn(f"not served: {line}")
        return records

    state = HubState(folder, args.allow_orgs, load)
    kernels = state.repos()
    try:
        sock = listen(args.host, args.port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port} ({exc.strerror}); choose another --port "
                         "(0: any free port) or --host") from None
    host, port = sock.getsockname()[:2]
    url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    revisions = sum(len(r.revisions) for r in kernels.values())
    report.output(f"serving {folder} as a Hub at {url}  ({len(kernels)} kernels, {revisions} revisions; "
                  f"organisations: {', '.join(args.allow_orgs)}; Ctrl-C stops)")
    report.output(f"  HF_ENDPOINT={url} python -c \"import kernels; kernels.get_kernel('ORG/NAME', version=1)\"")
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    LOG.setLevel(logging.INFO)
    config = uvicorn.Config(HubApp(state), log_config=None, access_log=False, lifespan="off",
                            timeout_keep_alive=30, server_header=False)
    with sock, contextlib.suppress(KeyboardInterrupt):  # the socket closed, on Ctrl-C too
        uvicorn.Server(config).run(sockets=[sock])
    return 0
