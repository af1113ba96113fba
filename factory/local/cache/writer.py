"""The one writer of the Hugging Face Hub cache that the kernels library reads offline (``download`` and
``local-kernels --cache``), written as huggingface_hub writes it.

kernels 0.17 loads a kernel offline from ``<root>/kernels--<org>--<name>/``:

- ``refs/<ref>`` holds a commit sha (no newline); ``version=N`` is looked up as ``refs/vN``
  (``kernels._versions``: in ``kernels--`` and in the legacy ``models--`` folder, the latter winning), and
  ``revision=<branch or tag>`` through ``snapshot_download(local_files_only=True)``;
- ``snapshots/<sha>/build/<variant>/`` is the build variant that ``snapshot_download`` returns and
  ``get_variants_local`` chooses from (``revision=<sha>`` and every locked path look only here).

``<root>`` is ``$KERNELS_CACHE``, else huggingface_hub's ``HF_HUB_CACHE`` (``cache_root``).

``place`` writes content-addressed, read-only ``blobs/<sha256 hex>`` and a snapshot of relative links to them
(copies where links cannot be made), each byte checked against the hashes it is given (a wheel's RECORD, a
lock's) before the snapshot becomes visible, by one rename. A snapshot is immutable: what sits at a commit is
that commit's checked bytes, never a link into an environment. A snapshot kernel-factory wrote carries
``MARKER``; one without it came from the Hub (or someone else) and is never written into. A variant already in
a snapshot is left as it is: the same bytes are a no-op, other bytes are refused (CacheConflict). A ref is
written only when it is absent, already holds this sha, or names a snapshot that kernel-factory wrote; one that
names another commit is left as it is, and a note says so. Every folder from the root down is opened without
following links (fs.py); staging happens in a private scratch folder (stage.py). Callers outside this package
use the interface of ``__init__.py`` (``Writer``, ``Placement`` and the readers), never this module.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from ...config import hub_cache
from ...errors import UNUSABLE_ERRNOS, Unreachable
from ...nofollow import Folder, remove
from .fs import NOT_HERE, open_root, set_mode
from .place import MARKER, ORIGINS, CacheConflict, Made, Placement, Placing, dir_mode, identity, move_in
from .read import repo_folder, take_back
from .stage import CacheRefused, blob_mode, check_files, scratch_folder, source_files

SHA = re.compile(r"[0-9a-f]{40}")
REF_TRIES = 3  # a ref that other writers keep removing under this one is left, with a note
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


__all__ = ["SHA", "CacheUnusable", "cache_root", "is_ours", "place", "read_ref", "scratch", "set_refs", "valid_ref"]


def cache_root(env: Mapping[str, str]) -> Path:
    """The cache folder kernels reads: KERNELS_CACHE, else HF_HUB_CACHE (HUGGINGFACE_HUB_CACHE), else
    HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub, as huggingface_hub
    expands them (config.hub_cache; KERNELS_CACHE is used as given, as kernels does)."""
    return Path(env["KERNELS_CACHE"]) if env.get("KERNELS_CACHE") else hub_cache(env)


def valid_ref(ref: str) -> bool:
    """A branch or tag name that can be a file in refs/ (not a commit sha, no folders)."""
    return bool(_REF.fullmatch(ref)) and not SHA.fullmatch(ref)


def _real(path: Path, want: int) -> bool:
    try:
        return stat.S_IFMT(os.lstat(path).st_mode) == want
    except OSError:
        return False


def is_ours(snapshot: Path) -> bool:
    """Whether ``snapshot`` (a real folder, not a link) carries kernel-factory's MARKER (a regular file)."""
    return _real(snapshot, stat.S_IFDIR) and _real(snapshot / MARKER, stat.S_IFREG)


def read_ref(repo: Path, ref: str) -> str | None:
    """The commit ``refs/<ref>`` names, read without following a link; None where there is none."""
    if not valid_ref(ref) or not _real(repo, stat.S_IFDIR) or not _real(repo / "refs", stat.S_IFDIR):
        return None
    try:
        with Folder(os.open(repo / "refs", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW), repo / "refs") as refs:
            data = refs.read_small(ref, 256)
        return data.decode("ascii").strip() or None if data is not None else None
    except (OSError, UnicodeDecodeError):
        return None


@contextlib.contextmanager
def scratch(root: Path) -> Iterator[Path]:
    """A private temporary folder inside the cache at ``root`` (``.locks/kernel-factory/run-*``: the same file
    system, skipped by scan_cache_dir), removed on every exit path; stale ones of killed runs are swept first."""
    try:
        top = open_root(root)
    except OSError as exc:
        raise _unusable(exc, root) from None
    with top, scratch_folder(top) as run:
        yield run.path


def _check(repo_id: str, sha: str, variant: str, refs: list[str], origin: str) -> None:
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(_REF.fullmatch(p) for p in parts):
        raise CacheConflict(f"{repo_id!r} is not an org/name repository id; rebuild the wheel with --repo-id")
    if not SHA.fullmatch(sha):
        raise CacheConflict(f"{repo_id}: {sha!r} is not a 40-digit commit sha; rebuild the wheel from a Hub revision")
    if not _REF.fullmatch(variant):
        raise CacheConflict(f"{repo_id}: {variant!r} is not a build variant name")
    for ref in refs:
        if not valid_ref(ref):
            raise CacheConflict(f"{repo_id}: {ref!r} is not a branch or tag name")
    if origin not in ORIGINS:
        raise ValueError(f"origin {origin!r} is not one of {', '.join(ORIGINS)}")


def _prepare_ref(run: Folder, ref: str, sha: str, mode: int) -> str:
    """The run's file ``ref-<ref>`` naming ``sha``, written once: ``place`` writes every ref's file before it
    publishes a blob, so that a full disk stops it while nothing of it is in the cache yet."""
    name = f"ref-{ref}"
    if run.kind(name) == "file":
        return name
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=run.fd)
    try:
        os.write(fd, sha.encode("ascii"))  # huggingface_hub writes refs without a newline
        set_mode(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)
    return name


def _write_ref(p: Placing, repo: Folder, run: Folder, ref: str, mode: int) -> str | None:
    """Point ``refs/<ref>`` at the commit when that damages nothing; else the note saying why it was left. A ref
    that is there when this run links its own and gone when it reads it (another writer took it away between the
    two) is tried again, at most ``REF_TRIES`` times in all."""
    legacy_folder = repo_folder(p.root, p.repo_id, "model")
    legacy = read_ref(legacy_folder, ref) if ref.startswith("v") else None
    if legacy and legacy != p.sha:
        return (f"{p.repo_id}: refs/{ref} in {legacy_folder.name} names {legacy}, and kernels reads it first; left as "
                f"it is: use revision='{p.sha}' or a lock file")
    name = _prepare_ref(run, ref, p.sha, mode)
    ident = identity(os.stat(name, dir_fd=run.fd, follow_symlinks=False))
    made_refs = repo.kind("refs") is None
    with repo.sub("refs", create=True) as refs, repo.sub("snapshots") as snaps:
        if made_refs:
            p.made.append(Made("dir", "refs", identity(os.fstat(refs.fd))))
        for _ in range(REF_TRIES):
            try:
                if _link_or_create(run, name, refs, ref, p.sha, mode):  # only if absent
                    ident = identity(os.stat(ref, dir_fd=refs.fd, follow_symlinks=False))
                p.made.append(Made("ref", ref, ident, sha=p.sha, old=None))
                refs.fsync()
                return None
            except FileExistsError:
                pass
            kind = refs.kind(ref)
            if kind is None:
                continue  # removed since the link found it: try again
            if kind != "file":
                raise refs.refuse(ref, "file")
            data = refs.read_small(ref, 256)
            have = data.decode("ascii", "replace").strip() if data is not None else None
            if have == p.sha:
                return None
            if not have or not SHA.fullmatch(have) or not is_ours(snaps.path / have):
                return (f"{p.repo_id}: refs/{ref} in {p.root} names {have or 'an unreadable commit'}, which "
                        f"kernel-factory did not write; left as it is: use revision='{p.sha}' or a lock file")
            os.rename(name, ref, src_dir_fd=run.fd, dst_dir_fd=refs.fd)  # a ref we wrote earlier: move it
            p.made.append(Made("ref", ref, ident, sha=p.sha, old=have))
            refs.fsync()
            return None
    return f"{p.repo_id}: refs/{ref} in {p.root} keeps changing; left as it is"


def _link_or_create(run: Folder, name: str, refs: Folder, ref: str, sha: str, mode: int) -> bool:
    """``refs/<ref>`` made only where it is absent (FileExistsError otherwise): a hard link to the run's finished
    file, or, where the file system makes no hard links (vfat, exFAT), a new file written in place; True then."""
    try:
        os.link(name, ref, src_dir_fd=run.fd, dst_dir_fd=refs.fd, follow_symlinks=False)
        return False
    except OSError as exc:
        if exc.errno not in NOT_HERE:
            raise
    fd = os.open(ref, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=refs.fd)
    try:
        os.write(fd, sha.encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def _precheck_refs(repo: Folder, refs: list[str]) -> None:
    """A planted link at refs/ or any refs/<ref> refuses before anything is written."""
    kind = repo.kind("refs")
    if kind is None:
        return
    with repo.sub("refs") as folder:
        for ref in refs:
            if folder.kind(ref) not in (None, "file"):
                raise folder.refuse(ref, "file")


def place(root: Path, item: Placement, *, origin: str, notes: list[str] | None = None,
          made: list[Made] | None = None) -> Path:
    """Place ``item.source`` (a kernel's build variant folder) as ``<root>/kernels--org--name/snapshots/<sha>/
    build/<variant>``, every file checked against ``item.files`` (posix path relative to the source -> sha256
    hex), and point each of ``item.refs`` at the commit; returns the variant folder kernels will load. ``origin``
    ("download" or "local-kernels") goes in the snapshot's marker.

    Refuses (CacheRefused) a file of ``source`` that ``files`` does not list, one it lists that is missing, or
    bytes that differ; (LinkRefused) a link anywhere in the cache where it would read or write; (CacheConflict)
    other bytes at this commit. A full or read-only cache raises Unreachable. In each case nothing of this call
    is left in the cache but blobs it published (never taken back: another run may link to them meanwhile). A ref
    that names another commit is left, with a line appended to ``notes``. ``made`` gets what this call put in
    the cache (take_back undoes it: download's all or nothing)."""
    repo_id, sha, variant, source, refs = item.repo_id, item.sha, item.variant, item.source, list(item.refs)
    _check(repo_id, sha, variant, refs, origin)
    files = dict(item.files)
    check_files(files, repo_id)
    if "metadata.json" not in files:
        raise CacheConflict(f"{repo_id}: {source} holds no metadata.json, which kernels loads; reinstall the wheel")
    have = source_files(source, repo_id)
    extra, missing = sorted(set(have) - set(files)), sorted(set(files) - set(have))
    if extra:
        raise CacheRefused(f"{repo_id}: {source / extra[0]} is not one of the files listed for this kernel (a file "
                           "added after install?); nothing was placed: reinstall it (pip install --force-reinstall)")
    if missing:
        raise CacheRefused(f"{repo_id}: {source / missing[0]} is missing; nothing was placed: reinstall it "
                           "(pip install --force-reinstall)")
    p = Placing(root, repo_id, sha, variant, source, files, origin)
    name = repo_folder(root, repo_id).name
    try:
        with open_root(root) as top:
            if _satisfied(p, top, name, refs):
                return repo_folder(root, repo_id) / "snapshots" / sha / "build" / variant  # nothing to write
            try:
                with scratch_folder(top) as run:
                    _place_in(p, top, run, name, refs, notes)
            except BaseException:
                take_back(root, repo_id, p.made)  # exactly what this call made, by identity
                raise
            finally:
                if made is not None:
                    made.extend(p.made)
    except OSError as exc:
        raise _unusable(exc, root, p.published) from None
    return repo_folder(root, repo_id) / "snapshots" / sha / "build" / variant


def _place_in(p: Placing, top: Folder, run: Folder, name: str, refs: list[str], notes: list[str] | None) -> None:
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
            mode = blob_mode(blobs)
            for ref in refs:
                _prepare_ref(run, ref, p.sha, mode | 0o200)
            _place(p, run, snaps, blobs, mode, notes)
        for ref in refs:
            note = _write_ref(p, repo, run, ref, mode | 0o200)
            if note and notes is not None:
                notes.append(note)


def _satisfied(p: Placing, top: Folder, name: str, refs: list[str]) -> bool:
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
        if refs and repo.kind("refs") != "dir":
            return False
        for ref in refs:
            if read_ref(p.root / name, ref) != p.sha:
                return False
            legacy = read_ref(repo_folder(p.root, p.repo_id, "model"), ref) if ref.startswith("v") else None
            if legacy and legacy != p.sha:
                return False  # the writer's note says why kernels would load another commit
    return True


def set_refs(root: Path, repo_id: str, sha: str, refs: Iterable[str], *, origin: str,
             notes: list[str] | None = None, made: list[Made] | None = None) -> None:
    """Point each of ``refs`` at ``sha``, whose snapshot is in the cache already, by the rules of ``place`` (a
    ref naming a commit kernel-factory did not write is left, with a note); nothing is written where every ref
    names ``sha`` already."""
    refs = list(refs)
    _check(repo_id, sha, "v", refs, origin)
    repo_path = repo_folder(root, repo_id)
    if all(read_ref(repo_path, ref) == sha for ref in refs):
        return
    p = Placing(root, repo_id, sha, "", Path(), {}, origin)
    try:
        with open_root(root) as top:
            try:
                with scratch_folder(top) as run, top.sub(repo_path.name) as repo:
                    _precheck_refs(repo, refs)
                    with repo.sub("blobs") as blobs:
                        mode = blob_mode(blobs)
                    for ref in refs:
                        note = _write_ref(p, repo, run, ref, mode | 0o200)
                        if note and notes is not None:
                            notes.append(note)
            except BaseException:
                take_back(root, repo_id, p.made)
                raise
            finally:
                if made is not None:
                    made.extend(p.made)
    except OSError as exc:
        raise _unusable(exc, root) from None


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
    left = ("nothing of this kernel was left there" if not published else
            f"no snapshot or ref of this kernel was left there; the {published} checked blob"
            f"{'s' if published != 1 else ''} it published stay in blobs/, unused")
    return CacheUnusable(f"the Hub cache {root}: {text} ({left}); free space or fix its permissions, or give "
                         "another folder: --cache DIR or KERNELS_CACHE", exc)


def _place(p: Placing, run: Folder, snaps: Folder, blobs: Folder, mode: int, notes: list[str] | None) -> None:
    staged: set[str] | None = None
    for _ in range(3):
        how = p.judge(snaps, blobs)
        if how == "keep":
            return
        if staged is None:
            staged = p.stage(run, blobs, mode)
        if run.kind("tree") is not None:
            remove(run, "tree")  # an earlier attempt's
        p.tree(run, blobs, mode, with_marker=how == "new", dmode=dir_mode(snaps, p, how))
        p.publish_blobs(run, blobs, staged)
        if move_in(run, snaps, p, how, notes):
            return
        staged = {want for want in staged if run.kind(f"b-{want}") == "file"}
    raise CacheConflict(f"{p.where} keeps changing while it is placed; left as it is: run again")

