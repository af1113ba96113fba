"""The space a plan needs, and the run's scratch folder: marked while its run lives, removed by the next run once a
killed run left it."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest
from kernel_factory import report, space
from kernel_factory.errors import Unreachable


def killed(scratch: space.Scratch) -> str:
    """What ``kill -9`` of the run leaves: the folder and its mark, the lock released, no cleanup."""
    assert scratch._mark is not None
    scratch._closer()
    scratch._mark = None
    scratch._finalizer.detach()
    return scratch.name


def test_a_killed_runs_scratch_is_removed_by_the_next_run_and_a_live_one_is_kept(tmp_path: Path) -> None:
    live = space.scratch_dir(str(tmp_path))
    dead = killed(space.scratch_dir(str(tmp_path)))
    (Path(dead) / "job-1").mkdir()
    (Path(dead) / "job-1" / "part.so").write_bytes(b"x" * 1000)
    assert sorted(os.listdir(dead)) == [".kernel-factory-run", "job-1"]
    with space.scratch_dir(str(tmp_path)) as new:
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([Path(live.name).name, Path(new).name])
        assert os.listdir(new) == [".kernel-factory-run"]
    live.cleanup()
    assert list(tmp_path.iterdir()) == []


def test_the_mark_is_locked_while_the_run_lives(tmp_path: Path) -> None:
    with space.scratch_dir(str(tmp_path)) as name:
        fd = os.open(os.path.join(name, space.RUN_MARK), os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = False
            except BlockingIOError:
                locked = True
        finally:
            os.close(fd)
        assert locked
    assert not os.path.exists(name)


def test_the_folder_gets_its_name_only_once_its_mark_is_locked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[list[str], list[str], bool]] = []
    rename = os.rename

    def watched(src: str, dst: str) -> None:
        if os.path.dirname(src) == str(tmp_path):  # the folder's own rename (not the mark's, inside it)
            fd = os.open(os.path.join(src, space.RUN_MARK), os.O_RDONLY)
            seen.append((sorted(os.listdir(tmp_path)), sorted(os.listdir(src)), not space.unheld(fd)))
        rename(src, dst)

    monkeypatch.setattr(os, "rename", watched)
    with space.scratch_dir(str(tmp_path)) as name:
        staging = space.STAGING + Path(name).name
        assert seen == [([staging], [space.RUN_MARK], True)]  # nothing of the prefix's name, the mark held
        assert os.listdir(tmp_path) == [Path(name).name]


def test_a_run_stopped_before_its_folder_is_named_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rename = os.rename

    def stopped(src: str, dst: str) -> None:
        if os.path.dirname(src) == str(tmp_path):
            raise KeyboardInterrupt  # SIGTERM is handled as Ctrl-C is (cli)
        rename(src, dst)

    monkeypatch.setattr(os, "rename", stopped)
    with pytest.raises(KeyboardInterrupt):
        space.scratch_dir(str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_a_rename_refused_by_a_folder_of_that_name_removes_only_the_runs_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rename = os.rename

    def taken(src: str, dst: str) -> None:
        if os.path.dirname(src) == str(tmp_path):  # someone's folder already holds the name
            os.mkdir(dst)
            (Path(dst) / "theirs").write_text("x")
        rename(src, dst)

    monkeypatch.setattr(os, "rename", taken)
    with pytest.raises(OSError):
        space.scratch_dir(str(tmp_path))
    [left] = tmp_path.iterdir()
    assert not left.name.startswith(space.STAGING) and (left / "theirs").read_text() == "x"


def test_a_folder_killed_between_its_mark_and_its_name_is_swept_and_one_without_a_mark_is_left(tmp_path: Path) -> None:
    dead = tmp_path / (space.STAGING + "kernel-factory-dead")
    dead.mkdir()
    (dead / space.RUN_MARK).write_text("")  # its run's lock went with the run
    early = tmp_path / (space.STAGING + "kernel-factory-early")  # a live run before its mark, or a kill then
    early.mkdir()
    assert space.sweep(str(tmp_path), "kernel-factory-") == [dead.name]
    assert os.listdir(tmp_path) == [early.name]


def test_the_sweep_leaves_what_is_not_a_killed_runs(tmp_path: Path) -> None:
    other = tmp_path / "kernel-factory-other"  # another tool's or an older version's: no mark
    other.mkdir()
    (other / "keep").write_text("x")
    target = tmp_path / "target"
    target.mkdir()
    (target / space.RUN_MARK).write_text("")
    (tmp_path / "kernel-factory-link").symlink_to(target)  # a link to a folder with a free mark
    linked_mark = tmp_path / "kernel-factory-linkedmark"
    linked_mark.mkdir()
    (linked_mark / space.RUN_MARK).symlink_to(target / space.RUN_MARK)
    (tmp_path / "kernel-factory-file").write_text("")
    elsewhere = tmp_path / "unrelated"  # a free mark under another prefix
    elsewhere.mkdir()
    (elsewhere / space.RUN_MARK).write_text("")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert space.sweep(str(tmp_path), "kernel-factory-") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (other / "keep").read_text() == "x" and (target / space.RUN_MARK).exists()


def test_a_killed_runs_folder_under_its_own_prefix_only(tmp_path: Path) -> None:
    work = killed(space.scratch_dir(str(tmp_path), prefix="kernel-factory-work-"))
    assert space.sweep(str(tmp_path), ".tmp-work-") == []
    assert space.sweep(str(tmp_path), "kernel-factory-") == [Path(work).name]
    assert list(tmp_path.iterdir()) == []


def test_no_parent_folder_sweeps_nothing(tmp_path: Path) -> None:
    assert space.sweep(str(tmp_path / "missing"), "kernel-factory-") == []


def test_a_scratch_folder_left_to_the_collector_is_removed_and_its_mark_closed(tmp_path: Path) -> None:
    scratch = space.scratch_dir(str(tmp_path))
    name, mark = scratch.name, scratch._mark
    assert mark is not None
    with pytest.warns(ResourceWarning, match="Implicitly cleaning up"):  # TemporaryDirectory's own finalizer
        del scratch
    assert not os.path.exists(name)
    try:
        os.fstat(mark)
        closed = False
    except OSError:
        closed = True
    assert closed


def test_space_needed_by_a_plan() -> None:
    # every wheel stays in the store; scratch holds the fetched trees of the `jobs` largest at once
    assert space.needs([(10, 10), (30, 30), (20, 0)], jobs=2) == (60, 40)
    assert space.needs([], jobs=4) == (0, 0)
    assert [report.size(n) for n in (999, 7_800_000_000, 1_234_567)] == ["999 B", "7.8 GB", "1.2 MB"]


def test_a_scratch_folder_that_cannot_be_made_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full or read-only file system at --scratch is exit 4 with its fix, not a traceback; another error passes."""
    scratch = tmp_path / "scratch"

    def fails(code: int) -> None:
        def mkdir(*args: object, **kw: object) -> None:
            raise OSError(code, os.strerror(code), str(scratch))

        monkeypatch.setattr(os, "mkdir", mkdir)

    fails(errno.ENOSPC)
    with pytest.raises(Unreachable) as full:
        space.scratch_dir(str(scratch))
    assert full.value.exit_code == 4
    assert str(full.value) == (f"{scratch}: No space left on device; free space there or point --store / --scratch "
                               "at another file system")
    fails(errno.ENAMETOOLONG)  # not a fault of the file system: passed through as it is
    with pytest.raises(OSError) as other:
        space.scratch_dir(str(scratch))
    assert type(other.value) is OSError and other.value.errno == errno.ENAMETOOLONG
