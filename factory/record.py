"""The record: everything the index shows about one wheel (``files/<wheel>.json``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from packaging.version import InvalidVersion, Version

RECORD_SCHEMA = 1
#: The provenance file inside each wheel's .dist-info (read back by `kernel-factory local-kernels`).
PROVENANCE = "kernel_factory.json"
#: The provenance key (and the record's ``extra`` key) naming the wheel folder that holds build/<variant>/ byte for
#: byte (wheel/layout.py, docs/convert.md "What a wheel holds and why"); wheels made before it have none.
VARIANT_ROOT = "variant-root"
#: The Hub's web address: Project-URL "Hub" and the landing page's links are HUB_URL + repo id.
HUB_URL = "https://huggingface.co/"
#: PEP 691 JSON media type of the simple API.
PEP691_JSON = "application/vnd.pypi.simple.v1+json"
#: A full commit sha as the Hub names revisions (lower-case hex), and as records, the catalog and the Hub cache hold it.
COMMIT_SHA = re.compile(r"[0-9a-f]{40}")
FILES = "files"
MAX_RECORD_BYTES = 256 * 1024  # a real record is 1-3 KB; a reader reads no more of one (store/check.py, publish)


def read_provenance(data: bytes | str | None) -> tuple[dict[str, Any] | None, str | None]:
    """The fields of a wheel's provenance file (PROVENANCE), or None and why not: (None, None) where the wheel
    has none. What is in it is the wheel's word, not a fact: each reader checks the fields it uses."""
    if data is None:
        return None, None
    try:
        fields = json.loads(data)
    except (ValueError, RecursionError) as exc:
        return None, str(exc)
    return (fields, None) if isinstance(fields, dict) else (None, "not a JSON object")


@dataclass(slots=True)
class Record:
    """Everything the index shows about one wheel (``files/<wheel>.json``).

    A value: code makes a changed copy with ``dataclasses.replace`` and never assigns to a field. (Not
    ``frozen``: a frozen dataclass sets each field through ``object.__setattr__``, which made building the
    22,000 records of a full build ~0.2 s slower.)"""

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
    def public_version(self) -> str:
        """The version without its local label (``kernel_version``, else read from ``version``)."""
        return self.kernel_version or self.version.split("+")[0]

    @property
    def job_key(self) -> tuple[str, str, str] | None:
        """(source key, revision, variant) for kernels built by the factory."""
        if self.kind != "kernel" or self.revision is None or self.variant is None:
            return None
        return (self.repo_id or self.source or self.name, self.revision, self.variant)

    def to_json(self) -> bytes:
        """The record file's bytes: compact JSON, keys sorted, and a newline (records written before were indented;
        ``from_json`` reads both)."""
        return (_dumps({name: getattr(self, name) for name in FIELDS}) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes) -> Record:
        """A record from a ``files/<wheel>.json`` (unknown keys ignored, lists made tuples), unchecked:
        store/check.py ``check`` is what reads records from a store."""
        values: dict[str, Any] = {k: tuple(v) if k in _TUPLES else v for k, v in json.loads(data).items()
                                  if k in FIELDS}
        return cls(**values)


FIELDS: tuple[str, ...] = tuple(Record.__dataclass_fields__)
_TUPLES = ("requires_dist", "archs")
_dumps = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


@lru_cache(maxsize=1 << 16)
def version_key(text: str | None) -> tuple[int, Version | str]:
    """Sort key of a version text: none first, then texts that are not PEP 440 versions, then versions in order."""
    if text is None:
        return (0, "")
    try:
        return (2, Version(text))
    except InvalidVersion:
        return (1, text)
