"""The record: everything the index shows about one wheel (``files/<wheel>.json``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field
from functools import lru_cache
from typing import Any

from packaging.version import InvalidVersion, Version

RECORD_SCHEMA = 1
#: The provenance file inside each wheel's .dist-info (read back by `kernel-factory local-kernels`).
PROVENANCE = "kernel_factory.json"
#: The Hub's web address: Project-URL "Hub" and the landing page's links are HUB_URL + repo id.
HUB_URL = "https://huggingface.co/"
#: PEP 691 JSON media type of the simple API.
PEP691_JSON = "application/vnd.pypi.simple.v1+json"
FILES = "files"



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
        """The record file's bytes: ``json.dumps(fields, indent=2, sort_keys=True)`` and a newline.

        Written field by field (the indenting encoder is pure Python and slow); the bytes are the same.
        """
        values = self.__dict__
        parts = []
        for name, key in _SORTED_KEYS:  # a str or None inline: most fields are one of them
            value = values[name]
            if type(value) is str:
                parts.append(key + _JSON_STR(value))
            elif value is None:
                parts.append(key + "null")
            else:
                parts.append(key + _json_value(value))
        return ("{\n" + ",\n".join(parts) + "\n}\n").encode()

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Record:
        """A record from a parsed ``files/<wheel>.json`` (unknown keys ignored, lists made tuples)."""
        values = {k: v for k, v in raw.items() if k in FIELDS}
        for key in _TUPLES:
            if key in values:
                values[key] = tuple(values[key])
        return cls(**values)

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Record:
        """``Record(**values)``, made without the constructor: a frozen dataclass's sets each of its fields
        through ``object.__setattr__``, which costs more than the rest of an adopted wheel's record."""
        fields = {**_DEFAULTS, **values}
        if len(fields) != len(FIELDS) or not values.keys() >= _REQUIRED:
            unknown = sorted(set(values) - set(FIELDS))
            raise TypeError(f"Record.of: unknown fields {unknown}" if unknown else
                            f"Record.of: missing fields {sorted(_REQUIRED - values.keys())}")  # fmt: skip
        if "extra" not in values:
            fields["extra"] = {}  # a dict of its own, as the default factory gives
        record: Record = object.__new__(cls)
        record.__dict__.update(fields)
        return record

    @classmethod
    def from_json(cls, data: bytes) -> Record:
        return cls.from_dict(json.loads(data))

    def to_row(self) -> list[Any]:
        """Every field's value in field order (the catalog's compact form)."""
        return list(map(self.__dict__.__getitem__, FIELDS))

    @classmethod
    def from_row(cls, row: list[Any]) -> Record:
        """The inverse of ``to_row``, without running the constructor (the row was a valid record)."""
        record: Record = object.__new__(cls)
        values = dict(zip(FIELDS, row, strict=True))
        for key in _TUPLES:
            values[key] = tuple(values[key])
        record.__dict__.update(values)
        return record


FIELDS: tuple[str, ...] = tuple(Record.__dataclass_fields__)
_REQUIRED = frozenset(n for n, f in Record.__dataclass_fields__.items() if f.default is MISSING
                      and f.default_factory is MISSING)  # fmt: skip
# every field in field order, with its default (None where it has none: Record.of checks those are given)
_DEFAULTS = {n: None if f.default is MISSING else f.default for n, f in Record.__dataclass_fields__.items()}
_SORTED_FIELDS = tuple(sorted(FIELDS))
_SORTED_KEYS = tuple((name, f'  "{name}": ') for name in _SORTED_FIELDS)  # each field and its line's start
_TUPLES = ("requires_dist", "archs")
_JSON_STR: Callable[[str], str] = json.encoder.encode_basestring_ascii  # what json.dumps does to a str


def _json_value(value: Any) -> str:
    """``json.dumps(value)`` as one field of ``to_json``'s object (a non-empty list or dict indented by 2 more)."""
    kind = type(value)  # str and None: written inline by to_json
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return int.__repr__(value)
    if kind is dict and not value:
        return "{}"
    if kind is tuple or kind is list:
        if not value:
            return "[]"
        if all(type(v) is str for v in value):
            return "[\n    " + ",\n    ".join(map(_JSON_STR, value)) + "\n  ]"
        value = list(value)
    if isinstance(value, (list, dict)) and value:
        return json.dumps(value, indent=2, sort_keys=True).replace("\n", "\n  ")
    return json.dumps(value)


@lru_cache(maxsize=1 << 16)
def version_key(text: str | None) -> tuple[int, Version | str]:
    """Sort key of a version text: none first, then texts that are not PEP 440 versions, then versions in order."""
    if text is None:
        return (0, "")
    try:
        return (2, Version(text))
    except InvalidVersion:
        return (1, text)
