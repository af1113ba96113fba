"""kernels' python-depends table: what a name in metadata.json's ``python-depends`` means as pip requirements.

``factory/verify/python_depends.json`` is a byte-identical copy of kernels 0.19.1's
``kernels/_internals/python_depends.json`` (sha256 below; the same bytes ship in kernels 0.17.2 and 0.18.3 as
``kernels/python_depends.json``). kernels keeps the table in a private module and the kernels-data package
does not carry it, so the factory ships its copy as package data and reads no file of the installed kernels:
the wheels it writes do not depend on which kernels sits beside it. tests/unit/test_pydepends.py compares the
copy with the installed kernels' table when that is the version named here; docs/architecture.md says how to
refresh it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from typing import Any

SOURCE = "kernels 0.19.1, kernels/_internals/python_depends.json"
SHA256 = "3e412c32521bdcc6bd3379e2dfc7c3cf45c725419580d8852760183a6612a914"


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    """The parsed table: ``{"general": {name: info}, "backends": {backend: {name: info}}}``."""
    data = json.loads(resources.files(__package__).joinpath("python_depends.json").read_bytes())
    assert isinstance(data, dict)
    return data


def packages(names: Iterable[str], backend: str) -> list[str]:
    """pip requirements for python-depends ``names`` on ``backend``: a name the table knows gives its
    packages (``tvm-ffi`` -> ``apache-tvm-ffi``); any other name is kept as it is, a requirement itself."""
    general: dict[str, Any] = table().get("general", {})
    backend_table: dict[str, Any] = table().get("backends", {}).get(backend, {})
    reqs: list[str] = []
    for dep in names:
        info = general.get(dep) or backend_table.get(dep)
        if isinstance(info, dict):
            found = info.get("python", [])
            reqs.extend(str(p["pkg"]) for p in found if isinstance(p, dict) and "pkg" in p)
        else:
            reqs.append(dep)
    return reqs
