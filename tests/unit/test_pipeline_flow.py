"""pipeline/flow.py: fetches run ahead of conversions, a bounded number ahead; folders never outlive the flow."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from kernel_factory.pipeline import flow
from kernel_factory.pipeline.flow import Background, Fetched


class Recorder:
    """Fetch and convert tasks on threads, each ``delay`` seconds long, recording what ran when."""

    def __init__(self, tmp: Path, fetch_s: float, convert_s: float, failing: frozenset[int] = frozenset()) -> None:
        self.tmp = tmp
        self.fetch_s, self.convert_s = fetch_s, convert_s
        self.failing = failing
        self.lock = threading.Lock()
        self.held = 0  # fetched trees on disk now
        self.most_held = 0
        self.converting = 0  # conversions running now
        self.most_converting = 0
        self.events: list[tuple[str, int]] = []
        self.pool = ThreadPoolExecutor(8)

    def _note(self, what: str, job: int) -> None:
        with self.lock:
            self.events.append((what, job))

    def fetch(self, job: int) -> Future[Fetched | str]:
        def task() -> Fetched | str:
            self._note("fetch", job)
            time.sleep(self.fetch_s)
            if job in self.failing:
                return f"failed {job}"
            folder = self.tmp / f"job-{job}"
            folder.mkdir()
            with self.lock:
                self.held += 1
                self.most_held = max(self.most_held, self.held)
            return Fetched(folder, folder, "1.0.0", frozenset(), self.fetch_s, 0.0, 0.0)

        return self.pool.submit(task)

    def convert(self, job: int, got: Fetched) -> Future[str]:
        def task() -> str:
            self._note("convert", job)
            with self.lock:
                self.converting += 1
                self.most_converting = max(self.most_converting, self.converting)
            time.sleep(self.convert_s)
            with self.lock:
                self.held -= 1
                self.converting -= 1
            got.remove()
            self._note("converted", job)
            return f"built {job}"

        return self.pool.submit(task)


def test_fetches_run_ahead_of_conversions_and_every_job_finishes_once(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, fetch_s=0.01, convert_s=0.05)
    done: list[str] = []
    flow.pipelined(list(range(8)), rec.fetch, rec.convert, lambda job, result: done.append(result), 2, 2)
    assert sorted(done) == sorted(f"built {i}" for i in range(8))
    # conversions are the slow stage: the third fetch starts before the first conversion is over
    first_wheel = min(rec.events.index(("converted", i)) for i in range(8))
    assert rec.events.index(("fetch", 2)) < first_wheel
    assert rec.events.index(("fetch", 3)) < first_wheel
    assert rec.most_held <= flow.held(2, 2)  # never more trees on disk than the space check counted
    assert list(tmp_path.iterdir()) == []


def test_fetched_trees_on_disk_never_exceed_the_bound_when_conversion_is_slow(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, fetch_s=0.001, convert_s=0.03)
    flow.pipelined(list(range(10)), rec.fetch, rec.convert, lambda job, result: None, 1, 2)
    assert rec.most_held == flow.held(1, 2) == 3  # one converting, two fetched ahead: no more
    assert rec.most_converting == 1  # never more conversions than converters (the pool has no worker for more)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_fetch_is_finished_without_a_conversion_and_the_others_go_on(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, fetch_s=0.001, convert_s=0.001, failing=frozenset({1}))
    done: dict[int, str] = {}
    flow.pipelined(list(range(4)), rec.fetch, rec.convert, done.__setitem__, 2, 2)
    assert done == {0: "built 0", 1: "failed 1", 2: "built 2", 3: "built 3"}
    assert ("convert", 1) not in rec.events


def test_an_interrupted_flow_removes_the_fetched_folders_still_waiting(tmp_path: Path) -> None:
    rec = Recorder(tmp_path, fetch_s=0.001, convert_s=0.2)

    def finish(job: int, result: str) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the first wheel is delivered

    with pytest.raises(KeyboardInterrupt):
        flow.pipelined(list(range(6)), rec.fetch, rec.convert, finish, 1, 2)
    rec.pool.shutdown(wait=True)  # the conversion in flight removes its own folder
    assert list(tmp_path.iterdir()) == []


def test_lanes_fetch_two_at_a_time_and_run_one_job_here() -> None:
    assert flow.lanes(2, 8) == (2, 2)
    assert flow.lanes(4, 3) == (3, 2)
    assert flow.lanes(2, 2) == (2, 2)
    assert flow.lanes(1, 8) == (1, 0)
    assert flow.lanes(8, 1) == (1, 0)


def test_background_runs_at_most_its_threads_and_submit_waits_for_a_free_one() -> None:
    running, most, lock = [0], [0], threading.Lock()
    gate = threading.Event()

    def task() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        gate.wait(5)
        with lock:
            running[0] -= 1

    bg = Background(2)
    bg.submit(task)
    bg.submit(task)
    third = threading.Thread(target=bg.submit, args=(task,))
    third.start()
    third.join(0.2)
    assert third.is_alive()  # both threads busy: the third submit waits (wheels waiting for upload stay few)
    gate.set()
    third.join(5)
    bg.close()
    assert not third.is_alive() and most[0] == 2 and running[0] == 0



class Link:
    """Fetches that share one link, each of 1.0 unit of bytes, ``rate`` units a second on the whole link, each a
    fair share; at each fetch's start and end, what the other running fetches had moved."""

    def __init__(self, tmp: Path, rate: float) -> None:
        self.tmp, self.rate = tmp, rate
        self.lock = threading.Lock()
        self.moved: dict[int, float] = {}
        self.active: set[int] = set()
        self.at_start: dict[int, list[float]] = {}
        self.at_end: dict[int, list[float]] = {}
        self.asked = 0  # calls of halfway
        self.pool = ThreadPoolExecutor(8)

    def _others(self, job: int) -> list[float]:
        return [self.moved[j] for j in self.active if j != job]

    def fetch(self, job: int) -> Future[Fetched | str]:
        def task() -> Fetched:
            with self.lock:
                self.at_start[job] = self._others(job)
                self.moved[job] = 0.0
                self.active.add(job)
            while True:
                time.sleep(0.002)
                with self.lock:
                    self.moved[job] += self.rate * 0.002 / len(self.active)
                    if self.moved[job] >= 1.0:
                        self.active.discard(job)
                        self.at_end[job] = self._others(job)
                        break
            folder = self.tmp / f"job-{job}"
            folder.mkdir()
            return Fetched(folder, folder, "1.0.0", frozenset(), 0.0, 0.0, 0.0)

        return self.pool.submit(task)

    def halfway(self, job: int) -> bool:
        with self.lock:
            self.asked += 1
            return self.moved.get(job, 0.0) * 2 >= 1.0

    def convert(self, job: int, got: Fetched) -> Future[str]:
        def task() -> str:
            got.remove()
            return f"built {job}"

        return self.pool.submit(task)


def test_a_second_fetch_starts_once_the_first_is_halfway_so_same_size_variants_end_apart(tmp_path: Path) -> None:
    link = Link(tmp_path, rate=2.0)  # half a second a variant alone on the link; the flow looks every 0.1 s
    done: list[str] = []
    start = time.monotonic()
    flow.pipelined(list(range(4)), link.fetch, link.convert, lambda job, result: done.append(result), 2, 2,
                   link.halfway)
    took = time.monotonic() - start
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


def test_without_halfway_two_same_size_fetches_start_and_end_together(tmp_path: Path) -> None:
    link = Link(tmp_path, rate=2.0)
    flow.pipelined(list(range(2)), link.fetch, link.convert, lambda job, result: None, 2, 2)
    assert all(moved < 0.05 for others in link.at_start.values() for moved in others)  # started at once
    last, first = sorted(link.at_end.values(), key=len)
    assert last == [] and len(first) == 1 and first[0] > 0.9  # when the first ended the other was all but done


def test_background_close_waits_for_the_uploads_in_flight() -> None:
    """An upload handed over ends whole before close returns (even after Ctrl-C: the store gets no half object)."""
    ended: list[str] = []

    def upload() -> None:
        time.sleep(0.2)
        ended.append("uploaded")

    bg = Background(2)
    bg.submit(upload)
    bg.close()
    assert ended == ["uploaded"]
