"""Atomic file writes: a reader sees the old file or the new one, never half of either; and never through a link.

Every file kernel-factory writes goes to a new temporary file with a random name beside it (created with
O_CREAT|O_EXCL|O_NOFOLLOW, as mkstemp does: a planted file or link of that name is never opened), then is renamed
into place (a rename replaces a link of the target's name, never what it points to). Folders below a root that
others may write (a shared store, an index root) are lstat'ed before anything is written into or removed from
them (``Tree``): a folder that is a symbolic link is refused in one line. The tool's own files in a store or index
root (``PRIVATE_NAMES``) are never served or published.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, BinaryIO

from .errors import DigestMismatch, UsageError

CHUNK = 1 << 20  # what each hash-while-copy reads at once
TMP_PREFIX = ".tmp-"  # temporary files start with this; readers and listings skip them
NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC  # every open of a file in a store or index root
# The tool's own files in a store or an index root: bookkeeping, never served or published. Each starts with a dot,
# as do its temporary files (TMP_PREFIX): ``private`` is the one test, used by serve and publish.
PRIVATE_NAMES = (".kernel-factory.lock", ".catalog.sqlite", ".index-state.json")


def private(name: str) -> bool:
    """Whether a file or folder name is kernel-factory's own (PRIVATE_NAMES, temporary files) or hidden: such a name
    is never served or published."""
    return name.startswith(".")


class LinkRefused(UsageError):
    """A symbolic link (or something that is not a plain folder or file) where kernel-factory writes."""


def link_problem(path: str | os.PathLike[str], st: os.stat_result | None = None) -> str | None:
    """``path -> target`` when ``path`` is a symbolic link (else None); ``st``: its lstat, if taken already."""
    try:
        st = os.lstat(path) if st is None else st
    except FileNotFoundError:
        return None
    if not stat.S_ISLNK(st.st_mode):
        return None
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return f"{os.fspath(path)} -> {target}"


def refuse_link(path: str | os.PathLike[str], what: str = "folder") -> LinkRefused:
    """The one-line refusal of a link at ``path`` (``what``: a folder or a file kernel-factory writes)."""
    shown = link_problem(path) or os.fspath(path)
    return LinkRefused(f"{shown}: a symbolic link where kernel-factory writes a {what}, and it never writes "
                       "through a link; remove the link")


def real_folder(path: str | os.PathLike[str]) -> None:
    """Refuse ``path`` if it is a symbolic link or something other than a folder (missing is fine)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    _need_folder(path, st)


def _need_folder(path: str | os.PathLike[str], st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise refuse_link(path)
    if not stat.S_ISDIR(st.st_mode):
        raise LinkRefused(f"{os.fspath(path)}: not a folder, where kernel-factory writes one; remove it")


def open_nofollow(path: str | os.PathLike[str], what: str = "file") -> int:
    """A read-only descriptor of the regular file ``path``, never through a link: a link is refused (LinkRefused),
    and so is anything that is not a regular file; FileNotFoundError if there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refuse_link(path, what) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LinkRefused(f"{os.fspath(path)}: not a regular file, where kernel-factory reads a {what}; remove it")
    return fd


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
    try:  # from its creation on: an interrupt at any instant removes the temporary file
        fd = _create(tmp, path.parent, 0o600)  # as mkstemp makes it
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

    def _write(self, name: str, data: bytes, want_stat: bool) -> os.stat_result | None:
        self.count += 1
        return put(f"{self.prefix}{self.count}", os.path.join(self.folder, name), data, chmod=self.chmod,
                   fsync=self.fsync, want_stat=want_stat)


def put(
    tmp: str, path: str, data: bytes, *, chmod: bool = True, fsync: bool = False, want_stat: bool = False
) -> os.stat_result | None:
    """Write ``data`` to the new temporary file ``tmp`` (O_EXCL|O_NOFOLLOW: never one that is there) and rename it
    to ``path``; a failure removes it and names ``path``. ``chmod``: make it 0644 whatever the umask; ``fsync``
    before the rename; ``want_stat``: its fstat (the inode, mtime and size stay those of the file in place)."""
    st = None
    try:  # from its creation on: an interrupt at any instant removes the temporary file
        fd = _create(tmp, os.path.dirname(path), 0o644)
        try:
            write_all(fd, data)
            if chmod:
                os.fchmod(fd, 0o644)
            if fsync:
                os.fsync(fd)
            if want_stat:
                st = os.fstat(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as exc:
        discard(tmp)
        named(exc, path, tmp)  # the file, not its temporary name
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
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, mode)
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


def link_or_copy(src: Path, dest: Path) -> None:
    """Put ``src`` at ``dest`` atomically: a hard link (a temporary name, then a rename) where possible,
    else (another file system, links not allowed) a copy."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f"{TMP_PREFIX}{unique()}"
    try:  # from the link on: an interrupt at any instant removes the temporary name
        try:
            os.link(src, tmp)
        except OSError:
            copy_file(src, dest)
            return
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def holds(name: str, data: bytes) -> bool:
    """Whether the regular file ``name`` holds exactly ``data`` (read without following a link: a link holds
    nothing, and is replaced by the rename of the next write)."""
    try:
        fd = os.open(name, os.O_RDONLY | NOFOLLOW)
    except OSError:  # missing, or a link (ELOOP)
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
            return False
        with open(fd, "rb", closefd=False) as f:
            return f.read() == data
    finally:
        os.close(fd)


class Tree:
    """Writes and removals below one root folder that others may write (an index root), never through a link.

    Each folder between the root and a file is lstat'ed once per ``Tree`` (made where missing): a folder that is a
    symbolic link, or not a folder, is refused (``LinkRefused``, one line). The root itself is the user's choice
    and may be a link. Files are written as ``write_page`` says."""

    def __init__(self, root: Path | str) -> None:
        self.root = os.fspath(root)
        self._real: set[str] = set()  # relative folders known to be real folders ("": the root, made)

    def folder(self, rel: str) -> str:
        """The path of the folder ``rel`` (``/``-separated, relative to the root), each part checked; made if
        missing."""
        if rel not in self._real and not rel:
            os.makedirs(self.root, exist_ok=True)
            self._real.add(rel)
        elif rel not in self._real:
            parent, _, _ = rel.rpartition("/")
            self.folder(parent)
            path = os.path.join(self.root, rel)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                try:
                    os.mkdir(path)
                except FileExistsError:  # made meanwhile: checked below
                    pass
                st = os.lstat(path)
            _need_folder(path, st)
            self._real.add(rel)
        return os.path.join(self.root, rel) if rel else self.root

    def checked(self, rel: str) -> str | None:
        """The path of the folder ``rel`` if it is there (each part checked as ``folder`` does), else None."""
        if not os.path.isdir(self.root):
            return None
        try:
            parts = rel.split("/") if rel else []
            for i in range(1, len(parts) + 1):
                sub = "/".join(parts[:i])
                if sub not in self._real:
                    path = os.path.join(self.root, sub)
                    _need_folder(path, os.lstat(path))
                    self._real.add(sub)
        except FileNotFoundError:
            return None
        return os.path.join(self.root, rel) if rel else self.root

    def write(self, rel: str, data: bytes) -> bool:
        """``write_page`` of the file ``rel`` in its checked folder; True if written."""
        folder, _, base = rel.rpartition("/")
        return write_page(os.path.join(self.folder(folder), base), data)

    def remove(self, rel: str) -> int:
        """Remove the file ``rel`` (a link of that name itself, never what it points to) and its folder if that is
        left empty; 1 if it was there."""
        folder, _, base = rel.rpartition("/")
        where = self.checked(folder)
        if where is None:
            return 0
        try:
            os.unlink(os.path.join(where, base))
        except FileNotFoundError:
            return 0
        if folder:
            try:
                os.rmdir(where)
            except OSError:
                pass
            else:
                self._real.discard(folder)
        return 1


def write_page(name: str, data: bytes) -> bool:
    """Write one file atomically unless it already holds ``data``; True if written. The folder must be there.

    Renamed into place (readers never see half a page) from a new temporary file of a random name, but not fsynced
    one by one: thousands of fsyncs dominate a full index build. (The index's state file, written last, records
    each page's size, so a page torn by a crash is rendered again.)
    """
    if holds(name, data):
        return False
    put(os.path.join(os.path.dirname(name), f"{TMP_PREFIX}{unique()}"), name, data)
    return True
