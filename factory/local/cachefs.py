"""Folders of a shared Hub cache, opened one level at a time and never through a link.

The Hub cache may be shared by many environments and users (a cluster's ``HF_HOME``), so anything below its
root may have been planted. ``Folder`` holds a descriptor of one real folder; every name below it is looked up
with ``O_NOFOLLOW`` / ``lstat`` relative to that descriptor (openat), so a link swapped in after a check is
never followed either. The cache root itself is the user's choice and may be a link (``HF_HOME`` on a scratch
file system is common); everything from it down is checked.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from ..errors import Refused

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
CHUNK = 1 << 20


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
            if exc.errno == errno.ELOOP:
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
    """Remove ``name`` below ``parent`` and all it holds, by descriptors: a link is removed, never followed."""
    st = parent.lstat(name)
    if st is None:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=parent.fd)
        return
    with parent.sub(name) as folder:
        for child in folder.names():
            remove(folder, child)
    os.rmdir(name, dir_fd=parent.fd)


def sha256_fd(fd: int) -> str:
    """The sha256 hex digest of what ``fd`` holds from its start."""
    os.lseek(fd, 0, os.SEEK_SET)
    h = hashlib.sha256()
    while chunk := os.read(fd, CHUNK):
        h.update(chunk)
    return h.hexdigest()


def relative_blob(rel: str, hexdigest: str) -> str:
    """The link text from ``snapshots/<sha>/build/<variant>/<rel>`` to ``blobs/<hex>``, relative as
    huggingface_hub writes it."""
    return "/".join([".."] * (3 + rel.count("/") + 1) + ["blobs", hexdigest])
