"""``index --wheels DIR``: adopt existing wheels into the store with their ``.metadata`` and records (docs/index.md:
copies, never hard links; a kernel's name refused unless ``--allow-kernel-names``; batches in worker processes,
two file-system syncs each). Wheel, then METADATA, then record, each atomic: a record only exists once its wheel
and metadata are whole. What is read from a wheel, and its caps, are in wheelinfo.py."""

from __future__ import annotations

import contextlib
import json
import os
import zipfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import report
from ..errors import DigestMismatch, Refused
from ..libc import sync_fs
from ..nofollow import Batch, LinkRefused, copy_file, file_digest, fsync_path, write_bytes
from ..record import FILES, MAX_RECORD_BYTES, VARIANT_ROOT, Record, read_provenance
from . import check as record_check
from .catalog import Row, catalog_row, record_key
from .wheelinfo import WheelData, map_labels, parse_name, read_wheel, read_wheel_info, record_of

BATCH = 512  # wheels per batch (one process handles a batch; two file-system syncs each)
SMALL = 4  # a batch of at most this many wheels fsyncs its files and folder instead of the file system


@dataclass
class AdoptResult:
    adopted: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)  # the adopted wheels' catalog rows (Catalog.apply_rows)
    not_wheels: list[str] = field(default_factory=list)  # sdists and eggs in the folder: not indexed, said so


SDIST_ENDINGS = (".tar.gz", ".zip", ".tar.bz2", ".tar.xz", ".tgz", ".tar", ".egg")  # PEP 625 sdists, old forms


def not_wheels(names: Collection[str]) -> list[str]:
    """The distributions among a folder's ``names`` that are not wheels (they are named, never dropped silently)."""
    return sorted(n for n in names if n.endswith(SDIST_ENDINGS) and not n.startswith("."))


def _prepare(files: str, batch: Batch, path: str, kernels: Collection[str], known: dict[str, dict[str, Any]]) -> Record:
    """Check, read and hash one wheel and put it and its .metadata into ``files/`` (not yet its record)."""
    filename = os.path.basename(path)
    parsed = parse_name(filename)
    if parsed[0] in kernels:
        raise Refused(f"{filename}: project {parsed[0]!r} is a kernel this store builds, and an adopted wheel would "
                      "sit beside it in every install; remove the wheel, or pass --allow-kernel-names "
                      "(allow-kernel-names = true) if you mean to add it")  # fmt: skip
    wheel = read_wheel(path, filename)
    record = record_of(filename, parsed, wheel, known)
    dest = os.path.join(files, filename)
    same = False
    if os.path.lexists(dest):
        # a symbolic link of that name (never read through: the rename replaces it, not its target), or gone since
        with contextlib.suppress(OSError, LinkRefused):
            same = file_digest(Path(dest), follow=False) == record.sha256
        if not same and os.path.isfile(dest) and not os.path.islink(dest):
            raise Refused(f"{filename}: a different file of that name is already in {files}; remove one of them")
    if not same:
        # a copy, never a hard link: a write to the --wheels folder's file must not change the store's; the bytes
        # hashed (those read, for a small wheel), else a copy that must hash the same, never through a link
        if wheel.data is not None:
            batch.put(filename, wheel.data)
        else:
            try:
                copy_file(Path(path), Path(dest), wheel.sha256)
            except (DigestMismatch, LinkRefused):
                raise Refused(f"{filename}: the file changed while it was read; run again once the folder is still"
                              ) from None  # fmt: skip
        os.utime(dest, (wheel.mtime, wheel.mtime))  # the record's upload time, as --repair reads it back
    batch.put(f"{filename}.metadata", wheel.metadata)
    return record


def adopt_batch(
    files: str | Path, wheels: Sequence[str | Path], kernels: Collection[str] = (),
    known: dict[str, dict[str, Any]] | None = None,
) -> tuple[list[tuple[str, Record, str]], list[tuple[str, str]], dict[str, dict[str, Any]]]:
    """Adopt a batch: ([(catalog key, record, its text)], [(wheel, why refused)], ``known`` filled)."""
    folder, paths = os.fspath(files), [os.fspath(w) for w in wheels]
    known = {} if known is None else known
    batch = Batch(folder, fsync=len(paths) <= SMALL)
    ready: list[Record] = []
    refused: list[tuple[str, str]] = []
    for path in paths:
        try:
            ready.append(_prepare(folder, batch, path, kernels, known))
        except Refused as exc:
            refused.append((os.path.basename(path), str(exc)))
    if not ready:
        return [], refused, known
    _durable(batch, [record.filename for record in ready])  # wheels and .metadata on disk before any record
    done = []
    for record in ready:
        name = f"{record.filename}.json"
        data = record.to_json()
        batch.put(name, data)
        done.append((record_key(os.stat(os.path.join(folder, name))), record, data.decode()))  # key: its ctime
        # as renamed into place; the text: the row's (store/catalog.py ``catalog_row``)
    _durable(batch)
    return done, refused, known


def _durable(batch: Batch, wheels: Sequence[str] = ()) -> None:
    if not batch.fsync:
        sync_fs(batch.folder)
        return
    for name in wheels:
        fsync_path(os.path.join(batch.folder, name))
    fsync_path(batch.folder)


def _adopt_rows(
    files: str, paths: list[str], kernels: Collection[str], known: dict[str, dict[str, Any]]
) -> tuple[list[Row], list[tuple[str, str]], dict[str, dict[str, Any]]]:
    """``adopt_batch`` with the adopted wheels as catalog rows, made here (in a worker) rather than in the
    process that waits for every worker; the rows are all it sends back of them."""
    done, refused, found = adopt_batch(files, paths, kernels, known)
    names: dict[str, str] = {}
    return [catalog_row(key, record, names, text) for key, record, text in done], refused, found


def adopt_wheels(
    store_root: Path, wheels: Sequence[str | Path], kernels: Collection[str] = (),
    known: dict[str, dict[str, Any]] | None = None, workers: int | None = None,
) -> AdoptResult:  # fmt: skip
    """Adopt ``wheels`` in batches, in parallel processes (one per core); ``known``: see ``variant_fields``."""
    paths = [os.fspath(w) for w in wheels]
    files = store_root / FILES
    files.mkdir(parents=True, exist_ok=True)
    folder = os.fspath(files)
    result = AdoptResult()
    known = {} if known is None else known
    map_labels([os.path.basename(p) for p in paths], known)  # here, once: the workers inherit the grammar
    batches = [paths[i : i + BATCH] for i in range(0, len(paths), BATCH)]
    workers = workers or min(os.cpu_count() or 1, len(batches))
    if workers <= 1:
        outcomes = [_adopt_rows(folder, batch, kernels, known) for batch in batches]
    else:
        from .pool import worker_pool

        with worker_pool(workers) as pool:  # workers drop the store lock and die with this process
            outcomes = list(pool.map(_adopt_rows, [folder] * len(batches), batches, [kernels] * len(batches),
                                     [known] * len(batches)))  # fmt: skip
    for rows, refused, found in outcomes:
        known.update(found)
        result.rows.extend(rows)
        result.adopted.extend(row[0] for row in rows)
        for name, why in refused:
            report.warn(f"skipped {why}")
            result.refused.append(name)
    result.adopted.sort()
    result.refused.sort()
    return result


def repair(store_root: Path, wheel_name: str) -> Record:
    """Rebuild ``files/<wheel>.json`` and ``.metadata`` from the wheel (its provenance, if built); Refused if not."""
    files = store_root / FILES
    wheel = files / wheel_name
    parsed = parse_name(wheel_name)
    metadata, provenance = read_wheel_info(wheel)
    st = wheel.stat()
    data = WheelData(file_digest(wheel), st.st_size, st.st_mtime, metadata, provenance, None)
    record = record_of(wheel_name, parsed, data)
    prov = read_provenance(provenance)[0] or {}
    if prov and record.variant is not None and prov.get("variant") == record.variant:
        built = _as_built(record, prov, wheel)
        with contextlib.suppress(ValueError):  # a provenance file we cannot trust: the record of an adopted wheel
            record_check.check(json.loads(built.to_json()), wheel_name)
            record = built
    write_bytes(files / f"{wheel_name}.metadata", metadata)
    write_bytes(files / f"{wheel_name}.json", record.to_json())
    return record


def _as_built(record: Record, prov: dict[str, Any], wheel: Path) -> Record:
    def text(key: str) -> str | None:
        value = prov.get(key)
        return value if isinstance(value, str) else None

    digest = prov.get("digest")
    with zipfile.ZipFile(wheel) as zf:
        stamp = zf.infolist()[0].date_time
    upload = "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}Z".format(*stamp)
    root = text(VARIANT_ROOT)  # as a built record keeps it (wheel/layout.py); a zip-layout kernel has no import name
    return replace(record, kind="kernel", repo_id=text("repo_id"), source=text("source") or text("repo_id"),
                   revision=text("revision"), ref=text("ref"),
                   import_name=None if text("layout") == "zip" else text("package"),
                   extra={**record.extra, VARIANT_ROOT: root} if root else record.extra,
                   kernel_version=text("kernel_version") or record.kernel_version,
                   digest=digest.get("hash") if isinstance(digest, dict) else None,
                   factory_version=text("factory_version"), upload_time=upload)


def repair_store(store_root: Path) -> tuple[list[str], list[str]]:
    """Rebuild every damaged, invalid or missing record of a wheel in the store; (repaired, refused) wheel names."""
    files = store_root / FILES
    repaired: list[str] = []
    refused: list[str] = []
    if not files.is_dir():
        return repaired, refused
    names = {p.name for p in files.iterdir() if not p.name.startswith(".")}
    for wheel in sorted(n for n in names if n.endswith(".whl") and (files / n).is_file()):
        path = files / f"{wheel}.json"
        if path.name in names:  # a record that passes its check stays; one without its wheel is not ours to fix
            with contextlib.suppress(record_check.BadRecord), open(path, "rb") as f:
                record_check.parse(f.read(MAX_RECORD_BYTES + 1), wheel, str(path))
                continue
        try:
            repair(store_root, wheel)
        except Refused as exc:
            report.error(f"cannot repair {path}: {exc}")
            refused.append(wheel)
            continue
        report.info(f"repaired {path} from its wheel", stderr=True)
        repaired.append(wheel)
    return repaired, refused
