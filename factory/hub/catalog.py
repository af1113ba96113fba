"""The store's records as Hub repositories: revisions (one wheel per variant: of several, the newest record;
withdrawn wheels left out) and the refs docs/hub.md describes ("What it serves"). ``HubState``: what a running Hub
knows, the repositories (read again when they may have changed) and the wheels it checked (each once per file: a
wheel replaced in the store is checked again; one that failed is logged once).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Refused
from ..record import COMMIT_SHA, FILES, Record, version_key
from .wheels import CheckedWheel, check_wheel, stat_key

TAG = re.compile(r"v[0-9]+\.[0-9]+\.[0-9]+")
REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass
class Revision:
    sha: str
    time: str  # ISO 8601 UTC: the commit time
    variants: dict[str, Record] = field(default_factory=dict)


@dataclass
class Repo:
    repo_id: str
    revisions: dict[str, Revision] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)  # name -> sha
    tags: dict[str, str] = field(default_factory=dict)

    def resolve(self, rev: str) -> Revision | None:
        """The revision ``rev`` names (a commit, a branch or tag name, ``refs/heads/...``, ``refs/tags/...``)."""
        sha: str | None = rev if rev in self.revisions else self.branches.get(rev) or self.tags.get(rev)
        for prefix, refs in (("refs/heads/", self.branches), ("refs/tags/", self.tags)):
            if rev.startswith(prefix) and rev not in self.revisions:
                sha = refs.get(rev.removeprefix(prefix))
        return None if sha is None else self.revisions[sha]


def build_catalog(records: Iterable[Record], orgs: frozenset[str]) -> dict[str, Repo]:
    """Repository id -> its revisions and refs, of the kernels of ``orgs``."""
    repos: dict[str, Repo] = {}
    kernels = [r for r in records if r.kind == "kernel" and not r.yanked and r.repo_id and r.revision and r.variant
               and COMMIT_SHA.fullmatch(r.revision) and REPO_ID.fullmatch(r.repo_id) and ".." not in r.repo_id
               and r.repo_id.split("/")[0] in orgs]
    # the newest record last: of several wheels of one variant, and of a branch's revisions, it wins
    kernels.sort(key=lambda r: (r.upload_time, version_key(r.kernel_version), r.filename))
    for r in kernels:
        assert r.repo_id is not None and r.revision is not None and r.variant is not None
        repo = repos.setdefault(r.repo_id, Repo(r.repo_id))
        rev = repo.revisions.setdefault(r.revision, Revision(r.revision, r.upload_time))
        rev.variants[r.variant] = r
        if r.ref and TAG.fullmatch(r.ref):
            repo.tags[r.ref] = r.revision
        major = (r.kernel_version or "").split(".", 1)[0]  # N of N.Y.Z (a tag vN.Y.Z, or N.0.K from branch vN)
        if major.isdigit():  # records in time order: the newest revision of the major version wins
            repo.branches[f"v{int(major)}"] = r.revision
    return repos


LOG = logging.getLogger("kernel_factory.hub")
RELOAD_S = 10.0  #: the store's records are read again at most this often, when a request comes


class HubState:
    def __init__(self, store: Path, allow_orgs: Collection[str], load: Callable[[], list[Record]]) -> None:
        self.files = store / FILES
        self.allow_orgs = frozenset(allow_orgs)
        self._load = load
        self._repos: dict[str, Repo] | None = None
        self._loaded_at = 0.0
        self._lock = threading.Lock()
        self._checked: dict[str, tuple[tuple[int, int, int, int], CheckedWheel | None]] = {}
        self._wheel_locks: dict[str, threading.Lock] = {}

    def repos(self) -> dict[str, Repo]:
        with self._lock:
            now = time.monotonic()
            if self._repos is None or now - self._loaded_at >= RELOAD_S:
                self._repos = build_catalog(self._load(), self.allow_orgs)
                self._loaded_at = now
            return self._repos

    def checked(self, record: Record) -> CheckedWheel | None:
        """The wheel of ``record`` checked, or None where it failed a check (logged once per file)."""
        path = self.files / record.filename
        with self._lock:
            lock = self._wheel_locks.setdefault(record.filename, threading.Lock())
        with lock:  # two requests for one wheel: one check
            try:
                key = stat_key(path.lstat())
            except OSError:
                key = (0, 0, -1, 0)
            known = self._checked.get(record.filename)
            if known is not None and known[0] == key:
                return known[1]
            try:
                result: CheckedWheel | None = check_wheel(path, record.sha256, record.size)
            except Refused as exc:
                LOG.error("not served: %s", exc)
                result = None
            self._checked[record.filename] = (key, result)
            return result
