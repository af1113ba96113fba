"""The store lock's sweep: after a holder that did not finish, every ``.tmp-*`` leftover goes, whatever its time."""

from __future__ import annotations

import os
import time
from pathlib import Path

from kernel_factory.store.lock import LOCK_NAME, folder_lock


def test_leftovers_stamped_ahead_of_the_clock_are_removed_after_a_killed_holder(tmp_path: Path) -> None:
    files = tmp_path / "files"
    (files / ".tmp-work-1").mkdir(parents=True)
    partial = files / ".tmp-abc123-x-1.0-py3-none-any.whl"
    partial.write_bytes(b"PK half a wheel")
    ahead = time.time() + 3600  # an NFS server's clock an hour ahead, or this clock stepped back
    for path in (partial, files / ".tmp-work-1"):
        os.utime(path, (ahead, ahead))
    (files / "kept.whl").write_bytes(b"PK")
    (tmp_path / LOCK_NAME).write_text("999999999\n")  # a holder that was killed: its PID never cleared
    with folder_lock(tmp_path, wait_s=0):
        assert sorted(p.name for p in files.iterdir()) == ["kept.whl"]
    assert (tmp_path / LOCK_NAME).read_bytes() == b""


def test_a_cleared_lock_means_no_walk(tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    (files / ".tmp-own").write_bytes(b"")  # a finished holder left the lock empty: nothing is a leftover of it
    (tmp_path / LOCK_NAME).write_bytes(b"")
    with folder_lock(tmp_path, wait_s=0):
        pass
    assert (files / ".tmp-own").exists()
