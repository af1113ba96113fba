"""Retention: which versions a prune removes (any rule keeps a version: ``keep-per-major``, ``keep-since``, a
kernels.lock's pin, being the project's newest), and removing them in steps a kill may stop (docs/withdraw.md)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from ..errors import Refused, UsageError
from ..nofollow import LinkRefused
from ..record import Record, version_key
from .check import plain_wheel, version_of

if TYPE_CHECKING:
    from . import Store

JOURNAL = ".prune-pending.json"
MAX_JOURNAL = 64 << 20


@dataclass(frozen=True)
class Rules:
    keep_per_major: int | None = None  # the newest N versions of each major version
    keep_since: dt.datetime | None = None  # every version with a wheel uploaded at or after this time (UTC)
    locked: frozenset[tuple[str, str]] = frozenset()  # (repository id, commit) pairs kernels.lock files pin


@dataclass
class Plan:
    """What a prune removes and keeps: wheel file names, with why each kept version is kept."""

    remove: list[Record] = field(default_factory=list)
    kept: dict[str, list[str]] = field(default_factory=dict)  # "project version" -> the rules that keep it
    bytes: int = 0


def parse_since(text: str, where: str, now: dt.datetime | None = None) -> dt.datetime:
    """``2026-01-31`` (or an ISO time) or ``90d`` (that many days before now) -> an aware UTC time."""
    text = str(text).strip()
    now = now or dt.datetime.now(dt.timezone.utc)
    if text.endswith("d") and text[:-1].isdigit():
        return now - dt.timedelta(days=int(text[:-1]))
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{where} {text!r}: expected a date like 2026-01-31 or a number of days like 90d") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def parse_keep(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit() or int(value) < 1:
        raise UsageError(f"{where} {value!r}: expected a number of versions of at least 1")
    return int(value)


def _uploaded(r: Record) -> dt.datetime:
    return dt.datetime.fromisoformat(r.upload_time.replace("Z", "+00:00"))


def plan(records: Iterable[Record], rules: Rules, files: Path | None = None) -> Plan:
    """The versions ``rules`` remove, and why each other is kept; ``files``: to count the bytes freed (``freed``)."""
    by_project: dict[str, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        by_project[str(canonicalize_name(r.name))][r.public_version].append(r)
    out = Plan()
    for project in sorted(by_project):
        versions = by_project[project]
        order = sorted(versions, key=version_key, reverse=True)  # newest first
        per_major: dict[object, int] = defaultdict(int)
        for i, version in enumerate(order):
            recs = versions[version]
            why = ["newest"] if i == 0 else []
            parsed = version_of(version)
            major = parsed.major if parsed is not None else version
            per_major[major] += 1
            if rules.keep_per_major is not None and per_major[major] <= rules.keep_per_major:
                why.append(f"keep-per-major {rules.keep_per_major}")
            if rules.keep_since is not None and max(map(_uploaded, recs)) >= rules.keep_since:
                why.append("keep-since")
            if any((r.repo_id or r.source, r.revision) in rules.locked for r in recs):
                why.append("locked")
            if why:
                out.kept[f"{project} {version}"] = why
                continue
            for r in sorted(recs, key=lambda r: r.filename):
                out.remove.append(r)
                out.bytes += freed(files, r)
    return out


def plan_named(records: Iterable[Record], named: list[Record], locked: frozenset[tuple[str, str]],
               files: Path | None = None) -> Plan:
    """Remove the wheels ``named``; Refused (exit 3, nothing removed) for a project's newest or a pinned version."""
    newest: dict[str, str] = {}
    for r in sorted(records, key=lambda r: version_key(r.public_version), reverse=True):  # ties keep their order
        newest.setdefault(str(canonicalize_name(r.name)), r.public_version)
    out = Plan()
    for r in named:
        project, public = str(canonicalize_name(r.name)), r.public_version
        if public == newest[project]:
            raise Refused(f"{r.filename}: {project} {public} is the project's newest version, which prune never "
                          "removes; yank it (kernel-factory yank) or quarantine the project (kernel-factory status)")
        if (r.repo_id or r.source, r.revision) in locked:
            raise Refused(f"{r.filename}: {project} {public} is pinned by a kernels.lock given with "
                          f"--keep-locked (commit {r.revision}); update the lock first, or leave the version")
        out.remove.append(r)
        out.bytes += freed(files, r)
    return out


def freed(files: Path | None, r: Record) -> int:
    if files is None:
        return r.size
    total = 0
    for name in (r.filename, f"{r.filename}.metadata", f"{r.filename}.json"):
        with contextlib.suppress(FileNotFoundError):
            total += os.lstat(files / name).st_size
    return total


def read_journal(files: Store) -> tuple[frozenset[str], bool]:
    """(the wheels a prune under way removes, whether the index was rendered without them); Refused if damaged."""
    where = f"{files.file_url(JOURNAL)}"
    try:
        data = files.read(JOURNAL, MAX_JOURNAL)
    except LinkRefused as exc:
        raise Refused(f"{where}: {exc.found}; remove it and run `kernel-factory prune` again") from None
    if data is None:
        return frozenset(), False
    wheels = rendered = None
    with contextlib.suppress(ValueError, RecursionError, KeyError):
        raw = json.loads(data)
        wheels = raw["wheels"] if type(raw) is dict and raw.get("schema") == 1 else None
        rendered = raw.get("rendered", False) if type(raw) is dict else None
    if (type(wheels) is not list or not all(plain_wheel(w) for w in wheels) or type(rendered) is not bool
            or len(data) > MAX_JOURNAL):  # fmt: skip
        raise Refused(f"{where}: damaged (not the list of wheels a prune removes); remove it and run "
                      "`kernel-factory prune` again")
    return frozenset(wheels), rendered


def write_pending(files: Store, wheels: Iterable[str], rendered: bool = False) -> None:
    """The journal: the wheels to remove, and whether the index has been rendered without them since."""
    files.write(JOURNAL, (json.dumps({"schema": 1, "wheels": sorted(wheels), "rendered": rendered}) + "\n").encode())


def started(files: Store, wheels: Iterable[str]) -> bool:
    """Whether a stopped prune had begun deleting ``wheels`` (a record gone): its pages left them out already."""
    return any(files.read(f"{w}.json", 0) is None for w in wheels)


def remove(files: Store, wheels: Iterable[str]) -> list[str]:
    """Delete each wheel's record, then its .metadata, then the wheel (a reader following a page of before the
    prune still finds the wheel until the last step); the wheels whose files were there. Then the journal."""
    gone = []
    for wheel in sorted(wheels):
        if not plain_wheel(wheel):  # the journal is checked when read; never a path out of files/
            continue
        if any([files.delete(name) for name in (f"{wheel}.json", f"{wheel}.metadata", wheel)]):  # each one deleted
            gone.append(wheel)
    files.delete(JOURNAL)
    return gone
