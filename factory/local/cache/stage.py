"""The private scratch folder inside a Hub cache, and the checked copies of a variant's files staged in it.

Scratch lives at ``<cache>/.locks/kernel-factory/run-<random>/`` (0700; docs/local-kernels.md): on the cache's own
file system, so a staged file becomes a blob by a link or a rename, never a second copy. Each run holds a ``flock``
on ``run-*/owner``; the next run removes every ``run-*`` whose lock it can take (what a kill -9 left).

A staged file is the installed file's bytes copied (or reflinked: a copy-on-write clone) and hashed as they are in
the copy, which no one else can write: the bytes checked are the bytes placed. Never a hard link to the installed
file: an in-place write in the environment would change the commit's bytes in the cache.

The cache may be shared by many users (a cluster's ``HF_HOME``), so anything below its root (the user's choice, and
may be a link) may have been planted: its folders are opened one level at a time, never through a link (``open_root``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath

from ...errors import Refused, Unreachable, unusable
from ...nofollow import FILE_FLAGS, HUB_CACHE, Folder, LinkRefused, refuse, remove, stream_digest
from ...safe_text import has_control
from ...space import unheld
from ...verify.digest import left_out

#: what vfat and exFAT answer where a link (symbolic or hard) or a mode cannot be made there
NOT_HERE = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS)


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
    os.lseek(fd, 0, os.SEEK_SET)
    with open(fd, "rb", buffering=0, closefd=False) as f:
        return stream_digest(f)


def relative_blob(rel: str, hexdigest: str) -> str:
    """The link text from ``snapshots/<sha>/build/<variant>/<rel>`` to ``blobs/<hex>``, relative as
    huggingface_hub writes it."""
    return "/".join([".."] * (3 + rel.count("/") + 1) + ["blobs", hexdigest])


def open_root(path: Path, *, create: bool = True) -> Folder:
    """The Hub cache's root folder (made if missing, with ``create``; it may be a link: the user's choice); the
    folders below it name the Hub cache in their refusals."""
    return Folder.root(path, HUB_CACHE, create=create)


LOCKS = ".locks"  # huggingface_hub's lock folder, which scan_cache_dir skips
OWN = "kernel-factory"  # our folder in it: LOCKS/OWN/run-<random>/
RUN_PREFIX = "run-"
OWNER = "owner"  # the flock'ed file of a live run
STALE_S = 3600.0  # a run folder without its owner file (killed between mkdir and open) is swept after this
MAX_FILE_BYTES = 16 << 30  # no file of a kernel variant is near this
MAX_FILES = 100_000
FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)


class CacheRefused(Refused):
    """The files to place do not match what they were promised to be (RECORD, the lock's hashes)."""


def _sweep(own: Folder) -> None:
    """Remove this user's run folders whose owner is gone (its flock can be taken), never through a link; another
    user's are theirs to sweep."""
    me = os.geteuid()
    for name in own.names():
        st = own.lstat(name) if name.startswith(RUN_PREFIX) else None
        if st is None or not stat.S_ISDIR(st.st_mode) or st.st_uid != me:
            continue
        with contextlib.suppress(OSError, LinkRefused):  # another run swept it first, or it is not ours to judge
            with own.sub(name) as run:
                try:
                    fd = os.open(OWNER, FILE_FLAGS, dir_fd=run.fd)
                except FileNotFoundError:
                    st = own.lstat(name)
                    if st is None or time.time() - st.st_mtime < STALE_S:
                        continue
                else:
                    if not unheld(fd):
                        continue  # a live run holds it
            remove(own, name)  # by descriptors: links inside are removed, never followed


@contextlib.contextmanager
def scratch_folder(root: Folder) -> Iterator[Folder]:
    """A new private folder ``<root>/.locks/kernel-factory/run-<random>`` (0700), removed on every exit path;
    stale ones of killed runs are swept first."""
    try:
        with root.sub(LOCKS, create=True) as locks:
            own = locks.sub(OWN, create=True)
    except LinkRefused as exc:
        raise Unreachable(f"{exc}; the Hub cache's private folder must be a real folder") from None
    except OSError as exc:
        raise unusable(exc, root.path / LOCKS) or exc from None
    with own:
        _sweep(own)
        name = f"{RUN_PREFIX}{os.urandom(8).hex()}"
        try:
            os.mkdir(name, 0o700, dir_fd=own.fd)
        except OSError as exc:
            raise unusable(exc, own.path) or exc from None
        try:
            with own.sub(name) as run:
                fd = os.open(OWNER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | FILE_FLAGS, 0o600, dir_fd=run.fd)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    yield run
                finally:
                    os.close(fd)
        finally:
            with contextlib.suppress(OSError, LinkRefused):
                remove(own, name)


def blob_mode(blobs: Folder) -> int:
    """The mode huggingface_hub gives a blob (that of a file freshly made in ``blobs/``: the folder's setgid,
    default ACL and the umask decide), less every write bit: a commit's bytes are read-only."""
    name = f".tmp-mode-{os.urandom(8).hex()}"
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | FILE_FLAGS, 0o666, dir_fd=blobs.fd)
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
        os.unlink(name, dir_fd=blobs.fd)
    return mode & ~0o222


def folder_mode(parent: Folder) -> tuple[int, int]:
    """The mode and group huggingface_hub's ``mkdir`` gives a folder in ``parent`` (the umask, a default ACL and
    the parent's setgid decide), read from a folder made there and removed again."""
    name = f".tmp-mode-{os.urandom(8).hex()}"
    os.mkdir(name, 0o777, dir_fd=parent.fd)
    try:
        st = os.stat(name, dir_fd=parent.fd, follow_symlinks=False)
        return stat.S_IMODE(st.st_mode), st.st_gid
    finally:
        os.rmdir(name, dir_fd=parent.fd)


def check_files(files: Mapping[str, str], where: str) -> None:
    if len(files) > MAX_FILES:
        raise CacheRefused(f"{where}: more than {MAX_FILES} files, more than a kernel variant holds")
    for rel, digest in files.items():
        if (not rel or rel.startswith("/") or "\\" in rel or str(PurePosixPath(rel)) != rel
                or any(p in (".", "..") for p in rel.split("/")) or has_control(rel)):
            raise CacheRefused(f"{where}: {rel!r} is not a plain relative path; reinstall the wheel")
        if len(digest) != 64 or digest.strip("0123456789abcdef"):
            raise CacheRefused(f"{where}: the hash given for {rel} is not a sha256 hex digest; reinstall the wheel")


def source_files(source: Path, where: str) -> list[str]:
    """Every file below ``source`` (posix paths relative to it), ``__pycache__`` folders left out; CacheRefused
    for a link or anything that is neither a folder nor a file (never followed)."""
    try:
        st = os.lstat(source)
    except FileNotFoundError:
        raise CacheRefused(f"{where}: {source} is missing (uninstalled meanwhile?); reinstall the wheel") from None
    if not stat.S_ISDIR(st.st_mode):
        raise CacheRefused(f"{where}: {source} is not a folder (a link?); reinstall the wheel")
    found: list[str] = []
    todo = [("", source)]
    while todo:
        prefix, folder = todo.pop()
        with os.scandir(folder) as it:
            for entry in it:
                rel = prefix + entry.name
                if entry.is_dir(follow_symlinks=False):
                    if not left_out(entry.name, True):  # bytecode: not part of a variant, nor of its digest
                        todo.append((rel + "/", Path(entry.path)))
                elif entry.is_file(follow_symlinks=False):
                    if not left_out(entry.name, False):
                        found.append(rel)
                else:
                    raise CacheRefused(f"{where}: {entry.path} is a link or a special file, which a kernel wheel "
                                       "never installs; reinstall the wheel")
                if len(found) > MAX_FILES:
                    raise CacheRefused(f"{where}: more than {MAX_FILES} files below {source}")
    return sorted(found)


def _clone(src: int, dst: int) -> bool:
    """Share ``src``'s extents with the new file ``dst`` (copy-on-write) where the file system can."""
    try:
        fcntl.ioctl(dst, FICLONE, src)
    except OSError:
        return False
    return True


def stage_file(source: Path, rel: str, run: Folder, name: str, mode: int) -> str:
    """Copy ``source/rel`` (never through a link) to the new file ``name`` in ``run``, made ``mode``, fsynced;
    the sha256 hex digest of the copy's bytes."""
    try:
        src = os.open(source / rel, FILE_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refuse(source / rel, "file") from None
        raise
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode):
            raise CacheRefused(f"{source / rel}: not a regular file; reinstall the wheel")
        if st.st_size > MAX_FILE_BYTES:
            raise CacheRefused(f"{source / rel}: larger than {MAX_FILE_BYTES >> 30} GiB; not a kernel's file")
        dst = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | FILE_FLAGS, 0o600, dir_fd=run.fd)
        try:
            if _clone(src, dst):
                digest = sha256_fd(dst)  # the clone's own bytes
            else:
                digest = _copy(src, dst, source / rel)
            set_mode(dst, mode)
            os.fsync(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)
    return digest


def _copy(src: int, dst: int, where: Path) -> str:
    with open(src, "rb", buffering=0, closefd=False) as f, open(dst, "wb", closefd=False) as out:
        return stream_digest(f, out=out, limit=MAX_FILE_BYTES, too_big=lambda: CacheRefused(
            f"{where}: grew past {MAX_FILE_BYTES >> 30} GiB while read; not a kernel's file"))
