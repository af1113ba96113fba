"""Room on disk, checked before a build starts, and the scratch folder for fetched sources.

A build writes each variant's files into the scratch folder (``--scratch``, the ``scratch`` config key, else
``TMPDIR``) and its wheel into the store's file system. Where the plan's size is known (a Hub tree lists file sizes;
a local tree is measured) a plan that cannot fit is refused before anything is written.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import Unreachable, unusable
from .report import size


def needs(sizes: Sequence[tuple[int, int]], jobs: int) -> tuple[int, int]:
    """(bytes on the store's file system, bytes in scratch) for variants of (size, fetched bytes): every wheel
    stays in the store (at most the variant's size, as zip only shrinks files); fetched trees live in scratch only
    while their job runs, so scratch holds at most the ``jobs`` largest."""
    store = sum(size for size, _ in sizes)
    scratch = sum(sorted((fetched for _, fetched in sizes), reverse=True)[: max(jobs, 1)])
    return store, scratch


def check_plan(sizes: Sequence[tuple[int, int]], jobs: int, store_dir: Path, scratch: Path) -> None:
    """Refuse a plan of variants of (size, fetched bytes) that cannot fit, before anything is written: Unreachable
    (exit 4) naming the file system that lacks room ("needs 7.8 GB, 1.2 GB free")."""
    wanted: dict[int, tuple[Path, int]] = {}
    for path, need in zip((store_dir, scratch), needs(sizes, jobs), strict=True):
        dev = os.stat(path).st_dev
        first, total = wanted.get(dev, (path, 0))
        wanted[dev] = (first, total + need)
    for path, need in wanted.values():
        st = os.statvfs(path)
        free = st.f_bavail * st.f_frsize  # what an unprivileged writer may still use
        if need > free:
            err = unusable(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), path)
            assert err is not None
            head, _, fix = str(err).partition("; ")
            raise Unreachable(f"{head} (the plan needs {size(need)}, {size(free)} free); {fix}")


def measure(folder: Path) -> int:
    """Bytes of the regular files below ``folder`` (symlinks not followed)."""
    return sum(os.lstat(os.path.join(root, name)).st_size for root, _dirs, names in os.walk(folder)
               for name in names)


RUN_MARK = ".kernel-factory-run"  # in each run's scratch folder, locked (flock) while the run lives


STAGING = ".new-"  # a scratch folder's name until its mark is locked: a folder named by its prefix always has one


class Scratch(tempfile.TemporaryDirectory[str]):
    """A run's scratch folder, marked as live by a lock on the file ``RUN_MARK`` in it.

    A run killed with ``kill -9`` (the OOM killer) cannot remove its scratch folder, and its workers die with
    it: the next run with the same prefix in the same parent removes such folders (``sweep``). The folder is made
    under ``STAGING`` + its name, its mark locked, and only then renamed to its name: a kill at any instant leaves
    no folder of that name without a mark (the sweep leaves a folder without one: it cannot tell it from a live
    run's), and a folder whose mark can be locked is one no run holds."""

    _finalizer: weakref.finalize[Any, Any]  # TemporaryDirectory's: removes the folder if no cleanup call does

    def __init__(self, prefix: str, dir: str | None) -> None:
        parent = dir if dir is not None else tempfile.gettempdir()
        sweep(parent, prefix)
        super().__init__(prefix=STAGING + prefix, dir=parent)
        staging = self.name
        final = os.path.join(parent, os.path.basename(staging)[len(STAGING):])
        self._mark: int | None = None
        try:
            self._mark = _mark(staging)
            os.rename(staging, final)  # mkdtemp's random part made the staging name unique, and so this one
            self.name = final
            self._finalizer.detach()  # TemporaryDirectory's, for the staging name: one for the folder's name
            self._finalizer = weakref.finalize(self, self._cleanup, final,  # type: ignore[attr-defined]
                                               warn_message=f"Implicitly cleaning up {self!r}")
        except BaseException:
            self._finalizer.detach()  # staging gone: renamed, so the folder of that name is this one; else only ours
            shutil.rmtree(staging if os.path.lexists(staging) else final, ignore_errors=True)
            if self._mark is not None:
                os.close(self._mark)
            raise
        if self._mark is not None:  # a folder left to the collector (no cleanup call) closes its mark too
            self._closer = weakref.finalize(self, os.close, self._mark)

    def cleanup(self) -> None:
        super().cleanup()
        if self._mark is not None:
            self._closer()
            self._mark = None


def _mark(folder: str) -> int | None:
    """Lock the new file ``RUN_MARK`` in ``folder``; its descriptor, or None where the file system has no locks
    (the folder is then never swept: it is only left behind by a killed run)."""
    tmp = os.path.join(folder, ".tmp-mark")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else holds it
    except OSError:
        os.close(fd)
        os.unlink(tmp)
        return None
    try:
        os.rename(tmp, os.path.join(folder, RUN_MARK))
    except BaseException:
        os.close(fd)
        raise
    return fd


def unheld(fd: int) -> bool:
    """Whether no live process holds a lock (flock) on the open file ``fd``; ``fd`` is closed either way."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def sweep(parent: str, prefix: str) -> list[str]:
    """Remove the scratch folders named ``prefix``* (or ``STAGING`` + ``prefix``*: killed between locking the mark
    and naming the folder) in ``parent`` that runs killed before their end left: this user's real folders (no
    links) whose mark no live run holds. A folder without a mark (another tool's, an older version's, a run that
    has not locked it yet) is left. Returns the names removed."""
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(parent) if n.startswith((prefix, STAGING + prefix))]
    except OSError:
        return removed
    for name in names:
        path = os.path.join(parent, name)
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                continue
            fd = os.open(os.path.join(path, RUN_MARK), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        if not unheld(fd):
            continue  # a live run holds it
        shutil.rmtree(path, ignore_errors=True)  # rmtree does not follow links below the folder
        removed.append(name)
    return removed


def scratch_dir(scratch: str | None, prefix: str = "kernel-factory-") -> Scratch:
    """The run's scratch folder: in ``scratch`` when given (made if missing), else in TMPDIR; folders of the same
    prefix that killed runs left there are removed first."""
    try:
        if scratch is not None:
            Path(scratch).mkdir(parents=True, exist_ok=True)
        return Scratch(prefix, scratch)
    except OSError as exc:
        raise unusable(exc, scratch or tempfile.gettempdir()) or exc from None
