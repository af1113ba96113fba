"""Unit tests touch no network and start no process: an audit hook fails any unit test that tries.

The hook (PEP 578) is added once per process when pytest loads this file, in the controller and in each
xdist worker alike, and stays idle outside a unit test's setup, call and teardown. That matters because
xdist starts its workers with Popen, and integration tests in the same worker start servers and processes.
A unit test that connects a socket (to any address, loopback included), resolves a host name, or starts a
process (subprocess, fork, exec, spawn, system) gets an exception at that call and fails afterwards even
if the code under test caught the exception. tests/unit/test_outside_guard.py proves it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from outside_guard import phase


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with phase():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with phase():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with phase():
        return (yield)


@pytest.fixture
def no_cuda_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without torch, kernels looks for a CUDA runtime with ctypes.util.find_library, which runs /sbin/ldconfig: a
    unit test starts no process, and its answer must not hang on the machine's libraries. Here there is none."""
    import ctypes.util

    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
