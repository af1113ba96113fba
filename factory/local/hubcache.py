"""Write the Hugging Face Hub cache layout that the kernels library reads offline, without damaging it.

kernels 0.17 loads a kernel offline from ``<root>/kernels--<org>--<name>/``:

- ``refs/<ref>`` holds a commit sha (no newline); ``version=N`` is looked up as ``refs/vN``
  (``kernels._versions``: in ``kernels--`` and in the legacy ``models--`` folder, the latter winning), and
  ``revision=<branch or tag>`` through ``snapshot_download(local_files_only=True)``;
- ``snapshots/<sha>/build/<variant>/`` is the build variant that ``snapshot_download`` returns and
  ``get_variants_local`` chooses from (``revision=<sha>`` and every locked path look only here).

``<root>`` is ``$KERNELS_CACHE``, else huggingface_hub's ``HF_HUB_CACHE`` (``cache_root``).

``place`` only adds. A snapshot that kernel-factory wrote carries ``MARKER``; one without it came from the Hub
(or from someone else) and is never written into. A ref is written only when it is absent, already holds this
sha, or points at a snapshot that kernel-factory wrote (a reinstalled wheel moves it); a ref that points
elsewhere is left as it is and a note says so. Every file and folder appears by a rename, so a reader sees
the old state or the new one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ..atomic import TMP_PREFIX, file_digest, unique
from ..errors import Refused

MARKER = ".kernel-factory.json"  # in snapshots/<sha>/: this snapshot was written by kernel-factory
SHA = re.compile(r"[0-9a-f]{40}")
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class CacheConflict(Refused):
    """The Hub cache already holds other content where this kernel would go; nothing was changed there."""


def cache_root(env: Mapping[str, str]) -> Path:
    """The cache folder kernels reads: KERNELS_CACHE, else HF_HUB_CACHE (HUGGINGFACE_HUB_CACHE), else
    HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub, as huggingface_hub
    expands them (KERNELS_CACHE is used as given, as kernels does)."""
    if env.get("KERNELS_CACHE"):
        return Path(env["KERNELS_CACHE"])

    def expand(text: str) -> str:
        return os.path.expandvars(os.path.expanduser(text))

    hub = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if hub:
        return Path(expand(hub))
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"), "huggingface")
    return Path(expand(os.path.join(home, "hub")))


def repo_folder(root: Path, repo_id: str, kind: str = "kernel") -> Path:
    """``<root>/kernels--org--name`` (``kind="model"``: the legacy ``models--`` folder kernels also reads)."""
    return root / "--".join([f"{kind}s", *repo_id.split("/")])


def valid_ref(ref: str) -> bool:
    """A branch or tag name that can be a file in refs/ (not a commit sha, no folders)."""
    return bool(_REF.fullmatch(ref)) and not SHA.fullmatch(ref)


def is_ours(snapshot: Path) -> bool:
    return (snapshot / MARKER).is_file()


def read_ref(repo: Path, ref: str) -> str | None:
    try:
        return (repo / "refs" / ref).read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _check(repo_id: str, sha: str, variant: str, refs: list[str]) -> None:
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


def _new_variant(build_tmp: Path, source: Path, link: bool) -> None:
    if link:
        os.symlink(source.absolute(), build_tmp, target_is_directory=True)
    else:
        shutil.copytree(source, build_tmp, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _place_snapshot(repo: Path, repo_id: str, sha: str, variant: str, source: Path, link: bool) -> Path:
    snapshot = repo / "snapshots" / sha
    target = snapshot / "build" / variant
    if snapshot.exists() and not is_ours(snapshot):
        if target.is_dir():
            return target  # the Hub's own download of this commit has this variant: it loads as it is
        raise CacheConflict(
            f"{repo_id}: snapshot {sha} in {repo.parent} came from the Hub without build/{variant}; left as it is: "
            f"load it with the Hub's variant, or point KERNELS_CACHE at another folder"
        )
    if not snapshot.exists():
        tmp = repo / f"{TMP_PREFIX}{unique()}"
        try:
            (tmp / "build").mkdir(parents=True)
            (tmp / MARKER).write_text(json.dumps({"repo_id": repo_id, "commit": sha}) + "\n", encoding="utf-8")
            _new_variant(tmp / "build" / variant, source, link)
            snapshot.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(tmp, snapshot)
                return target
            except OSError:
                if not snapshot.exists():
                    raise
                # another run placed it meanwhile: judge what is there now
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return _place_snapshot(repo, repo_id, sha, variant, source, link)
    # Our own snapshot: add or repoint this variant.
    if target.is_symlink() and link and Path(os.readlink(target)) == source.absolute():
        return target
    if target.exists() and not target.is_symlink() and not link:
        return target  # a copy of this commit's variant is already there
    tmp_variant = snapshot / "build" / f"{TMP_PREFIX}{unique()}"
    old = snapshot / "build" / f"{TMP_PREFIX}{unique()}"
    try:
        _new_variant(tmp_variant, source, link)
        if link and (target.is_symlink() or not target.exists()):
            os.replace(tmp_variant, target)  # a symlink replaces a symlink atomically
        else:  # a folder cannot replace anything in one rename: move the old one aside first
            if target.is_symlink() or target.exists():
                os.rename(target, old)
            os.rename(tmp_variant, target)
    finally:
        for leftover in (tmp_variant, old):
            if leftover.is_symlink():
                leftover.unlink()
            elif leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)
    return target


def _write_ref(root: Path, repo: Path, repo_id: str, ref: str, sha: str) -> str | None:
    """Point ``refs/<ref>`` at ``sha`` when that damages nothing; else the note saying why it was left."""
    legacy = read_ref(repo_folder(root, repo_id, "model"), ref) if ref.startswith("v") else None
    if legacy and legacy != sha:
        return (f"{repo_id}: refs/{ref} in {repo_folder(root, repo_id, 'model').name} names {legacy}, and kernels "
                f"reads it first; left as it is: use revision='{sha}' or a lock file")
    path = repo / "refs" / ref
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{TMP_PREFIX}{unique()}"
    tmp.write_text(sha, encoding="ascii")  # huggingface_hub writes refs without a newline
    try:
        for _ in range(3):
            try:
                os.link(tmp, path)  # create only if absent, atomically
                return None
            except FileExistsError:
                pass
            have = read_ref(repo, ref)
            if have == sha:
                return None
            if have is None or not SHA.fullmatch(have) or not is_ours(repo / "snapshots" / have):
                return (f"{repo_id}: refs/{ref} in {root} names {have or 'an unreadable commit'}, which kernel-factory "
                        f"did not write; left as it is: use revision='{sha}' or a lock file")
            os.replace(tmp, path)  # a ref we wrote for an earlier install of this kernel: move it
            return None
        return f"{repo_id}: refs/{ref} in {root} keeps changing; left as it is"
    finally:
        tmp.unlink(missing_ok=True)


def place(
    root: Path,
    repo_id: str,
    sha: str,
    variant: str,
    source: Path,
    *,
    files: Mapping[str, str] | None = None,
    refs: Iterable[str],
    origin: str = "",
    link: bool = False,
    notes: list[str] | None = None,
) -> Path:
    """Make ``source`` (a kernel's build variant folder: ``__init__.py``, ``metadata.json``) the cached
    ``<root>/kernels--org--name/snapshots/<sha>/build/<variant>`` (a symlink with ``link``, else a copy) and
    point each of ``refs`` (``v1``, ``main``) at ``sha``; returns the variant folder kernels will load.

    Existing Hub content is never changed: a ref that names another commit is left, with a line appended to
    ``notes``; a Hub snapshot of this commit that lacks the variant raises CacheConflict (nothing written)."""
    refs = list(refs)
    _check(repo_id, sha, variant, refs)
    if not (source / "metadata.json").is_file():
        raise CacheConflict(f"{repo_id}: {source} holds no metadata.json, which kernels loads; reinstall the wheel")
    for rel, sha256 in (files or {}).items():  # the bytes are checked before they become visible
        if file_digest(source / rel) != sha256:
            raise CacheConflict(f"{repo_id}: {source / rel} is not the file its wheel's RECORD names; reinstall it")
    repo = repo_folder(root, repo_id)
    repo.mkdir(parents=True, exist_ok=True)
    target = _place_snapshot(repo, repo_id, sha, variant, source, link)
    for ref in refs:
        note = _write_ref(root, repo, repo_id, ref, sha)
        if note and notes is not None:
            notes.append(note)
    return target


@contextmanager
def scratch(root: Path) -> Iterator[Path]:
    """A private temporary folder inside the cache (under ``.locks/``, which huggingface_hub's scan_cache_dir
    skips), removed on every exit path."""
    locks = root / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    path = locks / f"{TMP_PREFIX}{unique()}"
    path.mkdir(mode=0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
