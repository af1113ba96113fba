"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

TMP_PREFIX = ".tmp-"  # temporary files start with this; readers and listings skip them


def unique() -> str:
    """32 random hex digits, for a temporary name (what uuid4().hex gives, without importing uuid)."""
    return os.urandom(16).hex()


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
    fd = _create(tmp, path.parent, 0o600)  # as mkstemp makes it
    try:
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

    def write(self, name: str, data: bytes) -> os.stat_result:
        """Put ``data`` at ``folder/name``; the file's stat (its inode, mtime and size stay those of the file
        once renamed into place)."""
        st = self._write(name, data, True)
        assert st is not None
        return st

    def put(self, name: str, data: bytes) -> None:
        """``write`` without the stat."""
        self._write(name, data, False)

    def _write(self, name: str, data: bytes, stat: bool) -> os.stat_result | None:
        path = os.path.join(self.folder, name)
        self.count += 1
        tmp = f"{self.prefix}{self.count}"
        fd = _create(tmp, self.folder, 0o644)
        st = None
        try:
            try:
                write_all(fd, data)
                if self.chmod:
                    os.fchmod(fd, 0o644)
                if self.fsync:
                    os.fsync(fd)
                if stat:
                    st = os.fstat(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException as exc:
            discard(tmp)
            named(exc, path, tmp)
            raise
        return st


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (os.write may write less than it is given)."""
    done = os.write(fd, data)
    if done < len(data):  # a short write: write on
        view = memoryview(data)[done:]
        while view:
            view = view[os.write(fd, view) :]


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


def _create(tmp: str, folder: Path | str, mode: int) -> int:
    """Create the new temporary file ``tmp`` (never an existing one); an error names ``folder``, not the
    temporary name."""
    try:
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    except OSError as exc:
        exc.filename = os.fspath(folder)
        raise


def discard(tmp: str) -> None:
    """Remove the temporary file of a failed write, if it is there."""
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass


def named(exc: BaseException, path: Path | str, tmp: str | None = None) -> None:
    """An OSError from write() or close() names no file: give it ``path``, so its one-line message can. One that
    names ``tmp`` (the temporary file the write went to) names ``path`` instead."""
    if isinstance(exc, OSError) and (exc.filename is None or (tmp is not None and exc.filename == tmp)):
        exc.filename, exc.filename2 = str(path), None


def write_bytes(path: Path, data: bytes) -> bool:
    """Write ``data`` atomically unless the file already holds exactly it; True if written."""
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
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
                if st.st_mtime >= before:
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


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in 1 MiB chunks (md5 only to compare with single-part S3 ETags)."""
    with open(path, "rb") as f:
        return stream_digest(f, algorithm)


def stream_digest(f: BinaryIO, algorithm: str = "sha256") -> str:
    """Hex digest of what is left to read of an open binary file, read in 1 MiB chunks."""
    h = hashlib.new(algorithm, usedforsecurity=False)
    while chunk := f.read(1 << 20):
        h.update(chunk)
    return h.hexdigest()


def copy_file(src: Path, dest: Path) -> None:
    """Copy ``src`` to ``dest`` atomically (a hidden temporary file, fsynced, then renamed)."""
    import shutil

    with atomic_open(dest) as out, open(src, "rb") as f:
        shutil.copyfileobj(f, out, 1 << 20)


def link_or_copy(src: Path, dest: Path) -> None:
    """Put ``src`` at ``dest`` atomically: a hard link (a temporary name, then a rename) where possible,
    else (another file system, links not allowed) a copy."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f"{TMP_PREFIX}{unique()}"
    try:
        os.link(src, tmp)
    except OSError:
        copy_file(src, dest)
        return
    try:
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
