"""The macOS audit: the architecture and minimum macOS version of each slice of a Mach-O file (thin 64-bit or
universal; LC_BUILD_VERSION, else LC_VERSION_MIN_MACOSX), and the wheel's platform tag from them."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..errors import AuditFailed
from ..variants import Target

_MH_MAGIC = 0xFEEDFACE  # 32-bit
_MH_MAGIC_64 = 0xFEEDFACF
_FAT_MAGIC = 0xCAFEBABE
_FAT_MAGIC_64 = 0xCAFEBABF
_LC_BUILD_VERSION = 0x32
_LC_VERSION_MIN_MACOSX = 0x24
_PLATFORM_MACOS = 1
_MAX_COMMANDS = 4096
_MAX_SLICES = 64
# CPU types (mach/machine.h) -> the architecture names of variant names (x86_64, aarch64).
CPU_TYPES = {0x01000007: "x86_64", 0x0100000C: "aarch64", 7: "i386", 12: "arm", 18: "ppc", 0x01000012: "ppc64"}


@dataclass(frozen=True)
class Slice:
    arch: str  # "x86_64", "aarch64", or what else the CPU type names ("cputype 0x...")
    min_os: tuple[int, int] | None  # (major, minor) from the load commands, when they say
    universal: bool = False  # one slice of a fat file


def arch_name(cputype: int) -> str:
    return CPU_TYPES.get(cputype & 0xFFFFFFFF, f"cputype {cputype & 0xFFFFFFFF:#x}")


def is_macho(magic: bytes) -> bool:
    return len(magic) >= 4 and (
        struct.unpack("<I", magic)[0] in (_MH_MAGIC_64, _MH_MAGIC)
        or struct.unpack(">I", magic)[0] in (_FAT_MAGIC, _FAT_MAGIC_64, _MH_MAGIC_64, _MH_MAGIC))


def _version(encoded: int) -> tuple[int, int]:
    return encoded >> 16, (encoded >> 8) & 0xFF


def _thin(f: BinaryIO, offset: int, where: str) -> Slice:
    f.seek(offset)
    header = f.read(32)
    if len(header) < 28:
        raise AuditFailed(f"{where}: truncated Mach-O header; rebuild the kernel")
    magic, cputype, _sub, _ftype, ncmds = struct.unpack_from("<IiiII", header)
    if magic == _MH_MAGIC:
        raise AuditFailed(f"{where}: a 32-bit Mach-O file ({arch_name(cputype)}); rebuild it as a 64-bit binary")
    if magic != _MH_MAGIC_64 or len(header) < 32:
        raise AuditFailed(f"{where}: not a 64-bit little-endian Mach-O file; rebuild the kernel")
    found: tuple[int, int] | None = None
    pos = offset + 32
    for _ in range(min(ncmds, _MAX_COMMANDS)):
        f.seek(pos)
        cmd_header = f.read(16)
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
    return Slice(arch_name(cputype), found)


def slices(path: Path, where: str) -> list[Slice] | None:
    """Every architecture slice of a Mach-O file (one for a thin file); None when ``path`` is not Mach-O."""
    with open(path, "rb") as f:
        magic = f.read(8)
        if len(magic) < 4 or not is_macho(magic[:4]):
            return None
        big = struct.unpack(">I", magic[:4])[0]
        if big not in (_FAT_MAGIC, _FAT_MAGIC_64):
            return [_thin(f, 0, where)]
        if len(magic) < 8:
            raise AuditFailed(f"{where}: truncated universal Mach-O header; rebuild the kernel")
        count = struct.unpack(">I", magic[4:8])[0]
        if count == 0 or count > _MAX_SLICES:
            raise AuditFailed(f"{where}: a universal Mach-O file with {count} slices; rebuild the kernel")
        entry = 32 if big == _FAT_MAGIC_64 else 20
        found = []
        for i in range(count):
            f.seek(8 + i * entry)
            raw = f.read(entry)
            if len(raw) < entry:
                raise AuditFailed(f"{where}: truncated universal Mach-O header; rebuild the kernel")
            cputype, _sub, offset = struct.unpack(">iiQ" if entry == 32 else ">iiI", raw[:16 if entry == 32 else 12])
            one = _thin(f, offset, where)
            found.append(Slice(one.arch, one.min_os, universal=True))
        return found


def platform_tag(files: Sequence[tuple[str, Path]], target: Target, where: str) -> str:
    """``macosx_<minos>_<arch>``: the arch from the variant name, checked against every Mach-O slice list.

    The minimum OS is the highest one the binaries' load commands give for the variant's slice; 11.0 when
    none says (arm64 macOS starts there); 26.0 at least for Metal.
    """
    arch = target.arch or "aarch64"
    floor = (26, 0) if target.backend == "metal" else (11, 0) if arch == "aarch64" else (10, 9)
    said: list[tuple[int, int]] = []
    for rel, path in files:
        found = slices(path, f"{where}/{rel}")
        if found is None:
            continue
        mine = [s for s in found if s.arch == arch]
        if not mine:
            have = ", ".join(sorted({s.arch for s in found}))
            kind = "a universal binary of" if found[0].universal else "built for"
            raise AuditFailed(
                f"{where}/{rel} is {kind} {have}, not {arch} as the variant name says; "
                f"rebuild it for {arch}, or publish it under a darwin variant of its own arch"
            )
        if mine[0].min_os is not None:
            said.append(mine[0].min_os)
    major, minor = max([floor, *said]) if said else max(floor, (11, 0))
    return f"macosx_{major}_{minor if major < 11 else 0}_{'arm64' if arch == 'aarch64' else arch}"
