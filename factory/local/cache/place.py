"""Placing one variant in the Hub cache: judging what is there, staging the checked bytes, moving them in.

writer.py's ``place`` drives it; see there for the rules. Every cache folder is a ``fs.Folder``
(nofollow.Folder: opened without following links); staging happens in the private scratch folder (stage.py).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...errors import Refused
from ...nofollow import FILE_FLAGS, Folder, LinkRefused
from ...report import warn
from ...verify.digest import left_out
from .fs import NOT_HERE, relative_blob, set_mode, sha256_fd, trusted
from .stage import CacheRefused, folder_mode, stage_file

MARKER = ".kernel-factory.json"  # in snapshots/<sha>/: this snapshot was written by kernel-factory
ORIGINS = ("download", "local-kernels")  # who wrote it: the marker's "origin"


@dataclass(frozen=True)
class Placement:
    """What one ``Writer.place`` puts in the cache: ``source`` (a kernel's build variant folder) as
    ``kernels--org--name/snapshots/<sha>/build/<variant>``, every file checked against ``files`` (posix path
    relative to ``source`` -> sha256 hex), and each of ``refs`` pointed at ``sha``."""

    repo_id: str
    sha: str
    variant: str
    source: Path
    files: Mapping[str, str]
    refs: tuple[str, ...] = ()


class CacheConflict(Refused):
    """The Hub cache already holds other content where this kernel would go; nothing was changed there."""


@dataclass(frozen=True)
class Made:
    """One thing a ``place`` call put in the cache, by identity (st_dev, st_ino), so that a failed run takes
    back exactly that and never what another writer put at the same name meanwhile. ``kind``: "dir" (``name``
    a folder below the repository folder), "snapshot" (``name`` its commit), "variant" (``name`` the variant of
    snapshot ``sha``) or "ref" (``name`` the ref, ``sha`` the commit written, ``old`` the one it named before, None:
    none); "repo": the repository folder itself."""

    kind: str
    name: str
    ident: tuple[int, int]
    sha: str = ""
    old: str | None = None


def identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


_warned: list[bool] = []  # one warning per process where the cache's file system takes no links


def origin_of(snapshot: Path) -> str | None:
    """Who wrote a kernel-factory snapshot (MARKER's "origin": "download" or "local-kernels")."""
    try:
        fd = os.open(snapshot / MARKER, FILE_FLAGS)  # a FIFO there opens at once, and is no marker
        try:
            data = json.loads(os.read(fd, 65536)) if stat.S_ISREG(os.fstat(fd).st_mode) else None
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return None
    origin = data.get("origin") if isinstance(data, dict) else None
    return origin if origin in ORIGINS else None


def holds(folder: Folder, files: Mapping[str, str], blobs: Folder, prefix: str = "") -> set[str] | None:
    """The files of a placed variant if each is ``files``' bytes (a link to its blob, or a copy that hashes to
    it), else None. ``__pycache__`` (written by Python on import) is left out."""
    seen: set[str] = set()
    for name in folder.names():
        rel = prefix + name
        kind = folder.kind(name)
        if kind == "dir":
            if left_out(name, True):
                continue
            with folder.sub(name) as sub:
                inner = holds(sub, files, blobs, rel + "/")
            if inner is None:
                return None
            seen |= inner
            continue
        want = files.get(rel)
        if want is None:
            return None
        if kind == "link":  # the blob it names must hold those bytes: its name alone proves nothing
            if os.readlink(name, dir_fd=folder.fd) != relative_blob(rel, want) or not blob_holds(blobs, want):
                return None
        elif kind == "file":
            fd = folder.open_file(name)
            try:
                if sha256_fd(fd) != want:
                    return None
            finally:
                os.close(fd)
        else:
            return None
        seen.add(rel)
    return seen


def blob_holds(blobs: Folder, want: str) -> bool:
    """Whether ``blobs/<want>`` is a regular file whose bytes hash to ``want`` (opened without following a link
    or blocking on a FIFO)."""
    try:
        fd = blobs.open_file(want)
    except (OSError, LinkRefused):
        return False
    try:
        return sha256_fd(fd) == want
    finally:
        os.close(fd)


class Placing:
    """One ``place`` call: the cache's folders, opened, and what it staged in its scratch folder."""

    def __init__(self, root: Path, repo_id: str, sha: str, variant: str, source: Path, files: Mapping[str, str],
                 origin: str) -> None:
        self.root, self.repo_id, self.sha, self.variant = root, repo_id, sha, variant
        self.source, self.files, self.origin = source, files, origin
        self.where = f"{repo_id}: snapshot {sha} in {root}"
        self.made: list[Made] = []  # what this call put in the cache, in order
        self.published = 0  # blobs this call linked into blobs/ (never taken back)

    def judge(self, snaps: Folder, blobs: Folder) -> str:
        """"new" (no snapshot), "add" (our snapshot without the variant), "relink" (our snapshot where an
        earlier kernel-factory left a link to an environment), "keep" (the variant is there: the Hub's, or the
        same bytes); CacheConflict or LinkRefused otherwise."""
        kind = snaps.kind(self.sha)
        if kind is None:
            return "new"
        if kind != "dir":
            raise snaps.refuse(self.sha)
        with snaps.sub(self.sha) as snap:
            ours = snap.kind(MARKER) == "file"
            if snap.kind("build") is None:
                raise CacheConflict(f"{self.where} has no build/ folder; left as it is: remove that snapshot, or "
                                    "point KERNELS_CACHE at another folder")
            with snap.sub("build") as build:
                vkind = build.kind(self.variant)
                if vkind is None and ours:
                    return "add"
                if vkind is None:
                    raise CacheConflict(f"{self.where} came from the Hub without build/{self.variant}; left as it "
                                        "is: load it with the Hub's variant, or point KERNELS_CACHE at another folder")
                if vkind == "link" and ours:
                    return "relink"
                if vkind != "dir":
                    raise build.refuse(self.variant)
                if not ours:
                    return "keep"  # the Hub's own download of this commit and variant: it loads as it is
                with build.sub(self.variant) as have:
                    same = holds(have, self.files, blobs) == set(self.files)
        if same:
            return "keep"
        who = origin_of(snaps.path / self.sha) or "kernel-factory"
        raise CacheConflict(f"{self.where} already holds build/{self.variant} with other bytes (written by {who}); "
                            "left as it is: a commit's snapshot never changes; remove that snapshot to replace it")

    def stage(self, run: Folder, blobs: Folder, mode: int) -> set[str]:
        """Check every file's bytes: a blob already in the cache is read back, any other file is copied into
        ``run`` as ``b-<hex>``; the hex digests staged there."""
        staged: set[str] = set()
        for rel in sorted(self.files):
            want = self.files[rel]
            if want in staged:
                continue
            st = blobs.lstat(want)
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise blobs.refuse(want, "file")
            if st is not None and trusted(st):  # this user's, writable by no one else, linked nowhere else
                self.check_blob(blobs, want)
                continue
            # missing, or not to be trusted (another owner, writable by others, a hard link to a file elsewhere):
            # a checked copy of ours is staged, and replaces it when published
            got = stage_file(self.source, rel, run, f"b-{want}", mode)
            if got != want:
                raise CacheRefused(f"{self.repo_id}: {self.source / rel} does not hold the bytes listed for it "
                                   f"(sha256 {got}, listed {want}); nothing was placed: reinstall it "
                                   "(pip install --force-reinstall)")
            staged.add(want)
        return staged

    def check_blob(self, blobs: Folder, want: str) -> None:
        fd = blobs.open_file(want)
        try:
            ok = sha256_fd(fd) == want
        finally:
            os.close(fd)
        if not ok:
            raise CacheConflict(f"{blobs.path / want}: a blob whose bytes are not the ones its name says; nothing was "
                                "placed: remove that file and run again")

    def tree(self, run: Folder, blobs: Folder, mode: int, with_marker: bool, dmode: tuple[int, int]) -> None:
        """``run/tree``: the snapshot (``with_marker``: MARKER and build/<variant>/...) or the variant folder.
        Its folders get ``dmode`` (mode, group): what a folder made where it goes would get (folder_mode)."""
        os.mkdir("tree", 0o700, dir_fd=run.fd)
        top = run.path / "tree"
        base = top / "build" / self.variant if with_marker else top
        if with_marker:
            marker = {"repo_id": self.repo_id, "commit": self.sha, "origin": self.origin}
            fd = os.open(top / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(marker, sort_keys=True) + "\n")
                set_mode(f.fileno(), mode)
        base.mkdir(parents=True, exist_ok=True)
        for rel, want in sorted(self.files.items()):
            path = base / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.symlink(relative_blob(rel, want), path)
            except OSError as exc:
                if exc.errno not in NOT_HERE:
                    raise
                if not _warned:  # as huggingface_hub does where links cannot be made: a copy, and one warning
                    _warned.append(True)
                    warn(f"{self.root}: its file system makes no symbolic links; the kernel's files are copied into "
                         "the snapshot (as huggingface_hub does there), which takes more space")
                self.copy_blob(run, blobs, want, path, mode)
        folders = [top] + [Path(d) for d, _, _ in os.walk(top)][1:]
        for folder in folders:
            set_mode(str(folder), dmode[0] & 0o7777)
            if os.stat(folder).st_gid != dmode[1]:  # the group the setgid folder hands down
                try:
                    os.chown(folder, -1, dmode[1])
                except OSError as exc:
                    if exc.errno not in NOT_HERE:
                        raise
                    continue
                set_mode(str(folder), dmode[0] & 0o7777)  # chown takes the setgid bit away

    def copy_blob(self, run: Folder, blobs: Folder, want: str, path: Path, mode: int) -> None:
        fd = run.open_file(f"b-{want}") if run.kind(f"b-{want}") == "file" else blobs.open_file(want)
        try:
            with open(path, "xb") as out:
                os.lseek(fd, 0, os.SEEK_SET)
                while chunk := os.read(fd, 1 << 20):
                    out.write(chunk)
                set_mode(out.fileno(), mode)
        finally:
            os.close(fd)

    def publish_blobs(self, run: Folder, blobs: Folder, staged: set[str]) -> None:
        """Link each staged file in as ``blobs/<hex>``; one already there that is not to be trusted is replaced
        by the checked copy (one rename: a snapshot linking to that name never dangles). A blob once published
        is never taken back: another run's snapshot may link to it from then on. Where the file system makes no
        hard links (vfat, exFAT), the staged file itself is renamed in."""
        for want in sorted(staged):
            staged_name = f"b-{want}"
            try:
                os.link(staged_name, want, src_dir_fd=run.fd, dst_dir_fd=blobs.fd, follow_symlinks=False)
                self.published += 1
                continue
            except FileExistsError:
                links = True
            except OSError as exc:
                if exc.errno not in NOT_HERE:
                    raise
                links = False
            st = blobs.lstat(want)
            if st is not None and identity(st) == identity(os.stat(staged_name, dir_fd=run.fd,
                                                                   follow_symlinks=False)):
                continue  # published by an earlier attempt of this call
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise blobs.refuse(want, "file")
            if st is not None and stat.S_ISREG(st.st_mode) and (trusted(st) or not links) and blob_holds(blobs, want):
                continue  # another run of this user placed the same bytes meanwhile (no owners where no links)
            if links:  # the run keeps its own link (b-<hex>) until it ends, so no other run takes the new blob
                os.link(staged_name, f"p-{want}", src_dir_fd=run.fd, dst_dir_fd=run.fd, follow_symlinks=False)
                staged_name = f"p-{want}"  # for one that is safe to adopt (trusted: linked nowhere else)
            os.rename(staged_name, want, src_dir_fd=run.fd, dst_dir_fd=blobs.fd)
            self.published += 1
        blobs.fsync()


def move_in(run: Folder, snaps: Folder, p: Placing, how: str, notes: list[str] | None) -> bool:
    """Rename the staged tree into place; False where another run placed something there first."""
    ident = identity(os.stat("tree", dir_fd=run.fd, follow_symlinks=False))
    try:
        if how == "new":
            os.rename("tree", p.sha, src_dir_fd=run.fd, dst_dir_fd=snaps.fd)
            p.made.append(Made("snapshot", p.sha, ident))
            snaps.fsync()
            return True
        with snaps.sub(p.sha) as snap, snap.sub("build") as build:
            if how == "relink":
                old = os.readlink(p.variant, dir_fd=build.fd)
                os.rename(p.variant, "old-link", src_dir_fd=build.fd, dst_dir_fd=run.fd)
                try:
                    os.rename("tree", p.variant, src_dir_fd=run.fd, dst_dir_fd=build.fd)
                except OSError:
                    os.rename("old-link", p.variant, src_dir_fd=run.fd, dst_dir_fd=build.fd)
                    raise
                if notes is not None:
                    notes.append(f"{p.where}: build/{p.variant} was a link to {old} left by an earlier "
                                 "kernel-factory; now a checked copy")
            else:
                os.rename("tree", p.variant, src_dir_fd=run.fd, dst_dir_fd=build.fd)
            p.made.append(Made("variant", p.variant, ident, sha=p.sha))
            build.fsync()
        return True
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
            return False
        raise


def dir_mode(snaps: Folder, p: Placing, how: str) -> tuple[int, int]:
    """(mode, group) of a folder made where the tree goes: in snapshots/ for a new snapshot, else in its build/."""
    if how == "new":
        return folder_mode(snaps)
    with snaps.sub(p.sha) as snap, snap.sub("build") as build:
        return folder_mode(build)
