"""The store on S3: ``s3://bucket/prefix/files/<wheel>``, ``.metadata`` and ``.json`` records.

N CI shards can ``build --store s3://...`` into one bucket at once: each wheel
is uploaded before its ``.metadata`` and its record, so a listed record always
has its wheel. Objects carry ``x-amz-meta-sha256`` and the content types the
S3 publish destination uses, so publishing the index to the same prefix finds
the wheels already there and uploads only the pages.
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from boto3.exceptions import Boto3Error
from botocore.exceptions import BotoCoreError, ClientError

from ..atomic import TMP_PREFIX
from ..errors import Unreachable
from ..record import FILES, Record
from ..s3util import (
    DEFAULT_PUT,
    PutOptions,
    explain,
    join_key,
    list_objects,
    make_client,
    parse_s3_url,
    put_bytes,
    remote_sha256,
    upload_file,
)
from .catalog import CATALOG_FILE, Catalog, Got, no_record, sync, text_of


class S3Store:
    """The Store protocol (store/__init__.py) over ``s3://bucket/prefix``."""

    def __init__(self, url: str, client: Any = None, put: PutOptions = DEFAULT_PUT) -> None:
        self.url = url
        self.put_options = put
        self.bucket, self.prefix = parse_s3_url(url, flag="--store")
        self.files_prefix = join_key(self.prefix, FILES)
        self.client = client if client is not None else make_client()
        self.endpoint = str(self.client.meta.endpoint_url)
        self.damaged: list[str] = []
        self.listing: dict[str, tuple[int, str]] = {}  # key -> (size, ETag), as catalog() last listed it
        self.unsaved = False  # the catalog changed since it was read: ``save`` puts it back

    def _fail(self, exc: BaseException) -> Unreachable:
        err = explain(exc, self.bucket, self.endpoint, flag="--store")
        return err if isinstance(err, Unreachable) else Unreachable(str(err))

    def key(self, name: str) -> str:
        """The object key of a file of the store's files/ (a wheel, its .metadata or its record)."""
        return f"{self.files_prefix}/{name}"

    def _listing(self) -> dict[str, tuple[int, str]]:
        try:
            return list_objects(self.client, self.bucket, self.files_prefix)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(exc) from None

    def file_listing(self) -> dict[str, tuple[int, str]]:
        """File name in files/ -> (size, ETag), from the listing ``catalog()`` took (filecheck.Files)."""
        cut = len(self.files_prefix) + 1
        return {k[cut:]: v for k, v in self.listing.items() if k.startswith(f"{self.files_prefix}/")}

    def read_file(self, name: str) -> bytes:
        """The bytes of a file in files/ (Unreachable where it cannot be read)."""
        return self.get(self.key(name))

    def write_file(self, name: str, data: bytes, sha256: str) -> None:
        """Put a file in files/ (Unreachable where it cannot be written: read-only credentials)."""
        try:
            put_bytes(self.client, data, self.bucket, self.key(name), sha256, self.put_options)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(exc) from None

    def file_url(self, name: str) -> str:
        """The s3:// URL of a file in files/, for messages."""
        return self.object_url(self.key(name))

    def catalog_changed(self) -> None:
        """The catalog changed after ``catalog()``: ``save`` puts it back."""
        self.unsaved = True

    def get(self, key: str) -> bytes:
        """An object's bytes (Unreachable where it cannot be read)."""
        try:
            body: bytes = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(exc) from None
        return body

    def records(self) -> list[Record]:
        """Every valid ``files/*.whl.json`` record whose wheel object exists, sorted by file name.

        Each record skipped (damaged, invalid, too big, without its wheel) adds one line to ``damaged``.
        """
        from . import check as record_check

        self.damaged = []
        listing = self._listing()
        keys: list[str] = []
        for key in sorted(listing):
            name = key[len(self.files_prefix) + 1:]
            if not name.endswith(".whl.json") or "/" in name or name.startswith("."):
                continue
            if key.removesuffix(".json") not in listing:
                self.damaged.append(record_check.missing_wheel(self.object_url(key), name.removesuffix(".json")))
            elif listing[key][0] > record_check.MAX_RECORD_BYTES:
                self.damaged.append(f"{self.object_url(key)}: {listing[key][0]} bytes, more than a record may hold "
                                    f"({record_check.MAX_RECORD_BYTES}); {record_check.REMOTE_HINT}")
            else:
                keys.append(key)
        records: list[Record] = []
        with ThreadPoolExecutor(max_workers=16) as pool:
            for key, data in zip(keys, pool.map(self.get, keys), strict=True):
                name = key[len(self.files_prefix) + 1:].removesuffix(".json")
                try:
                    records.append(record_check.parse(data, name, self.object_url(key), record_check.REMOTE_HINT))
                except record_check.BadRecord as exc:
                    self.damaged.append(str(exc))
        return records

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """No lock: shards write distinct keys, each wheel before its record."""
        return contextlib.nullcontext()

    def work_dir(self, scratch: str | None) -> tempfile.TemporaryDirectory[str]:
        from ..space import scratch_dir

        return scratch_dir(scratch, prefix="kernel-factory-work-")

    def object_url(self, key: str) -> str:
        """The s3:// URL of an object key, for messages."""
        return f"s3://{self.bucket}/{key}"

    def catalog(self, rescan: bool = False) -> tuple[Catalog, str, set[str]]:
        """The store's catalog (``files/.catalog.sqlite`` in the bucket) brought up to date with one listing;
        (catalog, its generation before, the projects touched).

        A record is read only when its ETag differs from the catalog's key for it, so an unchanged store
        costs the listing and one GET; a changed catalog is put back by ``save`` once the run has checked it.
        ``rescan``: read every record.
        Wheels without a record add one line each to ``damaged``.
        """
        listing = self.listing = self._listing()
        key = self.key(CATALOG_FILE)
        data: bytes | None = None
        if key in listing:
            try:
                data = self.get(key)
            except Unreachable:
                data = None
        folder = Path(tempfile.mkdtemp(prefix=TMP_PREFIX + "catalog-"))
        path = folder / CATALOG_FILE
        if data is not None:
            path.write_bytes(data)
        catalog = Catalog(path, scratch=folder)
        before = catalog.generation()
        self.unsaved = data is None
        return catalog, before, self.refresh(catalog, rescan)

    def refresh(self, catalog: Catalog, rescan: bool = False) -> set[str]:
        """Bring ``catalog`` up to date with the listing ``catalog()`` took; the projects touched (see
        ``catalog``; index/command.py calls it again on a catalog rebuilt after damage)."""
        from . import check as record_check

        listing = self.listing

        self.damaged = []
        cut = len(self.files_prefix) + 1
        records: dict[str, str] = {}  # wheel -> ETag of its record
        for k, (size, etag) in sorted(listing.items()):
            name = k[cut:]
            if not name.endswith(".whl.json") or "/" in name or name.startswith("."):
                continue
            if k.removesuffix(".json") not in listing:
                self.damaged.append(record_check.missing_wheel(self.object_url(k), name.removesuffix(".json")))
            elif size > record_check.MAX_RECORD_BYTES:
                self.damaged.append(f"{self.object_url(k)}: {size} bytes, more than a record may hold "
                                    f"({record_check.MAX_RECORD_BYTES}); {record_check.REMOTE_HINT}")  # fmt: skip
            else:
                records[name.removesuffix(".json")] = etag
        for k in sorted(listing):
            name = k[cut:]
            if name.endswith(".whl") and "/" not in name and not name.startswith(".") and f"{k}.json" not in listing:
                self.damaged.append(no_record(self.object_url(k), name, remote=True))

        def read(wheels: list[str]) -> list[Got]:
            keys = [self.key(f"{w}.json") for w in wheels]
            found: list[Got] = []
            with ThreadPoolExecutor(max_workers=16) as pool:
                for wheel, key, body in zip(wheels, keys, pool.map(self.get, keys), strict=True):
                    try:
                        record = record_check.parse(body, wheel, self.object_url(key), record_check.REMOTE_HINT)
                    except record_check.BadRecord as exc:
                        self.damaged.append(str(exc))
                        found.append((wheel, None, None))
                    else:
                        found.append((wheel, record, text_of(body)))
            return found

        touched = sync(catalog, records, read, rescan)
        self.unsaved = self.unsaved or bool(touched) or catalog.note is not None  # put back by ``save``
        return touched

    def save(self, catalog: Catalog) -> None:
        """Put the catalog back if ``catalog()`` or the file check changed it (``unsaved``): one PUT; a refused
        PUT is ignored (the next run reads the changes again)."""
        if not self.unsaved:
            return
        self.unsaved = False
        blob = Path(catalog.path).read_bytes()
        try:
            put_bytes(self.client, blob, self.bucket, self.key(CATALOG_FILE), hashlib.sha256(blob).hexdigest(),
                      self.put_options)  # fmt: skip
        except (BotoCoreError, ClientError):
            pass  # read-only credentials

    def put(self, wheel: Path, metadata: bytes, record: Record) -> None:
        """Upload the wheel, then its .metadata, then the record; the local wheel is removed (moved in)."""
        name = record.filename
        try:
            if remote_sha256(self.client, self.bucket, self.key(name)) != record.sha256:
                upload_file(self.client, wheel, self.bucket, self.key(name), record.sha256, put=self.put_options)
            put_bytes(self.client, metadata, self.bucket, self.key(f"{name}.metadata"),
                      hashlib.sha256(metadata).hexdigest(), self.put_options)
            data = record.to_json()
            put_bytes(self.client, data, self.bucket, self.key(f"{name}.json"), hashlib.sha256(data).hexdigest(),
                      self.put_options)
        except (Boto3Error, BotoCoreError, ClientError) as exc:  # boto3 wraps ClientError in S3UploadFailedError
            raise self._fail(exc) from None
        wheel.unlink(missing_ok=True)
