"""The small files of a store's ``files/`` that yank and status change: read and written the same way in a local
folder (never through a link, renamed into place) and in an ``s3://`` store (one GET, one PUT with the sha256
every object of the store carries)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Protocol

from ..atomic import open_nofollow, write_bytes
from ..config import Location
from ..record import FILES

MAX_BYTES = 1 << 20  # a record is 1-3 KB, the status file a few KB


class StoreFiles(Protocol):
    where: str  # the files/ folder, for messages

    def read(self, name: str, limit: int = MAX_BYTES) -> bytes | None:
        """The bytes of ``files/<name>`` (at most ``limit`` + 1), or None when there is none."""
        ...

    def write(self, name: str, data: bytes) -> None: ...

    def delete(self, name: str) -> bool:
        """Delete ``files/<name>`` (a link itself, never what it points to); whether it was there."""
        ...


class LocalFiles:
    def __init__(self, root: Path) -> None:
        self.files = Path(root) / FILES
        self.where = str(self.files)

    def read(self, name: str, limit: int = MAX_BYTES) -> bytes | None:
        try:
            with os.fdopen(open_nofollow(self.files / name, "store file"), "rb") as f:
                return f.read(limit + 1)
        except FileNotFoundError:
            return None

    def write(self, name: str, data: bytes) -> None:
        write_bytes(self.files / name, data)

    def delete(self, name: str) -> bool:
        try:
            os.unlink(self.files / name)
        except FileNotFoundError:
            return False
        return True


class S3Files:
    def __init__(self, url: str) -> None:
        from .s3 import S3Store

        self.store = S3Store(url)
        self.where = self.store.object_url(self.store.files_prefix)

    def read(self, name: str, limit: int = MAX_BYTES) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            body = self.store.client.get_object(Bucket=self.store.bucket, Key=self.store.key(name))["Body"]
            data: bytes = body.read(limit + 1)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
                return None
            raise self.store._fail(exc) from None
        except BotoCoreError as exc:
            raise self.store._fail(exc) from None
        return data

    def write(self, name: str, data: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        from ..s3util import put_bytes

        try:
            sha = hashlib.sha256(data).hexdigest()
            put_bytes(self.store.client, data, self.store.bucket, self.store.key(name), sha, self.store.put_options)
        except (BotoCoreError, ClientError) as exc:
            raise self.store._fail(exc) from None


    def delete(self, name: str) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        from ..s3util import remote_sha256

        key = self.store.key(name)
        try:
            if remote_sha256(self.store.client, self.store.bucket, key) is None:
                return False  # gone (or not written by kernel-factory: left alone)
            self.store.client.delete_object(Bucket=self.store.bucket, Key=key)
        except (BotoCoreError, ClientError) as exc:
            raise self.store._fail(exc) from None
        return True


def store_files(store: Location) -> StoreFiles:
    return LocalFiles(store.local) if store.local is not None else S3Files(store.display)
