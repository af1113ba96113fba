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


def test_the_stale_sweep_leaves_links_alone(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    (victim / "inner").mkdir(parents=True)
    (victim / "inner" / "f").write_bytes(b"theirs")
    root = tmp_path / "store"
    root.mkdir()
    (root / ".tmp-dir").symlink_to(victim)
    (root / ".tmp-file").symlink_to(victim / "inner" / "f")
    old = time.time() - 7200
    for p in (root / ".tmp-dir", root / ".tmp-file"):
        os.utime(p, (old, old), follow_symlinks=False)
    assert remove_stale_tmp(root, time.time()) == 0
    assert (victim / "inner" / "f").read_bytes() == b"theirs"
    assert (root / ".tmp-dir").is_symlink() and (root / ".tmp-file").is_symlink()


def test_copy_file_puts_nothing_when_the_bytes_are_not_the_expected_ones(tmp_path: Path) -> None:
    import hashlib

    from kernel_factory.atomic import copy_file
    from kernel_factory.errors import DigestMismatch
    from kernel_factory.nofollow import LinkRefused

    src = tmp_path / "a.whl"
    src.write_bytes(b"wheel")
    with pytest.raises(DigestMismatch):
        copy_file(src, tmp_path / "out" / "a.whl", hashlib.sha256(b"other").hexdigest())
    assert list((tmp_path / "out").iterdir()) == []
    (tmp_path / "link.whl").symlink_to(src)
    with pytest.raises(LinkRefused):
        copy_file(tmp_path / "link.whl", tmp_path / "out" / "b.whl")
    copy_file(src, tmp_path / "out" / "a.whl", hashlib.sha256(b"wheel").hexdigest())
    assert (tmp_path / "out" / "a.whl").read_bytes() == b"wheel"


def test_every_private_name_is_private() -> None:
    from kernel_factory.atomic import PRIVATE_NAMES, TMP_PREFIX, private
    from kernel_factory.index.state import STATE_FILE
    from kernel_factory.store.catalog import CATALOG_FILE
    from kernel_factory.store.lock import LOCK_NAME

    assert set(PRIVATE_NAMES) == {STATE_FILE, CATALOG_FILE, LOCK_NAME}
    assert all(private(n) for n in (*PRIVATE_NAMES, f"{TMP_PREFIX}x"))
    assert not any(private(n) for n in ("index.html", "files", "a.whl"))


def test_stream_digest_copies_hashes_and_stops_past_its_limit() -> None:
    """The one hash-while-copy loop: every byte hashed and written; more than ``limit`` raises ``too_big()`` before
    the chunk past it is written; exactly ``limit`` is taken. ``Hashing`` is the same sink, fed by hand."""
    import hashlib
    import io

    from kernel_factory.atomic import CHUNK, Hashing, stream_digest

    data = os.urandom(2 * CHUNK + 5)
    out = io.BytesIO()
    assert stream_digest(io.BytesIO(data), out=out) == hashlib.sha256(data).hexdigest() and out.getvalue() == data
    assert stream_digest(io.BytesIO(data), "md5") == hashlib.md5(data).hexdigest()
    assert stream_digest(io.BytesIO(b"x" * 10), limit=10, too_big=lambda: OSError("big")) == \
        hashlib.sha256(b"x" * 10).hexdigest()
    out = io.BytesIO()
    with pytest.raises(OSError, match="^big$"):
        stream_digest(io.BytesIO(data), out=out, limit=CHUNK + 1, too_big=lambda: OSError("big"))
    assert out.getvalue() == data[:CHUNK]  # the second chunk crosses the limit: not written
    sink = Hashing(limit=3, too_big=lambda: ValueError("past 3"))
    sink.write(b"ab")
    sink.write(b"c")
    assert sink.size == 3 and sink.hexdigest() == hashlib.sha256(b"abc").hexdigest()
    with pytest.raises(ValueError, match="past 3"):
        sink.write(b"d")
