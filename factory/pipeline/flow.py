"""Fetching runs ahead of converting, so the link stays busy while the cores convert (why and how:
docs/architecture.md, pipeline). A fetch starts only while fewer than ``held`` trees are in scratch (what
``check_space`` counts). Whatever leaves ``pipelined`` (an exception, Ctrl-C) first removes the fetched folders still
waiting."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, TypeVar

from ..errors import FactoryError
from ..plan import Job
from .jobs import Built, Fetched, Outcome, failure

FETCHERS = 2  # downloads at once: two keep a link busy between files; more split the same link
UPLOADS = 4  # wheels handed to an s3:// store at once, while the next ones are fetched and converted
POLL_S = 0.1  # how often a second fetch waiting for the first to be halfway looks again

J = TypeVar("J")
R = TypeVar("R")


def lanes(jobs: int, items: int) -> tuple[int, int]:
    """(converters, fetchers) for ``items`` jobs at ``--jobs`` ``jobs``; (1, 0): one after another, here."""
    if jobs <= 1 or items <= 1:
        return 1, 0
    return min(jobs, items), min(FETCHERS, items)


def held(converters: int, fetchers: int) -> int:
    """The most fetched trees in scratch at once (each job's, from its fetch until its wheel is written)."""
    return converters + fetchers


def pipelined(jobs: Sequence[J], fetch: Callable[[J], Future[Fetched | R]], convert: Callable[[J, Fetched], Future[R]],
              finish: Callable[[J, R], None], converters: int, fetchers: int,
              halfway: Callable[[J], bool] | None = None) -> None:
    """Fetch ``jobs`` in order, convert each once fetched, ``finish`` each (in this process) as it ends.

    ``fetch`` submits a job's fetch, whose result is its Fetched or, when it failed, the job's result;
    ``convert`` submits its conversion, whose worker removes the fetched folder. ``halfway(job)``: whether
    the running fetch of ``job`` has half its bytes; a second fetch starts only then (None: at once)."""
    todo = deque(jobs)
    fetching: dict[Future[Fetched | R], J] = {}
    ready: deque[tuple[J, Fetched]] = deque()
    converting: dict[Future[R], tuple[J, Fetched]] = {}
    limit = held(converters, fetchers)
    try:
        while todo or fetching or ready or converting:
            while ready and len(converting) < converters:
                job, got = ready.popleft()
                converting[convert(job, got)] = (job, got)
            deferred = False
            while todo and len(fetching) < fetchers and len(fetching) + len(ready) + len(converting) < limit:
                if halfway is not None and len(fetching) == 1 and not halfway(next(iter(fetching.values()))):
                    deferred = True  # the running fetch has the whole link until it is halfway
                    break
                job = todo.popleft()
                fetching[fetch(job)] = job
            running: list[Future[Any]] = [*fetching, *converting]
            done, _ = wait(running, timeout=POLL_S if deferred else None, return_when=FIRST_COMPLETED)
            for fut in [f for f in fetching if f in done]:
                job = fetching.pop(fut)
                result = fut.result()
                if isinstance(result, Fetched):
                    ready.append((job, result))
                else:
                    finish(job, result)
            for conv in [f for f in converting if f in done]:
                job, got = converting.pop(conv)
                got.remove()  # the worker removed it; not when it died
                finish(job, conv.result())
    finally:
        for _job, got in ready:
            got.remove()


class Finisher:
    """What becomes of each job as it ends (``pipelined``'s ``finish``): a job that failed is told at once; a
    wheel goes to ``deliver`` here, or with ``uploads`` on that many threads (a remote store's uploads overlap the
    next conversions; ``deliver`` must then be thread-safe). A delivery that fails (the store full, read-only,
    unreachable or refusing the wheel) is its job's failure; any other exception there is a bug, with its
    traceback, as in a worker. ``outcomes``: every job's, in the order they were told to ``tell``."""

    def __init__(self, deliver: Callable[[Job, Path, bytes, Any], None], tell: Callable[[Outcome], None],
                 uploads: int = 0) -> None:  # fmt: skip
        self.outcomes: list[Outcome] = []
        self._deliver, self._tell = deliver, tell
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(uploads, thread_name_prefix="deliver") if uploads > 0 else None
        self._slots = threading.Semaphore(max(uploads, 1))

    def __call__(self, job: Job, result: Built | Outcome) -> None:
        if isinstance(result, Outcome):
            self._record(result)
        elif self._pool is None:
            self._record(self._handed(job, result))
        else:
            # Waits while every thread is busy: the wheels waiting for their upload (in the work folder) stay few.
            self._slots.acquire()
            self._pool.submit(self._in_background, job, result)

    def close(self) -> None:
        """Wait for the deliveries handed to threads (an upload in flight ends whole, even after Ctrl-C)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def _record(self, outcome: Outcome) -> None:
        with self._lock:
            self.outcomes.append(outcome)
            self._tell(outcome)

    def _handed(self, job: Job, result: Built) -> Outcome:
        try:
            self._deliver(job, *result)
            return Outcome(job, record=result[2])
        except (FactoryError, OSError) as exc:
            return failure(job, exc)

    def _in_background(self, job: Job, result: Built) -> None:
        try:
            try:
                outcome = self._handed(job, result)
            except Exception as exc:  # a bug: its job fails with the traceback, as in a worker
                outcome = failure(job, exc)
            self._record(outcome)
        finally:
            self._slots.release()
