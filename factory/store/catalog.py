"""The catalog: a store's records in one SQLite file, cheap to load and to diff against a listing.

It is a cache: the records (``files/<wheel>.json``) stay the truth, and a
catalog that is missing, damaged or of another schema is rebuilt from them.
A local store keeps it at ``files/.catalog.sqlite``; an ``s3://`` store keeps
the same file as an object there (store/s3.py).

Each row holds a wheel's file name, its project, a key that changes whenever
its record does (local: the record file's inode, mtime and size, since records
are renamed into place; S3: the record object's ETag) and the record's fields.
``sync`` compares a listing (wheel -> key) against the rows, reads only the
records that are new or changed, drops the rows of those gone, and gives the
catalog a new generation, all in one transaction. The index keeps the
generation its pages show (index/build.py): the same generation means nothing
to render.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from packaging.utils import canonicalize_name

from ..atomic import LinkRefused, real_folder, refuse_link, unique
from ..config import Location
from ..record import FIELDS, FILES, Record
from . import check

CATALOG_FILE = ".catalog.sqlite"
TICK_NS = 20_000_000  # longer than a kernel clock tick (1/HZ, HZ >= 100): file times may be that coarse
FILES_STATE = "files_state"  # meta: files/'s stat when the catalog last matched its listing ("" if it did not)
_PROJECT = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)*")  # a normalised project name: safe as a folder name
SCHEMA = "2:" + ",".join(FIELDS)  # a new field makes a new schema: the catalog is rebuilt
_row_json = json.JSONEncoder(separators=(",", ":")).encode  # json.dumps(row, separators=...), one encoder

_TABLES = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE records (
    filename TEXT PRIMARY KEY, project TEXT NOT NULL, key TEXT NOT NULL,
    label TEXT, backend TEXT, noarch INTEGER NOT NULL, row TEXT NOT NULL
);
CREATE INDEX records_project ON records (project, filename);
CREATE INDEX records_label ON records (label, noarch, backend);
"""


Row = tuple[str, str, str, "str | None", "str | None", int, str]  # a row of the records table


def catalog_row(key: str, record: Record, names: dict[str, str] | None = None) -> Row:
    """The records table's row of ``record`` (key: see the module docstring); ``names`` caches projects."""
    project = names.get(record.name) if names is not None else None
    if project is None:
        project = canonicalize_name(record.name)
        if names is not None:
            names[record.name] = project
    return (record.filename, project, key, record.label, record.backend, int(record.framework == "torch-noarch"),
            _row_json(record.to_row()))  # fmt: skip


class Catalog:
    """One SQLite file (or ``:memory:``) of records; see the module docstring."""

    def __init__(self, path: str | Path = ":memory:", scratch: Path | None = None) -> None:
        """A catalog file, or one in memory; ``scratch``: a folder of the file's, removed on ``close``."""
        self.path = str(path)
        self.scratch = scratch
        self._keys: dict[str, str] | None = None
        try:
            self.db = self._open()
        except sqlite3.DatabaseError:  # not a database, or damaged: it is a cache, start again
            if self.path != ":memory:":
                Path(self.path).unlink(missing_ok=True)
            self.db = self._open()

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None)
        db.execute("PRAGMA synchronous=OFF")  # a cache: a torn file is detected and rebuilt
        db.execute("PRAGMA journal_mode=MEMORY")
        have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        schema = db.execute("SELECT value FROM meta WHERE name='schema'").fetchone() if "meta" in have else None
        if schema is None or schema[0] != SCHEMA:
            db.execute("BEGIN")
            for table in have:
                db.execute(f'DROP TABLE IF EXISTS "{table}"')
            for statement in _TABLES.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute("INSERT INTO meta VALUES ('schema', ?), ('generation', ?)", (SCHEMA, unique()))
            db.execute("COMMIT")
        return db

    def close(self) -> None:
        self.db.close()
        if self.scratch is not None:  # a catalog in a temporary folder (S3 stores)
            import shutil

            shutil.rmtree(self.scratch, ignore_errors=True)

    def generation(self) -> str:
        return str(self.db.execute("SELECT value FROM meta WHERE name='generation'").fetchone()[0])

    def meta(self, name: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE name=?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, name: str, value: str) -> None:
        """Keep a value beside the records (not a record: the generation stays); the file is not written when
        the value is already there."""
        if self.meta(name) != value:
            self.put_meta(name, value)

    def put_meta(self, name: str, value: str) -> None:
        """Write a value beside the records (not a record: the generation stays)."""
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, value))

    def keys(self) -> dict[str, str]:
        """Wheel file name -> key, for every row (read once per run, then kept up to date by ``apply``)."""
        if self._keys is None:
            self._keys = dict(self.db.execute("SELECT filename, key FROM records"))
        return self._keys

    def has(self, filename: str) -> bool:
        """Whether a wheel of that file name has a row."""
        if self._keys is not None:
            return filename in self._keys
        return self.db.execute("SELECT 1 FROM records WHERE filename = ?", (filename,)).fetchone() is not None

    def count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM records").fetchone()[0])

    def apply(self, upserts: Iterable[tuple[str, Record]], removed: Iterable[str]) -> set[str]:
        """Write new or changed records (key, record) and drop removed wheels in one transaction.

        Returns the projects touched (before and after), and gives the catalog a new generation if any.
        """
        names: dict[str, str] = {}  # display name -> project, computed once per name
        return self.apply_rows([catalog_row(key, record, names) for key, record in upserts], removed)

    def apply_rows(self, rows: list[Row], removed: Iterable[str]) -> set[str]:
        """``apply`` for rows made by ``catalog_row`` (adoption's workers make them, in parallel)."""
        touched = {row[1] for row in rows}
        removed = list(removed)
        db = self.db
        db.execute("BEGIN")
        try:
            listed = [*removed, *(r[0] for r in rows)]
            for i in range(0, len(listed), 500):  # the projects they were in, 500 names a query
                chunk = listed[i : i + 500]
                query = f"SELECT DISTINCT project FROM records WHERE filename IN ({','.join('?' * len(chunk))})"
                touched.update(project for (project,) in db.execute(query, chunk))
            db.executemany("DELETE FROM records WHERE filename=?", [(f,) for f in removed])
            db.executemany("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            if self._keys is not None:
                for filename in removed:
                    self._keys.pop(filename, None)
                self._keys.update((r[0], r[2]) for r in rows)
            if touched:
                db.execute("UPDATE meta SET value=? WHERE name='generation'", (unique(),))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            self._keys = None  # read again from the rolled-back table
            raise
        return touched

    def label_backends(self) -> dict[str, str | None]:
        """Every variant label -> its backend (that of its arch wheels, else of its noarch wheels)."""
        found: dict[str, str | None] = {}
        rows = self.db.execute(
            "SELECT label, noarch, MIN(backend) FROM records WHERE label IS NOT NULL GROUP BY label, noarch "
            "ORDER BY label, noarch DESC"
        )
        for label, _noarch, backend in rows:  # noarch first, so the arch wheels' backend wins
            found[label] = backend
        return found

    def projects(self, names: Iterable[str] | None = None) -> Iterator[tuple[str, list[Record]]]:
        """(project, its records sorted by file name), project by project in name order: all, or ``names``."""
        if names is None:
            rows: Iterable[tuple[str, str]] = self.db.execute(
                "SELECT project, row FROM records ORDER BY project, filename"
            )
        else:
            wanted = sorted(set(names))
            rows = (
                row
                for i in range(0, len(wanted), 500)
                for row in self.db.execute(
                    f"SELECT project, row FROM records WHERE project IN ({','.join('?' * len(wanted[i : i + 500]))}) "
                    "ORDER BY project, filename",
                    wanted[i : i + 500],
                )
            )
        project = ""
        texts: list[str] = []  # the project's rows, decoded together (one json.loads a project, not a row)
        valid = False
        for name, row in rows:
            if name != project:
                if texts:
                    yield project, _decoded(texts)
                project, texts = name, []
                # only store/check.py's records get here; never a path of an invalid name
                valid = _PROJECT.fullmatch(name) is not None
            if valid:
                texts.append(row)
        if texts:
            yield project, _decoded(texts)

    def kernel_projects(self, names: Iterable[str]) -> set[str]:
        """Those of ``names`` of which the store holds a built kernel, not only adopted wheels (one indexed query
        each)."""
        kind = f"json_extract(row, '$[{FIELDS.index('kind')}]') = 'kernel'"
        query = f"SELECT 1 FROM records WHERE project = ? AND {kind} LIMIT 1"
        return {name for name in names if self.db.execute(query, (name,)).fetchone() is not None}

    def lookalikes(self) -> list[tuple[str, str]]:
        """(wheel, project) of every adopted record of a project of which the store holds a built kernel, whichever
        came first, sorted. Asked once per catalog generation (the answer is kept in the meta table)."""
        generation = self.generation()
        kept = self.meta("lookalikes")
        if kept is not None and kept.startswith(f"{generation}\n"):
            return [(w, p) for w, p in json.loads(kept.partition("\n")[2])]
        kind = f"json_extract(row, '$[{FIELDS.index('kind')}]')"
        query = (f"SELECT filename, project FROM records WHERE {kind} IS NOT 'kernel' AND project IN "
                 f"(SELECT project FROM records WHERE {kind} = 'kernel') ORDER BY filename")
        found = [(str(w), str(p)) for w, p in self.db.execute(query)]
        self.put_meta("lookalikes", f"{generation}\n{json.dumps(found)}")
        return found

    def project_names(self) -> list[str]:
        return [name for (name,) in self.db.execute("SELECT DISTINCT project FROM records ORDER BY project")]

    def records(self) -> list[Record]:
        """Every record, sorted by file name."""
        rows = self.db.execute("SELECT row FROM records ORDER BY filename")
        return [Record.from_row(json.loads(row)) for (row,) in rows]


def list_local(files: Path, damaged: list[str] | None = None) -> dict[str, str]:
    """Wheel file name -> key of its record file, for every record under ``files`` whose wheel is there.

    One ``os.scandir`` and one stat per record file; hidden names (``.tmp-*``, the catalog) are skipped.
    A record without its wheel is not listed; it adds one line to ``damaged``.
    """
    wheels: set[str] = set()
    records: list[os.DirEntry[str]] = []
    try:
        with os.scandir(files) as it:
            for entry in it:
                name = entry.name
                if name.startswith("."):
                    continue
                if name.endswith(".whl"):
                    wheels.add(name)
                elif name.endswith(".whl.json"):
                    records.append(entry)
    except FileNotFoundError:
        return {}
    listing: dict[str, str] = {}
    for entry in records:
        wheel = entry.name[:-5]
        if wheel not in wheels:
            if damaged is not None:
                damaged.append(check.missing_wheel(entry.path, wheel))
            continue
        try:
            st = entry.stat()
        except FileNotFoundError:
            continue
        listing[wheel] = record_key(st)
    return listing


def record_key(st: os.stat_result) -> str:
    """The key of a local record file: records are renamed into place, so a new record is a new inode."""
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


def sync(
    catalog: Catalog, listing: dict[str, str], read: Callable[[list[str]], Iterable[tuple[str, Record | None]]]
) -> set[str]:
    """Bring ``catalog`` to ``listing`` (wheel -> key), reading the changed records with ``read``; projects touched.

    ``read`` yields (wheel, record or None when it vanished or cannot be read) for the wheel names it is given.
    """
    have = catalog.keys()
    changed = sorted(w for w, key in listing.items() if have.get(w) != key)
    removed = [w for w in have if w not in listing]
    if not changed and not removed:
        return set()
    upserts: list[tuple[str, Record]] = []
    for wheel, record in read(changed):
        if record is None:
            removed.append(wheel)
        else:
            upserts.append((listing[wheel], record))
    return catalog.apply(upserts, removed)


def read_local(
    files: Path, damaged: list[str] | None = None
) -> Callable[[list[str]], Iterator[tuple[str, Record | None]]]:
    """A ``read`` for ``sync`` over a local ``files/`` folder: each record checked (store/check.py); one that
    fails is not read into the catalog and adds one line to ``damaged`` (it is read again next time)."""

    def read(wheels: list[str]) -> Iterator[tuple[str, Record | None]]:
        for wheel in wheels:
            path = files / f"{wheel}.json"
            try:
                with open(path, "rb") as f:
                    data = f.read(check.MAX_RECORD_BYTES + 1)
            except FileNotFoundError:
                yield wheel, None
                continue
            try:
                yield wheel, check.parse(data, wheel, str(path))
            except check.BadRecord as exc:
                if damaged is not None:
                    damaged.append(str(exc))
                yield wheel, None

    return read


def local_catalog(root: Path) -> Catalog:
    """The catalog file of a local store folder; in memory where the store cannot be written (read-only)."""
    files = root / FILES
    real_folder(files)  # files/ a link: the records, wheels and catalog would be another folder's
    if files.is_dir() and os.access(files, os.W_OK):
        path = files / CATALOG_FILE
        try:  # SQLite opens (and rewrites) what a link points to: a link, or anything but a file, is refused
            st = os.lstat(path)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISLNK(st.st_mode):
                raise refuse_link(path, "catalog")
            if not stat.S_ISREG(st.st_mode):
                raise LinkRefused(f"{path}: not a regular file, where kernel-factory keeps its catalog; remove it")
        return Catalog(path)
    return Catalog(":memory:")


def _decoded(rows: list[str]) -> list[Record]:
    """The records of a project's rows (JSON texts), decoded by one json.loads, not one per row."""
    return [Record.from_row(r) for r in json.loads(f"[{','.join(rows)}]")]


def folder_state(folder: Path) -> str | None:
    """What a folder's own stat says about its entries: any entry added, removed or renamed over changes it.

    None if there is no folder. A folder changed less than ``TICK_NS`` ago is stat'ed again once that time has
    passed: on a kernel with coarse file times, a change within the same clock tick would not show in its stat.
    """
    try:
        st = os.stat(folder)
        age = time.time_ns() - st.st_mtime_ns
        if 0 <= age < TICK_NS:
            time.sleep((TICK_NS - age) / 1e9)
            st = os.stat(folder)
    except FileNotFoundError:
        return None
    return f"{st.st_dev}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_size}"


def refresh(
    catalog: Catalog, files: Path, damaged: list[str] | None = None, rescan: bool = False
) -> tuple[dict[str, str] | None, set[str]]:
    """Bring ``catalog`` up to date with ``files/``; (wheel -> key of every record there, or None when nothing
    was listed because the catalog matches the folder; the projects touched).

    Every writer renames records into place (and holds the store lock), so a folder whose own stat is the one
    the catalog last matched holds the same records: nothing is listed. Otherwise the folder is listed and
    synced; its stat is kept only when no record was left out, so a damaged record is named again on every
    run until it is fixed. ``rescan`` lists and syncs regardless (after a record was edited in place).
    """
    state = folder_state(files)
    if not rescan and state and catalog.meta(FILES_STATE) == state:
        return None, set()
    left_out: list[str] = []
    listing = list_local(files, left_out)
    touched = sync(catalog, listing, read_local(files, left_out))
    if damaged is not None:
        damaged.extend(left_out)
    catalog.set_meta(FILES_STATE, state if state and not left_out else "")
    return listing, touched


def settled(catalog: Catalog, files: Path) -> None:
    """Record that ``catalog`` matches ``files/`` after this run's own writes (adopted records, applied)."""
    if catalog.meta(FILES_STATE):  # it matched before them
        catalog.set_meta(FILES_STATE, folder_state(files) or "")


def open_local(
    root: Path, damaged: list[str] | None = None, rescan: bool = False
) -> tuple[Catalog, str, set[str]]:
    """The catalog of a local store folder brought up to date with its listing; (catalog, its generation
    before, the projects touched). Records left out add one line each to ``damaged``; ``rescan``: see
    ``refresh``."""
    catalog = local_catalog(root)
    before = catalog.generation()
    touched = refresh(catalog, root / FILES, damaged, rescan)[1]
    return catalog, before, touched


def load_records(
    store: Location | str | Path, damaged: list[str] | None = None, rescan: bool = False
) -> list[Record]:
    """Every valid record of a local store folder (through its catalog) or of any other store, sorted by file
    name; each record left out adds one line to ``damaged``; ``rescan``: see ``refresh``."""
    loc = Location.of(store)
    if loc.local is None:
        from . import open_store

        opened = open_store(loc)
        records = sorted(opened.records(), key=lambda r: r.filename)
        if damaged is not None:
            damaged.extend(opened.damaged)
        return records
    catalog = open_local(loc.local, damaged, rescan)[0]
    try:
        return catalog.records()
    finally:
        catalog.close()
