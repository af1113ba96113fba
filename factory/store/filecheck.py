"""Every run: the files each record names are still the ones it describes (docs/index.md, "Wheels and .metadata
files, checked on every run"; issue 27 items 3 and 5). The catalog only says which files to look at, never
trusted over them."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import Refused, Unreachable
from ..record import FILES
from .catalog import FILES_STATE, Catalog, Synced, record_key, select_in

if TYPE_CHECKING:
    from . import Store

STATS = "wheel_stats"  # meta: wheel -> "<its key>/<its record's key>" when it last matched ("!..." if not,
# "?..." if it matched but its .metadata was missing)
_QUERY = ("SELECT filename, json_extract(row, '$.size'), json_extract(row, '$.sha256'), "
          "json_extract(row, '$.metadata_sha256') FROM records WHERE filename IN ({}) ORDER BY filename")


@dataclass
class FileCheck:
    """What one run found: lines for the user, and the projects whose pages must be rendered again."""

    errors: list[str] = field(default_factory=list)  # each makes the run exit 3
    notes: list[str] = field(default_factory=list)  # what was put right
    touched: set[str] = field(default_factory=set)


def check_files(store: Store, catalog: Catalog, synced: Synced, repair: bool = False) -> FileCheck:
    """Compare every record in ``catalog`` with its wheel and ``.metadata``; ``synced``: this run's ``sync``."""
    found = FileCheck()
    local = store.folder is not None  # a local record written again: its wheel is hashed again (S3: a new ETag)
    names = synced.names
    saved = catalog.meta(STATS)
    stats: dict[str, str] = json.loads(saved) if saved else {}
    seen: dict[str, str] = {}
    looked: dict[str, tuple[int, str, str | None]] = {}  # wheels whose rows must be read: (size, key, kind)
    for name, row_key in catalog.keys().items():
        if names is not None and name not in names:
            continue  # a record without its wheel: the listing names it (Synced.errors)
        got = store.wheel_stat(name)
        if got is None:
            continue
        key = f"{got[1]}/{row_key}" if local else got[1]
        if stats.get(name) == key and (names is None or f"{name}.metadata" in names):
            seen[name] = key  # the wheel and the record the last check compared (and its .metadata is there)
        else:
            looked[name] = (got[0], key, got[2])
    drop: list[str] = []
    redo: list[tuple[str, Any, str | None]] = []
    fix_changed = ("run `kernel-factory index --repair` to record this wheel as it is" if local else
                   "delete the wheel and its record and run `kernel-factory build` again")  # S3 has no --repair
    for name, size, sha256, metadata_sha256 in select_in(catalog.db, _QUERY, sorted(looked)):  # in name order
        got_size, key, kind = looked[name]
        before = stats.get(name)
        bad, fix = None, fix_changed
        if kind is not None:  # a folder where the wheel was: --repair cannot record it
            bad = kind
            fix = f"remove it and {name}.json and {name}.metadata beside it (then run `kernel-factory index`)"
        elif got_size != size:
            bad = f"{got_size} bytes where its record says {size}"
        elif before is not None and before not in (key, f"?{key}") and store.sha256_of(name) != sha256:
            bad = "its sha256 differs from its record's"
        if bad is not None:
            if repair and store.folder is not None and kind is None:
                from .adopt import repair as record_again

                try:  # record the wheel as it is now (index --repair)
                    record = record_again(store.folder, name)
                    new_key = record_key((store.folder / FILES / f"{name}.json").stat())
                except Refused as exc:
                    found.errors.append(f"{store.file_url(name)}: differs from its record and cannot be recorded "
                                        f"again: {exc}")  # fmt: skip
                else:
                    redo.append((new_key, record, None))
                    found.notes.append(f"repaired {store.file_url(name)}.json: the wheel changed outside "
                                       "kernel-factory, its record now describes it")  # fmt: skip
                    got = store.wheel_stat(name)
                    seen[name] = f"{got[1] if got else ''}/{new_key}"  # the wheel as its new record has it
                    continue
            else:
                found.errors.append(f"{store.file_url(name)}: {bad}, not the wheel its record {name}.json describes "
                                    "(changed outside kernel-factory); it is left out of the pages: put back the "
                                    f"wheel the record describes, or {fix}")  # fmt: skip
            drop.append(name)
            seen[name] = f"!{key}"  # never its key: checked (hashed) again next run, not taken at first sight
            continue
        seen[name] = key
        meta = f"{name}.metadata"
        missing = metadata_sha256 and not (meta in names if names is not None else store.wheel_stat(meta))
        if missing and not _put_metadata(store, name, metadata_sha256, found):
            seen[name] = f"?{key}"  # compared, but its .metadata is missing: looked at again next run
    if drop or redo:
        found.touched |= catalog.apply(redo, drop)
        if drop:
            catalog.set_meta(FILES_STATE, "")  # list the store again next run: the wheel may be back by then
    if seen != stats:
        catalog.set_meta(STATS, json.dumps(seen, sort_keys=True, separators=(",", ":")))
    return found


def _put_metadata(store: Store, name: str, metadata_sha256: str, found: FileCheck) -> bool:
    """Write a missing ``.metadata`` again from its wheel, where it is the one its record names (else False)."""
    where = store.file_url(f"{name}.metadata")
    try:
        metadata = store.wheel_metadata(name)
    except (Refused, Unreachable) as exc:
        found.errors.append(f"{where} is missing and cannot be made again: {exc}")
        return False
    if hashlib.sha256(metadata).hexdigest() != metadata_sha256:
        fix = "run `kernel-factory index --repair`" if store.folder is not None else "build the wheel again"
        found.errors.append(f"{where} is missing, and the wheel's METADATA is not the one its record names; {fix}")
        return False
    try:
        store.write(f"{name}.metadata", metadata)
    except Unreachable as exc:
        found.errors.append(f"{where} is missing (pip gets a 404 for it); {exc}")
        return False
    found.notes.append(f"{where} was missing: written again from its wheel")
    return True
