"""What adoption reads from one wheel: its file name, METADATA and provenance file, its digest, and its record. A
small wheel is read once; nothing is inflated beyond ``MAX_METADATA`` or ``MAX_PROVENANCE`` bytes, and only
METADATA's header block is parsed. Every refusal is one line that names the wheel and the fix."""

from __future__ import annotations

import hashlib
import io
import os
import time
import zipfile
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from .. import report, variants
from ..errors import Refused, UnknownVariant
from ..nofollow import LinkRefused, link_problem, open_nofollow, stream_digest
from ..record import PROVENANCE, Record, read_provenance
from .check import version_of

MAX_METADATA = 4 * 1024 * 1024  # bytes of METADATA (or the provenance file) read from a wheel
MAX_PROVENANCE = 64 * 1024
WHOLE = 32 * 1024 * 1024  # wheels up to this size are read into memory once (hashed, then unzipped from there)


@dataclass(frozen=True)
class WheelData:
    sha256: str
    size: int
    mtime: float
    metadata: bytes
    provenance: bytes | None
    data: bytes | None  # the whole file, when it was read into memory


def parse_name(filename: str) -> tuple[NormalizedName, Version, frozenset[Tag]]:
    """(project, version, tags) of a wheel file name; Refused if it is not a valid one."""
    try:
        project, version, _build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename as exc:
        raise Refused(f"{filename}: not a valid wheel file name ({exc}); rename or remove it") from None
    return project, version, tags


def read_capped(zf: zipfile.ZipFile, member: str, limit: int, filename: str,
                fix: str = "rebuild the wheel with smaller metadata") -> bytes:
    """One member's bytes; Refused (naming ``fix``) when it says, or turns out, to be bigger than ``limit``."""
    too_big = Refused(f"{filename}: {member} inflates to more than {limit} bytes (a zip bomb?); {fix}")
    if zf.getinfo(member).file_size > limit:
        raise too_big
    with zf.open(member) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise too_big
    return data


def _members(src: str | Path | IO[bytes], filename: str) -> tuple[bytes, bytes | None]:
    with zipfile.ZipFile(src) as zf:
        names = [n for n in zf.namelist() if n.count("/") == 1 and ".dist-info/" in n]
        found = [n for n in names if n.endswith(".dist-info/METADATA")]
        if len(found) != 1:
            raise Refused(f"{filename}: expected one .dist-info/METADATA, found {len(found)}; rebuild the wheel")
        metadata = read_capped(zf, found[0], MAX_METADATA, filename)
        prov = found[0].removesuffix("METADATA") + PROVENANCE
        return metadata, read_capped(zf, prov, MAX_PROVENANCE, filename) if prov in names else None


def _unreadable(filename: str, exc: BaseException) -> Refused:
    return Refused(f"{filename}: not a readable zip file ({exc}); rebuild or remove it")


_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError)


def read_wheel_info(wheel: Path) -> tuple[bytes, bytes | None]:
    """(METADATA, the provenance file or None) of a wheel, each capped; Refused for an unreadable zip."""
    try:
        return _members(wheel, wheel.name)
    except _ZIP_ERRORS as exc:
        raise _unreadable(wheel.name, exc) from None


def read_wheel(path: str, filename: str) -> WheelData:
    """Digest, size, mtime, METADATA and provenance of the wheel at ``path``, from one read where it is small."""
    try:
        try:  # never through a link: the bytes read and hashed are the file's own, and the file is what is stored
            fd = open_nofollow(path, "wheel")
        except LinkRefused:
            raise Refused(f"{filename}: {link_problem(path) or 'not a regular file'}; adoption takes regular files "
                          "only (a link could point anywhere once in the store): copy the wheel itself there") from None
        with open(fd, "rb") as f:
            st = os.fstat(fd)
            if st.st_size > WHOLE:
                digest = stream_digest(f)
                f.seek(0)
                return WheelData(digest, st.st_size, st.st_mtime, *_members(f, filename), None)
            data = f.read()  # to its end, whatever its size was (a file changed meanwhile)
        metadata, provenance = _members(io.BytesIO(data), filename)
    except _ZIP_ERRORS as exc:
        raise _unreadable(filename, exc) from None
    return WheelData(hashlib.sha256(data).hexdigest(), len(data), st.st_mtime, metadata, provenance, data)


def variant_fields(
    wheel_name: str, version: Version, tags: frozenset[Tag], provenance: bytes | None,
    known: dict[str, dict[str, Any]] | None,
) -> dict[str, Any]:  # fmt: skip
    """An adopted wheel's variant fields (its provenance's, else its label's; {} and a warning), cached in ``known``."""
    label = version.local
    key = _tags_key(label, tags)
    if provenance is None and known is not None and label is not None and key in known:
        fields = known[key]
    else:
        target: variants.Target | None = None
        named = (read_provenance(provenance)[0] or {}).get("variant")
        if isinstance(named, str):
            with suppress(UnknownVariant):
                target = variants.parse(named)
        if target is not None and target.label == label:  # a provenance naming another label's variant: its label's
            fields = _target_fields(target)
        elif label is not None:
            fields = _label_fields(label, tags)
        else:
            return {}
        if provenance is None and known is not None:
            known[key] = fields
    if not fields:
        report.warn(f"{wheel_name}: local label {label!r} is not a build variant's; it is listed in the combined "
                    "index only, not in any variants/<label>/ root")  # fmt: skip
        return {}
    return {**fields, "kernel_version": version.public}


@lru_cache(maxsize=4096)
def _tags_key(label: str | None, tags: frozenset[Tag]) -> str:
    """``known``'s key of a local label and a wheel's platform tags (wheels share their tags: cached)."""
    return f"{label}|{','.join(sorted({t.platform for t in tags}))}"


def _label_fields(label: str, tags: frozenset[Tag]) -> dict[str, Any]:
    """The record fields of a local label read back as a build variant's (these tags' platforms); {} for none."""
    target = variants.for_label(label, {t.platform for t in tags})
    return _target_fields(target) if target is not None else {}


def _target_fields(target: variants.Target) -> dict[str, Any]:
    keys = ("label", "variant", "backend", "backend_version", "framework", "framework_version", "os", "arch")
    return {key: getattr(target, key) for key in keys}


def map_labels(filenames: Iterable[str], known: dict[str, dict[str, Any]]) -> None:
    """Fill ``known`` (``variant_fields``) before adoption's workers start: they inherit the variant grammar."""
    # one wheel name for each part after the project: label and tags are in that part
    names = {name.partition("-")[2]: name for name in filenames}
    for name in names.values():
        with suppress(InvalidWheelFilename):  # a name adoption refuses later
            _project, version, _build, tags = parse_wheel_filename(name)
            key = _tags_key(version.local, tags)
            if version.local is not None and key not in known:
                known[key] = _label_fields(version.local, tags)


def parse_headers(metadata: bytes) -> dict[str, Any]:
    """METADATA's raw fields (``parse_email``) from its header block alone (the description after it is not read)."""
    from packaging.metadata import parse_email

    end = metadata.find(b"\n\n")
    return dict(parse_email(metadata[: end + 1] if end >= 0 else metadata)[0])


def record_of(
    filename: str, parsed: tuple[NormalizedName, Version, frozenset[Tag]], wheel: WheelData,
    known: dict[str, dict[str, Any]] | None = None,
) -> Record:  # fmt: skip
    """The record of an adopted wheel; Refused when its METADATA names another project or version."""
    project, version, tags = parsed
    raw = parse_headers(wheel.metadata)
    meta_name = raw.get("name")
    meta_version = raw.get("version")
    if not meta_name or canonicalize_name(meta_name) != project:
        raise Refused(f"{filename}: METADATA Name {meta_name!r} does not match the file name; rebuild the wheel")
    if meta_version is None or version_of(meta_version) != version:
        raise Refused(
            f"{filename}: METADATA Version {meta_version!r} does not match the file name "
            f"(pip refuses such wheels); rebuild the wheel"
        )
    return Record(
        filename=filename,
        name=meta_name,
        version=str(version),
        sha256=wheel.sha256,
        size=wheel.size,
        metadata_sha256=hashlib.sha256(wheel.metadata).hexdigest(),
        requires_python=raw.get("requires_python"),
        upload_time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(wheel.mtime))),
        summary=raw.get("summary", "") or "",
        requires_dist=tuple(raw.get("requires_dist", [])),
        kind="adopted",
        license=raw.get("license_expression") or raw.get("license") or None,
        **variant_fields(filename, version, tags, wheel.provenance, known),
    )
