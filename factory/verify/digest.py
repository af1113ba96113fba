"""metadata.json's digest, computed as the kernels project computes it: the variant folder walked following
symlinks, files only, without the top-level ``TOP_META`` and what ``left_out`` names; key = the path relative to
the folder with '/', value = standard padded base64 of the raw hash."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import BadKernel, DigestMismatch
from ..nofollow import file_digest

ALGORITHMS = ("sha256", "sha512")
TOP_META = ("metadata.json", "metadata.json.sigstore")  # beside the package on the Hub, never in the digest


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def left_out(name: str, is_dir: bool) -> bool:
    """What kernels' hashes leave out of a variant folder at any depth: ``__pycache__`` folders, ``*.pyc`` files.
    The one rule for the walks here and in kernels.lock's hash, and for the files a wheel takes (wheel/convert.py)."""
    return name == "__pycache__" if is_dir else name.endswith(".pyc")


def left_out_path(rel: str) -> bool:
    """``left_out`` for a relative path (with '/'), as a wheel's members and RECORD rows name files: a part that is
    ``__pycache__``, or a name ending in ``.pyc``."""
    return "__pycache__" in rel.split("/") or rel.endswith(".pyc")


def walk(root: Path) -> list[str]:
    """The files of a variant folder that its hashes cover (metadata.json included), relative with '/', sorted."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        rel_dir = Path(dirpath).relative_to(root)
        dirnames[:] = sorted(d for d in dirnames if not left_out(d, True))
        for name in filenames:
            if not left_out(name, False) and os.path.isfile(os.path.join(dirpath, name)):
                found.append((rel_dir / name).as_posix())
    return sorted(found)


def _digested(root: Path) -> list[str]:
    return [rel for rel in walk(root) if rel not in TOP_META]


def compute(root: Path, algorithm: str = "sha256") -> dict[str, str]:
    if algorithm not in ALGORITHMS:
        raise BadKernel(f"digest algorithm {algorithm!r} is not one of {', '.join(ALGORITHMS)}")
    return {rel: b64(bytes.fromhex(file_digest(root / rel, algorithm))) for rel in _digested(root)}


class Check:
    """metadata.json's ``digest``: the names compared first (no file read), then each file's hash where it is
    read anyway (while its wheel entry is written), so a file is read and hashed once."""

    def __init__(self, digest: Mapping[str, object], names: Iterable[str], where: str) -> None:
        algorithm = digest.get("algorithm")
        files = digest.get("files")
        if not isinstance(algorithm, str) or not isinstance(files, dict):
            raise BadKernel(f"{where}: metadata.json digest must have 'algorithm' and 'files'; rebuild the kernel")
        if algorithm not in ALGORITHMS:
            raise BadKernel(f"{where}: digest algorithm {algorithm!r} is not one of {', '.join(ALGORITHMS)}")
        self.algorithm, self.where = algorithm, where
        self.expected: dict[str, object] = dict(files)
        present = set(names)
        missing = sorted(set(files) - present)
        if missing:
            raise DigestMismatch(f"{where}: file {missing[0]!r} listed in metadata.json digest is missing")
        extra = sorted(present - set(files))
        if extra:
            raise DigestMismatch(f"{where}: file {extra[0]!r} is not listed in metadata.json digest")
        self.unchecked = set(files)

    def check(self, rel: str, raw: bytes) -> None:
        """``raw``: the file's hash with ``self.algorithm``."""
        if b64(raw) != self.expected[rel]:
            raise DigestMismatch(f"{self.where}: file {rel!r} does not match its metadata.json digest "
                                 f"({self.algorithm})")
        self.unchecked.discard(rel)

    def check_file(self, rel: str, path: Path) -> None:
        self.check(rel, bytes.fromhex(file_digest(path, self.algorithm)))


def verify(root: Path, digest: Mapping[str, object], where: str) -> None:
    """Check the folder against metadata.json's ``digest``; DigestMismatch names the first bad file."""
    check = Check(digest, _digested(root), where)
    for rel in sorted(check.expected):
        check.check_file(rel, root / rel)
