"""``index --wheels DIR``: adopt existing wheels into the store with their ``.metadata`` and records.

Each wheel is hard-linked (else copied) into ``files/``, then its METADATA is
written beside it, then its record; each step atomic, so a record only exists
once its wheel and metadata are whole. Adopting a wheel again does nothing.
"""

from __future__ import annotations

import hashlib
import os
import sys
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from packaging.metadata import parse_email
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..atomic import TMP_PREFIX, atomic_open, write_bytes
from ..errors import Refused
from ..record import FILES, Record


@dataclass
class AdoptResult:
    adopted: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def read_metadata(wheel: Path) -> bytes:
    """The bytes of the wheel's ``<name>-<version>.dist-info/METADATA``; Refused if there is not exactly one."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            found = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
            if len(found) != 1:
                raise Refused(f"{wheel.name}: expected one .dist-info/METADATA, found {len(found)}; rebuild the wheel")
            return zf.read(found[0])
    except (zipfile.BadZipFile, OSError) as exc:
        raise Refused(f"{wheel.name}: not a readable zip file ({exc}); rebuild or remove it") from None


def make_record(wheel: Path, metadata: bytes) -> Record:
    """The record of an adopted wheel, from its file name, METADATA and file."""
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
        sha256=sha256_file(wheel),
        size=st.st_size,
        metadata_sha256=hashlib.sha256(metadata).hexdigest(),
        requires_python=raw.get("requires_python"),
        upload_time=mtime,
        summary=raw.get("summary", "") or "",
        requires_dist=tuple(raw.get("requires_dist", [])),
        kind="adopted",
        license=raw.get("license_expression") or raw.get("license") or None,
    )


def _link_or_copy(src: Path, dest: Path) -> None:
    """Hard-link ``src`` to ``dest`` atomically (a temporary link, then a rename); copy across file systems."""
    tmp = dest.with_name(f"{TMP_PREFIX}{dest.name}")
    try:
        tmp.unlink(missing_ok=True)
        os.link(src, tmp)
        os.replace(tmp, dest)
        return
    except OSError:
        tmp.unlink(missing_ok=True)
    with atomic_open(dest) as out, open(src, "rb") as f:
        while chunk := f.read(1 << 20):
            out.write(chunk)


def adopt_one(store_root: Path, wheel: Path) -> Record | None:
    """Adopt one wheel; None if the store already has its record. Refused on bad input."""
    try:
        parse_wheel_filename(wheel.name)
    except InvalidWheelFilename as exc:
        raise Refused(f"{wheel.name}: not a valid wheel file name ({exc}); rename or remove it") from None
    files = store_root / FILES
    if (files / f"{wheel.name}.json").exists():
        return None
    metadata = read_metadata(wheel)
    record = make_record(wheel, metadata)
    files.mkdir(parents=True, exist_ok=True)
    dest = files / wheel.name
    if not dest.exists():
        _link_or_copy(wheel, dest)
    elif not os.path.samefile(dest, wheel) and sha256_file(dest) != record.sha256:
        raise Refused(f"{wheel.name}: a different file of that name is already in {files}; remove one of them")
    write_bytes(files / f"{wheel.name}.metadata", metadata)
    write_bytes(files / f"{wheel.name}.json", record.to_json())
    return record


def adopt(store_root: Path, folder: Path) -> AdoptResult:
    """Adopt every ``*.whl`` in ``folder``; refused wheels are warned about and listed, the rest go on."""
    result = AdoptResult()
    for wheel in sorted(folder.glob("*.whl")):
        if not wheel.is_file():
            continue
        try:
            record = adopt_one(store_root, wheel)
        except Refused as exc:
            print(f"warning: skipped {exc}", file=sys.stderr)
            result.refused.append(wheel.name)
            continue
        (result.adopted if record is not None else result.present).append(wheel.name)
    return result
