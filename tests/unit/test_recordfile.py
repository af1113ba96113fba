"""wheel/recordfile.py: a wheel's RECORD read back once for download, serve --hub and local-kernels."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile

import pytest
from kernel_factory.errors import Refused
from kernel_factory.wheel import recordfile
from kernel_factory.wheel.distinfo import record_hash


def wheel_with(record: str | None, extra: dict[str, str] | None = None) -> zipfile.ZipFile:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        if record is not None:
            zf.writestr("k-1.0.dist-info/RECORD", record)
        for name, text in (extra or {}).items():
            zf.writestr(name, text)
    return zipfile.ZipFile(io.BytesIO(buf.getvalue()))


def test_digest_reads_back_what_distinfo_writes() -> None:
    for data in (b"", b"x", b"abc" * 100):
        digest = hashlib.sha256(data).digest()
        assert recordfile.digest(record_hash(digest).removeprefix("sha256=")) == digest
    assert recordfile.digest(base64.urlsafe_b64encode(b"\xff" * 20).decode()) == b"\xff" * 20  # padded too
    with pytest.raises(ValueError):
        recordfile.digest("not base64!")


def test_read_sha256_maps_members_to_hex_and_refuses_what_is_no_record() -> None:
    h = hashlib.sha256(b"X = 1\n")
    record = f"k/__init__.py,{record_hash(h.digest())},6\nk-1.0.dist-info/RECORD,,\nk/x.py,md5=abc,1\n"
    assert recordfile.read_sha256(wheel_with(record), "k.whl", 1000, "rebuild it") == {"k/__init__.py": h.hexdigest()}
    assert recordfile.rows("a,b\n\"c,d\",e\n") == [["a", "b"], ["c,d", "e"]]
    with pytest.raises(Refused, match=r"^k.whl carries no .dist-info/RECORD; rebuild it$"):
        recordfile.read_sha256(wheel_with(None), "k.whl", 1000, "rebuild it")
    with pytest.raises(Refused, match=r"^k.whl: its RECORD entry for 'k/a.py' is not a sha256 digest; rebuild it$"):
        recordfile.read_sha256(wheel_with("k/a.py,sha256=a,1\n"), "k.whl", 1000, "rebuild it")
    with pytest.raises(Refused, match=r"^k.whl: its RECORD is not CSV \(field larger than"):
        recordfile.read_sha256(wheel_with("x" * 200_000), "k.whl", 300_000, "rebuild it")
    with pytest.raises(Refused, match="RECORD inflates to more than 10 bytes"):
        recordfile.read_sha256(wheel_with(record), "k.whl", 10, "rebuild it")
