"""The one place that checks a record (``files/<wheel>.json``) before anything uses it.

Records come from stores that others may write to (an ``s3://`` store that CI
shards share, a folder synced from elsewhere), so every field is checked when
the record is loaded: its size and nesting, every field's type, the name by
PEP 503/508 rules, the version by PEP 440, the label by the build-variant
grammar (factory/variants.py), hashes as hex digests, and the file name equal to
the record's key and to the name and version. A record that fails is named in
one line with the way to repair it; the caller skips it and goes on.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from packaging.utils import InvalidName, InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .. import variants
from ..errors import Refused, UnknownVariant
from ..record import Record

MAX_RECORD_BYTES = 256 * 1024  # a real record is 1-3 KB
MAX_DEPTH = 8  # nesting of lists and objects (``extra``)
MAX_TEXT = 4096  # characters of any one string but the summary
MAX_SUMMARY = 16384
MAX_ITEMS = 1024  # entries of requires_dist, archs
KINDS = ("kernel", "adopted")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z")
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

_REQUIRED_STR = ("filename", "name", "version", "sha256", "upload_time")
_OPTIONAL_STR = ("requires_python", "kernel_version", "label", "variant", "repo_id", "source", "revision", "ref",
                 "backend", "backend_version", "framework", "framework_version", "os", "arch", "platform_tag",
                 "license", "upstream", "import_name", "digest", "factory_version")
_STR_LISTS = ("requires_dist", "archs")


class BadRecord(Refused):
    """A record that is damaged or fails a check; the index leaves it out."""


def repair_hint(wheel_present: bool) -> str:
    if wheel_present:
        return "run `kernel-factory index --repair` to rebuild it from its wheel, or delete it and rerun build"
    return "delete it and rerun build (or adopt the wheel again with index --wheels)"


def _depth(value: Any) -> int:
    """Nesting depth of lists and objects, without recursion."""
    deepest = 0
    todo = [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict):
            items = list(item.values())
        elif isinstance(item, list):
            items = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        todo.extend((child, level + 1) for child in items)
    return deepest


def _text(raw: dict[str, Any], key: str, limit: int = MAX_TEXT, *, optional: bool = False) -> str | None:
    value = raw.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValueError(f"'{key}' must be a string, not {type(value).__name__}")
    if len(value) > limit:
        raise ValueError(f"'{key}' is longer than {limit} characters")
    if _CONTROL.search(value):
        raise ValueError(f"'{key}' holds a control character")
    return value


def _texts(raw: dict[str, Any], key: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise ValueError(f"'{key}' must be a list of at most {MAX_ITEMS} strings")
    for item in value:
        if not isinstance(item, str) or len(item) > MAX_TEXT or _CONTROL.search(item):
            raise ValueError(f"'{key}' holds {item!r}, not a plain string")
    return tuple(value)


def _fields(raw: dict[str, Any]) -> dict[str, Any]:
    """The record's fields, each checked for its type and size."""
    values: dict[str, Any] = {}
    for key in _REQUIRED_STR:
        values[key] = _text(raw, key)
    for key in _OPTIONAL_STR:
        if key in raw:
            values[key] = _text(raw, key, optional=True)
    for key in _STR_LISTS:
        values[key] = _texts(raw, key)
    summary = raw.get("summary", "")
    values["summary"] = _text({"summary": summary}, "summary", MAX_SUMMARY)
    meta = raw.get("metadata_sha256", "")
    if not isinstance(meta, str) or (meta and not _HEX64.fullmatch(meta)):
        raise ValueError("'metadata_sha256' must be a sha256 hex digest")
    values["metadata_sha256"] = meta
    size = raw.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(f"'size' must be a whole number of bytes, not {size!r}"[:200])
    values["size"] = size
    yanked = raw.get("yanked", False)
    if not isinstance(yanked, (bool, str)) or (isinstance(yanked, str) and len(yanked) > MAX_TEXT):
        raise ValueError("'yanked' must be true, false or a reason")
    values["yanked"] = yanked
    kind = raw.get("kind", "kernel")
    if kind not in KINDS:
        raise ValueError(f"'kind' must be one of {', '.join(KINDS)}")
    values["kind"] = kind
    schema = raw.get("schema", 1)
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise ValueError("'schema' must be a whole number")
    values["schema"] = schema
    extra = raw.get("extra", {})
    if not isinstance(extra, dict):
        raise ValueError("'extra' must be an object")
    values["extra"] = extra
    return values


def _check_meaning(values: dict[str, Any], expected: str) -> None:
    """Name, version, label, hashes and file name agree with each other and with the record's key."""
    filename = values["filename"]
    if filename != expected:
        raise ValueError(f"its file name {filename!r} is not the one its key names ({expected!r})")
    try:
        wheel_name, wheel_version, _build, _tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        raise ValueError(f"{filename!r} is not a valid wheel file name") from None
    try:
        name = canonicalize_name(values["name"], validate=True)
    except InvalidName:
        raise ValueError(f"name {values['name']!r} is not a valid project name (PEP 508)") from None
    if name != wheel_name:
        raise ValueError(f"name {values['name']!r} does not match the file name")
    try:
        version = Version(values["version"])
    except InvalidVersion:
        raise ValueError(f"version {values['version']!r} is not a valid version (PEP 440)") from None
    if version != wheel_version:
        raise ValueError(f"version {values['version']!r} does not match the file name")
    if not _HEX64.fullmatch(values["sha256"]):
        raise ValueError("'sha256' must be a sha256 hex digest")
    if not _TIME.fullmatch(values["upload_time"]):
        raise ValueError(f"upload_time {values['upload_time']!r} is not like 2026-01-02T03:04:05Z")
    label, variant = values.get("label"), values.get("variant")
    if label is not None:
        if not variants.LABEL_CHARS.fullmatch(label) or label != version.local:
            raise ValueError(f"label {label!r} is not the local label of version {values['version']!r}")
        if variant is None and not variants.is_label(label):
            raise ValueError(f"label {label!r} is not shaped like a build variant's label")
    if variant is not None:
        try:
            target = variants.parse(variant)
        except UnknownVariant:
            raise ValueError(f"variant {variant!r} is not a build variant the kernels project defines") from None
        if target.label != label:
            raise ValueError(f"label {label!r} is not the label of variant {variant!r}")
    repo_id = values.get("repo_id")
    if repo_id is not None and not _REPO_ID.fullmatch(repo_id):
        raise ValueError(f"repo_id {repo_id!r} is not a Hub repository id (org/name)")
    requires_python = values.get("requires_python")
    if requires_python is not None and not _specifier_ok(requires_python):
        raise ValueError(f"requires_python {requires_python!r} is not a version specifier")


@lru_cache(maxsize=256)
def _specifier_ok(text: str) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # only when a record names one

    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        return False
    return True


def check(raw: Any, expected: str) -> Record:
    """A Record from a parsed record object whose key names the wheel ``expected``; ValueError says why not."""
    if not isinstance(raw, dict):
        raise ValueError(f"it holds a JSON {type(raw).__name__}, not an object")
    values = _fields(raw)  # every field but ``extra`` is flat, or a list of strings
    if _depth(values["extra"]) > MAX_DEPTH - 1:
        raise ValueError(f"it nests deeper than {MAX_DEPTH} levels")
    _check_meaning(values, expected)
    return Record(**values)


REMOTE_HINT = "delete it and rerun build"


def parse(data: bytes, expected: str, where: str, hint: str | None = None) -> Record:
    """The record in ``data`` (the file ``where``, the record of the wheel ``expected``), or BadRecord
    whose message ends with ``hint`` (default: how to repair a local record)."""
    hint = hint or repair_hint(True)
    if len(data) > MAX_RECORD_BYTES:
        raise BadRecord(f"{where}: more than {MAX_RECORD_BYTES} bytes, more than a record may hold; {hint}")
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError):
        raise BadRecord(f"{where}: damaged (not valid JSON); {hint}") from None
    try:
        return check(raw, expected)
    except ValueError as exc:
        raise BadRecord(f"{where}: not a valid record ({exc}); {hint}") from None


def missing_wheel(where: str, wheel: str) -> str:
    """The line for a record whose wheel is not in the store."""
    return f"{where}: its wheel {wheel} is missing from the store; rerun build to make it again, or delete the record"
