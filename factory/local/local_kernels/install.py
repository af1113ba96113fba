"""``local-kernels --cache``: installed kernel wheels placed in the Hub cache (``cache.Writer``: a checked copy of
each installed variant root, which is the build variant folder byte for byte, content-addressed, at the commit its
provenance names), with the refs that name that commit.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from ...errors import EXIT_OK, EXIT_REFUSED, Refused, worst
from ...nofollow import LinkRefused
from .. import cache
from .installed import InstalledKernel


def refs_of(k: InstalledKernel) -> list[str]:
    """The refs that name this wheel's commit: ``v<N>`` (metadata.json's version) and the ref it was built from."""
    refs = []
    version = k.metadata.get("version")
    if isinstance(version, int) and not isinstance(version, bool):
        refs.append(f"v{version}")
    if k.ref and cache.valid_ref(k.ref) and k.ref not in refs:
        refs.append(k.ref)
    return refs


def why_not_cacheable(k: InstalledKernel) -> str | None:
    """Why this wheel cannot go in the Hub cache (only LOCAL_KERNELS can serve it), or None."""
    if k.repo_id is None:
        return "its provenance names no Hub repository (built without --repo-id)"
    if k.revision is None or not cache.SHA.fullmatch(k.revision):
        return f"it was built from {k.revision or 'an unknown revision'}, not a Hub commit"
    if k.variant is None:
        return "its provenance names no build variant"
    return None


def install(root: Path, kernels: list[InstalledKernel],
            allow_orgs: Collection[str]) -> tuple[list[str], list[str], int]:
    """Place every cacheable kernel of an allowed organisation in ``root``, checked against its RECORD; (one line
    per kernel placed, notes and refusals, the worst exit code of the kernels left out: 3, or 4 where a link was
    planted in the cache). A full or unusable cache raises Unreachable (the kernels placed before it stay: each
    kernel is placed whole or not at all); a link planted below one repository's folder leaves that kernel out
    (LinkRefused, one note) and the others are placed."""
    done: list[str] = []
    notes: list[str] = []
    codes = [EXIT_OK]
    writer = cache.Writer(root, "local-kernels", notes)
    for k in kernels:
        why = why_not_cacheable(k)
        if why is None and k.repo_id and k.repo_id.split("/")[0] not in allow_orgs:
            org = k.repo_id.split("/")[0]
            why = f"the organisation {org} is not allowed in the Hub cache (add --allow-org {org} if you trust it)"
        if why is None and k.files_problem:
            why = k.files_problem
        if why:
            notes.append(f"not in the Hub cache: {k.title}: {why}; only LOCAL_KERNELS serves it")
            codes.append(EXIT_REFUSED)
            continue
        assert k.repo_id and k.revision and k.variant
        try:
            where = writer.place(cache.Placement(k.repo_id, k.revision, k.variant, k.folder, dict(k.files),
                                                 tuple(refs_of(k))))
        except (Refused, LinkRefused) as exc:
            notes.append(f"not in the Hub cache: {exc}")
            codes.append(exc.exit_code)
            continue
        done.append(f"{k.key}: {where} ({len(k.files)} files checked against {k.dist}'s RECORD)")
    return done, notes, worst(codes)
