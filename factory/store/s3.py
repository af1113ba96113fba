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
import json
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from boto3.exceptions import Boto3Error
from botocore.exceptions import BotoCoreError, ClientError

from ..errors import Unreachable, UsageError
from ..record import FILES, Record
from ..s3util import (
    DEFAULT_PUT,
    TRANSFER,
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
from ..space import scratch_dir
from . import MAX_BYTES
from .catalog import CATALOG_FILE, Catalog, Got, Synced, sync, text_of


class _Sink:
    """A file-like object that hashes what is written to it (a download streamed into a digest)."""

    def __init__(self, digest: Any) -> None:
        self.digest = digest

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return len(data)


class S3Store:
    """The Store protocol (store/__init__.py) over ``s3://bucket/prefix``."""

    def __init__(self, url: str, client: Any = None, put: PutOptions = DEFAULT_PUT) -> None:
        self.url = url
        self.put_options = put
        self.bucket, self.prefix = parse_s3_url(url, flag="--store")
        self.files_prefix = join_key(self.prefix, FILES)
        self.client = client if client is not None else make_client()
        self.endpoint = str(self.client.meta.endpoint_url)
        self.listing: dict[str, tuple[int, str]] = {}  # name in files/ -> (size, ETag), as open_catalog listed it
        self.display = url
        self.folder: Path | None = None  # no folder to adopt into or repair in

    # -- the small files of files/ that yank, status and prune change: one GET, one PUT ---------------------

    def read(self, name: str, limit: int = MAX_BYTES) -> bytes | None:
        """The bytes of ``files/<name>`` (at most ``limit`` + 1), or None when there is none."""
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self.key(name))["Body"]
            data: bytes = body.read(limit + 1)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise self._fail(exc) from None
        except BotoCoreError as exc:
            raise self._fail(exc) from None
        return data

    def write(self, name: str, data: bytes) -> None:
        """Put ``files/<name>`` with the store's put options (Unreachable, saying why, where it cannot be)."""
        try:
            put_bytes(self.client, data, self.bucket, self.key(name), hashlib.sha256(data).hexdigest(),
                      self.put_options)  # fmt: skip
        except (BotoCoreError, ClientError) as exc:
            raise Unreachable(f"{self.file_url(name)} cannot be written: {self._fail(exc)}") from None

    def delete(self, name: str) -> bool:
        """Delete ``files/<name>`` where kernel-factory wrote it (it carries the sha256); whether it was there."""
        key = self.key(name)
        try:
            if remote_sha256(self.client, self.bucket, key) is None:
                return False  # gone (or not written by kernel-factory: left alone)
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(exc) from None
        return True

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

    def get(self, key: str) -> bytes:
        """An object's bytes (Unreachable where it cannot be read)."""
        try:
            body: bytes = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(exc) from None
        return body

    def lock(self) -> contextlib.AbstractContextManager[None]:
        """No lock: shards write distinct keys, each wheel before its record."""
        return contextlib.nullcontext()

    def work_dir(self, scratch: str | None) -> tempfile.TemporaryDirectory[str]:
        return scratch_dir(scratch, prefix="kernel-factory-work-")

    def object_url(self, key: str) -> str:
        """The s3:// URL of an object key, for messages."""
        return f"s3://{self.bucket}/{key}"

    # -- the records, through the catalog ---------------------------------------------------------------------

    def open_catalog(self, adopting: bool = False, readonly: bool = False) -> Catalog:
        """The store's catalog (``files/.catalog.sqlite`` in the bucket), read after one listing of ``files/``
        (kept for ``sync`` and the file check): an unchanged store costs the listing and one GET. ``adopting``:
        refused, there is no folder to adopt into. A copy either way (``readonly``): only ``save`` puts it back."""
        if adopting:
            raise UsageError(f"--wheels needs a local store folder, not {self.url}; adopt into a folder first")
        cut = len(self.files_prefix) + 1
        self.listing = {k[cut:]: v for k, v in self._listing().items() if k.startswith(f"{self.files_prefix}/")}
        data: bytes | None = None
        if CATALOG_FILE in self.listing:
            try:
                data = self.get(self.key(CATALOG_FILE))
            except Unreachable:
                data = None
        folder = scratch_dir(None, prefix="kernel-factory-catalog-")  # swept by the next run if this one is killed
        try:
            if data is not None:
                Path(folder.name, CATALOG_FILE).write_bytes(data)
            return Catalog(Path(folder.name, CATALOG_FILE), scratch=folder)
        except BaseException:
            folder.cleanup()
            raise

    def sync(self, catalog: Catalog, rescan: bool = False) -> Synced:
        """Bring ``catalog`` up to date with the listing ``open_catalog`` took: a record is read only when its
        ETag differs from the catalog's key for it (``rescan``: every record)."""
        from . import check as record_check

        found = Synced(names=set(self.listing))
        records: dict[str, str] = {}  # wheel -> ETag of its record
        for name, (size, etag) in sorted(self.listing.items()):
            if "/" in name or name.startswith("."):
                continue
            wheel = name.removesuffix(".json")
            if name.endswith(".whl.json") and wheel not in self.listing:
                found.errors.append((wheel, record_check.missing_wheel(self.file_url(name), wheel)))
            elif name.endswith(".whl.json") and size > record_check.MAX_RECORD_BYTES:
                found.errors.append((wheel, f"{self.file_url(name)}: {size} bytes, more than a record may hold "
                                            f"({record_check.MAX_RECORD_BYTES}); {record_check.REMOTE_HINT}"))
            elif name.endswith(".whl.json"):
                records[wheel] = etag
            elif name.endswith(".whl") and f"{name}.json" not in self.listing:
                found.errors.append((name, record_check.no_record(self.file_url(name), name, remote=True)))

        def read(wheels: list[str]) -> list[Got]:
            got: list[Got] = []
            with ThreadPoolExecutor(max_workers=16) as pool:
                for wheel, body in zip(wheels, pool.map(self.get, [self.key(f"{w}.json") for w in wheels]),
                                       strict=True):  # fmt: skip
                    try:
                        record = record_check.parse(body, wheel, self.file_url(f"{wheel}.json"),
                                                    record_check.REMOTE_HINT)  # fmt: skip
                    except record_check.BadRecord as exc:
                        found.errors.append((wheel, str(exc)))
                        got.append((wheel, None, None))
                    else:
                        got.append((wheel, record, text_of(body)))
            return got

        found.listing = records
        found.touched = sync(catalog, records, read, rescan)
        return found

    def wheel_stat(self, name: str) -> tuple[int, str, str | None] | None:
        """(size, ETag, None) of a wheel object, from the listing."""
        got = self.listing.get(name)
        return None if got is None else (got[0], got[1], None)

    def sha256_of(self, name: str) -> str:
        """The sha256 of an object, streamed (a wheel may be gigabytes); a read cut off midway is tried again
        (s3transfer's download retries), and one that still fails is Unreachable (exit 4), never a digest that
        differs from every record's."""
        digest = hashlib.sha256()
        self._download(name, _Sink(digest))
        return digest.hexdigest()

    def wheel_metadata(self, name: str) -> bytes:
        """A wheel's METADATA, read with wheelinfo's caps from a copy of the object streamed to scratch."""
        from .wheelinfo import read_wheel_info

        with scratch_dir(None, prefix="kernel-factory-wheel-") as tmp:
            path = Path(tmp, name)
            with open(path, "wb") as f:
                self._download(name, f)
            return read_wheel_info(path)[0]

    def _download(self, name: str, sink: Any) -> None:
        """Stream an object of files/ into ``sink`` (its ``write``), in order."""
        try:
            self.client.download_fileobj(self.bucket, self.key(name), sink, Config=TRANSFER)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
                raise Unreachable(f"{self.file_url(name)}: gone since the store was listed (another writer?); run "
                                  "the command again") from None
            raise self._fail(exc) from None
        except (Boto3Error, BotoCoreError) as exc:
            raise self._fail(exc) from None

    def file_url(self, name: str) -> str:
        """The s3:// URL of a file in files/, for messages."""
        return self.object_url(self.key(name))

    def save(self, catalog: Catalog, adopted: bool) -> None:
        """Put the catalog back where this run changed it: one PUT, with the store's put options; a refused PUT
        is Unreachable (exit 4), naming the object and why."""
        if catalog.changed:
            self.write(CATALOG_FILE, Path(catalog.path).read_bytes())

    def forget_listing(self, catalog: Catalog) -> None:
        """Nothing: the bucket is listed on every run."""

    def mark_index(self, out: Path) -> None:
        """Name this store in the index root, where publish finds the wheels the pages link."""
        from ..atomic import write_bytes
        from ..publish.linked import STORE_FILE

        write_bytes(out / STORE_FILE, json.dumps({"store": self.url}).encode())

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
