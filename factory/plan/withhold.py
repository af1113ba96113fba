"""PEP 792 project status in the plan: an ``archived`` or ``quarantined`` project takes no new files.

The status is kept in the store (``kernel-factory status PROJECT STATUS``, files/project-status.json). A job of
such a project that the store does not hold yet is left out of the plan, with one warning per project naming the
status and how to take new builds again; that is the operator's own choice, not a refusal (exit 0). A
``deprecated`` project builds as usual, with a note.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from ..record import Record
from ..store import Store
from ..store.status import Status, read_statuses

CLOSED = ("archived", "quarantined")  # PEP 792: the index takes no new files for these


@dataclass(frozen=True)
class Withheld:
    """The jobs of one project that its status leaves out of the plan."""

    project: str
    status: Status
    jobs: int


def store_statuses(store: Store, records: list[Record]) -> dict[str, Status]:
    """The statuses ``store`` keeps, read when the plan was given its records (``build`` and ``plan``; ``to-wheel``
    plans against no store and reads none). A status is only set on a project the store holds, so a store with
    no records has none that matter."""
    return read_statuses(store) if records else {}


def projects_by_source(records: Iterable[Record]) -> dict[str, set[str]]:
    """The project (wheel) names the store holds for each source key (a job's ``key[0]``): metadata.json's
    ``name`` may differ from the repository's."""
    out: dict[str, set[str]] = {}
    for r in records:
        if r.job_key is not None:
            out.setdefault(r.job_key[0], set()).add(str(canonicalize_name(r.name)))
    return out


def project_status(source_key: str, repo_name: str, projects: Mapping[str, set[str]],
                   statuses: Mapping[str, Status]) -> tuple[str, Status] | None:
    """The project and status that hold back a new build of ``source_key`` (a repository whose wheels the store
    holds under their own names, else named after the repository), or None when it builds."""
    names = sorted(projects.get(source_key) or {str(canonicalize_name(repo_name))})
    found = [(n, statuses[n]) for n in names if n in statuses]
    closed = [(n, s) for n, s in found if s.status in CLOSED]
    chosen = closed or found
    return chosen[0] if chosen else None


def _reason(status: Status) -> str:
    return f" ({status.reason})" if status.reason else ""


def withheld_line(w: Withheld) -> str:
    """One warning per project: its status, what it left out, how to change it."""
    return (f"{w.project}: project status {w.status.status}{_reason(w.status)}: {w.jobs} new build(s) left out of "
            f"the plan (PEP 792: an archived or quarantined project takes no new files); `kernel-factory status "
            f"{w.project} active` builds it again")


def deprecated_note(project: str, status: Status) -> str:
    return f"{project}: project status deprecated{_reason(status)}: built as usual"
