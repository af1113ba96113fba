"""Where a conversion's time goes: seconds per stage, written out when KERNEL_FACTORY_STAGES names a file.

Stages: fetch (read or extract the revision), verify (digest checks outside the wheel pass), hash
(sha256 and crc32 of the files while writing, and the wheel's own sha256 on its thread), compress (deflate,
summed over the compressing threads), wait (the writer blocked on them), write (reading the files, writing the
wheel file, fsync included) and audit. Keys "bytes CODEC LEVEL" count the bytes of large entries each codec
took (not seconds). ``scripts/bench_convert.py`` prints them.
"""

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
