"""local/download/wheelcheck.py's judgement of a wheel's members as a file system would hold them (check_names) and its
refusal of members it cannot read (encrypted, a broken deflate stream): one Refused line each, never a crash."""

from __future__ import annotations

import unicodedata
import zipfile
from pathlib import Path

import pytest
from kernel_factory.errors import Refused
from kernel_factory.local.download import wheelcheck
from test_download_limits import GOOD, wheel


def infos(*names: str, flags: int = 0) -> list[zipfile.ZipInfo]:
    out = []
    for name in names:
        info = zipfile.ZipInfo(name)
        info.flag_bits |= flags
        out.append(info)
    return out


NFC, NFD = unicodedata.normalize("NFC", "k/\u00e9.py"), unicodedata.normalize("NFD", "k/\u00e9.py")


@pytest.mark.parametrize(("names", "why"), [
    (["k/a.py", "k/a.py"], "member 'k/a.py' appears twice"),
    (["k/x", "k/x/y.py"], "member 'k/x/y.py' needs a folder where 'k/x' is a file"),
    (["k/x/y/z.py", "k/x/y"], "member 'k/x/y' is a file where 'k/x/y/z.py' needs a folder"),
    (["k/X", "k/x/y.py"], "member 'k/x/y.py' needs a folder where 'k/X' is a file"),
    (["k/A.py", "k/a.py"], "members 'k/a.py' and 'k/A.py' are one file on a case-insensitive or Unicode-normalising "
                           "file system"),
    (["k/Straße.py", "k/STRASSE.py"], "members 'k/STRASSE.py' and 'k/Straße.py' are one file on a case-insensitive "
                                      "or Unicode-normalising file system"),
    ([NFC, NFD], f"members '{NFD}' and '{NFC}' are one file on a case-insensitive or Unicode-normalising file system"),
    (["k/Sub/a.py", "k/sub/b.py"], "members 'k/sub/b.py' and 'k/Sub/a.py' are in one folder on a case-insensitive or "
                                   "Unicode-normalising file system, in two here"),
    (["k/" + "a" * 256], "member 'k/" + "a" * 198 + "...' has a name longer than a file system takes (255 bytes a "
                         "part, 1024 in all)"),
    (["k/" + "\u00e9" * 128], "member 'k/" + "\u00e9" * 128 + "' has a name longer than a file system takes (255 "
                              "bytes a part, 1024 in all)"),  # 256 bytes in UTF-8
    (["k/" + "/".join(["d" * 100] * 11) + ".py"], "member 'k/" + "/".join(["d" * 100] * 2)[:198] + "...' has a name "
                                                  "longer than a file system takes (255 bytes a part, 1024 in all)"),
])  # fmt: skip
def test_names_a_file_system_cannot_hold_as_they_are_are_refused(names: list[str], why: str) -> None:
    with pytest.raises(Refused) as info:
        wheelcheck.check_names(infos(*names), "k.whl")
    assert str(info.value) == f"k.whl: {why}; nothing was installed: rebuild the wheel"


@pytest.mark.parametrize("names", [
    ["k/a.py", "k/b.py", "k/sub/a.py", "k/sub/deeper/a.py", "k/sub2/a.py"],
    ["k/" + "a" * 255, "k/" + "/".join(["d" * 100] * 9) + ".py"],  # exactly 255 bytes a part; 1,014 in all
    ["k/ab.py", "k/a/b.py"],  # a file and a folder whose names only start alike
    ["k/a/b.py", "k/a.py"],
])
def test_names_a_file_system_holds_pass(names: list[str]) -> None:
    wheelcheck.check_names(infos(*names), "k.whl")


def test_the_limits_are_the_documented_ones() -> None:
    assert (wheelcheck.MAX_NAME_PART, wheelcheck.MAX_NAME) == (255, 1024)


def test_an_encrypted_member_is_refused() -> None:
    with pytest.raises(Refused) as info:
        wheelcheck.check_names(infos("k/a.py") + infos("k/b.py", flags=0x1), "k.whl")
    assert str(info.value) == "k.whl: member 'k/b.py' is encrypted; nothing was installed: rebuild the wheel"
    wheelcheck.check_names(infos("k/a.py", flags=0x8), "k.whl")  # a data descriptor: another flag, fine


def test_unpack_refuses_before_writing_anything(tmp_path: Path) -> None:
    path = wheel(tmp_path, {**GOOD, "k/Ops.py": b"A = 1\n", "k/ops.py": b"B = 2\n"})
    with pytest.raises(Refused, match="members 'k/ops.py' and 'k/Ops.py' are one file"):
        wheelcheck.unpack(path, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_broken_deflate_stream_is_a_refusal(tmp_path: Path) -> None:
    path = wheel(tmp_path, {**GOOD, "k/bad.py": b"X = 1\n" * 50})
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("k/bad.py")
    raw = bytearray(path.read_bytes())
    raw[info.header_offset + 30 + len(info.filename) + len(info.extra)] = 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(Refused) as got:
        wheelcheck.unpack(path, tmp_path / "out")
    assert str(got.value) == ("k-1.0-py3-none-any.whl is not a readable zip file (Error -3 while decompressing data: "
                              "invalid block type); republish the wheel")
