"""Which kernels loading paths serve an installed kernel wheel (`local-kernels --check`), offline.

kernels has two offline sources (docs/local-kernels.md, "Every loading path"): ``LOCAL_KERNELS``, which only
``get_kernel`` and ``has_kernel`` read, whatever ``version=`` or ``revision=`` they are given; and the Hub cache,
where ``refs/v<N>`` turns ``version=N`` into a commit (read where the target's kernels version reads it:
rules.Judge) and ``snapshots/<sha>/build/<variant>`` is what every other path loads.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from .. import cache
from ..probe.rules import Judge
from .install import why_not_cacheable
from .installed import InstalledKernel


@dataclass(frozen=True)
class LoadPath:
    """One loading path and what it does here: ``ok`` and the reason."""

    name: str
    ok: bool
    why: str

    def line(self) -> str:
        return f"  {self.name}: {'yes' if self.ok else 'no'}, {self.why}"


def builds_to_ask(root: Path, repo_ids: Collection[str]) -> list[str]:
    """Every ``snapshots/<sha>/build`` folder of these repositories in the cache (both folder types): what
    ``--check`` asks the target's kernels about, once, before judging any loading path."""
    out = []
    for repo_id in sorted(set(repo_ids)):
        for kind in ("kernel", "model"):
            snaps = cache.repo_folder(root, repo_id, kind) / "snapshots"
            if snaps.is_dir() and not snaps.is_symlink():
                out += [str(p / "build") for p in sorted(snaps.iterdir()) if p.is_dir() and not p.is_symlink()]
    return out


def snapshot_fit(snap: Path, judge: Judge) -> tuple[str | None, str]:
    """(the variant folder the target's kernels would load from the snapshot folder ``snap``, None and why not)."""
    if not snap.is_dir() or snap.is_symlink():
        return None, f"{snap} does not exist"
    chosen, why = judge.fit(snap / "build")
    if chosen is None:
        return None, f"{snap} {why}" if why == "holds no build variant folder" else why
    return chosen, str(snap / "build" / chosen)


def resolve(root: Path, repo_id: str, ref: str, judge: Judge) -> tuple[Path, str] | None:
    """(the repository folder, the commit) that ``version=N`` (``ref`` v<N>) or a branch resolves to offline, as
    the target's kernels reads the cache (0.18 and later: kernels--org--name only; 0.17: the legacy models--
    folder's ref wins); None where no folder it reads has the ref."""
    for kind in judge.ref_folders:
        folder = cache.repo_folder(root, repo_id, kind)
        sha = cache.read_ref(folder, ref)
        if sha is not None:
            return folder, sha
    return None


def _snapshot_loads(folder: Path, sha: str, k: InstalledKernel, judge: Judge) -> tuple[bool, str]:
    """Does ``folder``/snapshots/<sha> hold a variant the target's kernels would load (and whose is it)?"""
    snap = folder / "snapshots" / sha
    chosen, why = snapshot_fit(snap, judge)
    if chosen is None:
        fix = "run `kernel-factory local-kernels --cache`" + (" again" if snap.is_dir() else "")
        if why.startswith(str(snap / "build")):  # the target's kernels refuses the chosen variant's files
            return False, why
        return False, f"{why}: {fix}" if why.startswith(str(snap)) else f"{snap}: {why}"
    origin = cache.origin_of(snap)
    if not cache.is_ours(snap):
        who = "a download from the Hub"
    elif sha == k.revision and chosen == k.variant:
        who = f"this wheel's commit and variant, checked and placed by kernel-factory {origin or ''}".rstrip()
    else:
        who = f"placed by kernel-factory {origin or ''} from another wheel, not this one ({k.revision})"
    return True, f"{why} ({who})"


def paths(k: InstalledKernel, root: Path, env: Mapping[str, str], judge: Judge) -> list[LoadPath]:
    """What each loading path of the target's kernels (``judge``) does for this (loadable) kernel with this
    environment and cache."""
    mapped = any(entry == f"{k.key}={k.folder}" for entry in env.get("LOCAL_KERNELS", "").split(":"))
    version = k.metadata.get("version")
    ref = f"v{version}" if isinstance(version, int) else None
    out: list[LoadPath] = []
    refused = judge.folder_refusal(k.folder)  # what LOCAL_KERNELS would load: the installed package folder
    through = f"through LOCAL_KERNELS, but {refused}" if refused else "through LOCAL_KERNELS"
    if k.repo_id is None or k.revision is None or not cache.SHA.fullmatch(k.revision):
        why = why_not_cacheable(k) or ""
        out.append(LoadPath("get_kernel, has_kernel", mapped and not refused,
                         through if mapped else "LOCAL_KERNELS does not name it: eval --shell"))
        out.append(LoadPath("LayerRepository, FuncRepository, locked paths, load_kernel", False,
                         f"{why}, so it cannot be in the Hub cache they read"))
        return out
    sha = k.revision
    snap_ok, snap_why = _snapshot_loads(cache.repo_folder(root, k.repo_id), sha, k, judge)
    if mapped:
        out.append(LoadPath("get_kernel, has_kernel (any version= or revision=)", not refused, through))
    elif refused:
        out.append(LoadPath(f"LOCAL_KERNELS naming {k.folder} (--shell)", False, refused))
    if ref is not None:
        found = resolve(root, k.repo_id, ref, judge)
        if found is None:
            vwhy, vok = f"no refs/{ref} for {k.repo_id} in {root}: run `kernel-factory local-kernels --cache`", False
        elif mapped:
            vok, vwhy = not refused, f"refs/{ref} names {found[1]}, and LOCAL_KERNELS loads this wheel for it"
            vwhy += f", but {refused}" if refused else ""
        else:
            vok, vwhy = _snapshot_loads(*found, k, judge)
            vwhy = f"refs/{ref} names {found[1]}: {vwhy}"
        names = "LayerRepository, FuncRepository"
        names = names if mapped else f"get_kernel, has_kernel, {names}"
        out.append(LoadPath(f"{names} (version={version})", vok, vwhy))
    if not mapped:
        out.append(LoadPath("get_kernel, has_kernel (revision=<sha>)", snap_ok, snap_why))
    out.append(LoadPath(f"LockedLayerRepository, LockedFuncRepository, get_locked_kernel, load_kernel (lock on {sha})",
                     snap_ok, snap_why))
    return out
