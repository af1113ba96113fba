"""Fast listing of a local store's records, with a cache keyed by each record file's mtime and size.

Reading 20,000 small JSON files costs more than rendering the pages that
change; ``files/.records-cache.json`` keeps the parsed records, and a record
file whose (mtime, size) changed is read again. Like ``LocalStore.records``,
every record read is checked by factory/store/check.py, and one that fails,
or whose wheel is missing, is not listed but named in ``damaged``. The cache
holds only records that passed the check.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..atomic import write_bytes
from ..config import Location
from ..record import FILES, Record
from . import check as record_check
from . import open_store

CACHE_FILE = ".records-cache.json"
CACHE_SCHEMA = 3  # 3: rows are records that passed store/check.py
_NAMES = tuple(Record.__dataclass_fields__)


def _from_row(row: list[Any]) -> Record:
    """A record from a cache row (every field, in field order), without re-validating it."""
    return Record.from_dict(dict(zip(_NAMES, row, strict=True)))


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


def load_local_keyed(root: Path, damaged: list[str] | None = None) -> tuple[list[Record], dict[str, str]]:
    """The valid records under ``<root>/files/`` whose wheel is there, sorted by file name, and a key per wheel
    that changes when its record file does (mtime and size). One line per record left out goes to ``damaged``."""
    damaged = [] if damaged is None else damaged
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
            damaged.append(record_check.missing_wheel(entry.path, wheel))
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
                with open(entry.path, "rb") as f:
                    raw = f.read(record_check.MAX_RECORD_BYTES + 1)
                record = record_check.parse(raw, wheel, entry.path)
            except FileNotFoundError:
                continue
            except record_check.BadRecord as exc:
                damaged.append(str(exc))
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


def load_local(root: Path, damaged: list[str] | None = None) -> list[Record]:
    """The valid records under ``<root>/files/`` whose wheel is there, sorted by file name."""
    return load_local_keyed(root, damaged)[0]


def load_records(store: Location | str | Path, damaged: list[str] | None = None) -> list[Record]:
    """Valid records of a local store folder (cached) or of any other store (``open_store``)."""
    loc = store if isinstance(store, Location) else Location.parse(store)
    if loc.local is None:
        opened = open_store(loc)
        records = opened.records()
        if damaged is not None:
            damaged.extend(opened.damaged)
        return records
    return load_local(loc.local, damaged)
