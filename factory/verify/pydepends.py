"""kernels' python-depends table: what a name in metadata.json's ``python-depends`` means as pip requirements.

``python_depends.json`` is a byte copy of the table named by ``SOURCE`` (private in kernels, absent from
kernels-data), shipped as package data so the wheels written do not depend on the kernels installed beside the
factory. docs/architecture.md says how to refresh it."""

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
