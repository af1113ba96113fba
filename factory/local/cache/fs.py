"""Folders of a shared Hub cache, opened one level at a time and never through a link.

The Hub cache may be shared by many environments and users (a cluster's ``HF_HOME``), so anything below its
root may have been planted. ``Folder`` holds a descriptor of one real folder; every name below it is looked up
with ``O_NOFOLLOW`` / ``lstat`` relative to that descriptor (openat), so a link swapped in after a check is
never followed either. The cache root itself is the user's choice and may be a link (``HF_HOME`` on a scratch
file system is common); everything from it down is checked.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ...atomic import stream_digest
from ...errors import Refused

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: O_NONBLOCK: a FIFO planted where a file is expected opens at once (and is then refused by its fstat) instead of
#: waiting forever for a writer; it changes nothing for a regular file.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
#: what vfat and exFAT answer where a link (symbolic or hard) or a mode cannot be made there
NOT_HERE = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS)


class CacheLink(Refused):
    """A symbolic link (or something that is not a folder or file) inside the Hub cache where kernel-factory
    reads or writes; nothing was written there."""


def planted(path: Path, what: str = "folder") -> CacheLink:
    try:
        shown = f"{path} -> {os.readlink(path)}"
    except OSError:
        shown = str(path)
    return CacheLink(f"{shown}: a symbolic link in the Hub cache where kernel-factory expects a {what}, and it never "
                     "writes or reads through one; remove the link (rm, not rm -r) and run again")


class Folder:
    """A descriptor of one real folder at ``path`` (for messages and returned paths); close it when done."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    @classmethod
    def root(cls, path: Path) -> Folder:
        """The cache root, made if missing (it and the folders above it may be links: the user's choice)."""
        path.mkdir(parents=True, exist_ok=True)
        return cls(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), path)

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lstat(self, name: str) -> os.stat_result | None:
        """The entry ``name`` as it is (a link is not followed); None if there is none."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def kind(self, name: str) -> str | None:
        """"dir", "file", "link", "other", or None where there is no such entry."""
        st = self.lstat(name)
        if st is None:
            return None
        mode = st.st_mode
        return "dir" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "link" if stat.S_ISLNK(mode) \
            else "other"

    def sub(self, name: str, *, create: bool = False, mode: int = 0o777) -> Folder:
        """The real folder ``name`` below this one (made first with ``create``); CacheLink where it is a link or
        not a folder; FileNotFoundError where it is missing and not to be made."""
        if create:
            try:
                os.mkdir(name, mode, dir_fd=self.fd)
            except FileExistsError:
                pass
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise planted(self.path / name) from None
            if exc.filename is None:
                exc.filename = str(self.path / name)
            raise
        return Folder(fd, self.path / name)

    def open_file(self, name: str) -> int:
        """A read-only descriptor of the regular file ``name``; CacheLink for a link or anything else."""
        try:
            fd = os.open(name, FILE_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO):  # a link; a socket
                raise planted(self.path / name, "file") from None
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise planted(self.path / name, "file")
        return fd

    def read_small(self, name: str, limit: int) -> bytes | None:
        """The bytes of the regular file ``name`` if it holds at most ``limit`` of them; None if it is missing,
        larger, or not a regular file (a link is never followed)."""
        try:
            fd = self.open_file(name)
        except (OSError, CacheLink):
            return None
        try:
            data = os.read(fd, limit + 1)
        finally:
            os.close(fd)
        return data if len(data) <= limit else None

    def names(self) -> list[str]:
        return os.listdir(self.fd)

    def fsync(self) -> None:
        os.fsync(self.fd)


def remove(parent: Folder, name: str) -> None:
    """Remove ``name`` below ``parent`` and all it holds, by descriptors: a link is removed, never followed. The
    walk keeps its own trail (a planted folder thousands deep is no RecursionError) and one descriptor open:
    it goes back up through ``..``, checked to be the folder it came down from (stops where one was moved)."""
    st = parent.lstat(name)
    if st is None:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=parent.fd)
        return
    first = parent.sub(name)
    here: Folder | None = first
    trail = [(name, _identity(first.fd))]
    try:
        while here is not None:
            child = _first_folder(here)
            if child is not None:
                down = here.sub(child)
                here.close()
                here = down
                trail.append((child, _identity(down.fd)))
                continue
            me, _ = trail.pop()
            if not trail:
                here.close()
                here = None
                os.rmdir(me, dir_fd=parent.fd)
                return
            up = Folder(os.open("..", DIR_FLAGS, dir_fd=here.fd), here.path.parent)
            here.close()
            here = up
            if _identity(up.fd) != trail[-1][1]:
                raise CacheLink(f"{up.path}: moved while kernel-factory removed what it holds; left as it is")
            os.rmdir(me, dir_fd=up.fd)
    finally:
        if here is not None:
            here.close()


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _first_folder(folder: Folder) -> str | None:
    """Unlink every entry of ``folder`` that is not a folder; the name of one folder left in it, or None."""
    for child in folder.names():
        st = folder.lstat(child)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode):
            return child
        os.unlink(child, dir_fd=folder.fd)
    return None


def set_mode(target: int | str, mode: int) -> None:
    """chmod ``target`` (a descriptor, or a path in the run's private folder), as huggingface_hub does: where
    the file system keeps no modes (vfat, exFAT) the failure is passed over."""
    try:
        os.chmod(target, mode)
    except OSError as exc:
        if exc.errno not in NOT_HERE:
            raise


def trusted(st: os.stat_result) -> bool:
    """Whether a file already in the cache can be taken as it is: owned by this user, writable by no one else
    and linked nowhere else (a hard link to a file outside the cache would let its owner change it later)."""
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022 and st.st_nlink == 1


def sha256_fd(fd: int) -> str:
    """The sha256 hex digest of what ``fd`` holds from its start."""
    os.lseek(fd, 0, os.SEEK_SET)
    with open(fd, "rb", buffering=0, closefd=False) as f:
        return stream_digest(f)


def relative_blob(rel: str, hexdigest: str) -> str:
    """The link text from ``snapshots/<sha>/build/<variant>/<rel>`` to ``blobs/<hex>``, relative as
    huggingface_hub writes it."""
    return "/".join([".."] * (3 + rel.count("/") + 1) + ["blobs", hexdigest])
