"""The kernel wheels installed here (``find_kernels``: each an ``InstalledKernel``, as LOCAL_KERNELS would name
it, with its problems) and who may claim a kernel (the rules, and the threat they answer: SECURITY.md, "An
installed package can already run code"); the bytes ``local-kernels --cache`` places are the ones its RECORD lists.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.metadata as im
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ...record import COMMIT_SHA, PROVENANCE, VARIANT_ROOT, read_provenance
from ...store import check
from ...verify import metadata as kernelmeta
from ...verify.digest import left_out_path
from ...wheel import layout, recordfile
from .. import cache

SIGSTORE = "metadata.json.sigstore"
_PLACEHOLDER_SHA = "0" * 64  # the record fields an installed wheel does not carry: its hash, size, upload time
_PLACEHOLDER_TIME = "1980-01-01T00:00:00Z"


@dataclass(frozen=True)
class InstalledKernel:
    """One installed kernel wheel, as LOCAL_KERNELS would name it."""

    dist: str  # distribution name as installed
    version: str  # installed version, local label included
    key: str  # LOCAL_KERNELS key: the Hub repository id, else the kernel's name
    repo_id: str | None
    name: str
    variant: str | None
    folder: Path  # LOCAL_KERNELS' PATH: the installed variant root (wheel/layout.py; older wheels: the package)
    metadata: dict[str, Any] = field(default_factory=dict)
    requires: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # why LOCAL_KERNELS cannot point at it at all
    revision: str | None = None  # the commit it was built from (provenance), a sha for a Hub build
    ref: str | None = None  # the branch or tag that named that commit (provenance)
    files: tuple[tuple[str, str], ...] = ()  # the variant root's files as RECORD lists them: (path, sha256 hex)
    files_problem: str | None = None  # why RECORD cannot vouch for the package folder's bytes (None: it can)
    signed: bool = False  # the package carries the Hub's metadata.json.sigstore

    @property
    def title(self) -> str:
        who = f" ({self.repo_id})" if self.repo_id else ""
        return f"{self.name}{who} {self.version}"


def claim_problem(dist_name: str, version: str, prov: dict[str, Any]) -> str | None:
    """Why this distribution may not claim the kernel its provenance names (None: it may)."""
    repo_id = prov.get("repo_id")
    label: str | None = None
    with contextlib.suppress(InvalidVersion):
        label = Version(version).local
    filename = f"{canonicalize_name(dist_name).replace('-', '_')}-{version}-py3-none-any.whl"
    raw = {
        "filename": filename,
        "name": dist_name, "version": version, "sha256": _PLACEHOLDER_SHA, "size": 0,
        "upload_time": _PLACEHOLDER_TIME, "label": label,
        **{key: prov.get(key) for key in ("repo_id", "revision", "ref", "variant", "kernel_version")},
    }
    raw = {k: v for k, v in raw.items() if v is not None}
    try:  # the variant by its shape: whether kernels knows it is check_kernel's to say (checks.py)
        check.check({**raw, "requires_python": None}, filename, known_variants=False)
    except ValueError as exc:
        return f"its {PROVENANCE} fails the checks a record passes ({exc}): reinstall the wheel from your index"
    if isinstance(repo_id, str) and canonicalize_name(dist_name) != canonicalize_name(repo_id.split("/")[-1]):
        project = canonicalize_name(repo_id.split("/")[-1])
        return (f"the distribution {dist_name!r} claims {repo_id}, whose project is {project!r}: only a distribution "
                f"of that name may; pip uninstall '{dist_name}' unless you trust it, and install {project}'s wheel")
    return None


def record_files(dist: im.Distribution, package: str) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """(path below ``package`` -> sha256 hex, as RECORD lists them) and why RECORD cannot vouch for them."""
    out: list[tuple[str, str]] = []
    for f in dist.files or ():
        if len(f.parts) < 2 or f.parts[0] != package:
            continue
        rel = "/".join(f.parts[1:])
        if left_out_path("/".join(f.parts)):
            continue  # bytecode pip compiled at install: not a file of the variant
        if f.hash is None or f.hash.mode != "sha256":
            return (), f"its RECORD gives no sha256 for {package}/{rel}: reinstall the wheel with pip"
        try:
            digest = recordfile.digest(f.hash.value)
        except ValueError:  # binascii.Error is one
            digest = b""
        if len(digest) != 32:
            return (), f"its RECORD's sha256 for {package}/{rel} is damaged: reinstall the wheel with pip"
        out.append((rel, digest.hex()))
    if not out:
        return (), f"its RECORD lists no file of {package}/: reinstall the wheel with pip"
    return tuple(sorted(out)), None


def _listed(dist: im.Distribution) -> Iterable[str]:
    """The absolute paths ``dist``'s RECORD lists, as written (normalised, links not followed)."""
    base = str(dist.locate_file(""))
    try:
        rows = recordfile.rows(dist.read_text("RECORD") or "")
    except (OSError, UnicodeDecodeError, csv.Error):
        return
    for row in rows:
        if row and row[0]:
            yield os.path.normpath(os.path.join(base, row[0]))


def _own_files(dist: im.Distribution, package: str | None) -> set[str]:
    """What makes ``dist`` the kernel: the files of its .dist-info folder (whatever its RECORD says) and the files
    its RECORD lists below its package folder."""
    out: set[str] = set()
    info = _info(dist)
    if info is not None and os.path.isdir(info):
        out.update(os.path.join(info, name) for name in os.listdir(info))
    if package:
        folder = os.path.normpath(str(dist.locate_file(package))) + os.sep
        out.update(p for p in _listed(dist) if p.startswith(folder))
    return out


def shared_problems(claimants: list[tuple[im.Distribution, str | None]], every: Iterable[im.Distribution]
                    ) -> list[str | None]:
    """For each (distribution, its package folder) of ``claimants``, why it may not claim a kernel because another
    installed distribution of ``every`` lists its files in its RECORD too (None: none does); why: SECURITY.md."""
    mine = [_own_files(dist, package) for dist, package in claimants]
    wanted = set().union(*mine)
    owners: dict[str, list[im.Distribution]] = {}
    for other in every:
        for path in _listed(other):
            if path in wanted:
                owners.setdefault(path, []).append(other)
    out: list[str | None] = []
    for (dist, _), files in zip(claimants, mine, strict=True):
        here = _info(dist)
        shared = [(path, other) for path in sorted(files) for other in owners.get(path, ()) if _info(other) != here]
        if not shared:
            out.append(None)
            continue
        path, other = shared[0]
        name = other.metadata["Name"] or "?"
        where = os.path.relpath(path, str(dist.locate_file("")))
        out.append(f"its file {where} is listed in the RECORD of {name!r} {other.version} too, which installed it: "
                   f"only the distribution that installed its own files may claim a kernel; pip uninstall '{name}' "
                   "unless you trust it")
    return out


def _info(dist: im.Distribution) -> str | None:
    """The folder of a distribution's metadata (importlib.metadata.PathDistribution's ``.dist-info``)."""
    info = getattr(dist, "_path", None)
    return None if info is None else os.path.normpath(str(info))


def refs_of(k: InstalledKernel) -> list[str]:
    """The refs that name this wheel's commit: ``v<N>`` (metadata.json's version) and the ref it was built from."""
    refs = []
    version = k.metadata.get("version")
    if isinstance(version, int) and not isinstance(version, bool):
        refs.append(f"v{version}")
    if k.ref and cache.valid_ref(k.ref) and k.ref not in refs:
        refs.append(k.ref)
    return refs


def why_not_cacheable(k: InstalledKernel) -> str | None:
    """Why this wheel cannot go in the Hub cache (only LOCAL_KERNELS can serve it), or None."""
    if k.repo_id is None:
        return "its provenance names no Hub repository (built without --repo-id)"
    if k.revision is None or not COMMIT_SHA.fullmatch(k.revision):
        return f"it was built from {k.revision or 'an unknown revision'}, not a Hub commit"
    if k.variant is None:
        return "its provenance names no build variant"
    return None


# metadata.json fields that kernels 0.17 refuses to load without.
REQUIRED_FIELDS = ("name", "id", "version", "license", "python-depends", "backend")


def _package(dist: im.Distribution, prov: dict[str, Any]) -> str | None:
    pkg = prov.get("package")
    if isinstance(pkg, str) and pkg:
        return pkg
    return next((f.parts[0] for f in dist.files or () if len(f.parts) == 2 and f.parts[1] == "metadata.json"), None)


def kernels_refusal(raw: bytes, data: dict[str, Any]) -> str | None:
    """Why ``get_kernel`` refuses this metadata.json (the kernels library's own parser and message), or None."""
    try:
        message = kernelmeta.kernels_refusal(raw)
    except ImportError:  # without kernels, the fields it requires at least
        missing = [k for k in REQUIRED_FIELDS if k not in data]
        return f"lacks {', '.join(missing)}, which the kernels library requires" if missing else None
    return f"kernels.get_kernel would refuse it: {message}" if message else None


def _kernel(dist: im.Distribution, prov: dict[str, Any] | None, prov_error: str | None) -> InstalledKernel:
    dist_name = dist.metadata["Name"] or "?"
    prov = prov or {}
    text = {key: value for key, value in prov.items() if isinstance(value, str)}  # a field of another type: none
    repo_id = text.get("repo_id")
    problems: list[str] = []
    if prov_error:
        problems.append(f"its {PROVENANCE} is not valid JSON ({prov_error}): reinstall the wheel")
    else:
        claim = claim_problem(dist_name, dist.version, prov)
        if claim:
            problems.append(claim)
    pkg = _package(dist, prov)
    try:
        root = layout.recorded_root(prov) or pkg
    except layout.NotMappable as exc:
        problems.append(f"{exc}")
        root = None
    folder = Path(str(dist.locate_file(root or dist_name))).absolute()
    meta: dict[str, Any] = {}
    raw: bytes | None = None  # metadata.json's bytes
    if pkg is None:
        problems.append(f"its {PROVENANCE} names no package: rebuild the wheel with kernel-factory to-wheel")
    elif root is not None and not folder.is_dir():
        problems.append(f"its package folder {folder} is missing: pip install --force-reinstall '{dist_name}'")
    elif root is not None:
        meta_file = folder / "metadata.json"
        if not meta_file.is_file():
            problems.append(f"{root}/metadata.json, which the kernels library reads, is missing: rebuild the wheel "
                            "with kernel-factory to-wheel and reinstall it")
        else:
            raw = meta_file.read_bytes()
            try:
                data = json.loads(meta_file.read_text(encoding="utf-8", errors="replace"))
                err = "" if isinstance(data, dict) else "not a JSON object"
            except ValueError as exc:
                data, err = None, str(exc)
            if err:
                problems.append(f"{meta_file} is not valid JSON ({err}): reinstall the wheel")
            elif refused := kernels_refusal(raw, data):
                problems.append(f"{meta_file}: {refused}: rebuild the wheel from a kernel-builder build that kernels "
                                "accepts")
            meta = {} if err else data
        entries = layout.entry_files(meta or {"name": pkg})
        if not any((folder / rel).is_file() for rel in entries):
            problems.append(f"{root}/{entries[0]} is missing: pip install --force-reinstall '{dist_name}'")
    name = str(prov.get("name") or meta.get("name") or dist_name)
    key = repo_id or name
    if ":" in str(folder):
        problems.append(f"its folder {folder} contains ':', which LOCAL_KERNELS cannot express (':' separates "
                        "entries): use an environment whose path has no ':'")
    if ":" in key or "=" in key:
        problems.append(f"its name {key!r} contains ':' or '=', which LOCAL_KERNELS cannot express: rebuild the wheel "
                        "with a repo-id without them")
    files, files_problem = record_files(dist, root) if root else ((), f"its {PROVENANCE} names no package")
    older = older_layout(root, prov, files, raw) if root and not files_problem else None
    if older:
        problems.append(older)
    return InstalledKernel(
        dist_name, dist.version, key, repo_id, name, text.get("variant"), folder, meta, tuple(dist.requires or ()),
        tuple(problems), text.get("revision"), text.get("ref"), files, files_problem, (folder / SIGSTORE).is_file(),
    )


def older_layout(root: str, prov: dict[str, Any], files: tuple[tuple[str, str], ...], metadata: bytes | None
                 ) -> str | None:
    """Why a wheel made before the variant root was recorded cannot serve kernels 0.18+ as installed (its package
    folder is not laid out as the variant's digest describes), or None."""
    if VARIANT_ROOT in prov:
        return None
    try:
        mapping = layout.legacy_map(root, [rel for rel, _ in files], metadata)
    except layout.NotMappable as exc:
        return str(exc)
    moved = next((rel for rel, there in mapping.items() if rel != there), None)
    if moved is None:
        return None
    return (f"it was made by an older kernel-factory that installs the package folder, not the build variant folder "
            f"its digest describes (with {mapping[moved]}), so kernels 0.18+ refuse it; {layout.REBUILD}")


def find_kernels(path: list[str] | None = None) -> list[InstalledKernel]:
    """Installed distributions that carry kernel-factory's provenance file, first of each name, sorted by key."""
    seen: set[str] = set()
    found: list[InstalledKernel] = []
    claimants: list[tuple[im.Distribution, str | None]] = []
    every = list(im.distributions(path=path) if path is not None else im.distributions())
    for dist in every:
        canon = canonicalize_name(dist.metadata["Name"] or "")
        if canon in seen:
            continue  # shadowed by an earlier entry of sys.path, as importlib sees it
        seen.add(canon)
        text = dist.read_text(PROVENANCE)
        if text is None:
            continue
        prov, err = read_provenance(text)
        found.append(_kernel(dist, prov, err))
        claimants.append((dist, _package(dist, prov or {})))
    if found:  # a kernel's files listed by another distribution's RECORD too: that one may claim nothing
        for i, shared in enumerate(shared_problems(claimants, every)):
            if shared:
                found[i] = replace(found[i], problems=(*found[i].problems, shared))
    return sorted(found, key=lambda k: (k.key, k.dist))
