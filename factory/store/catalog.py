"""Fast listing of a local store's records, with a cache keyed by each record file's mtime and size.

Reading 20,000 small JSON files costs more than rendering the pages that
change; ``files/.records-cache.json`` keeps the parsed records, and a record
file whose (mtime, size) changed is read again. Like ``LocalStore.records``,
a record whose wheel is missing is not listed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..atomic import write_bytes
from ..record import FILES, Record
from . import open_store

CACHE_FILE = ".records-cache.json"
CACHE_SCHEMA = 2
_NAMES = tuple(Record.__dataclass_fields__)
_FIELDS = frozenset(_NAMES)
_TUPLES = ("requires_dist", "archs")


def record_from_dict(raw: dict[str, Any]) -> Record:
    """Like ``Record.from_json`` on an already parsed object."""
    values = {k: v for k, v in raw.items() if k in _FIELDS}
    for key in _TUPLES:
        if key in values:
            values[key] = tuple(values[key])
    return Record(**values)


def _from_row(row: list[Any]) -> Record:
    """A record from a cache row (every field, in field order), without re-validating it."""
    record: Record = object.__new__(Record)
    values = dict(zip(_NAMES, row, strict=True))
    for key in _TUPLES:
        values[key] = tuple(values[key])
    record.__dict__.update(values)
    return record


def _to_row(record: Record) -> list[Any]:
    return [getattr(record, name) for name in _NAMES]


def _read_cache(path: Path) -> dict[str, list[Any]]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if (
        not isinstance(data, dict)
        or data.get("schema") != CACHE_SCHEMA
        or data.get("fields") != list(_NAMES)
        or not isinstance(data.get("records"), dict)
    ):
        return {}
    return data["records"]  # type: ignore[no-any-return]


def load_local_keyed(root: Path) -> tuple[list[Record], dict[str, str]]:
    """The records under ``<root>/files/`` whose wheel is there, sorted by file name, and a key per wheel
    that changes when its record file does (mtime and size)."""
    files = root / FILES
    if not files.is_dir():
        return [], {}
    names: set[str] = set()
    record_entries: list[os.DirEntry[str]] = []
    with os.scandir(files) as it:
        for entry in it:
            if entry.name.startswith("."):
                continue
            names.add(entry.name)
            if entry.name.endswith(".whl.json"):
                record_entries.append(entry)
    cache = _read_cache(files / CACHE_FILE)
    fresh: dict[str, list[Any]] = {}
    records: list[Record] = []
    keys: dict[str, str] = {}
    changed = False
    for entry in sorted(record_entries, key=lambda e: e.name):
        wheel = entry.name[:-5]
        if wheel not in names:
            continue
        try:
            st = entry.stat()
        except FileNotFoundError:
            continue
        hit = cache.get(entry.name)
        if hit is not None and hit[0] == st.st_mtime_ns and hit[1] == st.st_size:
            record = _from_row(hit[2])
            fresh[entry.name] = hit
        else:
            try:
                record = record_from_dict(json.loads(Path(entry.path).read_bytes()))
            except FileNotFoundError:
                continue
            fresh[entry.name] = [st.st_mtime_ns, st.st_size, _to_row(record)]
            changed = True
        records.append(record)
        keys[record.filename] = f"{st.st_mtime_ns}:{st.st_size}"
    if changed or len(fresh) != len(cache):
        data = {"schema": CACHE_SCHEMA, "fields": list(_NAMES), "records": fresh}
        try:
            write_bytes(files / CACHE_FILE, json.dumps(data, separators=(",", ":"), sort_keys=True).encode())
        except OSError:
            pass  # a read-only store: list without the cache
    return records, keys


def load_local(root: Path) -> list[Record]:
    """The records under ``<root>/files/`` whose wheel is there, sorted by file name."""
    return load_local_keyed(root)[0]


def load_records(store: str | Path) -> list[Record]:
    """Records of a local store folder (cached) or of any other store (``open_store``)."""
    text = str(store)
    if "://" in text and not text.startswith("file://"):
        return open_store(text).records()
    return load_local(Path(text.removeprefix("file://")))
