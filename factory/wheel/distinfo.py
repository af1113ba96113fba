"""Wheel names and the .dist-info files (METADATA, WHEEL, RECORD, provenance), and writing the archive."""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidName, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .. import __version__
from ..errors import BadKernel
from ..nofollow import TMP_PREFIX
from ..record import HUB_URL
from . import stages
from .zipwriter import ZipWriter

REQUIRES_PYTHON = ">=3.9"
GENERATOR = f"kernel-factory {__version__}"
_ABBREVIATIONS = {"e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "incl."}


def dist_name(name: str, where: str) -> str:
    """A valid project name (display form) or BadKernel."""
    try:
        canonicalize_name(name, validate=True)
    except InvalidName:
        raise BadKernel(
            f"{where}: {name!r} is not a valid distribution name; set metadata.json 'name' to letters, digits, '-'"
        ) from None
    return name


def filename_name(name: str) -> str:
    """The distribution part of a wheel file name: PEP 503 normalised, '-' -> '_'."""
    return canonicalize_name(name).replace("-", "_")


def full_version(text: str, where: str) -> str:
    """``text`` (the kernel version with its local label) normalised; BadKernel if it is not PEP 440."""
    try:
        return str(Version(text))
    except InvalidVersion:
        raise BadKernel(f"{where}: {text!r} is not a valid version; use a vX.Y.Z tag or a v<N> branch") from None


def wheel_filename(name: str, version: str, tag: str) -> str:
    filename = f"{filename_name(name)}-{version}-{tag}.whl"
    parse_wheel_filename(filename)  # raises InvalidWheelFilename on a bad tag or version
    return filename


def dist_info_dir(name: str, version: str) -> str:
    return f"{filename_name(name)}-{version}.dist-info"


def summary_of(readme: str | None, name: str) -> str:
    """The first sentence of the README's first prose paragraph, else "<name> compute kernel"."""
    fallback = f"{name} compute kernel"
    if not readme:
        return fallback
    lines = readme.splitlines()
    if lines and lines[0].strip() == "---":  # YAML front matter of a Hub card
        end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
        lines = lines[end + 1 :] if end is not None else lines
    paragraph: list[str] = []
    fenced = False
    for line in lines:
        text = line.strip()
        if text.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced or not text or text.startswith(("#", "<", "![", "[![", "|", ">", "---", "===")):
            if paragraph:
                break
            continue
        paragraph.append(text)
    words: list[str] = []
    for word in " ".join(paragraph).split():
        words.append(word)
        if word.endswith((".", "!", "?")) and word.lower() not in _ABBREVIATIONS:
            break
    prose = " ".join(words)
    if not prose:
        return fallback
    return prose if len(prose) <= 250 else prose[:247].rstrip() + "..."


def license_fields(license_text: str | None) -> tuple[str, str] | None:
    """("License-Expression", canonical SPDX) when valid, else ("License", text); None without a license."""
    if not license_text or not license_text.strip():
        return None
    try:
        return "License-Expression", str(canonicalize_license_expression(license_text))
    except InvalidLicenseExpression:
        return "License", " ".join(license_text.split())


def check_requirements(reqs: Iterable[str], where: str) -> tuple[str, ...]:
    out: list[str] = []
    for req in reqs:
        try:
            # Keep a compact requirement as written ("torch>=2.7,<2.8", as DESIGN.md shows it); normalise others.
            text = req if not any(c.isspace() for c in req) else str(Requirement(req))
            Requirement(text)
        except InvalidRequirement:
            raise BadKernel(f"{where}: {req!r} in metadata.json python-depends is not a valid requirement") from None
        out.append(text)
    return tuple(dict.fromkeys(out))  # each once, first place kept


def metadata_bytes(*, name: str, version: str, summary: str, readme: str | None, license_text: str | None,
                   upstream: str | None, repo_id: str | None, requires_dist: Sequence[str]) -> bytes:
    """METADATA (core metadata 2.4); the README is the message body."""
    headers = [("Metadata-Version", "2.4"), ("Name", name), ("Version", version), ("Summary", summary)]
    lic = license_fields(license_text)
    if lic:
        headers.append(lic)
    if upstream and upstream.strip():
        headers.append(("Project-URL", f"Source, {' '.join(upstream.split())}"))
    if repo_id:
        headers.append(("Project-URL", f"Hub, {HUB_URL}{repo_id}"))
    headers.append(("Requires-Python", REQUIRES_PYTHON))
    headers.extend(("Requires-Dist", req) for req in requires_dist)
    if readme:
        headers.append(("Description-Content-Type", "text/markdown"))
    text = "".join(f"{key}: {value}\n" for key, value in headers)
    if readme:
        text += "\n" + readme.replace("\r\n", "\n")
        if not text.endswith("\n"):
            text += "\n"
    return text.encode("utf-8")


def wheel_bytes(tag: str) -> bytes:
    purelib = "true" if tag == "py3-none-any" else "false"
    return f"Wheel-Version: 1.0\nGenerator: {GENERATOR}\nRoot-Is-Purelib: {purelib}\nTag: {tag}\n".encode()


def provenance_bytes(fields: dict[str, object]) -> bytes:
    return (json.dumps(fields, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def record_hash(digest: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class WheelWriter:
    """A wheel written entry by entry into a hidden temporary file in ``folder``; ``finish`` names it.

    Leaving the ``with`` block without ``finish`` (a digest mismatch, any error) removes the file:
    nothing half-written or unverified is left behind.
    """

    def __init__(self, folder: Path, commit_time: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, dir=folder)
        self.tmp = Path(tmp)
        self.fp = os.fdopen(fd, "w+b")
        self.zw = ZipWriter(self.fp, commit_time)
        self.rows: list[tuple[str, str, str]] = []
        self.sha256 = ""  # the finished wheel's hex sha256, set by finish

    def __enter__(self) -> WheelWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.zw.stop_hashing()
        self.fp.close()  # a no-op once finish closed it
        self.tmp.unlink(missing_ok=True)

    def add(self, arcname: str, data: bytes) -> None:
        self.rows.append((arcname, record_hash(self.zw.add_bytes(arcname, data)), str(len(data))))

    def add_file(self, arcname: str, path: Path, executable: bool, also: Any = None) -> bytes:
        """Stream one file in; returns its sha256 digest (``also``: another hashlib object fed the same bytes)."""
        digest, size = self.zw.add_file(arcname, path, executable, also)
        self.rows.append((arcname, record_hash(digest), str(size)))
        return digest

    def finish(self, dist_info: str, dest: Path) -> None:
        """RECORD and the central directory written, the file moved to ``dest`` atomically; sets ``sha256``."""
        with stages.timed("write"):
            record_name = f"{dist_info}/RECORD"
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerows([*self.rows, (record_name, "", "")])
            self.zw.add_bytes(record_name, buf.getvalue().encode("utf-8"))
            self.zw.close()
            self.sha256 = self.zw.sha256()
            self.fp.flush()
            os.fsync(self.fp.fileno())
            self.fp.close()
            os.chmod(self.tmp, 0o644)
            os.replace(self.tmp, dest)

