"""Which kernels loading paths serve an installed kernel wheel (`local-kernels --check`), offline: LOCAL_KERNELS or
the Hub cache, as docs/local-kernels.md ("Every loading path") tells; ``check_mapping``: the kernels transformers'
default mapping asks for on this machine's device, which ``kernelize`` loads from the Hub cache only.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from ...errors import UsageError
from ...record import COMMIT_SHA
from ...sources.transformers_map import Entry, KernelMapping, read_mapping
from .. import cache
from ..probe.environment import Environment
from ..probe.rules import Judge
from .checks import installed_version
from .installed import InstalledKernel, why_not_cacheable


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
    if k.repo_id is None or k.revision is None or not COMMIT_SHA.fullmatch(k.revision):
        return [LoadPath("get_kernel, has_kernel", mapped and not refused,
                         through if mapped else "LOCAL_KERNELS does not name it: eval --shell"),
                LoadPath("LayerRepository, FuncRepository, locked paths, load_kernel", False,
                         f"{why_not_cacheable(k) or ''}, so it cannot be in the Hub cache they read")]
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
        names = ("" if mapped else "get_kernel, has_kernel, ") + "LayerRepository, FuncRepository"
        out.append(LoadPath(f"{names} (version={version})", vok, vwhy))
    if not mapped:
        out.append(LoadPath("get_kernel, has_kernel (revision=<sha>)", snap_ok, snap_why))
    out.append(LoadPath(f"LockedLayerRepository, LockedFuncRepository, get_locked_kernel, load_kernel (lock on {sha})",
                     snap_ok, snap_why))
    return out


# kernels' backend name (Environment.backend) -> the device key transformers' mapping uses.
DEVICES = {"cuda": "cuda", "rocm": "rocm", "xpu": "xpu", "metal": "mps", "cpu": "cpu", "cann": "npu"}
FIX = "mirror it (a [[transformers]] table) and run `kernel-factory download` or `local-kernels --cache`"


@dataclass(frozen=True)
class Mapped:
    """One repository at one version (or revision) the mapping names for the device, with its layers and modes."""

    repo_id: str
    version: int | None
    revision: str | None
    layers: tuple[str, ...]
    modes: tuple[str, ...]

    @property
    def title(self) -> str:
        at = f"version {self.version}" if self.version is not None else f"revision {self.revision}"
        return f"{self.repo_id} {at} ({', '.join(self.layers)}; {', '.join(self.modes)})"


def group(entries: tuple[Entry, ...], device: str) -> tuple[list[Mapped], list[str]]:
    """The device's entries, one per (repository, version or revision) in the mapping's order; and the layers
    mapped to a local repository (nothing in the Hub cache to check)."""
    found: dict[tuple[str, int | None, str | None], tuple[list[str], list[str]]] = {}
    local: list[str] = []
    for e in entries:
        if e.device != device:
            continue
        if not e.repo_id or (e.version is None and not e.revision):
            local.append(e.layer)
            continue
        layers, modes = found.setdefault((e.repo_id, e.version, e.revision), ([], []))
        layers.extend(x for x in [e.layer] if x not in layers)
        modes.extend(m for m in e.modes if m not in modes)
    return [Mapped(r, v, s, tuple(ls), tuple(ms)) for (r, v, s), (ls, ms) in found.items()], local


def loads_offline(root: Path, m: Mapped, judge: Judge) -> tuple[bool, str]:
    """Whether the target's kernels (``judge``) finds ``m`` in the Hub cache at ``root`` with a variant that fits
    there, and why (not)."""
    if m.version is not None:
        ref: str | None = f"v{m.version}"
    else:
        ref = None if m.revision and COMMIT_SHA.fullmatch(m.revision) else m.revision
    folder = cache.repo_folder(root, m.repo_id)
    if ref is None:
        sha, how = m.revision, ""
    else:
        found = resolve(root, m.repo_id, ref, judge)
        if found is None:
            return False, f"no refs/{ref} for {m.repo_id} in {root}"
        folder, sha = found
        how = f"refs/{ref} names {sha}: "
    assert sha is not None
    chosen, why = snapshot_fit(folder / "snapshots" / sha, judge)
    return chosen is not None, how + why


def mapping_lines(mapping: KernelMapping, env: Environment, root: Path, python: str,
          ask: Callable[[list[str]], Judge]) -> tuple[list[str], bool]:
    """The lines for the mapped kernels of ``env``'s device, and whether every one loads offline."""
    if env.torch is None:
        return [f"transformers {mapping.transformers} at {python}: its mapped kernels are not checked, as torch does "
                f"not import there ({env.torch_error or 'not installed'})"], True
    device = DEVICES.get(env.backend, env.backend)
    mapped, local = group(mapping.entries, device)
    if not mapped and not local:
        return [f"transformers {mapping.transformers} at {python} maps no kernel for {device}, this machine's "
                "device"], True
    out = [f"transformers {mapping.transformers} (kernels {mapping.kernels}) at {python} maps {len(mapped)} kernels "
           f"for {device}, this machine's device (Hub cache {root}):"]
    ok = 0
    judge = ask([m.repo_id for m in mapped]) if mapped else None
    for m in mapped:
        assert judge is not None
        loads, why = loads_offline(root, m, judge)
        ok += loads
        out.append(f"  {m.title}: loads offline from {why}" if loads else
                   f"  {m.title}: not loadable offline ({why}): {FIX}")
    out += [f"  {layer}: a local repository, loaded from its path" for layer in local]
    out.append(f"{ok} of {len(mapped)} kernels transformers maps for {device} load offline")
    return out, ok == len(mapped)


def check_mapping(python: str, path: list[str] | None, environment: Callable[[], Environment],
          root: Path, ask: Callable[[list[str]], Judge]) -> tuple[list[str], bool]:
    """``--check``'s lines for transformers' mapping in ``python`` (whose packages are on ``path``; None: this
    interpreter's): nothing without transformers there; a mapping that cannot be read is one line, not a failure."""
    if installed_version("transformers", path) is None:
        return [], True
    try:
        mapping = read_mapping(python)
    except UsageError as exc:
        return [f"transformers' mapped kernels are not checked: {exc}"], True
    return mapping_lines(mapping, environment(), root, python, ask)
