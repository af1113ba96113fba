"""Atomic file writes: a reader sees the old file or the new one, never half of either; and never through a link.

Every file kernel-factory writes goes to a new temporary file of a random name beside it (nofollow.create), then is
renamed into place (nofollow.put). The hash-while-copy loop (``stream_digest``, ``Hashing``) and the tool's own
file names (``PRIVATE_NAMES``, never served or published) live here too.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, BinaryIO

from .errors import DigestMismatch
from .nofollow import TMP_PREFIX, create, discard, holds, named, open_nofollow, put, unique

__all__ = ["CHUNK", "PRIVATE_NAMES", "TMP_PREFIX", "Batch", "Hashing", "atomic_open", "copy_file", "file_digest",
           "fsync_path", "private", "remove_stale_tmp", "stream_digest", "unique", "write_bytes"]

CHUNK = 1 << 20  # what each hash-while-copy reads at once
# The tool's own files in a store or an index root: bookkeeping, never served or published. Each starts with a dot,
# as do its temporary files (TMP_PREFIX): ``private`` is the one test, used by serve and publish.
PRIVATE_NAMES = (".kernel-factory.lock", ".catalog.sqlite", ".index-state.json")


def private(name: str) -> bool:
    """Whether a file or folder name is kernel-factory's own (PRIVATE_NAMES, temporary files) or hidden: such a name
    is never served or published."""
    return name.startswith(".")


@contextmanager
def atomic_open(path: Path, *, fsync: bool = True) -> Iterator[BinaryIO]:
    """Write to a hidden temporary file beside ``path``; fsync and rename on success, remove on failure.

    ``fsync=False`` where the caller makes a batch durable at once (store/adopt.py syncs the file system)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # name the folder it was making
        exc.filename = str(path.parent)
        raise
    tmp = os.path.join(path.parent, f"{TMP_PREFIX}{unique()}")
    try:  # from its creation on: an interrupt at any instant removes the temporary file
        fd = create(tmp, path.parent, 0o600)  # as mkstemp makes it
        with os.fdopen(fd, "wb") as f:
            yield f
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as exc:
        discard(tmp)
        named(exc, path)
        raise


class Batch:
    """Atomic writes into one folder without an fsync each, for a caller that syncs the file system once for
    the batch (store/adopt.py): each file goes to a hidden temporary name unique to this batch, then is renamed
    into place; a failed write removes its temporary file and names the path. ``fsync``: each file is fsynced
    before its rename instead (a small batch; the caller then fsyncs the folder). Files are made 0644 (chmod'ed
    only where the umask takes bits of that away)."""

    def __init__(self, folder: Path | str, *, fsync: bool = False) -> None:
        self.folder = os.fspath(folder)
        self.prefix = os.path.join(self.folder, f"{TMP_PREFIX}{unique()}-")
        self.count = 0
        self.fsync = fsync
        self.chmod = _umask() & 0o644 != 0

    def put(self, name: str, data: bytes) -> os.stat_result:
        """Put ``data`` at ``folder/name``; the file's stat (its inode, mtime and size stay those of the file
        once renamed into place)."""
        self.count += 1
        return put(f"{self.prefix}{self.count}", os.path.join(self.folder, name), data, chmod=self.chmod,
                   fsync=self.fsync)


def fsync_path(path: Path | str) -> None:
    """fsync a file or a folder (a folder: the names renamed into it) by its path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it; else taken as one that needs chmod."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o777


def write_bytes(path: Path, data: bytes) -> bool:
    """Write ``data`` atomically unless the file already holds exactly it; True if written."""
    if holds(os.fspath(path), data):
        return False
    with atomic_open(path) as f:
        f.write(data)
    return True


def remove_stale_tmp(root: Path, before: float) -> int:
    """Remove ``.tmp-*`` files and folders below ``root`` (left by a killed run) last changed before ``before``.

    Returns how many were removed. Callers pass the time they took the store's lock, or, where there is no
    lock (a publish destination), a time far enough back that no live writer can own the file.
    """
    removed = 0
    for folder, dirs, names in os.walk(root):
        stale_dirs = [d for d in dirs if d.startswith(TMP_PREFIX)]
        dirs[:] = [d for d in dirs if not d.startswith(TMP_PREFIX)]
        for name in stale_dirs + [n for n in names if n.startswith(TMP_PREFIX)]:
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
                if st.st_mtime >= before or stat.S_ISLNK(st.st_mode):  # a link is never the tool's: left alone
                    continue
                if name in stale_dirs:
                    import shutil  # only here and in copy_file: an index run does not load it

                    shutil.rmtree(path)
                else:
                    os.unlink(path)
                removed += 1
            except FileNotFoundError:
                continue
    return removed


def file_digest(path: Path, algorithm: str = "sha256", *, follow: bool = True) -> str:
    """Hex digest of a file, read in 1 MiB chunks (md5 only to compare with single-part S3 ETags); ``follow=False``:
    never through a link (``open_nofollow``)."""
    with open(path, "rb") if follow else os.fdopen(open_nofollow(path), "rb") as f:
        return stream_digest(f, algorithm)


class Hashing:
    """A hash-while-copy's sink: each ``write`` is counted, hashed and passed on to ``out`` (None: hashed only); past
    ``limit`` bytes in all it raises ``too_big()`` instead. stream_digest pulls a file through it; an HTTP download
    calls ``write``."""

    def __init__(self, algorithm: str = "sha256", out: IO[bytes] | None = None, *, limit: int | None = None,
                 too_big: Callable[[], BaseException] | None = None) -> None:
        self._hash = hashlib.new(algorithm, usedforsecurity=False)
        self._out, self._limit, self._too_big = out, limit, too_big
        self.size = 0

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self._limit is not None and self.size > self._limit:
            raise self._too_big() if self._too_big else ValueError(f"more than {self._limit} bytes")
        self._hash.update(chunk)
        if self._out is not None:
            self._out.write(chunk)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def stream_digest(f: IO[bytes], algorithm: str = "sha256", out: IO[bytes] | None = None, *, limit: int | None = None,
                  too_big: Callable[[], BaseException] | None = None) -> str:
    """Hex digest of what is left to read of an open binary file, read in ``CHUNK``s; ``out``: each chunk is also
    written there (a copy hashed as it is made); ``limit`` and ``too_big``: as ``Hashing`` takes them. The one
    hash-while-copy loop of the factory (the store, the Hub cache writer, download, serve --hub)."""
    sink = Hashing(algorithm, out, limit=limit, too_big=too_big)
    while chunk := f.read(CHUNK):
        sink.write(chunk)
    return sink.hexdigest()


def copy_file(src: Path, dest: Path, sha256: str | None = None) -> None:
    """Copy ``src`` to ``dest`` atomically (a hidden temporary file, fsynced, then renamed), never through a link
    at ``src``. ``sha256``: the bytes copied must have this digest, else DigestMismatch (exit 3) and nothing is put
    there."""
    with atomic_open(dest) as out, os.fdopen(open_nofollow(src), "rb") as f:
        got = stream_digest(f, out=out)
        if sha256 is not None and got != sha256:
            raise DigestMismatch(f"{src}: its sha256 is {got}, not {sha256}")
