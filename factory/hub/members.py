"""Which wheel member is which file of the Hub's ``build/<variant>/`` folder: wheel/layout.py's ``member_map`` (the
variant root the provenance names; for an older wheel, its package folder mapped as metadata.json's digest says),
with the paths checked here before anything is served from them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import Refused
from ..safe_text import has_control, printable
from ..wheel.layout import NotMappable, member_map, root_of


def plain_rel(rel: str) -> bool:
    """Whether ``rel`` is a plain relative path (no empty, '.' or '..' part, no backslash or control character)."""
    parts = rel.split("/")
    return bool(rel) and "\\" not in rel and not has_control(rel) and all(p not in ("", ".", "..") for p in parts)


def variant_members(provenance: Mapping[str, Any], names: Iterable[str], read: Callable[[str], bytes],
                    wheel: str) -> dict[str, str]:
    """member name -> path inside ``build/<variant>/`` for every file the wheel carries of the variant folder.

    ``read`` gives a (small) member's bytes: ``<root>/metadata.json``'s, which an older wheel's mapping reads.
    Refused where the wheel cannot be mapped (a file of the variant's digest left out, no root), or a path is not
    a plain relative path, or there is no metadata.json."""
    names = list(names)
    try:
        root = root_of(provenance)
        meta = f"{root}/metadata.json"
        found = member_map(provenance, names, read(meta) if root is not None and meta in names else None)
    except NotMappable as exc:
        raise Refused(f"{wheel}: {exc}") from None
    for name, rel in found.items():
        if not plain_rel(rel):
            raise Refused(f"{wheel}: member '{printable(name, 200)}' is not a plain relative path; rebuild it")
    if "metadata.json" not in found.values():
        raise Refused(f"{wheel}: its variant folder holds no metadata.json, which kernels loads; rebuild it")
    return found
