"""Mach-O bytes for tests: thin 64-bit files with a minimum-OS load command, and universal (fat) files.

The layout is the one in <mach-o/loader.h> and <mach-o/fat.h>: a 32-byte mach_header_64, then load
commands (LC_BUILD_VERSION 0x32 or LC_VERSION_MIN_MACOSX 0x24), then, for a fat file, a big-endian
fat_header and fat_arch entries pointing at page-aligned thin slices.
"""

from __future__ import annotations

import struct

CPU = {"x86_64": 0x01000007, "arm64": 0x0100000C, "i386": 7, "ppc": 18}
SUBTYPE = {"x86_64": 3, "arm64": 0, "i386": 3, "ppc": 0}  # the *_ALL subtypes
MH_BUNDLE = 8  # what a Python extension module is on macOS


def thin(arch: str, minos: tuple[int, int] | None = (11, 0), *, old_command: bool = False, bits: int = 64) -> bytes:
    """A thin Mach-O bundle for ``arch``; ``minos`` None leaves the minimum-OS command out."""
    commands = b""
    ncmds = 0
    if minos is not None:
        encoded = minos[0] << 16 | minos[1] << 8
        if old_command:  # LC_VERSION_MIN_MACOSX: version, sdk
            commands = struct.pack("<IIII", 0x24, 16, encoded, encoded)
        else:  # LC_BUILD_VERSION: platform (1 = macOS), minos, sdk, ntools
            commands = struct.pack("<IIIIII", 0x32, 24, 1, encoded, encoded, 0)
        ncmds = 1
    # LC_SYMTAB with no symbols and a one-byte string table just past the commands (abi3audit reads it).
    end = (28 if bits == 32 else 32) + len(commands) + 24
    commands += struct.pack("<IIIIII", 0x2, 24, end, 0, end, 1)
    ncmds += 1
    cpu, sub = CPU[arch], SUBTYPE[arch]
    if bits == 32:
        header = struct.pack("<IiiIIII", 0xFEEDFACE, cpu, sub, MH_BUNDLE, ncmds, len(commands), 0)
    else:
        header = struct.pack("<IiiIIIII", 0xFEEDFACF, cpu, sub, MH_BUNDLE, ncmds, len(commands), 0, 0)
    return header + commands + b"\0"


def fat(*slices: tuple[str, bytes]) -> bytes:
    """A universal binary holding ``slices`` ((arch, thin bytes) ...), each at a 4096-byte boundary."""
    header = struct.pack(">II", 0xCAFEBABE, len(slices))
    body = b""
    offset = 4096
    for arch, data in slices:
        header += struct.pack(">iiIII", CPU[arch], SUBTYPE[arch], offset, len(data), 12)
        padded = data.ljust(-(-len(data) // 4096) * 4096, b"\0")
        body += padded
        offset += len(padded)
    return header.ljust(4096, b"\0") + body
