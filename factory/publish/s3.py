"""``s3://bucket/prefix`` as a publish destination (the S3 helpers it shares with the S3 store: s3util.py).

Each object carries its sha256 as ``x-amz-meta-sha256`` (multipart ETags are not
md5 sums), so a file is uploaded only when new or changed: one listing, and a
HEAD only for an object of the same size whose ETag is not the local file's md5.
Keys are the raw file names (``+`` included); pages link ``%2B``, which S3 decodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from boto3.exceptions import Boto3Error
from botocore.exceptions import BotoCoreError, ClientError

from ..atomic import file_digest
from ..errors import FactoryError
from ..s3util import (
    DEFAULT_PUT,
    PutOptions,
    explain,
    join_key,
    list_objects,
    make_client,
    parse_s3_url,
    remote_sha256,
    upload_file,
)
from .base import LocalFile, State


def directory_key(key: str) -> str | None:
    """``simple/relu/index.html`` -> ``simple/relu/`` (None for the bucket's own root)."""
    if key == "index.html" or not key.endswith("/index.html"):
        return None
    return key.removesuffix("index.html")


class S3Destination:
    """Publish into ``s3://bucket/prefix``; what is deleted there: the objects an earlier publish put that the
    store withdrew (withdrawals.py), only those that carry kernel-factory's sha256."""

    workers = 16

    def __init__(self, url: str, put: PutOptions = DEFAULT_PUT) -> None:
        self.put_options = put
        self.bucket, self.prefix = parse_s3_url(url)
        self.display = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        self.client = make_client()
        self.endpoint = str(self.client.meta.endpoint_url)
        self.existing: dict[str, tuple[int, str]] = {}

    def _fail(self, exc: BaseException) -> FactoryError:
        return explain(exc, self.bucket, self.endpoint)

    def wants(self, file: LocalFile) -> bool:
        return True

    def prepare(self, files: Sequence[LocalFile], *, dry_run: bool = False) -> None:
        try:
            self.existing = list_objects(self.client, self.bucket, self.prefix)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(exc) from None

    def state(self, file: LocalFile) -> State:
        key = join_key(self.prefix, file.rel)
        if key not in self.existing:
            return "new"
        alias = self._alias(key)
        if alias is not None and self.existing.get(alias, (-1, ""))[0] != file.size:
            return "changed"  # the page is there, its directory key is not (yet)
        size, etag = self.existing[key]
        if size != file.size:
            return "changed"
        if len(etag) == 32 and "-" not in etag and etag == file_digest(file.path, "md5"):
            return "same"  # a single-part upload's ETag is its md5: equal bytes, no request needed
        try:  # multipart (or encrypted) objects: compare the sha256 kept in the object's metadata
            remote = remote_sha256(self.client, self.bucket, key)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(exc) from None
        return "same" if remote == file.sha256() else "changed"

    def has(self, rel: str) -> bool:
        return join_key(self.prefix, rel) in self.existing

    def put(self, file: LocalFile) -> None:
        key = join_key(self.prefix, file.rel)
        try:
            upload_file(self.client, file.path, self.bucket, key, file.sha256(), file.rel, self.put_options)
            alias = self._alias(key)
            if alias is not None:
                upload_file(self.client, file.path, self.bucket, alias, file.sha256(), file.rel, self.put_options)
        except (Boto3Error, BotoCoreError, ClientError) as exc:  # boto3 wraps ClientError in S3UploadFailedError
            raise self._fail(exc) from None

    def _alias(self, key: str) -> str | None:
        return directory_key(key) if self.put_options.directory_keys else None

    def same_root(self, root: Path) -> bool:
        return False

    def remove(self, rel: str, size: int) -> bool:
        """Delete the object ``rel`` (and its directory key) if it has ``size`` bytes and kernel-factory's sha256."""
        key = join_key(self.prefix, rel)
        if self.existing.get(key, (-1, ""))[0] != size:
            return False
        try:
            if remote_sha256(self.client, self.bucket, key) is None:
                return False  # not put by kernel-factory
            alias = self._alias(key)
            if alias is not None and alias in self.existing:
                self.client.delete_object(Bucket=self.bucket, Key=alias)
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except (BotoCoreError, ClientError) as exc:
            raise self._fail(exc) from None
        return True

    def close(self) -> None:
        self.client.close()
