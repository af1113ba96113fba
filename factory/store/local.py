"""The store in a local folder, ``<root>/files/``. Every writer renames into ``files/`` under the store lock, so the
folder's own stat says whether an entry changed since the catalog last matched its listing (``FILES_STATE``)."""

from __future__ import annotations

import errno
import operator
import os
import stat
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from contextlib import AbstractContextManager, suppress
from pathlib import Path
from typing import Any

from ..config import DEFAULT_LOCK_WAIT_S
from ..errors import Unreachable, unusable
from ..nofollow import copy_file, file_digest, open_nofollow, real_folder, refuse, write_bytes
from ..record import FILES, MAX_RECORD_BYTES, Record
from . import MAX_BYTES, check
from .catalog import CATALOG_FILE, FILES_STATE, Catalog, Got, Synced, record_key, sync
from .lock import folder_lock

TICK_NS = 20_000_000  # longer than a kernel clock tick (1/HZ, HZ >= 100): file times may be that coarse
READ_BATCH = 1000  # records read, then decoded by one json.loads
PARALLEL_READ = 5000  # records read in one sync from which batches are read and checked in worker processes
MAX_WORKERS = 16
Read = tuple[str, "Record | None", "str | None", "str | None"]  # wheel, its record, its file's text, why not


def folder_state(folder: Path) -> str | None:
    """A folder's own stat, which any entry added, removed or renamed over changes (None: no folder); one changed
    less than ``TICK_NS`` ago is stat'ed again after that, as coarse file times hide a change within a tick."""
    with suppress(FileNotFoundError):
        st = os.stat(folder)
        age = time.time_ns() - st.st_mtime_ns
        if 0 <= age < TICK_NS:
            time.sleep((TICK_NS - age) / 1e9)
            st = os.stat(folder)
        return f"{st.st_dev}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_size}"
    return None


def read_records(folder: str, batch: list[str], known_variants: bool = True) -> list[Read]:
    """``check.parse_many`` of the records of ``batch`` in ``folder``; ``known_variants``: see ``check.check``."""
    where = [os.path.join(folder, f"{w}.json") for w in batch]
    datas: list[bytes | None] = []
    for path in where:
        try:
            with open(path, "rb") as f:
                datas.append(f.read(MAX_RECORD_BYTES + 1))
        except FileNotFoundError:
            datas.append(None)
    return check.parse_many(batch, datas, where, known_variants=known_variants)


_VALUES = operator.attrgetter(*Record.__slots__)  # a Record's fields in order: what a worker sends back of it


def _read_in_worker(folder: str, batch: list[str]) -> list[tuple[str, tuple[Any, ...] | None, str | None, str | None]]:
    """``read_records`` in a worker process (variants by their shape): each record as its fields' values, which
    pickle in a third of the time a Record takes. Equal strings go as one object (pickle shares objects, not
    values): most fields repeat across a batch, and the main process keeps every record it read (catalog.py
    ``_checked``): 110,000 records took 100 MB less there (docs/index.md)."""
    shared: dict[str, str] = {}
    return [(wheel, None if record is None else tuple(shared.setdefault(v, v) if type(v) is str else v
                                                      for v in _VALUES(record)), text, why)
            for wheel, record, text, why in read_records(folder, batch, known_variants=False)]  # fmt: skip


class LocalStore:
    def __init__(self, root: Path, lock_wait_s: float = DEFAULT_LOCK_WAIT_S) -> None:
        self.root = Path(root)
        self.lock_wait_s = lock_wait_s  # KERNEL_FACTORY_LOCK_WAIT (config.Variables)
        self.files = self.root / FILES
        self.display = str(self.root)
        self.folder: Path | None = self.root  # adoption and --repair work on a folder

    # -- the small files of files/ that yank, status and prune change ---------------------------------------

    def read(self, name: str, limit: int = MAX_BYTES) -> bytes | None:
        with suppress(FileNotFoundError), os.fdopen(open_nofollow(self.files / name, "store file"), "rb") as f:
            return f.read(limit + 1)
        return None

    def write(self, name: str, data: bytes) -> None:
        if not os.access(self.files, os.W_OK):
            raise Unreachable("the store is read-only here: run `kernel-factory` where the store can be written")
        write_bytes(self.files / name, data)

    def delete(self, name: str) -> bool:
        with suppress(FileNotFoundError):
            os.unlink(self.files / name)
            return True
        return False

    def lock(self) -> AbstractContextManager[None]:
        return folder_lock(self.root, self.lock_wait_s)

    def work_dir(self, scratch: str | None) -> tempfile.TemporaryDirectory[str]:
        """In ``files/``: wheels move in by rename; ``.tmp-`` names are hidden from listings."""
        try:
            self.files.mkdir(parents=True, exist_ok=True)
            return tempfile.TemporaryDirectory(prefix=".tmp-work-", dir=self.files)
        except OSError as exc:
            raise unusable(exc, self.files) or exc from None

    def put(self, wheel: Path, metadata: bytes, record: Record) -> None:
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

    # -- the index's view (store/__init__.py Store) -----------------------------------------------------------

    def open_catalog(self, adopting: bool = False, readonly: bool = False) -> Catalog:
        """``files/.catalog.sqlite`` (in memory where not writable); ``adopting``: make ``files/`` first."""
        files = self.files
        if adopting:
            files.mkdir(parents=True, exist_ok=True)
        real_folder(files)  # files/ a link: the records, wheels and catalog would be another folder's
        if not files.is_dir() or not (readonly or os.access(files, os.W_OK)):
            return Catalog(":memory:")
        path = files / CATALOG_FILE
        for each in (path, files / f"{CATALOG_FILE}-journal"):
            with suppress(FileNotFoundError):  # SQLite opens (and rewrites) what a link points to: a link, or anything
                if not stat.S_ISREG(os.lstat(each).st_mode):  # but a file, is refused
                    raise refuse(each, "catalog")
        return Catalog.copy_of(path) if readonly else Catalog(path)

    def sync(self, catalog: Catalog, rescan: bool = False) -> Synced:
        """Nothing is listed where the folder's stat is the one the catalog last matched; that stat is kept only
        when no record was left out and every file is paired, so such a problem is named on every run until fixed."""
        state = folder_state(self.files)
        if not rescan and state and catalog.meta(FILES_STATE) == state:
            return Synced()
        listing: dict[str, str] = {}
        names: set[str] = set()
        found = Synced(listing=listing, names=names)
        records: list[os.DirEntry[str]] = []
        try:
            with os.scandir(self.files) as it:
                for entry in it:
                    if not entry.name.startswith("."):
                        names.add(entry.name)
                        if entry.name.endswith(".whl.json"):
                            records.append(entry)
        except FileNotFoundError:
            return found
        gaps: list[tuple[str, str]] = []  # named after the records that fail their check
        for entry in sorted(records, key=lambda e: e.name):
            wheel = entry.name[:-5]
            if wheel not in names:
                gaps.append((wheel, check.missing_wheel(entry.path, wheel)))
                continue
            with suppress(FileNotFoundError):
                listing[wheel] = record_key(entry.stat())
        gaps += [(w, check.no_record(os.path.join(self.files, w), w)) for w in sorted(names)
                 if w.endswith(".whl") and w not in listing]  # fmt: skip
        found.touched = sync(catalog, listing, self._read(found), rescan)
        found.errors += gaps
        catalog.set_meta(FILES_STATE, state if state and not found.errors else "")
        return found

    def _read(self, found: Synced) -> Any:
        """A ``read`` for catalog.sync (a failed record: a line in ``found.errors``). From ``PARALLEL_READ`` records on,
        workers read batches (variants by shape) while this process loads the parser and checks each variant once."""

        def in_workers(batches: list[list[str]], workers: int) -> Iterator[list[Read]]:
            """Each batch's records, in order; a batch's results are let go once taken (a first read of 110,000
            records would hold them all twice)."""
            from .pool import worker_pool

            with worker_pool(workers) as pool:
                futures = deque(pool.submit(_read_in_worker, folder, batch) for batch in batches)
                check.variant_problem("torch-universal", None)  # meanwhile: loads kernels' parser (~0.3 s)
                while futures:
                    yield [(wheel, None if values is None else Record(*values), text, why)
                           for wheel, values, text, why in futures.popleft().result()]  # fmt: skip

        folder = os.fspath(self.files)

        def read(wheels: list[str]) -> Iterator[Got]:
            batches = [wheels[i : i + READ_BATCH] for i in range(0, len(wheels), READ_BATCH)]
            workers = min(os.cpu_count() or 1, MAX_WORKERS, len(batches))
            parsed = len(wheels) < PARALLEL_READ or workers <= 1
            results = (read_records(folder, batch) for batch in batches) if parsed else in_workers(batches, workers)
            for batch in results:
                for wheel, record, text, why in batch:
                    if record is not None and not parsed and record.variant is not None:
                        problem = check.variant_problem(record.variant, record.label)  # once per variant (cached)
                        if problem:
                            record, text = None, None
                            why = check.invalid(os.path.join(folder, f"{wheel}.json"), problem)
                    if why is not None:
                        found.errors.append((wheel, why))
                    yield wheel, record, text

        return read

    def wheel_stat(self, name: str) -> tuple[int, str, str | None] | None:
        try:
            st = os.stat(f"{self.files}{os.sep}{name}")  # no os.path.join: a no-op run makes one call per wheel
        except FileNotFoundError:
            return None
        kind = None if stat.S_ISREG(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        return st.st_size, record_key(st), kind

    def sha256_of(self, name: str) -> str:
        return file_digest(self.files / name)

    def wheel_metadata(self, name: str) -> bytes:
        from .wheelinfo import read_wheel_info

        return read_wheel_info(self.files / name)[0]

    def file_url(self, name: str) -> str:
        return str(self.files / name)

    def save(self, catalog: Catalog, adopted: bool) -> None:
        """Where ``files/`` matched the catalog before this run's adoption (its rows applied), it matches now."""
        if adopted and catalog.meta(FILES_STATE):
            catalog.set_meta(FILES_STATE, folder_state(self.files) or "")
