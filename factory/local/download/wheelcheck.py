"""A downloaded kernel wheel, unpacked and checked: what ``download`` puts into the Hub cache, and nothing else
(its limits: docs/download.md)."""

from __future__ import annotations

import json
import unicodedata
import zipfile
import zlib
from pathlib import Path
from typing import Any

from ...errors import Refused
from ...nofollow import stream_digest
from ...record import PROVENANCE
from ...safe_text import has_control, printable
from ...store.wheelinfo import read_capped
from ...verify.digest import TOP_META, left_out_path
from ...verify.lockfile import files_lock_hash
from ...wheel import layout, recordfile

# What is read from a wheel, at most (docs/download.md). A page is capped in simple.py (MAX_PAGE), a wheel's
# download in command.py (MAX_WHEEL).
MAX_UNPACKED = 16 * 1024**3  #: bytes one wheel's package folder may unpack to
MAX_RATIO = 100  #: ... and at most this many times the wheel's own size (a zip bomb is refused)
MAX_MEMBERS = 10_000  #: files in one wheel
MAX_PROVENANCE = 64 * 1024  #: bytes of the provenance file (kernel_factory.json)
MAX_RECORD = 8 * 1024 * 1024  #: bytes of the wheel's RECORD
MAX_METADATA = 32 * 1024 * 1024  #: bytes of an older wheel's metadata.json, read for its digest (verify.metadata's cap)
MAX_NAME_PART = 255  #: bytes (UTF-8) of one part of a member's path: a file system's NAME_MAX
MAX_NAME = 1024  #: bytes (UTF-8) of a member's whole path


def unpack(wheel: Path, into: Path) -> tuple[dict[str, Any], Path, dict[str, str]]:
    """(provenance, the build variant folder unpacked into ``into``, its files: path -> sha256 hex) of a kernel
    wheel, every file checked against the wheel's RECORD as it is written. The files below the wheel's variant root
    (wheel/layout.py) go to their places in the variant folder; an older wheel's package folder is mapped by its
    digest, or refused where a file the digest lists is not in it."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            return _unpack_zip(zf, wheel.name, wheel.stat().st_size, into)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError, zlib.error) as exc:
        raise Refused(f"{wheel.name} is not a readable zip file ({printable(str(exc), 200)}); republish the wheel"
                      ) from None


def _key(path: str) -> str:
    """One path as a case-insensitive, Unicode-normalising file system (APFS, NTFS, vfat) compares it: canonical
    caseless matching (Unicode 15, D145: NFD, casefold, NFD)."""
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", path).casefold())


def check_names(members: list[zipfile.ZipInfo], wheel: str) -> None:
    """Refused unless the members can be unpacked one by one as a file system sees them: no name twice, none a
    file where another puts a folder, none that a case-insensitive or Unicode-normalising file system takes for
    another (``A.py``/``a.py``, NFC/NFD ``é``), no part longer than ``MAX_NAME_PART`` bytes (nor the name longer
    than ``MAX_NAME``), none encrypted."""
    files: dict[str, str] = {}  # key -> the member that is that file
    folders: dict[str, str] = {}  # key -> the first member inside that folder
    for info in members:
        shown = printable(info.filename, 200)
        encoded = info.filename.encode("utf-8", "surrogateescape")  # "/" is one byte, never inside another's
        if len(encoded) > MAX_NAME or any(len(p) > MAX_NAME_PART for p in encoded.split(b"/")):
            raise Refused(f"{wheel}: member '{shown}' has a name longer than a file system takes ({MAX_NAME_PART} "
                          f"bytes a part, {MAX_NAME} in all); nothing was installed: rebuild the wheel")
        if info.flag_bits & 0x1:
            raise Refused(f"{wheel}: member '{shown}' is encrypted; nothing was installed: rebuild the wheel")
        key = _key(info.filename)
        same = files.get(key) if key in files else folders.get(key)
        if same is not None:
            why = (f"member '{shown}' appears twice" if same == info.filename else
                   f"member '{shown}' is a file where '{printable(same, 200)}' needs a folder" if key in folders else
                   f"members '{shown}' and '{printable(same, 200)}' are one file on a case-insensitive or "
                   "Unicode-normalising file system")
            raise Refused(f"{wheel}: {why}; nothing was installed: rebuild the wheel")
        files[key] = info.filename
        parts = info.filename.split("/")
        for end in range(1, len(parts)):
            spelt = "/".join(parts[:end])
            folder = _key(spelt)
            if folder in files:
                raise Refused(f"{wheel}: member '{shown}' needs a folder where '{printable(files[folder], 200)}' "
                              "is a file; nothing was installed: rebuild the wheel")
            other = folders.setdefault(folder, info.filename)
            if not other.startswith(spelt + "/"):
                raise Refused(f"{wheel}: members '{shown}' and '{printable(other, 200)}' are in one folder on a "
                              "case-insensitive or Unicode-normalising file system, in two here; nothing was "
                              "installed: rebuild the wheel")


def _unpack_zip(zf: zipfile.ZipFile, name: str, wheel_size: int, into: Path
                ) -> tuple[dict[str, Any], Path, dict[str, str]]:
    try:
        prov = json.loads(recordfile.provenance(zf, name, MAX_MEMBERS, MAX_PROVENANCE, "rebuild the wheel"))
    except (ValueError, RecursionError):
        raise Refused(f"{name}: its {PROVENANCE} is not valid JSON; rebuild it") from None
    try:
        root = layout.root_of(prov) if isinstance(prov, dict) else None
    except layout.NotMappable as exc:
        raise Refused(f"{name}: {printable(str(exc), 300)}") from None
    if root is None:
        raise Refused(f"{name}: its {PROVENANCE} names no package; rebuild it with kernel-factory")
    members = [i for i in zf.infolist() if not i.is_dir() and i.filename.startswith(root + "/")]
    check_names(members, name)
    total = sum(i.file_size for i in members)
    limit = min(MAX_UNPACKED, max(MAX_RATIO * wheel_size, 1 << 20))  # 1 MiB at least, however small the wheel
    if total > limit:
        raise Refused(f"{name}: its files inflate to {total} bytes, more than the {limit} allowed for a wheel of "
                      f"{wheel_size} bytes (a zip bomb?); nothing was installed: rebuild the wheel")
    record = recordfile.read_sha256(zf, name, MAX_RECORD, "rebuild it with kernel-factory")
    meta_name = f"{root}/metadata.json"
    older = layout.recorded_root(prov) is None and meta_name in {i.filename for i in members}
    metadata = read_capped(zf, meta_name, MAX_METADATA, name, "rebuild the wheel") if older else None
    try:
        mapped = layout.member_map(prov, [i.filename for i in members], metadata)
    except layout.NotMappable as exc:
        raise Refused(f"{name}: {printable(str(exc), 300)}; nothing was installed") from None
    folder = into / "build"
    files: dict[str, str] = {}
    for info in members:
        rel = mapped[info.filename]
        parts = rel.split("/")
        if "\\" in rel or any(p in ("", ".", "..") for p in parts):
            raise Refused(f"{name}: member '{printable(info.filename)}' is not a plain relative path")
        if has_control(rel):
            raise Refused(f"{name}: member '{printable(info.filename)}' has a control character in its name; "
                          "nothing was installed: rebuild the wheel")
        if left_out_path(rel):
            raise Refused(f"{name}: member '{printable(info.filename)}' is bytecode, which a kernel wheel never "
                          "carries (kernels loads the sources); nothing was installed: rebuild the wheel")
        expected = record.get(info.filename)
        if expected is None:
            raise Refused(f"{name}: '{printable(info.filename)}' is not in its RECORD; rebuild the wheel")
        target = folder.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(info) as src, open(target, "xb") as dst:
            got = stream_digest(src, out=dst)
        if got != expected:
            raise Refused(f"{name}: '{printable(info.filename)}' does not match its RECORD sha256; nothing was "
                          "installed: republish the wheel")
        if (info.external_attr >> 16) & 0o111:
            target.chmod(0o755)
        files[rel] = expected
    if "metadata.json" not in files:
        raise Refused(f"{name}: its variant folder {root} holds no metadata.json, which kernels loads; rebuild it")
    return prov, folder, files


def _is_binary(path: Path) -> bool:
    with open(path, "rb") as f:
        return b"\0" in f.read(8000)  # git's own test for a binary file, which the Hub keeps in Git LFS


def check_lock_hash(hashes: dict[str, str], repo_id: str, variant: str, package: str, folder: Path,
                    files: dict[str, str], wheel: str) -> None:
    """Refused unless the files match the old-format kernels.lock's ``git_lfs_concat`` hash of ``variant``.

    The hash is over the Hub's paths (build/<variant>/...): the wheel's package folder is that folder (a flat
    build) or the package folder inside it, with metadata.json beside it (a nested build). Which files the Hub
    kept in Git LFS is not in the wheel: none, or the binary ones (the Hub's rule)."""
    if not hashes:
        return
    expected = hashes.get(variant)
    if expected is None:
        raise Refused(f"{wheel}: kernels.lock locks {repo_id} for {', '.join(sorted(hashes))}, not "
                      f"{printable(variant)}; re-lock with `kernels lock`, or build that variant")
    binary = {rel for rel in files if _is_binary(folder / rel)}
    for nested in (False, True):  # the Hub's path of each file
        hub = {rel: f"{package}/{rel}" if nested and rel not in TOP_META else rel for rel in files}
        for lfs_paths in (set(), {hub[rel] for rel in binary}):
            if files_lock_hash([(hub[rel], folder / rel) for rel in files], lfs_paths) == expected:
                return
    raise Refused(f"{wheel}: its files do not match the kernels.lock hash of {repo_id} {variant} "
                  f"({expected[:19]}...); nothing was installed: check the index, or re-lock with `kernels lock` "
                  "(docs/download.md)")
