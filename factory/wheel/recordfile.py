"""A wheel's RECORD read back, once for every reader (download, ``serve --hub``, local-kernels): its CSV rows and
its sha256 digests (distinfo.py writes it: ``record_hash``); and a kernel wheel's provenance file, found."""

from __future__ import annotations

import base64
import csv
import io
import zipfile

from ..errors import Refused
from ..record import PROVENANCE
from ..safe_text import printable
from ..store.wheelinfo import read_capped


def rows(text: str) -> list[list[str]]:
    """RECORD's rows (csv.Error where it is not CSV)."""
    return list(csv.reader(io.StringIO(text)))


def digest(value: str) -> bytes:
    """A RECORD hash's value (urlsafe base64 without its padding) -> the digest's bytes (ValueError where it is not
    base64: binascii.Error is one)."""
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))


def read_sha256(zf: zipfile.ZipFile, wheel: str, limit: int, fix: str) -> dict[str, str]:
    """The wheel's RECORD (at most ``limit`` bytes): member name -> sha256 hex, for every row with a sha256. Refused,
    ending in ``fix``, where the wheel carries no one RECORD, or it is not CSV or a digest not base64."""
    names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD")]
    if len(names) != 1:
        raise Refused(f"{wheel} carries no .dist-info/RECORD; {fix}")
    text = read_capped(zf, names[0], limit, wheel, "rebuild the wheel").decode("utf-8", "replace")
    try:
        found = rows(text)
    except csv.Error as exc:
        raise Refused(f"{wheel}: its RECORD is not CSV ({printable(str(exc), 200)}); rebuild it") from None
    out = {}
    for row in found:
        if len(row) >= 2 and row[1].startswith("sha256="):
            try:
                out[row[0]] = digest(row[1].removeprefix("sha256=")).hex()
            except ValueError:
                raise Refused(f"{wheel}: its RECORD entry for '{printable(row[0], 200)}' is not a sha256 digest; "
                              "rebuild it") from None
    return out


def provenance(zf: zipfile.ZipFile, wheel: str, max_members: int, limit: int, fix: str) -> bytes:
    """Its provenance file's bytes (``limit`` at most); Refused where it holds over ``max_members`` files or none."""
    count = len(zf.infolist())
    if count > max_members:
        raise Refused(f"{wheel} holds {count} files, more than the {max_members} a kernel wheel may; rebuild it")
    names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(f".dist-info/{PROVENANCE}")]
    if len(names) != 1:
        raise Refused(f"{wheel} carries no {PROVENANCE}; it was not built by kernel-factory")
    return read_capped(zf, names[0], limit, wheel, fix)
