"""Which wheel member is which file of the Hub's ``build/<variant>/`` folder.

A wheel whose provenance names a variant root (``VARIANT_ROOT``) carries the variant folder byte for byte under
that folder. Older wheels carry the package folder: a flat build's files sit in it as they sat in the variant
folder (a re-exporting compat subfolder left out), a nested build's ``<package>/`` is the package folder itself;
both keep ``metadata.json`` (and its ``.sigstore`` bundle) inside the package. Which of the two a build was is
read from metadata.json's digest: a nested build's names ``<package>/__init__.py`` and no top-level one (a wheel
without a digest is taken for a flat build).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import Refused
from ..safe_text import has_control, printable

VARIANT_ROOT = "variant-root"  #: the provenance key naming the wheel folder that is the variant folder
TOP_META = ("metadata.json", "metadata.json.sigstore")  # beside the package on the Hub


def plain_rel(rel: str) -> bool:
    """Whether ``rel`` is a plain relative path (no empty, '.' or '..' part, no backslash or control character)."""
    parts = rel.split("/")
    return bool(rel) and "\\" not in rel and not has_control(rel) and all(p not in ("", ".", "..") for p in parts)


def variant_members(provenance: Mapping[str, Any], names: Iterable[str], read: Callable[[str], bytes],
                    wheel: str) -> dict[str, str]:
    """member name -> path inside ``build/<variant>/`` for every file the wheel carries of the variant folder.

    ``read`` gives a (small) member's bytes: metadata.json's, for an old wheel's layout. Refused where the
    provenance names no root or package, or a member's path is not a plain relative path."""
    files = [n for n in names if not n.endswith("/")]
    root = provenance.get(VARIANT_ROOT)
    if root is not None:
        if not isinstance(root, str) or not plain_rel(root.rstrip("/")):
            raise Refused(f"{wheel}: its provenance names variant root {printable(str(root), 200)!r}, not a "
                          "folder of the wheel; rebuild it")
        prefix = root.rstrip("/") + "/"
        found = {n: n[len(prefix):] for n in files if n.startswith(prefix)}
    else:
        package = provenance.get("package")
        if not isinstance(package, str) or not package.isidentifier():
            raise Refused(f"{wheel}: its provenance names no package; rebuild it with kernel-factory")
        prefix = package + "/"
        inside = {n: n[len(prefix):] for n in files if n.startswith(prefix)}
        meta = prefix + "metadata.json"
        nested = meta in inside and _digest_names_package(read(meta), package)
        found = {n: (rel if not nested or rel in TOP_META else prefix + rel) for n, rel in inside.items()}
    for name, rel in found.items():
        if not plain_rel(rel):
            raise Refused(f"{wheel}: member '{printable(name, 200)}' is not a plain relative path; rebuild it")
    if "metadata.json" not in found.values():
        raise Refused(f"{wheel}: its variant folder holds no metadata.json, which kernels loads; rebuild it")
    return found


def _digest_names_package(data: bytes, package: str) -> bool:
    """Whether metadata.json's digest names ``<package>/__init__.py`` and no top-level ``__init__.py`` (a nested
    build; a flat build's digest names its top-level ``__init__.py``, and its compat subfolder's)."""
    try:
        meta = json.loads(data)
    except (ValueError, RecursionError):
        return False
    digest = meta.get("digest") if isinstance(meta, dict) else None
    files = digest.get("files") if isinstance(digest, dict) else None
    return isinstance(files, dict) and "__init__.py" not in files and f"{package}/__init__.py" in files
