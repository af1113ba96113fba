"""Small synthetic wheels and records, for the index's tests, benchmark and demos.

The wheels are pure Python and installable (``<pkg>/__init__.py``, METADATA,
WHEEL, RECORD); the records describe them as kernel builds of the given
variants. Nothing here opens the network or runs a process.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import zipfile
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from kernel_factory.nofollow import write_bytes
from kernel_factory.record import Record
from kernel_factory.store.adopt import AdoptResult, adopt_wheels
from kernel_factory.store.local import LocalStore
from kernel_factory.variants import parse
from packaging.utils import canonicalize_name

UPLOAD_TIME = "2026-01-02T03:04:05Z"
_ZIP_DATE = (2026, 1, 2, 3, 4, 6)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def metadata_bytes(
    name: str, version: str, summary: str = "", requires_python: str | None = None, requires_dist: Sequence[str] = ()
) -> bytes:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if summary:
        lines.append(f"Summary: {summary}")
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    lines += [f"Requires-Dist: {req}" for req in requires_dist]
    return ("\n".join(lines) + "\n\n").encode()


def make_wheel(
    folder: Path,
    name: str,
    version: str,
    tag: str = "py3-none-any",
    *,
    summary: str = "",
    requires_python: str | None = None,
    requires_dist: Sequence[str] = (),
) -> tuple[Path, bytes]:
    """Write an installable wheel into ``folder``; (its path, its METADATA bytes)."""
    dist = canonicalize_name(name).replace("-", "_")
    filename = f"{dist}-{version}-{tag}.whl"
    info = f"{dist}-{version}.dist-info"
    meta = metadata_bytes(name, version, summary, requires_python, requires_dist)
    wheel_txt = f"Wheel-Version: 1.0\nGenerator: kernel-factory-synth\nRoot-Is-Purelib: true\nTag: {tag}\n\n".encode()
    entries = [
        (f"{dist}/__init__.py", f'__version__ = "{version}"\n'.encode()),
        (f"{info}/METADATA", meta),
        (f"{info}/WHEEL", wheel_txt),
    ]
    record = "".join(f"{n},sha256={_b64(d)},{len(d)}\n" for n, d in entries) + f"{info}/RECORD,,\n"
    entries.append((f"{info}/RECORD", record.encode()))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / filename
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in entries:
            zf.writestr(zipfile.ZipInfo(n, _ZIP_DATE), d)
    return path, meta


def kernel_record(
    wheel: Path,
    metadata: bytes,
    name: str,
    kernel_version: str,
    variant: str,
    *,
    repo_id: str | None = None,
    summary: str = "",
    requires_python: str | None = None,
    archs: Sequence[str] = (),
    license: str | None = "Apache-2.0",
    upstream: str | None = None,
    upload_time: str = UPLOAD_TIME,
) -> Record:
    """A kernel record for ``wheel`` as if built from ``variant`` (a kernels build-variant name)."""
    target = parse(variant)
    data = wheel.read_bytes()
    return Record(
        filename=wheel.name,
        name=name,
        version=target.local_version(kernel_version),
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        metadata_sha256=hashlib.sha256(metadata).hexdigest(),
        requires_python=requires_python,
        upload_time=upload_time,
        summary=summary,
        kind="kernel",
        kernel_version=kernel_version,
        label=target.label,
        variant=variant,
        repo_id=repo_id,
        source=repo_id,
        revision="0" * 40,
        backend=target.backend,
        backend_version=target.backend_version,
        framework=target.framework,
        framework_version=target.framework_version,
        os=target.os,
        arch=target.arch,
        platform_tag=target.platform,
        archs=tuple(archs),
        license=license,
        upstream=upstream,
        import_name=canonicalize_name(name).replace("-", "_"),
    )


def add_kernel(
    store: Path,
    name: str,
    kernel_version: str,
    variant: str,
    *,
    tag: str | None = None,
    work: Path | None = None,
    **fields: object,
) -> Record:
    """Make a wheel of ``name`` ``kernel_version`` for ``variant`` and put it, its metadata and record in ``store``."""
    target = parse(variant)
    version = target.local_version(kernel_version)
    tag = tag or f"py3-none-{target.platform}"  # pure Python, but tagged for the variant's platform
    summary = str(fields.pop("summary", f"{name} compute kernel"))
    wheel, meta = make_wheel(work or store / "files", name, version, tag, summary=summary)
    record = kernel_record(wheel, meta, name, kernel_version, variant, summary=summary, **fields)  # type: ignore[arg-type]
    LocalStore(store).put(wheel, meta, record)
    return record


def write_records(store: Path, records: Sequence[Record]) -> None:
    """Put ``records`` in a store folder as they are, each with an empty stand-in for its wheel; renamed into
    place, as every writer of a store does."""
    files = store / "files"
    files.mkdir(parents=True, exist_ok=True)
    for r in records:
        write_bytes(files / r.filename, b"")
        write_bytes(files / f"{r.filename}.json", r.to_json())


def records_only(store: Path, to: Path) -> None:
    """``to``: a store holding copies of ``store``'s wheels, .metadata and records, without the catalog, the
    pages or the state file: an index run there reads every record."""
    shutil.rmtree(to, ignore_errors=True)
    shutil.copytree(store / "files", to / "files", ignore=shutil.ignore_patterns(".*"))


def index_pages(store: Path) -> dict[str, bytes]:
    """Every page of the index in ``store`` (the store's files and dot files left out, files/ not walked):
    path -> bytes."""
    tops = [p for p in store.iterdir() if p.name != "files"] if store.is_dir() else []
    found = (q for top in tops for q in ([top] if top.is_file() else top.rglob("*")))
    return {p.relative_to(store).as_posix(): p.read_bytes()
            for p in sorted(found) if p.is_file() and not p.name.startswith(".")}  # fmt: skip


def adopt(
    store_root: Path, folder: Path, kernels: Collection[str] = (), listing: Collection[str] | None = None,
    known: dict[str, dict[str, Any]] | None = None,
) -> AdoptResult:  # fmt: skip
    """Adopt every visible ``*.whl`` of ``folder`` that ``listing`` (wheel names with a record in the store; default:
    listed now) lacks, as ``index --wheels`` does (index/command.py), without the index run around it."""
    if listing is None:
        files = store_root / "files"
        entries = set(os.listdir(files)) if files.is_dir() else set()
        listing = {n for n in entries if n.endswith(".whl") and f"{n}.json" in entries}
    with os.scandir(folder) as it:
        names = sorted(e.name for e in it if e.name.endswith(".whl") and not e.name.startswith(".") and e.is_file())
    todo = [folder / n for n in names if n not in listing]
    result = adopt_wheels(store_root, todo, kernels, known) if todo else AdoptResult()
    result.present = [n for n in names if n in listing]
    return result
