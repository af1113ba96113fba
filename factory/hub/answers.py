"""One request's answer, from the path alone (no sockets): the seven requests of the Hub's API kernels makes, as
docs/hub.md's table lists them; everything else is 404. Each path segment is percent-decoded on its own, as
huggingface_hub quotes a revision (``refs%2Fheads%2Fv1``) and a tree path.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

from ..errors import Refused
from .catalog import LOG, HubState, Repo, Revision
from .wheels import MemberStream, lfs_pointer

JSON = "application/json; charset=utf-8"
CHECKERS = 4  #: wheels of one revision checked at once (its first listing waits for them)


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    stream: MemberStream | None = None  # a file's bytes, sent after the headers (GET only)


def _json(status: int, doc: object, *extra: tuple[str, str]) -> Answer:
    return Answer(status, [("Content-Type", JSON), *extra], json.dumps(doc, separators=(",", ":")).encode())


def not_found(code: str, message: str) -> Answer:
    """A 404 as the Hub sends it: huggingface_hub raises RepositoryNotFoundError, RevisionNotFoundError or
    EntryNotFoundError from ``X-Error-Code``."""
    return _json(404, {"error": message}, ("X-Error-Code", code), ("X-Error-Message", message))


NOWHERE = _json(404, {"error": "Not Found"})
NO_REPO = not_found("RepoNotFound", "Repository not found")


def answer(state: HubState, method: str, raw_path: str, query: str = "") -> Answer:
    if method not in ("GET", "HEAD"):
        return _json(405, {"error": "this Hub is read-only"}, ("Allow", "GET, HEAD"))
    segments = raw_path.split("/")
    if segments[0] != "" or len(segments) < 3:
        return NOWHERE
    parts = [unquote(s) for s in segments[1:]]
    if any("/" in p or "\0" in p for p in parts[:3]):
        return NOWHERE
    if parts[:2] == ["api", "organizations"] and len(parts) == 4 and parts[3] == "overview":
        org = parts[2]
        if org not in state.allow_orgs:
            return not_found("OrganizationNotFound", f"organization {org!r} is not served by this mirror")
        return _json(200, {"name": org, "fullname": org, "type": "org", "trustedKernelPublisher": True})
    if parts[:2] == ["api", "kernels"] and len(parts) >= 5:
        repo = state.repos().get(f"{parts[2]}/{parts[3]}")
        return NO_REPO if repo is None else _api(repo, parts[4], parts[5:], parse_qs(query), state)
    if parts[0] == "kernels" and len(parts) >= 6 and parts[3] == "resolve":
        repo = state.repos().get(f"{parts[1]}/{parts[2]}")
        return NO_REPO if repo is None else _resolve(state, repo, parts[4], "/".join(parts[5:]), method)
    return NOWHERE


def _api(repo: Repo, what: str, rest: list[str], query: dict[str, list[str]], state: HubState) -> Answer:
    if what == "refs" and not rest:
        return _json(200, {"branches": _refs("heads", repo.branches), "tags": _refs("tags", repo.tags),
                           "converts": []})
    if what not in ("revision", "tree") or not rest:
        return NOWHERE
    rev = repo.resolve(rest[0])
    if rev is None:
        return not_found("RevisionNotFound", f"Invalid rev id: {rest[0]}")
    if what == "revision":
        if len(rest) != 1:
            return NOWHERE
        return _json(200, {"id": repo.repo_id, "author": repo.repo_id.split("/")[0], "sha": rev.sha,
                           "lastModified": rev.time.replace("Z", ".000Z"), "private": False, "gated": False})
    recursive = (query.get("recursive") or ["false"])[-1].lower() in ("true", "1")
    entries = tree(state, rev)
    path = "/".join(rest[1:]).strip("/")
    if path and not any(e["path"] == path and e["type"] == "directory" for e in entries):
        return not_found("EntryNotFound", f"{path} does not exist on {rest[0]}")
    prefix = f"{path}/" if path else ""
    depth = prefix.count("/")
    listed = [e for e in entries if e["path"].startswith(prefix) and (recursive or e["path"].count("/") == depth)]
    return _json(200, listed)


def _refs(kind: str, refs: dict[str, str]) -> list[dict[str, str]]:
    return [{"name": n, "ref": f"refs/{kind}/{n}", "targetCommit": sha} for n, sha in sorted(refs.items())]


def tree(state: HubState, rev: Revision) -> list[dict[str, Any]]:
    """Every folder and file of the revision as the Hub's tree API lists them (folders before their files): each
    variant's wheel that passed its checks, its files under ``build/<variant>/``."""
    variants = sorted(rev.variants.items())
    with ThreadPoolExecutor(min(CHECKERS, len(variants) or 1)) as pool:  # hashing and inflating release the GIL
        results = list(pool.map(state.checked, [record for _variant, record in variants]))
    files = {f"build/{variant}/{rel}": f for (variant, _record), checked in zip(variants, results, strict=True)
             if checked is not None for rel, f in checked.files.items()}
    folders: dict[str, list[str]] = {}
    for path, f in files.items():
        parts = path.split("/")
        for i in range(1, len(parts)):
            folders.setdefault("/".join(parts[:i]), []).append(f"{path}:{f.oid}")
    entries: list[dict[str, Any]] = []
    for folder in sorted(folders):
        oid = hashlib.sha1("\n".join([folder, *sorted(folders[folder])]).encode(), usedforsecurity=False).hexdigest()
        entries.append({"type": "directory", "oid": oid, "size": 0, "path": folder})
    for path, f in sorted(files.items()):
        entry: dict[str, Any] = {"type": "file", "oid": f.oid, "size": f.size, "path": path}
        if f.lfs:
            entry["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": len(lfs_pointer(f.sha256, f.size))}
        entries.append(entry)
    return entries


def _resolve(state: HubState, repo: Repo, rev_name: str, path: str, method: str) -> Answer:
    rev = repo.resolve(rev_name)
    if rev is None:
        return not_found("RevisionNotFound", f"Invalid rev id: {rev_name}")
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "build" or parts[1] not in rev.variants:
        return not_found("EntryNotFound", f"{path} does not exist on {rev_name}")
    checked = state.checked(rev.variants[parts[1]])
    if checked is None:
        return _failed(parts[1])
    f = checked.files.get("/".join(parts[2:]))
    if f is None:
        return not_found("EntryNotFound", f"{path} does not exist on {rev_name}")
    # the ETag names the blob as the Hub's resolve answer does: an LFS file's sha256, else the git blob id
    headers = [("Content-Type", "application/octet-stream"), ("Content-Length", str(f.size)),
               ("X-Repo-Commit", rev.sha), ("ETag", f'"{f.sha256 if f.lfs else f.oid}"')]
    if f.lfs:
        headers += [("X-Linked-Etag", f'"{f.sha256}"'), ("X-Linked-Size", str(f.size))]
    if method == "HEAD":
        return Answer(200, headers)
    try:
        stream = MemberStream(checked, f)
    except (Refused, OSError) as exc:
        LOG.error("not served: %s: %s", checked.path.name, exc)
        return _failed(parts[1])
    return Answer(200, headers, stream=stream)


def _failed(variant: str) -> Answer:
    return _json(502, {"error": f"the wheel of build/{variant} failed its checks; see the server's log"},
                 ("X-Error-Message", "the mirror's wheel failed its checks"))
