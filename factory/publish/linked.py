"""Before the pages go up: every file a page links is published with them, is at the destination, or is
copied from the store named in the root's ``.index-store`` (an S3 store's index root holds pages only; issue 27
item 9, docs/publish.md)."""

from __future__ import annotations

import json
import posixpath
import urllib.parse
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path

from ..errors import Refused
from .base import LocalFile

STORE_FILE = ".index-store"  # in an index root whose store is elsewhere: {"store": "s3://bucket/prefix"}


def linked(root: Path, files: Sequence[LocalFile]) -> set[str]:
    """The paths (relative to ``root``) of the files the project pages link, wheels and ``.metadata``."""
    found: set[str] = set()
    for f in files:
        parts = f.rel.split("/")
        if len(parts) != 3 or parts[0] != "simple" or parts[2] != "index.json":
            continue
        try:
            data = json.loads(f.path.read_bytes())
        except (OSError, ValueError):
            continue
        for entry in data.get("files", []) if isinstance(data, dict) else []:
            url = entry.get("url") if isinstance(entry, dict) else None
            if not isinstance(url, str) or urllib.parse.urlsplit(url).scheme:
                continue
            rel = posixpath.normpath(posixpath.join(posixpath.dirname(f.rel), urllib.parse.unquote(url.split("#")[0])))
            if rel.startswith("../") or rel == "..":
                continue
            found.add(rel)
            if entry.get("core-metadata"):
                found.add(f"{rel}.metadata")
    return found


def fetch(root: Path, rels: list[str], scratch: Path | None, out: Callable[[str], None]) -> list[LocalFile]:
    """Download ``rels`` from the store named in ``root`` into ``scratch`` (None: a dry run, nothing downloaded);
    Refused where there is none."""
    try:
        data = json.loads((root / STORE_FILE).read_bytes())
    except (OSError, ValueError):
        data = None
    store = data.get("store") if isinstance(data, dict) else None
    if not isinstance(store, str) or not store.startswith("s3://"):
        raise Refused(f"the pages under {root} link {len(rels)} file(s) that are neither there nor at the "
                      f"destination (first: {rels[0]}); publish the store's own folder (or index into this one "
                      "again so that it names its store); no page was published")  # fmt: skip
    if scratch is None:
        for rel in rels:
            out(f"would copy {rel} from {store}")
        return []
    from ..s3util import Bucket

    got: list[LocalFile] = []
    with closing(Bucket(store, flag="--store")) as bucket:
        for rel in rels:
            path = scratch / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                if not bucket.download(bucket.key(rel), f):
                    raise Refused(f"{store}/{rel}: a page links it, and it is not in the store either; run "
                                  "`kernel-factory index` on the store, then publish again")
            got.append(LocalFile(rel, path, path.stat().st_size))
    for rel in rels:
        out(f"copying {rel} from {store}")
    return got
