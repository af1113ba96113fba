"""A streaming, reproducible zip writer for wheels (what each entry is deflated with is codec.py's; how entries are
read and hashed once: docs/convert.md). Local headers are patched in place once the CRC and sizes are known (the
output is seekable: no data descriptors); zip64 extras only where needed. Fixed timestamps and permissions: the same
input gives the same bytes."""

from __future__ import annotations

import hashlib
import os
import struct
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from zlib_ng import zlib_ng

from . import stages
from .codec import CHUNK, FINAL_EMPTY_STORED, WINDOW, classify, compress_all, pool, segment

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


MIN_EPOCH = 315532800  # 1980-01-01, the earliest time a zip entry can carry


def dos_time(commit_time: int) -> tuple[int, int]:
    """(date, time) fields of a zip header for a Unix time (UTC), clamped to 1980-01-01 .. 2107."""
    t = time.gmtime(max(commit_time, MIN_EPOCH))
    year = min(t.tm_year, 2107)
    return (year - 1980) << 9 | t.tm_mon << 5 | t.tm_mday, t.tm_hour << 11 | t.tm_min << 5 | t.tm_sec // 2


@dataclass(slots=True)
class _Entry:
    name: bytes
    mode: int
    offset: int
    method: int = _STORED
    crc: int = 0
    csize: int = 0
    usize: int = 0
    zip64_local: bool = False


class ZipWriter:
    """Write a zip file entry by entry; ``close`` writes the central directory."""

    def __init__(self, fp: BinaryIO, commit_time: int) -> None:
        self.fp = fp
        self.date, self.time = dos_time(commit_time)
        self.entries: list[_Entry] = []
        self.names: set[bytes] = set()
        self._sha = hashlib.sha256()  # of the file itself, for the store's record
        self._hashed = 0  # bytes of the file fed to _sha
        self._hashing: ThreadPoolExecutor | None = None  # one thread: the file's bytes go to _sha in order
        self._hashed_parts: list[Future[None]] = []

    def add_bytes(self, arcname: str, data: bytes, executable: bool = False) -> bytes:
        """Add an entry from memory; returns its sha256 digest."""
        entry = self._new_entry(arcname, executable)
        comp = compress_all(data)
        entry.usize = len(data)
        entry.crc = zlib_ng.crc32(data)
        entry.method, entry.csize = (_STORED, len(data)) if comp is None else (_DEFLATED, len(comp))
        self._write_local(entry)
        self.fp.write(data if comp is None else comp)
        return hashlib.sha256(data).digest()

    def add_file(self, arcname: str, path: Path, executable: bool = False,
                 also: Any = None) -> tuple[bytes, int]:
        """Add an entry streamed from ``path``; returns (sha256 digest, size). ``also``: another hashlib object to
        feed the same bytes (a sha512 digest check), so the file is read once."""
        with open(path, "rb") as src:
            size = os.fstat(src.fileno()).st_size
            if size <= CHUNK:
                data = src.read()
                if also is not None:
                    also.update(data)
                return self.add_bytes(arcname, data, executable), len(data)
            entry = self._new_entry(arcname, executable)
            entry.zip64_local = size * 1.05 > ZIP64_LIMIT
            kind = classify(src, size)
            deflate = kind != "stored"
            entry.method = _DEFLATED if deflate else _STORED
            self._write_local(entry)  # a placeholder: patched below
            sha = hashlib.sha256()
            crc = usize = csize = 0
            threads, limit = pool()
            pending: deque[tuple[Future[list[bytes]], bytearray]] = deque()
            free = [bytearray(CHUNK) for _ in range(limit + 1)]  # in flight, and the one being read
            clock = time.perf_counter
            t_hash = t_wait = 0.0
            t_start = clock()
            write = self.fp.write
            window = b""
            while True:
                buf = free.pop()
                n = src.readinto(buf)
                if not n:
                    break
                chunk = memoryview(buf)[:n]
                t0 = clock()
                sha.update(chunk)
                if also is not None:
                    also.update(chunk)
                crc = zlib_ng.crc32(chunk, crc)
                t_hash += clock() - t0
                usize += len(chunk)
                if not deflate:
                    csize += write(chunk)
                    stages.add("bytes stored", len(chunk))
                    free.append(buf)
                    continue
                pending.append((threads.submit(segment, chunk, kind, window), buf))
                window = bytes(chunk[-WINDOW:])  # a copy: the buffer is read into again
                while len(pending) >= limit or (pending and pending[0][0].done()):
                    t0 = clock()
                    done, used = pending.popleft()
                    csize += sum(map(write, done.result()))
                    free.append(used)  # its chunk is written: the buffer may be read into again
                    t_wait += clock() - t0
            t0 = clock()
            while pending:
                csize += sum(map(write, pending.popleft()[0].result()))
            t_wait += clock() - t0
            if deflate:
                csize += write(FINAL_EMPTY_STORED)
            stages.add("hash", t_hash)
            stages.add("wait", t_wait)  # blocked on the deflating threads
            stages.add("write", clock() - t_start - t_hash - t_wait)  # reading, writing, handing out chunks
        entry.crc, entry.usize, entry.csize = crc, usize, csize
        if not entry.zip64_local and max(usize, csize) >= ZIP64_LIMIT:
            raise ValueError(f"{arcname}: grew past 4 GiB while being read")
        end = self.fp.tell()
        self.fp.seek(entry.offset)
        self._write_local(entry)
        self.fp.seek(end)
        # All before ``end`` is final: hashed, then flushed to disk (so that the wheel's closing fsync has
        # little left to wait for), on a thread while the next entries are written.
        self._hash_written(sync=True)
        return sha.digest(), usize

    def close(self) -> None:
        """Write the central directory and the end records."""
        start = self.fp.tell()
        for e in self.entries:
            # a value too large for its field goes to the zip64 extra, in this order; the field says 0xFFFFFFFF
            fields = [v for v in (e.usize, e.csize, e.offset) if v >= ZIP64_LIMIT]
            usize, csize, offset = (min(v, ZIP64_LIMIT) for v in (e.usize, e.csize, e.offset))
            extra = struct.pack(f"<HH{len(fields)}Q", 1, 8 * len(fields), *fields) if fields else b""
            version = 45 if fields else 20
            flags = _FLAG_UTF8 if not e.name.isascii() else 0
            self.fp.write(_CENTRAL.pack(
                b"PK\x01\x02", _UNIX << 8 | version, version, flags, e.method, self.time, self.date,
                e.crc, csize, usize, len(e.name), len(extra), 0, 0, 0, (0o100000 | e.mode) << 16, offset))
            self.fp.write(e.name)
            self.fp.write(extra)
        end = self.fp.tell()
        count, size = len(self.entries), end - start
        if count > _UINT16 or size >= ZIP64_LIMIT or start >= ZIP64_LIMIT:
            self.fp.write(_END64.pack(b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, size, start))
            self.fp.write(_LOCATOR64.pack(b"PK\x06\x07", 0, end, 1))
        # without zip64, every value fits its field and min() leaves it as it is
        self.fp.write(_END.pack(b"PK\x05\x06", 0, 0, min(count, _UINT16), min(count, _UINT16),
                                min(size, ZIP64_LIMIT), min(start, ZIP64_LIMIT), 0))

    def sha256(self) -> str:
        """The hex sha256 of the whole file, once ``close`` has written it (the bulk was hashed while the
        later entries were written: the file is not read again from the start)."""
        self._hash_written()
        self.stop_hashing()
        for done in self._hashed_parts:
            done.result()  # a failed read raises here
        self._hashed_parts.clear()
        return self._sha.hexdigest()

    def stop_hashing(self) -> None:
        """Wait for the hashing thread and end it (before the file is closed, on any path)."""
        if self._hashing is not None:
            self._hashing.shutdown(wait=True)
            self._hashing = None

    def _hash_written(self, sync: bool = False) -> None:
        """Feed what has been written since the last call to the file's sha256, on the hashing thread, then
        (``sync``) start flushing the file to disk there.

        Only called where every byte before the current position is final (local headers are patched before)."""
        end = self.fp.tell()
        if end <= self._hashed:
            return
        self.fp.flush()
        fd = self.fp.fileno()
        if self._hashing is None:
            self._hashing = ThreadPoolExecutor(1, thread_name_prefix="wheel-sha256")
        self._hashed_parts.append(self._hashing.submit(_hash_range, self._sha, fd, self._hashed, end, sync))
        self._hashed = end

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

    def _write_local(self, e: _Entry) -> None:
        extra = struct.pack("<HHQQ", 1, 16, e.usize, e.csize) if e.zip64_local else b""
        csize, usize = (ZIP64_LIMIT, ZIP64_LIMIT) if e.zip64_local else (e.csize, e.usize)
        version = 45 if e.zip64_local else 20
        flags = _FLAG_UTF8 if not e.name.isascii() else 0
        self.fp.write(_LOCAL.pack(b"PK\x03\x04", version, flags, e.method, self.time, self.date, e.crc, csize, usize,
                                  len(e.name), len(extra)))
        self.fp.write(e.name)
        self.fp.write(extra)


def _hash_range(sha: Any, fd: int, start: int, end: int, sync: bool = False) -> None:
    began = time.perf_counter()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    while start < end:
        n = os.preadv(fd, [view[: min(CHUNK, end - start)]], start)
        if n <= 0:
            raise OSError(f"the wheel being written ended at {start} bytes, before {end}")
        sha.update(view[:n])
        start += n
    stages.add("hash", time.perf_counter() - began)
    if sync:
        began = time.perf_counter()
        getattr(os, "fdatasync", os.fsync)(fd)  # fsync where there is no fdatasync (macOS)
        stages.add("write", time.perf_counter() - began)
