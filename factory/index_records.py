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

from factory.atomic import write_bytes
from factory.store import FILES, Record, open_store

CACHE_FILE = ".records-cache.json"
CACHE_SCHEMA = 1
_FIELDS = frozenset(Record.__dataclass_fields__)


def record_from_dict(raw: dict[str, Any]) -> Record:
    """Like ``Record.from_json`` on an already parsed object."""
    values = {k: v for k, v in raw.items() if k in _FIELDS}
    for key in ("requires_dist", "archs"):
        if key in values:
            values[key] = tuple(values[key])
    return Record(**values)


def _read_cache(path: Path) -> dict[str, list[Any]]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != CACHE_SCHEMA or not isinstance(data.get("records"), dict):
        return {}
    return data["records"]  # type: ignore[no-any-return]


def load_local(root: Path) -> list[Record]:
    """The records under ``<root>/files/`` whose wheel is there, sorted by file name."""
    files = root / FILES
    if not files.is_dir():
        return []
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
    changed = False
    for entry in sorted(record_entries, key=lambda e: e.name):
        if entry.name.removesuffix(".json") not in names:
            continue
        try:
            st = entry.stat()
        except FileNotFoundError:
            continue
        hit = cache.get(entry.name)
        if hit is not None and hit[0] == st.st_mtime_ns and hit[1] == st.st_size:
            raw = hit[2]
        else:
            try:
                raw = json.loads(Path(entry.path).read_bytes())
            except FileNotFoundError:
                continue
            changed = True
        fresh[entry.name] = [st.st_mtime_ns, st.st_size, raw]
        records.append(record_from_dict(raw))
    if changed or len(fresh) != len(cache):
        data = json.dumps({"schema": CACHE_SCHEMA, "records": fresh}, separators=(",", ":"), sort_keys=True)
        try:
            write_bytes(files / CACHE_FILE, data.encode())
        except OSError:
            pass  # a read-only store: list without the cache
    return records


def load_records(store: str | Path) -> list[Record]:
    """Records of a local store folder (cached) or of any other store (``open_store``)."""
    text = str(store)
    if "://" in text and not text.startswith("file://"):
        return open_store(text).records()
    return load_local(Path(text.removeprefix("file://")))
