"""The one writer of the Hub cache that kernels reads offline, written as huggingface_hub writes it.

kernels loads ``<root>/kernels--<org>--<name>/`` (``<root>``: ``cache_root``; its layout: docs/local-kernels.md).

A snapshot is immutable: a commit's checked bytes (read-only ``blobs/<sha256>`` and relative links to them, copies
where links cannot be made), made visible by one rename, never a link into an environment. One kernel-factory wrote
carries ``MARKER``; one without it came from the Hub and is never written into. Other bytes at a variant already
placed are refused (CacheConflict); a ref is written only where it is absent, names this sha or names a snapshot of
ours, else left with a note. Folders below the root are opened without following links (nofollow.Folder).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ...config import hub_cache, repo_folder_name
from ...errors import UNUSABLE_ERRNOS, Refused, Unreachable
from ...nofollow import Folder, LinkRefused, put, read_small, remove
from ...record import COMMIT_SHA
from ...report import warn
from ...verify.digest import left_out
from . import stage
from .stage import NOT_HERE, CacheRefused, open_root, relative_blob, set_mode, sha256_fd, trusted

MARKER = ".kernel-factory.json"  # in snapshots/<sha>/: this snapshot was written by kernel-factory
ORIGINS = ("download", "local-kernels")  # who wrote it: the marker's "origin"
REF_TRIES = 3  # a ref that other writers keep removing under this one is left, with a note
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


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
    raw = read_small(str(snapshot / MARKER), 65536)  # never through a link, nor blocked by a FIFO
    try:
        data = json.loads(raw) if raw is not None else None
    except ValueError:
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
            if os.readlink(name, dir_fd=folder.fd) != relative_blob(rel, want) or not hashes_to(blobs, want, want):
                return None
        elif kind != "file" or not hashes_to(folder, name, want):
            return None
        seen.add(rel)
    return seen


def hashes_to(folder: Folder, name: str, want: str) -> bool:
    """Whether ``name`` in ``folder`` is a regular file whose bytes hash to ``want`` (opened without following a
    link or blocking on a FIFO)."""
    try:
        fd = folder.open_file(name)
    except (OSError, LinkRefused):
        return False
    try:
        return sha256_fd(fd) == want
    finally:
        os.close(fd)


class Placing:
    """One ``place`` or ``set_refs`` call of ``writer``: what it made and published."""

    def __init__(self, writer: Writer, item: Placement) -> None:
        self.root, self.origin, self.notes = writer.root, writer.origin, writer.notes
        self.repo_id, self.sha, self.variant, self.source = item.repo_id, item.sha, item.variant, item.source
        self.files = dict(item.files)
        self.where = f"{self.repo_id}: snapshot {self.sha} in {self.root}"
        self.made: list[Made] = []  # what this call put in the cache, in order
        self.published = 0  # blobs this call linked into blobs/ (never taken back)

    def judge(self, snaps: Folder, blobs: Folder) -> str:
        """"new" (no snapshot), "add" (our snapshot without the variant), "relink" (our snapshot where an
        earlier kernel-factory left a link to an environment), "keep" (the variant is there: the Hub's, or the
        same bytes); CacheConflict or LinkRefused otherwise."""
        if snaps.kind(self.sha) is None:
            return "new"
        with snaps.sub(self.sha) as snap:  # refuses a link or anything else that is not a folder
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
                    if holds(have, self.files, blobs) == set(self.files):
                        return "keep"  # the same bytes
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
                if not hashes_to(blobs, want, want):
                    raise CacheConflict(f"{blobs.path / want}: a blob whose bytes are not the ones its name says; "
                                        "nothing was placed: remove that file and run again")
                continue
            # missing, or not to be trusted (another owner, writable by others, a hard link to a file elsewhere):
            # a checked copy of ours is staged, and replaces it when published
            got = stage.stage_file(self.source, rel, run, f"b-{want}", mode)
            if got != want:
                raise CacheRefused(f"{self.repo_id}: {self.source / rel} does not hold the bytes listed for it "
                                   f"(sha256 {got}, listed {want}); nothing was placed: reinstall it "
                                   "(pip install --force-reinstall)")
            staged.add(want)
        return staged

    def tree(self, run: Folder, blobs: Folder, snaps: Folder, mode: int, how: str) -> None:
        """``run/tree``: the snapshot (``how`` "new": MARKER and build/<variant>/...) or the variant folder. Its
        folders get the mode and group a folder made where it goes would get (folder_mode)."""
        os.mkdir("tree", 0o700, dir_fd=run.fd)
        top = base = run.path / "tree"
        if how == "new":
            dmode, base = stage.folder_mode(snaps), top / "build" / self.variant
            marker = {"repo_id": self.repo_id, "commit": self.sha, "origin": self.origin}
            _new_file(top / MARKER, (json.dumps(marker, sort_keys=True) + "\n").encode(), mode)
        else:
            with snaps.sub(self.sha) as snap, snap.sub("build") as build:
                dmode = stage.folder_mode(build)
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
                fd = run.open_file(f"b-{want}") if run.kind(f"b-{want}") == "file" else blobs.open_file(want)
                with open(fd, "rb") as src, open(path, "xb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
                    set_mode(out.fileno(), mode)
        for folder in [d for d, _, _ in os.walk(top)]:
            if os.stat(folder).st_gid != dmode[1]:  # the group the setgid folder hands down
                try:
                    os.chown(folder, -1, dmode[1])
                except OSError as exc:
                    if exc.errno not in NOT_HERE:
                        raise
            set_mode(folder, dmode[0] & 0o7777)  # after chown, which takes the setgid bit away

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
            if st is not None and _same(run, staged_name, identity(st)):
                continue  # published by an earlier attempt of this call
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise blobs.refuse(want, "file")
            if (st is not None and stat.S_ISREG(st.st_mode) and (trusted(st) or not links)
                    and hashes_to(blobs, want, want)):
                continue  # another run of this user placed the same bytes meanwhile (no owners where no links)
            if links:  # the run keeps its own link (b-<hex>) until it ends, so no other run takes the new blob
                os.link(staged_name, f"p-{want}", src_dir_fd=run.fd, dst_dir_fd=run.fd, follow_symlinks=False)
                staged_name = f"p-{want}"  # for one that is safe to adopt (trusted: linked nowhere else)
            os.rename(staged_name, want, src_dir_fd=run.fd, dst_dir_fd=blobs.fd)
            self.published += 1
        blobs.fsync()


def move_in(run: Folder, snaps: Folder, p: Placing, how: str) -> bool:
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
                p.notes.append(f"{p.where}: build/{p.variant} was a link to {old} left by an earlier "
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


def repo_folder(root: Path, repo_id: str, kind: str = "kernel") -> Path:
    """``<root>/kernels--org--name`` (``kind="model"``: the legacy ``models--`` folder kernels also reads)."""
    return root / repo_folder_name(repo_id, kind)


def take_back(root: Path, repo_id: str, made: list[Made]) -> None:
    """Undo ``made`` (what this process placed for ``repo_id``) by descriptors and by identity: only what is still
    the file or folder this run put there, folders only while empty. Blobs are never taken back: once published,
    another run's snapshot may link to them. Best effort: the caller is failing already."""
    with contextlib.suppress(OSError, LinkRefused), open_root(root, create=False) as top:
        name = repo_folder(root, repo_id).name
        if top.kind(name) != "dir":
            return
        with top.sub(name) as repo:
            for m in reversed(made):  # what a folder holds was made after it: undone before it
                with contextlib.suppress(OSError, LinkRefused):
                    _undo(repo, m)
        made_repo = [m for m in made if m.kind == "repo"]
        if made_repo and _same(top, name, made_repo[0].ident):
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=top.fd)
    made.clear()


def _same(folder: Folder, name: str, ident: tuple[int, int]) -> bool:
    st = folder.lstat(name)
    return st is not None and identity(st) == ident


def _undo(repo: Folder, m: Made) -> None:
    if m.kind == "dir" and _same(repo, m.name, m.ident) and (m.name != "snapshots" or repo.kind("blobs") is None):
        os.rmdir(m.name, dir_fd=repo.fd)  # (blobs stay, and huggingface_hub's scan wants snapshots/ beside them)
    elif m.kind == "ref" and repo.kind("refs") == "dir":
        with repo.sub("refs") as refs:
            data = refs.read_small(m.name, 256) if _same(refs, m.name, m.ident) else None
            if data is not None and data.decode("ascii", "replace").strip() == m.sha:  # not rewritten in place
                if m.old is not None:
                    _replace(refs, m.name, m.old.encode("ascii"))
                else:
                    os.unlink(m.name, dir_fd=refs.fd)
    elif m.kind == "snapshot" and repo.kind("snapshots") == "dir":
        with repo.sub("snapshots") as snaps:
            if _same(snaps, m.name, m.ident):
                remove(snaps, m.name)
    elif m.kind == "variant" and repo.kind("snapshots") == "dir":
        with repo.sub("snapshots") as snaps, snaps.sub(m.sha) as snap, snap.sub("build") as build:
            if _same(build, m.name, m.ident):
                remove(build, m.name)


def _snapshot(root: Path, repo_id: str, sha: str) -> Folder | None:
    with contextlib.suppress(OSError, LinkRefused), open_root(root, create=False) as top, \
            top.sub(repo_folder(root, repo_id).name) as repo, repo.sub("snapshots") as snaps:
        return snaps.sub(sha)
    return None


def read_own(root: Path, repo_id: str, sha: str, name: str, limit: int) -> bytes | None:
    """The bytes of ``snapshots/<sha>/<name>`` if it is a regular file that this user owns, no one else can write
    and nothing else links to (a record others could forge is no record); None otherwise."""
    snap = _snapshot(root, repo_id, sha)
    if snap is None:
        return None
    with snap:
        return snap.read_small(name, limit, trusted)


def write_own(root: Path, repo_id: str, sha: str, name: str, data: bytes) -> None:
    """``snapshots/<sha>/<name>`` replaced by ``data`` (one rename, made 0644 less the umask and writable by no
    one else), unless ``read_own`` already gives exactly these bytes (a satisfied cache is not written)."""
    if read_own(root, repo_id, sha, name, len(data)) == data:
        return
    snap = _snapshot(root, repo_id, sha)
    if snap is None:
        raise FileNotFoundError(errno.ENOENT, "no such snapshot", str(repo_folder(root, repo_id) / "snapshots" / sha))
    with snap:
        _replace(snap, name, data)


def variant_holds(root: Path, repo_id: str, sha: str, variant: str, files: Mapping[str, str]) -> bool:
    """Whether kernel-factory's snapshot ``sha`` (it carries MARKER) holds ``build/<variant>`` with exactly
    ``files``' bytes: every link names its blob and every blob's bytes hash to its name (read by descriptors)."""
    with contextlib.suppress(OSError, LinkRefused), open_root(root, create=False) as top, \
            top.sub(repo_folder(root, repo_id).name) as repo, repo.sub("blobs") as blobs, \
            repo.sub("snapshots") as snaps, snaps.sub(sha) as snap:
        if snap.kind(MARKER) != "file":
            return False
        with snap.sub("build") as build, build.sub(variant) as have:
            return holds(have, files, blobs) == set(files)
    return False


def _replace(folder: Folder, name: str, data: bytes) -> None:
    """``name`` in ``folder`` replaced by a new file of ``data`` (fsynced; 0644 less the umask, writable by no one
    else) in one rename: a link there is replaced, never written through."""
    put(f".{name}.{os.urandom(8).hex()}.tmp", name, data, folder=folder, chmod=False, fsync=True)


def cache_root(env: Mapping[str, str]) -> Path:
    """The cache folder kernels reads: KERNELS_CACHE as given (as kernels does), else huggingface_hub's own
    (config.hub_cache: HF_HUB_CACHE, HF_HOME/hub, ...)."""
    return Path(env["KERNELS_CACHE"]) if env.get("KERNELS_CACHE") else hub_cache(env)


def valid_ref(ref: str) -> bool:
    """A branch or tag name that can be a file in refs/ (not a commit sha, no folders)."""
    return bool(_REF.fullmatch(ref)) and not COMMIT_SHA.fullmatch(ref)


def _real(path: Path, want: int) -> bool:
    with contextlib.suppress(OSError):
        return stat.S_IFMT(os.lstat(path).st_mode) == want
    return False


def is_ours(snapshot: Path) -> bool:
    return _real(snapshot, stat.S_IFDIR) and _real(snapshot / MARKER, stat.S_IFREG)


def read_ref(repo: Path, ref: str) -> str | None:
    """The commit ``refs/<ref>`` names, read without following a link; None where there is none."""
    if not valid_ref(ref) or not _real(repo, stat.S_IFDIR) or not _real(repo / "refs", stat.S_IFDIR):
        return None
    with contextlib.suppress(OSError, UnicodeDecodeError), \
            Folder(os.open(repo / "refs", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW), repo / "refs") as refs:
        data = refs.read_small(ref, 256)
        return data.decode("ascii").strip() or None if data is not None else None
    return None


@contextlib.contextmanager
def scratch(root: Path) -> Iterator[Path]:
    """A private temporary folder inside the cache at ``root`` (``.locks/kernel-factory/run-*``: the same file
    system, skipped by scan_cache_dir), removed on every exit path; stale ones of killed runs are swept first."""
    try:
        top = open_root(root)
    except OSError as exc:
        raise _unusable(exc, root) from None
    with top, stage.scratch_folder(top) as run:
        yield run.path


def _check(repo_id: str, sha: str, variant: str, refs: tuple[str, ...]) -> None:
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(_REF.fullmatch(p) for p in parts):
        raise CacheConflict(f"{repo_id!r} is not an org/name repository id; rebuild the wheel with --repo-id")
    if not COMMIT_SHA.fullmatch(sha):
        raise CacheConflict(f"{repo_id}: {sha!r} is not a 40-digit commit sha; rebuild the wheel from a Hub revision")
    if not _REF.fullmatch(variant):
        raise CacheConflict(f"{repo_id}: {variant!r} is not a build variant name")
    for ref in refs:
        if not valid_ref(ref):
            raise CacheConflict(f"{repo_id}: {ref!r} is not a branch or tag name")


def _prepare_ref(run: Folder, ref: str, sha: str, mode: int) -> str:
    """The run's file ``ref-<ref>`` naming ``sha``, written once: ``place`` writes every ref's file before it
    publishes a blob, so that a full disk stops it while nothing of it is in the cache yet."""
    name = f"ref-{ref}"
    if run.kind(name) != "file":
        _new_file(name, sha.encode("ascii"), mode, run)  # huggingface_hub writes refs without a newline
    return name


def _write_ref(p: Placing, repo: Folder, run: Folder, ref: str, mode: int) -> None:
    """Point ``refs/<ref>`` at the commit when that damages nothing; else a note says why it was left. A ref
    that is there when this run links its own and gone when it reads it (another writer took it away between the
    two) is tried again, at most ``REF_TRIES`` times in all."""
    legacy_folder = repo_folder(p.root, p.repo_id, "model")
    legacy = read_ref(legacy_folder, ref) if ref.startswith("v") else None
    if legacy and legacy != p.sha:
        p.notes.append(f"{p.repo_id}: refs/{ref} in {legacy_folder.name} names {legacy}, and kernels reads it "
                       f"first; left as it is: use revision='{p.sha}' or a lock file")
        return
    name = _prepare_ref(run, ref, p.sha, mode)
    ident = identity(os.stat(name, dir_fd=run.fd, follow_symlinks=False))
    made_refs = repo.kind("refs") is None
    with repo.sub("refs", create=True) as refs, repo.sub("snapshots") as snaps:
        if made_refs:
            p.made.append(Made("dir", "refs", identity(os.fstat(refs.fd))))
        for _ in range(REF_TRIES):
            old = None  # the commit the ref named before, if it was there
            try:
                if _link_or_create(run, name, refs, ref, p.sha, mode):  # only if absent
                    ident = identity(os.stat(ref, dir_fd=refs.fd, follow_symlinks=False))
            except FileExistsError:
                kind = refs.kind(ref)
                if kind is None:
                    continue  # removed since the link found it: try again
                if kind != "file":
                    raise refs.refuse(ref, "file") from None
                data = refs.read_small(ref, 256)
                old = data.decode("ascii", "replace").strip() if data is not None else None
                if old == p.sha:
                    return
                if not old or not COMMIT_SHA.fullmatch(old) or not is_ours(snaps.path / old):
                    p.notes.append(f"{p.repo_id}: refs/{ref} in {p.root} names {old or 'an unreadable commit'}, "
                                   f"which kernel-factory did not write; left as it is: use revision='{p.sha}' or a "
                                   "lock file")
                    return
                os.rename(name, ref, src_dir_fd=run.fd, dst_dir_fd=refs.fd)  # a ref we wrote earlier: move it
            p.made.append(Made("ref", ref, ident, sha=p.sha, old=old))
            refs.fsync()
            return
    p.notes.append(f"{p.repo_id}: refs/{ref} in {p.root} keeps changing; left as it is")


def _link_or_create(run: Folder, name: str, refs: Folder, ref: str, sha: str, mode: int) -> bool:
    """``refs/<ref>`` made only where it is absent (FileExistsError otherwise): a hard link to the run's finished
    file, or, where the file system makes no hard links (vfat, exFAT), a new file written in place; True then."""
    try:
        os.link(name, ref, src_dir_fd=run.fd, dst_dir_fd=refs.fd, follow_symlinks=False)
        return False
    except OSError as exc:
        if exc.errno not in NOT_HERE:
            raise
    _new_file(ref, sha.encode("ascii"), mode, refs)
    return True


def _new_file(name: str | Path, data: bytes, mode: int, folder: Folder | None = None) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                 dir_fd=folder.fd if folder else None)
    try:
        os.write(fd, data)
        set_mode(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def _precheck_refs(repo: Folder, refs: tuple[str, ...]) -> None:
    """A planted link at refs/ or any refs/<ref> refuses before anything is written."""
    if repo.kind("refs") is None:
        return
    with repo.sub("refs") as folder:
        for ref in refs:
            if folder.kind(ref) not in (None, "file"):
                raise folder.refuse(ref, "file")


class Writer:
    """One command's writes into the cache at ``root``: ``origin`` ("download" or "local-kernels") goes in the
    marker of each snapshot it makes, and ``notes`` gets a line for each ref left as it was (and each link an
    earlier kernel-factory left, now a checked copy). ``made`` keeps what each call put in the cache, so that
    ``take_back`` undoes all of it (download's all or nothing)."""

    def __init__(self, root: Path, origin: str, notes: list[str] | None = None) -> None:
        if origin not in ORIGINS:
            raise ValueError(f"origin {origin!r} is not one of {', '.join(ORIGINS)}")
        self.root, self.origin = root, origin
        self.notes: list[str] = notes if notes is not None else []
        self.made: dict[str, list[Made]] = {}  # repository id -> what this writer put there, in order

    def place(self, item: Placement) -> Path:
        """Place ``item`` (see Placement); returns the variant folder kernels will load.

        Refuses (CacheRefused) a file ``files`` does not list, one it lists that is missing, or bytes that differ;
        (LinkRefused) a link in the cache where it would read or write; (CacheConflict) other bytes at this commit.
        A full or read-only cache raises Unreachable. Nothing of a failed call stays but the blobs it published
        (another run may link to them meanwhile)."""
        repo_id, source = item.repo_id, item.source
        _check(repo_id, item.sha, item.variant, item.refs)
        stage.check_files(item.files, repo_id)
        if "metadata.json" not in item.files:
            raise CacheConflict(f"{repo_id}: {source} holds no metadata.json, which kernels loads; reinstall the wheel")
        have = stage.source_files(source, repo_id)
        extra, missing = sorted(set(have) - set(item.files)), sorted(set(item.files) - set(have))
        if extra:
            raise CacheRefused(f"{repo_id}: {source / extra[0]} is not one of the files listed for this kernel (a "
                               "file added after install?); nothing was placed: reinstall it (pip install "
                               "--force-reinstall)")
        if missing:
            raise CacheRefused(f"{repo_id}: {source / missing[0]} is missing; nothing was placed: reinstall it "
                               "(pip install --force-reinstall)")
        p = Placing(self, item)
        name = repo_folder(self.root, repo_id).name
        try:
            with open_root(self.root) as top:
                if not _satisfied(p, top, name, item.refs):
                    with self._run(p, top) as run:
                        _place_in(p, top, run, name, item.refs)
        except OSError as exc:
            raise _unusable(exc, self.root, p.published) from None
        return repo_folder(self.root, repo_id) / "snapshots" / item.sha / "build" / item.variant

    def set_refs(self, repo_id: str, sha: str, refs: Iterable[str]) -> None:
        """Point each of ``refs`` at ``sha``, whose snapshot is in the cache already, by the rules of ``place`` (a
        ref naming a commit kernel-factory did not write is left, with a note); nothing is written where every
        ref names ``sha`` already."""
        item = Placement(repo_id, sha, "", Path(), {}, tuple(refs))
        _check(repo_id, sha, "v", item.refs)
        repo_path = repo_folder(self.root, repo_id)
        if all(read_ref(repo_path, ref) == sha for ref in item.refs):
            return
        p = Placing(self, item)
        try:
            with open_root(self.root) as top, self._run(p, top) as run, top.sub(repo_path.name) as repo:
                _precheck_refs(repo, item.refs)
                with repo.sub("blobs") as blobs:
                    mode = stage.blob_mode(blobs)
                for ref in item.refs:
                    _write_ref(p, repo, run, ref, mode | 0o200)
        except OSError as exc:
            raise _unusable(exc, self.root, p.published) from None

    @contextlib.contextmanager
    def _run(self, p: Placing, top: Folder) -> Iterator[Folder]:
        """A private scratch folder for ``p``; on any failure, exactly what ``p`` made is taken back, by
        identity. What it made stays in ``made`` (take_back empties ``p.made`` first)."""
        try:
            with stage.scratch_folder(top) as run:
                yield run
        except BaseException:
            take_back(self.root, p.repo_id, p.made)
            raise
        finally:
            self.made.setdefault(p.repo_id, []).extend(p.made)

    def take_back(self) -> None:
        """Undo what this writer put in the cache, by identity: no blob, nothing others placed."""
        for repo_id, made in self.made.items():
            take_back(self.root, repo_id, made)


def _place_in(p: Placing, top: Folder, run: Folder, name: str, refs: tuple[str, ...]) -> None:
    """Stage, check and move the variant in (tried again, up to three times, where another run placed something
    at its name meanwhile), then the refs."""
    if top.kind(name) is None:
        os.mkdir(name, 0o777, dir_fd=top.fd)
        p.made.append(Made("repo", name, identity(os.stat(name, dir_fd=top.fd, follow_symlinks=False))))
    with top.sub(name) as repo:
        _precheck_refs(repo, refs)
        for sub in ("snapshots", "blobs"):
            if repo.kind(sub) is None:
                os.mkdir(sub, 0o777, dir_fd=repo.fd)
                p.made.append(Made("dir", sub, identity(os.stat(sub, dir_fd=repo.fd, follow_symlinks=False))))
        with repo.sub("snapshots") as snaps, repo.sub("blobs") as blobs:
            mode = stage.blob_mode(blobs)
            for ref in refs:
                _prepare_ref(run, ref, p.sha, mode | 0o200)
            staged: set[str] | None = None
            for _ in range(3):
                how = p.judge(snaps, blobs)
                if how == "keep":
                    break
                if staged is None:
                    staged = p.stage(run, blobs, mode)
                if run.kind("tree") is not None:
                    remove(run, "tree")  # an earlier attempt's
                p.tree(run, blobs, snaps, mode, how)
                p.publish_blobs(run, blobs, staged)
                if move_in(run, snaps, p, how):
                    break
                staged = {want for want in staged if run.kind(f"b-{want}") == "file"}
            else:
                raise CacheConflict(f"{p.where} keeps changing while it is placed; left as it is: run again")
        for ref in refs:
            _write_ref(p, repo, run, ref, mode | 0o200)


def _satisfied(p: Placing, top: Folder, name: str, refs: tuple[str, ...]) -> bool:
    """Whether the cache already holds this variant's checked bytes at this commit and every ref names it:
    then nothing is written (a read-only cache that holds it is fine)."""
    if top.kind(name) != "dir":
        return False
    with top.sub(name) as repo:
        if repo.kind("snapshots") != "dir" or repo.kind("blobs") != "dir":
            return False
        with repo.sub("snapshots") as snaps, repo.sub("blobs") as blobs:
            if p.judge(snaps, blobs) != "keep":
                return False
        for ref in refs:
            legacy = read_ref(repo_folder(p.root, p.repo_id, "model"), ref) if ref.startswith("v") else None
            if read_ref(p.root / name, ref) != p.sha or legacy not in (None, p.sha):
                return False  # (a legacy ref elsewhere: the writer's note says why kernels would load it)
    return True


class CacheUnusable(Unreachable):
    """The cache is full, read-only or forbidden (exit 4); ``error`` is the OSError, for a caller that placed
    other kernels in this run and takes them away again (download's all or nothing)."""

    def __init__(self, message: str, error: OSError) -> None:
        super().__init__(message)
        self.error = error


def _unusable(exc: OSError, root: Path, published: int = 0) -> Exception:
    """A full, read-only or forbidden cache -> CacheUnusable (exit 4) in one line, saying what stays (blobs this
    call published: never taken back); any other OSError as it is."""
    if exc.errno not in UNUSABLE_ERRNOS:
        return exc
    text = exc.strerror or os.strerror(exc.errno or 0)
    blobs = "the 1 checked blob it published stays" if published == 1 else \
        f"the {published} checked blobs it published stay"
    left = ("nothing of this kernel was left there" if not published else
            f"no snapshot or ref of this kernel was left there; {blobs} in blobs/, unused")
    return CacheUnusable(f"the Hub cache {root}: {text} ({left}); free space or fix its permissions, or give "
                         "another folder: --cache DIR or KERNELS_CACHE", exc)

