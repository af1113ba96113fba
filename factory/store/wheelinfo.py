"""What adoption reads from one wheel: its file name, METADATA and provenance file, its digest, and its record.

A wheel of up to ``WHOLE`` bytes is read once: the bytes are hashed and the
zip is read from memory; a bigger one is hashed in chunks and its zip read
from the file. Nothing is inflated beyond ``MAX_METADATA`` (METADATA) or
``MAX_PROVENANCE`` bytes (the provenance file). Every refusal is one line that
names the wheel and the fix.

Two fast paths give what the libraries give, and hand them everything else: a
plain zip (no comment, zip64 or extra fields, ASCII names, stored or deflated
members whose size and CRC-32 are as declared) has its two members read
straight from its central directory, any other by ``zipfile``; plain one-line
ASCII METADATA headers are read directly, any other by packaging's
``parse_email``. tests/unit/test_adopt_read.py holds both to the libraries.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import struct
import sys
import time
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .. import variants
from ..atomic import LinkRefused, link_problem, open_nofollow, stream_digest
from ..errors import Refused, UnknownVariant
from ..record import PROVENANCE, Record

MAX_METADATA = 4 * 1024 * 1024  # bytes of METADATA (or the provenance file) read from a wheel
MAX_PROVENANCE = 64 * 1024
WHOLE = 32 * 1024 * 1024  # wheels up to this size are read into memory once (hashed, then unzipped from there)


@dataclass(frozen=True)
class WheelData:
    """What was read from one wheel file."""

    sha256: str
    size: int
    mtime: float
    metadata: bytes
    provenance: bytes | None
    data: bytes | None  # the whole file, when it was read into memory
    ident: tuple[int, int] = (0, 0)  # (st_dev, st_ino) of the file read: what adoption may hard-link


def parse_name(filename: str) -> tuple[NormalizedName, Version, frozenset[Tag]]:
    """(project, version, tags) of a wheel file name; Refused if it is not a valid one.

    packaging parses the project part and the rest (version, build, tags) apart, each once per run: wheels
    share their projects, and versions and tags repeat across projects.
    """
    name_part, _, rest = filename.partition("-")
    try:
        return _project(name_part), *_rest(rest)
    except InvalidWheelFilename:
        try:
            parse_wheel_filename(filename)  # the error that names this file
        except InvalidWheelFilename as exc:
            raise Refused(f"{filename}: not a valid wheel file name ({exc}); rename or remove it") from None
        raise  # pragma: no cover - each part is valid where the whole name is


@lru_cache(maxsize=4096)
def _project(name_part: str) -> NormalizedName:
    return parse_wheel_filename(f"{name_part}-0-py3-none-any.whl")[0]


@lru_cache(maxsize=4096)
def _rest(rest: str) -> tuple[Version, frozenset[Tag]]:
    _name, version, _build, tags = parse_wheel_filename(f"x-{rest}")
    return version, tags


def _read_capped(zf: zipfile.ZipFile, member: str, limit: int, filename: str) -> bytes:
    """One member's bytes; Refused when it says, or turns out, to be bigger than ``limit``."""
    too_big = Refused(f"{filename}: {member} inflates to more than {limit} bytes (a zip bomb?); "
                      "rebuild the wheel with smaller metadata")  # fmt: skip
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
        metadata = _read_capped(zf, found[0], MAX_METADATA, filename)
        prov = found[0].removesuffix("METADATA") + PROVENANCE
        provenance = _read_capped(zf, prov, MAX_PROVENANCE, filename) if prov in names else None
        return metadata, provenance


_EOCD = struct.Struct("<4s4H2LH")  # end of central directory record, 22 bytes
_CENTRAL = struct.Struct("<4s2xHHH4xLLLHHH8xL")  # central directory header, 46 bytes (the fields read here)
_LOCAL = struct.Struct("<4s22xHH")  # local file header, 30 bytes: its name and extra lengths


def _plain_member(data: bytes, entry: tuple[bytes, int, int, int, int, int, int], limit: int) -> bytes | None:
    """A stored or deflated member's bytes, checked against its size and CRC; None where zipfile must decide."""
    name, flags, method, crc, csize, usize, offset = entry
    if flags & 0x61 or method not in (0, 8) or usize > limit or (method == 0 and csize != usize):
        return None  # encrypted or patched, another method, too big: zipfile refuses it in its words
    sig, name_len, extra_len = _LOCAL.unpack_from(data, offset) if offset + 30 <= len(data) else (b"", 0, 0)
    start = offset + 30 + name_len + extra_len
    if sig != b"PK\x03\x04" or data[offset + 30 : offset + 30 + name_len] != name or start + csize > len(data):
        return None
    raw = data[start : start + csize]
    if method == 0:
        out = raw
    else:
        inflate = zlib.decompressobj(-15)
        out = inflate.decompress(raw, usize + 1)  # never more than the size it declares (at most ``limit``)
        if not inflate.eof or inflate.unconsumed_tail:
            return None
    return out if len(out) == usize and zlib.crc32(out) == crc else None


def _plain_members(data: bytes) -> tuple[bytes, bytes | None] | None:
    """(METADATA, provenance) of a plain zip in memory (no comment, no zip64, no extra fields, ASCII names,
    one METADATA, stored or deflated), read without building zipfile's list of every member; None for any
    other zip, which zipfile reads (and refuses, where it is bad)."""
    if len(data) < 22:
        return None
    sig, disk, cd_disk, _here, count, cd_size, cd_offset, comment = _EOCD.unpack_from(data, len(data) - 22)
    end = len(data) - 22
    if sig != b"PK\x05\x06" or disk or cd_disk or comment or cd_offset + cd_size != end:
        return None
    pos = cd_offset
    found: dict[bytes, tuple[bytes, int, int, int, int, int, int]] = {}  # .dist-info/ members by name
    for _ in range(count):
        if pos + 46 > end:
            return None
        sig, needed, flags, method, crc, csize, usize, name_len, extra_len, comment_len, offset = (
            _CENTRAL.unpack_from(data, pos))  # fmt: skip
        name = data[pos + 46 : pos + 46 + name_len]
        pos += 46 + name_len
        if (sig != b"PK\x01\x02" or needed > 63 or extra_len or comment_len or not name.isascii() or b"\0" in name
                or 0xFFFFFFFF in (csize, usize, offset)):  # fmt: skip
            return None
        if name.count(b"/") == 1 and b".dist-info/" in name:
            if name in found:
                return None
            found[name] = (name, flags, method, crc, csize, usize, offset)
    metadata = [n for n in found if n.endswith(b".dist-info/METADATA")]
    if pos != end or len(metadata) != 1:
        return None
    meta = _plain_member(data, found[metadata[0]], MAX_METADATA)
    prov = found.get(metadata[0].removesuffix(b"METADATA") + PROVENANCE.encode())
    provenance = _plain_member(data, prov, MAX_PROVENANCE) if prov is not None else None
    if meta is None or (prov is not None and provenance is None):
        return None
    return meta, provenance


def _unreadable(filename: str, exc: BaseException) -> Refused:
    return Refused(f"{filename}: not a readable zip file ({exc}); rebuild or remove it")


_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError)


def read_wheel_info(wheel: Path) -> tuple[bytes, bytes | None]:
    """(METADATA, the provenance file or None) of a wheel, each read with a size cap.

    Refused if there is not exactly one ``.dist-info/METADATA``, or the zip is unreadable.
    """
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
        try:
            st = os.fstat(fd)
            ident = (st.st_dev, st.st_ino)
            if st.st_size > WHOLE:
                with open(fd, "rb", closefd=False) as f:
                    digest = stream_digest(f)
                    f.seek(0)
                    metadata, provenance = _members(f, filename)
                return WheelData(digest, st.st_size, st.st_mtime, metadata, provenance, None, ident)
            data = os.read(fd, st.st_size + 1)
            if len(data) != st.st_size:  # a short read, or the file changed: read on to its end
                parts = [data]
                while chunk := os.read(fd, 1 << 20):
                    parts.append(chunk)
                data = b"".join(parts)
        finally:
            os.close(fd)
        metadata, provenance = _plain_members(data) or _members(io.BytesIO(data), filename)
    except _ZIP_ERRORS as exc:
        raise _unreadable(filename, exc) from None
    return WheelData(hashlib.sha256(data).hexdigest(), len(data), st.st_mtime, metadata, provenance, data, ident)


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
    return _variant_fields(wheel_name, version, tags, provenance, known)


def _variant_fields(
    wheel_name: str, version: Version, tags: frozenset[Tag], provenance: bytes | None,
    known: dict[str, dict[str, Any]] | None,
) -> dict[str, Any]:  # fmt: skip
    label = version.local
    key = _tags_key(label, tags)
    if provenance is None and known is not None and label is not None and key in known:
        fields = known[key]
        if not fields:
            _unknown_label(wheel_name, label)
        return {**fields, "kernel_version": version.public} if fields else {}
    platforms = {t.platform for t in tags}
    target: variants.Target | None = None
    named = _provenance_variant(provenance)
    if named is not None:
        try:
            target = variants.parse(named)
        except UnknownVariant:
            target = None
        if target is not None and target.label != label:
            target = None
    if target is not None:
        fields = _target_fields(target)
    elif label is not None:
        fields = _label_fields(label, platforms)
    else:
        return {}
    if provenance is None and known is not None:
        known[key] = fields
    if not fields:
        assert label is not None  # fields come from a target, or from a label that names none
        _unknown_label(wheel_name, label)
        return {}
    return {**fields, "kernel_version": version.public}


def _label_key(label: str | None, platforms: set[str]) -> str:
    """``known``'s key of a local label and a wheel's platform tags."""
    return f"{label}|{','.join(sorted(platforms))}"


@lru_cache(maxsize=4096)
def _tags_key(label: str | None, tags: frozenset[Tag]) -> str:
    """``_label_key`` of a wheel's tags (wheels share their tags: parse_name gives the same set again)."""
    return _label_key(label, {t.platform for t in tags})


@lru_cache(maxsize=4096)
def _version_text(rest: str) -> str:
    """The version of a wheel name, normalised, from its part after the project (as ``_rest`` reads it)."""
    return str(_rest(rest)[0])


def _label_fields(label: str, platforms: set[str]) -> dict[str, Any]:
    """The record fields of a local label read back as a build variant's (for wheels of these platform tags);
    empty when it names none."""
    target = variants.for_label(label, platforms)
    return _target_fields(target) if target is not None else {}


def _target_fields(target: variants.Target) -> dict[str, Any]:
    return {"label": target.label, "variant": target.variant, "backend": target.backend,
            "backend_version": target.backend_version, "framework": target.framework,
            "framework_version": target.framework_version, "os": target.os, "arch": target.arch}  # fmt: skip


def map_labels(filenames: Iterable[str], known: dict[str, dict[str, Any]]) -> None:
    """Fill ``known`` (see ``variant_fields``) with each local label and platform tags among ``filenames`` (wheel
    file names) that it lacks, reading each label by the same rules as ``variant_fields`` (no warning here: the
    wheel's adoption prints it).

    Adoption calls this once, before its workers start, so the variant grammar (the kernels package, slower
    to load than hundreds of wheels are to adopt) is loaded once and inherited, not once per worker. Names that
    are not valid wheel names are left to the adoption that refuses them.
    """
    rests = {name.partition("-")[2] for name in filenames}  # label and tags are in the part after the project
    for rest in rests:
        try:
            version, tags = _rest(rest)
        except InvalidWheelFilename:
            continue
        label = version.local
        if label is None:
            continue
        platforms = {t.platform for t in tags}
        key = _label_key(label, platforms)
        if key not in known:
            known[key] = _label_fields(label, platforms)


def _unknown_label(wheel_name: str, label: str) -> None:
    print(f"warning: {wheel_name}: local label {label!r} is not a build variant's; it is listed in the "
          "combined index only, not in any variants/<label>/ root", file=sys.stderr)  # fmt: skip


# METADATA headers a record needs: header name -> parse_email's key; Requires-Dist may repeat, the others not.
_ONCE = {"name": "name", "version": "version", "summary": "summary", "requires-python": "requires_python",
         "license": "license", "license-expression": "license_expression"}  # fmt: skip
_PLAIN_HEADER = re.compile(rb"[\x21-\x39\x3b-\x7e]+:[\t\x20-\x7e]*")


def parse_headers(metadata: bytes) -> dict[str, Any]:
    """The fields of METADATA a record needs, as ``packaging.metadata.parse_email`` gives them.

    parse_email runs the email parser over the whole file, long description included; here the header block
    alone is read when every header in it is one line of printable ASCII, and parse_email reads anything else
    (folded or non-ASCII headers, a repeated field, other line endings), so the result is the same.
    """
    end = metadata.find(b"\n\n")
    head = metadata[:end] if end >= 0 else metadata.removesuffix(b"\n")
    lines = head.split(b"\n")
    if all(_PLAIN_HEADER.fullmatch(line) for line in lines):
        raw: dict[str, Any] = {}
        requires: list[str] = []
        for line in lines:
            name, _, value = line.decode("ascii").partition(":")
            name = name.lower()
            if name == "requires-dist":
                requires.append(value.lstrip(" \t"))
            elif name in _ONCE:
                key = _ONCE[name]
                if key in raw:
                    break  # a repeated field: parse_email's rules apply
                raw[key] = value.lstrip(" \t")
        else:
            if requires:
                raw["requires_dist"] = requires
            return raw
    from packaging.metadata import parse_email  # loaded only when a wheel needs it

    return dict(parse_email(metadata)[0])


@lru_cache(maxsize=4096)
def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def record_of(
    filename: str, parsed: tuple[NormalizedName, Version, frozenset[Tag]], wheel: WheelData,
    known: dict[str, dict[str, Any]] | None = None,
) -> Record:  # fmt: skip
    """The record of an adopted wheel, from its file name parsed (``parse_name(filename)``) and what was read
    from it; Refused when its METADATA names another project or version."""
    project, version, tags = parsed
    raw = parse_headers(wheel.metadata)
    meta_name = raw.get("name")
    meta_version = raw.get("version")
    if not meta_name or canonicalize_name(meta_name) != project:
        raise Refused(f"{filename}: METADATA Name {meta_name!r} does not match the file name; rebuild the wheel")
    if meta_version is None or _version(meta_version) != version:
        raise Refused(
            f"{filename}: METADATA Version {meta_version!r} does not match the file name "
            f"(pip refuses such wheels); rebuild the wheel"
        )
    values = {
        "filename": filename,
        "name": meta_name,
        "version": _version_text(filename.partition("-")[2]),
        "sha256": wheel.sha256,
        "size": wheel.size,
        "metadata_sha256": hashlib.sha256(wheel.metadata).hexdigest(),
        "requires_python": raw.get("requires_python"),
        "upload_time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(wheel.mtime))),
        "summary": raw.get("summary", "") or "",
        "requires_dist": tuple(raw.get("requires_dist", [])),
        "kind": "adopted",
        "license": raw.get("license_expression") or raw.get("license") or None,
    }
    values.update(_variant_fields(filename, version, tags, wheel.provenance, known))
    return Record(**values)


def make_record(
    wheel: Path, metadata: bytes, provenance: bytes | None = None, known: dict[str, dict[str, Any]] | None = None
) -> Record:
    """The record of an adopted wheel, from its file name, METADATA, provenance and file."""
    from ..atomic import file_digest

    st = wheel.stat()
    data = WheelData(file_digest(wheel), st.st_size, st.st_mtime, metadata, provenance, None)
    return record_of(wheel.name, parse_name(wheel.name), data, known)
