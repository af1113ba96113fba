"""The catalog: a store's records in one SQLite file, cheap to load and to diff against a listing.

It is a cache: the records (``files/<wheel>.json``) stay the truth, and a
catalog that is missing, damaged or of another schema is rebuilt from them.
A local store keeps it at ``files/.catalog.sqlite``; an ``s3://`` store keeps
the same file as an object there (store/s3.py).

Each row holds a wheel's file name, its project, a key that changes whenever
its record does (local: the record file's inode, mtime, ctime and size, since records
are renamed into place; S3: the record object's ETag) and the record file's own JSON text.
``sync`` compares a listing (wheel -> key) against the rows, reads only the
records that are new or changed, drops the rows of those gone, and gives the
catalog a new generation, all in one transaction. The index keeps the
generation its pages show (index/command.py): the same generation means nothing
to render.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from packaging.utils import canonicalize_name

from ..atomic import LinkRefused, real_folder, refuse_link, unique
from ..record import FIELDS, FILES, Record
from . import check

T = TypeVar("T")
CATALOG_FILE = ".catalog.sqlite"
TICK_NS = 20_000_000  # longer than a kernel clock tick (1/HZ, HZ >= 100): file times may be that coarse
READ_BATCH = 1000  # records read, then decoded by one json.loads
FILES_STATE = "files_state"  # meta: files/'s stat when the catalog last matched its listing ("" if it did not)
NOARCH = "torch-noarch"  # the framework of noarch wheels (listed in the variant roots of their backend)
BUSY_TIMEOUT_S = 5.0  # how long a write waits for another connection's transaction before "database is locked"
SCHEMA = "3:" + ",".join(FIELDS)  # a new field makes a new schema: the catalog is rebuilt

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
Got = tuple[str, "Record | None", "str | None"]  # what a ``sync`` read gives: wheel, its record, its file's text


class CatalogDamaged(Exception):
    """A row that fails the record checks, or a file SQLite finds damaged: the catalog is not to be trusted,
    and is rebuilt from the records (index/command.py, in the same run)."""


def sqlite_problem(path: str, exc: sqlite3.Error) -> Exception:
    """What a SQLite error on the catalog means: CatalogDamaged where the file is damaged or not a database (it is
    a cache: rebuilt from the records), else Unreachable (exit 4) naming the cause and the fix: a full disk, a
    database another process holds locked, a file that cannot be written."""
    from ..errors import Unreachable

    text = str(exc)
    if not isinstance(exc, sqlite3.OperationalError) or "malformed" in text or "not a database" in text:
        return CatalogDamaged(f"{path}: {text}")
    if "full" in text:
        fix = "free space on that file system, then run again"
    elif "locked" in text or "busy" in text:
        fix = "another process holds the catalog open (a reader's transaction); end it, then run again"
    else:
        fix = "make that file writable (or remove it: it is a cache, rebuilt from the records), then run again"
    return Unreachable(f"{path}: {text}; {fix}")


def damage(exc: Exception, path: str) -> CatalogDamaged:
    """``exc`` (CatalogDamaged or a SQLite error) as the catalog's damage; any other SQLite error is raised as
    what ``sqlite_problem`` makes of it."""
    problem = exc if isinstance(exc, CatalogDamaged) else sqlite_problem(path, exc)  # type: ignore[arg-type]
    if not isinstance(problem, CatalogDamaged):
        raise problem from None
    return problem


def rebuilt(catalog: Catalog, attempt: Callable[[bool], T], warn: Callable[[str], None]) -> T:
    """``attempt(False)``; where it finds the catalog damaged (a row that fails the record checks, a file SQLite
    finds malformed), ``warn`` names it in one line, the catalog starts again empty and ``attempt(True)`` runs
    (it reads every record again). Any other SQLite error, in either attempt, is raised as Unreachable (exit 4)."""
    try:
        return attempt(False)
    except (CatalogDamaged, sqlite3.DatabaseError) as exc:
        warn(f"{damage(exc, catalog.path)}; the catalog is not used, rebuilt from the records")
    try:
        catalog.reset()
        return attempt(True)
    except sqlite3.DatabaseError as exc:
        raise sqlite_problem(catalog.path, exc) from None


def _master(db: sqlite3.Connection) -> set[tuple[str, str, str | None]]:
    """Every object of a database: (type, name, its SQL)."""
    return {(kind, name, sql) for kind, name, sql in db.execute("SELECT type, name, sql FROM sqlite_master")}


def _create(db: sqlite3.Connection) -> None:
    db.execute("BEGIN")
    for statement in _TABLES.split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute("INSERT INTO meta VALUES ('schema', ?), ('generation', ?)", (SCHEMA, unique()))
    db.execute("COMMIT")


@lru_cache(maxsize=1)
def _expected_master() -> set[tuple[str, str, str | None]]:
    """The objects of a catalog as ``_create`` makes it."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        _create(db)
        return _master(db)
    finally:
        db.close()


def catalog_row(key: str, record: Record, names: dict[str, str] | None = None, text: str | None = None) -> Row:
    """The records table's row of ``record`` (key: see the module docstring); ``names`` caches projects.

    The row's last column is the record's JSON object: ``text``, the record file's own text that ``record``
    was checked from, or else ``record.to_json()``."""
    project = names.get(record.name) if names is not None else None
    if project is None:
        project = canonicalize_name(record.name)
        if names is not None:
            names[record.name] = project
    if text is None:
        text = record.to_json().decode()
    return (record.filename, project, key, record.label, record.backend, int(record.framework == NOARCH), text)


class Catalog:
    """One SQLite file (or ``:memory:``) of records; see the module docstring."""

    def __init__(self, path: str | Path = ":memory:", scratch: Path | None = None) -> None:
        """A catalog file, or one in memory; ``scratch``: a folder of the file's, removed on ``close``."""
        self.path = str(path)
        self.scratch = scratch
        self._keys: dict[str, str] | None = None
        self.note: str | None = None  # why the file was not used (it held what no catalog holds), for a warning
        self._checked: dict[str, Record] = {}  # a row's JSON text -> its record, for rows of checked records
        try:
            self.db = self._open()
        except sqlite3.DatabaseError as exc:  # not a database, or damaged: it is a cache, start again
            problem = sqlite_problem(self.path, exc)
            if not isinstance(problem, CatalogDamaged):
                raise problem from None
            self.note = f"{problem}; not used, rebuilt from the records"
            self._discard()
            self.db = self._open()

    def _connect(self) -> sqlite3.Connection:
        """SQLite's rollback journal (``<file>-journal``), synced: a run killed at any instant (SIGTERM, kill -9,
        a full disk) leaves the catalog as its last transaction did, which the next open rolls back to."""
        db = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_S)
        try:
            db.execute("PRAGMA journal_mode=TRUNCATE")  # the journal stays (emptied): files/'s own stat does not
            db.execute("PRAGMA synchronous=FULL")  # change with each write (folder_state)
        except BaseException:
            db.close()
            raise
        return db

    def _discard(self) -> None:
        """Remove the file and its journal (a journal left beside a new file would be rolled into it)."""
        if self.path != ":memory:":
            for suffix in ("", "-journal", "-wal", "-shm"):
                Path(self.path + suffix).unlink(missing_ok=True)

    def _open(self) -> sqlite3.Connection:
        """The database, made again unless it holds exactly the catalog's tables and indexes (no trigger, no view:
        SQL that would run on our own writes) and this schema's rows."""
        db = self._connect()
        try:
            master = _master(db)
        except BaseException:
            db.close()
            raise
        if master == _expected_master():
            schema = db.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
            if schema is not None and schema[0] == SCHEMA:
                if self.path != ":memory:" and not os.path.exists(self.path + "-journal"):
                    db.execute("INSERT OR REPLACE INTO meta VALUES ('journal', '')")  # makes it, before files/'s
                    # stat is taken (refresh)
                return db
        elif master:
            found = sorted({kind for kind, _name, _sql in master} - {"table", "index"})
            if found or {name for _k, name, _sql in master} - {name for _k, name, _sql in _expected_master()}:
                what = " and ".join(f"{kind}s" for kind in found) if found else "tables"
                self.note = f"{self.path}: holds {what} that no catalog holds; not used, rebuilt from the records"
        if master:
            db.close()
            self._discard()
            db = self._connect()
        _create(db)
        return db

    def reset(self) -> None:
        """Start again from an empty catalog (a row failed its check: CatalogDamaged)."""
        self.db.close()
        self._discard()
        self._keys = None
        self._checked = {}
        self.db = self._open()

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

    def apply(
        self, upserts: Iterable[tuple[str, Record, str | None]], removed: Iterable[str], only_changed: bool = False,
        checked: bool = False,
    ) -> set[str]:  # fmt: skip
        """Write new or changed records (key, record, its file's text or None) and drop removed wheels in one
        transaction.

        Returns the projects touched (before and after), and gives the catalog a new generation if any.
        ``only_changed``: leave out the rows that are already there as they are (``--rescan`` reads them all).
        ``checked``: the records passed store/check.py's checks; a row read back as it was written here gives
        that record again, not checked twice (``projects``).
        """
        names: dict[str, str] = {}  # display name -> project, computed once per name
        rows = []
        for key, record, text in upserts:
            row = catalog_row(key, record, names, text)
            rows.append(row)
            if checked:
                self._checked[row[6]] = record
        if only_changed:
            have = set(self.db.execute("SELECT * FROM records"))
            rows = [row for row in rows if row not in have]
        return self.apply_rows(rows, removed)

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
            if db.in_transaction:  # SQLite may have rolled back itself (a full disk)
                try:
                    db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # the journal rolls it back at the next open
            self._keys = None  # read again from the rolled-back table
            raise
        return touched

    def label_backends(self) -> dict[str, str | None]:
        """Every variant label -> its backend (that of its arch wheels, else of its noarch wheels).

        Each label becomes a folder name: one that is not a label's shape, or a backend that is not plain text,
        raises CatalogDamaged (every row's label and backend are checked against its record when its project is
        read: ``projects``)."""
        rows = list(self.db.execute(
            "SELECT label, noarch, MIN(backend) FROM records WHERE label IS NOT NULL GROUP BY label, noarch"
        ))  # fmt: skip
        for label, _noarch, backend in rows:
            if not check.plain_label(label) or not (backend is None or check.plain_text(backend)):
                raise CatalogDamaged(f"{self.path}: a row's label {str(label)[:80]!r} or backend is not one a "
                                     "record may hold")  # fmt: skip
        return label_backends(rows)

    def projects(self, names: Iterable[str] | None = None) -> Iterator[tuple[str, list[Record]]]:
        """(project, its records sorted by file name), project by project in name order: all, or ``names``.

        Every row is checked as a record file is (store/check.py ``check_row``), and its project, label, backend
        and noarch columns against its record: a row that fails raises CatalogDamaged."""
        columns = "project, filename, label, backend, noarch, row"
        if names is None:
            rows: Iterable[tuple[str, str, str | None, str | None, int, str]] = self.db.execute(
                f"SELECT {columns} FROM records ORDER BY project, filename"
            )
        else:
            wanted = sorted(set(names))
            rows = (
                row
                for i in range(0, len(wanted), 500)
                for row in self.db.execute(
                    f"SELECT {columns} FROM records WHERE project IN ({','.join('?' * len(wanted[i : i + 500]))}) "
                    "ORDER BY project, filename",
                    wanted[i : i + 500],
                )
            )
        project = ""
        group: list[tuple[str, str, str | None, str | None, int, str]] = []
        for row in rows:
            if row[0] != project:
                if group:
                    yield project, self._decoded(group)
                project, group = row[0], []
            group.append(row)
        if group:
            yield project, self._decoded(group)

    def _decoded(self, group: list[tuple[str, str, str | None, str | None, int, str]]) -> list[Record]:
        """The records of one project's rows, each checked (a row as this catalog wrote it from a checked record
        gives that record); the JSON texts of the others decoded by one json.loads."""
        known = self._checked
        texts = [row[5] for row in group if row[5] not in known]
        try:
            decoded = json.loads(f"[{','.join(texts)}]") if texts else []
        except (TypeError, ValueError, RecursionError):
            decoded = None
        if type(decoded) is not list or len(decoded) != len(texts):
            raise CatalogDamaged(f"{self.path}: the rows of project {group[0][0][:80]!r} are not records' JSON")
        values = iter(decoded)
        records = []
        for project, filename, label, backend, noarch, text in group:
            record = known.get(text)
            try:
                if record is None:
                    record = check.check_row(next(values), filename, project)
                elif record.filename != filename or check.project_of(record.name) != project:
                    raise ValueError("its file name or project is not its record's")
            except ValueError as exc:
                raise CatalogDamaged(f"{self.path}: the row of {str(filename)[:200]!r} is not a valid record ({exc})"
                                     ) from None  # fmt: skip
            if (label, backend, noarch) != (record.label, record.backend, int(record.framework == NOARCH)):
                raise CatalogDamaged(f"{self.path}: the row of {filename!r} names another label or backend than "
                                     "its record")  # fmt: skip
            records.append(record)
        return records

    def kernel_projects(self, names: Iterable[str]) -> set[str]:
        """Those of ``names`` of which the store holds a built kernel, not only adopted wheels (one indexed query
        each)."""
        kind = "json_extract(row, '$.kind') = 'kernel'"
        query = f"SELECT 1 FROM records WHERE project = ? AND {kind} LIMIT 1"
        return {name for name in names if self.db.execute(query, (name,)).fetchone() is not None}

    def lookalikes(self) -> list[tuple[str, str]]:
        """(wheel, project) of every adopted record of a project of which the store holds a built kernel, whichever
        came first, sorted. Asked once per catalog generation (the answer is kept in the meta table)."""
        generation = self.generation()
        kept = self.meta("lookalikes")
        if kept is not None and kept.startswith(f"{generation}\n"):
            try:
                pairs = [(w, p) for w, p in json.loads(kept.partition("\n")[2])]
            except (TypeError, ValueError, RecursionError):
                pairs = None
            if pairs is not None and all(check.plain_wheel(w) and check.project_of(p) == p for w, p in pairs):
                return pairs
        kind = "json_extract(row, '$.kind')"
        query = (f"SELECT filename, project FROM records WHERE {kind} IS NOT 'kernel' AND project IN "
                 f"(SELECT project FROM records WHERE {kind} = 'kernel') ORDER BY filename")
        found = [(str(w), str(p)) for w, p in self.db.execute(query)]
        if not all(check.plain_wheel(w) and check.project_of(p) == p for w, p in found):
            raise CatalogDamaged(f"{self.path}: a row's file name or project is not one a record may have")
        self.put_meta("lookalikes", f"{generation}\n{json.dumps(found)}")
        return found

    def project_names(self) -> list[str]:
        return [name for (name,) in self.db.execute("SELECT DISTINCT project FROM records ORDER BY project")]

    def records(self) -> list[Record]:
        """Every record, sorted by file name."""
        records = [r for _project, group in self.projects() for r in group]
        return sorted(records, key=lambda r: r.filename)


def no_record(path: str, wheel: str, remote: bool = False) -> str:
    """The line for a wheel in the store that has no record (the index cannot show it)."""
    fix = ("rerun build to make it again, or delete the wheel" if remote else
           "run `kernel-factory index --repair` to make its record from the wheel, or delete the wheel")  # fmt: skip
    return f"{path}: the wheel {wheel} has no record, so the index leaves it out; {fix}"


@dataclass
class Gaps:
    """What a listing of ``files/`` found unpaired: records whose wheel is gone, wheels without a record."""

    folder: str
    no_wheel: list[str] = field(default_factory=list)  # wheel names
    no_record: list[str] = field(default_factory=list)

    def lines(self, healed: Iterable[str] = ()) -> list[str]:
        """One line for each, but those of wheels in ``healed`` (adopted again since)."""
        done = set(healed)
        return [check.missing_wheel(os.path.join(self.folder, f"{w}.json"), w) for w in self.no_wheel
                if w not in done] + [no_record(os.path.join(self.folder, w), w) for w in self.no_record
                                     if w not in done]  # fmt: skip

    def __bool__(self) -> bool:
        return bool(self.no_wheel or self.no_record)


def label_backends(wheels: Iterable[tuple[str | None, int, str | None]]) -> dict[str, str | None]:
    """Every variant label -> its backend, from (label, noarch, backend) of wheels: that of its arch wheels,
    else of its noarch wheels; the least where they differ (``Catalog.label_backends``)."""
    least: dict[tuple[str, int], str | None] = {}
    for label, noarch, backend in wheels:
        if label is not None:
            have = least.get((label, noarch))
            least[(label, noarch)] = backend if have is None else have if backend is None else min(have, backend)
    found: dict[str, str | None] = {}
    for label, noarch in sorted(least, key=lambda pair: (pair[0], -pair[1])):  # noarch first: arch wheels win
        found[label] = least[(label, noarch)]
    return found


def list_local(files: Path, damaged: list[str] | None = None, gaps: Gaps | None = None) -> dict[str, str]:
    """Wheel file name -> key of its record file, for every record under ``files`` whose wheel is there.

    One ``os.scandir`` and one stat per record file; hidden names (``.tmp-*``, the catalog) are skipped.
    A record without its wheel is not listed, nor a wheel without its record: each adds one line to
    ``damaged``, or its name to ``gaps`` when given.
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
    found = Gaps(os.fspath(files)) if gaps is None else gaps
    listing: dict[str, str] = {}
    for entry in records:
        wheel = entry.name[:-5]
        if wheel not in wheels:
            found.no_wheel.append(wheel)
            continue
        try:
            st = entry.stat()
        except FileNotFoundError:
            continue
        listing[wheel] = record_key(st)
    found.no_record.extend(sorted(wheels - listing.keys() - set(found.no_wheel)))
    found.no_wheel.sort()
    if gaps is None and damaged is not None:
        damaged.extend(found.lines())
    return listing


def record_key(st: os.stat_result) -> str:
    """The key of a local record file: records are renamed into place, so a new record is a new inode; a record
    written over in place changes its ctime (which no one can set back)."""
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_size}"


def sync(
    catalog: Catalog, listing: dict[str, str], read: Callable[[list[str]], Iterable[Got]],
    rescan: bool = False,
) -> set[str]:  # fmt: skip
    """Bring ``catalog`` to ``listing`` (wheel -> key), reading the changed records with ``read``; projects touched.

    ``read`` yields (wheel, record or None when it vanished or cannot be read, the record file's text or None)
    for the wheel names it is given.
    ``rescan``: read every listed record, whatever its key, and write the rows of those that differ.
    """
    have = catalog.keys()
    changed = sorted(listing) if rescan else sorted(w for w, key in listing.items() if have.get(w) != key)
    removed = [w for w in have if w not in listing]
    if not changed and not removed:
        return set()
    upserts: list[tuple[str, Record, str | None]] = []
    for wheel, record, text in read(changed):
        if record is None:
            removed.append(wheel)
        else:
            upserts.append((listing[wheel], record, text))
    return catalog.apply(upserts, removed, only_changed=rescan, checked=True)


def read_local(
    files: Path, damaged: list[str] | None = None, known_variants: bool = True
) -> Callable[[list[str]], Iterator[Got]]:
    """A ``read`` for ``sync`` over a local ``files/`` folder: each record checked (store/check.py); one that
    fails is not read into the catalog and adds one line to ``damaged`` (it is read again next time).
    ``known_variants``: see check.py's ``check``."""

    def read(wheels: list[str]) -> Iterator[Got]:
        folder = os.fspath(files)
        for i in range(0, len(wheels), READ_BATCH):
            batch = wheels[i : i + READ_BATCH]
            datas: list[bytes | None] = []
            for wheel in batch:
                try:
                    with open(os.path.join(folder, f"{wheel}.json"), "rb") as f:
                        datas.append(f.read(check.MAX_RECORD_BYTES + 1))
                except FileNotFoundError:
                    datas.append(None)
            where = [os.path.join(folder, f"{w}.json") for w in batch]
            checked = check.parse_many(batch, datas, where, known_variants=known_variants)
            for (wheel, record, why), data in zip(checked, datas, strict=True):
                if why is not None and damaged is not None:
                    damaged.append(why)
                yield wheel, record, text_of(data) if record is not None else None

    return read


def text_of(data: bytes | None) -> str | None:
    """A record file's bytes as the catalog row's text (None where they are not UTF-8: the row is made from
    the record)."""
    try:
        return None if data is None else data.decode()
    except UnicodeDecodeError:
        return None


def local_catalog(root: Path) -> Catalog:
    """The catalog file of a local store folder; in memory where the store cannot be written (read-only)."""
    files = root / FILES
    real_folder(files)  # files/ a link: the records, wheels and catalog would be another folder's
    if files.is_dir() and os.access(files, os.W_OK):
        path = files / CATALOG_FILE
        for each in (path, files / f"{CATALOG_FILE}-journal"):
            try:  # SQLite opens (and rewrites) what a link points to: a link, or anything but a file, is refused
                st = os.lstat(each)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode):
                raise refuse_link(each, "catalog")
            if not stat.S_ISREG(st.st_mode):
                raise LinkRefused(f"{each}: not a regular file, where kernel-factory keeps its catalog; remove it")
        return Catalog(path)
    return Catalog(":memory:")


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
    return stat_state(st)


def stat_state(st: os.stat_result) -> str:
    """A folder's stat as one string (``folder_state``'s, without its wait)."""
    return f"{st.st_dev}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_size}"


def refresh(
    catalog: Catalog, files: Path, damaged: list[str] | None = None, rescan: bool = False,
    gaps: Gaps | None = None,
) -> tuple[dict[str, str] | None, set[str]]:  # fmt: skip
    """Bring ``catalog`` up to date with ``files/``; (wheel -> key of every record there, or None when nothing
    was listed because the catalog matches the folder; the projects touched).

    Every writer renames records into place (and holds the store lock), so a folder whose own stat is the one
    the catalog last matched holds the same records: nothing is listed. Otherwise the folder is listed and
    synced; its stat is kept only when no record was left out and every wheel and record is paired, so a
    damaged record or an unpaired file is named again on every run until it is fixed. ``rescan`` lists and
    reads every record regardless (after a record was edited in place). Unpaired files go to ``gaps`` when
    given, else one line each to ``damaged``.
    """
    state = folder_state(files)
    if not rescan and state and catalog.meta(FILES_STATE) == state:
        return None, set()
    left_out: list[str] = []
    found = Gaps(os.fspath(files)) if gaps is None else gaps
    listing = list_local(files, left_out, found)
    touched = sync(catalog, listing, read_local(files, left_out), rescan)
    if gaps is None:
        left_out.extend(found.lines())
    if damaged is not None:
        damaged.extend(left_out)
    catalog.set_meta(FILES_STATE, state if state and not left_out and not found else "")
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
