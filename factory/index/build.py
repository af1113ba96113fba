"""``kernel-factory index``: the store's records -> the static index (PEP 503, 691, 658, 700).

Pages are a pure function of the records (factory/index_pages.py). Writing is
incremental and atomic: project pages first, then the roots and the landing
page; a page whose inputs did not change is not rendered again, a page whose
bytes did not change is not written, and pages of projects or variants that
are gone are removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..atomic import TMP_PREFIX, named, write_bytes
from ..config import Flags, Location
from ..errors import EXIT_OK, EXIT_REFUSED, UsageError
from ..record import Record
from ..store.catalog import load_local_keyed, load_records
from .pages import DEFAULT_BASE_URL, Page, environment, fingerprint, plan, render_page

STATE_FILE = ".index-state.json"  # in the index root: page path -> [digest of its inputs, size]
STATE_SCHEMA = 2
PAGE_DIRS = ("simple", "variants")


@dataclass(frozen=True)
class IndexArgs:
    """``index``: the options' flags and the index's own."""

    flags: Flags
    out: str | None = None
    wheels: tuple[str, ...] = ()
    templates: str | None = None
    repair: bool = False
    base_url: str | None = None
    json: bool = False  # one JSON document on stdout (docs/json.md); messages go to stderr


@dataclass(frozen=True)
class IndexOptions:
    store: Location
    out: Path
    wheels: tuple[Path, ...]
    templates: Path | None
    base_url: str
    repair: bool = False
    allow_kernel_names: bool = False
    kernel_names: frozenset[str] = frozenset()  # the configured kernels' project names (guessed from the repo)
    as_json: bool = False


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
    if args.out and opts.store == Location.parse(config.DEFAULT_STORE):  # no store named: --out alone is the site
        store = Location.parse(str(Path(args.out).resolve()))
    out = args.out or opts.index_out or store.local
    if out is None:
        raise UsageError(f"the store {store} is not a local folder; give the index root with --out DIR")
    templates = args.templates or opts.templates
    if templates is not None and not Path(templates).is_dir():
        raise UsageError(f"--templates {templates}: no such folder; give a folder of templates to override")
    wheels = tuple(Path(w) for w in args.wheels)
    for w in wheels:
        if not w.is_dir():
            raise UsageError(f"--wheels {w}: no such folder; give a folder that holds .whl files")
    base_url = (args.base_url or opts.base_url or DEFAULT_BASE_URL).rstrip("/")
    repair = args.repair
    if repair and not store.is_local:
        raise UsageError(
            f"--repair needs a local store folder, not {store}; delete the damaged records and rerun build"
        )
    from packaging.utils import canonicalize_name

    names = frozenset(canonicalize_name(Path(k.repo_id or k.repo).name) for k in opts.kernels)
    as_json = args.json
    return IndexOptions(store, Path(out), wheels, Path(templates) if templates else None, base_url, repair,
                        opts.allow_kernel_names, names, as_json)


def _order(path: str) -> tuple[int, str]:
    """Project pages first, then the simple roots, then the landing page."""
    if path == "index.html":
        return (2, path)
    depth = path.count("/")
    is_root = (path.startswith("simple/") and depth == 1) or (path.startswith("variants/") and depth == 3)
    return (1 if is_root else 0, path)


def write_page(path: Path, data: bytes) -> bool:
    """Write one page atomically unless it already holds ``data``; True if written.

    Pages are renamed into place (readers never see half a page) but not fsynced one
    by one: thousands of fsyncs dominate a full build. The state file, written last,
    records each page's size, so a page torn by a crash is rendered again.
    """
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{TMP_PREFIX}{os.getpid()}-{path.name}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        named(exc, path)
        raise
    return True


def write_index(out: Path, pages: dict[str, bytes]) -> tuple[int, int]:
    """Write the pages whose bytes differ, project pages first; (written, unchanged)."""
    written = unchanged = 0
    for path in sorted(pages, key=_order):
        if write_page(out / path, pages[path]):
            written += 1
        else:
            unchanged += 1
    return written, unchanged


def remove_stale(out: Path, keep: Iterable[str]) -> int:
    """Remove pages under simple/ and variants/ that are not in ``keep``, and folders left empty."""
    keep_set = set(keep)
    removed = 0
    for top in PAGE_DIRS:
        root = out / top
        if not root.is_dir():
            continue
        for dirpath, _dirs, files in os.walk(root, topdown=False):
            for name in files:
                rel = Path(dirpath, name).relative_to(out).as_posix()
                if name.startswith(TMP_PREFIX) or (name in ("index.html", "index.json") and rel not in keep_set):
                    os.unlink(os.path.join(dirpath, name))
                    removed += 1
            if not os.listdir(dirpath):
                os.rmdir(dirpath)
    return removed


def record_keys(records: list[Record]) -> dict[str, str]:
    """A key per wheel that changes when anything in its record does."""
    return {r.filename: hashlib.sha256(repr(r).encode()).hexdigest()[:32] for r in records}


def _page_digest(page: Page, keys: dict[str, str], fp: str) -> str:
    h = hashlib.sha256(f"{fp}\0{page.path}\0{page.kind}\0".encode())
    h.update("\0".join(page.projects).encode())
    h.update("\0".join(keys[r.filename] for r in page.records).encode())
    return h.hexdigest()


def _read_state(out: Path) -> dict[str, list[Any]]:
    try:
        data = json.loads((out / STATE_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != STATE_SCHEMA or not isinstance(data.get("pages"), dict):
        return {}
    return data["pages"]  # type: ignore[no-any-return]


def _unchanged(out: Path, path: str, digest: str, old: list[Any] | None) -> bool:
    if old is None or old[0] != digest:
        return False
    try:
        return bool((out / path).stat().st_size == old[1])
    except FileNotFoundError:
        return False


def build_index(
    out: Path, records: list[Record], templates: Path | None, base_url: str, keys: dict[str, str] | None = None
) -> IndexResult:
    """Render and write only what changed since the last run (inputs tracked in ``.index-state.json``).

    ``keys`` (wheel file name -> a key that changes with its record) defaults to a hash of each record.
    """
    env = environment(templates)
    fp = fingerprint(env, base_url)
    keys = keys if keys is not None else record_keys(records)
    pages = sorted(plan(records), key=lambda p: _order(p.path))
    old = _read_state(out)
    new: dict[str, list[Any]] = {}
    written = unchanged = 0
    for page in pages:
        digest = _page_digest(page, keys, fp)
        if _unchanged(out, page.path, digest, old.get(page.path)):
            new[page.path] = old[page.path]
            unchanged += 1
            continue
        data = render_page(env, page, base_url)
        if write_page(out / page.path, data):
            written += 1
        else:
            unchanged += 1
        new[page.path] = [digest, len(data)]
    removed = remove_stale(out, new)
    if new != old:
        state = {"schema": STATE_SCHEMA, "pages": new}
        write_bytes(out / STATE_FILE, json.dumps(state, sort_keys=True, separators=(",", ":")).encode())
    return IndexResult(len(pages), written, unchanged, removed)


def index_store(
    store: Location | str | Path, out: Path, templates: Path | None, base_url: str, damaged: list[str] | None = None
) -> tuple[int, IndexResult]:
    """List the store's valid records and bring the index in ``out`` up to date; (number of records, result).

    Each record left out (damaged, invalid, without its wheel) adds one line to ``damaged``.
    """
    keys: dict[str, str] | None = None
    loc = store if isinstance(store, Location) else Location.parse(store)
    if loc.local is None:
        records = load_records(loc, damaged)
    else:
        records, keys = load_local_keyed(loc.local, damaged)
    return len(records), build_index(out, records, templates, base_url, keys)


def run_index(args: IndexArgs) -> int:
    """Adopt ``--wheels`` folders, then render the index of the store into the index root (under the store lock)."""
    opts = resolve_paths(args)
    root = opts.store.local
    if root is None or (root.is_dir() and not os.access(root, os.W_OK)):
        return _run_index(opts)  # S3, or a read-only folder: no writer to wait for
    from ..store import open_store

    with open_store(opts.store).lock():
        return _run_index(opts)


def _kernel_projects(store: Location) -> set[str]:
    """Normalised names of the kernels the store holds (built by the factory, not adopted)."""
    from packaging.utils import canonicalize_name

    return {canonicalize_name(r.name) for r in load_records(store, []) if r.kind == "kernel"}


def _run_index(opts: IndexOptions) -> int:
    say = partial(print, file=sys.stderr if opts.as_json else sys.stdout)  # --json: stdout holds the document only
    refused = 0
    adopted: list[str] = []
    present: list[str] = []
    skipped: list[str] = []
    if opts.repair:
        from ..store.adopt import repair_store

        assert opts.store.local is not None  # resolve_paths refuses --repair for a remote store
        repaired, failed = repair_store(opts.store.local)
        say(f"repaired {len(repaired)} record(s)" + (f", {len(failed)} could not be repaired" if failed else ""))
        refused += len(failed)
    if opts.wheels:
        if opts.store.local is None:
            raise UsageError(f"--wheels needs a local store folder, not {opts.store}; adopt into a folder first")
        from ..store.adopt import adopt

        kernels = set() if opts.allow_kernel_names else _kernel_projects(opts.store) | opts.kernel_names
        for folder in opts.wheels:
            result = adopt(opts.store.local, folder, kernels)
            refused += len(result.refused)
            adopted += result.adopted
            present += result.present
            skipped += result.refused
            say(
                f"adopted {len(result.adopted)} wheel(s) from {folder}, {len(result.present)} already in the store"
                + (f", {len(result.refused)} refused" if result.refused else "")
            )
    damaged: list[str] = []
    count, index = index_store(opts.store, opts.out, opts.templates, opts.base_url, damaged)
    for line in damaged:
        print(f"error: {line}", file=sys.stderr)
    say(
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
            "already_in_store": present,
            "skipped": skipped,
            "damaged": damaged,
        }
        print(json.dumps(doc, indent=2))
    if refused:
        print(f"error: {refused} wheel(s) refused (see the warnings above); fix or remove them", file=sys.stderr)
    return EXIT_REFUSED if refused or damaged else EXIT_OK
