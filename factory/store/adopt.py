"""``index --wheels DIR``: adopt existing wheels into the store with their ``.metadata`` and records.

Each wheel is hard-linked (else copied) into ``files/``, then its METADATA is
written beside it, then its record; each step atomic, so a record only exists
once its wheel and metadata are whole. Adopting a wheel again does nothing.

A wheel whose local label is a build variant's (by factory/variants.py), or
that carries kernel-factory's provenance file, is recorded with that variant,
so the index lists it in that variant's root and the combined root only. A
wheel with no label is universal; one with an unknown label goes in the
combined root only. A wheel whose project is a kernel the store already holds
is refused unless the user allows it (``--allow-kernel-names``). Nothing is
read from a wheel beyond ``MAX_METADATA`` bytes.

Wheels are read and hashed in parallel processes, in batches: a batch links
its wheels and writes their ``.metadata`` files, syncs the file system once,
then renames the records into place and syncs once more (two syncs per batch,
not an fsync per file). Each label is mapped to its variant once per run, and
the mapping is kept in the catalog (loading the variant grammar costs more
than adopting a wheel).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zipfile
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .. import variants
from ..atomic import atomic_open, file_digest, link_or_copy, write_bytes
from ..errors import Refused, UnknownVariant
from ..record import FILES, PROVENANCE, Record
from . import check as record_check

MAX_METADATA = 4 * 1024 * 1024  # bytes of METADATA (or the provenance file) read from a wheel
MAX_PROVENANCE = 64 * 1024
BATCH = 512  # wheels per batch (one process handles a batch; two file-system syncs each)


@dataclass
class AdoptResult:
    adopted: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    records: list[tuple[str, Record]] = field(default_factory=list)  # (catalog key, record) of those adopted


def _read_capped(zf: zipfile.ZipFile, member: str, limit: int, wheel: Path) -> bytes:
    """One member's bytes; Refused when it says, or turns out, to be bigger than ``limit``."""
    too_big = Refused(f"{wheel.name}: {member} inflates to more than {limit} bytes (a zip bomb?); "
                      "rebuild the wheel with smaller metadata")
    if zf.getinfo(member).file_size > limit:
        raise too_big
    with zf.open(member) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise too_big
    return data


def read_wheel_info(wheel: Path) -> tuple[bytes, bytes | None]:
    """(METADATA, the provenance file or None) of a wheel, each read with a size cap.

    Refused if there is not exactly one ``.dist-info/METADATA``, or the zip is unreadable.
    """
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if n.count("/") == 1 and ".dist-info/" in n]
            found = [n for n in names if n.endswith(".dist-info/METADATA")]
            if len(found) != 1:
                raise Refused(f"{wheel.name}: expected one .dist-info/METADATA, found {len(found)}; rebuild the wheel")
            metadata = _read_capped(zf, found[0], MAX_METADATA, wheel)
            prov = found[0].removesuffix("METADATA") + PROVENANCE
            provenance = _read_capped(zf, prov, MAX_PROVENANCE, wheel) if prov in names else None
            return metadata, provenance
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise Refused(f"{wheel.name}: not a readable zip file ({exc}); rebuild or remove it") from None


def read_metadata(wheel: Path) -> bytes:
    """The bytes of the wheel's ``<name>-<version>.dist-info/METADATA``; Refused if there is not exactly one."""
    return read_wheel_info(wheel)[0]


def _provenance_variant(provenance: bytes | None) -> str | None:
    if provenance is None:
        return None
    try:
        data = json.loads(provenance)
    except (ValueError, RecursionError):
        return None
    variant = data.get("variant") if isinstance(data, dict) else None
    return variant if isinstance(variant, str) else None


def variant_fields(
    wheel_name: str, provenance: bytes | None, known: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Record fields naming the build variant of an adopted wheel; empty when it has no label or an unknown one.

    The provenance file's variant wins when its label is the wheel's; else the label is read back as a variant
    by the rules built wheels follow. An unknown label prints a warning: the wheel goes in the combined root only.
    ``known`` (label and platform tags -> fields) is looked up first and filled, for wheels without provenance.
    """
    _name, version, _build, tags = parse_wheel_filename(wheel_name)
    label = version.local
    key = f"{label}|{','.join(sorted({t.platform for t in tags}))}"
    if provenance is None and known is not None and label is not None and key in known:
        fields = known[key]
        if not fields:
            _unknown_label(wheel_name, label)
        return {**fields, "kernel_version": version.public} if fields else {}
    target: variants.Target | None = None
    named = _provenance_variant(provenance)
    if named is not None:
        try:
            target = variants.parse(named)
        except UnknownVariant:
            target = None
        if target is not None and target.label != label:
            target = None
    if target is None and label is not None:
        target = variants.for_label(label, {t.platform for t in tags})
    if target is None:
        if label is not None:
            _unknown_label(wheel_name, label)
            if provenance is None and known is not None:
                known[key] = {}
        return {}
    fields = {"label": target.label, "variant": target.variant, "backend": target.backend,
              "backend_version": target.backend_version, "framework": target.framework,
              "framework_version": target.framework_version, "os": target.os, "arch": target.arch}
    if provenance is None and known is not None:
        known[key] = fields
    return {**fields, "kernel_version": version.public}


def _unknown_label(wheel_name: str, label: str) -> None:
    print(f"warning: {wheel_name}: local label {label!r} is not a build variant's; it is listed in the "
          "combined index only, not in any variants/<label>/ root", file=sys.stderr)


def make_record(
    wheel: Path, metadata: bytes, provenance: bytes | None = None, known: dict[str, dict[str, Any]] | None = None
) -> Record:
    """The record of an adopted wheel, from its file name, METADATA, provenance and file."""
    from packaging.metadata import parse_email  # loaded only when a wheel is adopted

    name, version, _build, _tags = parse_wheel_filename(wheel.name)
    raw, _unparsed = parse_email(metadata)
    meta_name = raw.get("name")
    meta_version = raw.get("version")
    if not meta_name or canonicalize_name(meta_name) != name:
        raise Refused(f"{wheel.name}: METADATA Name {meta_name!r} does not match the file name; rebuild the wheel")
    try:
        same_version = meta_version is not None and Version(meta_version) == version
    except InvalidVersion:
        same_version = False
    if not same_version:
        raise Refused(
            f"{wheel.name}: METADATA Version {meta_version!r} does not match the file name "
            f"(pip refuses such wheels); rebuild the wheel"
        )
    st = wheel.stat()
    mtime = datetime.fromtimestamp(int(st.st_mtime), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Record(
        filename=wheel.name,
        name=meta_name,
        version=str(version),
        sha256=file_digest(wheel),
        size=st.st_size,
        metadata_sha256=hashlib.sha256(metadata).hexdigest(),
        requires_python=raw.get("requires_python"),
        upload_time=mtime,
        summary=raw.get("summary", "") or "",
        requires_dist=tuple(raw.get("requires_dist", [])),
        kind="adopted",
        license=raw.get("license_expression") or raw.get("license") or None,
        **variant_fields(wheel.name, provenance, known),
    )


def _write(path: Path, data: bytes) -> None:
    """Write a file atomically without an fsync of its own (the batch syncs the file system once)."""
    with atomic_open(path, fsync=False) as f:
        f.write(data)


def sync_fs(folder: Path) -> None:
    """Flush the file system that holds ``folder`` (syncfs(2); sync(2) where there is none)."""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        if getattr(libc, "syncfs", None) is None or libc.syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def _prepare(files: Path, wheel: Path, kernels: Collection[str], known: dict[str, dict[str, Any]]) -> Record:
    """Check, read and hash one wheel and put it and its .metadata into ``files/`` (not yet its record)."""
    try:
        project = parse_wheel_filename(wheel.name)[0]
    except InvalidWheelFilename as exc:
        raise Refused(f"{wheel.name}: not a valid wheel file name ({exc}); rename or remove it") from None
    if project in kernels:
        raise Refused(f"{wheel.name}: project {project!r} is a kernel this store builds, and an adopted wheel would "
                      "sit beside it in every install; remove the wheel, or pass --allow-kernel-names "
                      "(allow-kernel-names = true) if you mean to add it")
    metadata, provenance = read_wheel_info(wheel)
    record = make_record(wheel, metadata, provenance, known)
    dest = files / wheel.name
    if not dest.exists():
        link_or_copy(wheel, dest)
    elif not os.path.samefile(dest, wheel) and file_digest(dest) != record.sha256:
        raise Refused(f"{wheel.name}: a different file of that name is already in {files}; remove one of them")
    _write(files / f"{wheel.name}.metadata", metadata)
    return record


def adopt_batch(
    files: Path, wheels: list[Path], kernels: Collection[str] = (), known: dict[str, dict[str, Any]] | None = None
) -> tuple[list[tuple[str, Record]], list[tuple[str, str]], dict[str, dict[str, Any]]]:
    """Adopt a batch of wheels; ([(catalog key, record)], [(wheel name, why refused)], ``known`` filled)."""
    from .catalog import record_key

    known = {} if known is None else known
    ready: list[Record] = []
    refused: list[tuple[str, str]] = []
    for wheel in wheels:
        try:
            ready.append(_prepare(files, wheel, kernels, known))
        except Refused as exc:
            refused.append((wheel.name, str(exc)))
    if not ready:
        return [], refused, known
    sync_fs(files)  # wheels and .metadata on disk before any record names them
    done: list[tuple[str, Record]] = []
    for record in ready:
        path = files / f"{record.filename}.json"
        _write(path, record.to_json())
        done.append((record_key(path.stat()), record))
    sync_fs(files)
    return done, refused, known


def adopt_one(store_root: Path, wheel: Path, kernels: Collection[str] = ()) -> Record | None:
    """Adopt one wheel; None if the store already has its record. Refused on bad input, and when the wheel's
    project is one of ``kernels`` (normalised names of kernels the factory builds)."""
    files = store_root / FILES
    if (files / f"{wheel.name}.json").exists():
        return None
    files.mkdir(parents=True, exist_ok=True)
    done, refused, _ = adopt_batch(files, [wheel], kernels)
    if refused:
        raise Refused(refused[0][1])
    return done[0][1]


def adopt(
    store_root: Path, folder: Path, kernels: Collection[str] = (), listing: Collection[str] | None = None,
    known: dict[str, dict[str, Any]] | None = None,
) -> AdoptResult:  # fmt: skip
    """Adopt every ``*.whl`` in ``folder`` that ``listing`` (wheel names with a record in the store; default:
    listed now) lacks; refused wheels are warned about and listed, the rest go on. A wheel of a project in
    ``kernels`` (normalised names) is refused; ``known``: see ``variant_fields``."""
    if listing is None:
        from .catalog import list_local

        listing = list_local(store_root / FILES)
    with os.scandir(folder) as it:
        names = sorted(e.name for e in it if e.name.endswith(".whl") and not e.name.startswith(".") and e.is_file())
    todo = [folder / n for n in names if n not in listing]
    result = adopt_wheels(store_root, todo, kernels, known) if todo else AdoptResult()
    result.present = [n for n in names if n in listing]
    return result


def adopt_wheels(
    store_root: Path, wheels: list[Path], kernels: Collection[str] = (),
    known: dict[str, dict[str, Any]] | None = None, workers: int | None = None,
) -> AdoptResult:  # fmt: skip
    """Adopt ``wheels`` in batches, in parallel processes (one per core); ``known``: see ``variant_fields``."""
    files = store_root / FILES
    files.mkdir(parents=True, exist_ok=True)
    result = AdoptResult()
    known = {} if known is None else known
    batches = [wheels[i : i + BATCH] for i in range(0, len(wheels), BATCH)]
    workers = workers or min(os.cpu_count() or 1, len(batches))
    if workers <= 1:
        outcomes = [adopt_batch(files, batch, kernels, known) for batch in batches]
    else:
        from concurrent.futures import ProcessPoolExecutor

        if any("+" in w.name for w in wheels):
            variants.parse("torch-cuda")  # load the variant grammar once, before the workers fork
        with ProcessPoolExecutor(max_workers=workers) as pool:
            outcomes = list(pool.map(adopt_batch, [files] * len(batches), batches, [kernels] * len(batches),
                                     [known] * len(batches)))  # fmt: skip
    for done, refused, found in outcomes:
        known.update(found)
        for key, record in done:
            result.records.append((key, record))
            result.adopted.append(record.filename)
        for name, why in refused:
            print(f"warning: skipped {why}", file=sys.stderr)
            result.refused.append(name)
    result.adopted.sort()
    result.refused.sort()
    return result


def repair(store_root: Path, wheel_name: str) -> Record:
    """Rebuild ``files/<wheel>.json`` (and its ``.metadata``) from the wheel in the store; Refused if unreadable.

    A wheel that kernel-factory built carries its provenance: the record names its variant, repository and
    revision again, with the wheel's entry time (the revision's commit time) as upload time.
    """
    files = store_root / FILES
    wheel = files / wheel_name
    try:
        parse_wheel_filename(wheel_name)
    except InvalidWheelFilename as exc:
        raise Refused(f"{wheel_name}: not a valid wheel file name ({exc}); delete it and its record") from None
    metadata, provenance = read_wheel_info(wheel)
    record = make_record(wheel, metadata, provenance)
    prov = _provenance(provenance)
    if prov and record.variant is not None and prov.get("variant") == record.variant:
        built = _as_built(record, prov, wheel)
        try:
            record_check.check(json.loads(built.to_json()), wheel_name)
            record = built
        except ValueError:
            pass  # a provenance file we cannot trust: the record of an adopted wheel
    write_bytes(files / f"{wheel_name}.metadata", metadata)
    write_bytes(files / f"{wheel_name}.json", record.to_json())
    return record


def _provenance(provenance: bytes | None) -> dict[str, Any]:
    try:
        data = json.loads(provenance) if provenance is not None else None
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _as_built(record: Record, prov: dict[str, Any], wheel: Path) -> Record:
    from dataclasses import replace

    def text(key: str) -> str | None:
        value = prov.get(key)
        return value if isinstance(value, str) else None

    digest = prov.get("digest")
    with zipfile.ZipFile(wheel) as zf:
        stamp = zf.infolist()[0].date_time
    upload = "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}Z".format(*stamp)
    return replace(record, kind="kernel", repo_id=text("repo_id"), source=text("source") or text("repo_id"),
                   revision=text("revision"), ref=text("ref"), import_name=text("package"),
                   kernel_version=text("kernel_version") or record.kernel_version,
                   digest=digest.get("hash") if isinstance(digest, dict) else None,
                   factory_version=text("factory_version"), upload_time=upload)


def repair_store(store_root: Path) -> tuple[list[str], list[str]]:
    """Rebuild every damaged or invalid record whose wheel is in the store; (repaired, refused) wheel names."""
    files = store_root / FILES
    repaired: list[str] = []
    refused: list[str] = []
    if not files.is_dir():
        return repaired, refused
    for path in sorted(files.glob("*.whl.json")):
        wheel = path.name.removesuffix(".json")
        if path.name.startswith(".") or not (files / wheel).is_file():
            continue
        try:
            with open(path, "rb") as f:
                record_check.parse(f.read(record_check.MAX_RECORD_BYTES + 1), wheel, str(path))
            continue
        except record_check.BadRecord:
            pass
        try:
            repair(store_root, wheel)
        except Refused as exc:
            print(f"error: cannot repair {path}: {exc}", file=sys.stderr)
            refused.append(wheel)
            continue
        print(f"repaired {path} from its wheel", file=sys.stderr)
        repaired.append(wheel)
    return repaired, refused
