"""One writer at a time per store: an advisory lock file beside the records.

The holder writes its PID into it, so a waiting run can say who holds it and whether that process lives. Its
descriptor is kept in ``HELD_FDS`` so that forked workers close their copy (pool.py): an ``flock`` belongs to the
open file. A holder that finishes empties the file; only after one that did not (killed) is the store swept of
``.tmp-`` leftovers, so a run with nothing to do walks nothing.
"""

from __future__ import annotations

import errno
import fcntl
import math
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from .. import nofollow, report
from ..errors import UsageError

LOCK_NAME = ".kernel-factory.lock"
HELD_FDS: set[int] = set()  # lock file descriptors this process holds (forked workers close them)


def describe_holder(path: Path) -> tuple[str, bool]:
    """(``PID 123, running`` or not, from the PID the holder wrote; whether that process is gone)."""
    text = ""
    with suppress(OSError, nofollow.LinkRefused), os.fdopen(nofollow.open_nofollow(path, "lock file"), "rb") as f:
        text = f.read(64).decode("ascii", errors="replace").strip()
    if not text.isdigit() or int(text) <= 0:
        return "PID unknown", False
    try:
        os.kill(int(text), 0)  # signal 0: whether it exists, sending nothing
    except ProcessLookupError:
        return f"PID {int(text)}, no longer running: a process it started still holds the lock", True
    except PermissionError:  # exists, owned by another user
        pass
    return f"PID {int(text)}, running", False


@contextmanager
def folder_lock(root: Path, wait_s: float) -> Iterator[None]:
    """Hold the lock of the store folder ``root``, waiting up to ``wait_s`` s (KERNEL_FACTORY_LOCK_WAIT)."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK_NAME
    # O_CLOEXEC: programs the run starts (git, auditwheel) never inherit the lock; forked workers close it.
    # O_NOFOLLOW: a lock file that is a link (to a file someone wants emptied) is refused, never opened
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | nofollow.NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise nofollow.refuse(path, "lock file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # a FIFO or a device: never written
            raise nofollow.refuse(path, "lock file", st=st)
        deadline = time.monotonic() + wait_s
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    who, dead = describe_holder(path)
                    fix = (f"end the processes that hold {path} (`fuser -v {path}` lists them), then run again" if dead
                           else "wait for it to finish (or raise KERNEL_FACTORY_LOCK_WAIT)")
                    raise UsageError(f"{root}: another kernel-factory run ({who}) holds {LOCK_NAME}; {fix}") from None
                if not told:
                    who = describe_holder(path)[0]
                    report.progress(f"waiting for another kernel-factory run on {root} ({who}) ...")
                    told = True
                time.sleep(0.2)
        HELD_FDS.add(fd)
        before = os.fstat(fd)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            if before.st_size:  # the last holder did not clear it (killed): its leftovers may be anywhere below;
                # every writer of the store holds this lock, so each one is a leftover, whatever its time says
                # (a clock stepped back, an NFS server's clock ahead of this one)
                nofollow.remove_stale_tmp(root, math.inf)
            yield
        finally:
            HELD_FDS.discard(fd)
            # emptied, its times given back: a run that changed nothing leaves every file as it was
            os.ftruncate(fd, 0)
            os.utime(fd, ns=(before.st_atime_ns, before.st_mtime_ns))
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
