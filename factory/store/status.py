"""Project status (PEP 792), kept in ``files/project-status.json`` and checked when read like a record: a file that
fails stops the index run (exit 3) rather than render a quarantined project's files again (docs/withdraw.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from ..errors import Refused, UsageError
from ..nofollow import LinkRefused
from . import MAX_BYTES
from .check import plain_text

if TYPE_CHECKING:
    from . import Store

STATUS_FILE = "project-status.json"
SCHEMA = 1
STATUSES = ("active", "archived", "quarantined", "deprecated")


@dataclass(frozen=True)
class Status:
    status: str
    reason: str = ""

    def to_json(self) -> dict[str, str]:
        return {"status": self.status, "reason": self.reason} if self.reason else {"status": self.status}


class BadStatusFile(Refused):
    """``files/project-status.json`` is damaged or fails its check."""


def one_line(text: object) -> bool:
    """A reason: one line (no control character, no line break), at most 4096 characters."""
    return plain_text(text) and "\n" not in text and "\t" not in text  # type: ignore[operator]


def check_reason(reason: str | None) -> str:
    """``--reason`` (of status, yank): one line, or UsageError."""
    if reason and not one_line(reason):
        raise UsageError("--reason: at most 4096 characters and no control characters (a newline among them); "
                         "give one line")
    return reason or ""


def check_status(status: str, reason: str | None) -> Status:
    """A Status from the command line's words, or UsageError naming the fix."""
    if status not in STATUSES:
        raise UsageError(f"status {status!r}: expected one of {', '.join(STATUSES)}")
    return Status(status, check_reason(reason))


def parse(data: bytes, where: str) -> dict[str, Status]:
    """The statuses a status file's bytes name (``active`` ones left out); BadStatusFile says what is wrong."""

    def bad(why: str) -> BadStatusFile:
        return BadStatusFile(f"{where}: {why}; fix the file, or remove it and set each status again with "
                             "`kernel-factory status PROJECT STATUS`")

    if len(data) > MAX_BYTES:  # Store.read reads at most one byte more
        raise bad(f"larger than {MAX_BYTES} bytes")
    try:
        raw: Any = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise bad(f"not JSON ({exc})") from None
    if type(raw) is not dict or raw.get("schema") != SCHEMA or type(raw.get("projects")) is not dict:
        raise bad(f'not a status file of schema {SCHEMA} ({{"schema": 1, "projects": {{...}}}})')
    found: dict[str, Status] = {}
    for name, value in raw["projects"].items():
        if type(name) is not str or str(canonicalize_name(name)) != name or not plain_text(name):
            raise bad(f"{name!r} is not a normalized project name")
        if type(value) is not dict or not set(value) <= {"status", "reason"}:
            raise bad(f"{name}: expected {{\"status\": ..., \"reason\": ...}}")
        status, reason = value.get("status"), value.get("reason", "")
        if status not in STATUSES:
            raise bad(f"{name}: status {status!r} is not one of {', '.join(STATUSES)}")
        if not one_line(reason):
            raise bad(f"{name}: the reason is not one line of at most 4096 characters")
        if status != "active" or reason:
            found[name] = Status(status, reason)
    return found


def read_statuses(files: Store) -> dict[str, Status]:
    where = f"{files.file_url(STATUS_FILE)}"
    try:
        data = files.read(STATUS_FILE)
    except LinkRefused as exc:
        raise BadStatusFile(f"{where}: {exc.found}; replace it with the file itself") from None
    return {} if data is None else parse(data, where)


def to_bytes(statuses: Mapping[str, Status]) -> bytes:
    projects = {name: statuses[name].to_json() for name in sorted(statuses)}
    return (json.dumps({"projects": projects, "schema": SCHEMA}, sort_keys=True, ensure_ascii=False) + "\n").encode()


def write_statuses(files: Store, statuses: Mapping[str, Status]) -> None:
    """Write the status file whole (``active`` without a reason is the default: not written)."""
    kept = {name: s for name, s in statuses.items() if s.status != "active" or s.reason}
    if not kept and files.read(STATUS_FILE) is None:
        return
    files.write(STATUS_FILE, to_bytes(kept))
