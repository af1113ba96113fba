"""Yank and unyank (PEP 592): the records of the wheels a spec names (read by ``packaging``, docs/withdraw.md),
marked, each written whole; the caller's index run renders the pages."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..errors import Refused, UsageError, VersionNotFound
from ..record import MAX_RECORD_BYTES, Record
from . import check

if TYPE_CHECKING:
    from . import Store


@dataclass(frozen=True)
class Spec:
    text: str
    project: str
    specifier: SpecifierSet

    def matches(self, record: Record) -> bool:
        if str(canonicalize_name(record.name)) != self.project:
            return False
        version = check.version_of(record.version)
        return version is not None and self.specifier.contains(version, prereleases=True)


def parse_spec(text: str) -> Spec:
    """``img2grey==1.1.2`` -> Spec; UsageError naming the fix."""
    hint = "give a project and a version or specifier, like img2grey==1.1.2 or 'img2grey<1.1'"
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError(f"{text!r}: not a project and version ({exc}); {hint}") from None
    if req.extras or req.marker is not None or req.url:
        raise UsageError(f"{text!r}: extras, markers and URLs name no wheel of the store; {hint}")
    if not req.specifier:
        raise UsageError(f"{text!r}: names no version; {hint} (to withdraw a whole project, quarantine it: "
                         f"kernel-factory status {req.name} quarantined --reason TEXT)")
    return Spec(text, str(canonicalize_name(req.name)), req.specifier)


def select(records: Iterable[Record], spec: Spec, where: str) -> list[Record]:
    """The records ``spec`` names, sorted; UsageError (unknown project) or VersionNotFound (exit 2) for none."""
    project = [r for r in records if str(canonicalize_name(r.name)) == spec.project]
    if not project:
        raise UsageError(f"no project {spec.project!r} in the store {where}; check the name (the index's "
                         "simple/ page lists every project)")
    found = sorted((r for r in project if spec.matches(r)), key=lambda r: r.filename)
    if not found:
        versions = sorted({r.public_version for r in project}, key=Version)
        raise VersionNotFound(f"{spec.text!r} matches no wheel of {spec.project} in {where} (its versions: "
                              f"{', '.join(versions[-8:])}); fix the version or specifier")
    return found


def yanked_value(reason: str | None, yank: bool) -> bool | str:
    return (reason or True) if yank else False


def mark(files: Store, records: list[Record], value: bool | str) -> tuple[list[Record], list[Record]]:
    """Set each record file's ``yanked`` (unknown keys kept; one changed since refused); (changed, already so)."""
    changed, same = [], []
    for r in records:
        if r.yanked == value:
            same.append(r)
            continue
        name = f"{r.filename}.json"
        data = files.read(name)
        raw = json.loads(data) if data is not None and len(data) <= MAX_RECORD_BYTES else None
        if raw is None or check.check(raw, r.filename).sha256 != r.sha256:
            raise Refused(f"{files.file_url(name)}: changed while it was read (another writer?); run the command again")
        raw["yanked"] = value
        new = check.check(raw, r.filename)
        files.write(name, (json.dumps(raw, sort_keys=True, separators=(",", ":")) + "\n").encode())  # as Record.to_json
        changed.append(new)
    return changed, same
