"""Room on disk, checked before a build starts, and the scratch folder for fetched sources.

A build writes each variant's files into the scratch folder (``--scratch``, the
``scratch`` config key, else ``TMPDIR``) and its wheel into the store's file
system. Where the plan's size is known (a Hub tree lists file sizes; a local
tree is measured) a plan that cannot fit is refused before anything is written.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .errors import Unreachable, unusable


def human(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on ``path``'s file system."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def needs(sizes: Sequence[tuple[int, int]], jobs: int) -> tuple[int, int]:
    """(bytes on the store's file system, bytes in scratch) for variants of (size, fetched bytes).

    Every wheel stays in the store (at most the variant's size, as zip only shrinks files); fetched
    trees live in scratch only while their job runs, so scratch holds at most the ``jobs`` largest.
    """
    store = sum(size for size, _ in sizes)
    scratch = sum(sorted((fetched for _, fetched in sizes), reverse=True)[: max(jobs, 1)])
    return store, scratch


def check(store_dir: Path, store_need: int, scratch_dir: Path, scratch_need: int) -> None:
    """Unreachable (exit 4) naming the file system that lacks room: "needs 7.8 GB, 1.2 GB free"."""
    wanted: dict[int, tuple[Path, int]] = {}
    for path, need in ((store_dir, store_need), (scratch_dir, scratch_need)):
        dev = os.stat(path).st_dev
        first, total = wanted.get(dev, (path, 0))
        wanted[dev] = (first, total + need)
    for path, need in wanted.values():
        free = free_bytes(path)
        if need > free:
            err = unusable(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), path)
            assert err is not None
            head, _, fix = str(err).partition("; ")
            raise Unreachable(f"{head} (the plan needs {human(need)}, {human(free)} free); {fix}")


def measure(folder: Path) -> int:
    """Bytes of the regular files below ``folder`` (symlinks not followed)."""
    total = 0
    for root, _dirs, names in os.walk(folder):
        for name in names:
            st = os.lstat(os.path.join(root, name))
            total += st.st_size
    return total


def scratch_dir(scratch: str | None, prefix: str = "kernel-factory-") -> tempfile.TemporaryDirectory[str]:
    """The run's scratch folder: in ``scratch`` when given (made if missing), else in TMPDIR."""
    try:
        if scratch is not None:
            Path(scratch).mkdir(parents=True, exist_ok=True)
        return tempfile.TemporaryDirectory(prefix=prefix, dir=scratch)
    except OSError as exc:
        err = unusable(exc, scratch or tempfile.gettempdir())
        if err is not None:
            raise err from None
        raise


def check_plan(sizes: Sequence[tuple[int, int]], jobs: int, store_dir: Path, scratch: Path) -> None:
    """Refuse a plan of variants of (size, fetched bytes) that cannot fit; nothing is written yet."""
    store_need, scratch_need = needs(sizes, jobs)
    check(store_dir, store_need, scratch, scratch_need)

