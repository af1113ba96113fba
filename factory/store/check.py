"""The one place that checks a record (``files/<wheel>.json``) before anything uses it: records come from stores
others may write to (an ``s3://`` store CI shards share, a folder synced from elsewhere), so every field is checked
when a record is loaded. A record that fails is named in one line with the way to repair it; the caller skips it."""

from __future__ import annotations

import json
import re
from contextlib import suppress
from functools import lru_cache
from typing import Any

from packaging.utils import InvalidName, canonicalize_name
from packaging.version import InvalidVersion, Version

from .. import variants
from ..errors import Refused, UnknownVariant
from ..record import MAX_RECORD_BYTES, Record

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
_STR = (*_REQUIRED_STR, *_OPTIONAL_STR)
_STR_LISTS = ("requires_dist", "archs")


class BadRecord(Refused):
    """A record that is damaged or fails a check; the index leaves it out."""


LOCAL_HINT = "run `kernel-factory index --repair` to rebuild it from its wheel, or delete it and rerun build"


def depth(value: Any, limit: int) -> int:
    """Nesting depth of lists and objects, without recursion (hostile input raises no RecursionError); once it
    passes ``limit`` it stops counting. Also verify/metadata.py's, for metadata.json."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            todo.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def plain_label(label: Any) -> bool:
    """Whether ``label`` is a string a record's label may be (safe as a folder name)."""
    return type(label) is str and variants.LABEL_CHARS.fullmatch(label) is not None


def plain_text(text: Any) -> bool:
    """Whether ``text`` is a string a record's field may hold (no control character, at most MAX_TEXT long)."""
    return type(text) is str and len(text) <= MAX_TEXT and not _CONTROL.search(text)


def _fields(raw: dict[str, Any]) -> dict[str, Any]:
    """The record's fields, each checked for its type and size (one control-character search over all strings)."""
    values: dict[str, Any] = {}
    texts: list[str] = []
    for key in _STR:
        value = raw.get(key)
        if value is None and key not in _REQUIRED_STR:
            values[key] = None  # absent or null (requires_python, the one without a default, too)
            continue
        if type(value) is not str:
            raise ValueError(f"'{key}' must be a string, not {type(value).__name__}")
        values[key] = value
        texts.append(value)
    if max(map(len, texts)) > MAX_TEXT:
        key = next(k for k in _STR if len(values.get(k) or "") > MAX_TEXT)
        raise ValueError(f"'{key}' is longer than {MAX_TEXT} characters")
    for key in _STR_LISTS:
        value = raw.get(key, ())
        if not isinstance(value, (list, tuple)) or len(value) > MAX_ITEMS:
            raise ValueError(f"'{key}' must be a list of at most {MAX_ITEMS} strings")
        for item in value:
            if type(item) is not str or len(item) > MAX_TEXT:
                raise ValueError(f"'{key}' holds {item!r}, not a plain string"[:200])
        values[key] = tuple(value)
        texts.extend(value)
    summary = raw.get("summary", "")
    if type(summary) is not str:
        raise ValueError(f"'summary' must be a string, not {type(summary).__name__}")
    if len(summary) > MAX_SUMMARY:
        raise ValueError(f"'summary' is longer than {MAX_SUMMARY} characters")
    values["summary"] = summary
    texts.append(summary)
    if _CONTROL.search("\t".join(texts)):  # a tab is allowed: joining by it finds only the strings' own
        for key in (*_STR, *_STR_LISTS, "summary"):  # name the first field that holds one
            value = values.get(key)
            if any(isinstance(item, str) and _CONTROL.search(item)
                   for item in (value if isinstance(value, tuple) else (value,))):
                raise ValueError(f"'{key}' holds a control character")
    meta = raw.get("metadata_sha256", "")
    if type(meta) is not str or (meta and not _HEX64.fullmatch(meta)):
        raise ValueError("'metadata_sha256' must be a sha256 hex digest")
    values["metadata_sha256"] = meta
    size = raw.get("size")
    if type(size) is not int or size < 0:
        raise ValueError(f"'size' must be a whole number of bytes, not {size!r}"[:200])
    values["size"] = size
    yanked = raw.get("yanked", False)
    if not (yanked is False or yanked is True or (type(yanked) is str and len(yanked) <= MAX_TEXT)):
        raise ValueError("'yanked' must be true, false or a reason")
    if type(yanked) is str and _CONTROL.search(yanked):
        raise ValueError("'yanked' holds a control character")
    values["yanked"] = yanked
    kind = raw.get("kind", "kernel")
    if kind not in KINDS:
        raise ValueError(f"'kind' must be one of {', '.join(KINDS)}")
    values["kind"] = kind
    schema = raw.get("schema", 1)
    if type(schema) is not int:
        raise ValueError("'schema' must be a whole number")
    values["schema"] = schema
    extra = raw.get("extra", {})
    if type(extra) is not dict:
        raise ValueError("'extra' must be an object")
    if extra and depth(extra, MAX_DEPTH) > MAX_DEPTH - 1:
        raise ValueError(f"it nests deeper than {MAX_DEPTH} levels")
    values["extra"] = extra
    return values


# A wheel file name (PEP 427): name-version[-build]-python-abi-platform.whl, no part holding a '-'.
_WHEEL = re.compile(r"([A-Za-z0-9._]+)-([A-Za-z0-9._+!]+)(?:-([0-9][A-Za-z0-9._]*))?-([A-Za-z0-9._]+)-([A-Za-z0-9._]+)"
                    r"-([A-Za-z0-9._]+)\.whl")


@lru_cache(maxsize=1 << 14)
def _project(name: str, *, validate: bool) -> str | None:
    """The normalised project of a name, or None where it is not valid (PEP 508 with ``validate``; else a wheel's)."""
    if not validate and "__" in name:
        return None
    with suppress(InvalidName):
        return canonicalize_name(name, validate=validate)
    return None


@lru_cache(maxsize=1 << 16)
def version_of(text: str) -> Version | None:
    with suppress(InvalidVersion):
        return Version(text)
    return None


def _check_meaning(values: dict[str, Any], expected: str, known_variants: bool = True) -> None:
    """Name, version, label, hashes and file name agree with each other and the record's key (a value many records
    share checked once). ``known_variants``: by kernels' parser (~0.3 s to import); else (a row) by its shape."""
    filename = values["filename"]
    if filename != expected:
        raise ValueError(f"its file name {filename!r} is not the one its key names ({expected!r})")
    parts = _WHEEL.fullmatch(filename)
    wheel_name = _project(parts[1], validate=False) if parts else None
    wheel_version = version_of(parts[2]) if parts else None
    if wheel_name is None or wheel_version is None:
        raise ValueError(f"{filename!r} is not a valid wheel file name")
    name = _project(values["name"], validate=True)
    if name is None:
        raise ValueError(f"name {values['name']!r} is not a valid project name (PEP 508)")
    if name != wheel_name:
        raise ValueError(f"name {values['name']!r} does not match the file name")
    version = version_of(values["version"])
    if version is None:
        raise ValueError(f"version {values['version']!r} is not a valid version (PEP 440)")
    if version != wheel_version:
        raise ValueError(f"version {values['version']!r} does not match the file name")
    if not _HEX64.fullmatch(values["sha256"]):
        raise ValueError("'sha256' must be a sha256 hex digest")
    if not _TIME.fullmatch(values["upload_time"]):
        raise ValueError(f"upload_time {values['upload_time']!r} is not like 2026-01-02T03:04:05Z")
    why = _label_problem(values.get("label"), values.get("variant"), values["version"], known_variants)
    if why:
        raise ValueError(why)
    repo_id = values.get("repo_id")
    if repo_id is not None and not _REPO_ID.fullmatch(repo_id):
        raise ValueError(f"repo_id {repo_id!r} is not a Hub repository id (org/name)")
    requires_python = values.get("requires_python")
    if requires_python is not None and not _specifier_ok(requires_python):
        raise ValueError(f"requires_python {requires_python!r} is not a version specifier")


_VARIANT_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,127}")


@lru_cache(maxsize=1 << 14)
def _label_problem(label: str | None, variant: str | None, version: str, known_variants: bool = True) -> str:
    """What is wrong with a label and variant, given the (valid) version ("" if nothing; see ``_check_meaning``)."""
    if label is not None:
        parsed = version_of(version)
        if not variants.LABEL_CHARS.fullmatch(label) or parsed is None or label != parsed.local:
            return f"label {label!r} is not the local label of version {version!r}"
        if variant is None and not variants.is_label(label):
            return f"label {label!r} is not shaped like a build variant's label"
    if variant is None:
        return ""
    if not known_variants:
        shaped = _VARIANT_NAME.fullmatch(variant) is not None
        return "" if shaped else f"variant {variant!r} is not shaped like a build variant's name"
    return variant_problem(variant, label)


@lru_cache(maxsize=1 << 14)
def variant_problem(variant: str, label: str | None) -> str:
    """What kernels' parser finds wrong with a variant and its label ("" if nothing; ``known_variants``)."""
    try:
        target = variants.parse(variant)
    except UnknownVariant:
        return f"variant {variant!r} is not a build variant the kernels project defines"
    return "" if target.label == label else f"label {label!r} is not the label of variant {variant!r}"


@lru_cache(maxsize=256)
def _specifier_ok(text: str) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # only when a record names one

    with suppress(InvalidSpecifier):
        SpecifierSet(text)
        return True
    return False


def check(raw: Any, expected: str, known_variants: bool = True) -> Record:
    """A Record from a parsed record object whose key names the wheel ``expected``; ValueError says why not."""
    if type(raw) is not dict:
        raise ValueError(f"it holds a JSON {type(raw).__name__}, not an object")
    values = _fields(raw)  # every field but ``extra`` is flat, or a list of strings
    _check_meaning(values, expected, known_variants)
    return Record(**values)


def plain_wheel(filename: Any) -> bool:
    """Whether ``filename`` is shaped like a wheel file name (PEP 427; no '/', no control character)."""
    return type(filename) is str and _WHEEL.fullmatch(filename) is not None and plain_text(filename)


def project_of(name: str) -> str | None:
    """The normalised project of a record's (valid) name; None if the name is not valid (PEP 508)."""
    return _project(name, validate=True)


def check_row(row: Any, filename: str, project: str) -> Record:
    """A Record from a catalog row's JSON of the wheel ``filename`` in ``project``: a record file's checks (the
    variant by its shape: the parser checked it when read) and the project; ValueError says why not."""
    record = check(row, filename, known_variants=False)
    if _project(record.name, validate=True) != project:
        raise ValueError(f"its project {project!r} is not the one its name gives ({record.name!r})")
    return record


REMOTE_HINT = "delete it and rerun build"


def invalid(where: str, why: object, hint: str | None = None) -> str:
    """The line for a record that fails a check (``why``), ending with ``hint`` (default: the local fix)."""
    return f"{where}: not a valid record ({why}); {hint or LOCAL_HINT}"


def parse(data: bytes, expected: str, where: str, hint: str | None = None, known_variants: bool = True) -> Record:
    """The record of the wheel ``expected`` in ``data`` (the file ``where``), or BadRecord ending with ``hint``."""
    hint = hint or LOCAL_HINT
    if len(data) > MAX_RECORD_BYTES:
        raise BadRecord(f"{where}: more than {MAX_RECORD_BYTES} bytes, more than a record may hold; {hint}")
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError):
        raise BadRecord(f"{where}: damaged (not valid JSON); {hint}") from None
    try:
        return check(raw, expected, known_variants)
    except ValueError as exc:
        raise BadRecord(invalid(where, exc, hint)) from None


def parse_many(
    expected: list[str], datas: list[bytes | None], where: list[str], hint: str | None = None,
    known_variants: bool = True,
) -> list[tuple[str, Record | None, str | None, str | None]]:  # fmt: skip
    """``parse`` of many records (one json.loads where each text is one object), the one way both stores read them:
    (wheel, record, its text (None: not UTF-8), why not: a line), both None for gone (None) bytes."""
    present = [d for d in datas if d is not None]
    decoded: list[Any] | None = None
    if all(len(d) <= MAX_RECORD_BYTES and d.lstrip()[:1] == b"{" and d.rstrip()[-1:] == b"}" for d in present):
        with suppress(ValueError, RecursionError):
            decoded = json.loads(b"[" + b",".join(present) + b"]")
        if decoded is not None and len(decoded) != len(present):  # a text of two objects, and one of none
            decoded = None
    values = iter(decoded) if decoded is not None else None
    found: list[tuple[str, Record | None, str | None, str | None]] = []
    for name, data, path in zip(expected, datas, where, strict=True):
        record = text = why = None
        if data is not None:
            try:
                if values is None:
                    record = parse(data, name, path, hint, known_variants)
                else:
                    record = check(next(values), name, known_variants)
                text = data.decode()
            except BadRecord as exc:
                why = str(exc)
            except UnicodeDecodeError:
                pass
            except ValueError as exc:  # check's (parse's are BadRecord)
                why = invalid(path, exc, hint)
        found.append((name, record, text, why))
    return found


def no_record(path: str, wheel: str, remote: bool = False) -> str:
    """The line for a wheel in the store that has no record (the index cannot show it)."""
    fix = ("rerun build to make it again, or delete the wheel" if remote else
           "run `kernel-factory index --repair` to make its record from the wheel, or delete the wheel")  # fmt: skip
    return f"{path}: the wheel {wheel} has no record, so the index leaves it out; {fix}"


def missing_wheel(where: str, wheel: str) -> str:
    """The line for a record whose wheel is not in the store."""
    return f"{where}: its wheel {wheel} is missing from the store; rerun build to make it again, or delete the record"
