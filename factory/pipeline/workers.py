"""Worker processes that never outlive the run that started them, and never hold its store lock.

``ProcessPoolExecutor`` forks its workers: each inherits every open file
descriptor, the store lock's included, and when the main process is killed
alone (``kill -9``, the OOM killer) the workers stay blocked on the call queue
forever, holding the lock. ``init_worker`` runs first in every worker: it closes
the inherited lock, asks Linux to SIGKILL the worker when its parent dies
(``PR_SET_PDEATHSIG``), and starts a watchdog thread that ends the worker once
its parent PID changes (the fallback where prctl is not there, e.g. macOS).
Workers write only into the run's scratch folder (``.tmp-work-*``), which the
next run removes, so a killed worker leaves nothing half-written in the store.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor

WATCH_INTERVAL_S = 0.5
PR_SET_PDEATHSIG = 1


def _close_inherited_locks() -> None:
    from ..store.lock import HELD_FDS

    for fd in list(HELD_FDS):
        try:
            os.close(fd)  # the lock stays with the main process: flock belongs to the open file, now held once
        except OSError:
            pass
    HELD_FDS.clear()


def _die_with_parent() -> bool:
    """PR_SET_PDEATHSIG(SIGKILL) on Linux; False where there is no prctl."""
    if not sys.platform.startswith("linux"):
        return False
    try:  # libc.so.6 first: find_library runs `ldconfig -p` in a subprocess
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
        except OSError:
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        return bool(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_INTERVAL_S)
    os._exit(1)  # the main process is gone: nobody will read what this worker makes


def init_worker(parent: int) -> None:
    """Run first in each worker process (``parent`` is the main process's PID)."""
    _close_inherited_locks()
    _die_with_parent()
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="parent-watchdog", daemon=True).start()


def worker_pool(max_workers: int) -> ProcessPoolExecutor:
    """A process pool whose workers drop the store lock and end when this process dies.

    What this process allocated so far (its imports) is moved out of the collector's reach first, so the
    workers' collections do not walk (and copy, page by page) the heap they share with it."""
    gc.freeze()
    return ProcessPoolExecutor(max_workers=max_workers, initializer=init_worker, initargs=(os.getpid(),))
