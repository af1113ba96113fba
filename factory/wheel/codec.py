"""The deflate policy of the wheel writer: which codec and level each part of an entry gets (the zip format is
zipwriter.py's; the rules and the figures behind each constant: docs/convert.md, scripts/bench_convert.py)."""

from __future__ import annotations

import os
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

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
FINAL_EMPTY_STORED = b"\x01\x00\x00\xff\xff"  # closes a stream of segments


def compress_all(data: bytes) -> bytes | None:
    """Raw-deflated ``data`` (an entry up to 1 MB), or None when deflating saves less than MIN_SAVING."""
    comp = zlib_ng.compressobj(LEVEL, zlib_ng.DEFLATED, -15)
    out = comp.compress(data) + comp.flush()
    return out if len(out) < len(data) * (1 - MIN_SAVING) else None


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
    """One of KINDS, from probes spread over the file (a few hundred KB read ahead of the single pass)."""
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
    """(codec, level) for one chunk of an entry of this kind."""
    if kind == "fatbin":
        return "isal", FATBIN_LEVEL
    ratio = probe(chunk)
    if ratio > FAST_ABOVE:
        return "isal", ISAL_FAST_LEVEL
    if ratio > CODE_BELOW or kind == "plain-code":
        return "isal", ISAL_LEVEL
    return "zlib-ng", LEVEL


def segment(chunk: bytes | memoryview, kind: str, window: bytes = b"") -> list[bytes]:
    """One chunk as non-final raw-deflate blocks ending byte-aligned (a sync flush), primed with ``window`` (the
    previous chunk's last 32 KB, empty for the first: docs/convert.md). Returns the parts to write, in order."""
    start = time.perf_counter()
    codec, lvl = choose(chunk, kind)
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


def pool() -> tuple[ThreadPoolExecutor, int]:
    """A thread per core for deflating (isal and zlib-ng release the GIL), and how many chunks may be in flight."""
    global _POOL
    if _POOL is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        _POOL = ThreadPoolExecutor(max(1, workers), thread_name_prefix="deflate"), 2 * max(1, workers)
    return _POOL


def _forget_pool() -> None:
    global _POOL
    _POOL = None  # a forked child has the parent's pool object but none of its threads


os.register_at_fork(after_in_child=_forget_pool)
