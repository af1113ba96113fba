"""The catalog: a store's records in one SQLite file, cheap to load and to diff against a listing. A cache: the
records stay the truth, and a catalog missing, damaged or of another schema is rebuilt from them. Each ``sync`` gives
the catalog a new generation where a project changed: the same generation means nothing for the index to render."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import groupby, islice
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from packaging.utils import canonicalize_name

from ..errors import Unreachable
from ..nofollow import unique
from ..record import FIELDS, Record
from . import check

if TYPE_CHECKING:
    import tempfile

T = TypeVar("T")
CATALOG_FILE = ".catalog.sqlite"
NOARCH = "torch-noarch"  # the framework of noarch wheels (listed in the variant roots of their backend)
BUSY_TIMEOUT_S = 5.0  # how long a write waits for another connection's transaction before "database is locked"
SCHEMA = "3:" + ",".join(FIELDS)  # a new field makes a new schema: the catalog is rebuilt
FILES_STATE = "files_state"  # meta: a local files/'s stat when the catalog last matched its listing ("": list it)

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


@dataclass
class Synced:
    """What a store's ``sync`` found: the projects touched; (wheel, line) for each record left out and file
    unpaired; wheel -> key of its record and every name in files/ (None: not listed, the catalog matched)."""

    touched: set[str] = field(default_factory=set)
    errors: list[tuple[str, str]] = field(default_factory=list)
    listing: dict[str, str] | None = None
    names: set[str] | None = None


class CatalogDamaged(Exception):
    """A row that fails the record checks, or a damaged file: the catalog is rebuilt from the records (``rebuilt``)."""


def sqlite_problem(path: str, exc: sqlite3.Error) -> Exception:
    """CatalogDamaged where the file is damaged or not a database (a cache: rebuilt), else Unreachable (exit 4)
    naming the cause and fix: a full disk, a database another process holds locked, a file not writable."""
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


def rebuilt(catalog: Catalog, attempt: Callable[[bool], T], warn: Callable[[str], None]) -> T:
    """``attempt(False)``, or after a warning ``attempt(True)`` on an empty catalog where it is damaged."""
    try:
        return attempt(False)
    except (CatalogDamaged, sqlite3.DatabaseError) as exc:
        problem = exc if isinstance(exc, CatalogDamaged) else sqlite_problem(catalog.path, exc)
        if not isinstance(problem, CatalogDamaged):
            raise problem from None
        warn(f"{problem}; the catalog is not used, rebuilt from the records")
    try:
        catalog.reset()
        return attempt(True)
    except sqlite3.DatabaseError as exc:
        raise sqlite_problem(catalog.path, exc) from None


def _master(db: sqlite3.Connection) -> set[tuple[str, str, str | None]]:
    return {(kind, name, sql) for kind, name, sql in db.execute("SELECT type, name, sql FROM sqlite_master")}


_PROJECTS_OF = "SELECT DISTINCT project FROM records WHERE filename IN ({})"


def select_in(db: sqlite3.Connection, query: str, names: list[str]) -> Iterator[tuple[Any, ...]]:
    """The rows of ``query`` (its ``{}``: the placeholders) for ``names``, 500 names a query."""
    for i in range(0, len(names), 500):
        chunk = names[i : i + 500]
        yield from db.execute(query.format(",".join("?" * len(chunk))), chunk)


def _create(db: sqlite3.Connection) -> None:
    db.executescript(f"BEGIN; {_TABLES}")  # the tables and indexes, in a transaction left open
    db.execute("INSERT INTO meta VALUES ('schema', ?), ('generation', ?)", (SCHEMA, unique()))
    db.execute("COMMIT")


@lru_cache(maxsize=1)
def _expected_master() -> set[tuple[str, str, str | None]]:
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        _create(db)
        return _master(db)
    finally:
        db.close()


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def catalog_row(key: str, record: Record, names: dict[str, str], text: str | None) -> Row:
    """The row of ``record``; ``names`` caches projects; last, ``text`` (its file's, checked) or its JSON."""
    project = names.get(record.name)
    if project is None:
        project = names[record.name] = canonicalize_name(record.name)
    if text is None:
        text = record.to_json().decode()
    return (record.filename, project, key, record.label, record.backend, int(record.framework == NOARCH), text)


class Catalog:
    def __init__(self, path: str | Path = ":memory:",
                 scratch: tempfile.TemporaryDirectory[str] | None = None) -> None:  # fmt: skip
        """A catalog file, or one in memory; ``scratch``: the file's folder, removed on ``close``."""
        self.path = str(path)
        self.scratch = scratch
        self._keys: dict[str, str] | None = None
        self.note: str | None = None  # why the file was not used (it held what no catalog holds), for a warning
        # filename -> (the sha256 of its row's text, its record), for the rows of checked records; a digest and not
        # the text, which would double what a first full build of 110,000 records holds (docs/index.md)
        self._checked: dict[str, tuple[bytes, Record]] = {}
        self.changed = False  # written since it was opened (an S3 store puts it back: store/s3.py)
        try:
            self.db = self._open()
        except sqlite3.DatabaseError as exc:  # not a database, or damaged: it is a cache, start again
            problem = sqlite_problem(self.path, exc)
            if not isinstance(problem, CatalogDamaged):
                raise problem from None
            self.note = f"{problem}; not used, rebuilt from the records"
            self._discard()
            self.db = self._open()

    def _connect(self) -> tuple[sqlite3.Connection, set[tuple[str, str, str | None]]]:
        """The database and its ``_master``. SQLite's rollback journal, synced: a run killed at any instant (SIGTERM,
        kill -9, a full disk) leaves the catalog as its last transaction did, which the next open rolls back to."""
        db = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_S)
        try:
            db.execute("PRAGMA journal_mode=TRUNCATE")  # the journal stays (emptied): files/'s own stat does not
            db.execute("PRAGMA synchronous=FULL")  # change with each write (folder_state)
            return db, _master(db)
        except BaseException:
            db.close()
            raise

    def _discard(self) -> None:
        """Remove the file and its journal (a journal left beside a new file would be rolled into it)."""
        if self.path != ":memory:":
            for suffix in ("", "-journal", "-wal", "-shm"):
                Path(self.path + suffix).unlink(missing_ok=True)

    def _open(self) -> sqlite3.Connection:
        """The database, made again unless it holds exactly the catalog's tables and indexes (no trigger, no view:
        SQL that would run on our own writes) and this schema's rows."""
        db, master = self._connect()
        if master == _expected_master():
            schema = db.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
            if schema is not None and schema[0] == SCHEMA:
                if self.path != ":memory:" and not Path(self.path + "-journal").exists():
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
            db = self._connect()[0]
        _create(db)
        self.changed = True
        return db

    @classmethod
    def copy_of(cls, path: Path) -> Catalog:
        """An in-memory copy of the catalog at ``path`` for plan and build (which write nothing); empty if not one."""
        catalog = cls(":memory:")
        uri = f"{Path(os.path.abspath(path)).as_uri()}?mode=ro"
        try:
            with contextlib.closing(sqlite3.connect(uri, uri=True)) as src:
                src.backup(catalog.db)
            valid = _master(catalog.db) == _expected_master() and catalog.meta("schema") == SCHEMA
        except sqlite3.Error:  # none there, or not a database
            valid = False
        if not valid:
            catalog.reset()
        return catalog

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
            self.scratch.cleanup()

    def generation(self) -> str:
        return str(self.db.execute("SELECT value FROM meta WHERE name='generation'").fetchone()[0])

    def meta(self, name: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE name=?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, name: str, value: str) -> None:
        """Keep a value beside the records (the generation stays); not written where it is already there."""
        if self.meta(name) != value:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, value))
            self.changed = True

    def keys(self) -> dict[str, str]:
        """Wheel file name -> key, for every row (read once per run, then kept up to date by ``apply``)."""
        if self._keys is None:
            self._keys = dict(self.db.execute("SELECT filename, key FROM records"))
        return self._keys

    def project_names(self) -> list[str]:
        return [str(name) for (name,) in self.db.execute("SELECT DISTINCT project FROM records ORDER BY project")]

    def reader(self) -> Catalog:
        """A read-only connection to this file for a forked render worker, sharing the rows this one checked."""
        other = object.__new__(Catalog)
        other.path, other.scratch, other.note, other.changed = self.path, None, None, False
        other._keys, other._checked = None, self._checked
        other.db = sqlite3.connect(f"{Path(os.path.abspath(self.path)).as_uri()}?mode=ro", uri=True,
                                   isolation_level=None)  # fmt: skip
        return other

    def count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM records").fetchone()[0])

    def apply(
        self, upserts: Iterable[tuple[str, Record, str | None]], removed: Iterable[str], only_changed: bool = False,
        checked: bool = False,
    ) -> set[str]:  # fmt: skip
        """Write (key, record, text) and drop ``removed`` in one transaction, a new generation where a project is
        touched; those projects. ``only_changed``: ``--rescan``; ``checked``: such rows are not checked again."""
        names: dict[str, str] = {}  # display name -> project, computed once per name

        def rows() -> Iterator[Row]:
            for key, record, text in upserts:
                row = catalog_row(key, record, names, text)
                if checked:
                    self._checked[row[0]] = (_digest(row[6]), record)
                yield row

        return self.apply_rows(rows(), removed, only_changed)

    def apply_rows(self, rows: Iterable[Row], removed: Iterable[str], only_changed: bool = False) -> set[str]:
        """``apply`` for rows made by ``catalog_row`` (adoption's workers make them, in parallel). ``rows`` are
        taken 500 at a time inside the transaction (a first read of 110,000 records holds one batch of their texts,
        not all), then ``removed``, which reading them may add to (``sync``); no name is in both."""
        touched: set[str] = set()
        db = self.db
        db.execute("BEGIN")
        try:
            it = iter(rows)
            while chunk := list(islice(it, 500)):
                if only_changed:  # the rows as they are: those unchanged are left as they are
                    have = set(select_in(db, "SELECT * FROM records WHERE filename IN ({})", [row[0] for row in chunk]))
                    chunk = [row for row in chunk if row not in have]
                touched.update(row[1] for row in chunk)
                touched.update(p for (p,) in select_in(db, _PROJECTS_OF, [row[0] for row in chunk]))  # they were in
                db.executemany("INSERT OR REPLACE INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", chunk)
                if self._keys is not None:
                    self._keys.update((row[0], row[2]) for row in chunk)
            removed = list(removed)
            touched.update(p for (p,) in select_in(db, _PROJECTS_OF, removed))
            db.executemany("DELETE FROM records WHERE filename=?", [(f,) for f in removed])
            if self._keys is not None:
                for filename in removed:
                    self._keys.pop(filename, None)
            if touched:
                db.execute("UPDATE meta SET value=? WHERE name='generation'", (unique(),))
            db.execute("COMMIT")
            self.changed = self.changed or bool(touched or removed)
        except BaseException:
            if db.in_transaction:  # SQLite may have rolled back itself (a full disk)
                with contextlib.suppress(sqlite3.Error):  # else the journal rolls it back at the next open
                    db.execute("ROLLBACK")
            self._keys = None  # read again from the rolled-back table
            raise
        return touched

    def label_backends(self) -> dict[str, str | None]:
        """Every variant label -> its backend: that of its arch wheels, else of its noarch wheels; the least where
        they differ. Each label becomes a folder name: one not plain raises CatalogDamaged."""
        found: dict[str, str | None] = {}
        for label, _noarch, backend in self.db.execute(
            "SELECT label, noarch, MIN(backend) FROM records WHERE label IS NOT NULL GROUP BY label, noarch "
            "ORDER BY label, noarch DESC"  # noarch first: arch wheels win
        ):  # fmt: skip
            if not check.plain_label(label) or not (backend is None or check.plain_text(backend)):
                raise CatalogDamaged(f"{self.path}: a row's label {str(label)[:80]!r} or backend is not one a "
                                     "record may hold")  # fmt: skip
            found[label] = backend
        return found

    def projects(self, names: Iterable[str] | None = None) -> Iterator[tuple[str, list[Record]]]:
        """(project, its records) in order, all or ``names``; every row checked (``_decoded``): else CatalogDamaged."""
        query = "SELECT project, filename, label, backend, noarch, row FROM records {}ORDER BY project, filename"
        if names is None:
            rows: Iterable[tuple[Any, ...]] = self.db.execute(query.format(""))
        else:
            rows = select_in(self.db, query.format("WHERE project IN ({}) "), sorted(set(names)))
        for project, group in groupby(rows, key=itemgetter(0)):
            yield project, self._decoded(list(group))

    def _decoded(self, group: list[tuple[str, str, str | None, str | None, int, str]]) -> list[Record]:
        """The records of one project's rows, each checked unless this catalog wrote it from a checked record."""
        known = [got[1] if (got := self._checked.get(row[1])) is not None and type(row[5]) is str
                 and got[0] == _digest(row[5]) else None for row in group]
        texts = [row[5] for row, record in zip(group, known, strict=True) if record is None]
        decoded = None
        with contextlib.suppress(TypeError, ValueError, RecursionError):
            decoded = json.loads(f"[{','.join(texts)}]") if texts else []
        if type(decoded) is not list or len(decoded) != len(texts):
            raise CatalogDamaged(f"{self.path}: the rows of project {group[0][0][:80]!r} are not records' JSON")
        values = iter(decoded)
        records = []
        for (project, filename, label, backend, noarch, _text), record in zip(group, known, strict=True):
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
        """Those of ``names`` of which the store holds a built kernel, not only adopted wheels."""
        query = "SELECT 1 FROM records WHERE project = ? AND json_extract(row, '$.kind') = 'kernel' LIMIT 1"
        return {name for name in names if self.db.execute(query, (name,)).fetchone() is not None}

    def lookalikes(self) -> list[tuple[str, str]]:
        """(wheel, project) of each adopted record of a project the store builds, sorted; kept per generation."""
        generation = self.generation()
        kept = self.meta("lookalikes")
        if kept is not None and kept.startswith(f"{generation}\n"):
            pairs = None
            with contextlib.suppress(TypeError, ValueError, RecursionError):
                pairs = [(w, p) for w, p in json.loads(kept.partition("\n")[2])]
            if pairs is not None and all(check.plain_wheel(w) and check.project_of(p) == p for w, p in pairs):
                return pairs
        kind = "json_extract(row, '$.kind')"
        query = (f"SELECT filename, project FROM records WHERE {kind} IS NOT 'kernel' AND project IN "
                 f"(SELECT project FROM records WHERE {kind} = 'kernel') ORDER BY filename")
        found = [(str(w), str(p)) for w, p in self.db.execute(query)]
        if not all(check.plain_wheel(w) and check.project_of(p) == p for w, p in found):
            raise CatalogDamaged(f"{self.path}: a row's file name or project is not one a record may have")
        self.set_meta("lookalikes", f"{generation}\n{json.dumps(found)}")
        return found

    def records(self) -> list[Record]:
        return sorted((r for _project, group in self.projects() for r in group), key=lambda r: r.filename)


def sync(
    catalog: Catalog, listing: dict[str, str], read: Callable[[list[str]], Iterable[Got]],
    rescan: bool = False,
) -> set[str]:  # fmt: skip
    """Bring ``catalog`` to ``listing`` (wheel -> key), reading changed records (``rescan``: all); projects touched."""
    have = catalog.keys()
    changed = sorted(listing) if rescan else sorted(w for w, key in listing.items() if have.get(w) != key)
    removed = [w for w in have if w not in listing]
    if not changed and not removed:
        return set()

    def upserts() -> Iterator[tuple[str, Record, str | None]]:  # read inside apply's transaction, batch by batch
        for wheel, record, text in read(changed):
            if record is None:
                removed.append(wheel)  # a record that failed its check: its row goes
            else:
                yield listing[wheel], record, text

    return catalog.apply(upserts(), removed, only_changed=rescan, checked=True)

def record_key(st: os.stat_result) -> str:
    """The key of a local file: records are renamed into place, so a new record is a new inode; a file written
    over in place changes its ctime (which no one can set back)."""
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_size}"
