"""``download``'s kernel dependencies: ``kernel-depends`` resolved as kernels 0.19 resolves them, from the same index
(docs/download.md, "Kernel dependencies"). Every repository ``download`` places passes ``Policy``.
"""

from __future__ import annotations

import graphlib
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import Refused
from ...record import COMMIT_SHA
from ...safe_text import printable
from ...verify.lockfile import LockedKernel
from .. import cache

MAX_DEPENDS = 32  #: kernels one download may pull in through kernel-depends, beyond those kernels.lock names
_MAJOR = re.compile(r"v(0|[1-9][0-9]{0,5})")


@dataclass(frozen=True)
class Want:
    """One kernel to put in the cache: at a locked commit, or (an unlocked dependency) the newest of a major."""

    repo_id: str
    sha: str | None
    refs: tuple[str, ...] = ()
    major: int | None = None
    why: str = "kernels.lock"
    hashes: tuple[tuple[str, str], ...] = ()  # an old-format lock's (variant, "sha256-<hex>") git_lfs_concat hashes

    @property
    def key(self) -> tuple[str, str]:
        """(repository, commit or ``v<major>``): one kernel at one version, as kernels keys a dependency."""
        return self.repo_id, self.sha or f"v{self.major}"


def lock_want(lk: LockedKernel, why: str = "kernels.lock") -> Want:
    return Want(lk.repo_id, lk.sha, (lk.ref,) if lk.ref else (), None, why, tuple(sorted(lk.hashes.items())))


def org_of(repo_id: str) -> str:
    return repo_id.split("/", 1)[0]


@dataclass(frozen=True)
class Policy:
    """Which repositories ``download`` may place: ``allow_orgs`` and the cap on dependencies."""

    allow_orgs: frozenset[str]
    max_depends: int = MAX_DEPENDS

    @classmethod
    def make(cls, given: Iterable[str] | None, default: Iterable[str], locked: Iterable[str],
             max_depends: int = MAX_DEPENDS) -> Policy:
        """``given`` (--allow-org and KERNEL_FACTORY_ALLOW_ORGS; None: neither was given) and ``default``; without
        a given list, the organisations of the ``locked`` repositories too (the lock names them)."""
        orgs = set(default) | (set(given) if given is not None else {org_of(r) for r in locked})
        return cls(frozenset(orgs), max_depends)

    def refusal(self, want: Want) -> str | None:
        org = org_of(want.repo_id)
        if org in self.allow_orgs:
            return None
        return (f"{want.repo_id} ({want.why}): the organisation {org} is not allowed into the Hub cache; add "
                f"--allow-org {org} (or KERNEL_FACTORY_ALLOW_ORGS) if you trust it")

    def too_many(self, pulled: Collection[tuple[str, str]]) -> str | None:
        if len(pulled) <= self.max_depends:
            return None
        names = sorted({repo for repo, _ in pulled})
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        return (f"kernel-depends pull in more than {self.max_depends} kernels beyond kernels.lock ({shown}); "
                "raise --max-depends if you trust them all")


def wants_of(wheel: str, repo_id: str, depends: Iterable[Mapping[str, Any]], locked: Mapping[str, LockedKernel]
             ) -> list[Want]:
    """The kernels one wheel's ``kernel-depends`` need in the cache for kernels 0.19 to load it offline: a locked
    repository at its locked commit (with its ``v<N>`` ref; and also at a commit the entry names, when it is
    another), else the newest build of ``version`` N (``refs/v<N>``), or the commit a ``revision`` names (a
    ``v<N>`` branch: as version N). Refused: a bad repository id, a revision an index cannot resolve."""
    why = f"kernel-depends of {repo_id}"
    out: list[Want] = []
    for dep in depends:
        dep_id = dep.get("repo-id")
        if not isinstance(dep_id, str) or dep_id.count("/") != 1 or not all(map(cache.valid_ref, dep_id.split("/"))):
            raise Refused(f"{wheel}: its kernel-depends names '{printable(str(dep_id), 200)}', which is not an "
                          "org/name repository id; rebuild it")
        version, revision = dep.get("version"), dep.get("revision")
        if isinstance(revision, str) and _MAJOR.fullmatch(revision):
            version, revision = int(revision[1:]), None
        if dep_id in locked:
            out.append(lock_want(locked[dep_id], why))
        if isinstance(version, int) and not isinstance(version, bool) and version >= 0 and revision is None:
            if dep_id not in locked:
                out.append(Want(dep_id, None, (f"v{version}",), version, why))
        elif isinstance(revision, str) and COMMIT_SHA.fullmatch(revision) and version is None:
            if dep_id not in locked or locked[dep_id].sha != revision:
                out.append(Want(dep_id, revision, (), None, why))
        else:
            what = f"revision '{printable(str(revision), 80)}'" if revision is not None else "no version"
            raise Refused(f"{wheel}: its kernel-depends names {dep_id} at {what}; an index resolves only a version "
                          "number, a v<N> branch or a 40-hex commit: rebuild it")
    return out


def find_cycle(edges: Mapping[tuple[str, str], list[tuple[str, str]]]) -> list[tuple[str, str]] | None:
    """A cycle in the dependency graph (its nodes, the first repeated at the end), or None: graphlib's own search
    (iterative, depth first from each node in ``edges``' order), each node added before its dependencies."""
    order: graphlib.TopologicalSorter[tuple[str, str]] = graphlib.TopologicalSorter()
    for node, deps in edges.items():
        order.add(node)
        for dep in deps:
            order.add(dep, node)  # node first: graphlib walks from a node to what depends on it
    try:
        order.prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None
