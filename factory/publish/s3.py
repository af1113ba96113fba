"""``s3://bucket/prefix`` as a publish destination, and the S3 helpers store_s3.py shares.

boto3 finds the endpoint (``AWS_ENDPOINT_URL``), region and credentials the
usual ways. Each object carries its sha256 as ``x-amz-meta-sha256`` (multipart
ETags are not md5 sums), so a file is uploaded only when new or changed: one
listing, and a HEAD only for an object of the same size whose ETag is not
the local file's md5. Keys
are the raw file names (``+`` included); pages link ``%2B``, which S3 decodes.
"""

from __future__ import annotations

import difflib
import mimetypes
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from boto3.exceptions import Boto3Error
from boto3.s3.transfer import S3Transfer, TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from ..atomic import file_digest
from ..errors import ConfigError, FactoryError, Unreachable, UsageError
from ..record import PEP691_JSON
from .base import LocalFile, State

SHA_KEY = "sha256"  # user metadata key: x-amz-meta-sha256
MB = 1 << 20
TRANSFER = TransferConfig(multipart_threshold=64 * MB, multipart_chunksize=64 * MB, max_concurrency=4)
IMMUTABLE = "public, max-age=31536000, immutable"
PAGES = "public, max-age=300"
OWN_ARGS = frozenset({"ContentType", "Metadata", "CacheControl"})
_AUTH_CODES = {
    "InvalidAccessKeyId": "the access key id is not known",
    "SignatureDoesNotMatch": "the secret key does not match the access key id",
    "AccessDenied": "access is denied",
    "ExpiredToken": "the session token has expired",
    "InvalidToken": "the session token is not valid",
    "403": "access is denied",
    "Forbidden": "access is denied",
}
_BUSY_CODES = {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "ServiceUnavailable",
               "InternalError", "503", "500"}
_CRED_HINT = "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) and the bucket policy"


def parse_s3_url(url: str, flag: str = "--to") -> tuple[str, str]:
    """``s3://bucket/some/prefix/`` -> ``("bucket", "some/prefix")``."""
    rest = url.removeprefix("s3://")
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise UsageError(f"{flag} {url!r} names no bucket; write s3://BUCKET/PREFIX")
    return bucket, prefix.strip("/")


def join_key(prefix: str, rel: str) -> str:
    return f"{prefix}/{rel}" if prefix else rel


def content_type(rel: str) -> str:
    """The Content-Type an index host should serve ``rel`` with."""
    name = rel.rsplit("/", 1)[-1]
    if name.endswith(".whl"):
        return "application/octet-stream"
    if name.endswith(".metadata"):  # PEP 658 core metadata: RFC 822 text
        return "text/plain; charset=utf-8"
    if name == "index.json" and "simple" in rel.split("/"):
        return PEP691_JSON
    if name.endswith(".json"):
        return "application/json"
    if name.endswith((".html", ".htm")):
        return "text/html; charset=utf-8"
    guessed, _ = mimetypes.guess_type(name)
    if guessed is None:
        return "application/octet-stream"
    return f"{guessed}; charset=utf-8" if guessed.startswith("text/") else guessed


def make_client() -> Any:
    """An S3 client from the usual environment (``AWS_ENDPOINT_URL`` included), with short connect timeouts.

    Throttling (``SlowDown``) and 5xx answers are retried by botocore's standard retry mode (exponential backoff,
    5 attempts); ``AWS_MAX_ATTEMPTS`` and ``AWS_RETRY_MODE`` change that, as in the AWS CLI.
    """
    env = os.environ
    retries: Any = None if env.get("AWS_MAX_ATTEMPTS") or env.get("AWS_RETRY_MODE") else \
        {"max_attempts": 5, "mode": "standard"}
    config = Config(connect_timeout=10, read_timeout=120, retries=retries, max_pool_connections=32)
    return boto3.session.Session().client("s3", config=config)


def _client_error(exc: BaseException) -> ClientError | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ClientError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def explain(exc: BaseException, bucket: str, endpoint: str, flag: str = "--to") -> FactoryError:
    """A boto3/botocore failure -> one Unreachable line naming the problem and the fix (never a secret)."""
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return Unreachable(f"no AWS credentials for s3://{bucket}; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    err = _client_error(exc)
    if err is not None:
        code = str(err.response.get("Error", {}).get("Code", "")) or "error"
        if code in ("NoSuchBucket", "404", "NotFound"):
            return Unreachable(f"bucket {bucket} does not exist; create it or fix {flag}")
        if code in _AUTH_CODES:
            return Unreachable(f"S3 refused the credentials for s3://{bucket} ({code}: {_AUTH_CODES[code]}); "
                               f"{_CRED_HINT}")
        message = str(err.response.get("Error", {}).get("Message", "")).splitlines()[0:1]
        detail = f": {message[0]}" if message else ""
        status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in _BUSY_CODES or (isinstance(status, int) and status >= 500):
            tries = int(err.response.get("ResponseMetadata", {}).get("RetryAttempts", 0)) + 1
            return Unreachable(f"S3 at {endpoint} is busy or failing ({code}{detail}) for s3://{bucket} after "
                               f"{tries} attempt{'s' if tries != 1 else ''}; retry later "
                               "(AWS_MAX_ATTEMPTS allows more)")
        return Unreachable(f"S3 error {code} on s3://{bucket}{detail}; check {flag} and AWS_ENDPOINT_URL")
    if isinstance(exc, BotoCoreError):
        return Unreachable(f"cannot reach S3 at {endpoint} ({type(exc).__name__}); check AWS_ENDPOINT_URL "
                           "and the network")
    return Unreachable(f"S3 upload to s3://{bucket} failed: {str(exc).splitlines()[0]}; check {flag}")


def list_objects(client: Any, bucket: str, prefix: str) -> dict[str, tuple[int, str]]:
    """Every key under ``prefix/`` -> (size, ETag without quotes)."""
    found: dict[str, tuple[int, str]] = {}
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/" if prefix else "")
    for page in pages:
        for obj in page.get("Contents", []):
            found[obj["Key"]] = (int(obj["Size"]), str(obj.get("ETag", "")).strip('"'))
    return found


def remote_sha256(client: Any, bucket: str, key: str) -> str | None:
    """The ``x-amz-meta-sha256`` of ``key``, or None (missing object, or no such metadata)."""
    try:
        head = client.head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
            return None
        raise
    meta: dict[str, str] = head.get("Metadata", {})
    return meta.get(SHA_KEY)


@dataclass(frozen=True)
class PutOptions:
    """What every put carries besides the bytes: Cache-Control per kind of file, and the ``s3-put-args``."""

    immutable: str = IMMUTABLE  # wheels and their .metadata: their bytes never change under one name
    pages: str = PAGES  # pages, PEP 691 JSON, records: they change when something is published
    args: tuple[tuple[str, str], ...] = ()  # ServerSideEncryption, SSEKMSKeyId, ACL, StorageClass, ...
    directory_keys: bool = False  # also put .../index.html at the key .../ (a CDN with no index documents)

    @classmethod
    def from_options(cls, opts: Any) -> PutOptions:
        """From config.Options; an argument boto3 does not take, or one kernel-factory sets itself, is refused."""
        allowed = set(S3Transfer.ALLOWED_UPLOAD_ARGS) - OWN_ARGS
        for key, _ in opts.s3_put_args:
            if key not in allowed:
                hint = difflib.get_close_matches(key, sorted(allowed), n=1)
                own = " (kernel-factory sets it; use cache-control-* for CacheControl)" if key in OWN_ARGS else ""
                raise ConfigError(f"s3-put-args: {key!r} is not an argument S3 uploads take{own}"
                                  + (f"; did you mean {hint[0]!r}?" if hint else ""))
        return cls(opts.cache_control_immutable, opts.cache_control_pages, tuple(opts.s3_put_args),
                   opts.s3_directory_keys)


DEFAULT_PUT = PutOptions()


def is_immutable(rel: str) -> bool:
    return rel.endswith((".whl", ".whl.metadata"))


def put_args(rel: str, sha256: str, put: PutOptions) -> dict[str, Any]:
    """ExtraArgs of one upload: content type, sha256, Cache-Control, then the configured arguments."""
    return {
        "ContentType": content_type(rel),
        "Metadata": {SHA_KEY: sha256},
        "CacheControl": put.immutable if is_immutable(rel) else put.pages,
        **dict(put.args),
    }


def directory_key(key: str) -> str | None:
    """``simple/relu/index.html`` -> ``simple/relu/`` (None for the bucket's own root)."""
    if key == "index.html" or not key.endswith("/index.html"):
        return None
    return key.removesuffix("index.html")


def upload_file(client: Any, path: Path, bucket: str, key: str, sha256: str, rel: str | None = None,
                put: PutOptions = DEFAULT_PUT) -> None:
    """Stream ``path`` to ``key`` (multipart when large), with its content type, sha256 and headers."""
    client.upload_file(str(path), bucket, key, ExtraArgs=put_args(rel or key, sha256, put), Config=TRANSFER)


def put_bytes(client: Any, data: bytes, bucket: str, key: str, sha256: str, put: PutOptions = DEFAULT_PUT) -> None:
    client.put_object(Bucket=bucket, Key=key, Body=data, **put_args(key, sha256, put))


class S3Destination:
    """Publish into ``s3://bucket/prefix``; nothing there is deleted."""

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

    def close(self) -> None:
        self.client.close()
