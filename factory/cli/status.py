from __future__ import annotations

import argparse

from . import yank

NAME = "status"
HELP = "show or set a project's status (PEP 792): active, archived, quarantined, deprecated"
DESCRIPTION = (
    "Set a project's status, kept in the store (files/project-status.json), and render the index again:\n"
    "every page of the project (in the combined index and each variant index) and the landing page carry it\n"
    "(PEP 792: <meta name=\"pypi:project-status\">, \"project-status\" in JSON). archived: no new builds expected;\n"
    "deprecated: superseded; quarantined: its pages offer no file for install; active: the default.\n"
    "Without STATUS, print the project's status."
)
EXAMPLE = "kernel-factory status img2grey quarantined --reason 'wrong results on sm_90 (CVE-...)'"


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("project", metavar="PROJECT", help="the project (any spelling: My_Kernel, my-kernel)")
    p.add_argument("status", metavar="STATUS", nargs="?", help="active, archived, quarantined or deprecated")
    p.add_argument("--reason", metavar="TEXT", help="why (shown on the pages and by installers that read it)")
    yank.common(p)


def execute(ns: argparse.Namespace) -> int:
    from packaging.utils import canonicalize_name

    from .. import report
    from ..errors import UsageError
    from ..index.command import IndexArgs, run_index
    from ..store import load_records
    from ..store.status import Status, check_status, read_statuses, write_statuses

    project = str(canonicalize_name(ns.project))
    flags, store = yank.store_of(ns)
    if ns.status is None:
        if ns.reason is not None:
            raise UsageError("--reason goes with a STATUS: kernel-factory status PROJECT STATUS --reason TEXT")
        current = read_statuses(store).get(project, Status("active"))
        report.result(f"{project}: {current.status}" + (f" ({current.reason})" if current.reason else ""))
        if ns.json:
            report.document({"project": project, **current.to_json()})
        return 0
    new = check_status(ns.status, ns.reason)
    with store.lock():
        if not any(str(canonicalize_name(r.name)) == project for r in load_records(store)):
            raise UsageError(f"no project {project!r} in the store {store.display}; check the name (the index's "
                             "simple/ page lists every project)")
        statuses = read_statuses(store)
        before = statuses.get(project, Status("active"))
        statuses[project] = new
        write_statuses(store, statuses)
    code = run_index(IndexArgs(flags=flags, store=store))
    report.result(f"status {project}: {before.status} -> {new.status}" + (f" ({new.reason})" if new.reason else ""))
    if ns.json:
        report.document({"project": project, "before": before.to_json(), **new.to_json(), "index_exit_code": code})
    return code
