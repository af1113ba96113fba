"""``s3://bucket/prefix`` as a publish destination (its calls: s3util.Bucket). Keys are the raw file names (``+``
included); pages link ``%2B``, which S3 decodes."""

from __future__ import annotations

from collections.abc import Sequence

from ..nofollow import file_digest
from ..s3util import Bucket, PutOptions
from .base import Destination, LocalFile, State


class S3Destination(Destination):
    """Publish into ``s3://bucket/prefix``; deletes only withdrawn objects that carry kernel-factory's sha256."""

    workers = 16

    def __init__(self, url: str, put: PutOptions) -> None:
        self.bucket = Bucket(url, put)
        self.display = self.bucket.url(self.bucket.prefix).rstrip("/")
        self.existing: dict[str, tuple[int, str]] = {}

    def prepare(self, files: Sequence[LocalFile], *, dry_run: bool = False) -> None:
        self.existing = self.bucket.list(self.bucket.prefix)

    def state(self, file: LocalFile) -> State:
        key = self.bucket.key(file.rel)
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
        # multipart (or encrypted) objects: compare the sha256 kept in the object's metadata
        return "same" if self.bucket.sha256(key) == file.sha256() else "changed"

    def has(self, rel: str) -> bool:
        return self.bucket.key(rel) in self.existing

    def put(self, file: LocalFile) -> None:
        key = self.bucket.key(file.rel)
        for each in (key, self._alias(key)):
            if each is not None:
                self.bucket.upload(file.path, each, file.sha256(), file.rel)

    def _alias(self, key: str) -> str | None:
        """``simple/relu/index.html`` -> ``simple/relu/`` where directory keys are put (never the bucket's root)."""
        alias = self.bucket.put.directory_keys and key.endswith("/index.html")
        return key.removesuffix("index.html") if alias else None

    def remove(self, rel: str, size: int) -> bool:
        """Delete the object ``rel`` (and its directory key) if it has ``size`` bytes and kernel-factory's sha256."""
        key = self.bucket.key(rel)
        if self.existing.get(key, (-1, ""))[0] != size or self.bucket.sha256(key) is None:
            return False  # changed since, or not put by kernel-factory
        alias = self._alias(key)
        if alias is not None and alias in self.existing:
            self.bucket.delete(alias)
        self.bucket.delete(key)
        return True

    def close(self) -> None:
        self.bucket.close()
