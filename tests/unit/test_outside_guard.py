"""The unit suite's guard (conftest.py, outside_guard.py): any socket connect or process start fails the test."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from outside_guard import OutsideTouched, guarded


def test_a_connect_even_to_loopback_is_refused_before_it_happens() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = listener.getsockname()
        with guarded() as caught, socket.socket() as sock, pytest.raises(OutsideTouched):
            sock.connect(address)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    assert caught == [f"socket.connect({address!r},)"]


def test_a_host_name_lookup_is_refused() -> None:
    with guarded() as caught, pytest.raises(OutsideTouched):
        socket.getaddrinfo("localhost", 80)
    assert [c.split("(")[0] for c in caught] == ["socket.getaddrinfo"]


@pytest.mark.parametrize("start", [
    lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
    lambda: os.system("true"),
    lambda: os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], dict(os.environ)),
    lambda: os.execv(sys.executable, [sys.executable, "-c", "pass"]),
], ids=["subprocess", "system", "posix_spawn", "exec"])
def test_starting_a_process_is_refused(start: object) -> None:
    with guarded() as caught, pytest.raises(OutsideTouched):
        start()  # type: ignore[operator]
    assert len(caught) == 1


def test_fork_is_refused() -> None:
    with guarded() as caught, pytest.raises(OutsideTouched):
        if os.fork() == 0:  # only if the guard failed: the child leaves at once
            os._exit(0)
    assert [c.split("(")[0] for c in caught] == ["os.fork"]


def test_a_caught_attempt_still_fails_the_test() -> None:
    """Code under test that swallows the exception (even `except BaseException`) does not hide the attempt."""
    with guarded() as caught:
        try:
            socket.create_connection(("127.0.0.1", 9), timeout=1)
        except BaseException:  # noqa: B036 - what careless code under test might do
            pass
    assert caught and caught[0].startswith("socket.")


def test_the_guard_is_on_during_every_unit_test() -> None:
    """Outside guarded() too: this very test runs under it (conftest.py's hooks)."""
    from outside_guard import _Guard
    assert _Guard.active
