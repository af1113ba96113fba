"""pytest plugin for scripts/mutants.py: run the fastest tests first, so `-x` kills a mutant sooner.

With MUTANTS_TIMES=FILE unset nothing changes. On the unmutated run (MUTANTS_RECORD=1) each test's
time is written to FILE; on the mutant runs the tests are sorted by it (unknown ones last). The same
tests run either way: only their order differs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

_times: dict[str, float] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    path = os.environ.get("MUTANTS_TIMES")
    if path and not os.environ.get("MUTANTS_RECORD"):
        times = json.loads(Path(path).read_text())
        items.sort(key=lambda item: times.get(item.nodeid, float("inf")))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _times[report.nodeid] = _times.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("MUTANTS_TIMES")
    if path and os.environ.get("MUTANTS_RECORD"):
        Path(path).write_text(json.dumps(_times))
