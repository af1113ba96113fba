"""A store on a local file system: wheels, ``.metadata`` files and ``.json`` records under ``<root>/files/``.

A wheel is stored in the order wheel -> .metadata -> record, each atomically,
so a record only exists once its wheel and metadata are whole.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from ..atomic import copy_file, real_folder, write_bytes
from ..config import DEFAULT_LOCK_WAIT_S
from ..errors import unusable
from ..record import FILES, Record
from . import check
from .catalog import Catalog, open_local


class LocalStore:
    """``<root>/files/`` on a local file system."""

    def __init__(self, root: Path, lock_wait_s: float = DEFAULT_LOCK_WAIT_S) -> None:
        self.root = Path(root)
        self.lock_wait_s = lock_wait_s  # KERNEL_FACTORY_LOCK_WAIT (config.Environment)
        self.files = self.root / FILES
        self.damaged: list[str] = []

    def iter_records(self) -> Iterator[Record]:
        """Valid records whose wheel is there; each record skipped adds one line to ``damaged``."""
        self.damaged = []
        if not self.files.is_dir():
            return
        for entry in sorted(os.scandir(self.files), key=lambda e: e.name):
            if entry.name.startswith(".") or not entry.name.endswith(".whl.json"):
                continue
            wheel = entry.name.removesuffix(".json")
            where = f"{self.files / entry.name}"
            if not (self.files / wheel).exists():
                self.damaged.append(check.missing_wheel(where, wheel))
                continue
            try:
                with open(entry.path, "rb") as f:
                    data = f.read(check.MAX_RECORD_BYTES + 1)
                yield check.parse(data, wheel, where)
            except check.BadRecord as exc:
                self.damaged.append(str(exc))
            except FileNotFoundError:
                continue

    def records(self) -> list[Record]:
        return list(self.iter_records())

    def catalog(self, rescan: bool = False) -> tuple[Catalog, str, set[str]]:
        """The folder's catalog, brought up to date with ``files/`` (catalog.open_local)."""
        self.damaged = []
        return open_local(self.root, self.damaged, rescan)

    def lock(self) -> AbstractContextManager[None]:
        from .lock import folder_lock

        return folder_lock(self.root, self.lock_wait_s)

    def work_dir(self, scratch: str | None) -> tempfile.TemporaryDirectory[str]:
        """In ``files/``: wheels move in by rename; ``.tmp-`` names are hidden from listings."""
        try:
            self.files.mkdir(parents=True, exist_ok=True)
            return tempfile.TemporaryDirectory(prefix=".tmp-work-", dir=self.files)
        except OSError as exc:
            raise unusable(exc, self.files) or exc from None

    def put(self, wheel: Path, metadata: bytes, record: Record) -> None:
        """Move (or copy) ``wheel`` in, then its .metadata, then the record; each atomic."""
        real_folder(self.files)  # never into a link's folder
        self.files.mkdir(parents=True, exist_ok=True)
        dest = self.files / record.filename
        if wheel.resolve() != dest.resolve():
            try:
                os.replace(wheel, dest)  # same file system: an atomic rename
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    exc.filename = str(dest)
                    raise
                copy_file(wheel, dest)
        write_bytes(self.files / f"{record.filename}.metadata", metadata)
        write_bytes(self.files / f"{record.filename}.json", record.to_json())
