"""The store: the source of truth. Wheels, their ``.metadata`` files and ``.json`` records under ``<root>/files/``.

The index is rendered from the records alone. ``open_store`` picks the backend
for a location: a local folder (local.py) or ``s3://bucket/prefix`` (s3.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..config import DEFAULT_LOCK_WAIT_S, Location
from ..errors import ConfigError
from ..record import Record

if TYPE_CHECKING:
    import tempfile

    from .catalog import Catalog, Synced


class Store(Protocol):
    """Where wheels and records live: a local folder (local.py) or S3 (s3.py).

    ``records()`` lists the valid records whose wheel is there (check.py checks each one) and leaves in
    ``damaged`` one line per record it skipped: damaged, invalid, or without its wheel.
    """

    damaged: list[str]

    def records(self) -> list[Record]: ...

    def put(self, wheel: Path, metadata: bytes, record: Record) -> None: ...

    def lock(self) -> AbstractContextManager[None]:
        """One writer at a time: a local folder's lock file (lock.py); S3 needs none (shards write distinct keys)."""
        ...

    def work_dir(self, scratch: str | None) -> tempfile.TemporaryDirectory[str]:
        """A temporary folder for wheels on their way in: on the store's own file system where it has one (so
        they move in by rename, hidden from listings), else in ``scratch`` (None: TMPDIR)."""
        ...

    def index_lock(self, adopting: bool = False) -> AbstractContextManager[None]:
        """What ``index`` holds: the store lock, where the store can be written (a read-only one has no writer to
        wait for); UsageError where there is no store and nothing to adopt into one."""
        ...

    # The index's view of the store: one flow over this for every backend (index/command.py).
    display: str  # the store, for messages
    FIX_CHANGED: str  # what to do about a wheel that differs from its record
    HASH_ON_NEW_RECORD: bool  # a wheel whose record changed is hashed again (store/filecheck.py)
    FIX_METADATA: str  # ... about a missing .metadata that its wheel cannot give again

    def open_catalog(self, adopting: bool = False) -> Catalog:
        """The store's catalog of records (catalog.py): a cache, rebuilt where it is missing or damaged."""
        ...

    def sync(self, catalog: Catalog, rescan: bool = False) -> Synced:
        """Bring ``catalog`` up to date with the store, reading only the records that changed (``rescan``: all)."""
        ...

    def wheel_stat(self, name: str) -> tuple[int, str, str | None] | None:
        """(size, a key that changes with the file, None or what is there instead of a file) of a file of files/;
        None where there is none."""
        ...

    def has_file(self, name: str) -> bool: ...

    def sha256_of(self, name: str) -> str: ...

    def wheel_metadata(self, name: str) -> bytes:
        """A wheel's METADATA; Refused or Unreachable where it cannot be read."""
        ...

    def write_file(self, name: str, data: bytes) -> None:
        """Write a file of files/; Unreachable, saying why, where it cannot be."""
        ...

    def file_url(self, name: str) -> str: ...

    def repair(self, name: str) -> tuple[str, Record]:
        """``index --repair`` of one wheel: (its new record's key, the record); Refused where it is no wheel."""
        ...

    def repair_records(self) -> tuple[list[str], list[str]]:
        """``index --repair``: every damaged or missing record made again; (repaired, refused) wheel names."""
        ...

    def adopt(self, paths: list[str], refuse: Collection[str], known: dict[str, Any]) -> Any:
        """``index --wheels``: copy wheels in with their records (adopt.py); an AdoptResult."""
        ...

    def save(self, catalog: Catalog, adopted: bool) -> None:
        """Keep what the run leaves in the catalog (an S3 store puts a changed one back)."""
        ...

    def forget_listing(self, catalog: Catalog) -> None:
        """List the store again next run."""
        ...

    def mark_index(self, out: Path) -> None:
        """Leave in an index root what publish needs to find the store's files."""
        ...


def open_store(location: Location | str | Path, options: Any = None, *, lock_wait_s: float | None = None) -> Store:
    """A local folder, or ``s3://bucket/prefix`` (s3.py; ``options``: config.Options for its puts' headers and
    the folder lock's wait, which ``lock_wait_s`` gives where there are no Options)."""
    loc = Location.of(location)
    if loc.local is not None:
        from .local import LocalStore

        if lock_wait_s is None:
            lock_wait_s = DEFAULT_LOCK_WAIT_S if options is None else options.environment.lock_wait_s
        return LocalStore(loc.local, lock_wait_s)
    if loc.scheme != "s3":
        raise ConfigError(f"store {loc}: unknown scheme {loc.scheme}://; use a folder, file:// or s3://bucket/prefix")
    from ..s3util import DEFAULT_PUT, PutOptions
    from .s3 import S3Store

    return S3Store(loc.display, put=DEFAULT_PUT if options is None else PutOptions.from_options(options))


def load_records(
    store: Location | str | Path, damaged: list[str] | None = None, rescan: bool = False
) -> list[Record]:
    """Every valid record of a store, through its catalog (read-only: an s3:// store's is not put back), sorted
    by file name; each record left out adds one line to ``damaged``; ``rescan``: see ``Store.sync``."""
    from .. import report
    from .catalog import rebuilt, sqlite_problem

    opened = open_store(store)
    try:
        catalog = opened.open_catalog()
    except sqlite3.DatabaseError as exc:  # Catalog() rebuilds a damaged file itself: this is another error
        raise sqlite_problem(opened.display, exc) from None
    lines: list[str] = []
    try:
        if catalog.note is not None:
            report.warn(catalog.note)

        def attempt(again: bool) -> list[Record]:
            lines[:] = [line for _wheel, line in opened.sync(catalog, rescan or again).errors]
            return catalog.records()

        records = rebuilt(catalog, attempt, report.warn)
    finally:
        catalog.close()
    if damaged is not None:
        damaged.extend(lines)
    return records
