"""Withdrawals at a destination: what kernel-factory put there and the local root no longer holds is deleted.

A folder or S3 destination keeps, at ``.kernel-factory-published.json`` beside the pages, the files a publish
put there (path -> size). After a publish has put every file (wheels before pages), the files of that list
that the root does not hold any more (a prune removed them; a page the index dropped) are deleted: pages
first, then records, then ``.metadata``, then wheels, so that no page links a file that is gone. A file is
deleted only when it is still the one kernel-factory put there (its size; on S3 also the sha256 that
kernel-factory writes into every object's metadata); anything else at the destination is left alone.

The list is written twice: before the deletions (the old list and this publish's files), then without the
deleted ones, so a publish that is killed at any point leaves a list that the next publish finishes from.
An upload endpoint cannot delete (the upload API has no delete): docs/withdraw.md says what to do there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from .base import LocalFile

MANIFEST = ".kernel-factory-published.json"
MAX_MANIFEST = 256 << 20


@runtime_checkable
class Withdraws(Protocol):
    """A destination that can delete what it was given (directory.py, s3.py)."""

    def read_manifest(self) -> bytes | None: ...

    def write_manifest(self, data: bytes) -> None: ...

    def remove(self, rel: str, size: int) -> bool:
        """Delete ``rel`` if it is still the file of ``size`` that kernel-factory put there; whether it was."""
        ...


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
    """A relative path under the destination's root: no empty, '.' or '..' part, no backslash or control char."""
    if type(rel) is not str or not rel or rel.startswith("/") or "\\" in rel:
        return False
    if any(ord(c) < 32 or ord(c) == 127 for c in rel):
        return False
    return all(part not in ("", ".", "..") for part in rel.split("/")) and not rel.split("/")[-1].startswith(".")


def manifest_bytes(files: dict[str, int]) -> bytes:
    return (json.dumps({"schema": 1, "files": dict(sorted(files.items()))}, separators=(",", ":")) + "\n").encode()


def _order(rel: str) -> tuple[int, int, str]:
    """Pages (deepest first, the root's last), then records and other files/, then .metadata, then wheels."""
    if not rel.startswith("files/"):
        return (0, -rel.count("/"), rel)
    if rel.endswith(".whl"):
        return (3, 0, rel)
    if rel.endswith(".whl.metadata"):
        return (2, 0, rel)
    return (1, 0, rel)


def carry(dest: object, files: Sequence[LocalFile], published: set[str], *, dry_run: bool,
          out: Callable[[str], None]) -> list[str]:
    """Delete at ``dest`` what earlier publishes put there and the root no longer holds; the paths deleted
    (in a dry run, those that would be). ``published``: the paths of ``files`` that are there now."""
    if not isinstance(dest, Withdraws):
        return []
    old = parse_manifest(dest.read_manifest())
    now = {f.rel: f.size for f in files if f.rel in published}
    stale = sorted((rel for rel in old if rel not in {f.rel for f in files}), key=_order)
    if dry_run:
        for rel in stale:
            out(f"would remove {rel} (withdrawn from the store)")
        return stale
    dest.write_manifest(manifest_bytes({**old, **now}))  # a kill from here on: the next publish deletes them
    removed = []
    for rel in stale:  # one that changed since (not kernel-factory's file any more) or is gone is left alone
        if dest.remove(rel, old[rel]):
            removed.append(rel)
            out(f"removed {rel}")
    if stale or now != old:
        dest.write_manifest(manifest_bytes(now))
    return removed
