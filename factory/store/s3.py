"""The store on S3: ``s3://bucket/prefix/files/``. N CI shards can build into one bucket at once (each wheel is
uploaded before its ``.metadata`` and record). Objects carry what the S3 destination puts (s3util.Bucket), so
publishing the index to the same prefix finds the wheels already there and uploads only the pages."""

from __future__ import annotations

import contextlib
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import Unreachable, UsageError
from ..nofollow import Hashing
from ..record import FILES, MAX_RECORD_BYTES, Record
from ..s3util import DEFAULT_PUT, Bucket, PutOptions
from ..space import scratch_dir
from . import MAX_BYTES
from . import check as record_check
from .catalog import CATALOG_FILE, Catalog, Got, Synced, sync


class S3Store:
    def __init__(self, url: str, put: PutOptions = DEFAULT_PUT) -> None:
        self.url = self.display = url
        self.bucket = Bucket(f"{url.rstrip('/')}/{FILES}", put, flag="--store")
        self.listing: dict[str, tuple[int, str]] = {}  # name in files/ -> (size, ETag), as open_catalog listed it
        self.folder: Path | None = None  # no folder to adopt into or repair in

    def file_url(self, name: str) -> str:
        return self.bucket.url(self.bucket.key(name))

    # -- the small files of files/ that yank, status and prune change: one GET, one PUT ---------------------

    def read(self, name: str, limit: int = MAX_BYTES) -> bytes | None:
        return self.bucket.get(self.bucket.key(name), limit)

    def write(self, name: str, data: bytes) -> None:
        try:
            self.bucket.put_bytes(self.bucket.key(name), data)
        except Unreachable as exc:
            raise Unreachable(f"{self.file_url(name)} cannot be written: {exc}") from None

    def delete(self, name: str) -> bool:
        """Delete ``files/<name>`` where kernel-factory wrote it (it carries the sha256); whether it was there."""
        if self.bucket.sha256(self.bucket.key(name)) is None:
            return False  # gone (or not written by kernel-factory: left alone)
        self.bucket.delete(self.bucket.key(name))
        return True

    def lock(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def work_dir(self, scratch: str | None) -> tempfile.TemporaryDirectory[str]:
        return scratch_dir(scratch, prefix="kernel-factory-work-")

    # -- the records, through the catalog ---------------------------------------------------------------------

    def open_catalog(self, adopting: bool = False, readonly: bool = False) -> Catalog:
        """A copy of ``files/.catalog.sqlite`` from the bucket, after one listing of ``files/`` (kept for ``sync`` and
        the file check): an unchanged store costs the listing and one GET; only ``save`` puts it back."""
        if adopting:
            raise UsageError(f"--wheels needs a local store folder, not {self.url}; adopt into a folder first")
        cut = len(self.bucket.prefix) + 1
        self.listing = {k[cut:]: v for k, v in self.bucket.list(self.bucket.prefix).items()}
        data = None
        with contextlib.suppress(Unreachable):
            data = self.bucket.get(self.bucket.key(CATALOG_FILE)) if CATALOG_FILE in self.listing else None
        folder = scratch_dir(None, prefix="kernel-factory-catalog-")  # swept by the next run if this one is killed
        try:
            if data is not None:
                Path(folder.name, CATALOG_FILE).write_bytes(data)
            return Catalog(Path(folder.name, CATALOG_FILE), scratch=folder)
        except BaseException:
            folder.cleanup()
            raise

    def sync(self, catalog: Catalog, rescan: bool = False) -> Synced:
        """Up to date with ``open_catalog``'s listing: a record is read where its ETag is not the catalog's key."""
        records: dict[str, str] = {}  # wheel -> ETag of its record
        found = Synced(listing=records, names=set(self.listing))
        for name, (size, etag) in sorted(self.listing.items()):
            if "/" in name or name.startswith("."):
                continue
            wheel = name.removesuffix(".json")
            if name.endswith(".whl.json") and wheel not in self.listing:
                found.errors.append((wheel, record_check.missing_wheel(self.file_url(name), wheel)))
            elif name.endswith(".whl.json") and size > MAX_RECORD_BYTES:
                found.errors.append((wheel, f"{self.file_url(name)}: {size} bytes, more than a record may hold "
                                            f"({MAX_RECORD_BYTES}); {record_check.REMOTE_HINT}"))
            elif name.endswith(".whl.json"):
                records[wheel] = etag
            elif name.endswith(".whl") and f"{name}.json" not in self.listing:
                found.errors.append((name, record_check.no_record(self.file_url(name), name, remote=True)))

        def read(wheels: list[str]) -> list[Got]:
            with ThreadPoolExecutor(max_workers=16) as pool:  # a record deleted since the listing: None, removed
                datas = list(pool.map(self.bucket.get, [self.bucket.key(f"{w}.json") for w in wheels]))
            where = [self.file_url(f"{w}.json") for w in wheels]
            got = record_check.parse_many(wheels, datas, where, record_check.REMOTE_HINT)
            found.errors += [(wheel, why) for wheel, _record, _text, why in got if why is not None]
            return [(wheel, record, text) for wheel, record, text, _why in got]

        found.touched = sync(catalog, records, read, rescan)
        return found

    def wheel_stat(self, name: str) -> tuple[int, str, str | None] | None:
        got = self.listing.get(name)
        return None if got is None else (got[0], got[1], None)

    def sha256_of(self, name: str) -> str:
        """Streamed (a wheel may be gigabytes); a read that still fails after s3transfer's retries is Unreachable
        (exit 4), never a digest that differs from every record's."""
        sink = Hashing()
        self._download(name, sink)
        return sink.hexdigest()

    def wheel_metadata(self, name: str) -> bytes:
        """A wheel's METADATA, read with wheelinfo's caps from a copy of the object streamed to scratch."""
        from .wheelinfo import read_wheel_info

        with scratch_dir(None, prefix="kernel-factory-wheel-") as tmp:
            path = Path(tmp, name)
            with open(path, "wb") as f:
                self._download(name, f)
            return read_wheel_info(path)[0]

    def _download(self, name: str, sink: object) -> None:
        if not self.bucket.download(self.bucket.key(name), sink):
            raise Unreachable(f"{self.file_url(name)}: gone since the store was listed (another writer?); run "
                              "the command again")

    def save(self, catalog: Catalog, adopted: bool) -> None:
        if catalog.changed:
            self.write(CATALOG_FILE, Path(catalog.path).read_bytes())

    def put(self, wheel: Path, metadata: bytes, record: Record) -> None:
        name = record.filename
        if self.bucket.sha256(self.bucket.key(name)) != record.sha256:
            self.bucket.upload(wheel, self.bucket.key(name), record.sha256)
        self.bucket.put_bytes(self.bucket.key(f"{name}.metadata"), metadata)
        self.bucket.put_bytes(self.bucket.key(f"{name}.json"), record.to_json())
        wheel.unlink(missing_ok=True)
