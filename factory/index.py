"""``kernel-factory index``: the store's records -> the static index (PEP 503, 691, 658, 700).

Pages are a pure function of the records (factory/index_pages.py). Writing is
incremental and atomic: project pages first, then the roots and the landing
page; a page whose inputs did not change is not rendered again, a page whose
bytes did not change is not written, and pages of projects or variants that
are gone are removed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from factory.atomic import TMP_PREFIX, write_bytes
from factory.errors import EXIT_OK, EXIT_REFUSED, UsageError
from factory.index_pages import DEFAULT_BASE_URL, Page, environment, fingerprint, plan, render_page
from factory.index_records import load_records
from factory.store import Record

STATE_FILE = ".index-state.json"  # in the index root: page path -> digest of its inputs
PAGE_DIRS = ("simple", "variants")


@dataclass(frozen=True)
class IndexOptions:
    store: str
    out: Path
    wheels: tuple[Path, ...]
    templates: Path | None
    base_url: str


@dataclass(frozen=True)
class IndexResult:
    pages: int
    written: int
    unchanged: int
    removed: int


def resolve_paths(ns: argparse.Namespace) -> IndexOptions:
    """Store, index root, adopted folders, templates and base URL from the command line (defaults: ./public)."""
    store = getattr(ns, "store", None) or "public"
    out = getattr(ns, "out", None) or (None if "://" in store else store)
    if out is None:
        raise UsageError(f"the store {store} is not a local folder; give the index root with --out DIR")
    templates = getattr(ns, "templates", None)
    if templates is not None and not Path(templates).is_dir():
        raise UsageError(f"--templates {templates}: no such folder; give a folder of templates to override")
    wheels = tuple(Path(w) for w in (getattr(ns, "wheels", None) or ()))
    for w in wheels:
        if not w.is_dir():
            raise UsageError(f"--wheels {w}: no such folder; give a folder that holds .whl files")
    base_url = (getattr(ns, "base_url", None) or DEFAULT_BASE_URL).rstrip("/")
    return IndexOptions(store, Path(out), wheels, Path(templates) if templates else None, base_url)


def _order(path: str) -> tuple[int, str]:
    """Project pages first, then the simple roots, then the landing page."""
    if path == "index.html":
        return (2, path)
    depth = path.count("/")
    is_root = (path.startswith("simple/") and depth == 1) or (path.startswith("variants/") and depth == 3)
    return (1 if is_root else 0, path)


def write_index(out: Path, pages: dict[str, bytes]) -> tuple[int, int]:
    """Write the pages whose bytes differ, project pages first; (written, unchanged)."""
    written = unchanged = 0
    for path in sorted(pages, key=_order):
        if write_bytes(out / path, pages[path]):
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


def _record_digests(records: list[Record]) -> dict[str, str]:
    return {r.filename: hashlib.sha256(repr(r).encode()).hexdigest()[:32] for r in records}


def _page_digest(page: Page, digests: dict[str, str], fp: str) -> str:
    h = hashlib.sha256(f"{fp}\0{page.path}\0{page.kind}\0".encode())
    h.update("\0".join(page.projects).encode())
    h.update("\0".join(digests[r.filename] for r in page.records).encode())
    return h.hexdigest()


def _read_state(out: Path) -> dict[str, str]:
    try:
        data = json.loads((out / STATE_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    pages = data.get("pages") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in pages.items()} if isinstance(pages, dict) else {}


def build_index(out: Path, records: list[Record], templates: Path | None, base_url: str) -> IndexResult:
    """Render and write only what changed since the last run (inputs tracked in ``.index-state.json``)."""
    env = environment(templates)
    fp = fingerprint(env, base_url)
    digests = _record_digests(records)
    pages = sorted(plan(records), key=lambda p: _order(p.path))
    old = _read_state(out)
    new: dict[str, str] = {}
    written = unchanged = 0
    for page in pages:
        digest = _page_digest(page, digests, fp)
        new[page.path] = digest
        if old.get(page.path) == digest and (out / page.path).is_file():
            unchanged += 1
        elif write_bytes(out / page.path, render_page(env, page, base_url)):
            written += 1
        else:
            unchanged += 1
    removed = remove_stale(out, new)
    if new != old:
        state = {"schema": 1, "pages": new}
        write_bytes(out / STATE_FILE, json.dumps(state, sort_keys=True, separators=(",", ":")).encode())
    return IndexResult(len(pages), written, unchanged, removed)


def run_index(ns: argparse.Namespace) -> int:
    """Adopt ``--wheels`` folders, then render the index of the store into the index root."""
    opts = resolve_paths(ns)
    refused = 0
    if opts.wheels:
        if "://" in opts.store:
            raise UsageError(f"--wheels needs a local store folder, not {opts.store}; adopt into a folder first")
        from factory.adopt import adopt

        for folder in opts.wheels:
            adopted = adopt(Path(opts.store), folder)
            refused += len(adopted.refused)
            print(
                f"adopted {len(adopted.adopted)} wheel(s) from {folder}, {len(adopted.present)} already in the store"
                + (f", {len(adopted.refused)} refused" if adopted.refused else "")
            )
    records = load_records(opts.store)
    result = build_index(opts.out, records, opts.templates, opts.base_url)
    print(
        f"index: {len(records)} wheel(s), {result.pages} page(s): {result.written} written, "
        f"{result.unchanged} unchanged, {result.removed} removed -> {opts.out}"
    )
    if refused:
        print(f"error: {refused} wheel(s) refused (see the warnings above); fix or remove them", file=sys.stderr)
        return EXIT_REFUSED
    return EXIT_OK
