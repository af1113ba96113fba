"""A first index of many records: read, checked and rendered in one pass per share of the projects.

A store whose catalog has no rows (records made elsewhere, a catalog deleted,
damaged or of an older schema) has every record read. Checking them costs more
CPU than rendering their pages, so neither is left to one core. ``Shards``
forks one worker per core, each given a share of the projects (by the name in
each wheel's file name). Each worker reads and checks the records of its share
(store/check.py: everything but the variant by kernels' parser), compares each
wheel's size with its record (the file check's first look at a wheel), sends
the main process their catalog rows, the lines of those left out and the
wheels' stat keys, and keeps the records. The main process imports kernels'
parser meanwhile (~0.3 s of CPU) and checks each variant found, ``start``s the
workers rendering their projects' pages from the records they kept, with the
variant labels of all the rows, and writes the rows into the catalog; the run
goes on as after any sync (adoption, the file check and the look-alikes see
the catalog). build_index ``collect``s their pages; the projects whose rows
changed since they were read (``stale``: adopted wheels, wheels the file check
dropped, variants kernels' parser refused, and those holding a look-alike) are
rendered again by the main process from the catalog. With other labels by then
(a variant adopted in the same run), their pages are not used and every page
is rendered again.

The workers are those of the store's other pools (store/pool.py ``init_worker``):
they drop the store lock and die with the main process; the pages they write go
under temporary names renamed into place.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import traceback
from collections.abc import Iterable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ..record import Record
from ..store import check
from ..store.catalog import Row, catalog_row, label_backends, read_local, record_key
from ..store.pool import init_worker
from .command import PARALLEL_RECORDS, render_projects
from .pages import environment


class WorkerFailed(RuntimeError):
    """A worker ended without its answer (killed, or out of memory)."""


def _answer(conn: Connection) -> Any:
    """A worker's next answer; what it raised is raised here."""
    try:
        kind, value = conn.recv()
    except EOFError:
        raise WorkerFailed("a worker of the index ended without its answer (killed, or out of memory?); "
                           "run the index again") from None  # fmt: skip
    if kind == "error":
        raise value
    return value


def _send_error(conn: Connection, exc: BaseException) -> None:
    try:
        conn.send(("error", exc))
    except (pickle.PicklingError, TypeError, AttributeError):
        conn.send(("error", RuntimeError("".join(traceback.format_exception(exc)))))


def _worker(
    conn: Connection, parent: int, files: Path, wheels: list[str], listing: dict[str, str], out: Path,
    templates: Path | None, base_url: str,
) -> None:  # fmt: skip
    """Read and check ``wheels``' records, send their rows; then render their projects when asked."""
    try:
        init_worker(parent)
        lines: list[str] = []
        names: dict[str, str] = {}
        rows: list[Row] = []
        variants: dict[tuple[str, str | None], list[str]] = {}
        groups: dict[str, list[Record]] = {}
        checked: dict[str, tuple[str, str]] = {}
        prefix = os.path.join(files, "")
        for wheel, record, text in read_local(files, lines, known_variants=False)(wheels):
            if record is None:
                continue
            try:  # the file check's first look at a wheel (store/filecheck.py), done here in parallel
                st = os.stat(prefix + wheel)
            except FileNotFoundError:
                st = None
            if st is not None and st.st_size == record.size:
                checked[wheel] = (record_key(st), listing[wheel])
            row = catalog_row(listing[wheel], record, names, text)
            rows.append(row)
            groups.setdefault(row[1], []).append(record)
            if record.variant is not None:
                variants.setdefault((record.variant, record.label), []).append(wheel)
        conn.send(("rows", (rows, lines, variants, checked)))
        del rows
        env = environment(templates)  # compiled while the main process goes on (render_projects gets it again)
        for name in ("project.html", "kernel.html"):
            env.get_template(name)
        labels = conn.recv()
        todo = [(name, groups[name]) for name in sorted(groups)]
        conn.send(("pages", render_projects(out, templates, base_url, labels, todo)))
    except BaseException as exc:  # noqa: BLE001 - the main process raises it
        _send_error(conn, exc)
    finally:
        conn.close()


class Shards:
    """The workers of a first index (see the module docstring); ``read_rows`` is a ``refresh`` row reader."""

    def __init__(self, files: Path, out: Path, templates: Path | None, base_url: str, workers: int) -> None:
        self.files, self.out, self.templates, self.base_url, self.workers = files, out, templates, base_url, workers
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        self.stale: set[str] = set()  # projects whose rows changed since the workers read them
        self.checked: dict[str, tuple[str, str]] = {}  # wheel -> (its stat key, its record's key): its size
        # is its record's (what the file check's first look at a wheel compares; store/filecheck.py)
        self.labels: dict[str, str | None] | None = None  # the labels the workers render with, once started
        self.step = "reading"  # then "rendering" (started), "done" (pages collected)

    def read_rows(self, wheels: list[str], listing: dict[str, str], damaged: list[str]) -> list[Row] | None:
        """The rows of ``wheels``' records, read and checked by the workers; those left out add one line each to
        ``damaged`` (in the order of their names, as a read in one process gives them). None for fewer than
        PARALLEL_RECORDS (index/command.py): the caller reads them."""
        if len(wheels) < PARALLEL_RECORDS:
            return None
        shares: dict[str, list[str]] = {}
        for wheel in wheels:
            shares.setdefault(check.wheel_project(wheel) or "", []).append(wheel)
        parts: list[list[str]] = [[] for _ in range(self.workers)]
        for project in sorted(shares, key=lambda p: (-len(shares[p]), p)):  # the largest first, to the least loaded
            min(parts, key=len).extend(shares[project])
        ctx = multiprocessing.get_context("fork")  # the workers get ``listing`` as the fork gives it
        for part in parts:
            part.sort()
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_worker, daemon=True, args=(theirs, os.getpid(), self.files, part, listing,
                                                                  self.out, self.templates, self.base_url))  # fmt: skip
            proc.start()
            theirs.close()
            self.conns.append(mine)
            self.procs.append(proc)
        check.variant_problem("torch-universal", None)  # kernels' parser imported while the workers read
        rows: list[Row] = []
        lines: list[str] = []
        found: dict[tuple[str, str | None], list[str]] = {}
        for conn in self.conns:
            part_rows, part_lines, part_variants, part_checked = _answer(conn)
            rows += part_rows
            lines += part_lines
            self.checked.update(part_checked)
            for pair, names in part_variants.items():
                found.setdefault(pair, []).extend(names)
        bad: set[str] = set()
        for (variant, label), names in found.items():
            why = check.variant_problem(variant, label)
            if why:
                bad.update(names)
                lines += [check.invalid(os.path.join(self.files, f"{w}.json"), why) for w in names]
        damaged.extend(sorted(lines))  # each starts with its record's path: the order of the wheels' names
        self.stale = {row[1] for row in rows if row[0] in bad}
        rows = sorted(row for row in rows if row[0] not in bad)  # in the table's order: inserted the quickest
        self.start(label_backends((row[3], row[5], row[4]) for row in rows))  # the catalog's, once it holds them
        return rows

    def changed(self, projects: Iterable[str]) -> None:
        """Rows of these projects changed since the workers read them: the main process renders them."""
        self.stale.update(projects)

    def start(self, labels: dict[str, str | None]) -> None:
        """Each worker renders the pages of every project it holds, with the store's variant ``labels``, while
        the main process goes on (adoption, the file check)."""
        for conn in self.conns:
            conn.send(labels)
        self.labels, self.step = labels, "rendering"

    def collect(
        self, labels: dict[str, str | None], hidden: frozenset[str]
    ) -> tuple[set[str], dict[str, Any], dict[str, tuple[int, int]], set[str]] | None:  # fmt: skip
        """What the workers rendered: (the pages written, their projects' state entries, each page's size and
        mtime, the projects to render again: stale, or holding a wheel ``hidden``); None when they rendered
        nothing, or for other ``labels`` than these (a variant adopted since): then every page is rendered
        again."""
        if self.step != "rendering" or self.labels != labels:
            self.close()
            return None
        paths: set[str] = set()
        entries: dict[str, Any] = {}
        stats: dict[str, tuple[int, int]] = {}
        for conn in self.conns:
            part_paths, part_entries, part_stats = _answer(conn)
            paths |= part_paths
            entries.update(part_entries)
            stats.update(part_stats)
        self.step = "done"
        self.close()
        return paths, entries, stats, self.stale | {check.wheel_project(w) or "" for w in hidden}

    def close(self) -> None:
        """End the workers: those still reading or rendering are killed (pages go under temporary names, renamed
        into place when whole: the next run removes what is left)."""
        for conn, proc in zip(self.conns, self.procs, strict=True):
            if self.step != "done":
                proc.kill()
            conn.close()
            proc.join()
        self.conns, self.procs = [], []
