"""Refs -> kernel versions.

- a tag ``vX.Y.Z`` gives ``X.Y.Z``;
- a major branch ``v<N>`` at a revision gives ``N.0.K``, K the number of
  commits reachable from that revision (the same revision always gets the
  same version, a newer one a higher version);
- a specifier set (``>=1.1.2,<2``) selects every matching tag.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from .errors import UsageError, VersionNotFound
from .sources.base import Refs


@dataclass(frozen=True)
class Request:
    """What the user asked for: kind is "tag", "major", "specifier" or "all"."""

    kind: str
    text: str


@dataclass(frozen=True)
class Selected:
    """One revision to build, with the version its wheels get."""

    sha: str
    ref: str | None  # "v1.1.2", "v1", or None for an explicit revision
    version: str | None  # None: a major branch whose K is not counted yet
    major: int | None = None  # for branch versions: N of v<N>


def parse_request(value: str | int) -> Request:
    """``1.1.2`` -> tag, ``1`` -> major branch, ``>=1,<2`` -> specifier, ``all``."""
    text = str(value).strip()
    if text == "all":
        return Request("all", text)
    if text.isascii() and text.isdigit():  # not "²": str.isdigit accepts digits int() refuses
        return Request("major", str(int(text)))
    if not text:
        raise UsageError("empty version; give 1.1.2 (tag v1.1.2), 1 (branch v1) or a specifier '>=1.1,<2'")
    if text[0] in "<>=!~":
        try:
            SpecifierSet(text)
        except InvalidSpecifier:
            raise UsageError(f"version {text!r} is not a valid specifier set; write e.g. '>=1.1.2,<2'") from None
        return Request("specifier", text)
    try:
        version = Version(text.removeprefix("v"))
    except InvalidVersion:
        raise UsageError(
            f"version {text!r} is not a version; give 1.1.2 (tag v1.1.2), 1 (branch v1) or a specifier '>=1.1,<2'"
        ) from None
    return Request("tag", str(version))


def tag_versions(refs: Refs) -> dict[Version, str]:
    """``vX.Y.Z`` tags -> version -> tag name; tags that are not PEP 440 versions are left out."""
    found: dict[Version, str] = {}
    for tag in refs.tags:
        if not tag.startswith("v"):
            continue  # not parsed at all
        try:
            version = Version(tag[1:])
        except InvalidVersion:
            continue
        if version.local is None:
            found.setdefault(version, tag)
    return found


def tag_at(refs: Refs, sha: str) -> tuple[str, str] | None:
    """The release tag at ``sha`` as (version, tag name), the highest where several are; None when untagged.

    The one-version rule: a revision that carries a ``vX.Y.Z`` tag gets that version however it was asked for
    (a ``v<N>`` branch whose head it is, ``--revision``, a lock's commit), so it never gets a second one."""
    tagged = [(v, t) for v, t in tag_versions(refs).items() if refs.tags[t] == sha]
    if not tagged:
        return None
    version, tag = max(tagged)
    return str(version), tag


def major_branches(refs: Refs) -> dict[int, str]:
    """``v<N>`` branches -> N -> branch name."""
    return {int(b[1:]): b for b in refs.branches if b.startswith("v") and b[1:].isascii() and b[1:].isdigit()}


def select(refs: Refs, request: Request, where: str) -> list[Selected]:
    """The revisions a request names, newest version last; VersionNotFound lists what exists."""
    tags = tag_versions(refs)
    majors = major_branches(refs)
    chosen: list[Selected] = []
    if request.kind in ("tag", "specifier", "all"):
        if request.kind == "tag":
            wanted = [v for v in tags if v == Version(request.text)]
        elif request.kind == "specifier":
            wanted = list(SpecifierSet(request.text).filter(tags))
        else:
            wanted = list(tags)
        chosen += [Selected(refs.tags[tags[v]], tags[v], str(v)) for v in sorted(wanted)]
    if request.kind in ("major", "all"):
        wanted_majors = sorted(majors) if request.kind == "all" else [n for n in majors if n == int(request.text)]
        chosen += [Selected(refs.branches[majors[n]], majors[n], None, n) for n in wanted_majors]
    if not chosen:
        asked = {"tag": f"tag v{request.text}", "major": f"branch v{request.text}"}.get(
            request.kind, f"versions matching {request.text!r}"
        )
        have_tags = ", ".join(f"v{v}" for v in sorted(tags)) or "none"
        have_majors = ", ".join(f"v{n}" for n in sorted(majors)) or "none"
        raise VersionNotFound(f"{where}: no {asked}; tags: {have_tags}; branches: {have_majors}")
    return chosen


def branch_version(major: int, count: int) -> str:
    return f"{major}.0.{count}"


def fill_versions(selected: Iterable[Selected], count: Callable[[str], int]) -> list[Selected]:
    """Give branch selections their ``N.0.K`` version, counting commits only where needed."""
    out = []
    for s in selected:
        if s.version is None:
            assert s.major is not None
            s = Selected(s.sha, s.ref, branch_version(s.major, count(s.sha)), s.major)
        out.append(s)
    return out
