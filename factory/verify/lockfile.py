"""kernels.lock and ``[tool.kernels.dependencies]``: the kernels project's pin files as build input.

kernels.lock, older format (kernels <= 0.12): ``{"repo_id", "sha", "variants": {name: {"hash": "sha256-<hex>",
"hash_type": "git_lfs_concat"}}}`` (or nested locks in ``kernel_depends``); kernels 0.17: ``{"dependency":
{"repo-id", "version" | "revision"}, "lock": {"commit"}}``, no hashes.

``git_lfs_concat`` (from kernels' lockfile code): sha256 over the variant's files (``digest.walk``: metadata.json
included) sorted by UTF-8 path, feeding each path and then the raw bytes of its object id: the Git LFS sha256 for
LFS files (``HubSource.lfs_paths``), else the git blob sha1 (``sha1(b"blob <size>\\0" + content)``)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from ..errors import ConfigError, DigestMismatch
from ..nofollow import CHUNK, Hashing
from .digest import walk

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HASH_TYPE = "git_lfs_concat"
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class LockedKernel:
    """One locked repository revision; ``variants`` empty means every variant."""

    repo_id: str
    sha: str
    variants: tuple[str, ...] = ()
    hashes: dict[str, str] = field(default_factory=dict)  # variant -> "sha256-<hex>"
    ref: str | None = None  # what the lock resolved: "v1" for version 1, a branch or tag for revision=


@dataclass(frozen=True)
class Dependency:
    """A ``[tool.kernels.dependencies]`` entry: a major version (branch v<N>) or a tag specifier."""

    repo_id: str
    major: int | None = None
    specifier: str | None = None


def _check_repo_id(repo_id: object, where: str) -> str:
    if not isinstance(repo_id, str) or repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise ConfigError(f"{where}: repository id {repo_id!r} is not of the form org/name; fix the entry")
    return repo_id


def _check_sha(sha: object, where: str) -> str:
    if not isinstance(sha, str) or len(sha) != 40 or not set(sha.lower()) <= _HEX:
        raise ConfigError(f"{where}: {sha!r} is not a full 40-character commit sha; re-lock with `kernels lock`")
    return sha.lower()


def _check_hash(value: object, where: str) -> str:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: a variant lock must be an object with 'hash' and 'hash_type'")
    hash_type = value.get("hash_type", HASH_TYPE)
    if hash_type != HASH_TYPE:
        raise ConfigError(f"{where}: hash_type {hash_type!r} is not {HASH_TYPE!r}; re-lock with `kernels lock`")
    digest = value.get("hash")
    hex_part = digest.removeprefix("sha256-") if isinstance(digest, str) else ""
    if not isinstance(digest, str) or not digest.startswith("sha256-") or len(hex_part) != 64 \
            or not set(hex_part) <= _HEX:
        raise ConfigError(f"{where}: hash {digest!r} is not sha256-<64 hex digits>; re-lock with `kernels lock`")
    return digest


def _old_entry(entry: Mapping[str, Any], where: str, out: list[LockedKernel]) -> None:
    repo_id = _check_repo_id(entry.get("repo_id"), where)
    sha = _check_sha(entry.get("sha"), f"{where} ({repo_id})")
    raw_variants = entry.get("variants", {})
    if not isinstance(raw_variants, Mapping):
        raise ConfigError(f"{where} ({repo_id}): 'variants' must be an object of variant name -> hash")
    hashes = {str(name): _check_hash(lock, f"{where} ({repo_id}, {name})") for name, lock in raw_variants.items()}
    out.append(LockedKernel(repo_id, sha, tuple(sorted(hashes)), hashes))
    deps = entry.get("kernel_depends", {})
    if not isinstance(deps, Mapping):
        raise ConfigError(f"{where} ({repo_id}): 'kernel_depends' must be an object of repo id -> lock")
    for name, dep in deps.items():
        if not isinstance(dep, Mapping):
            raise ConfigError(f"{where} ({repo_id}): kernel_depends entry {name!r} must be an object")
        _old_entry(dep, f"{where} -> {name}", out)


def _new_entry(entry: Mapping[str, Any], where: str, out: list[LockedKernel]) -> None:
    dep, lock = entry.get("dependency"), entry.get("lock")
    if not isinstance(dep, Mapping) or not isinstance(lock, Mapping):
        raise ConfigError(f"{where}: 'dependency' and 'lock' must be objects; re-lock with `kernels lock`")
    repo_id = _check_repo_id(dep.get("repo-id"), where)
    version, revision = dep.get("version"), dep.get("revision")
    ref = (f"v{version}" if isinstance(version, int) and not isinstance(version, bool) and version >= 0 else
           revision if isinstance(revision, str) and revision else None)
    out.append(LockedKernel(repo_id, _check_sha(lock.get("commit"), f"{where} ({repo_id})"), ref=ref))


def parse_lock(text: str, where: str = "kernels.lock") -> list[LockedKernel]:
    """Both kernels.lock formats -> locked kernels, in file order, duplicates merged."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno}); re-lock with `kernels lock`") \
            from None
    if not isinstance(data, list):
        raise ConfigError(f"{where}: must be a JSON list of locked kernels; re-lock with `kernels lock`")
    found: list[LockedKernel] = []
    for i, entry in enumerate(data):
        at = f"{where} entry {i + 1}"
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{at}: must be an object")
        if "dependency" in entry or "lock" in entry:
            _new_entry(entry, at, found)
        elif "repo_id" in entry:
            _old_entry(entry, at, found)
        else:
            raise ConfigError(f"{at}: has neither 'repo_id' nor 'dependency'; is this a kernels.lock file?")
    merged: dict[tuple[str, str], LockedKernel] = {}
    for lk in found:
        key = (lk.repo_id, lk.sha)
        if key in merged:
            prev = merged[key]
            hashes = {**prev.hashes, **lk.hashes}
            every = not prev.variants or not lk.variants  # either lock takes every variant
            lk = LockedKernel(lk.repo_id, lk.sha, () if every else tuple(sorted(hashes)), hashes, lk.ref or prev.ref)
        merged[key] = lk
    return list(merged.values())


def read_lock(path: Path) -> list[LockedKernel]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the lock file ({exc.strerror}); check --lock") from None
    return parse_lock(text, str(path))


def parse_dependencies(pyproject: Mapping[str, Any], where: str = "pyproject.toml") -> list[Dependency]:
    """``[tool.kernels.dependencies]`` -> dependencies; an empty list when the table is absent."""
    table = pyproject.get("tool", {}).get("kernels", {}).get("dependencies")
    if table is None:
        return []
    at = f"{where} [tool.kernels.dependencies]"
    if not isinstance(table, Mapping):
        raise ConfigError(f"{at} must be a table of \"org/name\" = <major version>")
    deps: list[Dependency] = []
    for repo_id, value in table.items():
        _check_repo_id(repo_id, at)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            deps.append(Dependency(repo_id, major=value))
        elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
            deps.append(Dependency(repo_id, major=int(value)))
        elif isinstance(value, str):
            try:
                SpecifierSet(value)
            except InvalidSpecifier:
                raise ConfigError(f"{at}: {repo_id} = {value!r} is neither a major version nor a version specifier "
                                  "like \">=1.1.2,<2\"") from None
            deps.append(Dependency(repo_id, specifier=value))
        else:
            raise ConfigError(f"{at}: {repo_id} = {value!r} must be a major version number like 1")
    return deps


def read_dependencies(path: Path) -> list[Dependency]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the file") from None
    return parse_dependencies(data, str(path))


def _object_id(path: Path, lfs: bool) -> bytes:
    h = Hashing("sha256" if lfs else "sha1")
    if not lfs:
        h.write(b"blob %d\0" % path.stat().st_size)  # git's blob id
    with open(path, "rb") as f:
        shutil.copyfileobj(f, h, CHUNK)
    return bytes.fromhex(h.hexdigest())


def lock_hash(variant_dir: Path, lfs_paths: Collection[str] = ()) -> str:
    """The ``git_lfs_concat`` hash of a fetched variant folder (build/<variant>/)."""
    return files_lock_hash([(rel, variant_dir / rel) for rel in walk(variant_dir)], lfs_paths)


def files_lock_hash(files: Iterable[tuple[str, Path]], lfs_paths: Collection[str] = ()) -> str:
    """The ``git_lfs_concat`` hash of a variant's files given as (path relative to build/<variant>/, file)."""
    lfs = set(lfs_paths)
    m = hashlib.sha256()
    for rel, full in sorted((rel.encode("utf-8"), full) for rel, full in files):
        m.update(rel)
        m.update(_object_id(full, rel.decode("utf-8") in lfs))
    return f"sha256-{m.hexdigest()}"


def verify_lock_hash(variant_dir: Path, expected: str, *, lfs_paths: Collection[str] = (), where: str = "") -> None:
    """DigestMismatch unless the folder's ``git_lfs_concat`` hash is ``expected``."""
    actual = lock_hash(variant_dir, lfs_paths)
    if actual != expected:
        raise DigestMismatch(f"{where or variant_dir}: files do not match the kernels.lock hash ({expected[:19]}..., "
                             f"got {actual[:19]}...); re-lock with `kernels lock` or check the source")
