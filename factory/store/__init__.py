"""The store: the source of truth. Wheels, their ``.metadata`` files and ``.json`` records under ``<root>/files/``.

The index is rendered from the records alone. ``open_store`` picks the backend
for a location: a local folder (local.py) or ``s3://bucket/prefix`` (s3.py).
"""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..config import DEFAULT_LOCK_WAIT_S, Location
from ..errors import ConfigError
from ..record import Record

if TYPE_CHECKING:
    import tempfile

    from .catalog import Catalog


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

    def catalog(self, rescan: bool = False) -> tuple[Catalog, str, set[str]]:
        """The store's catalog of records (catalog.py) brought up to date with the store: (catalog, its generation
        before, the projects touched). Records left out add one line each to ``damaged``. ``rescan``: list and
        check every record even where the store looks unchanged (catalog.refresh)."""
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
    """Every valid record of a local store folder (through its catalog) or of any other store, sorted by file
    name; each record left out adds one line to ``damaged``; ``rescan``: see ``Store.catalog``."""
    loc = Location.of(store)
    opened = open_store(loc)
    if loc.local is None:
        records = sorted(opened.records(), key=lambda r: r.filename)  # read one by one: the bucket is not written
    else:
        from .. import report
        from ..record import FILES
        from .catalog import local_catalog, rebuilt, refresh, sqlite_problem

        try:
            catalog = local_catalog(loc.local)
        except sqlite3.DatabaseError as exc:  # Catalog() rebuilds a damaged file itself: this is another error
            raise sqlite_problem(str(loc.local / FILES), exc) from None
        files = loc.local / FILES
        try:
            if catalog.note is not None:
                report.warn(catalog.note)

            def attempt(again: bool) -> list[Record]:
                opened.damaged = []
                refresh(catalog, files, opened.damaged, rescan or again)
                return catalog.records()

            records = rebuilt(catalog, attempt, report.warn)
        finally:
            catalog.close()
    if damaged is not None:
        damaged.extend(opened.damaged)
    return records
