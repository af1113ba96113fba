"""``kernel-factory yank SPEC`` (and ``unyank``): withdraw a bad build without deleting it (PEP 592)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .options import add_config, add_options, flags_of

if TYPE_CHECKING:
    from ..config import Flags
    from ..store import Store

NAME = "yank"
HELP = "mark wheels yanked (PEP 592): pip and uv skip them unless pinned exactly"
DESCRIPTION = (
    "Mark the wheels SPEC names as yanked, with a reason, in their records, and render the index again.\n"
    "pip and uv skip a yanked wheel unless a requirement pins it with ==. SPEC is a project with a\n"
    "version or specifier: img2grey==1.1.2 (every variant of 1.1.2), img2grey==1.0.7+torch29cu128cxx11\n"
    "(one variant), 'img2grey<1.1'. `kernel-factory unyank SPEC` takes it back; `publish` carries both."
)
EXAMPLE = "kernel-factory yank 'img2grey==1.1.2' --reason 'wrong results on sm_90; use 1.1.3'"


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", help="project and version or specifier, e.g. img2grey==1.1.2")
    p.add_argument("--reason", metavar="TEXT", help="why (pip and uv show it when they install a yanked wheel)")
    common(p)


def common(p: argparse.ArgumentParser) -> None:
    """The flags yank, unyank, status and prune share: the config, the index's options, --json."""
    add_config(p)
    add_options(p, "index")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout (messages go to stderr)")


def store_of(ns: argparse.Namespace) -> tuple[Flags, Store]:
    """The index's flags and the store yank, unyank, status and prune change, opened once with the resolved options
    (S3 put arguments and Cache-Control, a folder's lock wait); UsageError for a missing store folder."""
    from .. import config
    from ..errors import UsageError
    from ..record import FILES
    from ..store import open_store

    flags = flags_of(ns, "index")
    opts = config.resolve(flags)
    local = opts.store.local
    if local is not None and not (local / FILES).is_dir():
        raise UsageError(f"no store at {local} (no files/ folder): check --store (or `store` in the config), "
                         "or run `kernel-factory build` first")
    return flags, open_store(opts.store, opts)


def execute(ns: argparse.Namespace) -> int:
    return run(ns, yank=True)


def run(ns: argparse.Namespace, *, yank: bool) -> int:
    """Mark the records under the store lock, then render the index through the index run."""
    from .. import report
    from ..errors import worst
    from ..index.command import IndexArgs, run_index
    from ..store import load_records
    from ..store.status import check_reason
    from ..store.withdraw import mark, parse_spec, select, yanked_value

    spec = parse_spec(ns.spec)
    reason = check_reason(getattr(ns, "reason", None)) if yank else ""
    flags, store = store_of(ns)
    with store.lock():  # an s3:// store has no lock: each record is one PUT
        changed, same = mark(store, select(load_records(store), spec, store.display), yanked_value(reason, yank))
    verb = "yanked" if yank else "unyanked"
    for r in changed:
        report.info(f"{verb} {r.filename}")
    code = run_index(IndexArgs(flags=flags, store=store))  # also when nothing changed: a killed run's pages
    report.result(f"{NAME if yank else 'unyank'} {spec.text}: {len(changed)} wheel(s) {verb}, "
                  f"{len(same)} already so")
    if ns.json:
        report.document({"spec": spec.text, "action": NAME if yank else "unyank", "reason": reason or None,
                         "changed": [r.filename for r in changed], "unchanged": [r.filename for r in same],
                         "index_exit_code": code})
    return worst([code])
