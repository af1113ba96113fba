"""What the pages for a person show: a project's versions with a variant matrix each, a summary per project, and
the landing page's selector (torch version x backend x arch -> the builds that fit, with their commands: rows the
page embeds as JSON, which index_templates/selector.js filters, the same answer ``kernel-factory which`` gives)."""

from __future__ import annotations

import re
import shlex
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple
from urllib.parse import quote

from packaging.utils import canonicalize_name

from ..record import HUB_URL, Record, version_key

_BACKEND_ORDER = ("cuda", "rocm", "xpu", "cann", "neuron", "tpu", "npu", "cpu", "metal", "universal")
_FRAMEWORK_ORDER = ("torch", "torch-stable-abi", "tvm-ffi", "torch-noarch")


class Entry(NamedTuple):
    """One wheel in a matrix cell."""

    label: str | None
    platform: str  # "x86_64-linux" or "any"
    archs: str
    filename: str
    href: str
    pin_cmd: str
    variant_cmd: str
    yanked: bool


class Row(NamedTuple):
    title: str
    cells: tuple[tuple[Entry, ...], ...]


class VersionView(NamedTuple):
    version: str
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    archs: tuple[str, ...]
    wheels: int


class KernelView(NamedTuple):
    name: str
    project: str
    summary: str
    license: str | None
    upstream: str | None  # only http(s) links
    repo_id: str | None
    hub_url: str | None
    import_name: str | None
    versions: tuple[VersionView, ...]


class AdoptedView(NamedTuple):
    name: str
    project: str
    summary: str
    versions: tuple[str, ...]
    pin_cmd: str


_PLAIN = re.compile(r"[A-Za-z0-9._+-]+")


def quoted(filename: str) -> str:
    """``quote(filename)``; the usual wheel name only has its ``+`` written ``%2B``."""
    return filename.replace("+", "%2B") if _PLAIN.fullmatch(filename) else quote(filename)

FILES_HREF = "../../files/"  # from projects/<name>/index.html


def _rank(order: Sequence[str], value: str | None) -> int:
    return order.index(value) if value in order else len(order)


def _row_key(r: Record) -> tuple[str | None, str | None]:
    return (r.framework, r.framework_version)


def _newest_first(keys: Iterable[tuple[str | None, str | None]]) -> list[tuple[str | None, str | None]]:
    return sorted(keys, key=lambda k: version_key(k[1]), reverse=True)  # stable: ties keep their order


def _row_title(key: tuple[str | None, str | None]) -> str:
    framework, version = key
    if framework == "torch":
        return f"torch {version}"
    if framework == "torch-stable-abi":
        return f"torch ≥ {version} (stable ABI)"
    if framework == "torch-noarch" or framework is None:
        return "any torch (noarch)"
    return f"{framework} {version or ''}".strip()


def _col_key(r: Record) -> tuple[str | None, str | None]:
    return (r.backend or ("universal" if r.label is None else None), r.backend_version)


def _commands(project: str, record: Record, base_url: str) -> tuple[str, str]:
    pin = shlex.join(["pip", "install", f"{project}=={record.version}", "--index-url", f"{base_url}/simple"])
    if "+" in record.version and not record.label:  # a label that names no variant: only in the combined index
        return pin, pin
    root = f"{base_url}/variants/{record.label}/simple" if record.label else f"{base_url}/simple"
    return pin, shlex.join(["pip", "install", project, "--index-url", root])


def _version_view(project: str, version: str, recs: list[Record], base_url: str) -> VersionView:
    # rows: by framework's rank, version (newest first), framework; columns: by backend's rank, backend, version
    rows = sorted(_newest_first(sorted({_row_key(r) for r in recs}, key=lambda k: k[0] or "")),
                  key=lambda k: _rank(_FRAMEWORK_ORDER, k[0]))
    cols = sorted(_newest_first({_col_key(r) for r in recs}), key=lambda k: (_rank(_BACKEND_ORDER, k[0]), k[0] or ""))
    cells: dict[tuple[Any, Any], list[Entry]] = defaultdict(list)
    for r in sorted(recs, key=lambda r: (r.os or "", r.arch or "", r.label or "", r.filename)):
        pin, var = _commands(project, r, base_url)
        platform = f"{r.arch}-{r.os}" if r.os and r.arch else "any"
        cells[(_row_key(r), _col_key(r))].append(Entry(r.label, platform, " ".join(r.archs), r.filename,
                                                        FILES_HREF + quoted(r.filename), pin, var, bool(r.yanked)))
    view_rows = tuple(Row(_row_title(k), tuple(tuple(cells.get((k, c), ())) for c in cols)) for k in rows)
    archs = sorted({a for r in recs for a in r.archs}, key=version_key)
    titles = tuple(f"{backend or 'other'} {v}" if v else (backend or "other") for backend, v in cols)
    return VersionView(version, titles, view_rows, tuple(archs), len(recs))


def _kernel_view(project: str, recs: Sequence[Record], base_url: str) -> KernelView:
    by_version: dict[str, list[Record]] = defaultdict(list)
    for r in recs:
        by_version[r.public_version].append(r)
    order = sorted(by_version, key=version_key, reverse=True)
    latest = max(by_version[order[0]], key=lambda r: r.filename)
    hub_url = HUB_URL + quote(latest.repo_id) if latest.repo_id else None
    link = latest.upstream  # only http(s) URLs become links (no javascript: or data: schemes)
    upstream = link if link and link.lower().startswith(("https://", "http://")) else None
    return KernelView(latest.name, project, latest.summary, latest.license, upstream,
                      latest.repo_id, hub_url, latest.import_name,
                      tuple(_version_view(project, v, by_version[v], base_url) for v in order))


def _adopted_view(project: str, recs: Sequence[Record], base_url: str) -> AdoptedView:
    versions = sorted({r.version for r in recs}, key=version_key, reverse=True)
    latest = max(recs, key=lambda r: (version_key(r.version), r.filename))
    pin = shlex.join(["pip", "install", f"{project}=={versions[0]}", "--index-url", f"{base_url}/simple"])
    return AdoptedView(latest.name, project, latest.summary, tuple(versions), pin)


def project_context(project: str, recs: Sequence[Record], base_url: str) -> dict[str, Any]:
    """Everything kernel.html shows for one project: a kernel (any built wheel), else an adopted project."""
    kernel = any(r.kind == "kernel" for r in recs)
    return {
        "base_url": base_url,
        "kernel": _kernel_view(project, recs, base_url) if kernel else None,
        "adopted": None if kernel else _adopted_view(project, recs, base_url),
        "labels": sorted({r.label for r in recs if r.label}),
        "wheels": len(recs),
        "selector": selector_rows(recs, base_url),
    }


def project_summary(project: str, records: Sequence[Record]) -> dict[str, object]:
    """One project's line on the landing page (plain values: the index state keeps it)."""
    latest = max(records, key=lambda r: (version_key(r.public_version), r.filename))
    return {
        "project": project,
        "name": latest.name,
        "kind": "kernel" if any(r.kind == "kernel" for r in records) else "adopted",
        "version": latest.public_version,
        "summary": latest.summary,
        "wheels": len(records),
        "variants": len({r.label for r in records if r.label}),
    }


def selector_rows(records: Sequence[Record], base_url: str) -> list[dict[str, Any]]:
    """One row per (kernel, label, platform) of the torch builds: what the selector filters and shows."""
    seen: dict[tuple[str, str, str], tuple[Record, set[str]]] = {}
    for r in records:
        if r.kind != "kernel" or not r.label or r.framework != "torch" or not (r.arch and r.os):
            continue
        key = (str(canonicalize_name(r.name)), r.label, f"{r.arch}-{r.os}")
        seen.setdefault(key, (r, set()))[1].add(r.public_version)
    rows = []
    for (project, label, platform), (r, versions) in sorted(seen.items()):
        root = f"{base_url}/variants/{label}/simple"
        backend = f"{r.backend} {r.backend_version}" if r.backend_version else str(r.backend)
        rows.append({
            "kernel": r.name, "project": project, "label": label, "platform": platform, "torch": r.framework_version,
            "backend": backend, "arch": platform, "version": max(versions, key=version_key),
            "pip": shlex.join(["pip", "install", project, "--index-url", root]),
            "uv": shlex.join(["uv", "pip", "install", project, "--index-url", root]),
        })  # fmt: skip
    return rows
