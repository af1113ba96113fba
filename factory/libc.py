"""The C library, opened once, for the two calls Python's ``os`` lacks: ``prctl`` and ``syncfs``."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from functools import lru_cache
from typing import Any

PR_SET_PDEATHSIG = 1


@lru_cache(maxsize=1)
def libc() -> Any:
    """The process's own symbols (libc among them), or None where they cannot be loaded.

    ``CDLL(None)`` is dlopen(NULL): no search, and no ``ldconfig -p`` subprocess as ``ctypes.util.find_library``
    would run."""
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def die_with_parent() -> bool:
    """Ask Linux to SIGKILL this process when its parent dies (PR_SET_PDEATHSIG); False where there is no prctl."""
    prctl = getattr(libc() if sys.platform.startswith("linux") else None, "prctl", None)
    return prctl is not None and bool(prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0)


def sync_fs(folder: str | os.PathLike[str]) -> None:
    """Flush the file system that holds ``folder`` (syncfs(2); sync(2) where there is none)."""
    syncfs = getattr(libc(), "syncfs", None)
    fd = os.open(folder, os.O_RDONLY)
    try:
        if syncfs is None or syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)
