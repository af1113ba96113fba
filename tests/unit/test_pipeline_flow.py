"""pipeline/flow.py: fetches run ahead of conversions, a bounded number ahead; folders never outlive the flow."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future
from pathlib import Path
from typing import Any

import pytest
from kernel_factory.pipeline import flow
from kernel_factory.pipeline.flow import Finisher
from kernel_factory.pipeline.jobs import Fetched

Task = Callable[[], Any]


def later(tasks: dict[Future[Any], tuple[str, Task]], kind: str, task: Task) -> Future[Any]:
    """A future the test's ``wait`` ends by running ``task``: nothing runs until the flow waits."""
    fut: Future[Any] = Future()
    tasks[fut] = (kind, task)
    return fut


class Recorder:
    """Fetch and convert tasks, run one at a time by ``wait`` (put in place of flow.wait: no thread, no sleep),
    recording what was started and ended in what order. ``wait`` ends a running fetch first, else the oldest
    conversion: conversions are the slow stage, so the flow is offered every chance to fetch ahead."""

    def __init__(self, tmp: Path, failing: frozenset[int] = frozenset()) -> None:
        self.tmp = tmp
        self.failing = failing
        self.held = 0  # fetched trees on disk now
        self.most_held = 0
        self.converting = 0  # conversions started and not ended
        self.most_converting = 0
        self.events: list[tuple[str, int]] = []
        self.tasks: dict[Future[Any], tuple[str, Task]] = {}  # started and not ended, oldest first

    def fetch(self, job: int) -> Future[Fetched | str]:
        self.events.append(("fetch", job))

        def task() -> Fetched | str:
            if job in self.failing:
                return f"failed {job}"
            folder = self.tmp / f"job-{job}"
            folder.mkdir()
            self.held += 1
            self.most_held = max(self.most_held, self.held)
            return Fetched(folder, folder, "1.0.0", frozenset(), 0.0, 0.0)

        return later(self.tasks, "fetch", task)

    def convert(self, job: int, got: Fetched) -> Future[str]:
        self.events.append(("convert", job))
        self.converting += 1
        self.most_converting = max(self.most_converting, self.converting)

        def task() -> str:
            self.held -= 1
            self.converting -= 1
            got.remove()
            self.events.append(("converted", job))
            return f"built {job}"

        return later(self.tasks, "convert", task)

    def end(self, fut: Future[Any]) -> None:
        _kind, task = self.tasks.pop(fut)
        fut.set_result(task())

    def wait(self, running: list[Future[Any]], timeout: float | None = None,
             return_when: str = FIRST_COMPLETED) -> tuple[set[Future[Any]], set[Future[Any]]]:
        ours = [f for f in self.tasks if f in running]
        fut = next((f for f in ours if self.tasks[f][0] == "fetch"), ours[0])
        self.end(fut)
        return {fut}, set(running) - {fut}


@pytest.fixture
def rec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder(tmp_path)
    monkeypatch.setattr(flow, "wait", recorder.wait)
    return recorder


def test_fetches_run_ahead_of_conversions_and_every_job_finishes_once(tmp_path: Path, rec: Recorder) -> None:
    done: list[str] = []
    flow.pipelined(list(range(8)), rec.fetch, rec.convert, lambda job, result: done.append(result), 2, 2)
    assert sorted(done) == sorted(f"built {i}" for i in range(8))
    # conversions are the slow stage: the third fetch starts before the first conversion is over
    first_wheel = min(rec.events.index(("converted", i)) for i in range(8))
    assert rec.events.index(("fetch", 2)) < first_wheel
    assert rec.events.index(("fetch", 3)) < first_wheel
    assert rec.most_held == flow.held(2, 2)  # never more trees on disk than the space check counted
    assert list(tmp_path.iterdir()) == []


def test_fetched_trees_on_disk_never_exceed_the_bound_when_conversion_is_slow(tmp_path: Path, rec: Recorder) -> None:
    flow.pipelined(list(range(10)), rec.fetch, rec.convert, lambda job, result: None, 1, 2)
    assert rec.most_held == flow.held(1, 2) == 3  # one converting, two fetched ahead: no more
    assert rec.most_converting == 1  # never more conversions than converters (the pool has no worker for more)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_fetch_is_finished_without_a_conversion_and_the_others_go_on(rec: Recorder) -> None:
    rec.failing = frozenset({1})
    done: dict[int, str] = {}
    flow.pipelined(list(range(4)), rec.fetch, rec.convert, done.__setitem__, 2, 2)
    assert done == {0: "built 0", 1: "failed 1", 2: "built 2", 3: "built 3"}
    assert ("convert", 1) not in rec.events


def test_an_interrupted_flow_removes_the_fetched_folders_still_waiting(tmp_path: Path, rec: Recorder) -> None:
    def finish(job: int, result: str) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the first wheel is delivered

    with pytest.raises(KeyboardInterrupt):
        flow.pipelined(list(range(6)), rec.fetch, rec.convert, finish, 1, 2)
    assert rec.most_held == 3  # two fetched folders were waiting behind the conversion
    for fut in list(rec.tasks):  # what the pool still runs ends: a conversion in flight removes its own folder
        rec.end(fut)
    assert list(tmp_path.iterdir()) == []


def test_lanes_fetch_two_at_a_time_and_run_one_job_here() -> None:
    assert flow.lanes(2, 8) == (2, 2)
    assert flow.lanes(4, 3) == (3, 2)
    assert flow.lanes(2, 2) == (2, 2)
    assert flow.lanes(1, 8) == (1, 0)
    assert flow.lanes(8, 1) == (1, 0)


BUILT: Any = (Path("k.whl"), b"", None)  # a wheel handed to deliver (the tests' deliver reads none of it)


def test_uploads_run_on_at_most_their_threads_and_a_wheel_waits_for_a_free_one() -> None:
    running, most, lock = [0], [0], threading.Lock()
    gate = threading.Event()

    def deliver(*_: object) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        gate.wait(5)
        with lock:
            running[0] -= 1

    finish = Finisher(deliver, lambda outcome: None, uploads=2)
    finish(None, BUILT)  # type: ignore[arg-type]
    finish(None, BUILT)  # type: ignore[arg-type]
    third = threading.Thread(target=finish, args=(None, BUILT))
    third.start()
    third.join(0.2)
    assert third.is_alive()  # both threads busy: the third wheel waits (wheels waiting for upload stay few)
    gate.set()
    third.join(5)
    finish.close()
    assert not third.is_alive() and most[0] == 2 and running[0] == 0 and len(finish.outcomes) == 3



class Link:
    """Fetches that share one link, each of 1.0 unit of bytes, ``rate`` units a second on the whole link, each a
    fair share, on a simulated clock: ``wait`` (put in place of flow.wait) moves the bytes a tick at a time until a
    fetch ends or the flow's timeout has passed (at least one tick a call), and conversions end at once. At each
    fetch's start and end, what the other running fetches had moved."""

    TICK = 0.002  # seconds of the simulated clock

    def __init__(self, tmp: Path, rate: float) -> None:
        self.tmp, self.rate = tmp, rate
        self.ticks = 0
        self.moved: dict[int, float] = {}
        self.active: set[int] = set()
        self.at_start: dict[int, list[float]] = {}
        self.at_end: dict[int, list[float]] = {}
        self.asked = 0  # calls of halfway
        self.fetching: dict[int, Future[Fetched | str]] = {}

    @property
    def now(self) -> float:
        return self.ticks * self.TICK

    def _others(self, job: int) -> list[float]:
        return [self.moved[j] for j in sorted(self.active) if j != job]

    def fetch(self, job: int) -> Future[Fetched | str]:
        self.at_start[job] = self._others(job)
        self.moved[job] = 0.0
        self.active.add(job)
        self.fetching[job] = Future()
        return self.fetching[job]

    def halfway(self, job: int) -> bool:
        self.asked += 1
        return self.moved.get(job, 0.0) * 2 >= 1.0

    def convert(self, job: int, got: Fetched) -> Future[str]:
        got.remove()
        fut: Future[str] = Future()
        fut.set_result(f"built {job}")
        return fut

    def wait(self, running: list[Future[Any]], timeout: float | None = None,
             return_when: str = FIRST_COMPLETED) -> tuple[set[Future[Any]], set[Future[Any]]]:
        done = {f for f in running if f.done()}
        until = None if timeout is None else self.ticks + max(1, round(timeout / self.TICK))
        while not done and (until is None or self.ticks < until):
            self.ticks += 1
            share = self.rate * self.TICK / len(self.active)
            for job in sorted(self.active):
                self.moved[job] += share
            for job in [j for j in sorted(self.active) if self.moved[j] >= 1.0 - 1e-9]:
                self.active.discard(job)
                self.at_end[job] = self._others(job)
                folder = self.tmp / f"job-{job}"
                folder.mkdir()
                fut = self.fetching.pop(job)
                fut.set_result(Fetched(folder, folder, "1.0.0", frozenset(), 0.0, 0.0))
                done.add(fut)
        return done, set(running) - done


@pytest.fixture
def link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Link:
    model = Link(tmp_path, rate=2.0)  # half a second a variant alone on the link; the flow looks every 0.1 s
    monkeypatch.setattr(flow, "wait", model.wait)
    return model


def test_a_second_fetch_starts_once_the_first_is_halfway_so_same_size_variants_end_apart(tmp_path: Path,
                                                                                           link: Link) -> None:
    done: list[str] = []
    flow.pipelined(list(range(4)), link.fetch, link.convert, lambda job, result: done.append(result), 2, 2,
                   link.halfway)
    took = link.now
    assert sorted(done) == [f"built {i}" for i in range(4)]
    assert link.at_start[0] == []
    # each later fetch started beside a running one that was halfway (at most a poll, 0.2 units, beyond)
    for job in (1, 2, 3):
        assert len(link.at_start[job]) == 1 and 0.5 <= link.at_start[job][0] <= 0.75, link.at_start
    # so no two ended together: when one ended, the other had moved about half, not all, of its bytes
    for job in (0, 1, 2):
        assert len(link.at_end[job]) == 1 and 0.2 <= link.at_end[job][0] <= 0.8, link.at_end
    assert link.at_end[3] == []  # the last ran alone for its second half
    # the flow looks again every POLL_S while it waits, it does not spin (a spinning main process would take a
    # core from the conversions): at most one look per poll, beside one per fetch started
    assert link.asked <= took / flow.POLL_S + 4
    assert list(tmp_path.iterdir()) == []


def test_without_halfway_two_same_size_fetches_start_and_end_together(link: Link) -> None:
    flow.pipelined(list(range(2)), link.fetch, link.convert, lambda job, result: None, 2, 2)
    assert all(moved < 0.05 for others in link.at_start.values() for moved in others)  # started at once
    last, first = sorted(link.at_end.values(), key=len)
    assert last == [] and len(first) == 1 and first[0] > 0.9  # when the first ended the other was all but done


def test_close_waits_for_the_uploads_in_flight() -> None:
    """An upload handed over ends whole before close returns (even after Ctrl-C: the store gets no half object)."""
    ended: list[str] = []
    closing = threading.Event()

    def upload(*_: object) -> None:
        assert closing.wait(5)  # still in flight when close begins
        ended.append("uploaded")

    finish = Finisher(upload, lambda outcome: None, uploads=2)
    pool = finish._pool
    assert pool is not None
    shutdown = pool.shutdown

    def shutdown_once_closing(wait: bool = True, *, cancel_futures: bool = False) -> None:
        closing.set()
        shutdown(wait=wait, cancel_futures=cancel_futures)

    pool.shutdown = shutdown_once_closing  # type: ignore[method-assign]
    finish(None, BUILT)  # type: ignore[arg-type]
    finish.close()
    assert ended == ["uploaded"]
