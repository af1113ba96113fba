"""A streaming, reproducible zip writer for wheels.

Entries are read in 1 MB chunks, hashed (sha256, for RECORD) and deflated
while they are written, so memory does not grow with file size and no file is
read twice. Each chunk of a large entry is stored (incompressible), deflated
with isal (entropy-limited data, where it matches zlib's size at 5x the speed)
or with zlib-ng (match-rich machine code), chosen by probing its first 64 KB;
the raw-deflate segments are joined at sync-flush boundaries, which any
inflater reads as one stream. Local headers are patched in place once an
entry's CRC and sizes are known (the output must be seekable), so no data
descriptors are written; zip64 extras only where a size or offset needs them.
Fixed timestamps and permissions: the same input gives the same bytes.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import Any, BinaryIO

from isal import isal_zlib
from zlib_ng import zlib_ng

CHUNK = 1 << 20
# zlib-ng level 5: measured on libtorch_cpu.so, 1.023x the size of zlib level 6 at 3.2x its speed
# (level 4: 1.039x, level 3: 1.057x; isal 3: 1.10x). See scripts/bench_convert.py.
LEVEL = 5
# Store an entry when deflating its first MB saves less than this fraction.
MIN_SAVING = 0.02
PROBE = 64 << 10  # bytes of each chunk deflated with isal to choose how to encode the chunk
ISAL_LEVEL = 3
STORE_ABOVE = 0.97  # probe ratio above which a chunk is stored
ISAL_ABOVE = 0.55  # probe ratio above which isal's output is about as small as zlib-ng's (few long matches)
_FINAL_EMPTY_STORED = b"\x01\x00\x00\xff\xff"
ZIP64_LIMIT = 0xFFFFFFFF
_UINT16 = 0xFFFF

_LOCAL = struct.Struct("<4sHHHHHIIIHH")
_CENTRAL = struct.Struct("<4sHHHHHHIIIHHHHHII")
_END = struct.Struct("<4sHHHHIIH")
_END64 = struct.Struct("<4sQHHIIQQQQ")
_LOCATOR64 = struct.Struct("<4sIQI")
_STORED, _DEFLATED = 0, 8
_UNIX = 3
_FLAG_UTF8 = 0x800


def dos_time(date_time: tuple[int, int, int, int, int, int]) -> tuple[int, int]:
    """(date, time) fields of a zip header; years are clamped to 1980-2107."""
    year, month, day, hour, minute, second = date_time
    year = min(max(year, 1980), 2107)
    return (year - 1980) << 9 | month << 5 | day, hour << 11 | minute << 5 | second // 2


class _Entry:
    __slots__ = ("name", "method", "crc", "csize", "usize", "offset", "mode", "zip64_local")

    def __init__(self, name: bytes, mode: int, offset: int) -> None:
        self.name = name
        self.mode = mode
        self.offset = offset
        self.method = _STORED
        self.crc = 0
        self.csize = 0
        self.usize = 0
        self.zip64_local = False


class ZipWriter:
    """Write a zip file entry by entry; ``close`` writes the central directory."""

    def __init__(self, fp: BinaryIO, date_time: tuple[int, int, int, int, int, int], level: int = LEVEL) -> None:
        self.fp = fp
        self.level = level
        self.date, self.time = dos_time(date_time)
        self.entries: list[_Entry] = []
        self.names: set[bytes] = set()
        self._buf = bytearray(CHUNK)

    # -- public ------------------------------------------------------------
    def add_bytes(self, arcname: str, data: bytes, executable: bool = False) -> bytes:
        """Add an entry from memory; returns its sha256 digest."""
        entry = self._new_entry(arcname, executable)
        comp = self._compress_all(data)
        entry.usize = len(data)
        entry.crc = zlib_ng.crc32(data)
        if comp is not None:
            entry.method, entry.csize = _DEFLATED, len(comp)
        else:
            entry.csize = len(data)
        self._write_local(entry)
        self.fp.write(data if comp is None else comp)
        return hashlib.sha256(data).digest()

    def add_file(self, arcname: str, path: Path, executable: bool = False) -> tuple[bytes, int]:
        """Add an entry streamed from ``path``; returns (sha256 digest, size)."""
        with open(path, "rb") as src:
            if os.fstat(src.fileno()).st_size <= CHUNK:
                data = src.read()
                return self.add_bytes(arcname, data, executable), len(data)
            size = os.fstat(src.fileno()).st_size
            entry = self._new_entry(arcname, executable)
            entry.zip64_local = size * 1.05 > ZIP64_LIMIT
            sample = src.read(CHUNK)
            src.seek(0)
            deflate = self._compress_all(sample) is not None
            entry.method = _DEFLATED if deflate else _STORED
            self._write_local(entry)  # a placeholder: patched below
            sha = hashlib.sha256()
            crc = 0
            usize = csize = 0
            comp = _Deflater(self.level) if deflate else None
            view = memoryview(self._buf)
            write = self.fp.write
            while n := src.readinto(self._buf):
                chunk = view[:n]
                sha.update(chunk)
                crc = zlib_ng.crc32(chunk, crc)
                usize += n
                out = comp.compress(chunk) if comp is not None else chunk
                csize += len(out)
                write(out)
            if comp is not None:
                tail = comp.flush()
                csize += len(tail)
                write(tail)
        entry.crc, entry.usize, entry.csize = crc, usize, csize
        if not entry.zip64_local and max(usize, csize) >= ZIP64_LIMIT:
            raise ValueError(f"{arcname}: grew past 4 GiB while being read")
        end = self.fp.tell()
        self.fp.seek(entry.offset)
        self._write_local(entry)
        self.fp.seek(end)
        return sha.digest(), usize

    def close(self) -> None:
        """Write the central directory and the end records."""
        start = self.fp.tell()
        for e in self.entries:
            extra = b""
            fields: list[int] = []
            usize, csize, offset = e.usize, e.csize, e.offset
            if usize >= ZIP64_LIMIT:
                fields.append(usize)
                usize = ZIP64_LIMIT
            if csize >= ZIP64_LIMIT:
                fields.append(csize)
                csize = ZIP64_LIMIT
            if offset >= ZIP64_LIMIT:
                fields.append(offset)
                offset = ZIP64_LIMIT
            if fields:
                extra = struct.pack(f"<HH{len(fields)}Q", 1, 8 * len(fields), *fields)
            version = 45 if fields else 20
            flags = _FLAG_UTF8 if not e.name.isascii() else 0
            self.fp.write(
                _CENTRAL.pack(
                    b"PK\x01\x02", _UNIX << 8 | version, version, flags, e.method, self.time, self.date,
                    e.crc, csize, usize, len(e.name), len(extra), 0, 0, 0, (0o100000 | e.mode) << 16, offset,
                )
            )
            self.fp.write(e.name)
            self.fp.write(extra)
        end = self.fp.tell()
        count, size = len(self.entries), end - start
        if count > _UINT16 or size >= ZIP64_LIMIT or start >= ZIP64_LIMIT:
            self.fp.write(_END64.pack(b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, size, start))
            self.fp.write(_LOCATOR64.pack(b"PK\x06\x07", 0, end, 1))
            self.fp.write(
                _END.pack(b"PK\x05\x06", 0, 0, min(count, _UINT16), min(count, _UINT16),
                          min(size, ZIP64_LIMIT), min(start, ZIP64_LIMIT), 0)
            )
        else:
            self.fp.write(_END.pack(b"PK\x05\x06", 0, 0, count, count, size, start, 0))

    # -- helpers -----------------------------------------------------------
    def _new_entry(self, arcname: str, executable: bool) -> _Entry:
        name = arcname.encode("utf-8")
        if name in self.names:
            raise ValueError(f"duplicate zip entry {arcname!r}")
        if len(name) > _UINT16:
            raise ValueError(f"zip entry name too long: {arcname[:80]!r}...")
        self.names.add(name)
        entry = _Entry(name, 0o755 if executable else 0o644, self.fp.tell())
        self.entries.append(entry)
        return entry

    def _compress_all(self, data: bytes) -> bytes | None:
        """Deflated ``data``, or None when deflating does not pay."""
        if not data:
            return None
        comp = zlib_ng.compressobj(self.level, zlib_ng.DEFLATED, -15)
        out = comp.compress(data) + comp.flush()
        return out if len(out) < len(data) * (1 - MIN_SAVING) else None

    def _write_local(self, e: _Entry) -> None:
        extra = b""
        csize, usize = e.csize, e.usize
        if e.zip64_local:
            extra = struct.pack("<HHQQ", 1, 16, usize, csize)
            csize = usize = ZIP64_LIMIT
        version = 45 if e.zip64_local else 20
        flags = _FLAG_UTF8 if not e.name.isascii() else 0
        self.fp.write(
            _LOCAL.pack(b"PK\x03\x04", version, flags, e.method, self.time, self.date, e.crc, csize, usize,
                        len(e.name), len(extra))
        )
        self.fp.write(e.name)
        self.fp.write(extra)


def _stored_blocks(data: memoryview) -> bytes:
    """Non-final raw-deflate stored blocks (the stream is byte-aligned here)."""
    out = bytearray()
    for start in range(0, len(data), 0xFFFF):
        block = data[start : start + 0xFFFF]
        out += struct.pack("<BHH", 0, len(block), len(block) ^ 0xFFFF)
        out += block
    return bytes(out)


class _Deflater:
    """One raw-deflate stream made of per-chunk segments: stored, isal or zlib-ng."""

    def __init__(self, level: int) -> None:
        self.level = level
        self.mode = ""
        self.comp: Any = None

    def _choose(self, chunk: memoryview) -> str:
        probe = isal_zlib.compressobj(ISAL_LEVEL, isal_zlib.DEFLATED, -15)
        sample = chunk[:PROBE]
        ratio = len(probe.compress(sample) + probe.flush()) / max(1, len(sample))
        return "stored" if ratio > STORE_ABOVE else "isal" if ratio > ISAL_ABOVE else "zlib-ng"

    def compress(self, chunk: memoryview) -> bytes:
        mode = self._choose(chunk)
        head = b""
        if mode != self.mode and self.comp is not None:
            head = self.comp.flush(zlib_ng.Z_SYNC_FLUSH)
            self.comp = None
        self.mode = mode
        if mode == "stored":
            return head + _stored_blocks(chunk)
        if self.comp is None:
            self.comp = (isal_zlib.compressobj(ISAL_LEVEL, isal_zlib.DEFLATED, -15) if mode == "isal"
                         else zlib_ng.compressobj(self.level, zlib_ng.DEFLATED, -15))
        return head + bytes(self.comp.compress(chunk))

    def flush(self) -> bytes:
        if self.comp is None:
            return _FINAL_EMPTY_STORED
        return bytes(self.comp.flush(zlib_ng.Z_FINISH))
