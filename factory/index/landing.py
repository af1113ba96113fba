"""The landing page's view of the records: kernels, versions, and a variant matrix per version."""

from __future__ import annotations

import shlex
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from packaging.utils import canonicalize_name
from packaging.version import Version

from ..record import HUB_URL, Record
from ..versions import sort_key
from .selector import selector_rows

_BACKEND_ORDER = ("cuda", "rocm", "xpu", "cann", "neuron", "tpu", "npu", "cpu", "metal", "universal")
_FRAMEWORK_ORDER = ("torch", "torch-stable-abi", "tvm-ffi", "torch-noarch")


@dataclass(frozen=True)
class Entry:
    """One wheel in a matrix cell."""

    label: str | None
    platform: str  # "x86_64-linux" or "any"
    archs: str
    filename: str
    href: str
    pin_cmd: str
    variant_cmd: str
    yanked: bool


@dataclass(frozen=True)
class Row:
    title: str
    cells: tuple[tuple[Entry, ...], ...]


@dataclass(frozen=True)
class VersionView:
    version: str
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    archs: tuple[str, ...]
    wheels: int


@dataclass(frozen=True)
class KernelView:
    name: str
    project: str
    summary: str
    license: str | None
    upstream: str | None  # only http(s) links
    repo_id: str | None
    hub_url: str | None
    import_name: str | None
    versions: tuple[VersionView, ...]


@dataclass(frozen=True)
class AdoptedView:
    name: str
    project: str
    summary: str
    versions: tuple[str, ...]
    pin_cmd: str



def _rank(order: Sequence[str], value: str | None) -> int:
    return order.index(value) if value in order else len(order)


def _row_key(r: Record) -> tuple[str | None, str | None]:
    return (r.framework, r.framework_version)


def _row_sort(key: tuple[str | None, str | None]) -> tuple[int, Any, str]:
    framework, version = key
    v = sort_key(version)
    return (_rank(_FRAMEWORK_ORDER, framework), (-v[0], _Neg(v[1])), framework or "")


class _Neg:
    """Reverses the order of a version (newest first)."""

    def __init__(self, value: Version | str) -> None:
        self.value = value

    def __lt__(self, other: _Neg) -> bool:
        return bool(other.value < self.value)  # type: ignore[operator]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Neg) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


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


def _col_sort(key: tuple[str | None, str | None]) -> tuple[int, str, Any]:
    backend, version = key
    v = sort_key(version)
    return (_rank(_BACKEND_ORDER, backend), backend or "", (-v[0], _Neg(v[1])))


def _col_title(key: tuple[str | None, str | None]) -> str:
    backend, version = key
    return f"{backend or 'other'} {version}" if version else (backend or "other")


def safe_link(url: str | None) -> str | None:
    """Only http(s) URLs become links (no javascript: or data: schemes)."""
    if url and url.lower().startswith(("https://", "http://")):
        return url
    return None


def command(*parts: str) -> str:
    """A shell command with each part quoted (``shlex.quote``): nothing from a record can add a word to it."""
    return " ".join(shlex.quote(p) for p in parts)


def _commands(project: str, record: Record, base_url: str) -> tuple[str, str]:
    pin = command("pip", "install", f"{project}=={record.version}", "--index-url", f"{base_url}/simple")
    if record.label:
        return pin, command("pip", "install", project, "--index-url", f"{base_url}/variants/{record.label}/simple")
    if "+" in record.version:  # a label that names no variant: only in the combined index, so pin it
        return pin, pin
    return pin, command("pip", "install", project, "--index-url", f"{base_url}/simple")


def _version_view(project: str, version: str, recs: list[Record], base_url: str) -> VersionView:
    rows = sorted({_row_key(r) for r in recs}, key=_row_sort)
    cols = sorted({_col_key(r) for r in recs}, key=_col_sort)
    cells: dict[tuple[Any, Any], list[Entry]] = defaultdict(list)
    for r in sorted(recs, key=lambda r: (r.os or "", r.arch or "", r.label or "", r.filename)):
        pin, var = _commands(project, r, base_url)
        entry = Entry(
            label=r.label,
            platform=f"{r.arch}-{r.os}" if r.os and r.arch else "any",
            archs=" ".join(r.archs),
            filename=r.filename,
            href="./files/" + quote(r.filename),
            pin_cmd=pin,
            variant_cmd=var,
            yanked=bool(r.yanked),
        )
        cells[(_row_key(r), _col_key(r))].append(entry)
    view_rows = tuple(Row(_row_title(k), tuple(tuple(cells.get((k, c), ())) for c in cols)) for k in rows)
    archs = sorted({a for r in recs for a in r.archs}, key=sort_key)
    return VersionView(version, tuple(_col_title(c) for c in cols), view_rows, tuple(archs), len(recs))


def _kernel_view(project: str, recs: list[Record], base_url: str) -> KernelView:
    by_version: dict[str, list[Record]] = defaultdict(list)
    for r in recs:
        by_version[r.kernel_version or r.version.split("+")[0]].append(r)
    order = sorted(by_version, key=sort_key, reverse=True)
    latest = max(by_version[order[0]], key=lambda r: r.filename)
    return KernelView(
        name=latest.name,
        project=project,
        summary=latest.summary,
        license=latest.license,
        upstream=safe_link(latest.upstream),
        repo_id=latest.repo_id,
        hub_url=HUB_URL + quote(latest.repo_id) if latest.repo_id else None,
        import_name=latest.import_name,
        versions=tuple(_version_view(project, v, by_version[v], base_url) for v in order),
    )


def _adopted_view(project: str, recs: list[Record], base_url: str) -> AdoptedView:
    versions = sorted({r.version for r in recs}, key=sort_key, reverse=True)
    latest = max(recs, key=lambda r: (sort_key(r.version), r.filename))
    pin = command("pip", "install", f"{project}=={versions[0]}", "--index-url", f"{base_url}/simple")
    return AdoptedView(latest.name, project, latest.summary, tuple(versions), pin)


def landing_context(records: Sequence[Record], base_url: str) -> dict[str, Any]:
    """Everything landing.html shows."""
    kernels: dict[str, list[Record]] = defaultdict(list)
    adopted: dict[str, list[Record]] = defaultdict(list)
    built = {canonicalize_name(r.name) for r in records if r.kind == "kernel"}
    for r in records:  # adopted wheels of a kernel's project (allowed with --allow-kernel-names) show with it
        project = canonicalize_name(r.name)
        (kernels if project in built else adopted)[project].append(r)
    labels = sorted({r.label for r in records if r.label})
    return {
        "base_url": base_url,
        "kernels": [_kernel_view(p, kernels[p], base_url) for p in sorted(kernels)],
        "adopted": [_adopted_view(p, adopted[p], base_url) for p in sorted(adopted)],
        "labels": labels,
        "wheels": len(records),
        "selector": selector_rows(records, base_url),
    }
