"""The audit hook behind tests/unit/conftest.py: no network, no process in a unit test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

# PEP 578 audit events: https://docs.python.org/3/library/audit_events.html
FORBIDDEN = frozenset({
    "socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr", "socket.sendto",
    "subprocess.Popen", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
})


class OutsideTouched(BaseException):
    """A unit test reached the network or started a process (a BaseException: `except Exception` lets it by)."""


class _Guard:
    active = False
    seen: list[str] = []


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if _Guard.active and event in FORBIDDEN:
        what = f"{event}{args[1:] if event == 'socket.connect' else args[:2]!r}"
        _Guard.seen.append(what)
        raise OutsideTouched(f"unit tests touch no network and start no process: {what} (move it to tests/integration)")


sys.addaudithook(_hook)


@contextmanager
def guarded() -> Iterator[list[str]]:
    """The guard on: what it caught is yielded (test_outside_guard.py reads it)."""
    before, seen = _Guard.active, _Guard.seen
    _Guard.active, _Guard.seen = True, []
    try:
        yield _Guard.seen
    finally:
        _Guard.active, _Guard.seen = before, seen


@contextmanager
def phase() -> Iterator[None]:
    with guarded() as caught:
        yield
    if caught:
        pytest.fail("unit tests touch no network and start no process; caught: " + "; ".join(caught), pytrace=False)
