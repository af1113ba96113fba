"""``kernel-factory index``: the store's records -> the static index (PEP 503, 691, 658, 700).

The records come through the store's catalog (store/catalog.py), which says
which projects changed since it last did. The index root keeps, in
``.index-state.json``, the catalog generation its pages show, the variant
labels, and per project the variant indexes it is in and its landing-page
line. A run whose catalog generation, labels, templates and base URL are the
ones the state names writes nothing. Otherwise only the changed projects'
pages are rendered, then the roots and the landing page (from the state);
each page is renamed into place and written only when its bytes differ, and
the pages of projects and variants that are gone are removed. Anything else
(first run, new templates, a new variant label, a state of another catalog
generation) renders every project again, streaming them from the catalog.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import atomic, report
from ..atomic import TMP_PREFIX, Tree, write_bytes
from ..config import DEFAULT_LOCK_WAIT_S, Flags, Location
from ..errors import EXIT_OK, EXIT_REFUSED, UsageError
from ..record import FILES, Record
from ..store.catalog import (
    CATALOG_FILE,
    Catalog,
    Gaps,
    local_catalog,
    rebuilt,
    refresh,
    settled,
    sqlite_problem,
)
from .pages import (
    DEFAULT_BASE_URL,
    environment,
    fingerprint,
    landing_page,
    project_pages,
    project_paths,
    read_withdrawals,
    root_pages,
    root_paths,
    use_withdrawals,
)
from .state import LANDING, State, changed_pages, page_stat, read_state, write_state
from .state import STATE_FILE as STATE_FILE

if TYPE_CHECKING:
    import jinja2

    from ..store.filecheck import FileCheck

PAGE_DIRS = ("simple", "variants", "projects")
PARALLEL_RECORDS = 5000  # a full build of at least this many records renders in one process per core


def _workers() -> int:
    """The processes of a full build: one per core, at most 16."""
    return min(os.cpu_count() or 1, 16)


@dataclass(frozen=True)
class IndexArgs:
    """``index``: the options' flags and the index's own."""

    flags: Flags  # --store, --out, --templates, --base-url, --allow-kernel-names among them (config.OPTIONS)
    wheels: tuple[str, ...] = ()
    repair: bool = False
    rescan: bool = False  # list and check every record even when files/ looks unchanged
    json: bool = False  # one JSON document on stdout (docs/json.md); messages go to stderr


@dataclass(frozen=True)
class IndexOptions:
    store: Location
    out: Path
    wheels: tuple[Path, ...]
    templates: Path | None
    base_url: str
    repair: bool = False
    rescan: bool = False
    allow_kernel_names: bool = False
    kernel_names: frozenset[str] = frozenset()  # the configured kernels' project names (guessed from the repo)
    as_json: bool = False
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S  # KERNEL_FACTORY_LOCK_WAIT (config.Environment)


@dataclass(frozen=True)
class IndexResult:
    pages: int
    written: int
    unchanged: int
    removed: int


def resolve_paths(args: IndexArgs) -> IndexOptions:
    """Store, index root, adopted folders, templates and base URL from the command line (defaults: ./public)."""
    from .. import config

    opts = config.resolve(args.flags)  # defaults -> factory.toml -> environment -> --store
    store = opts.store
    if args.flags.get("index_out") and opts.store == Location.parse(config.DEFAULT_STORE) and opts.index_out:
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
    repair = args.repair
    if repair and not store.is_local:
        raise UsageError(
            f"--repair needs a local store folder, not {store}; delete the damaged records and rerun build"
        )
    from packaging.utils import canonicalize_name

    names = frozenset(canonicalize_name(Path(k.repo_id or k.repo).name) for k in opts.kernels)
    as_json = args.json
    return IndexOptions(store, Path(out), wheels, Path(templates) if templates else None, base_url, repair,
                        args.rescan, opts.allow_kernel_names, names, as_json, opts.environment.lock_wait_s)


def write_page(path: Path, data: bytes) -> bool:
    """Write one page atomically unless it already holds ``data``; True if written (factory/atomic.py
    ``write_page``: a random temporary name, renamed into place, not fsynced one by one; the state file, written
    last, records each page's size and mtime, so a page torn by a crash is rendered again). The index itself writes
    through a ``Tree`` of its root, which refuses folders that are links."""
    os.makedirs(path.parent, exist_ok=True)
    return atomic.write_page(os.fspath(path), data)


def remove_stale(out: Path, keep: Iterable[str], tree: Tree | None = None) -> int:
    """Remove pages under simple/ and variants/ that are not in ``keep``, and folders left empty; never through a
    link (a top folder that is one is refused; links below are not walked into)."""
    keep_set = set(keep)
    removed = 0
    tree = Tree(out) if tree is None else tree
    for top in PAGE_DIRS:
        if tree.checked(top) is None:
            continue
        root = out / top
        for dirpath, _dirs, files in os.walk(root, topdown=False):
            for name in files:
                rel = Path(dirpath, name).relative_to(out).as_posix()
                if name.startswith(TMP_PREFIX) or (name in ("index.html", "index.json") and rel not in keep_set):
                    os.unlink(os.path.join(dirpath, name))
                    removed += 1
            if not os.listdir(dirpath):
                os.rmdir(dirpath)
    return removed


class _Writer:
    """Writes pages whose bytes differ, keeping their paths, and keeps each page's size and mtime as written."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.tree = Tree(out)  # never writes or removes through a folder that is a link
        self.paths: set[str] = set()  # the pages written
        self.removed = 0
        self.stats: dict[str, tuple[int, int]] = {}

    def write(self, pages: dict[str, bytes]) -> None:
        """Write ``pages``; a project's page for a person last (it links its simple and variant pages)."""
        for path in sorted(pages, key=lambda p: (p.startswith("projects/"), p)):
            if self.tree.write(path, pages[path]):
                self.paths.add(path)
            stat = page_stat(os.path.join(self.out, path))
            if stat is not None:
                self.stats[path] = stat


def _members(projects: dict[str, Any], labels: dict[str, str | None]) -> dict[str | None, list[str]]:
    """The projects each root lists: the combined one (None) and each variant's."""
    members: dict[str | None, list[str]] = {None: sorted(projects)}
    for label in labels:
        members[label] = []
    for name in sorted(projects):
        for label in projects[name]["labels"]:
            members[label].append(name)
    return members


def _roots(
    env: jinja2.Environment, projects: dict[str, Any], labels: dict[str, str | None], base_url: str,
    previous: dict[str, Any] | None = None,
) -> tuple[dict[str, bytes], set[str], bytes]:  # fmt: skip
    """(the root pages to write, the paths of every root, the landing page), from the state's projects.

    With ``previous`` (the projects the pages show now), only the roots whose list of projects changed.
    """
    members = _members(projects, labels)
    before = _members(previous, labels) if previous is not None else {}
    pages: dict[str, bytes] = {}
    paths: set[str] = set()
    for group, names in members.items():
        paths.update(root_paths(group))
        if previous is None or before.get(group) != names:
            pages.update(root_pages(env, group, names))
    landing = landing_page(env, {p: v["summary"] for p, v in projects.items()}, labels, base_url)
    return pages, paths, landing


def build_index(
    out: Path, catalog: Catalog, templates: Path | None, base_url: str, before: str | None = None,
    touched: Iterable[str] = (), rescan: bool = False, warnings: list[str] | None = None,
    hidden: frozenset[str] = frozenset(),
) -> IndexResult:  # fmt: skip
    """Bring the pages in ``out`` up to date with ``catalog``.

    ``before`` and ``touched``: the catalog's generation before its last change and the projects that change
    touched; with a state of that generation, only those projects are rendered again, and those of any page
    whose size or mtime is not the one the state names. ``rescan``: render every page and compare its bytes
    with the disk. A state file that fails its check adds a line to ``warnings`` and is not used. ``hidden``:
    wheels left out of every page (look-alikes, see ``refuse_lookalikes``).
    """
    fp = fingerprint(templates, base_url)
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
    labels = catalog.label_backends()
    incremental = state is not None and state.labels == labels and before is not None and state.generation == before
    shown: dict[str, Any] | None = state.projects if incremental and state is not None else None
    projects: dict[str, Any] = dict(shown) if shown is not None else {}
    stats: dict[str, tuple[int, int]] = dict(state.pages) if incremental and state is not None else {}
    owners = state.owners() if state is not None else {}
    had_pages = any((out / top).exists() for top in PAGE_DIRS)
    writer = _Writer(out)
    seen: set[str] = set()
    wanted = set(touched) | {p for p in (owners.get(path) for path in changed) if p} if incremental else None
    workers = _workers()
    rest: Iterable[str] | None = wanted  # the projects rendered here (None: all)
    if wanted is None and workers > 1 and catalog.path != ":memory:" and catalog.count() >= PARALLEL_RECORDS:
        writer.paths |= _render_parallel(out, catalog, templates, base_url, labels, workers, projects, stats,
                                         hidden)  # fmt: skip
        rest = ()
    for name, records in catalog.projects(rest):
        if hidden:
            records = [r for r in records if r.filename not in hidden]
        pages, in_labels, summary = project_pages(env, name, records, labels, base_url)
        writer.write(pages)
        old = projects.get(name)
        if old is not None:
            for path in set(project_paths(name, old["labels"])) - set(pages):
                writer.removed += writer.tree.remove(path)
                stats.pop(path, None)
        projects[name] = {"labels": in_labels, "summary": summary}
        seen.add(name)
    for name in (wanted or set()) - seen:  # projects whose last record is gone
        old = projects.pop(name, None)
        if old is not None:
            for path in project_paths(name, old["labels"]):
                writer.removed += writer.tree.remove(path)
                stats.pop(path, None)
    roots_changed = any(owners.get(path, "") is None for path in changed)  # a root or the landing page
    roots, root_paths, landing = _roots(env, projects, labels, base_url, None if roots_changed else shown)
    writer.write(roots)
    writer.write({LANDING: landing})
    keep = {LANDING, *root_paths}
    for name, entry in projects.items():
        keep.update(project_paths(name, entry["labels"]))
    if not incremental and had_pages:  # an index root that held no pages has none to remove
        writer.removed += remove_stale(out, keep, writer.tree)
    stats.update(writer.stats)
    for path in keep - stats.keys():  # a page unchanged and not written (a full build over an index root)
        stat = page_stat(out / path)
        if stat is not None:
            stats[path] = stat
    count, written = len(keep), len(writer.paths & keep)
    write_state(out, State(fp, generation, labels, projects, {p: stats[p] for p in sorted(keep) if p in stats}))
    return IndexResult(count, written, count - written, writer.removed)


_CHUNKS: list[list[tuple[str, list[Record]]]] = []  # a full build's projects, read before its workers fork


def render_projects(
    out: Path, templates: Path | None, base_url: str, labels: dict[str, str | None],
    groups: Iterable[tuple[str, list[Record]]],
) -> tuple[set[str], dict[str, Any], dict[str, tuple[int, int]]]:  # fmt: skip
    """Render the pages of ``groups`` (project, its records) in a worker of a full build; (the pages written,
    their state entries, each page's size and mtime)."""
    env = environment(templates)
    writer = _Writer(out)
    entries: dict[str, Any] = {}
    for name, records in groups:
        pages, in_labels, summary = project_pages(env, name, records, labels, base_url)
        writer.write(pages)
        entries[name] = {"labels": in_labels, "summary": summary}
    return writer.paths, entries, writer.stats


def _render_chunk(
    index: int, out: Path, templates: Path | None, base_url: str, labels: dict[str, str | None]
) -> tuple[set[str], dict[str, Any], dict[str, tuple[int, int]]]:  # fmt: skip
    """``render_projects`` of ``_CHUNKS[index]`` (forked after they were read and checked)."""
    return render_projects(out, templates, base_url, labels, _CHUNKS[index])


def _render_parallel(
    out: Path, catalog: Catalog, templates: Path | None, base_url: str, labels: dict[str, str | None],
    workers: int, projects: dict[str, Any], stats: dict[str, tuple[int, int]], hidden: frozenset[str] = frozenset(),
) -> set[str]:  # fmt: skip
    """Render every project's pages in ``workers`` forked processes; the pages written.

    The projects are read from the catalog (and checked) here, then shared with the workers as the fork gives
    them (a module global: nothing is pickled but the results). The workers drop the store lock and die with
    this process (store/pool.py)."""
    from ..store.pool import worker_pool

    env = environment(templates)
    for name in ("project.html", "kernel.html"):  # compiled here once, then forked into every worker
        env.get_template(name)
    parts = workers * 4
    everything = [(name, [r for r in records if r.filename not in hidden]) for name, records in catalog.projects()]
    _CHUNKS[:] = [everything[i::parts] for i in range(parts) if everything[i::parts]]
    written: set[str] = set()
    try:
        with worker_pool(workers) as pool:
            futures = [pool.submit(_render_chunk, i, out, templates, base_url, labels) for i in range(len(_CHUNKS))]
            for future in futures:
                paths, entries, written_stats = future.result()
                written |= paths
                projects.update(entries)
                stats.update(written_stats)
    finally:
        _CHUNKS.clear()
    return written


def index_store(
    store: Location | str | Path, out: Path, templates: Path | None, base_url: str, damaged: list[str] | None = None
) -> tuple[int, IndexResult]:
    """Bring the store's catalog and then the index in ``out`` up to date; (number of records, result).

    Each record left out (damaged, invalid, without its wheel) adds one line to ``damaged``.
    """
    count, result, _ = index_with_adoption(store, out, templates, base_url, (), damaged=damaged)
    return count, result


def _catalog_note(catalog: Catalog, warnings: list[str] | None) -> None:
    if catalog.note is not None and warnings is not None:
        warnings.append(f"warning: {catalog.note}")


def index_with_adoption(
    store: Location | str | Path, out: Path, templates: Path | None, base_url: str, wheels: tuple[Path, ...],
    kernels: Iterable[str] = (), damaged: list[str] | None = None, allow_kernel_names: bool = False,
    rescan: bool = False, repair: bool = False, notes: list[str] | None = None,
) -> tuple[int, IndexResult, list[tuple[Path, Any]]]:  # fmt: skip
    """Adopt the wheels of ``wheels`` folders (local stores only), sync the catalog, build the index.

    Adoption refuses wheels of the store's kernel projects and of ``kernels`` (the configured ones) unless
    ``allow_kernel_names``. Returns (number of records, index result, [(folder, its AdoptResult)]); records
    left out add one line each to ``damaged``. ``rescan``: read and check every record, and render and compare
    every page, even when ``files/`` and the pages look unchanged (store/catalog.py ``refresh``). A catalog found
    damaged at any step (a row that fails the record checks, a file SQLite finds malformed) is named in one line
    of ``notes`` and rebuilt from the records in the same run; any other SQLite error is Unreachable (exit 4).
    Every record's wheel and ``.metadata`` are compared with it (store/filecheck.py): what cannot be put right
    adds a line to ``damaged``, what was (a ``.metadata`` written again, with ``repair`` a record of a changed
    wheel) a line to ``notes``.
    """
    adopted: list[tuple[Path, Any]] = []
    loc = Location.of(store)
    use_withdrawals(read_withdrawals(loc))  # project statuses, a prune under way (store/status.py, retain.py)
    if loc.local is None:
        count, result = _index_s3(loc.url, out, templates, base_url, damaged, rescan, notes, allow_kernel_names)
        return count, result, adopted
    root = loc.local
    if wheels:
        (root / FILES).mkdir(parents=True, exist_ok=True)
    try:
        catalog = local_catalog(root)
    except sqlite3.DatabaseError as exc:  # Catalog() rebuilds a damaged file itself: this is another error
        raise sqlite_problem(os.fspath(root / FILES / CATALOG_FILE), exc) from None
    try:
        _catalog_note(catalog, notes)
        lines: tuple[list[str], list[str]] = ([], [])

        def attempt(again: bool) -> tuple[int, IndexResult]:
            lines[0].clear()  # this attempt's lines, kept only if it holds up
            lines[1].clear()
            return _index_local(root, out, catalog, templates, base_url, wheels, adopted, kernels, lines[0],
                                lines[1], allow_kernel_names, rescan or again, repair)  # fmt: skip

        def warn(line: str) -> None:
            if notes is not None:
                notes.append(f"warning: {line}")

        count, index = rebuilt(catalog, attempt, warn)
        if damaged is not None:
            damaged.extend(lines[0])
        if notes is not None:
            notes.extend(lines[1])
        return count, index, adopted
    finally:
        catalog.close()


def _index_local(
    root: Path, out: Path, catalog: Catalog, templates: Path | None, base_url: str, wheels: tuple[Path, ...],
    adopted: list[tuple[Path, Any]], kernels: Iterable[str], damaged: list[str], notes: list[str],
    allow_kernel_names: bool, rescan: bool, repair: bool,
) -> tuple[int, IndexResult]:  # fmt: skip
    """One attempt of ``index_with_adoption`` over a local store; ``adopted`` takes each folder adopted (a second
    attempt, over a rebuilt catalog, adopts only the folders the first did not reach)."""
    from ..store import filecheck

    files = root / FILES
    before = catalog.generation()
    listed = not rescan and filecheck.unchanged(files, catalog)  # before this run's adoption writes there
    # one listing (or none, when files/ is as the catalog last saw it) serves adoption and the catalog
    gaps = Gaps(os.fspath(files))
    listing, touched = refresh(catalog, files, damaged, rescan, gaps)
    known = json.loads(catalog.meta("variants") or "{}")  # labels already mapped to variants
    count = len(known)
    runs = []
    if wheels:
        from . import folders
    done = {folder for folder, _result in adopted}
    for folder in wheels:
        if folder in done:
            continue
        run = folders.adopt_folder(root, folder, catalog, listing, known, kernels, allow_kernel_names)
        adopted.append((folder, run.result))
        runs.append(run)
        changed = catalog.apply_rows(run.result.rows, ())
        touched |= changed
        if listing is not None:
            listing.update((row[0], row[2]) for row in run.result.rows)  # wheel -> key
    # a wheel adopted again has its record back: not a gap any more
    damaged.extend(gaps.lines(name for _folder, result in adopted for name in result.adopted))
    if len(known) != count:
        catalog.set_meta("variants", json.dumps(known, sort_keys=True))
    found = filecheck.check_local(root, catalog, repair, listed)
    hidden = refuse_lookalikes(catalog, allow_kernel_names, damaged)
    index = build_index(out, catalog, templates, base_url, None if rescan else before, touched | found.touched,
                        rescan, notes, hidden)  # fmt: skip
    _found(found, damaged, notes)
    filecheck.keep(files, catalog, found)
    if wheels:  # after rendering: by now the folder's last change is a clock tick old (see folder_state)
        settled(catalog, files)
        for run in runs:
            folders.remember(catalog, run)
    return catalog.count(), index


def _index_s3(
    url: str, out: Path, templates: Path | None, base_url: str, damaged: list[str] | None, rescan: bool,
    warnings: list[str] | None, allow_kernel_names: bool,
) -> tuple[int, IndexResult]:  # fmt: skip
    """``index_with_adoption`` for an ``s3://`` store: its catalog object brought up to date, then the pages."""
    from ..publish.linked import STORE_FILE
    from ..store import filecheck
    from ..store.s3 import S3Store

    s3 = S3Store(url)
    try:
        remote, generation, changed = s3.catalog(rescan)
    except sqlite3.DatabaseError as exc:  # Catalog() rebuilds a damaged file itself: this is another error
        raise sqlite_problem(url, exc) from None
    _catalog_note(remote, warnings)
    write_bytes(out / STORE_FILE, json.dumps({"store": url}).encode())  # where publish finds the wheels
    lines: list[str] = []  # what the attempt that holds up finds

    def attempt(again: bool) -> tuple[FileCheck, IndexResult]:
        lines.clear()
        touched = changed
        if again:  # the catalog, emptied, made again from the records
            s3.unsaved = True
            touched = s3.refresh(remote, True)
        found = filecheck.check_s3(s3, remote)
        hidden = refuse_lookalikes(remote, allow_kernel_names, lines)
        result = build_index(out, remote, templates, base_url, None if again else generation,
                             touched | found.touched, rescan or again, warnings, hidden)  # fmt: skip
        return found, result

    def warn(line: str) -> None:
        if warnings is not None:
            warnings.append(f"warning: {line}")

    try:
        found, result = rebuilt(remote, attempt, warn)
        s3.damaged.extend(lines)
        _found(found, damaged, warnings)
        s3.save(remote)
        return remote.count(), result
    finally:
        if damaged is not None:
            damaged.extend(s3.damaged)
        remote.close()


def refuse_lookalikes(catalog: Catalog, allow: bool, damaged: list[str] | None) -> frozenset[str]:
    """The adopted wheels of projects the store holds built kernels of, left out of the index at every run
    (whichever came first), each named in ``damaged``; none with ``allow`` (``--allow-kernel-names``)."""
    if allow:
        return frozenset()
    found = catalog.lookalikes()
    if damaged is not None:
        damaged.extend(f"{wheel}: an adopted wheel of {project!r}, a project this store builds from a kernel, left "
                       "out of the index (it would sit beside the kernel in every install); remove it from the store, "
                       "or pass --allow-kernel-names (allow-kernel-names = true) if you mean to list it"
                       for wheel, project in found)
    return frozenset(wheel for wheel, _ in found)


def _found(found: FileCheck, damaged: list[str] | None, notes: list[str] | None) -> None:
    if damaged is not None:
        damaged.extend(found.errors)
    if notes is not None:
        notes.extend(found.notes)


def run_index(args: IndexArgs) -> int:
    """Adopt ``--wheels`` folders, then render the index of the store into the index root (under the store lock)."""
    opts = resolve_paths(args)
    root = opts.store.local
    if root is not None and not root.exists() and not opts.wheels:
        raise UsageError(f"no store at {root}: run `kernel-factory build` first, check --store (or `store` in the "
                         "config), or pass --wheels DIR to index a folder of wheels")
    if root is None or (root.is_dir() and not os.access(root, os.W_OK)):
        return _run_index(opts)  # S3, or a read-only folder: no writer to wait for
    from ..store import open_store

    with open_store(opts.store, lock_wait_s=opts.lock_wait_s).lock():
        return _run_index(opts)


def _run_index(opts: IndexOptions) -> int:
    refused = 0
    adopted: list[str] = []
    present: list[str] = []
    skipped: list[str] = []
    not_indexed: list[str] = []
    if opts.repair:
        from ..store.adopt import repair_store

        assert opts.store.local is not None  # resolve_paths refuses --repair for a remote store
        repaired, failed = repair_store(opts.store.local)
        report.info(f"repaired {len(repaired)} record(s)"
                    + (f", {len(failed)} could not be repaired" if failed else ""))
        refused += len(failed)
    if opts.wheels and opts.store.local is None:
        raise UsageError(f"--wheels needs a local store folder, not {opts.store}; adopt into a folder first")
    damaged: list[str] = []
    notes: list[str] = []
    count, index, results = index_with_adoption(
        opts.store, opts.out, opts.templates, opts.base_url, opts.wheels, opts.kernel_names, damaged,
        opts.allow_kernel_names, opts.rescan, opts.repair, notes,
    )  # fmt: skip
    for line in notes:
        if line.startswith("warning: "):
            report.warn(line.removeprefix("warning: "))  # shown under -q too
        else:
            report.info(line, stderr=True)
    for folder, result in results:
        refused += len(result.refused)
        adopted += result.adopted
        present += result.present
        skipped += result.refused
        report.info(
            f"adopted {len(result.adopted)} wheel(s) from {folder}, {len(result.present)} already in the store"
            + (f", {len(result.refused)} refused" if result.refused else "")
        )
        if result.not_wheels:
            not_indexed += result.not_wheels
            report.warn(f"{folder}: {len(result.not_wheels)} file(s) not indexed (only wheels are): "
                        f"{', '.join(result.not_wheels)}; build wheels of them (`pip wheel --no-deps FILE`) and put "
                        "those in the folder")  # fmt: skip
    for line in damaged:
        report.error(line)
    report.result(  # the result line: kept under -q (on stderr under --json)
        f"index: {count} wheel(s), {index.pages} page(s): {index.written} written, "
        f"{index.unchanged} unchanged, {index.removed} removed -> {opts.out}"
        + (f"; {len(damaged)} record(s) left out" if damaged else "")
    )
    if opts.as_json:
        doc = {
            "store": opts.store.display,
            "out": str(opts.out),
            "records": count,
            "pages": index.pages,
            "written": index.written,
            "unchanged": index.unchanged,
            "removed": index.removed,
            "adopted": adopted,
            "already_in_store": sorted(present),
            "skipped": skipped,
            "not_indexed": not_indexed,
            "damaged": damaged,
        }
        report.document(doc)
    if refused:
        report.error(f"{refused} wheel(s) refused (see the warnings above); fix or remove them")
    return EXIT_REFUSED if refused or damaged else EXIT_OK
