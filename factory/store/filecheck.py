"""Every run: the files each record names are still the ones it describes (issue 27 items 3 and 5).

The catalog says which records the pages show; this compares them with the files beside them, cheaply:

- a record's wheel must have the size the record gives (local: one stat per wheel; S3: the listing's size);
- a local wheel whose stat (inode, mtime, ctime, size) or whose record (its catalog key) changed since the
  last run that checked it is hashed again and compared with the record's sha256 (both are kept in the
  catalog's meta ``wheel_stats``; a wheel seen for the first time is taken at its size, as adoption or the
  build has just hashed it); one whose stat and record are those of the last check, and whose ``.metadata``
  is there, was compared then (its size with that record's): only the others' rows are read;
- a record's ``.metadata`` must exist (local: the folder's listing; S3: the bucket's listing); a missing one
  is written again from the wheel's METADATA when that hashes to the record's ``metadata_sha256``.

``files/`` is listed unless its own stat, taken before this run's adoption wrote there, is the one kept after
the last check (``LISTED``; ``keep`` keeps it when that check wrote nothing there and the folder was the same
at the end of its run, stat'ed a clock tick after its last change): then no entry was added, removed or
renamed since but this run's adopted wheels, so the wheels are the catalog's and each ``.metadata`` is where
that check saw it. Each wheel is stat'ed on every run either way.

A wheel that differs from its record is left out of the pages (so pip never gets a link whose hash fails)
and named with what to do; ``--repair`` records the wheel as it is now (store/adopt.py ``repair``). Either way
the run exits 3 until the store is whole again. Nothing here trusts the catalog over the files: the catalog
only says which files to look at.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..atomic import file_digest, write_bytes
from ..errors import Refused
from ..record import FILES
from .catalog import FILES_STATE, Catalog, folder_state, record_key, stat_state

STATS = "wheel_stats"  # meta: wheel -> "<its stat key>/<its record's key>" when it last matched ("!..." if not,
# "?..." if it matched but its .metadata was missing)
LISTED = "wheel_stats_folder"  # meta: files/'s stat after the last check that wrote nothing there (see ``keep``)
_QUERY = ("SELECT filename, json_extract(row, '$.size'), json_extract(row, '$.sha256'), "
          "json_extract(row, '$.metadata_sha256') FROM records WHERE filename IN ({}) ORDER BY filename")


@dataclass
class FileCheck:
    """What one run found: lines for the user, and the projects whose pages must be rendered again."""

    errors: list[str] = field(default_factory=list)  # each makes the run exit 3
    notes: list[str] = field(default_factory=list)  # what was put right (printed as they are)
    touched: set[str] = field(default_factory=set)
    folder: str | None = None  # files/'s stat when the check began, if it wrote nothing there (see ``keep``)


def _rows(catalog: Catalog, names: list[str] | None = None) -> list[tuple[str, int, str, str | None]]:
    """(file name, size, sha256, metadata_sha256) of the records of ``names`` (default: every record)."""
    if names is None:
        return list(catalog.db.execute(_QUERY.partition(" WHERE")[0] + " ORDER BY filename"))
    rows: list[tuple[str, int, str, str | None]] = []
    for i in range(0, len(names), 500):
        part = names[i : i + 500]
        rows += catalog.db.execute(_QUERY.format(",".join("?" * len(part))), part)
    return sorted(rows)


def _metadata_of(wheel: Path | bytes, name: str) -> bytes:
    """A wheel's METADATA (read with wheelinfo's caps), from its file or its bytes."""
    from .wheelinfo import read_wheel_info

    if isinstance(wheel, Path):
        return read_wheel_info(wheel)[0]
    import tempfile

    with tempfile.TemporaryDirectory(prefix=".tmp-wheel-") as tmp:
        path = Path(tmp, name)
        path.write_bytes(wheel)
        return read_wheel_info(path)[0]


REPAIR_FIX = "run `kernel-factory index --repair` to record this wheel as it is"
REBUILD_FIX = "delete the wheel and its record and run `kernel-factory build` again"


def _changed(where: str, name: str, what: str, fix: str = REPAIR_FIX) -> str:
    return (
        f"{where}: {what}, not the wheel its record {name}.json describes (changed outside kernel-factory); "
        f"it is left out of the pages: put back the wheel the record describes, or {fix}"
    )


def unchanged(files: Path, catalog: Catalog) -> bool:
    """Whether ``files/``'s stat is the one the last check kept: nothing added, removed or renamed there since
    (call it before this run's own writes to pass to ``check_local``)."""
    try:
        return catalog.meta(LISTED) == stat_state(os.stat(files))
    except FileNotFoundError:
        return False


def check_local(
    root: Path, catalog: Catalog, repair: bool = False, listed: bool | None = None,
) -> FileCheck:  # fmt: skip
    """Compare every record in ``catalog`` with its wheel and ``.metadata`` under ``root/files``.

    ``listed``: ``unchanged`` as it was before this run's own writes to files/ (wheels adopted, whose rows are in
    ``catalog``); default: asked now. Call ``keep`` once the run has written what it writes there."""
    files = root / FILES
    found = FileCheck()
    try:
        folder = os.stat(files)
    except FileNotFoundError:
        return found
    if listed is None:
        listed = unchanged(files, catalog)
    wheels: set[str] | None = None  # the wheels and .metadata files there (one listing: no stat each)
    metadata: set[str] | None = None
    if not listed:
        wheels, metadata = set(), set()
        with os.scandir(files) as it:
            for e in it:
                if e.name.endswith(".whl"):
                    wheels.add(e.name)
                elif e.name.endswith(".metadata"):
                    metadata.add(e.name)
    saved = catalog.meta(STATS)
    stats: dict[str, str] = json.loads(saved) if saved else {}
    seen: dict[str, str] = {}
    drop: list[str] = []
    redo: list[tuple[str, Any, str | None]] = []
    looked: dict[str, tuple[os.stat_result, str]] = {}  # wheels whose rows must be read
    prefix = f"{files}{os.sep}"
    for name, row_key in catalog.keys().items():
        if wheels is not None and name not in wheels:
            continue  # a record without its wheel: the listing names it (store/catalog.py)
        try:
            st = os.stat(prefix + name)
        except FileNotFoundError:
            continue
        key = f"{record_key(st)}/{row_key}"
        if stats.get(name) == key and (metadata is None or f"{name}.metadata" in metadata):
            seen[name] = key  # the wheel and the record the last check compared (and its .metadata is there)
        else:
            looked[name] = (st, key)
    few = len(looked) * 2 < len(seen) + len(looked)  # else (a first check) one query of every row is quicker
    wrote = False
    for name, size, sha256, metadata_sha256 in _rows(catalog, sorted(looked)) if few else _rows(catalog):
        if name not in looked:
            continue
        st, key = looked[name]
        before = stats.get(name)
        bad = None
        if not stat.S_ISREG(st.st_mode):  # a folder where the wheel was: --repair cannot record it
            wrote = True
            what = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            found.errors.append(_changed(str(files / name), name, what, f"remove it and {name}.json and "
                                         f"{name}.metadata beside it (then run `kernel-factory index`)"))
            drop.append(name)
            seen[name] = f"!{key}"
            continue
        if st.st_size != size:
            bad = f"{st.st_size} bytes where its record says {size}"
        elif before is not None and before not in (key, f"?{key}") and file_digest(files / name) != sha256:
            bad = "its sha256 differs from its record's"
        if bad is not None:
            wrote = True
            path = files / name
            if repair and _repair(root, name, found, redo):
                seen[name] = f"{record_key(path.stat())}/{redo[-1][0]}"  # the wheel as its new record has it
                continue
            if not repair:  # (a failed repair said why)
                found.errors.append(_changed(str(path), name, bad))
            drop.append(name)
            seen[name] = f"!{key}"  # never its key: checked (hashed) again next run, not taken at first sight
            continue
        seen[name] = key
        meta = f"{name}.metadata"
        if metadata_sha256 and not (meta in metadata if metadata is not None else os.path.exists(prefix + meta)):
            wrote = True
            if not _put_metadata(files / name, name, metadata_sha256, os.access(files, os.W_OK), found):
                seen[name] = f"?{key}"  # compared, but its .metadata is missing: looked at again next run
    if drop or redo:
        found.touched |= catalog.apply(redo, drop)
        if drop:
            catalog.set_meta(FILES_STATE, "")  # list files/ again next run: the wheel may be back by then
    if seen != stats:
        catalog.put_meta(STATS, json.dumps(seen, sort_keys=True, separators=(",", ":")))
    found.folder = None if wrote else stat_state(folder)
    return found


def keep(files: Path, catalog: Catalog, found: FileCheck) -> None:
    """After the run's writes to files/: keep its stat for the next check (``unchanged``) when this check wrote
    nothing there and the folder is as it was when the check began (its stat taken once it is a clock tick old,
    so a later change shows in it); else clear it, and the next check lists the folder."""
    state = folder_state(files) if found.folder is not None else None
    value = state if state is not None and state == found.folder else ""
    if catalog.meta(LISTED) != value:
        catalog.put_meta(LISTED, value)


def _put_metadata(wheel: Path, name: str, metadata_sha256: str, writable: bool, found: FileCheck) -> bool:
    """Write a missing ``.metadata`` again from its wheel; False (and an error) where it cannot be."""
    where = wheel.with_name(f"{name}.metadata")
    metadata = _metadata_again(lambda: wheel, str(where), name, metadata_sha256,
                               "run `kernel-factory index --repair`", found)  # fmt: skip
    if metadata is None:
        return False
    if not writable:
        found.errors.append(f"{where} is missing (pip gets a 404 for it); the store is read-only here: "
                            "run `kernel-factory index` where the store can be written")  # fmt: skip
        return False
    write_bytes(where, metadata)
    found.notes.append(f"{where} was missing: written again from its wheel")
    return True


def _metadata_again(wheel: Callable[[], Any], where: str, name: str, metadata_sha256: str, fix: str,
                    found: FileCheck) -> bytes | None:  # fmt: skip
    """A missing ``.metadata`` made again from its wheel's METADATA (``wheel()``: the wheel's path or bytes),
    when that is the one its record names; else None and one error line ending in ``fix``."""
    from ..errors import Unreachable

    try:
        metadata = _metadata_of(wheel(), name)
    except (Refused, Unreachable) as exc:
        found.errors.append(f"{where} is missing and cannot be made again: {exc}")
        return None
    if hashlib.sha256(metadata).hexdigest() != metadata_sha256:
        found.errors.append(f"{where} is missing, and the wheel's METADATA is not the one its record names; {fix}")
        return None
    return metadata


def _repair(root: Path, name: str, found: FileCheck, redo: list[tuple[str, Any, str | None]]) -> bool:
    """Record the wheel as it is now (``index --repair``); False (and an error) if it is not a valid wheel."""
    from .adopt import repair

    try:
        record = repair(root, name)
    except Refused as exc:
        found.errors.append(f"{root / FILES / name}: differs from its record and cannot be recorded again: {exc}")
        return False
    redo.append((record_key((root / FILES / f"{name}.json").stat()), record, None))
    found.notes.append(f"repaired {root / FILES / name}.json: the wheel changed outside kernel-factory, "
                       "its record now describes it")  # fmt: skip
    return True


class Files(Protocol):
    """The files of a store without a local folder, as the file check reads them (store/s3.py's S3Store)."""

    def file_listing(self) -> dict[str, tuple[int, str]]: ...  # file name in files/ -> (size, ETag)

    def read_file(self, name: str) -> bytes: ...  # Unreachable where it cannot be read

    def write_file(self, name: str, data: bytes, sha256: str) -> None: ...  # Unreachable where it cannot

    def file_url(self, name: str) -> str: ...

    def catalog_changed(self) -> None: ...


def check_s3(store: Files, catalog: Catalog) -> FileCheck:
    """The S3 store's records (``catalog``) against the listing its ``catalog()`` took: each wheel object's size;
    its ETag against the one it had when it last matched (kept in the catalog's ``wheel_stats``; another ETag:
    the object is read and hashed); and each ``.metadata`` object's existence (one missing is put back from the
    wheel when the credentials allow it). A changed ``wheel_stats`` marks the catalog to be put back."""
    found = FileCheck()
    listing = store.file_listing()
    saved = catalog.meta(STATS)
    stats: dict[str, str] = json.loads(saved) if saved else {}
    seen: dict[str, str] = {}
    drop: list[str] = []
    for name, size, sha256, metadata_sha256 in _rows(catalog):
        if name not in listing:
            continue
        got, etag = listing[name]
        before = stats.get(name)
        what = None
        if got != size:
            what = f"{got} bytes where its record says {size}"
        elif before is not None and before != etag and _sha256_of(store, name) != sha256:
            what = "its sha256 differs from its record's"
        if what is not None:
            found.errors.append(_changed(store.file_url(name), name, what, REBUILD_FIX))
            drop.append(name)
            seen[name] = f"!{etag}"  # never its ETag: read and hashed again next run
            continue
        seen[name] = etag
        if metadata_sha256 and f"{name}.metadata" not in listing:
            _put_s3_metadata(store, name, metadata_sha256, found)
    if drop:
        found.touched |= catalog.apply([], drop)
    if seen != stats:
        catalog.put_meta(STATS, json.dumps(seen, sort_keys=True, separators=(",", ":")))
        store.catalog_changed()
    return found


def _sha256_of(store: Files, name: str) -> str:
    """The sha256 of a file's bytes ("" where it cannot be read, which no record holds)."""
    from ..errors import Unreachable

    try:
        return hashlib.sha256(store.read_file(name)).hexdigest()
    except Unreachable:
        return ""


def _put_s3_metadata(store: Files, name: str, metadata_sha256: str, found: FileCheck) -> None:
    from ..errors import Unreachable

    where = store.file_url(f"{name}.metadata")
    metadata = _metadata_again(lambda: store.read_file(name), where, name, metadata_sha256,
                               "build the wheel again", found)  # fmt: skip
    if metadata is None:
        return
    try:
        store.write_file(f"{name}.metadata", metadata, metadata_sha256)
    except Unreachable as exc:
        found.errors.append(f"{where} is missing (pip gets a 404 for it) and cannot be written: {exc}")
        return
    found.notes.append(f"{where} was missing: written again from its wheel")
