import os
import time
from pathlib import Path

import pytest
from kernel_factory.atomic import atomic_open, remove_stale_tmp, write_bytes


def test_write_bytes_is_atomic_and_skips_equal_content(tmp_path: Path) -> None:
    target = tmp_path / "a" / "page.html"
    assert write_bytes(target, b"one")
    mtime = target.stat().st_mtime_ns
    assert not write_bytes(target, b"one")  # same bytes: not rewritten
    assert target.stat().st_mtime_ns == mtime
    assert write_bytes(target, b"two") and target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["page.html"]


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "page.html"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_open(target) as f:
        f.write(b"half")
        raise RuntimeError("killed")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_remove_stale_tmp_everywhere_below_root_but_not_fresh_ones(tmp_path: Path) -> None:
    old = time.time() - 7200
    stale_file = tmp_path / "simple" / "x" / ".tmp-abc"
    stale_dir = tmp_path / "files" / ".tmp-work-1"
    fresh = tmp_path / ".tmp-fresh"
    keep = tmp_path / "simple" / "x" / "index.html"
    for p in (stale_file, keep, fresh):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    (stale_dir / "job").mkdir(parents=True)
    (stale_dir / "job" / "w.whl").write_bytes(b"x")
    for p in (stale_file, stale_dir):
        os.utime(p, (old, old))
    assert remove_stale_tmp(tmp_path, time.time() - 3600) == 2
    assert not stale_file.exists() and not stale_dir.exists()
    assert fresh.exists() and keep.exists()


def test_folder_destination_clears_a_killed_publishs_leftovers(tmp_path: Path) -> None:
    from kernel_factory.publish.directory import STALE_TMP_S, DirectoryDestination

    dest = tmp_path / "dest"
    leftover = dest / "files" / ".tmp-0123"
    live = dest / "files" / ".tmp-4567"  # another publish may be writing this one right now
    for p in (leftover, live):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"half a wheel")
    then = time.time() - STALE_TMP_S - 60
    os.utime(leftover, (then, then))
    DirectoryDestination(dest).prepare([])
    assert not leftover.exists() and live.exists()
