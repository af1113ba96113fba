"""``kernel-factory index``: the store's records -> the static index (PEP 503, 691, 658, 700).

One flow over the Store protocol, for a local folder and an ``s3://`` store: the catalog is brought up to date
and says which projects changed, ``--wheels`` folders are adopted, every record's files are checked, then the
pages that ``.index-state.json`` (index/state.py) does not show as they are (docs/index.md, "What a run trusts
and checks").
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from .. import config, report
from ..config import Flags, Location
from ..errors import EXIT_OK, EXIT_REFUSED, UsageError
from ..nofollow import TMP_PREFIX, Tree, write_bytes
from ..publish.linked import STORE_FILE
from ..store import Store, open_store
from ..store.catalog import Catalog, Synced, rebuilt, sqlite_problem
from ..store.filecheck import check_files
from ..store.retain import read_journal
from ..store.status import read_statuses
from .pages import (
    DEFAULT_BASE_URL,
    NO_WITHDRAWALS,
    Withdrawals,
    environment,
    fingerprint,
    landing_page,
    project_pages,
    project_paths,
    root_pages,
)
from .state import LANDING, State, changed_pages, page_stat, read_state, write_state

if TYPE_CHECKING:
    from ..record import Record
    from ..store.adopt import AdoptResult

PAGE_DIRS = ("simple", "variants", "projects")
PARALLEL_RECORDS = 5000  # a full build of at least this many records renders in one process per core


@dataclass(frozen=True)
class IndexArgs:
    flags: Flags  # --store, --out, --templates, --base-url, --allow-kernel-names among them (config.OPTIONS)
    wheels: tuple[str, ...] = ()
    repair: bool = False
    rescan: bool = False  # list and check every record even when files/ looks unchanged
    json: bool = False  # one JSON document on stdout (docs/json.md); messages go to stderr
    store: Store | None = None  # the store as the command opened it (yank, status, prune): not opened again


@dataclass(frozen=True)
class IndexOptions:
    store: Location
    out: Path
    wheels: tuple[Path, ...]
    templates: Path | None
    base_url: str
    kernel_names: frozenset[str]  # the configured kernels' project names (guessed from the repo)
    options: Any  # the resolved config.Options: the store is opened with them (S3 put args, lock wait)


@dataclass(frozen=True)
class IndexResult:
    pages: int
    written: int
    unchanged: int
    removed: int


def resolve_paths(args: IndexArgs) -> IndexOptions:
    """Store, index root, adopted folders, templates and base URL from the command line (defaults: ./public)."""
    opts = config.resolve(args.flags)  # defaults -> factory.toml -> environment -> --store
    store = opts.store
    if args.flags.given.get("index_out") and opts.store == Location.parse(config.DEFAULT_STORE) and opts.index_out:
        store = Location.parse(opts.index_out)  # no store named: --out alone is the site
    out = opts.index_out or store.local
    if out is None:
        raise UsageError(f"the store {store} is not a local folder; give the index root with --out DIR")
    templates = opts.templates
    if templates is not None and not Path(templates).is_dir():
        raise UsageError(f"--templates {templates}: no such folder; give a folder of templates to override")
    wheels = tuple(Path(w) for w in args.wheels)
    for w in wheels:
        if not w.is_dir():
            raise UsageError(f"--wheels {w}: no such folder; give a folder that holds .whl files")
    base_url = (opts.base_url or DEFAULT_BASE_URL).rstrip("/")
    names = frozenset(canonicalize_name(Path(k.repo_id or k.repo).name) for k in opts.kernels)
    return IndexOptions(store, Path(out), wheels, Path(templates) if templates else None, base_url, names, opts)


def remove_stale(out: Path, keep: Iterable[str], tree: Tree | None = None) -> int:
    """Remove the pages under ``PAGE_DIRS`` not in ``keep``, and folders left empty, by folder descriptors
    (``Tree.sweep``: never through a link, nor into a folder swapped for one meanwhile)."""
    keep_set = set(keep)
    tree = Tree(out) if tree is None else tree

    def doomed(rel: str) -> bool:
        name = rel.rpartition("/")[2]
        return name.startswith(TMP_PREFIX) or (name in ("index.html", "index.json") and rel not in keep_set)

    return sum(tree.sweep(top, doomed) for top in PAGE_DIRS)


class _Writer:
    """Writes pages whose bytes differ, keeping their paths, and keeps each page's size and mtime as written."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.tree = Tree(out)  # never writes or removes through a folder that is a link
        self.paths: set[str] = set()  # the pages written
        self.stats: dict[str, tuple[int, int]] = {}

    def write(self, pages: dict[str, bytes]) -> None:
        """Write ``pages``; a project's page for a person last (it links its simple and variant pages)."""
        for path in sorted(pages, key=lambda p: (p.startswith("projects/"), p)):
            if self.tree.write(path, pages[path]):
                self.paths.add(path)
            if (stat := page_stat(os.path.join(self.out, path))) is not None:
                self.stats[path] = stat


@dataclass(frozen=True)
class _Render:
    """What every project's pages are rendered with, in this process and in each worker of a full build."""

    templates: Path | None
    base_url: str
    labels: dict[str, str | None]
    withdrawals: Withdrawals  # the projects' statuses, the wheels a prune is removing (pages.py)
    hidden: frozenset[str]  # wheels left out of every page (look-alikes, see ``refuse_lookalikes``)

    def projects(self, writer: _Writer, found: Iterable[tuple[str, list[Record]]]) -> dict[str, Any]:
        """Write the pages of every project in ``found``; their state entries."""
        env = environment(self.templates)
        entries: dict[str, Any] = {}
        for name, records in found:
            pages, in_labels, summary = project_pages(env, name, [r for r in records if r.filename not in self.hidden],
                                                      self.labels, self.base_url, self.withdrawals)  # fmt: skip
            writer.write(pages)
            entries[name] = {"labels": in_labels, "summary": summary}
        return entries


def build_index(out: Path, catalog: Catalog, templates: Path | None, base_url: str, before: str | None = None,
                touched: Iterable[str] = (), rescan: bool = False, warnings: list[str] | None = None,
                hidden: frozenset[str] = frozenset(), withdrawals: Withdrawals = NO_WITHDRAWALS) -> IndexResult:
    """Bring the pages in ``out`` up to date with ``catalog``. ``before`` and ``touched``: the catalog's generation
    before its last change and the projects that change touched; with a state of that generation, only those
    projects are rendered again, and the owners of any page the state does not match. ``rescan``: every page."""
    fp = fingerprint(templates, base_url, withdrawals)
    if hidden:  # another set of wheels left out: every page again
        fp += ":hidden:" + hashlib.sha256("\n".join(sorted(hidden)).encode()).hexdigest()
    generation = catalog.generation()
    state, warning = read_state(out)
    if warning is not None and warnings is not None:
        warnings.append(warning)
    if rescan or (state is not None and state.fingerprint != fp):
        state = None
    changed = changed_pages(out, state) if state is not None else set()
    if state is not None and state.generation == generation and not changed:
        known = len(state.pages)
        return IndexResult(known, 0, known, 0)
    env = environment(templates)  # compiled once; the render workers fork with it
    render = _Render(templates, base_url, catalog.label_backends(), withdrawals, hidden)
    labels = render.labels
    incremental = state is not None and state.labels == labels and before is not None and state.generation == before
    projects: dict[str, Any] = dict(state.projects) if incremental and state is not None else {}
    stats: dict[str, tuple[int, int]] = dict(state.pages) if incremental and state is not None else {}
    owners = state.owners() if state is not None else {}
    had_pages = any((out / top).exists() for top in PAGE_DIRS)
    writer = _Writer(out)
    wanted = set(touched) | {p for p in (owners.get(path) for path in changed) if p} if incremental else None
    workers = min(os.cpu_count() or 1, 16)  # the processes of a full build: one per core
    rest: Iterable[str] | None = wanted  # the projects rendered here (None: all)
    if wanted is None and workers > 1 and catalog.path != ":memory:" and catalog.count() >= PARALLEL_RECORDS:
        # every project in forked workers, each reading and checking its share from the catalog file (the rows a
        # sync has just checked are known from the fork); they drop the store lock and die with this process
        from ..store.pool import worker_pool

        for name in ("project.html", "kernel.html"):  # compiled here once, then forked into every worker
            env.get_template(name)
        names, parts = catalog.project_names(), workers * 4
        chunks = [names[i::parts] for i in range(parts) if names[i::parts]]
        _CATALOG[:] = [catalog]
        try:
            with worker_pool(workers) as pool:
                for future in [pool.submit(_render_chunk, chunk, out, render) for chunk in chunks]:
                    paths, entries, written_stats = future.result()
                    writer.paths |= paths
                    projects.update(entries)
                    stats.update(written_stats)
        finally:
            _CATALOG.clear()
        rest = ()
    gone: set[str] = set()  # the pages of projects rendered again, as they were (removed if not kept)
    for name in wanted or ():  # rendered again below, unless their last record is gone
        old = projects.pop(name, None)
        if old is not None:
            gone.update(project_paths(name, old["labels"]))
    projects.update(render.projects(writer, catalog.projects(rest)))
    members: dict[str | None, list[str]] = {None: sorted(projects), **{label: [] for label in labels}}
    for name in sorted(projects):
        for label in projects[name]["labels"]:
            members[label].append(name)
    for group, names in members.items():
        writer.write(root_pages(env, group, names))
    writer.write({LANDING: landing_page(env, {p: v["summary"] for p, v in projects.items()}, labels, base_url,
                                        withdrawals)})  # fmt: skip
    new = State(fp, generation, labels, projects)
    keep = set(new.owners())  # the landing page, the roots, every project's pages
    removed = sum(writer.tree.remove(path) for path in gone - keep)  # pages of a project or a variant it left
    if not incremental and had_pages:  # an index root that held no pages has none to remove
        removed += remove_stale(out, keep, writer.tree)
    stats.update(writer.stats)
    for path in keep - stats.keys():  # a page unchanged and not written (a full build over an index root)
        if (stat := page_stat(out / path)) is not None:
            stats[path] = stat
    count, written = len(keep), len(writer.paths & keep)
    new.pages = {p: stats[p] for p in sorted(keep) if p in stats}
    write_state(out, new)
    return IndexResult(count, written, count - written, removed)


_CATALOG: list[Catalog] = []  # the catalog a full build's workers read their projects from, set before they fork


def _render_chunk(names: list[str], out: Path,
                  render: _Render) -> tuple[set[str], dict[str, Any], dict[str, tuple[int, int]]]:  # fmt: skip
    """In a worker of a full build: read (and check) the projects ``names`` on a connection of its own and write
    their pages; (the pages written, their state entries, each page's size and mtime). A damaged row raises
    CatalogDamaged, which the main process gets back (the catalog is rebuilt: ``rebuilt``)."""
    writer = _Writer(out)
    reader = _CATALOG[0].reader()
    try:
        entries = render.projects(writer, reader.projects(names))
    finally:
        reader.close()
    return writer.paths, entries, writer.stats


@dataclass
class Indexed:
    """What one ``index`` run did and found, for the command to report."""

    count: int = 0  # records in the catalog
    result: IndexResult = IndexResult(0, 0, 0, 0)
    adopted: list[tuple[Path, AdoptResult]] = field(default_factory=list)  # each --wheels folder and its result
    errors: list[str] = field(default_factory=list)  # records left out, files that differ: exit 3
    notes: list[str] = field(default_factory=list)  # what was put right
    warnings: list[str] = field(default_factory=list)  # caches dropped and rebuilt


def index_with_adoption(store: Store | Location | str | Path, out: Path, templates: Path | None, base_url: str,
                        wheels: tuple[Path, ...] = (), kernels: Iterable[str] = (), allow_kernel_names: bool = False,
                        rescan: bool = False, repair: bool = False) -> Indexed:
    """Adopt the wheels of ``wheels`` folders, sync the store's catalog, check its files, build the index.
    Adoption refuses wheels of the store's kernel projects and of ``kernels`` (the configured ones) unless
    ``allow_kernel_names``. ``rescan``: read and check every record, and render every page. A catalog found
    damaged at any step is named in one warning and rebuilt in the same run (a second attempt adopts only the
    folders the first did not reach); any other SQLite error is Unreachable (exit 4)."""
    opened = open_store(store)
    kernel_set = set(kernels)
    try:  # first: a store that cannot adopt refuses --wheels before anything is read
        catalog = opened.open_catalog(adopting=bool(wheels))
    except sqlite3.DatabaseError as exc:  # Catalog() rebuilds a damaged file itself: this is another error
        raise sqlite_problem(opened.display, exc) from None
    done = Indexed(warnings=[catalog.note] if catalog.note is not None else [])
    try:
        withdrawals = Withdrawals(read_statuses(opened), read_journal(opened)[0])  # statuses, a prune under way

        def attempt(again: bool) -> tuple[int, IndexResult]:
            done.errors, done.notes = [], []  # this attempt's lines, kept only if it holds up
            scan = rescan or again
            before = catalog.generation()
            synced = opened.sync(catalog, scan)
            touched = set(synced.touched)
            known = json.loads(catalog.meta("variants") or "{}")  # labels already mapped to variants
            count = len(known)
            reached = {folder for folder, _result in done.adopted}
            for folder in wheels:
                if folder not in reached:
                    result = _adopt_folder(opened, folder, catalog, synced, known, kernel_set, allow_kernel_names)
                    done.adopted.append((folder, result))
                    touched |= catalog.apply_rows(result.rows, ())
            if len(known) != count:
                catalog.set_meta("variants", json.dumps(known, sort_keys=True))
            healed = {name for _folder, result in done.adopted for name in result.adopted}  # a gap adopted again
            done.errors += [line for wheel, line in synced.errors if wheel not in healed]
            found = check_files(opened, catalog, synced, repair)
            hidden = refuse_lookalikes(catalog, allow_kernel_names, done.errors)
            if opened.folder is None:  # an S3 store: named in the root, where publish finds the wheels the pages link
                write_bytes(out / STORE_FILE, json.dumps({"store": opened.display}).encode())
            index = build_index(out, catalog, templates, base_url, None if scan else before, touched | found.touched,
                                scan, done.warnings, hidden, withdrawals)  # fmt: skip
            done.errors += found.errors
            done.notes += found.notes
            opened.save(catalog, bool(healed))
            return catalog.count(), index

        done.count, done.result = rebuilt(catalog, attempt, done.warnings.append)
    finally:
        catalog.close()
    return done


def _adopt_folder(store: Store, folder: Path, catalog: Catalog, synced: Synced, known: dict[str, Any],
                  kernels: set[str], allow_kernel_names: bool) -> AdoptResult:
    """Adopt the wheels of ``folder`` the store lacks (``index --wheels``): one listing of the folder, diffed
    against the store's listing (or, where it was not listed, the catalog's names). Wheels of a project that is a
    kernel of the store or of ``kernels`` are refused unless ``allow_kernel_names``."""
    from ..store.adopt import AdoptResult, adopt_wheels, not_wheels  # here: a run without --wheels does not import it

    with os.scandir(folder) as it:  # the entries' types come with the listing: no stat per wheel
        names = [e.name for e in it if not e.name.startswith(".") and e.is_file()]
    held = synced.listing if synced.listing is not None else catalog.keys()
    fresh = [n for n in names if n.endswith(".whl")]
    todo = sorted(n for n in fresh if n not in held)
    result = AdoptResult()
    if todo:
        assert store.folder is not None  # open_catalog(adopting=True) refused a store without one
        refuse = set() if allow_kernel_names else kernels | catalog.kernel_projects(
            {canonicalize_name(n.split("-", 1)[0]) for n in todo})
        result = adopt_wheels(store.folder, [os.path.join(folder, n) for n in todo], refuse, known)
    result.present = [n for n in fresh if n in held]
    result.not_wheels = not_wheels(names)
    if synced.listing is not None:
        synced.listing.update((row[0], row[2]) for row in result.rows)
    if synced.names is not None:  # the file check looks for their .metadata there
        synced.names.update(f"{n}{end}" for n in result.adopted for end in ("", ".metadata", ".json"))
    return result


def refuse_lookalikes(catalog: Catalog, allow: bool, errors: list[str]) -> frozenset[str]:
    """The adopted wheels of projects the store holds built kernels of, left out of the index at every run
    (whichever came first), each named in ``errors``; none with ``allow`` (``--allow-kernel-names``)."""
    if allow:
        return frozenset()
    found = catalog.lookalikes()
    errors.extend(f"{wheel}: an adopted wheel of {project!r}, a project this store builds from a kernel, left "
                  "out of the index (it would sit beside the kernel in every install); remove it from the store, "
                  "or pass --allow-kernel-names (allow-kernel-names = true) if you mean to list it"
                  for wheel, project in found)  # fmt: skip
    return frozenset(wheel for wheel, _ in found)


def index_lock(store: Store, adopting: bool, repair: bool) -> AbstractContextManager[None]:
    """What ``index`` holds: the store lock, where the store can be written (a read-only one has no writer to wait
    for); UsageError where there is no store and nothing to adopt into one, or --repair of an s3:// store."""
    root = store.folder
    if root is None:
        if repair:
            raise UsageError(f"--repair needs a local store folder, not {store.display}; delete the damaged records "
                             "and rerun build")
        return nullcontext()  # S3: shards write distinct keys, each wheel before its record
    if not root.exists() and not adopting:
        raise UsageError(f"no store at {root}: run `kernel-factory build` first, check --store (or `store` in the "
                         "config), or pass --wheels DIR to index a folder of wheels")
    if root.is_dir() and not os.access(root, os.W_OK):
        return nullcontext()  # read-only: no writer to wait for
    return store.lock()


def run_index(args: IndexArgs) -> int:
    """Adopt ``--wheels`` folders, then render the index of the store into the index root (under ``index_lock``)."""
    opts = resolve_paths(args)
    store = open_store(args.store or opts.store, opts.options)  # args.store: yank's, status' or prune's, kept as it is
    with index_lock(store, adopting=bool(opts.wheels), repair=args.repair):
        refused = 0
        if args.repair and store.folder is not None:  # an s3:// store refuses it (store/s3.py), as --wheels
            from ..store.adopt import repair_store

            repaired, failed = repair_store(store.folder)
            report.info(f"repaired {len(repaired)} record(s)"
                        + (f", {len(failed)} could not be repaired" if failed else ""))
            refused += len(failed)
        done = index_with_adoption(store, opts.out, opts.templates, opts.base_url, opts.wheels, opts.kernel_names,
                                   opts.options.allow_kernel_names, args.rescan, args.repair)  # fmt: skip
        for line in done.warnings:
            report.warn(line)  # shown under -q too
        for line in done.notes:
            report.info(line, stderr=True)
        results = [result for _folder, result in done.adopted]
        for folder, result in done.adopted:
            report.info(f"adopted {len(result.adopted)} wheel(s) from {folder}, {len(result.present)} already in the "
                        "store" + (f", {len(result.refused)} refused" if result.refused else ""))
            if result.not_wheels:
                report.warn(f"{folder}: {len(result.not_wheels)} file(s) not indexed (only wheels are): "
                            f"{', '.join(result.not_wheels)}; build wheels of them (`pip wheel --no-deps FILE`) and "
                            "put those in the folder")  # fmt: skip
        refused += sum(len(r.refused) for r in results)
        for line in done.errors:
            report.error(line)
        index = done.result
        report.result(  # the result line: kept under -q (on stderr under --json)
            f"index: {done.count} wheel(s), {index.pages} page(s): {index.written} written, "
            f"{index.unchanged} unchanged, {index.removed} removed -> {opts.out}"
            + (f"; {len(done.errors)} record(s) left out" if done.errors else "")
        )
        if args.json:
            report.document({
                "store": opts.store.display, "out": str(opts.out), "records": done.count, "pages": index.pages,
                "written": index.written, "unchanged": index.unchanged, "removed": index.removed,
                "adopted": [n for r in results for n in r.adopted],
                "already_in_store": sorted(n for r in results for n in r.present),
                "skipped": [n for r in results for n in r.refused],
                "not_indexed": [n for r in results for n in r.not_wheels], "damaged": done.errors,
            })  # fmt: skip
        if refused:
            report.error(f"{refused} wheel(s) refused (see the warnings above); fix or remove them")
        return EXIT_REFUSED if refused or done.errors else EXIT_OK
