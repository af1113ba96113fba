from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from . import yank

NAME = "prune"
HELP = "remove old versions by rules (keep the newest N per major, those newer than a date, locked ones)"
DESCRIPTION = (
    "Remove the wheels (with their .metadata and records) of every version no rule keeps. A version is kept\n"
    "when it is among the newest N of its major (--keep-per-major), newer than a date (--keep-since), pinned\n"
    "by a kernels.lock (--keep-locked), or its project's newest. The same rules come from the config's\n"
    "[prune] table. The pages stop linking a wheel before it is deleted; a prune that is killed is finished\n"
    "by the next one. With SPEC, the wheels it names go instead (refused, exit 3, if one is a project's newest\n"
    "version or locked). --dry-run prints what would go and the bytes freed. `publish` carries it on."
)
EXAMPLE = "kernel-factory prune --keep-per-major 10 --keep-since 90d --keep-locked kernels.lock --dry-run"
# or: kernel-factory prune 'img2grey<1.0.40' --keep-locked kernels.lock (these wheels, if none is locked or newest)


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", metavar="SPEC", nargs="?", help="remove these wheels instead of applying the keep rules "
                   "(img2grey<1.0.40, img2grey==1.0.7+torch29cu128cxx11); never a project's newest version or a "
                   "locked one")
    p.add_argument("--keep-per-major", metavar="N", help="keep the newest N versions of each major (config: "
                   "keep-per-major)")
    p.add_argument("--keep-since", metavar="DATE", help="keep every version built since DATE (2026-01-31) or "
                   "in the last N days (90d) (config: keep-since)")
    p.add_argument("--keep-locked", metavar="FILE", action="append", help="never remove a version this "
                   "kernels.lock pins (repeatable; config: keep-locked)")
    p.add_argument("--dry-run", action="store_true", help="print what would be removed and the bytes; change nothing")
    yank.common(p)


def rules_of(ns: argparse.Namespace, flags: Any, named: bool = False) -> Any:
    """The rules: the flags over the config's [prune] table."""
    from .. import config
    from ..errors import UsageError
    from ..store.retain import Rules, parse_keep, parse_since
    from ..verify.lockfile import read_lock

    table, base = config.read_prune(flags)
    keep = ns.keep_per_major if ns.keep_per_major is not None else table.get("keep-per-major")
    since = ns.keep_since if ns.keep_since is not None else table.get("keep-since")
    locks: list[Path] = [Path(f) for f in ns.keep_locked or ()]
    if not locks and "keep-locked" in table:
        value = table["keep-locked"]
        names = [value] if isinstance(value, str) else value
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise UsageError("[prune] keep-locked: expected a path or a list of paths to kernels.lock files")
        locks = [Path(n) if Path(n).is_absolute() or base is None else base / n for n in names]
    locked = frozenset((k.repo_id, k.sha) for path in locks for k in read_lock(path))
    rules = Rules(parse_keep(keep, "--keep-per-major") if keep is not None else None,
                  parse_since(since, "--keep-since") if since is not None else None, locked)
    if keep is None and since is None and not named:
        raise UsageError("prune needs a rule: --keep-per-major N or --keep-since DATE (or keep-per-major / "
                         "keep-since in the config's [prune] table)")
    return rules


def execute(ns: argparse.Namespace) -> int:
    from .. import report
    from ..errors import worst
    from ..index.command import IndexArgs, run_index
    from ..record import FILES
    from ..store import load_records
    from ..store.retain import plan, plan_named, read_journal, remove, started, write_pending
    from ..store.withdraw import parse_spec, select

    flags, store = yank.store_of(ns)
    local = store.folder / FILES if store.folder is not None else None  # on S3 the bytes are the wheels' sizes
    rules = rules_of(ns, flags, named=ns.spec is not None)
    spec = parse_spec(ns.spec) if ns.spec is not None else None
    finished: list[str] = []
    deferred = store.folder is None  # an s3:// store is often the published site: deleted at the next prune
    with store.lock():
        pending, rendered = read_journal(store)  # a prune that was stopped (or, on S3, the last one): first
        if pending and not ns.dry_run and (rendered if deferred else started(store, pending)):
            finished = remove(store, pending)  # the pages were rendered without them already
            pending = frozenset()
        records = load_records(store)
        if spec is not None:  # the wheels a spec names: refused whole if one is locked or the newest
            found = plan_named(records, select(records, spec, store.display), rules.locked, local)
        else:
            found = plan([r for r in records if r.filename not in pending], rules, local)
        going = sorted(pending | {r.filename for r in found.remove})
        if going and not ns.dry_run:
            write_pending(store, going)  # from here on the pages leave them out
    verb = "would remove" if ns.dry_run else "removing"
    for name in sorted({*pending, *finished}):
        report.info(f"{verb} {name} (left by a prune that was stopped)")
    for r in found.remove:
        report.info(f"{verb} {r.filename} ({report.megabytes(r.size)})")
    codes = []
    gone = list(finished)
    if not ns.dry_run:
        if going:
            # the pages stop linking them, before any is deleted
            codes.append(run_index(IndexArgs(flags=flags, store=store)))
            with store.lock():
                if deferred:
                    write_pending(store, going, rendered=True)
                    report.info(f"{len(going)} wheel(s) left in {store.display} until the next prune: publish the "
                                "pages, which no longer link them, first (docs/withdraw.md)")
                else:
                    gone += remove(store, read_journal(store)[0])
        codes.append(run_index(IndexArgs(flags=flags, store=store)))  # the catalog and pages see them gone
    versions = len({(r.name, r.kernel_version or r.version) for r in found.remove})
    size = f"{report.megabytes(found.bytes)} ({found.bytes} bytes)"
    if ns.dry_run:
        report.result(f"prune (dry run): would remove {len(going)} wheel(s) of {versions} version(s), freeing "
                      f"{size}; {len(found.kept)} version(s) kept")
    elif deferred:
        report.result(f"prune: {len(going)} wheel(s) of {versions} version(s), {size}, no longer linked, deleted by "
                      f"the next prune; {len(gone)} deleted now; {len(found.kept)} version(s) kept")
    else:
        report.result(f"prune: removed {len(gone)} wheel(s) of {versions} version(s), freed {size}; "
                      f"{len(found.kept)} version(s) kept")
    if ns.json:
        report.document({"dry_run": ns.dry_run, "removed": going if ns.dry_run else sorted(gone),
                         "pending": going if deferred and not ns.dry_run else [], "bytes": found.bytes,
                         "kept": {key: why for key, why in sorted(found.kept.items())}})
    return worst(codes)
