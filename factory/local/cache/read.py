"""What the cache writer reads back by descriptors, and how a failed run takes back what it made.

``read_own``/``write_own``: a file of kernel-factory's beside a snapshot (download's record), trusted only where
this user wrote it and no one else can write it; ``variant_holds``: a placed variant's bytes, every link followed
to its blob and the blob hashed. ``take_back``: what ``place`` recorded (``place.Made``), removed by identity
and never a blob (writer.py's ``place``, ``Writer.take_back`` and download's all or nothing use it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from ...config import repo_folder_name
from ...nofollow import Folder, LinkRefused, remove
from .fs import open_root, set_mode, trusted
from .place import MARKER, Made, holds, identity


def repo_folder(root: Path, repo_id: str, kind: str = "kernel") -> Path:
    """``<root>/kernels--org--name`` (``kind="model"``: the legacy ``models--`` folder kernels also reads)."""
    return root / repo_folder_name(repo_id, kind)


def take_back(root: Path, repo_id: str, made: list[Made]) -> None:
    """Undo what runs of this process placed for ``repo_id`` (``made``, as ``place`` and ``set_refs`` record it),
    by descriptors and by identity: a ref set back to the commit it named only while it is still the file this
    run wrote, a snapshot or variant removed only while it is still the folder this run renamed there, the
    folders this run made removed only while they are empty. Blobs are never taken back: once published,
    another run's snapshot may link to them. Best effort: the caller is failing already."""
    with contextlib.suppress(OSError, LinkRefused), _open_root(root) as top:
        name = repo_folder(root, repo_id).name
        if top.kind(name) != "dir":
            return
        with top.sub(name) as repo:
            for m in reversed(made):
                with contextlib.suppress(OSError, LinkRefused):
                    _undo(repo, m)
            for m in reversed(made):
                if m.kind == "dir" and m.name == "snapshots" and repo.kind("blobs") is not None:
                    continue  # blobs stay: huggingface_hub's scan wants snapshots/ beside them
                if m.kind == "dir" and _same(repo, m.name, m.ident):
                    with contextlib.suppress(OSError):
                        os.rmdir(m.name, dir_fd=repo.fd)
        made_repo = [m for m in made if m.kind == "repo"]
        if made_repo and _same(top, name, made_repo[0].ident):
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=top.fd)
    made.clear()


def _same(folder: Folder, name: str, ident: tuple[int, int]) -> bool:
    st = folder.lstat(name)
    return st is not None and identity(st) == ident


def _undo(repo: Folder, m: Made) -> None:
    if m.kind == "ref" and repo.kind("refs") == "dir":
        with repo.sub("refs") as refs:
            data = refs.read_small(m.name, 256) if _same(refs, m.name, m.ident) else None
            if data is not None and data.decode("ascii", "replace").strip() == m.sha:  # not rewritten in place
                _set_ref(refs, m.name, m.old)
    elif m.kind == "snapshot" and repo.kind("snapshots") == "dir":
        with repo.sub("snapshots") as snaps:
            if _same(snaps, m.name, m.ident):
                remove(snaps, m.name)
    elif m.kind == "variant" and repo.kind("snapshots") == "dir":
        with repo.sub("snapshots") as snaps, snaps.sub(m.sha) as snap, snap.sub("build") as build:
            if _same(build, m.name, m.ident):
                remove(build, m.name)


def _open_root(root: Path) -> Folder:
    """The cache root as it is (never made: a reader writes nothing)."""
    return open_root(root, create=False)


def _snapshot(root: Path, repo_id: str, sha: str) -> Folder | None:
    """``snapshots/<sha>`` of ``repo_id``, opened one real folder at a time; None where any is missing or a
    link."""
    try:
        with _open_root(root) as top, top.sub(repo_folder(root, repo_id).name) as repo, \
                repo.sub("snapshots") as snaps:
            return snaps.sub(sha)
    except (OSError, LinkRefused):
        return None


def read_own(root: Path, repo_id: str, sha: str, name: str, limit: int) -> bytes | None:
    """The bytes of ``snapshots/<sha>/<name>`` if it is a regular file that this user owns, no one else can write
    and nothing else links to (a record others could forge is no record); None otherwise."""
    snap = _snapshot(root, repo_id, sha)
    if snap is None:
        return None
    with snap:
        try:
            fd = snap.open_file(name)
        except (OSError, LinkRefused):
            return None
        try:
            if not trusted(os.fstat(fd)):
                return None
            data = os.read(fd, limit + 1)
        finally:
            os.close(fd)
    return data if len(data) <= limit else None


def write_own(root: Path, repo_id: str, sha: str, name: str, data: bytes) -> None:
    """``snapshots/<sha>/<name>`` replaced by ``data`` (one rename, made 0644 less the umask and writable by no
    one else), unless ``read_own`` already gives exactly these bytes (a satisfied cache is not written)."""
    if read_own(root, repo_id, sha, name, len(data)) == data:
        return
    snap = _snapshot(root, repo_id, sha)
    if snap is None:
        raise FileNotFoundError(errno.ENOENT, "no such snapshot", str(repo_folder(root, repo_id) / "snapshots" / sha))
    with snap:
        tmp = f".{name}.{os.urandom(8).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=snap.fd)
        try:
            try:
                os.write(fd, data)
                set_mode(fd, stat.S_IMODE(os.fstat(fd).st_mode) & ~0o022)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=snap.fd, dst_dir_fd=snap.fd)
        finally:
            if snap.kind(tmp) is not None:
                os.unlink(tmp, dir_fd=snap.fd)


def variant_holds(root: Path, repo_id: str, sha: str, variant: str, files: Mapping[str, str]) -> bool:
    """Whether kernel-factory's snapshot ``sha`` (it carries MARKER) holds ``build/<variant>`` with exactly
    ``files``' bytes: every link names its blob and every blob's bytes hash to its name (read by descriptors)."""
    snap = _snapshot(root, repo_id, sha)
    if snap is None:
        return False
    try:
        with snap, _open_root(root) as top, top.sub(repo_folder(root, repo_id).name) as repo, \
                repo.sub("blobs") as blobs:
            if snap.kind(MARKER) != "file":
                return False
            with snap.sub("build") as build, build.sub(variant) as have:
                return holds(have, files, blobs) == set(files)
    except (OSError, LinkRefused):
        return False


def _set_ref(refs: Folder, ref: str, sha: str | None) -> None:
    """``refs/<ref>`` removed (``sha`` None) or replaced by a new file naming ``sha``; a link there is replaced,
    never written through."""
    if sha is None:
        if refs.kind(ref) is not None:
            os.unlink(ref, dir_fd=refs.fd)
        return
    tmp = f".{ref}.{os.urandom(8).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=refs.fd)
    try:
        os.write(fd, sha.encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.rename(tmp, ref, src_dir_fd=refs.fd, dst_dir_fd=refs.fd)
    finally:
        if refs.kind(tmp) is not None:
            os.unlink(tmp, dir_fd=refs.fd)
