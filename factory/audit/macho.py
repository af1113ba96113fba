"""A tiny Mach-O reader: the minimum macOS version (LC_BUILD_VERSION / LC_VERSION_MIN_MACOSX) of a binary."""

from __future__ import annotations

import struct
from pathlib import Path

from ..errors import AuditFailed

_MH_MAGIC_64 = 0xFEEDFACF
_FAT_MAGIC = 0xCAFEBABE
_FAT_MAGIC_64 = 0xCAFEBABF
_LC_BUILD_VERSION = 0x32
_LC_VERSION_MIN_MACOSX = 0x24
_PLATFORM_MACOS = 1
_CPU_TYPE_ARM64 = 0x0100000C
_MAX_COMMANDS = 4096


def is_macho(magic: bytes) -> bool:
    if len(magic) < 4:
        return False
    return struct.unpack("<I", magic)[0] == _MH_MAGIC_64 or struct.unpack(">I", magic)[0] in (
        _FAT_MAGIC, _FAT_MAGIC_64
    )


def _version(encoded: int) -> tuple[int, int]:
    return encoded >> 16, (encoded >> 8) & 0xFF


def _thin_min_os(f: object, offset: int, where: str) -> tuple[int, int] | None:
    read, seek = f.read, f.seek  # type: ignore[attr-defined]
    seek(offset)
    header = read(32)
    if len(header) < 32:
        raise AuditFailed(f"{where}: truncated Mach-O header; rebuild the kernel")
    magic, cputype, _sub, _ftype, ncmds, _size, _flags, _res = struct.unpack("<IiiIIIII", header)
    if magic != _MH_MAGIC_64:
        raise AuditFailed(f"{where}: not a 64-bit little-endian Mach-O file; rebuild it for arm64")
    if cputype != _CPU_TYPE_ARM64:
        return None  # another slice of a fat binary
    found: tuple[int, int] | None = None
    pos = offset + 32
    for _ in range(min(ncmds, _MAX_COMMANDS)):
        seek(pos)
        cmd_header = read(16)
        if len(cmd_header) < 16:
            raise AuditFailed(f"{where}: truncated Mach-O load commands; rebuild the kernel")
        cmd, size, a, b = struct.unpack("<IIII", cmd_header)
        if size < 8:
            raise AuditFailed(f"{where}: malformed Mach-O load command; rebuild the kernel")
        if cmd == _LC_BUILD_VERSION and a == _PLATFORM_MACOS:
            found = _version(b)
        elif cmd == _LC_VERSION_MIN_MACOSX and found is None:
            found = _version(a)
        pos += size
    return found


def min_os(path: Path, where: str) -> tuple[int, int] | None:
    """(major, minor) of an arm64 Mach-O file (thin or fat); None when ``path`` is not Mach-O."""
    with open(path, "rb") as f:
        magic = f.read(8)
        if len(magic) < 8 or not is_macho(magic[:4]):
            return None
        if struct.unpack("<I", magic[:4])[0] == _MH_MAGIC_64:
            return _thin_min_os(f, 0, where)
        fat64 = struct.unpack(">I", magic[:4])[0] == _FAT_MAGIC_64
        count = min(struct.unpack(">I", magic[4:8])[0], 64)
        found: tuple[int, int] | None = None
        for i in range(count):
            if fat64:
                f.seek(8 + i * 32)
                cputype, _sub, offset = struct.unpack(">iiQ", f.read(16))
            else:
                f.seek(8 + i * 20)
                cputype, _sub, offset = struct.unpack(">iiI", f.read(12))
            if cputype == _CPU_TYPE_ARM64:
                found = _thin_min_os(f, offset, where)
        return found
