"""The streaming zip writer: round trip, stored vs deflated entries, hashes, determinism."""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
import zlib
from pathlib import Path

import pytest
from kernel_factory.wheel import codec, zipwriter
from kernel_factory.wheel.zipwriter import ZipWriter

DT = 1767225600  # 2026-01-01 00:00:00 UTC


def _write(path: Path, entries: dict[str, Path | bytes]) -> dict[str, tuple[bytes, int]]:
    out: dict[str, tuple[bytes, int]] = {}
    with open(path, "wb") as fp:
        zw = ZipWriter(fp, DT)
        for name, src in entries.items():
            if isinstance(src, Path):
                out[name] = zw.add_file(name, src, executable=name.endswith(".so"))
            else:
                out[name] = (zw.add_bytes(name, src), len(src))
        zw.close()
    return out


def test_round_trip_stored_and_deflated(tmp_path: Path) -> None:
    compressible = tmp_path / "big.so"
    compressible.write_bytes(b"machine code " * 300_000)  # 3.9 MB: streamed, deflated
    random = tmp_path / "random.bin"
    random.write_bytes(os.urandom(3 << 20))  # incompressible: stored
    entries: dict[str, Path | bytes] = {
        "pkg/big.so": compressible, "pkg/random.bin": random, "pkg/small.py": b"x = 1\n" * 50,
        "pkg/empty": b"", "pkg/tiny": b"ab", "pkg/ünïcode.txt": b"hello",
    }
    hashes = _write(tmp_path / "a.zip", entries)
    with zipfile.ZipFile(tmp_path / "a.zip") as z:
        assert z.testzip() is None
        info = {i.filename: i for i in z.infolist()}
        assert info["pkg/big.so"].compress_type == zipfile.ZIP_DEFLATED
        assert info["pkg/random.bin"].compress_type == zipfile.ZIP_STORED
        assert info["pkg/tiny"].compress_type == zipfile.ZIP_STORED
        assert info["pkg/big.so"].external_attr >> 16 == 0o100755
        assert info["pkg/small.py"].external_attr >> 16 == 0o100644
        assert info["pkg/big.so"].date_time == (2026, 1, 1, 0, 0, 0)
        for name, src in entries.items():
            data = src.read_bytes() if isinstance(src, Path) else src
            assert z.read(name) == data
            assert hashes[name] == (hashlib.sha256(data).digest(), len(data))


def test_same_input_same_bytes(tmp_path: Path) -> None:
    f = tmp_path / "lib.so"
    f.write_bytes(bytes(range(256)) * 20_000)
    _write(tmp_path / "1.zip", {"a/lib.so": f, "a/x": b"1"})
    _write(tmp_path / "2.zip", {"a/lib.so": f, "a/x": b"1"})
    assert (tmp_path / "1.zip").read_bytes() == (tmp_path / "2.zip").read_bytes()


def test_dos_time_clamps_to_1980() -> None:
    assert zipwriter.dos_time(0) == zipwriter.dos_time(zipwriter.MIN_EPOCH)


def test_duplicate_entry_refused(tmp_path: Path) -> None:
    zw = ZipWriter(io.BytesIO(), DT)
    zw.add_bytes("a", b"1")
    try:
        zw.add_bytes("a", b"2")
    except ValueError as exc:
        assert "duplicate" in str(exc)
    else:
        raise AssertionError("duplicate accepted")


def test_zip64_central_directory_for_large_offsets(tmp_path: Path) -> None:
    """Offsets past 4 GiB get zip64 extras: fake them by starting the writer at a large offset."""
    buf = io.BytesIO()
    zw = ZipWriter(buf, DT)
    zw.add_bytes("a", b"hello")
    zw.entries[0].offset = 0x1_0000_0000
    zw.close()
    raw = buf.getvalue()
    central = raw[raw.index(b"PK\x01\x02") :]
    assert b"\x01\x00\x08\x00" + (0x1_0000_0000).to_bytes(8, "little") in central  # zip64 extra: the offset
    assert central[42:46] == b"\xff\xff\xff\xff"  # offset field points to the extra


def test_mixed_chunks_round_trip(tmp_path: Path) -> None:
    """Machine code, entropy-limited and random chunks in one entry: one valid deflate stream."""
    import random

    rnd = random.Random(1)
    code = b"".join(b"mov rax, [rbp-%d]; call %x\n" % (rnd.randrange(64), rnd.randrange(99)) for _ in range(60_000))
    low = rnd.randbytes(1 << 20).translate(bytes(b % 32 for b in range(256)))  # 5 bits of entropy a byte
    noise = rnd.randbytes(1 << 20)
    data = code[: 1 << 20] + low + noise + code[: 1 << 20] + noise[:1000]
    f = tmp_path / "mixed.so"
    f.write_bytes(data)
    chunks = [data[i : i + (1 << 20)] for i in range(0, len(data), 1 << 20)]
    assert [codec.choose(c, "code") for c in chunks] == [
        ("zlib-ng", 5), ("isal", 3), ("isal", 2), ("zlib-ng", 5), ("isal", 2)]
    assert [codec.choose(c, "plain-code") for c in chunks] == [  # zlib-ng would gain too little: isal only
        ("isal", 3), ("isal", 3), ("isal", 2), ("isal", 3), ("isal", 2)]
    assert [codec.choose(c, "fatbin") for c in chunks] == [("isal", 2)] * 5  # a mostly-fatbin entry: unprobed
    assert codec.segment(noise, "code") == [codec._stored_blocks(memoryview(noise))]  # never grows
    with open(f, "rb") as src:  # zlib-ng saves 12% on the text, nothing on the low-entropy third, which holds
        assert codec.classify(src, len(data)) == "plain-code"  # most of the deflated bytes: under 5% in all
    _write(tmp_path / "m.zip", {"m.so": f})
    with zipfile.ZipFile(tmp_path / "m.zip") as z:
        assert z.read("m.so") == data and z.getinfo("m.so").compress_type == zipfile.ZIP_DEFLATED
    tail = tmp_path / "tail.so"
    tail.write_bytes(code[: 1 << 20] + noise)  # ends with a stored chunk: the final empty block closes it
    _write(tmp_path / "t.zip", {"t.so": tail})
    with zipfile.ZipFile(tmp_path / "t.zip") as z:
        assert z.read("t.so") == tail.read_bytes()


def test_round_trip_property(tmp_path_factory: pytest.TempPathFactory) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    name = st.text(st.characters(min_codepoint=48, max_codepoint=0x24F, exclude_categories=["Cs"]), min_size=1,
                   max_size=20)

    @settings(max_examples=25, deadline=None)
    @given(st.dictionaries(name, st.tuples(st.binary(max_size=3000), st.integers(0, 3)), min_size=1, max_size=5))
    def check(entries: dict[str, tuple[bytes, int]]) -> None:
        folder = tmp_path_factory.mktemp("prop")
        sources: dict[str, Path | bytes] = {}
        for i, (arc, (data, repeat)) in enumerate(entries.items()):
            big = data * (1 + repeat * 500) if repeat else data  # some entries go past 1 MB: streamed
            if repeat and len(big) > codec.CHUNK:
                path = folder / f"src{i}"
                path.write_bytes(big)
                sources[arc] = path
            else:
                sources[arc] = big
        _write(folder / "p.zip", sources)
        with zipfile.ZipFile(folder / "p.zip") as z:
            for arc, src in sources.items():
                assert z.read(arc) == (src.read_bytes() if isinstance(src, Path) else src)

    check()


def _entry(kind: str, size: int = 3 << 20) -> bytes:
    """Bytes that classify() sorts into ``kind``."""
    import random

    rnd = random.Random(kind)
    if kind == "code":  # match-rich: zlib-ng's longer matches save well over 5% against isal
        ops, regs = (b"mov", b"call", b"lea", b"push", b"add", b"cmp"), (b"rax", b"rbx", b"rcx", b"rsi", b"rbp")
        lines = (b"%s %s, [%s+%d]\n" % (rnd.choice(ops), rnd.choice(regs), rnd.choice(regs), rnd.randrange(256))
                 for _ in range(size // 12))
        return b"".join(lines)[:size]
    if kind == "plain-code":  # compressible but match-poor (about 3 bits a byte): isal is as good as zlib-ng
        return rnd.randbytes(size).translate(bytes(b % 8 for b in range(256)))
    if kind == "fatbin":  # poorly compressible (about 7 bits a byte)
        return rnd.randbytes(size).translate(bytes(b % 128 for b in range(256)))
    return rnd.randbytes(size)  # stored


@pytest.mark.parametrize("kind", codec.KINDS)
def test_entry_kind_is_a_function_of_the_bytes(tmp_path: Path, kind: str) -> None:
    """Each kind of entry: classified the same way every time, deflated (or stored) to the same bytes with one
    deflating thread or several, and read back by zipfile."""
    from concurrent.futures import ThreadPoolExecutor

    data = _entry(kind)
    f = tmp_path / "lib.so"
    f.write_bytes(data)
    with open(f, "rb") as src:
        assert codec.classify(src, len(data)) == kind
        assert src.tell() == 0  # the single pass starts at the beginning
    _write(tmp_path / "a.zip", {"lib.so": f})
    saved = codec._POOL
    codec._POOL = ThreadPoolExecutor(1), 1  # one thread, one chunk in flight
    try:
        _write(tmp_path / "b.zip", {"lib.so": f})
    finally:
        codec._POOL[0].shutdown()
        codec._POOL = saved
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    with zipfile.ZipFile(tmp_path / "a.zip") as z:
        assert z.read("lib.so") == data
        info = z.getinfo("lib.so")
    assert info.compress_type == (zipfile.ZIP_STORED if kind == "stored" else zipfile.ZIP_DEFLATED)
    if kind == "plain-code":  # isal throughout, yet within 5% of zlib 6
        assert info.compress_size < len(zlib.compress(data, 6)) * 1.05


def test_chunk_primed_with_the_previous_window(tmp_path: Path) -> None:
    """A chunk is deflated with the previous chunk's last 32 KB as its dictionary: a match across the boundary
    is kept, and the joined stream still inflates."""
    import random

    rnd = random.Random(7)
    tail = rnd.randbytes(16 << 10)  # incompressible on its own
    first = rnd.randbytes(codec.CHUNK - len(tail)) + tail
    second = tail * (codec.CHUNK // len(tail))  # repeats what the window holds
    for kind in ("code", "plain-code", "fatbin"):  # zlib-ng and isal alike
        alone = sum(map(len, codec.segment(second, kind)))
        primed = sum(map(len, codec.segment(second, kind, window=first[-codec.WINDOW :])))
        assert primed < alone - len(tail) // 2  # unprimed, the first copy is literals again
    f = tmp_path / "two.so"
    f.write_bytes(first + second)
    _write(tmp_path / "w.zip", {"two.so": f})
    with zipfile.ZipFile(tmp_path / "w.zip") as z:
        assert z.read("two.so") == first + second


def test_wheel_sha256_taken_while_writing(tmp_path: Path) -> None:
    """The writer's own sha256 of the file (hashed behind the writer, headers patched first) is the file's."""
    big = tmp_path / "big.so"
    big.write_bytes(_entry("code"))
    other = tmp_path / "other.so"
    other.write_bytes(_entry("fatbin", 2 << 20))
    path = tmp_path / "h.zip"
    with open(path, "w+b") as fp:
        zw = ZipWriter(fp, DT)
        zw.add_bytes("a.py", b"x = 1\n")
        zw.add_file("big.so", big)
        zw.add_bytes("b.py", b"y = 2\n")
        zw.add_file("other.so", other)
        zw.close()
        digest = zw.sha256()
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()

