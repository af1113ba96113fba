"""factory/fetch.py's documented limits, read sizes and lines (the survivors of a cosmic-ray run of it)."""

from __future__ import annotations

import io
import time

import pytest
from kernel_factory import fetch
from kernel_factory.errors import Unreachable
from test_fetch import INDEX, page, session


def test_the_limits_are_the_documented_ones() -> None:
    """docs/download.md, "Time": 60 s a page, 64 KiB/s a wheel after 30 s, 60 s a read, 5 redirects."""
    assert (fetch.PAGE_DEADLINE_S, fetch.WHEEL_GRACE_S, fetch.MIN_RATE, fetch.READ_TIMEOUT_S, fetch.MAX_REDIRECTS) \
        == (60.0, 30.0, 65536, 60.0, 5)


class Sizes(io.RawIOBase):
    """A body that records the sizes it is asked to read."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.asked: list[int] = []

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.asked.append(size)
        out, self.body = (self.body, b"") if size < 0 else (self.body[:size], self.body[size:])
        return out


def test_a_page_is_read_64_kib_at_a_time_and_a_wheel_1_mib() -> None:
    body = Sizes(b"p" * 10)
    s, _ = session({f"{INDEX}/a": (200, {}, body)})
    assert page(f"{INDEX}/a", s)[2] == b"p" * 10
    assert body.asked[0] == 1 << 16
    body = Sizes(b"w" * 10)
    s, _ = session({f"{INDEX}/k.whl": (200, {}, body)})
    got: list[bytes] = []
    assert fetch.read_wheel(f"{INDEX}/k.whl", INDEX, s, size=None, headers={}, what="w", take=got.append) == 200
    assert body.asked[0] == 1 << 20 and got == [b"w" * 10]


@pytest.mark.parametrize("code", [100, 199, 201, 204])
def test_only_a_200s_body_is_read(code: int) -> None:
    s, _ = session({f"{INDEX}/a": (code, {}, b"body"), f"{INDEX}/k.whl": (code, {}, b"body")})
    assert page(f"{INDEX}/a", s) == (code, "", b"")
    got: list[bytes] = []
    assert fetch.read_wheel(f"{INDEX}/k.whl", INDEX, s, size=None, headers={}, what="w", take=got.append) == code
    assert got == []


def test_the_expiry_line_gives_the_seconds_taken() -> None:
    clock = fetch.Clock()
    clock.done()
    clock.start = time.monotonic() - 42.4
    assert str(fetch.expired("--index-url", f"{INDEX}/a", clock, "a page may take 60 s")) == (
        f"--index-url: {INDEX}/a was not read in time (42 s; a page may take 60 s); nothing was installed: check "
        "the index and the network")


def test_a_wheel_is_due_after_the_grace_and_its_first_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first deadline is armed before the request: grace + one chunk at the rate (not a chunk less)."""
    armed: list[float] = []
    monkeypatch.setattr(fetch.Clock, "until", lambda self, at: armed.append(at - self.start))
    s, _ = session({f"{INDEX}/k.whl": (200, {"Content-Length": "8"}, b"12345678")})
    fetch.read_wheel(f"{INDEX}/k.whl", INDEX, s, size=None, headers={}, what="w", take=lambda b: None, chunk=4)
    rate, grace = fetch.MIN_RATE, fetch.WHEEL_GRACE_S
    assert armed == [grace + 4 / rate, grace + 4 / rate, grace + 8 / rate, grace + 8 / rate]



def test_a_deadline_already_past_fires_at_once() -> None:
    clock = fetch.Clock()
    try:
        with pytest.raises(fetch._Expired):
            clock.until(time.monotonic() - 1)
            time.sleep(2)
    finally:
        clock.done()


def test_the_wheels_expiry_line_gives_the_rate_in_kib(monkeypatch: pytest.MonkeyPatch) -> None:
    from test_fetch import Slow

    monkeypatch.setattr(fetch, "WHEEL_GRACE_S", 0.2)
    s, _ = session({f"{INDEX}/k.whl": (200, {}, Slow(b"x" * 8, 0.5, 4))})
    with pytest.raises(Unreachable) as info:
        fetch.read_wheel(f"{INDEX}/k.whl", INDEX, s, size=None, headers={}, what="w", take=lambda b: None, chunk=4)
    assert str(info.value) == (f"w: {INDEX}/k.whl was not read in time (0 s; a wheel must come at 64 KiB/s on "
                               "average after 0 s); nothing was installed: check the index and the network")
