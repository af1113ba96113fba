"""The landing page's selector: torch version x backend x arch -> the builds that fit, with their commands.

The page embeds these rows as JSON (``<script type="application/json">``, written
with jinja's ``tojson``) and index_templates/selector.js filters the variant
matrix and shows the commands, the same answer ``kernel-factory which`` gives.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from packaging.utils import canonicalize_name

from ..record import Record, version_key


def _backend(r: Record) -> str:
    return f"{r.backend} {r.backend_version}" if r.backend_version else str(r.backend)


def _newest(versions: set[str]) -> str:
    return max(versions, key=version_key)


def selector_rows(records: Sequence[Record], base_url: str) -> list[dict[str, Any]]:
    """One row per (kernel, label, platform) of the torch builds: what the selector filters and shows."""
    seen: dict[tuple[str, str, str], tuple[Record, set[str]]] = {}
    for r in records:
        if r.kind != "kernel" or not r.label or r.framework != "torch" or not (r.arch and r.os):
            continue
        key = (str(canonicalize_name(r.name)), r.label, f"{r.arch}-{r.os}")
        seen.setdefault(key, (r, set()))[1].add(r.kernel_version or r.version.split("+")[0])
    rows = []
    for (project, label, platform), (r, versions) in sorted(seen.items()):
        root = f"{base_url}/variants/{label}/simple"
        rows.append({
            "kernel": r.name, "project": project, "label": label, "platform": platform,
            "torch": r.framework_version, "backend": _backend(r), "arch": platform, "version": _newest(versions),
            "pip": shlex.join(["pip", "install", project, "--index-url", root]),
            "uv": shlex.join(["uv", "pip", "install", project, "--index-url", root]),
        })  # fmt: skip
    return rows
