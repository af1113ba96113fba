"""factory/fetch.py: one URL parser for the check and the request, redirects followed by hand and checked before
they are sent, a deadline per page and a minimum rate per wheel (no socket: a requests adapter answers)."""

from __future__ import annotations

import io
import signal
import threading
import time
from typing import Any

import pytest
import requests
from kernel_factory import fetch, simple
from kernel_factory.errors import Refused, Unreachable

INDEX = "http://127.0.0.1:8000"


class Slow(io.RawIOBase):
    """A body that gives ``step`` bytes a read, after ``wait`` seconds each."""

    def __init__(self, body: bytes, wait: float, step: int = 1) -> None:
        self.body, self.wait, self.step = body, wait, step

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self.body:  # the end comes at once, as after a Content-Length's bytes
            time.sleep(self.wait)
        out, self.body = self.body[:self.step], self.body[self.step:]
        return out


class Scripted(requests.adapters.BaseAdapter):
    """Answers each URL from ``answers``: (status, headers, body bytes or a raw stream); 404 for the rest."""

    def __init__(self, answers: dict[str, tuple[int, dict[str, str], Any]]) -> None:
        super().__init__()
        self.answers = answers
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send(self, request: requests.PreparedRequest, stream: bool = False,
             timeout: float | tuple[float | None, float | None] | None = None, verify: bool | str = True,
             cert: str | tuple[str, str] | None = None, proxies: dict[str, str] | None = None) -> requests.Response:
        url = str(request.url)
        self.sent.append((url, {"stream": stream, "timeout": timeout}))
        status, headers, body = self.answers.get(url, (404, {}, b""))
        resp = requests.Response()
        resp.request, resp.url, resp.status_code = request, url, status
        resp.headers.update(headers)
        resp.raw = io.BytesIO(body) if isinstance(body, bytes) else body
        return resp

    def close(self) -> None:
        pass


def session(answers: dict[str, tuple[int, dict[str, str], Any]]) -> tuple[requests.Session, Scripted]:
    s = requests.Session()
    adapter = Scripted(answers)
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    return s, adapter


def page(url: str, s: requests.Session) -> tuple[int, str, bytes]:
    got: list[bytes] = []
    status, kind = fetch.read_page(url, INDEX, s, headers={}, what="--index-url", take=got.append)
    return status, kind, b"".join(got)


# -- one parser ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "seen"), [
    ("http://127.0.0.1/x", ("http", "127.0.0.1", 80)),
    ("https://127.0.0.1/x", ("https", "127.0.0.1", 443)),
    ("HTTP://Idx.Example:81/x", ("http", "idx.example", 81)),
    ("http://u:p@127.0.0.1:9/x", ("http", "127.0.0.1", 9)),
    ("http://127.0.0.1:5\\@127.0.0.1:6/x", ("http", "127.0.0.1", 5)),  # urlsplit says port 6; the client sends to 5
    ("http://a@b@127.0.0.1:7/", ("http", "127.0.0.1", 7)),
    ("file:///srv/x", None),
    ("ftp://127.0.0.1/x", None),
    ("http:///x", None),
    ("http://127.0.0.1:99999999/x", None),
])  # fmt: skip
def test_origin_is_the_clients_reading(url: str, seen: tuple[str, str, int] | None) -> None:
    assert fetch.origin(url) == seen


def test_a_url_the_client_sends_elsewhere_is_refused_as_sent() -> None:
    s, adapter = session({})
    with pytest.raises(Refused) as info:
        fetch.check("http://127.0.0.1:9\\@127.0.0.1:8000/files/k.whl", INDEX, s)
    assert str(info.value) == (f"{INDEX} links to http://127.0.0.1:9/%5C@127.0.0.1:8000/files/k.whl, which is not on "
                               "the index's own origin; nothing is read from there: fix the index")
    assert adapter.sent == []


@pytest.mark.parametrize("link", ["http://127.0.0.1:8000/files/k.whl", "HTTP://127.0.0.1:8000/files/k.whl",
                                  "http://127.0.0.1:8000/a/../files/k.whl"])
def test_a_link_on_the_origin_comes_back_as_sent(link: str) -> None:
    s, _ = session({})
    assert fetch.check(link, INDEX, s) == "http://127.0.0.1:8000/files/k.whl"


def test_a_url_the_client_cannot_send_is_refused() -> None:
    s, _ = session({})
    with pytest.raises(Refused, match=r"^http://\[::1 is not a URL the HTTP client can send \(InvalidURL\); fix the "
                                      "index$"):
        fetch.check("http://[::1", INDEX, s)


def test_an_index_url_with_a_backslash_before_its_host_is_a_usage_error() -> None:
    from kernel_factory.errors import UsageError

    with pytest.raises(UsageError, match=r"has a backslash before its host"):
        simple.index_root("http://127.0.0.1:9\\@127.0.0.1:8000")
    assert simple.index_root("http://127.0.0.1:8000/a\\b/") == "http://127.0.0.1:8000/a\\b"


# -- redirects -------------------------------------------------------------------------------------------------


def test_redirects_on_the_origin_are_followed_by_hand() -> None:
    s, adapter = session({
        f"{INDEX}/a": (301, {"Location": "/b"}, b""),
        f"{INDEX}/b": (307, {"Location": f"{INDEX}/c?x=1"}, b""),
        f"{INDEX}/c?x=1": (200, {"Content-Type": "text/html"}, b"<html>"),
    })
    assert page(f"{INDEX}/a", s) == (200, "text/html", b"<html>")
    assert [u for u, _ in adapter.sent] == [f"{INDEX}/a", f"{INDEX}/b", f"{INDEX}/c?x=1"]
    assert all(how["stream"] is True and how["timeout"] == fetch.READ_TIMEOUT_S for _, how in adapter.sent)


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_off_the_origin_is_refused_before_it_is_sent(code: int) -> None:
    s, adapter = session({f"{INDEX}/a": (code, {"Location": "http://127.0.0.1:8001/a"}, b"")})
    with pytest.raises(Refused) as info:
        page(f"{INDEX}/a", s)
    assert str(info.value) == (f"{INDEX} links to http://127.0.0.1:8001/a, which is not on the index's own origin; "
                               "nothing is read from there: fix the index")
    assert [u for u, _ in adapter.sent] == [f"{INDEX}/a"]


def test_at_most_max_redirects_are_followed() -> None:
    hops = {f"{INDEX}/{i}": (302, {"Location": f"/{i + 1}"}, b"") for i in range(fetch.MAX_REDIRECTS + 1)}
    s, adapter = session({**hops, f"{INDEX}/{fetch.MAX_REDIRECTS}": (200, {}, b"ok")})
    assert page(f"{INDEX}/0", s)[2] == b"ok"
    s, adapter = session(hops)
    with pytest.raises(Unreachable) as info:
        page(f"{INDEX}/0", s)
    assert str(info.value) == f"--index-url: {INDEX}/0 redirects more than 5 times; check the index"
    assert len(adapter.sent) == fetch.MAX_REDIRECTS + 1


def test_a_redirect_without_a_location_is_the_callers_answer() -> None:
    s, _ = session({f"{INDEX}/a": (302, {}, b"moved")})
    assert page(f"{INDEX}/a", s) == (302, "", b"")


def test_a_failed_request_is_unreachable() -> None:
    class Failing(Scripted):
        def send(self, request: requests.PreparedRequest, stream: bool = False,
                 timeout: float | tuple[float | None, float | None] | None = None, verify: bool | str = True,
                 cert: str | tuple[str, str] | None = None, proxies: dict[str, str] | None = None
                 ) -> requests.Response:
            raise requests.ConnectionError("refused")

    s = requests.Session()
    s.mount("http://", Failing({}))
    with pytest.raises(Unreachable) as info:
        page(f"{INDEX}/a", s)
    assert str(info.value) == (f"--index-url: cannot reach {INDEX}/a (ConnectionError); check the URL and that the "
                               "index is served")
    with pytest.raises(Unreachable) as info:
        fetch.read_wheel(f"{INDEX}/k.whl", INDEX, s, size=None, headers={}, what="--index-url", take=print)
    assert str(info.value) == f"--index-url: cannot download {INDEX}/k.whl (ConnectionError); check the network"


# -- deadlines -------------------------------------------------------------------------------------------------


def test_a_page_must_be_read_whole_within_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch, "PAGE_DEADLINE_S", 1.0)
    s, _ = session({f"{INDEX}/a": (200, {}, Slow(b"x" * 100, 0.1))})  # 10 bytes a second: 10 s
    start = time.monotonic()
    with pytest.raises(Unreachable) as info:
        page(f"{INDEX}/a", s)
    assert 1.0 <= time.monotonic() - start < 1.4
    assert str(info.value) == (f"--index-url: {INDEX}/a was not read in time (1 s; a page may take 1 s); nothing was "
                               "installed: check the index and the network")
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_page_in_time_is_read_and_the_timer_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    def mine(signum: int, frame: object) -> None:
        raise AssertionError("the timer fired after the page")

    previous = signal.signal(signal.SIGALRM, mine)
    try:
        s, _ = session({f"{INDEX}/a": (200, {}, Slow(b"abc", 0.01, 2))})
        assert page(f"{INDEX}/a", s)[2] == b"abc"
        assert signal.getsignal(signal.SIGALRM) is mine and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.signal(signal.SIGALRM, previous)


def wheel(url: str, s: requests.Session, size: int | None = None, chunk: int = 4) -> bytes:
    got: list[bytes] = []
    assert fetch.read_wheel(url, INDEX, s, size=size, headers={}, what="--index-url", take=got.append,
                            chunk=chunk) == 200
    return b"".join(got)


def test_a_wheel_below_the_minimum_rate_after_the_grace_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch, "WHEEL_GRACE_S", 0.3)
    monkeypatch.setattr(fetch, "MIN_RATE", 40)  # 4-byte chunks: one due every 0.1 s after the grace
    s, _ = session({f"{INDEX}/k.whl": (200, {}, Slow(b"x" * 40, 0.15, 4))})  # 4 bytes every 0.15 s: too slow
    start = time.monotonic()
    with pytest.raises(Unreachable) as info:
        wheel(f"{INDEX}/k.whl", s)
    took = time.monotonic() - start
    assert 0.4 <= took < 1.0, took
    assert str(info.value).startswith(f"--index-url: {INDEX}/k.whl was not read in time (")
    assert str(info.value).endswith(" s; a wheel must come at 0 KiB/s on average after 0 s); nothing was installed: "
                                    "check the index and the network")


def test_a_wheel_at_the_minimum_rate_arrives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch, "WHEEL_GRACE_S", 0.2)
    monkeypatch.setattr(fetch, "MIN_RATE", 40)
    s, _ = session({f"{INDEX}/k.whl": (200, {}, Slow(b"y" * 40, 0.05, 4))})  # twice the rate
    assert wheel(f"{INDEX}/k.whl", s) == b"y" * 40


def test_a_wheels_known_size_bounds_its_last_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """6 bytes at 40 bytes/s after a grace of 0.2 s are due at 0.35 s, whatever the chunk size; Content-Length
    counts where the page gives no size."""
    monkeypatch.setattr(fetch, "WHEEL_GRACE_S", 0.2)
    monkeypatch.setattr(fetch, "MIN_RATE", 40)
    for size, headers in ((6, {}), (None, {"Content-Length": "6"})):
        s, _ = session({f"{INDEX}/k.whl": (200, headers, Slow(b"z" * 6, 0.25, 6))})
        assert wheel(f"{INDEX}/k.whl", s, size=size, chunk=1 << 20) == b"z" * 6
        s, _ = session({f"{INDEX}/k.whl": (200, headers, Slow(b"z" * 6, 0.45, 6))})
        with pytest.raises(Unreachable):
            wheel(f"{INDEX}/k.whl", s, size=size, chunk=1 << 20)


def test_a_wheels_answer_other_than_200_is_returned_unread() -> None:
    s, _ = session({f"{INDEX}/k.whl": (500, {}, b"oops")})
    got: list[bytes] = []
    assert fetch.read_wheel(f"{INDEX}/k.whl", INDEX, s, size=None, headers={}, what="--index-url",
                            take=got.append) == 500
    assert got == []


def test_outside_the_main_thread_no_timer_is_armed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch, "PAGE_DEADLINE_S", 0.01)
    s, _ = session({f"{INDEX}/a": (200, {}, Slow(b"ab", 0.05))})
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(page(f"{INDEX}/a", s)))
    thread.start()
    thread.join(5)
    assert out == [(200, "", b"ab")]
