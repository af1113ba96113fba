"""A streaming, reproducible zip writer for wheels.

Entries are read once, in 1 MB chunks: hashed (sha256 for RECORD, and the
caller's own hash for a digest check) and deflated while they are written, so
memory does not grow with file size. A large entry is first classified from
16 probes spread over it: stored (incompressible), mostly CUDA fatbins (every
chunk deflated with isal level 2, which matches zlib's size on them at many
times the speed; no chunk is probed) or machine code (each chunk's own first
64 KB picks zlib-ng for the match-rich chunks, isal for the rest), unless the
probes say zlib-ng would save under 5% over isal on that entry's code (isal
throughout, at a quarter of the time); a chunk that does not shrink is stored.
The choice is a function of the input alone. Chunks are deflated
independently on a thread per core, each primed with the previous chunk's
last 32 KB (deflate's window, so no match is lost at a chunk boundary), and
joined at sync-flush boundaries, which any inflater reads as one stream.
Local headers are patched in place once an entry's CRC and sizes are known
(the output must be seekable), so no data descriptors are written; zip64
extras only where a size or offset needs them. The file's own sha256 is
taken on a thread behind the writer. Fixed timestamps and permissions: the
same input gives the same bytes.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import struct
import sys
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from isal import isal_zlib
from zlib_ng import zlib_ng

from . import stages

CHUNK = 1 << 20
# zlib-ng level 5 for machine code: on libtorch_cpu.so 1.03x the size of zlib level 6 at 3x its speed
# (level 4: 1.05x). isal for the rest: on libcublasLt.so.13 (CUDA fatbins) level 2 is within 1.5% of
# zlib 6 at 8x its speed. See docs/convert.md and scripts/bench_convert.py.
LEVEL = 5
# Store an entry (small files) when deflating it saves less than this fraction.
MIN_SAVING = 0.02
PROBE = 64 << 10  # bytes of a chunk deflated with isal (level 3) to choose how to encode it
SAMPLES = 16  # probes spread over a large entry to classify it before it is streamed
ISAL_LEVEL = 3
ISAL_FAST_LEVEL = 2  # nearly incompressible chunks: about level 3's size at twice its speed
# every chunk of a mostly-fatbin entry, unprobed: on libcublasLt.so.13's fatbins level 2 is smaller than
# level 1 (1.013x zlib 6 against 1.015x) and as fast, about 1.8x level 3's speed
FATBIN_LEVEL = 2
WINDOW = 32 << 10  # deflate's window: each chunk is primed with the previous chunk's last 32 KB
# Probe ratio up to which a chunk is match-rich machine code, where zlib-ng's longer matches pay. On
# libtorch_cpu.so (4 x 150 MB, chunks primed): 0.55 -> 1.038x zlib 6, 0.52 -> 1.043x with 6% less deflate time,
# 0.50 -> 1.048x and 11% less. The probe predicts zlib-ng's gain on a chunk only roughly (rank correlation 0.66 with
# bytes saved per second), so a lower threshold costs size faster than it saves time. 0.50 keeps the CPU corpus
# within 1.05x (its size is the same on every run) for the speed the 5x target needs.
CODE_BELOW = 0.50
FAST_ABOVE = 0.9  # probe ratio above which a chunk is nearly incompressible
FATBIN_ENTRY = 0.6  # mean probe ratio above which an entry is mostly fatbins: every chunk goes to isal
# A code entry's match-rich chunks go to zlib-ng only where, on the entry's probes, zlib-ng level 5 is at least
# this much smaller than isal level 3, at four times its time: on libtorch_cpu.so's code 6-8% (its chunks: 8-13%),
# on libcublasLt.so.13's host code 3.6% (its chunks: 6%, where isal throughout keeps the CUDA corpus at 1.018x
# zlib 6 and saves 40% of its compression time). Fatbin and stored entries do not probe with zlib-ng.
ZLIB_NG_GAIN = 0.05
KINDS = ("stored", "fatbin", "code", "plain-code")  # plain-code: machine code where zlib-ng gains too little
STORE_ENTRY = 0.98  # an entry whose every probe is above this is stored
_FINAL_EMPTY_STORED = b"\x01\x00\x00\xff\xff"
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt(3)
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
        self._sha = hashlib.sha256()  # of the file itself, for the store's record
        self._hashed = 0  # bytes of the file fed to _sha
        self._hashing: ThreadPoolExecutor | None = None  # one thread: the file's bytes go to _sha in order
        self._hashed_parts: list[Future[None]] = []

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

    def add_file(self, arcname: str, path: Path, executable: bool = False,
                 also: Any = None) -> tuple[bytes, int]:
        """Add an entry streamed from ``path``; returns (sha256 digest, size).

        ``also``: another hashlib object to feed the same bytes (a sha512 digest check), so the file
        is read once. Chunks are deflated in parallel (threads, at most ``2 x workers`` chunks in flight).
        """
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
            pool, limit = _pool()
            pending: deque[Future[list[bytes]]] = deque()
            clock = time.perf_counter
            t_hash = t_wait = 0.0
            t_start = clock()
            write = self.fp.write
            window = b""
            while chunk := src.read(CHUNK):
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
                    continue
                pending.append(pool.submit(segment, chunk, kind, self.level, window))
                window = chunk[-WINDOW:]
                while len(pending) >= limit or (pending and pending[0].done()):
                    t0 = clock()
                    csize += sum(map(write, pending.popleft().result()))
                    t_wait += clock() - t0
            t0 = clock()
            while pending:
                csize += sum(map(write, pending.popleft().result()))
            t_wait += clock() - t0
            if deflate:
                csize += write(_FINAL_EMPTY_STORED)
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

    def sha256(self) -> str:
        """The hex sha256 of the whole file, once ``close`` has written it (the bulk was hashed while the
        later entries were written: the file is not read again from the start)."""
        self._hash_written()
        self.stop_hashing()
        if self._hashed < 0:
            raise ValueError("the sha256 of a zip is taken from its file: this one is in memory")
        for done in self._hashed_parts:
            done.result()  # a failed read raises here
        self._hashed_parts.clear()
        return self._sha.hexdigest()

    def stop_hashing(self) -> None:
        """Wait for the hashing thread and end it (before the file is closed, on any path)."""
        if self._hashing is not None:
            self._hashing.shutdown(wait=True)
            self._hashing = None

    # -- helpers -----------------------------------------------------------
    def _hash_written(self, sync: bool = False) -> None:
        """Feed what has been written since the last call to the file's sha256, on the hashing thread, then
        (``sync``) start flushing the file to disk there.

        Only called where every byte before the current position is final (local headers are patched before)."""
        end = self.fp.tell()
        if end <= self._hashed:
            return
        self.fp.flush()
        try:
            fd = self.fp.fileno()
        except (AttributeError, OSError):  # an in-memory file: no sha256 (sha256() says so)
            self._hashed = -1
            return
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
        if hasattr(os, "fdatasync"):
            os.fdatasync(fd)
        else:
            os.fsync(fd)
        stages.add("write", time.perf_counter() - began)


def _stored_blocks(data: memoryview) -> bytes:
    """Non-final raw-deflate stored blocks (the stream is byte-aligned here)."""
    out = bytearray()
    for start in range(0, len(data), 0xFFFF):
        block = data[start : start + 0xFFFF]
        out += struct.pack("<BHH", 0, len(block), len(block) ^ 0xFFFF)
        out += block
    return bytes(out)


def probe(data: bytes | memoryview, codec: str = "isal") -> float:
    """Deflated size / size of ``data``'s first 64 KB, with isal level 3 (or zlib-ng at ``LEVEL``)."""
    comp = (isal_zlib.compressobj(ISAL_LEVEL, isal_zlib.DEFLATED, -15) if codec == "isal"
            else zlib_ng.compressobj(LEVEL, zlib_ng.DEFLATED, -15))
    sample = data[:PROBE]
    return len(comp.compress(sample) + comp.flush()) / max(1, len(sample))


def classify(src: BinaryIO, size: int) -> str:
    """One of KINDS, from probes spread over the file (a few hundred KB read ahead of the single pass):
    "stored" when every probe is incompressible, "fatbin" when they are mostly poorly compressible (isal
    throughout: per entry, the size stays within 2% of zlib 6), else machine code: "code" when zlib-ng saves at
    least ZLIB_NG_GAIN over isal on the probes that are not nearly incompressible, "plain-code" when not."""
    samples = []
    for k in range(SAMPLES):
        src.seek(size * k // SAMPLES)
        samples.append(src.read(PROBE))
    src.seek(0)
    ratios = [probe(sample) for sample in samples]
    if min(ratios) > STORE_ENTRY:
        return "stored"
    if sum(ratios) / len(ratios) > FATBIN_ENTRY:
        return "fatbin"
    code = [(ratio, sample) for ratio, sample in zip(ratios, samples, strict=True) if ratio <= FAST_ABOVE]
    isal = sum(ratio * len(sample) for ratio, sample in code)
    zng = sum(probe(sample, "zlib-ng") * len(sample) for _, sample in code)
    return "code" if isal >= zng * (1 + ZLIB_NG_GAIN) else "plain-code"


def choose(chunk: bytes | memoryview, kind: str) -> tuple[str, int]:
    """(codec, level) for one chunk of an entry of this kind: isal level 2 for a "fatbin" entry (unprobed), else
    from the chunk's own probe: nearly incompressible chunks isal level 2, match-rich ones (probe up to
    CODE_BELOW) zlib-ng in a "code" entry, the rest isal level 3."""
    if kind == "fatbin":
        return "isal", FATBIN_LEVEL
    ratio = probe(chunk)
    if ratio > FAST_ABOVE:
        return "isal", ISAL_FAST_LEVEL
    if ratio > CODE_BELOW or kind == "plain-code":
        return "isal", ISAL_LEVEL
    return "zlib-ng", LEVEL


def segment(chunk: bytes, kind: str, level: int = LEVEL, window: bytes = b"") -> list[bytes]:
    """One chunk as non-final raw-deflate blocks ending byte-aligned (a sync flush), on its own.

    Each chunk is encoded with ``window`` (the previous chunk's last 32 KB, empty for the first) as its
    preset dictionary, which is exactly what an inflater holds when it reaches this chunk: no match is lost at
    the boundary, yet chunks can be deflated in any order on any thread and the result depends on the input
    alone. The segments joined and closed with an empty final block are one valid deflate stream. A chunk that
    does not shrink is stored. Returns the parts to write, in order (not joined: no copy).
    """
    start = time.perf_counter()
    codec, lvl = choose(chunk, kind)
    lvl = lvl if codec == "isal" else level
    preset = {"zdict": window} if window else {}
    comp = (isal_zlib.compressobj(lvl, isal_zlib.DEFLATED, -15, 8, 0, **preset) if codec == "isal"
            else zlib_ng.compressobj(lvl, zlib_ng.DEFLATED, -15, 8, 0, **preset))
    out = [comp.compress(chunk), comp.flush(zlib_ng.Z_SYNC_FLUSH)]
    stored = len(chunk) + 5 * (len(chunk) // 0xFFFF + 1)
    if len(out[0]) + len(out[1]) >= stored:
        out = [_stored_blocks(memoryview(chunk))]
        codec = "stored after " + codec
    stages.add("compress", time.perf_counter() - start)
    stages.add(f"bytes {codec} {lvl}", len(chunk))
    return out


_POOL: tuple[ThreadPoolExecutor, int] | None = None


def _pool() -> tuple[ThreadPoolExecutor, int]:
    """A thread per core for deflating (isal and zlib-ng release the GIL), and how many chunks may be in flight."""
    global _POOL
    if _POOL is None:
        _keep_freed_memory()
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        _POOL = ThreadPoolExecutor(max(1, workers), thread_name_prefix="deflate"), 2 * max(1, workers)
    return _POOL


def _keep_freed_memory() -> None:
    """glibc: serve the 1 MB chunk buffers from the heap and keep what is freed there, instead of mapping and
    unmapping (and faulting in) fresh pages for each chunk: about a quarter less system time. Bounded by what
    is in flight at once (a few MB per thread). No-op elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 128 << 20)
    except (OSError, AttributeError):  # not glibc
        pass


def _forget_pool() -> None:
    global _POOL
    _POOL = None  # a forked child has the parent's pool object but none of its threads


os.register_at_fork(after_in_child=_forget_pool)
