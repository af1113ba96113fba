"""store/pool.py: a worker's unraisable-exception hook (no process is started here)."""

from __future__ import annotations

import io
import sys
from typing import Any

import pytest
from kernel_factory.store import pool


class _Raises:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __del__(self) -> None:
        raise self.exc


def _unraisable(exc: BaseException, monkeypatch: pytest.MonkeyPatch) -> Any:
    """What Python hands the hook when a finalizer raises ``exc``."""
    caught: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", caught.append)
    _Raises(exc)  # collected at once
    monkeypatch.undo()
    assert len(caught) == 1
    return caught[0]


def test_an_interrupt_in_a_finalizer_prints_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    unraisable = _unraisable(KeyboardInterrupt(), monkeypatch)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    pool._drop_interrupt(unraisable)
    assert err.getvalue() == ""


def test_any_other_unraisable_error_is_printed_as_python_prints_it(monkeypatch: pytest.MonkeyPatch) -> None:
    unraisable = _unraisable(OSError("disk gone"), monkeypatch)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    pool._drop_interrupt(unraisable)
    assert err.getvalue().startswith("Exception ignored in: <function _Raises.__del__")
    assert err.getvalue().endswith("OSError: disk gone\n")
