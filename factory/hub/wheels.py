"""A wheel checked before any byte of it is served, and its members streamed.

``check_wheel`` reads the wheel once to compare its sha256 and size with the index's record, then inflates each
member of the variant folder once: its sha256 against the wheel's RECORD, and what the Hub
would answer for it (git blob id, or Git LFS pointer for a binary or large file). ``MemberStream`` reopens the
wheel, refuses it if it is no longer the file that was checked, and streams one member in ``CHUNK`` pieces,
hashing again as it goes (a member that changed under it raises before its last piece).
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..errors import Refused
from ..nofollow import Hashing, LinkRefused, open_nofollow, stream_digest
from ..record import PROVENANCE, read_provenance
from ..safe_text import has_control, printable
from ..store.wheelinfo import read_capped
from ..wheel import recordfile
from ..wheel.layout import NotMappable, member_map, root_of

CHUNK = 1 << 20  #: bytes read, inflated and sent at a time: a server's memory is CHUNK per transfer
MAX_MEMBERS = 100_000  #: files in one wheel
MAX_RECORD = 8 * 1024 * 1024  #: bytes of its RECORD
MAX_SMALL = 4 * 1024 * 1024  #: bytes of metadata.json or the provenance file
MAX_RATIO = 100  #: its variant folder inflates to at most this many times the wheel's size (a zip bomb is refused)
LFS_MIN = 10 * 1024 * 1024  #: the Hub keeps files from this size in Git LFS, and binary files (a NUL byte)
BINARY_PROBE = 8000  #: bytes git looks at for a NUL


@dataclass(frozen=True)
class HubFile:
    """One file of ``build/<variant>/`` as the Hub lists it, and where it is in the wheel."""

    member: str  # the wheel's member
    size: int
    sha256: str
    oid: str  # the git blob id of what git holds: the file, or its LFS pointer
    lfs: bool


@dataclass(frozen=True)
class CheckedWheel:
    path: Path
    key: tuple[int, int, int, int]  # the checked file's (device, inode, size, mtime_ns)
    files: dict[str, HubFile]  # rel -> file


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def check_wheel(path: Path, sha256: str, size: int) -> CheckedWheel:
    """The wheel at ``path`` checked (Refused, saying why, where any check fails)."""
    name = path.name
    try:
        fd = open_nofollow(path, "wheel")
    except FileNotFoundError:
        raise Refused(f"{name} is missing from the store; run `kernel-factory index` to list the store again") from None
    except LinkRefused as exc:
        raise Refused(str(exc)) from None
    with os.fdopen(fd, "rb") as f:
        key = stat_key(os.fstat(f.fileno()))
        if key[2] != size:
            raise Refused(f"{name} is {key[2]} bytes, its record says {size}: run `kernel-factory index --repair`")
        if stream_digest(f) != sha256:
            raise Refused(f"{name} does not match the sha256 of its record: run `kernel-factory index --repair`")
        f.seek(0)
        try:
            with zipfile.ZipFile(f) as zf:
                files = _check_members(zf, name, size)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError, OSError) as exc:
            raise Refused(f"{name} is not a readable zip file ({printable(str(exc), 200)}); rebuild it") from None
    return CheckedWheel(path, key, files)


def _check_members(zf: zipfile.ZipFile, name: str, wheel_size: int) -> dict[str, HubFile]:
    prov = read_provenance(recordfile.provenance(zf, name, MAX_MEMBERS, MAX_SMALL, "rebuild it"))[0]
    if prov is None:
        raise Refused(f"{name}: its {PROVENANCE} is not a JSON object; rebuild it")
    names = zf.namelist()
    try:  # member name -> path inside build/<variant>/ (wheel/layout.py; an older wheel's by its metadata.json)
        root = root_of(prov)
        meta = f"{root}/metadata.json"
        older = read_capped(zf, meta, MAX_SMALL, name, "rebuild it") if root is not None and meta in names else None
        mapping = member_map(prov, names, older)
    except NotMappable as exc:
        raise Refused(f"{name}: {exc}") from None
    for member, rel in mapping.items():  # a plain relative path: no empty, '.' or '..' part, no backslash or control
        if not rel or "\\" in rel or has_control(rel) or any(p in ("", ".", "..") for p in rel.split("/")):
            raise Refused(f"{name}: member '{printable(member, 200)}' is not a plain relative path; rebuild it")
    if "metadata.json" not in mapping.values():
        raise Refused(f"{name}: its variant folder holds no metadata.json, which kernels loads; rebuild it")
    total = sum(zf.getinfo(m).file_size for m in mapping)
    if total > MAX_RATIO * max(wheel_size, CHUNK):
        raise Refused(f"{name}: its files inflate to {total} bytes, more than {MAX_RATIO} times the wheel (a zip "
                      "bomb?); rebuild it")
    record = recordfile.read_sha256(zf, name, MAX_RECORD, "rebuild it")
    files: dict[str, HubFile] = {}
    for member, rel in sorted(mapping.items()):
        expected = record.get(member)
        if expected is None:
            raise Refused(f"{name}: '{printable(member, 200)}' is not in its RECORD; rebuild it")
        files[rel] = _check_member(zf, member, expected, name)
    return files


def _check_member(zf: zipfile.ZipFile, member: str, expected: str, name: str) -> HubFile:
    size = zf.getinfo(member).file_size
    sha = hashlib.sha256()
    with zf.open(member) as src:
        chunk = src.read(CHUNK)  # the first piece tells a text file (git's blob) from a binary one (LFS)
        text = size < LFS_MIN and b"\0" not in chunk[:BINARY_PROBE]
        blob = hashlib.sha1(b"blob %d\0" % size, usedforsecurity=False) if text else None
        while chunk:
            sha.update(chunk)
            if blob is not None:
                blob.update(chunk)
            chunk = src.read(CHUNK)
    digest = sha.hexdigest()
    if digest != expected:
        raise Refused(f"{name}: '{printable(member, 200)}' does not match its RECORD sha256; rebuild it")
    lfs = blob is None
    if blob is None:  # git holds its LFS pointer
        pointer = lfs_pointer(digest, size)
        blob = hashlib.sha1(b"blob %d\0" % len(pointer) + pointer, usedforsecurity=False)
    return HubFile(member, size, digest, blob.hexdigest(), lfs)


class MemberStream:
    """One member of a checked wheel, opened: iterate for its bytes; ``close`` when done (or cut short)."""

    def __init__(self, checked: CheckedWheel, file: HubFile) -> None:
        fd = open_nofollow(checked.path, "wheel")
        self._f: IO[bytes] = os.fdopen(fd, "rb")
        try:
            if stat_key(os.fstat(fd)) != checked.key:
                raise Refused(f"{checked.path.name} changed since it was checked")
            self._zf = zipfile.ZipFile(self._f)
            self._src = self._zf.open(file.member)
        except BaseException:
            self._f.close()
            raise
        self.file = file

    def __iter__(self) -> Iterator[bytes]:
        """The member's bytes; the last piece is held back until the whole member matched its sha256, so a client
        never gets all of a changed file (zipfile also checks each member's CRC)."""
        sink = Hashing()  # the bytes read and their sha256
        held = b""
        while chunk := self._src.read(CHUNK):
            sink.write(chunk)
            if held:
                yield held
            held = chunk
        if sink.size != self.file.size or sink.hexdigest() != self.file.sha256:
            raise Refused(f"{self.file.member}: its bytes changed after the wheel was checked")
        if held:
            yield held

    def close(self) -> None:
        self._src.close()
        self._zf.close()
        self._f.close()
