"""Withdrawals at a destination: what kernel-factory put there and the local root no longer holds is deleted, after
every file is put, pages first, and only where still kernel-factory's file (docs/withdraw.md, "publish carries
withdrawals"); the list of what each destination was given is kept in the root, written before and after."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .. import report
from ..nofollow import LinkRefused, open_nofollow, write_bytes
from ..safe_text import has_control
from .base import LocalFile

MANIFESTS = ".kernel-factory-published"
MAX_MANIFEST = 256 << 20


def manifest_path(root: Path, display: str) -> Path:
    """Where ``root`` keeps what it put at ``display`` (one file per destination, named by its address's hash)."""
    where = str(Path(display).resolve()) if "://" not in display else display
    return Path(root) / MANIFESTS / f"{hashlib.sha256(where.encode()).hexdigest()[:24]}.json"


def parse_manifest(data: bytes | None) -> dict[str, int]:
    """The list in a manifest's bytes; empty for none, or for one that is damaged (nothing is deleted then)."""
    if data is None or len(data) > MAX_MANIFEST:
        return {}
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError):
        return {}
    files = raw.get("files") if type(raw) is dict and raw.get("schema") == 1 else None
    if type(files) is not dict:
        return {}
    return {rel: size for rel, size in files.items() if _plain_rel(rel) and type(size) is int and size >= 0}


def _plain_rel(rel: object) -> bool:
    if type(rel) is not str or not rel or rel.startswith("/") or "\\" in rel or has_control(rel):
        return False
    return all(part not in ("", ".", "..") for part in rel.split("/")) and not rel.split("/")[-1].startswith(".")


def manifest_bytes(files: dict[str, int], destination: str = "") -> bytes:
    doc = {"schema": 1, "destination": destination, "files": dict(sorted(files.items()))}
    return (json.dumps(doc, separators=(",", ":")) + "\n").encode()


def _order(rel: str) -> tuple[int, int, str]:
    """Pages (deepest first, the root's last), then records and other files/, then .metadata, then wheels."""
    if not rel.startswith("files/"):
        return (0, -rel.count("/"), rel)
    return (3 if rel.endswith(".whl") else 2 if rel.endswith(".whl.metadata") else 1, 0, rel)


def carry(root: Path, dest: Any, files: Sequence[LocalFile], published: set[str], *, dry_run: bool,
          out: Callable[[str], None]) -> list[str]:
    """Delete at ``dest`` what ``root`` put there and no longer holds; those paths. ``published``: those there now.
    ``dest.remove(rel, size)`` (directory.py, s3.py) deletes ``rel`` only if it is still the file of ``size`` that
    kernel-factory put there, saying whether it did; an upload endpoint has none."""
    display: str = dest.display
    path = manifest_path(root, display)
    try:
        with open(open_nofollow(path, "list of published files"), "rb") as f:
            old = parse_manifest(f.read(MAX_MANIFEST + 1))
    except (FileNotFoundError, NotADirectoryError, LinkRefused):
        old = {}
    now = {f.rel: f.size for f in files if f.rel in published}
    held = {f.rel for f in files}
    stale = sorted((rel for rel in old if rel not in held), key=_order)
    remove = getattr(dest, "remove", None)
    if remove is None:  # an upload endpoint: the upload API cannot delete
        if stale:
            names = ", ".join(rel.rsplit("/", 1)[-1] for rel in stale[:10]) + (", ..." if len(stale) > 10 else "")
            report.warn(f"{len(stale)} file(s) this store withdrew are still at {display}, and the upload API "
                        f"cannot delete: remove them on the server (docs/withdraw.md, \"Upload endpoints\"): {names}")
        if not dry_run and now != old:
            _save(path, manifest_bytes(now, display))  # each withdrawn file is named once
        return []
    if dry_run:
        for rel in stale:
            out(f"would remove {rel} (withdrawn from the store)")
        return stale
    if not _save(path, manifest_bytes({**old, **now}, display)):  # a kill from here on: the next one deletes
        return []
    removed = []
    for rel in stale:  # one that changed since (not kernel-factory's file any more) or is gone is left alone
        if remove(rel, old[rel]):
            removed.append(rel)
            out(f"removed {rel}")
    if stale or now != old:
        _save(path, manifest_bytes(now, display))
    return removed


def _save(path: Path, data: bytes) -> bool:
    """Write the list; a root that cannot be written (read-only) keeps none: one warning, nothing deleted."""
    try:
        path.parent.mkdir(exist_ok=True)
        write_bytes(path, data)
    except OSError as exc:
        report.warn(f"cannot keep the list of published files in {path.parent} ({exc.strerror}); what the store "
                    "withdraws is not deleted at the destination: publish from a root you can write")
        return False
    return True
