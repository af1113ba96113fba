"""S3, for the S3 store (store/s3.py) and publish (publish/s3.py, publish/linked.py): ``Bucket`` makes every call.

boto3 finds the endpoint (``AWS_ENDPOINT_URL``), region and credentials the usual ways. Each object carries its
sha256 as ``x-amz-meta-sha256`` (multipart ETags are not md5 sums), its content type and Cache-Control, and the
checked ``s3-put-args`` (``PutOptions``).
"""

from __future__ import annotations

import difflib
import hashlib
import mimetypes
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from boto3.exceptions import Boto3Error
from boto3.s3.transfer import S3Transfer, TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from .errors import ConfigError, Unreachable, UsageError
from .record import PEP691_JSON
from .safe_text import printable, quiet_credentials, redact_url

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


def parse_s3_url(url: str, flag: str = "--to") -> tuple[str, str]:
    """``s3://bucket/some/prefix/`` -> ``("bucket", "some/prefix")``."""
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
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


_CLIENTS: dict[tuple[int, tuple[tuple[str, str], ...]], Any] = {}
_CLIENTS_LOCK = threading.Lock()  # an s3:// store's uploads run on several threads


def make_client() -> Any:
    """The S3 client of this process and ``AWS_*`` environment (standard retries, 5 attempts, unless
    ``AWS_MAX_ATTEMPTS`` / ``AWS_RETRY_MODE`` say). One per process: making one costs 0.15-0.25 s of CPU; clients
    are thread-safe; a forked child makes its own; one closed (``close``) still works (new connections)."""
    key = (os.getpid(), tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_"))))
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            _CLIENTS.clear()
            retries: Any = None if os.environ.get("AWS_MAX_ATTEMPTS") or os.environ.get("AWS_RETRY_MODE") else \
                {"max_attempts": 5, "mode": "standard"}
            config = Config(connect_timeout=10, read_timeout=120, retries=retries, max_pool_connections=32)
            quiet_credentials()  # botocore's and urllib3's log lines print AWS_ENDPOINT_URL as given
            _CLIENTS[key] = boto3.session.Session().client("s3", config=config)
        return _CLIENTS[key]


def explain(exc: BaseException, bucket: str, endpoint: str, flag: str = "--to") -> Unreachable:
    """A boto3/botocore failure -> one Unreachable line naming the problem and the fix (never a secret)."""
    endpoint = redact_url(endpoint)  # AWS_ENDPOINT_URL may carry a user and password
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return Unreachable(f"no AWS credentials for s3://{bucket}; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    err: BaseException | None = exc  # the ClientError in its chain (boto3 wraps it), if any
    while err is not None and not isinstance(err, ClientError):
        err = err.__cause__ or err.__context__
    if err is not None:
        code = printable(str(err.response.get("Error", {}).get("Code", "")), 100) or "error"  # the server's text
        if code in ("NoSuchBucket", "404", "NotFound"):
            return Unreachable(f"bucket {bucket} does not exist; create it or fix {flag}")
        if code in _AUTH_CODES:
            return Unreachable(f"S3 refused the credentials for s3://{bucket} ({code}: {_AUTH_CODES[code]}); "
                               "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) and the bucket policy")
        message = str(err.response.get("Error", {}).get("Message", "")).splitlines()[0:1]
        detail = f": {printable(message[0], 200)}" if message else ""
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
    return Unreachable(f"S3 upload to s3://{bucket} failed: {redact_url(str(exc).splitlines()[0])}; check {flag}")


@dataclass(frozen=True)
class PutOptions:
    """What every put carries besides the bytes: Cache-Control per kind of file, and the ``s3-put-args``."""

    immutable: str = IMMUTABLE  # wheels and their .metadata: their bytes never change under one name
    pages: str = PAGES  # pages, PEP 691 JSON, records: they change when something is published
    args: tuple[tuple[str, str], ...] = ()  # ServerSideEncryption, SSEKMSKeyId, ACL, StorageClass, ...
    directory_keys: bool = False  # also put .../index.html at the key .../ (a CDN with no index documents)

    @classmethod
    def from_options(cls, opts: Any) -> PutOptions:
        """From config.Options (None: defaults); refuses an argument boto3 does not take or kernel-factory sets, and
        a risky one (``risk``) that ``--allow-s3-put-arg`` does not name."""
        if opts is None:
            return cls()
        allowed = set(S3Transfer.ALLOWED_UPLOAD_ARGS) - OWN_ARGS
        for key, value in opts.s3_put_args:
            if key not in allowed:
                hint = difflib.get_close_matches(key, sorted(allowed), n=1)
                own = " (kernel-factory sets it; use cache-control-* for CacheControl)" if key in OWN_ARGS else ""
                raise ConfigError(f"s3-put-args: {key!r} is not an argument S3 uploads take{own}"
                                  + (f"; did you mean {hint[0]!r}?" if hint else ""))
            why = risk(key, value)
            if why is not None and key not in opts.allow_s3_put_args:
                raise ConfigError(f"s3-put-args: {key}={value!r} {why}; leave it out of s3-put-args, or pass "
                                  f"--allow-s3-put-arg {key} to apply it anyway")
        return cls(opts.cache_control_immutable, opts.cache_control_pages, tuple(opts.s3_put_args),
                   opts.s3_directory_keys)


DEFAULT_PUT = PutOptions()
_EVERYONE = "acs.amazonaws.com/groups/global/"  # the AllUsers and AuthenticatedUsers grantee groups


def risk(key: str, value: str) -> str | None:
    """What a put arg does to every object beyond a header (public write, a redirect, a lock); else None."""
    if key == "ACL" and value.strip().lower() == "public-read-write":
        return "lets anyone overwrite every object (public write)"
    if key in ("GrantFullControl", "GrantWriteACP") and _EVERYONE in value:
        return "lets anyone change every object's permissions (a public grant)"
    if key == "WebsiteRedirectLocation":
        return "redirects every object (wheels included) to another address"
    if key == "ObjectLockLegalHoldStatus" and value.strip().upper() == "ON":
        return "puts every object under a legal hold (it cannot be deleted or replaced until the hold is lifted)"
    if key in ("ObjectLockMode", "ObjectLockRetainUntilDate"):
        return "locks every object against deletion for a retention period"
    return None


def notices(url: str, opts: Any) -> list[str]:
    """The lines naming the put args every object put to ``url`` carries, and those build and publish refuse."""
    args: Sequence[tuple[str, str]] = opts.s3_put_args
    if not args:
        return []
    lines = [f"note: every object put to {url} carries s3-put-args {', '.join(f'{k}={v}' for k, v in args)}"]
    for key, value in args:
        why = risk(key, value)
        if why is not None and key not in opts.allow_s3_put_args:
            lines.append(f"warning: s3-put-args: {key}={value!r} {why}; build and publish refuse it unless "
                         f"--allow-s3-put-arg {key} names it")
    return lines


class Bucket:
    """``s3://bucket/prefix``, the one home of S3 calls: each failure one Unreachable line (``flag``: what to fix)."""

    def __init__(self, url: str, put: PutOptions = DEFAULT_PUT, flag: str = "--to") -> None:
        self.name, self.prefix = parse_s3_url(url, flag)
        self.put, self.flag = put, flag
        self.client = make_client()
        self.endpoint = str(self.client.meta.endpoint_url)

    def key(self, rel: str) -> str:
        return join_key(self.prefix, rel)

    def url(self, key: str) -> str:
        return f"s3://{self.name}/{key}"

    @contextmanager
    def calls(self) -> Iterator[None]:
        try:
            yield
        except (Boto3Error, BotoCoreError, ClientError) as exc:  # boto3 wraps ClientError in S3UploadFailedError
            raise explain(exc, self.name, self.endpoint, self.flag) from None

    def list(self, under: str) -> dict[str, tuple[int, str]]:
        """Every key under ``under/`` (the whole bucket for "") -> (size, ETag without quotes)."""
        with self.calls():
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name,
                                                                          Prefix=f"{under}/" if under else "")
            return {obj["Key"]: (int(obj["Size"]), str(obj.get("ETag", "")).strip('"'))
                    for page in pages for obj in page.get("Contents", [])}

    def _unless_missing(self, call: Callable[[], Any]) -> Any:
        """``call()``'s answer, or None where the object it asks for is not there."""
        with self.calls():
            try:
                return call()
            except ClientError as exc:
                if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
                    return None
                raise

    def sha256(self, key: str) -> str | None:
        """The ``x-amz-meta-sha256`` of ``key``, or None (no such object, or not put by kernel-factory)."""
        head = self._unless_missing(lambda: self.client.head_object(Bucket=self.name, Key=key))
        return None if head is None else head.get("Metadata", {}).get(SHA_KEY)

    def get(self, key: str, limit: int | None = None) -> bytes | None:
        """An object's bytes (at most ``limit`` + 1), or None where there is none."""
        amount = None if limit is None else limit + 1  # None: StreamingBody.read reads it all
        return self._unless_missing(  # type: ignore[no-any-return]
            lambda: self.client.get_object(Bucket=self.name, Key=key)["Body"].read(amount))

    def download(self, key: str, sink: Any) -> bool:
        """Stream an object into ``sink`` in order (s3transfer retries a cut read); False where there is none."""
        return self._unless_missing(lambda: self.client.download_fileobj(self.name, key, sink, Config=TRANSFER)
                                    or True) is not None

    def _args(self, rel: str, sha256: str) -> dict[str, Any]:
        immutable = rel.endswith((".whl", ".whl.metadata"))
        return {"ContentType": content_type(rel), "Metadata": {SHA_KEY: sha256},
                "CacheControl": self.put.immutable if immutable else self.put.pages, **dict(self.put.args)}

    def upload(self, path: Path, key: str, sha256: str, rel: str | None = None) -> None:
        """Stream ``path`` to ``key`` (multipart when large); its headers are those of ``rel`` (default: ``key``)."""
        with self.calls():
            self.client.upload_file(str(path), self.name, key, ExtraArgs=self._args(rel or key, sha256),
                                    Config=TRANSFER)

    def put_bytes(self, key: str, data: bytes) -> None:
        with self.calls():
            self.client.put_object(Bucket=self.name, Key=key, Body=data,
                                   **self._args(key, hashlib.sha256(data).hexdigest()))

    def delete(self, key: str) -> None:
        with self.calls():
            self.client.delete_object(Bucket=self.name, Key=key)

    def close(self) -> None:
        self.client.close()
