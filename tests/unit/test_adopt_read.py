"""What adoption reads from a wheel: METADATA's header block as packaging's parse_email reads the whole file, a
wheel's members through zipfile with their caps, records as the constructor makes them, labels as each wheel
reads them, and batch writes that are whole or absent (no network, no processes)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import struct
import warnings
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_factory import variants
from kernel_factory.errors import Refused
from kernel_factory.nofollow import Batch
from kernel_factory.store import wheelinfo
from kernel_factory.store.adopt import adopt_batch
from packaging.metadata import parse_email
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FIELDS = ("name", "version", "summary", "requires_python", "requires_dist", "license", "license_expression")


def expected(metadata: bytes) -> dict[str, object]:
    raw = parse_email(metadata)[0]
    return {k: v for k, v in raw.items() if k in FIELDS}


def got(metadata: bytes) -> dict[str, object]:
    return {k: v for k, v in wheelinfo.parse_headers(metadata).items() if k in FIELDS}


HEADER_NAMES = st.sampled_from(["Name", "name", "VERSION", "Version", "Summary", "Requires-Python", "Requires-Dist",
                                "License", "License-Expression", "Metadata-Version", "Description", "From", "X y"])
VALUES = st.text(alphabet=st.sampled_from(list(" \t:=?abc-_.;<>é\r\x0b\x1c")), max_size=12)
LINE_ENDS = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r", "\n "])


@SETTINGS
@given(st.lists(st.tuples(HEADER_NAMES, VALUES, LINE_ENDS), max_size=8), st.sampled_from(["", "\n", "\nbody\n\nmore"]))
def test_headers_as_parse_email_reads_them(headers: list[tuple[str, str, str]], body: str) -> None:
    text = "".join(f"{n}: {v}{end}" for n, v, end in headers) + body
    for encoding in ("utf-8", "latin-1"):
        data = text.encode(encoding)
        assert got(data) == expected(data)


@pytest.mark.parametrize(
    "metadata",
    [
        b"Metadata-Version: 2.1\nName: a\nVersion: 1.0\nSummary: x  \nRequires-Dist: b\nRequires-Dist: c>1\n\nbody",
        b"Name: a\nName: a\nVersion: 1.0\n",  # a repeated field
        b"Name: a\nLicense: MIT\n  and more\nVersion: 1\n\n",  # a folded header
        b"Name: a\r\nVersion: 1\r\n\r\n",
        "Name: a\nSummary: caf\u00e9\nVersion: 1\n".encode(),
        b"Name:a\nVersion:\t1.0\nLicense-Expression: MIT\n",
        b"\nName: a\n",
        b"",
    ],
)
def test_headers_examples(metadata: bytes) -> None:
    assert got(metadata) == expected(metadata)


META = b"Metadata-Version: 2.1\nName: a\nVersion: 1.0\n\n"
PROV = b'{"variant": "torch-universal"}'


def wheel_bytes(entries: list[tuple[str, bytes]], method: int = zipfile.ZIP_DEFLATED, comment: bytes = b"",
                extra: bytes = b"") -> bytes:  # fmt: skip
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name, (2026, 1, 2, 3, 4, 6))
            info.compress_type = method
            info.extra = extra
            zf.writestr(info, data)
        zf.comment = comment
    return buf.getvalue()


BASE = [("a/__init__.py", b"x = 1\n" * 50), ("a-1.0.dist-info/METADATA", META)]
WHEELS = {
    "stored": wheel_bytes(BASE, zipfile.ZIP_STORED),
    "deflated": wheel_bytes(BASE),
    "provenance": wheel_bytes([*BASE, ("a-1.0.dist-info/kernel_factory.json", PROV)]),
    "comment": wheel_bytes(BASE, comment=b"hi"),
    "extra field": wheel_bytes(BASE, extra=b"\xfe\xca\x00\x00"),
    "bzip2": wheel_bytes(BASE, zipfile.ZIP_BZIP2),
    "two METADATA": wheel_bytes([*BASE, ("b-1.0.dist-info/METADATA", META)]),
    "nested METADATA": wheel_bytes([BASE[0], ("x/a-1.0.dist-info/METADATA", META)]),
    "non-ASCII name": wheel_bytes([*BASE, ("a-1.0.dist-info/\u00e9", b"")]),
}
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # zipfile warns of the duplicate name it writes
    WHEELS["duplicate"] = wheel_bytes([*BASE, ("a-1.0.dist-info/METADATA", META + b"x")])


def members(data: bytes) -> object:
    """(METADATA, provenance) of a wheel in memory, or the refusal's text."""
    try:
        return wheelinfo._members(io.BytesIO(data), "a-1.0-py3-none-any.whl")
    except Refused as exc:
        return str(exc)


def one(found: int) -> str:
    return f"a-1.0-py3-none-any.whl: expected one .dist-info/METADATA, found {found}; rebuild the wheel"


@pytest.mark.parametrize(
    ("kind", "result"),
    [("stored", (META, None)), ("deflated", (META, None)), ("provenance", (META, PROV)), ("comment", (META, None)),
     ("extra field", (META, None)), ("bzip2", (META, None)), ("non-ASCII name", (META, None)),
     ("two METADATA", one(2)), ("nested METADATA", one(0)), ("duplicate", one(2))],
)  # fmt: skip
def test_members(kind: str, result: object) -> None:
    assert members(WHEELS[kind]) == result


def test_damaged_wheels_are_refused(tmp_path: Path) -> None:
    """A member whose CRC does not match, a cut-off zip: one line naming the wheel, whether read whole or not."""
    data = bytearray(WHEELS["stored"])
    at = bytes(data).index(META)
    data[at + 5] ^= 1  # the CRC no longer matches
    path = tmp_path / "a-1.0-py3-none-any.whl"
    refusal = r"^a-1.0-py3-none-any.whl: not a readable zip file \(.*\); rebuild or remove it$"
    for damaged in (bytes(data), WHEELS["deflated"][:-30]):
        path.write_bytes(damaged)
        with pytest.raises(Refused, match=refusal):
            wheelinfo.read_wheel(str(path), path.name)


def test_a_bomb_is_not_inflated(monkeypatch: pytest.MonkeyPatch) -> None:
    """A METADATA that says, or turns out, to be bigger than the cap: refused, never inflated past it."""
    monkeypatch.setattr(wheelinfo, "MAX_METADATA", 1000)
    big = wheel_bytes([("a-1.0.dist-info/METADATA", META + b"x" * 5000)])
    with pytest.raises(Refused, match="inflates to more than 1000 bytes"):
        wheelinfo._members(io.BytesIO(big), "a-1.0-py3-none-any.whl")
    # The central directory lies: it says 100 bytes, the stream holds 5,000.
    lying = bytearray(big)
    cd = bytes(lying).rindex(b"PK\x01\x02")
    lying[cd + 24 : cd + 28] = struct.pack("<L", 100)
    with pytest.raises(zipfile.BadZipFile):  # zipfile stops at 100 bytes, and the CRC fails
        wheelinfo._members(io.BytesIO(bytes(lying)), "a-1.0-py3-none-any.whl")


def test_read_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a-1.0-py3-none-any.whl"
    path.write_bytes(WHEELS["provenance"])
    read = wheelinfo.read_wheel(str(path), path.name)
    assert (read.metadata, read.provenance, read.data) == (META, PROV, path.read_bytes())
    assert (read.size, read.sha256) == (path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
    monkeypatch.setattr(wheelinfo, "WHOLE", 100)  # a big wheel: hashed in chunks, its zip read from the file
    assert wheelinfo.read_wheel(str(path), path.name) == dataclasses.replace(read, data=None)
    path.write_bytes(b"not a zip")
    with pytest.raises(Refused, match="not a readable zip file"):
        wheelinfo.read_wheel(str(path), path.name)


def test_batch_writes(tmp_path: Path) -> None:
    batch = Batch(tmp_path)
    st = batch.put("a.json", b"one")
    now = (tmp_path / "a.json").stat()
    assert (tmp_path / "a.json").read_bytes() == b"one" and (st.st_ino, st.st_size) == (now.st_ino, now.st_size)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o644
    batch.put("a.json", b"two")
    assert (tmp_path / "a.json").read_bytes() == b"two"
    (tmp_path / "dir").mkdir()
    with pytest.raises(OSError) as caught:
        batch.put("dir", b"x")  # a folder is in the way: the write fails and names the path
    assert caught.value.filename is not None and caught.value.filename.endswith("dir")
    assert sorted(os.listdir(tmp_path)) == ["a.json", "dir"]  # no temporary file left behind
    old = os.umask(0o077)  # a umask that takes bits of 0644 away: the file is chmod'ed back
    try:
        Batch(tmp_path).put("b.metadata", b"m")
    finally:
        os.umask(old)
    assert (tmp_path / "b.metadata").stat().st_mode & 0o777 == 0o644


@SETTINGS
@given(st.lists(st.sampled_from(["a", "B", "_", "__", ".", "1", "0", "+x", "-", "-", "py3", "none", "any", "cp39",
                                 "abi3", "linux_x86_64", "!", "é"]), max_size=14), st.sampled_from([".whl", ".zip"]))
def test_wheel_names_as_packaging_reads_them(parts: list[str], ext: str) -> None:
    check_name("".join(parts) + ext)


def check_name(name: str) -> None:
    try:
        project, version, _build, tags = parse_wheel_filename(name)
    except InvalidWheelFilename as exc:
        with pytest.raises(Refused) as caught:
            wheelinfo.parse_name(name)
        assert str(caught.value) == f"{name}: not a valid wheel file name ({exc}); rename or remove it"
        return
    assert wheelinfo.parse_name(name) == (project, version, tags)


@pytest.mark.parametrize("name", ["a-1.0-py3-none-any.whl", "A.b_c-1.0+x-1abc-py3.py2-none-any.whl", "a.whl",
                                  "a-1.0-py3-none-any-x.whl", "-1.0-py3-none-any.whl", "a__b-1.0-py3-none-any.whl"])
def test_wheel_names_examples(name: str) -> None:
    check_name(name)


def _one_wheel(tmp_path: Path) -> tuple[Path, Path]:
    from index_synth import make_wheel

    wheel = make_wheel(tmp_path / "in", "kernel-a", "1.0+torch27cu128cxx11", "py3-none-linux_x86_64")[0]
    files = tmp_path / "store" / "files"
    files.mkdir(parents=True)
    return wheel, files


def test_a_dangling_link_of_the_name_is_replaced(tmp_path: Path) -> None:
    wheel, files = _one_wheel(tmp_path)
    (files / wheel.name).symlink_to(tmp_path / "gone.whl")
    done, refused, _ = adopt_batch(files, [wheel])
    assert refused == [] and [r.filename for _, r, _ in done] == [wheel.name]
    assert (files / wheel.name).read_bytes() == wheel.read_bytes() and not (files / wheel.name).is_symlink()


def test_wheel_is_copied_never_linked(tmp_path: Path) -> None:
    """A copy even where a hard link would work: a later write to the adopted folder's file leaves the store's."""
    wheel, files = _one_wheel(tmp_path)
    done, refused, _ = adopt_batch(files, [wheel])
    record = done[0][1]
    copy = files / wheel.name
    assert refused == [] and copy.read_bytes() == wheel.read_bytes() and not os.path.samefile(copy, wheel)
    assert record.sha256 == hashlib.sha256(copy.read_bytes()).hexdigest()
    assert sorted(p.name for p in files.iterdir()) == [wheel.name, f"{wheel.name}.json", f"{wheel.name}.metadata"]


LABELLED = [
    "k-1.0+torch27cu128cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
    "k-1.1+torch27cu128cxx11-cp39-abi3-manylinux_2_28_x86_64.whl",
    "k-1.0+torch210metal-cp39-abi3-macosx_11_0_arm64.whl",
    "k-1.0+cuda-py3-none-any.whl",
    "k-1.0+mine-py3-none-any.whl",  # not a variant's label
    "k-1.0-py3-none-any.whl",  # no label
]


def test_labels_mapped_once_before_the_workers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    known: dict[str, dict[str, object]] = {}
    wheelinfo.map_labels([*LABELLED, "not-a-wheel.whl", "k-1.0+x.whl"], known)
    assert capsys.readouterr().err == ""  # each wheel's adoption warns about its unknown label, not this
    filled: dict[str, dict[str, object]] = {}
    fields = [wheelinfo.variant_fields(name, *wheelinfo.parse_name(name)[1:], None, filled)
              for name in LABELLED]  # as each wheel fills it
    assert known == filled and len(known) == 4
    assert fields[0]["variant"] == "torch27-cxx11-cu128-x86_64-linux" and fields[4] == fields[5] == {}
    capsys.readouterr()

    def unread(*args: object) -> None:
        raise AssertionError("the variant grammar was loaded again")

    monkeypatch.setattr(variants, "for_label", unread)  # with the mapping, no wheel needs the grammar
    monkeypatch.setattr(variants, "parse", unread)
    assert [wheelinfo.variant_fields(name, *wheelinfo.parse_name(name)[1:], None, known) for name in LABELLED] == fields
    assert capsys.readouterr().err.count("is not a build variant's") == 1  # still warned, per wheel
