"""The one home of link-safe, atomic file access: kernel-factory never reads or writes through a link it did not
choose, and a reader sees the old file or the new one, never half of either.

Below a root that others may write (a shared store, an index root, a ``--to`` folder, a shared Hub cache),
anything may have been planted. ``Folder`` is the primitive: a descriptor of one real folder, every name below it
looked up with ``O_NOFOLLOW`` / ``lstat`` relative to that descriptor (openat), so a link swapped in after a check
is never followed either.

Every refusal is one ``LinkRefused``: exit 4, as for any destination unusable as it is (errors.py), since the fix
is on the file system (remove what was planted), not in the command line or the input. Its one line names what
was found there: a symbolic link (and its target), a FIFO, a socket, a device, a file or a folder. Callers for
whom the link is an item of their input (a wheel to adopt, a file to publish) turn it into that item's refusal
(exit 3) instead. A root itself (the store, the index root, the cache root) is the user's choice and may be a link.

Every file kernel-factory writes goes to a new temporary file of a random name beside it (``create``), then is
renamed into place.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, BinaryIO

from .errors import DigestMismatch, Unreachable

NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC  # every open of a file in a store or index root
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW
#: O_NONBLOCK: a FIFO planted where a file is expected opens at once (and is then refused by its fstat) instead of
#: waiting forever for a writer; it changes nothing for a regular file.
FILE_FLAGS = os.O_RDONLY | NOFOLLOW | os.O_NONBLOCK
TMP_PREFIX = ".tmp-"  # temporary files start with this; readers and listings skip them
HUB_CACHE = "the Hub cache"  # a Folder's ``where`` in the Hub cache: its refusals say so
SWEEP_DEPTH = 16  # Tree.sweep walks no deeper below its folder (a page is at most 3 deep): a planted deep tree stays


class LinkRefused(Unreachable):
    """A symbolic link (or something that is not the folder or regular file expected) where kernel-factory reads
    or writes; nothing was read or written through it. Exit 4: the destination is unusable as it is. ``found``:
    what stands there ("a symbolic link", "a FIFO" ...), for a caller that words its own refusal."""

    def __init__(self, message: str, found: str = "") -> None:
        super().__init__(message)
        self.found = found


def unique() -> str:
    """32 random hex digits, for a temporary name (what uuid4().hex gives, without importing uuid)."""
    return os.urandom(16).hex()


def read_small(name: str, limit: int, folder: Folder | None = None,
               trusted: Callable[[os.stat_result], bool] | None = None) -> bytes | None:
    """The bytes of the regular file ``name`` (relative to ``folder`` where given) if it holds at most ``limit`` of
    them; None if it is missing, larger, not a regular file (a link is never followed) or ``trusted`` refuses it."""
    try:
        fd = open_nofollow(name, folder=folder)
    except (OSError, LinkRefused):
        return None
    try:
        if trusted is not None and not trusted(os.fstat(fd)):
            return None
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    return data if len(data) <= limit else None


def holds(name: str, data: bytes, folder: Folder | None = None) -> bool:
    """Whether the regular file ``name`` (relative to ``folder``, if given) holds exactly ``data``: a link, a FIFO or
    anything else holds nothing (the rename of the next write replaces it)."""
    return read_small(name, len(data), folder) == data


def create(tmp: str, folder: str | os.PathLike[str], mode: int, dir_fd: int | None = None) -> int:
    """Create the new temporary file ``tmp`` (O_CREAT|O_EXCL|O_NOFOLLOW, as mkstemp does: never one that is there,
    nor through a link); an error names ``folder``, not the temporary name."""
    try:
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, mode, dir_fd=dir_fd)
    except OSError as exc:
        exc.filename = os.fspath(folder)
        raise


def put(tmp: str, path: str, data: bytes, *, folder: Folder | None = None, chmod: bool = True,
        fsync: bool = False) -> os.stat_result:
    """Write ``data`` to the new temporary file ``tmp`` and rename it to ``path`` (a rename replaces a link of that
    name, never what it points to), both relative to ``folder``'s descriptor where given; the file's fstat (its
    inode, mtime and size stay those of the file in place). A failure removes the temporary file and names
    ``path``. ``chmod``: make it 0644 whatever the umask; ``fsync`` before the rename."""
    dir_fd = None if folder is None else folder.fd
    shown = path if folder is None else str(folder.path / path)
    try:  # from its creation on: an interrupt at any instant removes the temporary file
        fd = create(tmp, os.path.dirname(shown), 0o644, dir_fd)
        try:
            view = memoryview(data)
            while view:  # os.write may write less than it is given
                view = view[os.write(fd, view) :]
            if chmod:
                os.fchmod(fd, 0o644)
            if fsync:
                os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as exc:
        discard(tmp, dir_fd)
        named(exc, shown, tmp)  # the file, not its temporary name
        raise
    return st


def discard(tmp: str, dir_fd: int | None = None) -> None:
    with suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=dir_fd)


def named(exc: BaseException, path: str | os.PathLike[str], tmp: str | None = None) -> None:
    """An OSError from write() or close() names no file: give it ``path``, so its one-line message can. One that
    names ``tmp`` (the temporary file the write went to) names ``path`` instead."""
    if isinstance(exc, OSError) and (exc.filename is None or (tmp is not None and exc.filename == tmp)):
        exc.filename, exc.filename2 = os.fspath(path), None


def found(st: os.stat_result | None) -> str:
    """What an entry is, as a refusal names it: "a symbolic link", "a FIFO", "a socket", "a device", "a folder",
    "a file" (a regular one), "nothing" (gone meanwhile)."""
    if st is None:
        return "nothing"
    return next((kind for test, kind in _KINDS if test(st.st_mode)), "an unknown kind of file")


_KIND_WORDS = {"a folder": "dir", "a file": "file", "a symbolic link": "link"}  # Folder.kind's answers
_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a file"))


def refuse(path: str | os.PathLike[str], what: str = "folder", where: str = "", *, st: os.stat_result | None = None,
           name: str | None = None, dir_fd: int | None = None) -> LinkRefused:
    """The one-line refusal of whatever stands at ``path`` (looked at with lstat, never followed; ``name`` relative
    to ``dir_fd`` where given; ``st``: its (f)stat, if taken already) where kernel-factory expects a ``what``
    ("folder", "file", "lock file" ...); ``where``: the place named (``HUB_CACHE``), or none."""
    at = path if dir_fd is None or name is None else name
    if st is None:
        with suppress(OSError):
            st = os.stat(at, dir_fd=dir_fd, follow_symlinks=False)
    place = f" in {where}" if where else ""
    kind = found(st)
    if st is not None and stat.S_ISLNK(st.st_mode):
        target = "?"
        with suppress(OSError):
            target = os.readlink(at, dir_fd=dir_fd)
        return LinkRefused(f"{os.fspath(path)} -> {target}: {kind}{place} where kernel-factory expects a "
                           f"{what}, and it never writes or reads through a link; remove the link (rm, not rm -r) "
                           "and run again", kind)
    return LinkRefused(f"{os.fspath(path)}: {kind}{place} where kernel-factory expects a {what}; remove it and run "
                       "again", kind)


def link_problem(path: str | os.PathLike[str]) -> str | None:
    """``path -> target`` when ``path`` is a symbolic link (else None)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISLNK(st.st_mode):
        return None
    target = "?"
    with suppress(OSError):
        target = os.readlink(path)
    return f"{os.fspath(path)} -> {target}"


def real_folder(path: str | os.PathLike[str]) -> None:
    """Refuse ``path`` if it is a symbolic link or something other than a folder (missing is fine)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        raise refuse(path)


def open_nofollow(path: str | os.PathLike[str], what: str = "file", folder: Folder | None = None) -> int:
    """A read-only descriptor of the regular file ``path`` (relative to ``folder`` where given), never through a
    link (nor blocked by a FIFO): a link is refused (LinkRefused), and so is anything that is not a regular file;
    FileNotFoundError if there is none."""
    try:
        fd = os.open(path, FILE_FLAGS, dir_fd=None if folder is None else folder.fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a link; a socket
            raise refuse(path, what) if folder is None else folder.refuse(os.fspath(path), what) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise refuse(path, what, st=st) if folder is None else folder.refuse(os.fspath(path), what, st)
    os.set_blocking(fd, True)
    return fd


class Folder:
    """A descriptor of one real folder at ``path`` (for messages and returned paths); close it when done.
    ``where``: the place its refusals name (``HUB_CACHE``), or none; the folders below it keep it."""

    def __init__(self, fd: int, path: Path, where: str = "") -> None:
        self.fd = fd
        self.path = path
        self.where = where

    @classmethod
    def root(cls, path: Path, where: str = "", *, create: bool = True) -> Folder:
        """A root (made if missing, with ``create``); it and the folders above it may be links: the user's
        choice."""
        if create:
            path.mkdir(parents=True, exist_ok=True)
        return cls(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), path, where)

    def close(self) -> None:
        """Close the descriptor; again is a no-op (an interrupt between a close and the next step of a walk never
        closes a descriptor twice, which could be one opened meanwhile)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lstat(self, name: str) -> os.stat_result | None:
        with suppress(FileNotFoundError):
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        return None

    def kind(self, name: str) -> str | None:
        """"dir", "file", "link", "other", or None where there is no such entry."""
        st = self.lstat(name)
        return None if st is None else _KIND_WORDS.get(found(st), "other")

    def refuse(self, name: str, what: str = "folder", st: os.stat_result | None = None) -> LinkRefused:
        """The refusal of the entry ``name`` (looked at relative to this folder, never followed; ``st``: its
        (f)stat, if taken already) where a ``what`` is expected."""
        return refuse(self.path / name, what, self.where, st=st, name=name, dir_fd=self.fd)

    def sub(self, name: str, *, create: bool = False, mode: int = 0o777) -> Folder:
        """The real folder ``name`` below this one (made first with ``create``); LinkRefused where it is a link or
        not a folder; FileNotFoundError where it is missing and not to be made."""
        if create:
            try:
                os.mkdir(name, mode, dir_fd=self.fd)
            except FileExistsError:
                pass
            except OSError as exc:
                if exc.filename is None or exc.filename == name:
                    exc.filename = str(self.path / name)
                raise
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise self.refuse(name) from None
            if exc.filename is None or exc.filename == name:  # os.open names only the entry
                exc.filename = str(self.path / name)
            raise
        return Folder(fd, self.path / name, self.where)

    def open_file(self, name: str) -> int:
        """A read-only descriptor of the regular file ``name``; LinkRefused for a link or anything else."""
        return open_nofollow(name, folder=self)

    def read_small(self, name: str, limit: int,
                   trusted: Callable[[os.stat_result], bool] | None = None) -> bytes | None:
        return read_small(name, limit, self, trusted)

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
    here = parent.sub(name)
    trail = [(name, _identity(here.fd))]
    try:
        while True:
            child = _first_folder(here)
            if child is not None:
                above, here = here, here.sub(child)
                above.close()
                trail.append((child, _identity(here.fd)))
                continue
            me, _ = trail.pop()
            if not trail:
                here.close()  # (again in the finally below: a no-op)
                os.rmdir(me, dir_fd=parent.fd)
                return
            below, here = here, Folder(os.open("..", DIR_FLAGS, dir_fd=here.fd), here.path.parent, here.where)
            below.close()
            if _identity(here.fd) != trail[-1][1]:
                raise LinkRefused(f"{here.path}: moved while kernel-factory removed what it holds; left as it is",
                                  "a moved folder")
            os.rmdir(me, dir_fd=here.fd)
    finally:
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


class Tree:
    """Writes and removals below one root folder that others may write (an index root, a ``--to`` folder), never
    through a link: each call opens the folders between the root and its file one level at a time (``Folder.sub``)
    and acts relative to the last one's descriptor, so a folder swapped for a link after an earlier call is refused
    too. No descriptor stays open between calls."""

    def __init__(self, root: Path | str) -> None:
        self.root = os.fspath(root)

    def _open(self, rel: str, create: bool) -> Folder | None:
        """A descriptor of the folder ``rel`` (``/``-separated, relative to the root; "": the root), each part
        opened without following a link (made where missing, with ``create``); None where a part is missing."""
        try:
            here = Folder.root(Path(self.root), create=create)
        except (FileNotFoundError, NotADirectoryError):
            if create:
                raise
            return None  # no root folder (a file there: as missing, for a reader)
        try:
            for part in rel.split("/") if rel else []:
                above, here = here, here.sub(part, create=create)
                above.close()
        except FileNotFoundError:
            here.close()
            return None
        except BaseException:
            here.close()
            raise
        return here

    def folder(self, rel: str) -> str:
        """The path of the folder ``rel``, each part checked (never a link); made if missing. For a caller that
        writes by path (publish's copy): the check is at this instant, the write after it."""
        made = self.checked(rel, create=True)
        assert made is not None
        return made

    def checked(self, rel: str, *, create: bool = False) -> str | None:
        """The path of the folder ``rel`` if it is there (each part checked as ``folder`` does), else None."""
        folder = self._open(rel, create)
        if folder is None:
            return None
        folder.close()
        return os.path.join(self.root, rel) if rel else self.root

    def write(self, rel: str, data: bytes) -> bool:
        """Write the file ``rel`` unless it already holds ``data``; True if written. Renamed into place from a new
        temporary file in the same folder (readers never see half a page), not fsynced one by one: thousands of
        fsyncs dominate a full index build (the index's state file, written last, records each page's size, so a
        page torn by a crash is rendered again)."""
        folder_rel, _, base = rel.rpartition("/")
        folder = self._open(folder_rel, True)
        assert folder is not None
        with folder:
            if holds(base, data, folder):
                return False
            put(f"{TMP_PREFIX}{unique()}", base, data, folder=folder)
        return True

    def remove(self, rel: str) -> int:
        """Remove the file ``rel`` (a link of that name itself, never what it points to) and its folder if that is
        left empty; 1 if it was there."""
        folder_rel, _, base = rel.rpartition("/")
        folder = self._open(folder_rel, False)
        if folder is None:
            return 0
        with folder:
            try:
                os.unlink(base, dir_fd=folder.fd)
            except FileNotFoundError:
                return 0
        self._rmdir(folder_rel, strict=False)
        return 1

    def sweep(self, top: str, doomed: Callable[[str], bool]) -> int:
        """Remove each file below the folder ``top`` whose path (relative to the root) ``doomed`` names, then each
        folder left empty, ``top`` too; how many files were removed. By descriptors: a link is never walked into
        (one that ``doomed`` names is removed itself), ``top`` itself a link is refused (LinkRefused), and a folder
        swapped for a link meanwhile is left alone. Folders more than SWEEP_DEPTH below ``top`` are left as they
        are (no page is that deep; one descriptor is open per level)."""
        folder = self._open(top, False)
        if folder is None:
            return 0
        with folder:
            removed = _sweep(folder, top, doomed, SWEEP_DEPTH)
        self._rmdir(top)
        return removed

    def _rmdir(self, rel: str, strict: bool = True) -> None:
        """Remove the folder ``rel`` if it is empty (never the root), by its parent's descriptor."""
        parent_rel, _, name = rel.rpartition("/")
        above = self._open(parent_rel, False) if rel else None
        if above is not None:
            with above:
                _rmdir_if_empty(above, name, strict)


def _sweep(folder: Folder, rel: str, doomed: Callable[[str], bool], depth: int) -> int:
    removed = 0
    for name in folder.names():
        st = folder.lstat(name)
        if st is None:
            continue
        path = f"{rel}/{name}" if rel else name
        if stat.S_ISDIR(st.st_mode):
            if depth <= 0:
                continue
            try:
                sub = folder.sub(name)
            except (FileNotFoundError, LinkRefused):  # gone, or swapped for a link since the lstat: left alone
                continue
            with sub:
                removed += _sweep(sub, path, doomed, depth - 1)
            _rmdir_if_empty(folder, name)
        elif doomed(path):
            with suppress(FileNotFoundError):
                os.unlink(name, dir_fd=folder.fd)
                removed += 1
    return removed


def _rmdir_if_empty(parent: Folder, name: str, strict: bool = True) -> None:
    """``strict``: raise what is not "not empty" or "gone"; else nothing."""
    try:
        os.rmdir(name, dir_fd=parent.fd)
    except OSError as exc:
        if strict and exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
            raise


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
    """Atomic writes (``put``) into one folder without an fsync each, for a caller that syncs the file system once
    for the batch (store/adopt.py); ``fsync``: each file is fsynced before its rename instead (a small batch; the
    caller then fsyncs the folder). Files are made 0644, chmod'ed only where the umask takes bits of that away."""

    def __init__(self, folder: Path | str, *, fsync: bool = False) -> None:
        self.folder = os.fspath(folder)
        self.prefix = os.path.join(self.folder, f"{TMP_PREFIX}{unique()}-")
        self.count = 0
        self.fsync = fsync
        self.chmod = _umask() & 0o644 != 0

    def put(self, name: str, data: bytes) -> os.stat_result:
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
    with suppress(OSError, ValueError, IndexError), open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith(b"Umask:"):
                return int(line.split()[1], 8)
    return 0o777


def write_bytes(path: Path, data: bytes) -> bool:
    """Write ``data`` atomically unless the file already holds exactly it; True if written."""
    if holds(os.fspath(path), data):
        return False
    with atomic_open(path) as f:
        f.write(data)
    return True


def remove_stale_tmp(root: Path, before: float) -> int:
    """Remove the ``.tmp-*`` files and folders below ``root`` (left by a killed run) last changed before ``before``
    (the time the store's lock was taken, or, without a lock, one far enough back that no live writer owns them);
    how many were removed."""
    removed = 0
    for folder, dirs, names in os.walk(root):
        stale_dirs = [d for d in dirs if d.startswith(TMP_PREFIX)]
        dirs[:] = [d for d in dirs if not d.startswith(TMP_PREFIX)]
        for name in stale_dirs + [n for n in names if n.startswith(TMP_PREFIX)]:
            path = os.path.join(folder, name)
            with suppress(FileNotFoundError):
                st = os.lstat(path)
                if st.st_mtime >= before or stat.S_ISLNK(st.st_mode):  # a link is never the tool's: left alone
                    continue
                if name in stale_dirs:
                    import shutil  # only here and in copy_file: an index run does not load it

                    shutil.rmtree(path)
                else:
                    os.unlink(path)
                removed += 1
    return removed


def file_digest(path: Path, algorithm: str = "sha256", *, follow: bool = True) -> str:
    """Hex digest of a file, read in 1 MiB chunks (md5 only to compare with single-part S3 ETags); ``follow=False``:
    never through a link (``open_nofollow``)."""
    with open(path, "rb") if follow else os.fdopen(open_nofollow(path), "rb") as f:
        return stream_digest(f, algorithm)


class Hashing:
    """A hash-while-copy's sink: each ``write`` is counted, hashed and passed on to ``out`` (None: hashed only); past
    ``limit`` bytes in all it raises ``too_big()`` instead."""

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
    """Hex digest of what is left to read of an open binary file, read in ``CHUNK``s through ``Hashing`` (its
    ``out``, ``limit`` and ``too_big``): the one hash-while-copy loop of the factory."""
    sink = Hashing(algorithm, out, limit=limit, too_big=too_big)
    while chunk := f.read(CHUNK):
        sink.write(chunk)
    return sink.hexdigest()


def copy_file(src: Path, dest: Path, sha256: str | None = None) -> None:
    """Copy ``src`` to ``dest`` (``atomic_open``), never through a link at ``src``; ``sha256``: the bytes copied must
    have this digest, else DigestMismatch (exit 3) and nothing is put there."""
    with atomic_open(dest) as out, os.fdopen(open_nofollow(src), "rb") as f:
        got = stream_digest(f, out=out)
        if sha256 is not None and got != sha256:
            raise DigestMismatch(f"{src}: its sha256 is {got}, not {sha256}")
