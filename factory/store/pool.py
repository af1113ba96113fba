"""Worker processes that never outlive the run that started them, and never hold its store lock.

Every process pool of a run is made here. Forked workers inherit every file descriptor, the store lock's
included, and outlive a main process killed alone (``kill -9``, the OOM killer), blocked forever holding the
lock. ``init_worker`` closes the inherited lock and has Linux SIGKILL the worker when its parent dies
(``PR_SET_PDEATHSIG``; where prctl is missing, a watchdog thread). Workers write only hidden ``.tmp-`` names,
renamed into place when whole and swept by the next run (lock.py).
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from ..libc import die_with_parent
from .lock import HELD_FDS

WATCH_INTERVAL_S = 0.5


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_INTERVAL_S)
    os._exit(1)  # the main process is gone: nobody will read what this worker makes


def _drop_interrupt(unraisable: Any) -> None:
    # Ctrl-C reaches every worker of the terminal's group; one that lands in a finalizer (ZipFile.__del__) cannot
    # be raised there, and Python would print it as a traceback on the run's stderr. The main process has it too
    # and ends the run (exit 130); this worker's job ends as if it had come a moment later.
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)


def init_worker(parent: int) -> None:
    """Run first in each worker process (``parent`` is the main process's PID)."""
    for fd in list(HELD_FDS):
        with contextlib.suppress(OSError):
            os.close(fd)  # the lock stays with the main process: flock belongs to the open file, now held once
    HELD_FDS.clear()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the main process's handler (cli) is for the main process only
    sys.unraisablehook = _drop_interrupt
    linked = die_with_parent()
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    if not linked:  # no prctl here: a thread watches the parent instead
        threading.Thread(target=_watch_parent, args=(parent,), name="parent-watchdog", daemon=True).start()


class _Pool(ProcessPoolExecutor):
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # Ctrl-C, SIGTERM or an error: the work not yet handed to a worker is dropped (ProcessPoolExecutor's own
        # exit waits for every submitted job: a Ctrl-C during a first adoption ran the whole adoption first)
        self.shutdown(wait=True, cancel_futures=exc_type is not None)


def worker_pool(max_workers: int) -> ProcessPoolExecutor:
    """A pool of forked workers that drop the store lock and end when this process dies. Its heap so far is frozen
    first, so the workers' collections do not walk (and copy, page by page) what they share with it."""
    gc.freeze()
    return _Pool(max_workers=max_workers, mp_context=multiprocessing.get_context("fork"),
                 initializer=init_worker, initargs=(os.getpid(),))  # fork: the index's full
    # render hands its workers what it read before the fork (index/command.py); forkserver is 3.14's default
