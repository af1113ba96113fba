"""A TCP proxy on 127.0.0.1 that paces what the server sends to a given rate: a slow link, for a bench.

Every connection shares one link: the bytes of all of them together arrive at ``rate`` bytes a second (each
piece is sent when the link would have carried it, so a burst after an idle moment is not faster). What the
client sends goes through unpaced. The machine's own network is left alone (FACTS.md: shaping loopback with
``tc`` slows every test on the machine).
"""

from __future__ import annotations

import socket
import threading
import time

HOST = "127.0.0.1"
PIECE = 64 * 1024


class Link:
    """A link of ``rate`` bytes a second, shared by every connection (0: not paced)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._free_at = 0.0
        self._lock = threading.Lock()

    def carry(self, nbytes: int) -> None:
        """Wait until ``nbytes`` more have crossed the link after what was queued before."""
        if self.rate <= 0:
            return
        with self._lock:
            now = time.monotonic()
            start = max(self._free_at, now)
            self._free_at = start + nbytes / self.rate
            done = self._free_at
        delay = done - time.monotonic()
        if delay > 0:
            time.sleep(delay)


class PacedProxy:
    """Forwards 127.0.0.1:``port`` to ``upstream_port``; the answers cross ``Link(rate)``."""

    def __init__(self, upstream_port: int, rate: float) -> None:
        self.upstream_port = upstream_port
        self.link = Link(rate)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((HOST, 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://{HOST}:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, name="paced-proxy", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection((HOST, self.upstream_port))
        except OSError:
            client.close()
            return
        ask = threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True)
        ask.start()
        self._pump(upstream, client, True)
        ask.join()
        client.close()
        upstream.close()

    def _pump(self, src: socket.socket, dst: socket.socket, paced: bool) -> None:
        try:
            while data := src.recv(PIECE):
                if paced:
                    self.link.carry(len(data))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def close(self) -> None:
        self._closed = True
        self.sock.close()
