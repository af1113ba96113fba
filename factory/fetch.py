"""Every HTTP GET of an index (pages, records, wheels): redirects followed by hand, each hop checked on the URL the
client will send before it is sent, and a deadline that no server can stretch (the rules and their figures:
docs/download.md, "What the index may not do"). The deadline is a timer signal (SIGALRM), which interrupts a
blocked read: it applies in the main thread (the command line); in another thread only the per-read timeout does.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urljoin

from .errors import Refused, Unreachable
from .safe_text import printable

PAGE_DEADLINE_S = 60.0  #: seconds one page (or record) may take, from the first request to its last byte
WHEEL_GRACE_S = 30.0  #: seconds a wheel's download may take before its rate is judged
MIN_RATE = 64 * 1024  #: bytes a second a wheel's download keeps on average, after the grace
READ_TIMEOUT_S = 60.0  #: seconds one connect or socket read may wait
MAX_REDIRECTS = 5  #: redirects followed for one request
_REDIRECTS = (301, 302, 303, 307, 308)


class _Expired(BaseException):
    """Raised by the timer inside whatever read was waiting (a BaseException: no library catches it as its own)."""


def _on_alarm(signum: int, frame: object) -> None:
    raise _Expired


class Clock:
    """The deadline of one transfer: ``until(t)`` (a ``time.monotonic()`` instant) arms the timer, ``done`` stops
    it. Outside the main thread it arms nothing."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self._armed = threading.current_thread() is threading.main_thread()
        self._previous: Any = signal.signal(signal.SIGALRM, _on_alarm) if self._armed else None

    def until(self, at: float) -> None:
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, max(at - time.monotonic(), 1e-3))

    def done(self) -> None:
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL if self._previous is None else self._previous)
            self._armed = False


def origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL as urllib3 reads it (the parser requests sends with); None for any
    other URL or one it cannot read."""
    from urllib3.exceptions import LocationParseError
    from urllib3.util import parse_url

    try:
        parts = parse_url(url)
    except (LocationParseError, ValueError):
        return None
    scheme = (parts.scheme or "").lower()
    if scheme not in ("http", "https") or not parts.host:
        return None
    return scheme, parts.host.lower(), parts.port or (443 if scheme == "https" else 80)


def sent_url(url: str, session: Any) -> str:
    """``url`` as the session will send it (prepared: quoted, normalised); Refused where it cannot be sent."""
    import requests

    try:
        return str(session.prepare_request(requests.Request("GET", url)).url)
    except (requests.RequestException, ValueError) as exc:
        raise Refused(f"{printable(url, 200)} is not a URL the HTTP client can send ({type(exc).__name__}); "
                      "fix the index") from None


def check(url: str, root: str, session: Any) -> str:
    """The URL the session will send for ``url`` (a link, a redirect's target), Refused unless it is on the
    origin of the index at ``root``."""
    sent = sent_url(url, session)
    home = origin(sent_url(root, session))
    if home is None or origin(sent) != home:
        raise Refused(f"{root} links to {printable(sent, 200)}, which is not on the index's own origin; nothing "
                      "is read from there: fix the index")
    return sent


@contextmanager
def get(url: str, root: str, session: Any, *, headers: dict[str, str], what: str) -> Iterator[Any]:
    """The streamed response to a GET of ``url`` (on the origin of ``root``), its redirects followed by hand and
    each target checked before it is asked for (Refused when one is not on that origin); requests' errors go to
    the caller. A response whose status is not a redirect is the caller's to judge."""
    import requests

    sent = check(url, root, session)
    for hop in range(MAX_REDIRECTS + 1):
        request = session.prepare_request(requests.Request("GET", sent, headers=headers))
        settings = session.merge_environment_settings(request.url, {}, True, None, None)  # proxies, certificates
        resp = session.send(request, allow_redirects=False, timeout=READ_TIMEOUT_S, **settings)
        with resp:
            location = resp.headers.get("Location") if resp.status_code in _REDIRECTS else None
            if location is None:
                yield resp
                return
            if hop == MAX_REDIRECTS:
                raise Unreachable(f"{what}: {url} redirects more than {MAX_REDIRECTS} times; check the index")
            sent = check(urljoin(sent, location), root, session)


def expired(what: str, url: str, clock: Clock, limit: str) -> Unreachable:
    """The one line of a transfer that ran out of time."""
    return Unreachable(f"{what}: {url} was not read in time ({time.monotonic() - clock.start:.0f} s; {limit}); nothing "
                       "was installed: check the index and the network")


@contextmanager
def _timed(what: str, url: str, limit: str, failed: str) -> Iterator[Clock]:
    """A transfer's clock, and its errors as one line: out of time (``expired``, naming ``limit``), or requests' own
    ("{what}: cannot ``failed``"); the timer stopped either way."""
    import requests

    clock = Clock()
    try:
        yield clock
    except _Expired:
        raise expired(what, url, clock, limit) from None
    except requests.RequestException as exc:
        raise Unreachable(f"{what}: cannot {failed.format(url=url, error=type(exc).__name__)}") from None
    finally:
        clock.done()


def read_page(url: str, root: str, session: Any, *, headers: dict[str, str], what: str,
              take: Callable[[bytes], None]) -> tuple[int, str]:
    """GET ``url`` whole within ``PAGE_DEADLINE_S``, each chunk of the body given to ``take`` (which may raise to
    stop); (status, content type). Only a 200's body is read."""
    with _timed(what, url, f"a page may take {PAGE_DEADLINE_S:.0f} s",
                "reach {url} ({error}); check the URL and that the index is served") as clock:
        clock.until(clock.start + PAGE_DEADLINE_S)
        with get(url, root, session, headers=headers, what=what) as resp:
            if resp.status_code == 200:
                for chunk in resp.iter_content(1 << 16):
                    take(chunk)
            return int(resp.status_code), str(resp.headers.get("Content-Type", ""))


def read_wheel(url: str, root: str, session: Any, *, size: int | None, headers: dict[str, str], what: str,
               take: Callable[[bytes], None], chunk: int = 1 << 20) -> int:
    """GET ``url``, each chunk of a 200's body given to ``take``; the wheel must keep ``MIN_RATE`` on average
    after ``WHEEL_GRACE_S`` (``size``, where known, tells how big the last chunk is); the status."""
    def due(received: int, total: int | None) -> float:
        target = received + chunk if total is None else min(received + chunk, total)
        return clock.start + WHEEL_GRACE_S + target / MIN_RATE

    with _timed(what, url, f"a wheel must come at {MIN_RATE // 1024} KiB/s on average after "
                f"{WHEEL_GRACE_S:.0f} s", "download {url} ({error}); check the network") as clock:
        clock.until(due(0, size))
        with get(url, root, session, headers=headers, what=what) as resp:
            if resp.status_code != 200:
                return int(resp.status_code)
            length = resp.headers.get("Content-Length")
            total = size if size is not None else int(length) if length and length.isdigit() else None
            clock.until(due(0, total))
            got = 0
            for part in resp.iter_content(chunk):
                got += len(part)
                take(part)
                clock.until(due(got, total))
            return 200
