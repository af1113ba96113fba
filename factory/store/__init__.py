"""The store: the source of truth. Wheels, their ``.metadata`` files and ``.json`` records under ``<root>/files/``.

The index is rendered from the records alone. ``open_store``: a local folder (local.py) or ``s3://`` (s3.py).
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

    from .catalog import Catalog, Synced

MAX_BYTES = 1 << 20  # a small file of files/ that yank, status and prune read: a record is 1-3 KB


class Store(Protocol):
    """Where wheels and records live (local.py, s3.py), opened once per command with its options. Every command
    reads the records through the store's catalog (``load_records``; the index: ``open_catalog`` and ``sync``)."""

    display: str  # the store, for messages
    folder: Path | None  # a local store's folder (adoption and --repair work in it); None on S3

    # -- the files of files/
    def file_url(self, name: str) -> str:
        """Where ``files/<name>`` is, for messages."""

    def read(self, name: str, limit: int = MAX_BYTES) -> bytes | None:
        """The bytes of ``files/<name>`` (at most ``limit`` + 1, never through a link); None where there is none."""

    def write(self, name: str, data: bytes) -> None:
        """Write ``files/<name>`` whole (renamed into place; on S3 one PUT); Unreachable, saying why, if refused."""

    def delete(self, name: str) -> bool:
        """Delete ``files/<name>`` (a link itself, never what it points to); whether it was there."""

    def wheel_stat(self, name: str) -> tuple[int, str, str | None] | None:
        """(size, a key that changes with the file, None or what is there instead of a file); None if absent."""

    def sha256_of(self, name: str) -> str:
        """A file's sha256, streamed; Unreachable where it cannot be read."""

    def wheel_metadata(self, name: str) -> bytes:
        """A wheel's METADATA; Refused or Unreachable where it cannot be read."""

    def put(self, wheel: Path, metadata: bytes, record: Record) -> None:
        """Store a wheel: the wheel, then its .metadata, then its record (a listed record always has its wheel)."""

    # -- the records, through the catalog (catalog.py)
    def open_catalog(self, adopting: bool = False, readonly: bool = False) -> Catalog:
        """The store's catalog, a cache rebuilt where missing or damaged; ``readonly``: a copy never written back."""

    def sync(self, catalog: Catalog, rescan: bool = False) -> Synced:
        """Bring ``catalog`` up to date with the store, reading only the records that changed (``rescan``: all)."""

    def save(self, catalog: Catalog, adopted: bool) -> None:
        """Keep what the run leaves in the catalog (an S3 store puts a changed one back: Unreachable if refused)."""

    # -- the run around it
    def lock(self) -> AbstractContextManager[None]:
        """One writer at a time: a local folder's lock file (lock.py); S3 needs none (shards write distinct keys)."""

    def work_dir(self, scratch: str | None) -> tempfile.TemporaryDirectory[str]:
        """A folder for wheels on their way in: in the store's file system (moved in by rename), else ``scratch``."""


def open_store(location: Store | Location | str | Path, options: Any = None) -> Store:
    """A local folder, or ``s3://bucket/prefix``; ``options`` (config.Options): put headers, the lock's wait. A store
    already open is itself."""
    if not isinstance(location, (Location, str, Path)):
        return location
    loc = location if isinstance(location, Location) else Location.parse(location)
    if loc.local is not None:
        from .local import LocalStore

        return LocalStore(loc.local, DEFAULT_LOCK_WAIT_S if options is None else options.variables.lock_wait_s)
    if loc.scheme != "s3":
        raise ConfigError(f"store {loc}: unknown scheme {loc.scheme}://; use a folder, file:// or s3://bucket/prefix")
    from ..s3util import PutOptions
    from .s3 import S3Store

    return S3Store(loc.display, PutOptions.from_options(options))


def load_records(
    store: Store | Location | str | Path, damaged: list[str] | None = None, rescan: bool = False,
    readonly: bool = False,
) -> list[Record]:
    """Every valid record of a store by file name, through its catalog (kept up to date in a local store unless
    ``readonly``: plan and build write nothing); each record left out adds a line to ``damaged``."""
    from .. import report
    from .catalog import rebuilt, sqlite_problem

    opened_store = open_store(store)
    try:
        catalog = opened_store.open_catalog(readonly=readonly)
    except sqlite3.DatabaseError as exc:  # Catalog() rebuilds a damaged file itself: this is another error
        raise sqlite_problem(opened_store.display, exc) from None
    lines: list[str] = []
    try:
        if catalog.note is not None:
            report.warn(catalog.note)

        def attempt(again: bool) -> list[Record]:
            lines[:] = [line for _wheel, line in opened_store.sync(catalog, rescan or again).errors]
            return catalog.records()

        records = rebuilt(catalog, attempt, report.warn)
    finally:
        catalog.close()
    if damaged is not None:
        damaged.extend(lines)
    return records
