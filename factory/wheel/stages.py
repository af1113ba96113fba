"""Seconds per stage of a conversion, appended as a JSON line to the file KERNEL_FACTORY_STAGES names
(``scripts/bench_convert.py`` prints them): fetch, verify (digest checks outside the wheel pass), hash, compress
(summed over the deflating threads), wait (the writer blocked on them), write (reading, writing, fsync) and audit;
keys "bytes CODEC LEVEL" count the bytes each codec took."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_seconds: dict[str, float] = {}
_lock = threading.Lock()


def reset() -> None:
    with _lock:
        _seconds.clear()


def add(stage: str, seconds: float) -> None:
    with _lock:
        _seconds[stage] = _seconds.get(stage, 0.0) + seconds


@contextmanager
def timed(stage: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        add(stage, time.perf_counter() - start)


def dump(path: str | None, **fields: object) -> None:
    """Append one JSON line (the stages so far and ``fields``) to ``path`` ($KERNEL_FACTORY_STAGES, read by
    config.variables), if it is set."""
    if not path:
        return
    with _lock:
        line = json.dumps({**fields, **_seconds}, sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
