"""The store: wheels, their ``.metadata`` files and ``.json`` records under ``<root>/files/``.

The store is the source of truth: the index is rendered from the records
alone. A wheel is stored in the order wheel -> .metadata -> record, each
atomically, so a record only exists once its wheel and metadata are whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .atomic import TMP_PREFIX, atomic_open, write_bytes

RECORD_SCHEMA = 1
FILES = "files"


@dataclass(frozen=True)
class Record:
    """Everything the index shows about one wheel (``files/<wheel>.json``)."""

    filename: str  # the wheel file name
    name: str  # distribution name as in METADATA (display form)
    version: str  # full version, local label included
    sha256: str  # hex digest of the wheel
    size: int
    metadata_sha256: str  # hex digest of the .metadata file (PEP 658)
    requires_python: str | None
    upload_time: str  # ISO 8601 UTC, "2026-01-02T03:04:05Z": the revision's commit time
    summary: str = ""
    requires_dist: tuple[str, ...] = ()
    yanked: bool | str = False
    kind: str = "kernel"  # "kernel" or "adopted"
    # Kernel fields (empty for adopted wheels)
    kernel_version: str | None = None  # version without the local label
    label: str | None = None  # local label without '+'
    variant: str | None = None  # build variant folder name
    repo_id: str | None = None  # Hub repository id
    source: str | None = None  # where it was built from (Hub id or path)
    revision: str | None = None  # commit sha
    ref: str | None = None  # the branch or tag that selected the revision
    backend: str | None = None  # cuda, rocm, cpu, metal, xpu, universal, ...
    backend_version: str | None = None
    framework: str | None = None
    framework_version: str | None = None  # torch "2.7"
    os: str | None = None
    arch: str | None = None
    platform_tag: str | None = None
    archs: tuple[str, ...] = ()  # CUDA/ROCm archs from metadata.json
    license: str | None = None
    upstream: str | None = None
    import_name: str | None = None
    digest: str | None = None  # "sha256:<hex of canonical digest json>" of metadata.json's digest
    factory_version: str | None = None
    schema: int = RECORD_SCHEMA
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def job_key(self) -> tuple[str, str, str] | None:
        """(source key, revision, variant) for kernels built by the factory."""
        if self.kind != "kernel" or self.revision is None or self.variant is None:
            return None
        return (self.repo_id or self.source or self.name, self.revision, self.variant)

    def to_json(self) -> bytes:
        return (json.dumps(asdict(self), indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> Record:
        raw = json.loads(data)
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in raw.items() if k in known}
        for key in ("requires_dist", "archs"):
            if key in values:
                values[key] = tuple(values[key])
        return cls(**values)


class Store(Protocol):
    """Where wheels and records live: a local folder (here) or S3 (store_s3.py)."""

    def records(self) -> list[Record]: ...

    def put(self, wheel: Path, metadata: bytes, record: Record) -> None: ...


class LocalStore:
    """``<root>/files/`` on a local file system."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.files = self.root / FILES

    def iter_records(self) -> Iterator[Record]:
        if not self.files.is_dir():
            return
        for entry in sorted(os.scandir(self.files), key=lambda e: e.name):
            if entry.name.startswith(TMP_PREFIX) or not entry.name.endswith(".whl.json"):
                continue
            wheel = self.files / entry.name.removesuffix(".json")
            if not wheel.exists():  # a record without its wheel is not listed
                continue
            yield Record.from_json(Path(entry.path).read_bytes())

    def records(self) -> list[Record]:
        return list(self.iter_records())

    def put(self, wheel: Path, metadata: bytes, record: Record) -> None:
        """Move (or copy) ``wheel`` in, then its .metadata, then the record; each atomic."""
        self.files.mkdir(parents=True, exist_ok=True)
        dest = self.files / record.filename
        if wheel.resolve() != dest.resolve():
            try:
                os.replace(wheel, dest)  # same file system: an atomic rename
            except OSError:
                with atomic_open(dest) as out, open(wheel, "rb") as src:
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
        write_bytes(self.files / f"{record.filename}.metadata", metadata)
        write_bytes(self.files / f"{record.filename}.json", record.to_json())


def open_store(location: str | Path) -> Store:
    """A local folder, or ``s3://bucket/prefix`` (factory/store_s3.py)."""
    text = str(location)
    if text.startswith("s3://"):
        from .store_s3 import S3Store

        return S3Store(text)
    return LocalStore(Path(text.removeprefix("file://")))
