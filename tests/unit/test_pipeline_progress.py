"""build's progress: the bytes fetched and written, the items in flight included, on a terminal only."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from kernel_factory import report
from kernel_factory.pipeline import progress


@pytest.fixture(autouse=True)
def _report() -> Iterator[None]:
    yield
    report.configure()


def write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def test_bytes_of_items_in_flight_and_done(tmp_path: Path) -> None:
    work, scratch, blobs = tmp_path / "work", tmp_path / "scratch", tmp_path / "hub" / "blobs"
    write(work / "job-a" / "k-1.0-py3-none-any.whl", 2_000)
    write(work / "other" / "x", 9_999)  # not a job's folder
    write(scratch / "job-b" / "kernel-factory-x" / "sha" / "build" / "v" / "k.so", 300_000)
    (scratch / "job-b" / "link").symlink_to(scratch / "job-b" / "kernel-factory-x" / "sha" / "build" / "v" / "k.so")
    write(blobs / "0123.abcd1234.incomplete", 1_500_000)
    write(blobs / "4567", 7_777)  # a finished blob is counted once, where the fetch links it
    count = progress.Bytes(work, scratch, [blobs, tmp_path / "missing" / "blobs"])
    assert count.text() == "fetched 1.8 MB, wheels written 2.0 kB"
    count.finished(10_000_000, 3_000_000)
    assert count.text() == "fetched 11.8 MB, wheels written 3.0 MB"


def test_size_text() -> None:
    assert [report.size(n) for n in (0, 999, 1_000, 123_456_789, 5 * 10**12, 5 * 10**15)] == [
        "0 B", "999 B", "1.0 kB", "123.5 MB", "5.0 TB", "5000.0 TB"]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def outcome(name: str) -> SimpleNamespace:
    return SimpleNamespace(job=SimpleNamespace(key=name), name=name)


def run_two(stream: io.StringIO, tmp_path: Path) -> None:
    count = progress.Bytes(tmp_path, None, [])
    start, tell, close = progress.progress(2, count, lambda job: 1_000_000,
                                           lambda o: (f"built  {o.name}.whl", 250_000), stream=stream)
    start()
    tell(outcome("a"))
    tell(outcome("b"))
    close()


def test_a_terminal_gets_a_bar_with_the_bytes(tmp_path: Path) -> None:
    tty = Tty()
    run_two(tty, tmp_path)
    text = tty.getvalue()
    assert "built  a.whl\n" in text and "built  b.whl\n" in text
    last = text.rsplit("\r", 1)[-1]
    assert "building: 100%" in last and "2/2" in last and "fetched 2.0 MB, wheels written 500.0 kB" in last


def test_the_bar_starts_no_thread_until_the_workers_are_forked(tmp_path: Path) -> None:
    """The pool forks between progress() and start(): no thread of the bar (its poller, tqdm's monitor) runs then."""
    before = {t.name for t in threading.enumerate()}
    start, tell, close = progress.progress(1, progress.Bytes(tmp_path, None, []), lambda job: 0,
                                           lambda o: ("built  a.whl", 1), stream=Tty())
    assert {t.name for t in threading.enumerate()} == before
    start()
    assert "build-progress" in {t.name for t in threading.enumerate()} - before
    tell(outcome("a"))
    close()
    assert "build-progress" not in {t.name for t in threading.enumerate()}


def test_a_log_gets_one_line_per_item_and_no_bar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = io.StringIO()
    run_two(log, tmp_path)
    assert log.getvalue() == ""
    assert capsys.readouterr().err == "[1/2] built  a.whl\n[2/2] built  b.whl\n"


def test_quiet_prints_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report.configure(quiet=True)
    tty = Tty()
    run_two(tty, tmp_path)
    assert tty.getvalue() == "" and capsys.readouterr().err == ""
